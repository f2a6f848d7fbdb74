//! The resolved scenario: every default filled in, every reference checked. Serialized into
//! report.json so a report says exactly what ran.

use fencesim_history::ViolationKind;

pub use fencesim_design::MessageKind;
use fencesim_design::{ClientWorkload, ServiceShape};

use crate::fault::Fault;
use serde::{Deserialize, Serialize};

/// In a fault's `node`, the Raft replica that leads when the fault starts.
pub const LEADER: &str = "leader";
/// Node name of the fenced resource.
pub const RESOURCE_NODE: &str = "resource";
/// Names clients may not take: the resource, `leader` and the simulation's own helper nodes.
/// (Nor may they take a node name of the scenario's design: its `ServiceShape::nodes`.)
pub const RESERVED_NODE_NAMES: [&str; 4] = [RESOURCE_NODE, LEADER, "nemesis", "network"];

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
    /// Fault kinds to draw from, each [`FaultKind::is_drawable`], none twice.
    ///
    /// [`FaultKind::is_drawable`]: crate::FaultKind::is_drawable
    pub kinds: Vec<crate::FaultKind>,
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

/// `[lock_service]`: the design, the TTL bound every design shares, and the design's knobs.
///
/// Which knobs exist, their defaults and what they mean is the design's (its
/// `fencesim_design::DesignSpec`); the scenario keeps them as the design resolved them, every
/// default filled in, so a report carries exactly what ran and `to_toml` writes it back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockServiceSpec {
    /// The design's `kind`, as its `DesignSpec` names it (a built-in design's or a user's).
    pub kind: String,
    /// The longest TTL granted, local-clock ms. Clients may not ask for more, and the random
    /// nemesis's recovery periods are counted in it.
    pub max_ttl_ms: u64,
    /// The design's knobs as it resolved them (defaults filled in), by name.
    #[serde(flatten)]
    pub knobs: toml::Table,
    /// What the design said of its service. Not serialized: a scenario read back from JSON is
    /// resolved again (`to_toml`, then `parse`) before it runs.
    #[serde(skip)]
    pub shape: ServiceShape,
    /// The design's typed settings, read from `knobs` when the scenario was parsed
    /// (`fencesim_design::Design::Settings`): what every node and client is built from. Not
    /// serialized, as `shape`.
    #[serde(skip)]
    pub settings: fencesim_design::Settings,
}

impl LockServiceSpec {
    /// The lock service's node names, in order (`lease-service`; `lease-1`..`lease-N`;
    /// `redis-1`..`redis-N`; a user's design's).
    pub fn nodes(&self) -> Vec<String> {
        self.shape.nodes.clone()
    }
}

/// `[resource]`: the resource's mode (a design of its own, `fencesim_design::ResourceSpec`),
/// the keys it serves, and its knobs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResourceSpec {
    /// The mode (`"fenced"`, `"unfenced"`, `"equality"`, a user's resource's).
    pub mode: String,
    /// The keys it serves; clients must use one of them.
    pub keys: Vec<String>,
    /// The resource's knobs as it resolved them (`check`, and `apply_delay_ms` with
    /// `check = "check-then-apply"`), by name.
    #[serde(flatten)]
    pub knobs: toml::Table,
    /// The resource's typed configuration, read from `knobs` when the scenario was parsed
    /// (`fencesim_design::ResourceDesign::config`). Not serialized.
    #[serde(skip)]
    pub settings: fencesim_design::Settings,
}

/// One client, after expanding `count`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// What it does after its write, before it releases: nothing, or delete its key (a job's
    /// cleanup), with its fencing token or without. Left out of reports when `none`.
    #[serde(default, skip_serializing_if = "Cleanup::is_none")]
    pub cleanup: Cleanup,
    /// What its workload counts its work and keepalives by. Left out of reports when it is
    /// the default, true time.
    #[serde(default, skip_serializing_if = "WorkClock::is_true_time")]
    pub work_clock: WorkClock,
    /// The design's client-protocol knobs (its defect knobs: `reclaim`, `on_lost_lease`,
    /// `deadline_from`, `renew_after_failure` for the lease services, `takeover` for
    /// lease-record) as the design resolved them, defaults filled in, by name.
    #[serde(flatten)]
    pub knobs: toml::Table,
    /// Its client protocol's typed settings, read from `knobs` when the scenario was parsed
    /// (`fencesim_design::Design::ClientSettings`). Not serialized.
    #[serde(skip)]
    pub settings: fencesim_design::Settings,
}

/// A client's cleanup after its write: whether it deletes its key, and with what.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cleanup {
    /// No cleanup.
    #[default]
    None,
    /// Delete the key with the lease's fencing token: a late cleanup is fenced off as a late
    /// write is.
    Fenced,
    /// Delete the key without a token, as a cleanup path that goes around the fence does (a
    /// janitor job, an admin script): whether it lands is the resource's `tokenless` choice.
    Unfenced,
}

/// What a client's workload counts its work and keepalives by (docs/faults.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkClock {
    /// True time: the work lasts `work_ms` of true time, whatever the client's clocks read
    /// (the simulator's idealisation, and its default).
    #[default]
    TrueTime,
    /// The client's own monotonic clock, as a real process's loop reads it: after a pause,
    /// the work left is what its clock says is left. `fencesim verify` writes it into a
    /// counterexample's scenario, whose clients' clocks stand still as the search's do.
    Monotonic,
}

impl WorkClock {
    /// Whether this is the default, true time.
    pub fn is_true_time(&self) -> bool {
        *self == WorkClock::TrueTime
    }

    /// The name in scenario files (`"monotonic"`).
    pub fn as_str(self) -> &'static str {
        match self {
            WorkClock::TrueTime => "true-time",
            WorkClock::Monotonic => "monotonic",
        }
    }
}

impl Cleanup {
    /// Whether this is the default, no cleanup.
    pub fn is_none(&self) -> bool {
        *self == Cleanup::None
    }

    /// The name in scenario files (`"fenced"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Cleanup::None => "none",
            Cleanup::Fenced => "fenced",
            Cleanup::Unfenced => "unfenced",
        }
    }
}

impl ClientSpec {
    /// What its workload does, as its design's client knobs see it.
    pub fn workload(&self) -> ClientWorkload {
        ClientWorkload {
            renews: self.renew_ms.is_some(),
            checks_validity: self.validity_check,
        }
    }
}

/// Events of a node at which a fault can fire (`after = "grant"`, `before = "write"`).
///
/// On a client they are its own steps (`grant`: it received a grant; `write`: it sends or sent
/// its write); on the lease service and resource they are its decisions. A design may name
/// points of its own ([`NodeEvent::Design`]).
///
/// Written and read as its name. A name that is not one of the harness's events reads as a
/// design's ([`NodeEvent::Design`]): it means something only beside its design, so a
/// scenario's triggers are resolved (and a name its design does not declare refused) when the
/// scenario is validated, as a scenario read back from a report is before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
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
    /// A point the design names in its own code (`claim-sent`): one of its
    /// [`fencesim_design::Safepoint`]s, passed by its client protocol or its nodes. A fault
    /// triggered `after` or `before` it strikes at that one point.
    Design(&'static str),
}

impl NodeEvent {
    /// The harness's own events, which every design's nodes pass where they apply.
    pub const BUILT_IN: [NodeEvent; 9] = [
        NodeEvent::Acquire,
        NodeEvent::Grant,
        NodeEvent::Renew,
        NodeEvent::Release,
        NodeEvent::Expire,
        NodeEvent::Read,
        NodeEvent::Write,
        NodeEvent::Accept,
        NodeEvent::Reject,
    ];

    /// The design's own safepoints that a node of `role` passes, as events: client-side ones on
    /// a client, service-side ones on a lock-service node, none on the resource.
    pub fn of_design(shape: &ServiceShape, role: NodeRole) -> impl Iterator<Item = NodeEvent> + '_ {
        let side = match role {
            NodeRole::Client => Some(fencesim_design::SafepointSide::Client),
            NodeRole::LeaseService => Some(fencesim_design::SafepointSide::Service),
            NodeRole::Resource => None,
        };
        shape
            .safepoints
            .iter()
            .filter(move |s| Some(s.side) == side)
            .map(|s| NodeEvent::Design(s.name))
    }

    /// The harness's event called `name`, if there is one.
    pub fn built_in(name: &str) -> Option<NodeEvent> {
        NodeEvent::BUILT_IN.into_iter().find(|e| e.as_str() == name)
    }

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
            NodeEvent::Design(name) => name,
        }
    }
}

impl Serialize for NodeEvent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for NodeEvent {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Ok(NodeEvent::built_in(&name).unwrap_or_else(|| NodeEvent::Design(kept(name))))
    }
}

/// `name` as the `&'static str` a [`NodeEvent::Design`] holds. A design declares its names as
/// constants; one read from a file (a trigger in a report's scenario) is kept for the rest of
/// the process, a few bytes per trigger read: validation then resolves the scenario against its
/// design, whose own constant replaces it.
fn kept(name: String) -> &'static str {
    Box::leak(name.into_boxed_str())
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
    /// The role of node `name` in a service of nodes `service_nodes` (its design's
    /// `ServiceShape::nodes`): one of those serves leases, `resource` is the resource, anything
    /// else is a client.
    pub fn in_service(name: &str, service_nodes: &[String]) -> NodeRole {
        if service_nodes.iter().any(|n| n == name) {
            NodeRole::LeaseService
        } else if name == RESOURCE_NODE {
            NodeRole::Resource
        } else {
            NodeRole::Client
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
    /// The role of node `name` in this scenario ([`NodeRole::in_service`]).
    pub fn role(&self, name: &str) -> NodeRole {
        NodeRole::in_service(name, &self.lock_service.shape.nodes)
    }

    /// Every node name: the lock service's, the resource, then the clients.
    pub fn node_names(&self) -> Vec<String> {
        let mut names = self.lock_service.nodes();
        names.push(RESOURCE_NODE.to_owned());
        names.extend(self.clients.iter().map(|c| c.name.clone()));
        names
    }
}
