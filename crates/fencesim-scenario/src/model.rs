//! The resolved scenario: every default filled in, every reference checked. Serialized into
//! report.json so a report says exactly what ran.

use fencesim_history::ViolationKind;

pub use fencesim_design::MessageKind;

use crate::fault::Fault;
use serde::{Deserialize, Serialize};

/// Node name of the lock (lease) service.
pub const LEASE_SERVICE_NODE: &str = "lease-service";
/// In a fault's `node`, the Raft replica that leads when the fault starts.
pub const LEADER: &str = "leader";
/// Node name of the fenced resource.
pub const RESOURCE_NODE: &str = "resource";
/// Names clients may not take: the servers and the simulation's own helper nodes.
pub const RESERVED_NODE_NAMES: [&str; 5] = [
    LEASE_SERVICE_NODE,
    RESOURCE_NODE,
    LEADER,
    "nemesis",
    "network",
];

/// A validated scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// Short name; also the output directory name.
    pub name: String,
    /// What the scenario shows and why.
    pub description: String,
    /// The seeds over which the expectation must hold (`--expect` without `--seed`).
    pub seeds: SeedRange,
    /// Simulated ms after which the run stops even if clients are still busy.
    pub duration_ms: u64,
    /// A run that records more than this many records stops as a simulation failure (exit 4),
    /// so that a runaway scenario cannot exhaust memory.
    pub max_records: u64,
    /// Network settings.
    pub network: NetworkSpec,
    /// The lock service.
    pub lock_service: LockServiceSpec,
    /// The fenced resource.
    pub resource: ResourceSpec,
    /// Every client, groups expanded (`count = 2` becomes client-1, client-2).
    pub clients: Vec<ClientSpec>,
    /// Scripted faults, in file order.
    pub faults: Vec<Fault>,
    /// What the checker must conclude on every seed of `seeds`.
    pub expect: Expectation,
    /// Faults drawn from the seed, if any.
    pub nemesis: Option<NemesisSpec>,
}

/// `[nemesis]`: a random nemesis in the manner of Jepsen's combined nemeses, with swarm
/// testing (Groce et al. 2012): each seed may switch on only a subset of the fault kinds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NemesisSpec {
    /// Fault kinds to draw from (`kind` names of `[[faults]]`).
    pub kinds: Vec<String>,
    /// Swarm mode: each seed uses a random non-empty subset of `kinds` and narrows the ranges.
    pub swarm: bool,
    /// Where node-bound faults land: at uniformly drawn times, or in hazard windows.
    #[serde(default, skip_serializing_if = "Placement::is_uniform")]
    pub placement: Placement,
    /// Nodes faults may target (node-bound kinds).
    pub targets: Vec<String>,
    /// When the first fault may start, simulated ms.
    pub start_ms: u64,
    /// Gap between fault starts, ms.
    pub interval_ms: LatencyRange,
    /// How long each fault lasts, ms.
    pub duration_ms: LatencyRange,
    /// When the final heal happens: every fault in force ends, every node resumes and restarts,
    /// wall clocks go back to true time and drift stops. The nemesis draws no fault after it.
    pub heal_at_ms: u64,
    /// After the final heal, a fenced write must be accepted within this many maximum lease
    /// periods (`max_ttl_ms`), else `no-progress-after-heal`.
    pub recovery_periods: u64,
    /// Clock jump sizes, ms (a negative bound allows backward jumps).
    pub clock_jump_ms: Range64,
    /// Clock skew offsets and strobe sizes, ms.
    pub clock_offset_ms: Range64,
    /// Clock drift, ppm.
    pub drift_ppm: Range64,
    /// Loss and duplication probabilities, [low, high].
    pub rate: [f64; 2],
    /// Latency windows' ranges are drawn inside this, ms.
    pub latency_ms: LatencyRange,
    /// Reorder windows, ms.
    pub reorder_window_ms: LatencyRange,
}

/// Where the random nemesis places its node-bound faults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// At times drawn uniformly from the fault intervals (Jepsen's nemesis schedules).
    #[default]
    Uniform,
    /// Aimed at hazard windows, by triggering on node events instead of times: a client is
    /// paused, crashed or isolated after a grant or just before its write (it holds a lease
    /// it has not used yet, Kleppmann 2016); a lease node is crashed, paused or has its clock
    /// moved right after a grant (the lease's expiry is then judged across the fault); and a
    /// message hold catches a client's write or a service's acquire or renew reply in flight.
    /// Loss, duplication, reordering, latency and majority/minority partitions stay uniform.
    Targeted,
}

impl Placement {
    /// Whether this is the default, uniform placement (left out of reports, so reports of
    /// scenarios that do not use it are unchanged).
    pub fn is_uniform(&self) -> bool {
        *self == Placement::Uniform
    }
}

/// A signed range, both ends inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Range64 {
    /// Lowest.
    pub min: i64,
    /// Highest.
    pub max: i64,
}

/// A half-open range of root seeds, `start..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedRange {
    /// First seed.
    pub start: u64,
    /// One past the last seed.
    pub end: u64,
}

/// A uniform latency range in simulated ms, both ends inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyRange {
    /// Shortest one-way delay.
    pub min_ms: u64,
    /// Longest one-way delay.
    pub max_ms: u64,
}

/// `[network]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NetworkSpec {
    /// One-way delay of every message, drawn per message from the seed.
    pub latency_ms: LatencyRange,
    /// Probability that a message is lost.
    pub loss: f64,
    /// Probability that a message is delivered twice.
    pub duplicate: f64,
    /// Extra random delay in [0, reorder_window_ms] per message, so messages overtake.
    pub reorder_window_ms: u64,
    /// Per-link latency overriding `latency_ms` (one direction each; `[[network.links]]`
    /// without `one_way` becomes two entries).
    pub links: Vec<LinkLatency>,
}

/// The latency of one directed link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkLatency {
    /// Sender.
    pub from: String,
    /// Receiver.
    pub to: String,
    /// Its latency.
    pub latency_ms: LatencyRange,
}

/// Which of its clocks the lock service judges expiry by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExpiryClock {
    /// The monotonic clock: drifts but never jumps (the safe choice).
    Monotonic,
    /// The wall clock: jumps and skew move expiries (Kleppmann 2016's clock-jump case).
    Wall,
}

/// Where the lock service keeps its token counter, which decides whether tokens survive a
/// crash or a restore.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TokenCounter {
    /// A separate record, synced on every grant and never rewound by a restore (the safe
    /// design: like etcd's revision, it only moves forward).
    Durable,
    /// In the lease store: subject to `fsync` and rewound by a restore (defect: cases K04, K10).
    Store,
    /// In memory only: back to 0 after every restart (defect: case K06/K17's token reuse).
    Memory,
}

/// When the lock service's store writes reach the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fsync {
    /// Every write is synced before the reply.
    Always,
    /// Writes are synced every `fsync_every_ms`.
    Periodic,
    /// Nothing is synced: a crash loses every store write.
    Never,
}

/// Which lock service design runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LockServiceKind {
    /// One `lease-service` node with a lease table on its own disk.
    Single,
    /// `replicas` nodes `lease-1`..`lease-N` running Raft (tikv raft-rs); the token is the log
    /// index of the committed acquire.
    Raft,
    /// `replicas` independent Redis-like nodes `redis-1`..`redis-N`, locked by the clients with
    /// the Redlock algorithm (antirez; critiqued by Kleppmann 2016). See [`RedlockSpec`].
    Redlock,
    /// A primary `lease-1` and a backup `lease-2` that it replicates to, promoted when the
    /// primary falls silent (Redis Sentinel, database-backed lock tables; case K06). See
    /// [`PrimaryBackupSpec`].
    PrimaryBackup,
    /// Leases as records in a linearizable compare-and-swap store on `lease-service`, with
    /// expiry judged by the candidates (Kubernetes Lease objects, DynamoDB Lock Client; case
    /// K11). The token is the record version at which the holder took it.
    LeaseRecord,
}

/// Which duration a lease-record candidate waits before taking over a silent holder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExpiryJudgedBy {
    /// The duration the holder recorded (correct).
    RecordedDuration,
    /// The candidate's own `ttl_ms`, whatever the holder recorded (case K11's defect).
    OwnDuration,
}

/// How a primary-backup lock service replicates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Replication {
    /// The primary answers at once and ships its state every `replication_lag_ms`: a failover
    /// loses what the backup had not yet received (case K06).
    Async,
    /// The primary answers a change only after the backup has acknowledged it (Redis `WAIT`,
    /// synchronous standby): a promoted backup has every lease a client was told of.
    Sync,
}

/// The primary-backup design's settings (`kind = "primary-backup"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrimaryBackupSpec {
    /// Asynchronous or synchronous replication.
    pub replication: Replication,
    /// The primary ships its whole table (which is also its heartbeat) this often, simulated ms.
    pub replication_lag_ms: u64,
    /// The backup promotes itself after hearing nothing from a primary for this long, ms.
    pub failover_after_ms: u64,
}

/// Where a Redlock client gets the token it presents to the resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TokenSource {
    /// The lock's own random value: opaque, so no resource can order it (case K23).
    Random,
    /// `INCR` of a counter on `redis-1` after acquiring, as some client libraries do: monotonic
    /// only while that one node keeps its data.
    Counter,
}

/// The Redlock design's settings (`[lock_service]` with `kind = "redlock"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedlockSpec {
    /// Clients re-check, once the replies are in, that validity = TTL - elapsed - drift
    /// allowance is still positive (false: a client trusts any late majority, case K05).
    pub recheck_elapsed: bool,
    /// Clock drift allowance, ppm of the TTL (plus 2 ms), as the Redlock documentation has it.
    pub drift_ppm: u64,
    /// How long a client waits for the nodes' replies to one request, simulated ms.
    pub node_timeout_ms: u64,
    /// Where the token presented to the resource comes from.
    pub token_source: TokenSource,
    /// A restarted node stays unavailable this long, simulated ms (antirez's "delayed
    /// restarts": one maximum TTL makes a crash without fsync safe, case K04).
    pub restart_delay_ms: u64,
}

/// What a new Raft leader does to leases granted under earlier leaders.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeaderChangeMode {
    /// Extend every lease by its TTL from the new leader's clock (etcd's promotion; safe).
    Extend,
    /// Keep the old leader's expiry times (defect).
    None,
}

/// `[lock_service]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockServiceSpec {
    /// The design.
    pub kind: LockServiceKind,
    /// The longest TTL granted, local-clock ms.
    pub max_ttl_ms: u64,
    /// The clock expiry is judged by.
    pub expiry_clock: ExpiryClock,
    /// Where the token counter lives.
    pub token_counter: TokenCounter,
    /// When store writes are synced.
    pub fsync: Fsync,
    /// The sync period for `Fsync::Periodic`, simulated ms.
    pub fsync_every_ms: Option<u64>,
    /// After a restart, refuse every grant for this long, ms (0: none). A grace of one maximum
    /// TTL is the correct design when leases are lost with the state (case K17).
    pub restart_grace_ms: u64,
    /// Raft replicas (3 or 5; 1 for `single`).
    pub replicas: u64,
    /// Raft: refuse revocations proposed by a deposed leader (false: the defect of case K08).
    pub revoke_term_check: bool,
    /// Raft: what a new leader does to existing leases.
    pub leader_change: LeaderChangeMode,
    /// Redlock's settings (`Some` exactly when `kind` is `redlock`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redlock: Option<RedlockSpec>,
    /// Primary-backup settings (`Some` exactly when `kind` is `primary-backup`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_backup: Option<PrimaryBackupSpec>,
    /// Lease-record design: how candidates judge expiry (`Some` exactly when `kind` is
    /// `lease-record`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry_judged_by: Option<ExpiryJudgedBy>,
    /// What an acquire of a held lock does (`single` only; the queue's defect is case K07).
    #[serde(default, skip_serializing_if = "AcquireMode::is_default")]
    pub acquire: AcquireMode,
    /// What the reaper does with a deregistered client's leases (`single` only; K16).
    #[serde(default, skip_serializing_if = "Reaper::is_default")]
    pub reaper: Reaper,
    /// How release works (`single` only; a defect knob, case K19).
    #[serde(default, skip_serializing_if = "ReleaseMode::is_default")]
    pub release: ReleaseMode,
}

impl LockServiceSpec {
    /// The lock service's node names: `lease-service`, `lease-1`..`lease-N` (Raft; `lease-1`
    /// and `lease-2` for primary-backup) or `redis-1`..`redis-N` (Redlock).
    pub fn nodes(&self) -> Vec<String> {
        match self.kind {
            LockServiceKind::Single | LockServiceKind::LeaseRecord => {
                vec![LEASE_SERVICE_NODE.to_owned()]
            }
            LockServiceKind::Raft | LockServiceKind::PrimaryBackup => {
                (1..=self.replicas).map(|i| format!("lease-{i}")).collect()
            }
            LockServiceKind::Redlock => (1..=self.replicas).map(|i| format!("redis-{i}")).collect(),
        }
    }
}

/// How the resource treats fencing tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResourceMode {
    /// Reject stale tokens (the safe design).
    Fenced,
    /// Accept every write (the counterexample).
    Unfenced,
    /// Accept the current lock value and unseen ones, reject replaced ones: all a resource can
    /// do with opaque random values (case K23).
    Equality,
}

/// `[resource]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceSpec {
    /// Fenced, unfenced or equality.
    pub mode: ResourceMode,
    /// The keys it serves; clients must use one of them.
    pub keys: Vec<String>,
    /// Whether the token check and the write are one atomic step (a defect knob, case K20).
    #[serde(default, skip_serializing_if = "ResourceCheck::is_default")]
    pub check: ResourceCheck,
    /// With `check = "check-then-apply"`: simulated ms between a write's check and its
    /// application (the unprotected window). 0 otherwise.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub apply_delay_ms: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How the resource checks a write's token against the highest it has accepted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResourceCheck {
    /// Check and store in one atomic step (a conditional update, `UPDATE ... WHERE token <=
    /// :token`), as Kleppmann 2016 requires.
    #[default]
    Atomic,
    /// DEFECT (K20): check the token, then store `apply_delay_ms` later without checking again
    /// (a read-then-write in application code). Two writes that arrive close together both
    /// pass the check, and the older one may be stored last.
    CheckThenApply,
}

impl ResourceCheck {
    /// Whether this is the correct default (left out of reports).
    pub fn is_default(&self) -> bool {
        *self == ResourceCheck::Atomic
    }
}

/// One client, after expanding `count`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientSpec {
    /// Node name.
    pub name: String,
    /// The lock it takes.
    pub lock: String,
    /// The resource key it writes.
    pub key: String,
    /// The TTL it asks for, ms.
    pub ttl_ms: u64,
    /// How long it works between read and write, simulated ms.
    pub work_ms: u64,
    /// Keepalive period while working, ms (`None`: never renews).
    pub renew_ms: Option<u64>,
    /// How many acquire-read-work-write-release cycles it runs.
    pub cycles: u64,
    /// When it starts, simulated ms.
    pub start_ms: u64,
    /// How long it waits for any reply before recording `info`, ms.
    pub timeout_ms: u64,
    /// Seeded backoff range between acquire attempts while the lock is held, ms.
    pub backoff_ms: LatencyRange,
    /// The client believes its lease valid until (acquire or renew sent, on its monotonic
    /// clock) + ttl_ms - safety_margin_ms.
    pub safety_margin_ms: u64,
    /// Whether the client checks that belief before writing and stops if it has run out
    /// (`false`: it acts as holder until the service says otherwise, case K15).
    pub validity_check: bool,
    /// Where the client's own deadline counts from (a defect knob, case K12).
    #[serde(default, skip_serializing_if = "DeadlineFrom::is_default")]
    pub deadline_from: DeadlineFrom,
    /// What the client's keepalive does after a renewal gets no answer (a defect knob, K09).
    #[serde(default, skip_serializing_if = "RenewAfterFailure::is_default")]
    pub renew_after_failure: RenewAfterFailure,
    /// Whose lock entry a restarted client takes for its own (a defect knob, K13).
    #[serde(default, skip_serializing_if = "Reclaim::is_default")]
    pub reclaim: Reclaim,
    /// What the client does when a renewal is answered "lost" (a defect knob, K14).
    #[serde(default, skip_serializing_if = "OnLostLease::is_default")]
    pub on_lost_lease: OnLostLease,
    /// How a lease-record client claims a free record (a defect knob, K21).
    #[serde(default, skip_serializing_if = "Takeover::is_default")]
    pub takeover: Takeover,
}

/// Which lock entries a client, back under a new session after a restart, counts as its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reclaim {
    /// Only its current session's: an entry its old session left belongs to nobody it can
    /// act for, and it waits for the entry to go like anyone else.
    #[default]
    BySession,
    /// DEFECT (K13): any entry under its name: finding the one its old session left (not yet
    /// expired), it concludes it still holds the lock, with that entry's token.
    ByName,
}

impl Reclaim {
    /// Whether this is the correct default (left out of reports).
    pub fn is_default(&self) -> bool {
        *self == Reclaim::BySession
    }
}

/// What a client does when the service answers a renewal with "lost".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnLostLease {
    /// It stops acting as holder at once and abandons its cycle.
    #[default]
    Stop,
    /// DEFECT (K14): it keeps its role, as a leader that, back from a long disconnection,
    /// keeps its leadership though the service expired its session and elected another: it
    /// goes on believing it holds the lease, as if the renewal had succeeded.
    KeepRole,
}

impl OnLostLease {
    /// Whether this is the correct default (left out of reports).
    pub fn is_default(&self) -> bool {
        *self == OnLostLease::Stop
    }
}

/// How a lease-record client claims a record it judged free or expired.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Takeover {
    /// Compare-and-swap on the version it read: of two claims on one read, one fails.
    #[default]
    CompareAndSwap,
    /// DEFECT (K21): write the record whatever its version, an update by key (`UPDATE tasks
    /// SET state = 'scheduled' WHERE id = ?`): two schedulers that both read the task as free
    /// both claim it, and both run it.
    Unconditional,
}

impl Takeover {
    /// Whether this is the correct default (left out of reports).
    pub fn is_default(&self) -> bool {
        *self == Takeover::CompareAndSwap
    }
}

/// Where a client's own lease deadline counts from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeadlineFrom {
    /// From the moment it sent its last acquire or renewal that was answered (its last
    /// successful contact): the service's lease cannot outlast this deadline (Chubby's
    /// conservative client lease, etcd's keepalive TTL).
    #[default]
    Request,
    /// DEFECT (K12): a renewal that gets no answer restarts the countdown from the moment the
    /// client notices the silence, as ZooKeeper-style clients that start their "connection
    /// lost" timer at the disconnect notice do. The client then acts as holder up to a whole
    /// TTL after the service has expired its lease.
    Notice,
}

impl DeadlineFrom {
    /// Whether this is the correct default (left out of reports).
    pub fn is_default(&self) -> bool {
        *self == DeadlineFrom::Request
    }
}

/// What a client's keepalive does after a renewal gets no answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RenewAfterFailure {
    /// Keep renewing every `renew_ms`; the next answer says whether the lease still stands.
    #[default]
    Retry,
    /// DEFECT (K09): the keepalive stream ends at its first failure and nobody is told, as
    /// with a keepalive channel that closes silently: the client renews no more in this cycle
    /// and learns nothing from the service until its write.
    Stop,
}

impl RenewAfterFailure {
    /// Whether this is the correct default (left out of reports).
    pub fn is_default(&self) -> bool {
        *self == RenewAfterFailure::Retry
    }
}

/// What the lock service does with an acquire of a held lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AcquireMode {
    /// Refuse it at once (`held by H until T`); the client backs off and tries again.
    #[default]
    FailFast,
    /// Queue the caller (a blocking acquire, etcd's `concurrency.Mutex`, ZooKeeper's lock
    /// recipe) with a token of its own, and grant it in turn; a waiter whose own lease ran out
    /// while it waited is dropped and its acquire fails.
    Queue,
    /// DEFECT (K07): the queue grants its head without re-checking the waiter's lease, so a
    /// waiter whose lease lapsed in the queue is told it holds the lock, and the next waiter
    /// is granted it right after.
    QueueGrantToExpiredWaiter,
}

impl AcquireMode {
    /// Whether this is the default (left out of reports).
    pub fn is_default(&self) -> bool {
        *self == AcquireMode::FailFast
    }
}

/// What the lock service's maintenance reaper does when a client is deregistered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reaper {
    /// It ends only leases whose holder has stopped renewing (expired ones): a lease still
    /// being renewed is proof of life, whatever the node's health check said.
    #[default]
    RespectsLeases,
    /// DEFECT (K16): it ends every lease of the deregistered client at once, live or not
    /// (a dead-node reaper that trusts a health check over the lease), freeing a lock its
    /// holder is still using.
    IgnoresLeases,
}

impl Reaper {
    /// Whether this is the correct default (left out of reports).
    pub fn is_default(&self) -> bool {
        *self == Reaper::RespectsLeases
    }
}

/// How the lock service's release works.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReleaseMode {
    /// An atomic compare-and-delete on (holder, token): a release by anyone but the current
    /// holder changes nothing (the Redis documentation's Lua script, etcd's lease revoke).
    #[default]
    CompareAndDelete,
    /// DEFECT (K19): release deletes the lock whoever holds it, like a plain `DEL lock`: a
    /// client that wakes after its lease expired frees the next holder's lock.
    Unconditional,
}

impl ReleaseMode {
    /// Whether this is the correct default (left out of reports).
    pub fn is_default(&self) -> bool {
        *self == ReleaseMode::CompareAndDelete
    }
}

/// Events of a node at which a fault can fire (`after = "grant"`, `before = "write"`).
///
/// On a client they are its own steps (`grant`: it received a grant; `write`: it sends or sent
/// its write); on the lease service and resource they are its decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeEvent {
    /// A client asks for a lease.
    Acquire,
    /// A lease was granted (client: received; service: decided).
    Grant,
    /// A keepalive.
    Renew,
    /// A release.
    Release,
    /// The service expired a lease.
    Expire,
    /// A client reads the resource.
    Read,
    /// A client writes the resource.
    Write,
    /// The resource applied a write.
    Accept,
    /// The resource rejected a stale write.
    Reject,
}

impl NodeEvent {
    /// The events at which a node of `role` has a safepoint `when` (before or after), as
    /// `(before, after)` lists. A trigger outside these would never fire, so validation
    /// refuses it.
    pub fn safepoints(role: NodeRole) -> (&'static [NodeEvent], &'static [NodeEvent]) {
        use NodeEvent::*;
        match role {
            NodeRole::Client => (
                &[Acquire, Read, Renew, Write, Release],
                &[Grant, Read, Renew, Write, Release],
            ),
            NodeRole::LeaseService => {
                (&[Acquire, Renew, Release], &[Grant, Renew, Release, Expire])
            }
            NodeRole::Resource => (&[Read, Write], &[Read, Accept, Reject]),
        }
    }

    /// The name used in files.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeEvent::Acquire => "acquire",
            NodeEvent::Grant => "grant",
            NodeEvent::Renew => "renew",
            NodeEvent::Release => "release",
            NodeEvent::Expire => "expire",
            NodeEvent::Read => "read",
            NodeEvent::Write => "write",
            NodeEvent::Accept => "accept",
            NodeEvent::Reject => "reject",
        }
    }
}

/// What a node is, which decides the events it has and the messages it sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeRole {
    /// A client.
    Client,
    /// The lock service.
    LeaseService,
    /// The fenced resource.
    Resource,
}

impl NodeRole {
    /// The role of node `name`: `lease-service`, `lease-N` and `redis-N` serve leases,
    /// `resource` is the resource, anything else a client.
    pub fn of(name: &str) -> NodeRole {
        let numbered = |prefix: &str| {
            name.strip_prefix(prefix)
                .is_some_and(|n| n.parse::<u64>().is_ok())
        };
        let replica = numbered("lease-") || numbered("redis-");
        match name {
            LEASE_SERVICE_NODE => NodeRole::LeaseService,
            RESOURCE_NODE => NodeRole::Resource,
            _ if replica => NodeRole::LeaseService,
            _ => NodeRole::Client,
        }
    }
}

impl NodeRole {
    /// Whether a node of this role ever sends `kind` (a `hold` on anything else never matches).
    pub fn sends(self, kind: MessageKind) -> bool {
        use MessageKind::*;
        match self {
            NodeRole::Client => matches!(kind, Acquire | Renew | Release | Read | Write),
            NodeRole::LeaseService => matches!(
                kind,
                AcquireReply | RenewReply | ReleaseReply | Raft | Redirect | Replicate
            ),
            NodeRole::Resource => matches!(kind, ReadReply | WriteReply),
        }
    }
}

/// The expected overall verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExpectedVerdict {
    /// No violation on any seed.
    Valid,
    /// On every seed, at least the listed violations.
    Invalid,
}

/// `[expect]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expectation {
    /// Valid or invalid.
    pub verdict: ExpectedVerdict,
    /// For `invalid`: kinds that must each be found (others may be found too).
    pub violations: Vec<ViolationKind>,
    /// Kinds that must not be found, whatever the verdict.
    pub absent: Vec<ViolationKind>,
}

impl Scenario {
    /// Every node name: the lock service's, the resource, then the clients.
    pub fn node_names(&self) -> Vec<String> {
        let mut names = self.lock_service.nodes();
        names.push(RESOURCE_NODE.to_owned());
        names.extend(self.clients.iter().map(|c| c.name.clone()));
        names
    }
}
