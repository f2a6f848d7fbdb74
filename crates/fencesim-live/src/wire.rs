//! The control channel between the harness and a client process: one JSON object per line,
//! the client's records and safepoints on its stdout, the harness's answers on its stdin.

use fencesim_history::Entry;
use fencesim_scenario::{ClientSpec, NodeEvent};
use serde::{Deserialize, Serialize};

/// Where an armed safepoint is: `before` or `after` the client's `nth` (1-based) `event`
/// at or after `count_from_ms` of the trial (0: from its start), as a scenario's event
/// trigger says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Armed {
    /// `true`: after the event; `false`: before it.
    pub after: bool,
    /// The client's event (acquire, renew, release, read, write).
    pub event: NodeEvent,
    /// Which occurrence, from 1.
    pub nth: u64,
    /// The trial time the occurrences are counted from, ms (0: the trial's start).
    #[serde(default)]
    pub count_from_ms: u64,
}

/// The first line the harness writes to a client process: everything it needs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClientConfig {
    /// The client as the scenario resolved it.
    pub client: ClientSpec,
    /// `[lock_service] kind` and its resolved knobs.
    pub lock_kind: String,
    /// The lock service's knobs.
    pub lock_knobs: toml::Table,
    /// `[resource] mode`.
    pub resource_mode: String,
    /// The resource's knobs.
    pub resource_knobs: toml::Table,
    /// Where the servers are.
    pub endpoints: crate::form::Endpoints,
    /// The Jepsen process id it starts with.
    pub process: u64,
    /// Added to its process id after each `info` (the number of clients), so ids stay unique.
    pub process_stride: u64,
    /// The safepoints at which it stops and waits for the harness's `go`.
    pub armed: Vec<Armed>,
    /// Seed of its backoff draws (the trial's number and its index).
    pub rng_seed: u64,
}

/// A line from a client process.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientLine {
    /// A record of the history: an operation, a belief event or an event a lock form observed
    /// (a Redis node's key set, from its reply), stamped at `mono_ns`
    /// (`CLOCK_MONOTONIC`). `seq`: the operation's number within this client, by which the
    /// database's log names it (`<client>#<seq>`), on invokes and their completions.
    Record {
        /// When, `CLOCK_MONOTONIC` ns.
        mono_ns: u64,
        /// The operation's number within the client, for operations.
        seq: Option<u64>,
        /// The record (its stamp is filled in by the harness). Boxed: most lines are records,
        /// but the enum's other lines are small.
        entry: Box<Entry>,
    },
    /// The client reached armed safepoints and waits for `go` on its stdin.
    Safepoint {
        /// When, `CLOCK_MONOTONIC` ns.
        mono_ns: u64,
        /// Every armed safepoint this event completes: two triggers may land on one event
        /// (the third write, and the first write after 500 ms), and their faults start
        /// together, as in the simulation.
        reached: Vec<Armed>,
    },
    /// The client has connected to its servers and waits for the trial's origin (a JSON
    /// `crate::clock::Origin` on its stdin).
    Ready,
    /// The client could not go on (its database connection failed for good, ...).
    Error {
        /// What happened, one line.
        message: String,
    },
}

/// The reference of a client's operation in the database's log.
pub fn op_ref(client: &str, seq: u64) -> String {
    format!("{client}#{seq}")
}
