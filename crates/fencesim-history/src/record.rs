//! The record types of a history.

use serde::{Deserialize, Serialize};

/// A short name in a record: a node, a lock, a resource key, a holder. Kept inline, without an
/// allocation, up to 24 bytes (every name in the bundled scenarios; a longer one, up to the 64
/// characters a scenario allows, goes to the heap): a run records thousands of them, and each
/// was a string allocated on the simulation's thread and freed on the checker's. Reads as a
/// `&str`; serialized as a plain JSON string.
pub type Name = compact_str::CompactString;

/// When a record happened, by every clock that matters.
///
/// A history recorded by a real system may leave out what it did not record: the JSON Lines
/// reader numbers an entry without `index` by its position, gives entries without `time_ns`
/// (all or none of them) their index as their time, and reads a missing local clock as 0, as
/// the Jepsen EDN reader does for every entry. No check reads `mono_ms` or `wall_ms`: the
/// checks judge by true time and history order, and a local clock matters only where a record
/// says so in its own fields (`expires_at_ms`), so a history without local clocks is judged
/// exactly as one with them (a test in the checker's `tests/clocks.rs` holds it to that).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Stamp {
    /// Position in the history (0-based), the order things happened in. A history read from
    /// Jepsen EDN whose operations carry `:index` keeps those instead: increasing, but with
    /// gaps where the file numbered what fencesim does not read (nemesis operations).
    pub index: u64,
    /// True (simulated) time in ns since the simulation started; the index when the history
    /// recorded none.
    pub time_ns: u64,
    /// The recording node's monotonic clock, local ms (0 when not recorded).
    pub mono_ms: i64,
    /// The recording node's wall clock, local ms (0 when not recorded).
    pub wall_ms: i64,
}

/// The first line of a history file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// [`crate::FORMAT_VERSION`] of the writer.
    pub format_version: u32,
    /// The scenario's name (empty when a recording of a real system leaves it out).
    #[serde(default)]
    pub scenario: String,
    /// The root seed of the run (0 when left out).
    #[serde(default)]
    pub seed: u64,
    /// The fencesim version that recorded it (empty when left out).
    #[serde(default)]
    pub tool_version: String,
    /// How the tokens in this history are ordered. Left out of the file when it is
    /// [`TokenOrder::Value`], the default.
    #[serde(default, skip_serializing_if = "TokenOrder::is_value")]
    pub token_order: TokenOrder,
    /// Whether the history has no true time: each record's `time_ns` is its index, as in a
    /// schedule `fencesim verify` found, where time is unknown and only the order is. The
    /// checker then leaves out the properties that compare times (mutual exclusion, a lease
    /// ended early, progress after a heal) and says why. Left out of the file when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untimed: bool,
}

impl Header {
    /// The header of a history recorded without one (a JSON Lines file that starts with an
    /// entry, or Jepsen's EDN): this reader's format, no scenario name, seed 0, no tool
    /// version, tokens ordered by value.
    pub fn unnamed() -> Self {
        Header {
            format_version: crate::FORMAT_VERSION,
            scenario: String::new(),
            seed: 0,
            tool_version: String::new(),
            token_order: TokenOrder::Value,
            untimed: false,
        }
    }
}

/// What the tokens of a history mean, which decides how the checker orders them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TokenOrder {
    /// Tokens are fencing tokens: a higher value is a later lease (Kleppmann 2016, Chubby
    /// sequencers, etcd revisions).
    #[default]
    Value,
    /// Tokens are opaque lock values (Redlock's random values): their order is the order in
    /// which their acquisitions happened in true time, and nothing can be said of their values.
    Acquisition,
}

impl TokenOrder {
    /// Whether this is the default, [`TokenOrder::Value`].
    pub fn is_value(&self) -> bool {
        *self == TokenOrder::Value
    }
}

/// Jepsen's operation types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpType {
    /// The operation started.
    Invoke,
    /// It took effect.
    Ok,
    /// It certainly did not take effect.
    Fail,
    /// Unknown whether it took effect (for example a timeout); the process is retired.
    Info,
}

impl OpType {
    /// The name used in files (`invoke`, `ok`, `fail`, `info`).
    pub fn as_str(self) -> &'static str {
        match self {
            OpType::Invoke => "invoke",
            OpType::Ok => "ok",
            OpType::Fail => "fail",
            OpType::Info => "info",
        }
    }
}

/// The operation a client performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpFn {
    /// Ask the lock service for a lease.
    Acquire,
    /// Keepalive: extend the lease.
    Renew,
    /// Give the lease back.
    Release,
    /// Read the resource.
    Read,
    /// Write the resource with a fencing token.
    Write,
    /// Compare-and-set the resource: set `value` if it holds `expected` (Jepsen's `:cas`,
    /// history format 3).
    Cas,
    /// Delete the resource's key, with a fencing token or (a cleanup path that bypasses the
    /// fence) without one: the register is then as if never written (history format 3).
    Delete,
}

impl OpFn {
    /// The name used in files (`acquire`, `write`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            OpFn::Acquire => "acquire",
            OpFn::Renew => "renew",
            OpFn::Release => "release",
            OpFn::Read => "read",
            OpFn::Write => "write",
            OpFn::Cas => "cas",
            OpFn::Delete => "delete",
        }
    }
}

/// A client operation record (an invocation or a completion).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Op {
    /// When.
    #[serde(flatten)]
    pub at: Stamp,
    /// Jepsen process id; a process that got `info` never invokes again.
    pub process: u64,
    /// The client node's name.
    pub node: Name,
    /// invoke, ok, fail or info.
    #[serde(rename = "type")]
    pub op_type: OpType,
    /// What was done.
    pub f: OpFn,
    /// The lock involved (acquire, renew, release).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<Name>,
    /// The resource key involved (read, write).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<Name>,
    /// The fencing token presented or granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// The value written or read; for a cas, the value it sets. An `ok` read without one saw
    /// the register never written (unless `value_unknown`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// For a cas: the value it expects to find; absent, it expects the register never written
    /// (history format 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// For an `ok` read: what it saw is not known, so it matches any value (Knossos's `ok`
    /// read of `nil`, history format 3). Left out of the file when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub value_unknown: bool,
    /// For an acquire or renew: the TTL it asked for, ms. A real system's client that records
    /// it lets the checker judge mutual exclusion of leases from operations alone (history
    /// format 3); fencesim's own histories judge it from the service's events instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Why it failed or is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The kinds of service and nemesis events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// The lock service granted a lease (with a new token).
    Grant,
    /// The lock service extended a lease.
    Renew,
    /// The lock service ended a lease at its holder's request.
    Release,
    /// The lock service ended a lease because its TTL ran out.
    Expire,
    /// The lock service ended a lease on its own initiative (admin, leader decision).
    Revoke,
    /// The resource applied a write.
    Accept,
    /// The resource refused a write with a stale token.
    Reject,
    /// Nemesis: a node froze (process pause, GC); `phase` start and end.
    Pause,
    /// Nemesis: one message was held in the network; `phase` start (sent) and end (delivered).
    Hold,
    /// Nemesis: the network's latency range changed for a window; `phase` start and end.
    Latency,
    /// A client's own view of its lease: `start` when it begins (or extends) believing it holds
    /// `lock` with `token` until `expires_at_ms` on its monotonic clock, `end` when it stops
    /// (released, told lost, validity elapsed, crashed).
    Belief,
    /// Nemesis: random message loss for a window.
    Loss,
    /// Nemesis: random message duplication for a window.
    Duplicate,
    /// Nemesis: random extra delays (reordering) for a window.
    Reorder,
    /// Nemesis: links cut; `end` when healed.
    Partition,
    /// Nemesis: every partition healed.
    Heal,
    /// Nemesis: a node's wall clock stepped.
    ClockJump,
    /// Nemesis: a node's wall clock set off true time.
    ClockSkew,
    /// Nemesis: a node's clocks run fast or slow.
    ClockDrift,
    /// Nemesis: a node's wall clock flips back and forth.
    ClockStrobe,
    /// Nemesis: a node killed (volatile state and unsynced writes lost).
    Crash,
    /// Nemesis: a crashed node started again.
    Restart,
    /// Nemesis: the lease service brought back from an older backup.
    Restore,
    /// Nemesis: the random nemesis's final heal; a fenced write must be accepted within
    /// `window_ms` after it.
    FinalHeal,
    /// A Raft replica became leader (`detail` gives the term).
    Leader,
    /// Nemesis: a client's keepalive stalled (its renewals are not sent, as a starved renewal
    /// thread's; its work goes on), case K18; `phase` start and end.
    Stall,
    /// Nemesis: a maintenance job (a dead-node reaper) deregistered a client, case K16.
    Deregister,
    /// A node of a quorum lock (a Redis node of Redlock) set the lock's key for `holder`: its
    /// value `token`, for `ttl_ms` (Redis's PX), until `expires_at_ms` of the node's expiry
    /// clock; the lock is spread over `nodes` such nodes, and whoever holds live keys on a
    /// majority of them holds it (antirez's Redlock). A node's key events are records only:
    /// what the clients see is their replies.
    KeySet,
    /// A quorum lock's node extended its key for `holder` (value `token`) by `ttl_ms`.
    KeyExtend,
    /// A quorum lock's node deleted its key at its holder's request (the value matched).
    KeyDelete,
    /// A quorum lock's node found its key (value `token`) expired by its own expiry clock and
    /// dropped it (Redis expires keys lazily: when next touched).
    KeyExpire,
    /// A quorum lock's node refused `holder`'s SET NX, extend or delete: another holder's key
    /// was live, or the value did not match (`detail` says which).
    KeyRefuse,
}

impl EventKind {
    /// Every kind, in declaration order.
    pub const ALL: [EventKind; 32] = [
        EventKind::Grant,
        EventKind::Renew,
        EventKind::Release,
        EventKind::Expire,
        EventKind::Revoke,
        EventKind::Accept,
        EventKind::Reject,
        EventKind::Pause,
        EventKind::Hold,
        EventKind::Latency,
        EventKind::Belief,
        EventKind::Loss,
        EventKind::Duplicate,
        EventKind::Reorder,
        EventKind::Partition,
        EventKind::Heal,
        EventKind::ClockJump,
        EventKind::ClockSkew,
        EventKind::ClockDrift,
        EventKind::ClockStrobe,
        EventKind::Crash,
        EventKind::Restart,
        EventKind::Restore,
        EventKind::FinalHeal,
        EventKind::Leader,
        EventKind::Stall,
        EventKind::Deregister,
        EventKind::KeySet,
        EventKind::KeyExtend,
        EventKind::KeyDelete,
        EventKind::KeyExpire,
        EventKind::KeyRefuse,
    ];

    /// The name used in files (`grant`, `accept`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::Grant => "grant",
            EventKind::Renew => "renew",
            EventKind::Release => "release",
            EventKind::Expire => "expire",
            EventKind::Revoke => "revoke",
            EventKind::Accept => "accept",
            EventKind::Reject => "reject",
            EventKind::Pause => "pause",
            EventKind::Hold => "hold",
            EventKind::Latency => "latency",
            EventKind::Belief => "belief",
            EventKind::Loss => "loss",
            EventKind::Duplicate => "duplicate",
            EventKind::Reorder => "reorder",
            EventKind::Partition => "partition",
            EventKind::Heal => "heal",
            EventKind::ClockJump => "clock-jump",
            EventKind::ClockSkew => "clock-skew",
            EventKind::ClockDrift => "clock-drift",
            EventKind::ClockStrobe => "clock-strobe",
            EventKind::Crash => "crash",
            EventKind::Restart => "restart",
            EventKind::Restore => "restore",
            EventKind::FinalHeal => "final-heal",
            EventKind::Leader => "leader",
            EventKind::Stall => "stall",
            EventKind::Deregister => "deregister",
            EventKind::KeySet => "key-set",
            EventKind::KeyExtend => "key-extend",
            EventKind::KeyDelete => "key-delete",
            EventKind::KeyExpire => "key-expire",
            EventKind::KeyRefuse => "key-refuse",
        }
    }

    /// Whether this kind starts or ends a lease (grant, expire, release, revoke).
    pub fn is_lease_change(self) -> bool {
        matches!(
            self,
            EventKind::Grant | EventKind::Expire | EventKind::Release | EventKind::Revoke
        )
    }

    /// Whether the nemesis (not a service or client) records this kind.
    pub fn is_nemesis(self) -> bool {
        !matches!(
            self,
            EventKind::Grant
                | EventKind::Renew
                | EventKind::Release
                | EventKind::Expire
                | EventKind::Revoke
                | EventKind::Accept
                | EventKind::Reject
                | EventKind::Belief
                | EventKind::Leader
        ) && !self.is_key()
    }

    /// Whether a quorum lock's node records this kind (`key-set` .. `key-refuse`).
    pub fn is_key(self) -> bool {
        matches!(
            self,
            EventKind::KeySet
                | EventKind::KeyExtend
                | EventKind::KeyDelete
                | EventKind::KeyExpire
                | EventKind::KeyRefuse
        )
    }
}

/// Start or end of a nemesis action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The fault began.
    Start,
    /// The fault ended.
    End,
}

/// A service or nemesis event record.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Event {
    /// When (clocks of the recording node).
    #[serde(flatten)]
    pub at: Stamp,
    /// The node that decided (for the nemesis: `nemesis`).
    pub node: Name,
    /// What happened.
    pub event: EventKind,
    /// Start or end, for nemesis events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// The lock involved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<Name>,
    /// The resource key involved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<Name>,
    /// The lease holder (grant, renew, release, expire) or the writer (accept, reject).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<Name>,
    /// The fencing token granted, renewed, presented...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// The resource's highest accepted token after an accept, or the one that caused a reject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highest: Option<u64>,
    /// Local-clock ms at which the lease expires (grant, renew).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<i64>,
    /// The index of the invoke this event answers, where there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<u64>,
    /// The node a nemesis action targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Name>,
    /// Free-form detail of a nemesis action (for example the held message's kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// For `final-heal`: the window after it in which a fenced write must be accepted, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_ms: Option<u64>,
    /// For `key-set` and `key-extend`: the key's time to live, ms (Redis's PX), which the
    /// holder counts on in true time. For `grant` and `renew`: the TTL the service promised
    /// the holder from this record on, ms, which its `expire` is held to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// For `key-set`: how many nodes the quorum lock's keys are spread over (a majority holds
    /// the lock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u32>,
}

impl Event {
    /// An event of `kind` with every optional field empty, to fill with struct-update syntax.
    pub fn new(kind: EventKind) -> Self {
        Event {
            at: Stamp::default(),
            node: Name::default(),
            event: kind,
            phase: None,
            lock: None,
            key: None,
            holder: None,
            token: None,
            highest: None,
            expires_at_ms: None,
            op: None,
            target: None,
            detail: None,
            window_ms: None,
            ttl_ms: None,
            nodes: None,
        }
    }
}

/// One history entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "lowercase")]
///
/// Not boxed: a history is one block of memory, freed at once, not thousands of small ones
/// freed one by one (a sweep frees a history per seed, on another thread than the one that
/// made it). The simulator's recorder reserves room for a typical run up front, so entries are
/// rarely moved as it grows. Make one with `Entry::from(op)` or `Entry::from(event)`.
pub enum Entry {
    /// A client operation.
    Op(Op),
    /// A service or nemesis event.
    Event(Event),
}

impl From<Op> for Entry {
    fn from(op: Op) -> Self {
        Entry::Op(op)
    }
}

impl From<Event> for Entry {
    fn from(event: Event) -> Self {
        Entry::Event(event)
    }
}

impl Entry {
    /// The entry's stamp.
    pub fn at(&self) -> &Stamp {
        match self {
            Entry::Op(op) => &op.at,
            Entry::Event(ev) => &ev.at,
        }
    }
}

/// A whole history: header plus entries in `index` order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    /// Who recorded what.
    pub header: Header,
    /// The entries, in increasing `index` order; `entries[i].at().index == i`, except in a
    /// history read from Jepsen EDN that keeps its file's `:index` ([`Stamp::index`]).
    pub entries: Vec<Entry>,
}

impl History {
    /// The events, in order.
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Event(ev) => Some(ev),
            Entry::Op(_) => None,
        })
    }

    /// The operations, in order.
    pub fn ops(&self) -> impl Iterator<Item = &Op> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Op(op) => Some(op),
            Entry::Event(_) => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names_match_serde_names() {
        // A kind left out of ALL would not be offered by the reader's error messages: the
        // match below fails to compile when a kind is added, and the count must follow.
        let listed = |k: EventKind| match k {
            EventKind::Grant
            | EventKind::Renew
            | EventKind::Release
            | EventKind::Expire
            | EventKind::Revoke
            | EventKind::Accept
            | EventKind::Reject
            | EventKind::Pause
            | EventKind::Hold
            | EventKind::Latency
            | EventKind::Belief
            | EventKind::Loss
            | EventKind::Duplicate
            | EventKind::Reorder
            | EventKind::Partition
            | EventKind::Heal
            | EventKind::ClockJump
            | EventKind::ClockSkew
            | EventKind::ClockDrift
            | EventKind::ClockStrobe
            | EventKind::Crash
            | EventKind::Restart
            | EventKind::Restore
            | EventKind::FinalHeal
            | EventKind::Leader
            | EventKind::Stall
            | EventKind::Deregister
            | EventKind::KeySet
            | EventKind::KeyExtend
            | EventKind::KeyDelete
            | EventKind::KeyExpire
            | EventKind::KeyRefuse => 1,
        };
        assert_eq!(EventKind::ALL.iter().map(|k| listed(*k)).sum::<usize>(), 32);
        let mut sorted = EventKind::ALL.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), EventKind::ALL.len());
        for kind in EventKind::ALL {
            assert_eq!(
                serde_json::to_string(&kind).unwrap(),
                format!("\"{}\"", kind.as_str())
            );
        }
    }
}
