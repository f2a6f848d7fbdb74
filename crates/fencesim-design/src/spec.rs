//! What a design declares to the scenario parser: its `kind`, its knobs, and the shape of the
//! service they make (its nodes, who leads, which messages its nodes send, which faults apply).
//!
//! The scenario parser knows no design. It looks a scenario's `[lock_service] kind` up in a
//! [`Designs`] catalog, hands the design its knobs ([`DesignSpec::resolve`]), and from then on
//! asks the [`ServiceShape`] the design answered with: node names for fault targets and
//! errors, `leader` for `node = "leader"`, which `hold` faults could ever match, which event
//! triggers a node reaches. The simulator's glue reads the same resolved knobs again to build
//! the design's node and client settings.

use serde::{Deserialize, Serialize};

use crate::knobs::{KnobError, Knobs};
use crate::message::MessageKind;
use crate::node::FsyncPolicy;
use crate::resource::ResourceModeSpec;
use crate::safe::SafeKnob;
use crate::time::Clock;
use crate::{Design, ResourceDesign, Settings};

/// A lock design as the scenario parser sees it: every [`Design`](crate::Design) is one (the
/// implementation is in `design.rs`; a design implements `Design`, never this). Object-safe: a
/// catalog holds `&dyn DesignSpec`s, the built-in designs and a user's alike.
pub trait DesignSpec: Send + Sync {
    /// The `[lock_service] kind` that selects this design (`"raft"`).
    fn kind(&self) -> &'static str;
    /// One line on what the design is, for listings and error messages.
    fn about(&self) -> &'static str;
    /// Every `[lock_service]` knob the design may read.
    fn knob_names(&self) -> &'static [&'static str];
    /// The `[[clients]]` knobs its client protocol takes.
    fn client_knob_names(&self) -> &'static [&'static str];
    /// Read the `[lock_service]` knobs, with located errors, into the service's shape and the
    /// design's typed settings; every knob read (default or given) is kept in `knobs`'s
    /// resolved table. `max_ttl_ms` is `[lock_service] max_ttl_ms`.
    ///
    /// # Errors
    /// A knob's value is refused.
    fn resolve(
        &self,
        knobs: &mut Knobs,
        max_ttl_ms: u64,
    ) -> Result<(ServiceShape, Settings), KnobError>;
    /// Read one `[[clients]]` table's knobs (its fields other than the workload's) into the
    /// client protocol's typed settings; `workload` says what the client does.
    ///
    /// # Errors
    /// A knob's value is refused, or means nothing with this workload.
    fn resolve_client(
        &self,
        knobs: &mut Knobs,
        workload: &ClientWorkload,
        max_ttl_ms: u64,
    ) -> Result<Settings, KnobError>;
    /// The `[lock_service]` knob values the design claims safe ([`crate::safe`]).
    fn safe_knobs(&self) -> &'static [SafeKnob];
    /// The `[[clients]]` knob values of its client protocol that it claims safe.
    fn safe_client_knobs(&self) -> &'static [SafeKnob];
}

/// The designs and resources a scenario may name, by `[lock_service] kind` and `[resource]
/// mode`.
pub trait Designs {
    /// The design of `kind`, if there is one.
    fn find(&self, kind: &str) -> Option<&dyn DesignSpec>;
    /// Every design, in the order listings show them; the first is the one a `[lock_service]`
    /// without `kind` (or a scenario without the table) means.
    fn all(&self) -> Vec<&dyn DesignSpec>;
    /// The resource of `mode`, if there is one.
    fn find_resource(&self, mode: &str) -> Option<&dyn ResourceModeSpec>;
    /// Every resource, in the order listings show them; the first is the one a `[resource]`
    /// without `mode` means.
    fn all_resources(&self) -> Vec<&dyn ResourceModeSpec>;
}

/// Where designs and resources are registered: a parser's [`Catalog`], or the `fencesim`
/// crate's registry, which also keeps how each runs. The built-in designs are one list
/// (`fencesim_builtin::register`), which registers them with either.
pub trait Register: Sized {
    /// Add lock design `design`, replacing one of the same kind.
    fn with_design<D: Design>(self, design: &'static D) -> Self;
    /// Add resource `resource`, replacing one of the same mode.
    fn with_resource<R: ResourceDesign>(self, resource: &'static R) -> Self;
}

/// The designs and resources a scenario may name, as the parser alone needs them (the
/// scenario crate's tests and the fuzz targets parse with one; the `fencesim` crate's registry
/// is the catalog that also runs them). Listing order is registration order.
#[derive(Clone, Default)]
pub struct Catalog {
    designs: Vec<&'static dyn DesignSpec>,
    resources: Vec<&'static dyn ResourceModeSpec>,
}

impl Register for Catalog {
    fn with_design<D: Design>(mut self, design: &'static D) -> Self {
        let kind = Design::kind(design);
        self.designs.retain(|d| d.kind() != kind);
        self.designs.push(design);
        self
    }

    fn with_resource<R: ResourceDesign>(mut self, resource: &'static R) -> Self {
        let mode = ResourceDesign::mode(resource);
        self.resources.retain(|r| r.mode() != mode);
        self.resources.push(resource);
        self
    }
}

impl Designs for Catalog {
    fn find(&self, kind: &str) -> Option<&dyn DesignSpec> {
        self.designs.iter().copied().find(|d| d.kind() == kind)
    }

    fn all(&self) -> Vec<&dyn DesignSpec> {
        self.designs.to_vec()
    }

    fn find_resource(&self, mode: &str) -> Option<&dyn ResourceModeSpec> {
        self.resources.iter().copied().find(|r| r.mode() == mode)
    }

    fn all_resources(&self) -> Vec<&dyn ResourceModeSpec> {
        self.resources.to_vec()
    }
}

/// What a client's workload does, as a design's client knobs may need to know (a knob that
/// changes what a client does after a failed renewal means nothing to a client that never
/// renews).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientWorkload {
    /// Whether it renews while it works (`renew_ms` is set).
    pub renews: bool,
    /// Whether it checks its own belief of its lease before writing (`validity_check`).
    pub checks_validity: bool,
}

/// How a design's tokens compare: what the history header's `token_order` says, and so what
/// the stale-write check may conclude.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TokenKind {
    /// Fencing tokens: a larger token is a later grant (Kleppmann 2016; Chubby's sequencers,
    /// etcd's revisions, ZooKeeper's zxids).
    #[default]
    Fencing,
    /// Opaque values (a Redlock lock's random value): ordered only by when they were
    /// acquired, so no resource can reject a stale one by comparing (case K23).
    Opaque,
}

/// What the harness needs to know about a design's service once its knobs are read. The
/// default is a service of no nodes, which no design answers with.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceShape {
    /// The lock-service nodes' names, in order: node `i` is index `i` of a client's
    /// [`ClientInfo::service_nodes`](crate::ClientInfo::service_nodes). Names must not clash
    /// with `resource`, `nemesis` or a client's.
    pub nodes: Vec<String>,
    /// Whether one node leads (Raft's leader, a primary): `node = "leader"` faults and
    /// `targets = ["leader"]` aim at the node that recorded the latest `leader` event, and the
    /// targeted nemesis aims at it rather than at a fixed node.
    pub has_leader: bool,
    /// Messages the nodes send besides answers to clients, of the kinds only a service sends
    /// (`raft`, `replicate`, `redirect`): a `hold` of such a kind that no node sends could
    /// never match, and is refused.
    pub node_messages: Vec<MessageKind>,
    /// Whether the nodes record `expire` events of their own (a reaper, a lessor), so that an
    /// event trigger `after = "expire"` on a node can fire. Redis expires keys lazily and a
    /// lease-record store never expires anything.
    pub node_expires: bool,
    /// Whether the service reaps a deregistered client's leases, so that a `deregister` fault
    /// means something (case K16).
    pub reaps: bool,
    /// The nodes that keep backups a `restore` fault can put back (case K10).
    pub backups: Vec<String>,
    /// How the design's tokens compare.
    pub tokens: TokenKind,
    /// The design's own points in time ([`Safepoint`]), which scenario triggers, targeted
    /// placement and guided probes may aim at as they aim at the harness's events. Not part of
    /// a report: a design declares them, it does not record them.
    #[serde(skip)]
    pub safepoints: &'static [Safepoint],
}

/// Whose code passes a design's [`Safepoint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SafepointSide {
    /// The design's client protocol ([`ClientCtx::safepoint`](crate::ClientCtx::safepoint)):
    /// a fault on a client triggers there.
    Client,
    /// The design's lock-service nodes ([`NodeCtx::safepoint`](crate::NodeCtx::safepoint)).
    Service,
}

/// A named point in a design's own code at which a fault may strike, as it may at the
/// harness's events (`after = "grant"`): a scenario writes `after = "claim-sent"` on a node
/// of the right side, and targeted placement, the guided search and shrink use it like the
/// built-in events. The design passes it with `ctx.safepoint(name)` where the step happens,
/// inside an operation, where the harness has no event: a claimant that has sent a lease
/// record whose expiry it computed from its own clock, and has not heard the answer, is the
/// classic case (a pause there lets the record's expiry run while the claimant is away). In the spirit of Jepsen's and madsim's fault points, named by the design
/// that knows where its races are.
///
/// Names are kebab-case, unique within the design, and must differ from the harness's own
/// events (`acquire`, `grant`, `renew`, `release`, `expire`, `read`, `write`, `accept`,
/// `reject`); the registry refuses a design that breaks this. Live mode runs no design's client
/// protocol, so it refuses a scenario that triggers on one, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Safepoint {
    /// The name a scenario uses (`claim-sent`).
    pub name: &'static str,
    /// Whose code passes it.
    pub side: SafepointSide,
    /// What has just happened when it is passed, for `list --designs` and error messages.
    pub about: &'static str,
}

impl ServiceShape {
    /// One node called `name` with nothing else: no leader, no messages of its own, no
    /// expiry events, no reaper, no backups, fencing tokens. Set the rest with struct update
    /// syntax.
    pub fn single(name: &str) -> Self {
        ServiceShape {
            nodes: vec![name.to_owned()],
            has_leader: false,
            node_messages: Vec::new(),
            node_expires: false,
            reaps: false,
            backups: Vec::new(),
            tokens: TokenKind::Fencing,
            safepoints: &[],
        }
    }

    /// Nodes `{prefix}-1` to `{prefix}-{count}`.
    pub fn numbered(prefix: &str, count: u64) -> Vec<String> {
        (1..=count).map(|i| format!("{prefix}-{i}")).collect()
    }
}

/// The knobs many designs share, read the same way everywhere.
impl Knobs {
    /// `fsync` (`"always"`, `"periodic"` or `"never"`, default `"always"`) and, with
    /// `"periodic"`, the period `fsync_every_ms` (required then, refused otherwise).
    pub fn fsync(&mut self) -> Result<FsyncPolicy, KnobError> {
        #[derive(Clone, Copy, PartialEq)]
        enum Word {
            Always,
            Periodic,
            Never,
        }
        let options = [
            ("always", Word::Always),
            ("periodic", Word::Periodic),
            ("never", Word::Never),
        ];
        let word = self.choice("fsync", &options, Word::Always)?;
        let every = self.optional_integer("fsync_every_ms", 1)?;
        match (word, every) {
            (Word::Periodic, Some(every_ms)) => Ok(FsyncPolicy::Periodic { every_ms }),
            (Word::Periodic, None) => Err(KnobError {
                // At `fsync`, which is what the period belongs to, under its own name.
                span: self.span("fsync"),
                field: "fsync".to_owned(),
                message: "fsync = \"periodic\" needs `fsync_every_ms`".to_owned(),
            }),
            (_, Some(_)) => {
                Err(self.error("fsync_every_ms", "only used with fsync = \"periodic\""))
            }
            (Word::Always, None) => Ok(FsyncPolicy::Always),
            (Word::Never, None) => Ok(FsyncPolicy::Never),
        }
    }

    /// A design of one node refuses `replicas`, with the same words whichever design it is.
    pub fn one_node(&self) -> Result<(), KnobError> {
        if self.is_given("replicas") {
            return Err(self.error(
                "replicas",
                "this lock service has one node; leave `replicas` out",
            ));
        }
        Ok(())
    }

    /// `expiry_clock`: the clock a node judges expiry by (`"monotonic"` or `"wall"`).
    pub fn expiry_clock(&mut self, default: Clock) -> Result<Clock, KnobError> {
        let options = [("monotonic", Clock::Monotonic), ("wall", Clock::Wall)];
        self.choice("expiry_clock", &options, default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs(source: &str) -> Knobs {
        Knobs::from_toml(source).expect("test source parses")
    }

    #[test]
    fn fsync_periodic_needs_its_period_and_only_it_takes_one() {
        assert_eq!(
            knobs("fsync = \"periodic\"\nfsync_every_ms = 100").fsync(),
            Ok(FsyncPolicy::Periodic { every_ms: 100 })
        );
        let e = knobs("fsync = \"periodic\"").fsync().unwrap_err();
        assert_eq!(e.field, "fsync");
        assert_eq!(e.message, "fsync = \"periodic\" needs `fsync_every_ms`");
        let e = knobs("fsync = \"never\"\nfsync_every_ms = 100")
            .fsync()
            .unwrap_err();
        assert_eq!(e.message, "only used with fsync = \"periodic\"");
        let mut defaults = knobs("");
        assert_eq!(defaults.fsync(), Ok(FsyncPolicy::Always));
        assert_eq!(defaults.expiry_clock(Clock::Wall), Ok(Clock::Wall));
        assert_eq!(
            defaults.resolved().to_string(),
            "fsync = \"always\"\nexpiry_clock = \"wall\"\n"
        );
    }

    /// A resource that keeps nothing.
    struct Null;
    impl crate::FencedResource for Null {
        type Config = ();
        fn new(_: &()) -> Self {
            Null
        }
        fn write(&mut self, _: &str, _: u64, _: &str) -> crate::WriteDecision {
            crate::WriteDecision::Now(crate::WriteOutcome::Accepted { highest: 0 })
        }
        fn apply_due(&mut self, _: &str, _: u64, _: &str) -> crate::WriteOutcome {
            crate::WriteOutcome::Accepted { highest: 0 }
        }
        fn delete(&mut self, _: &str, _: Option<u64>) -> crate::WriteOutcome {
            crate::WriteOutcome::Accepted { highest: 0 }
        }
        fn read(&self, _: &str) -> crate::ReadValue {
            crate::ReadValue::default()
        }
    }

    struct Toy;
    impl crate::ResourceDesign for Toy {
        type State = Null;
        fn mode(&self) -> &'static str {
            "toy"
        }
        fn about(&self) -> &'static str {
            "a toy"
        }
        fn knob_names(&self) -> &'static [&'static str] {
            &[]
        }
        fn config(&self, _: &mut Knobs) -> Result<(), KnobError> {
            Ok(())
        }
    }

    #[test]
    fn a_catalog_finds_resources_by_mode() {
        let catalog = Catalog::default().with_resource(&Toy);
        let designs: &dyn Designs = &catalog;
        assert_eq!(
            designs.find_resource("toy").map(|d| d.about()),
            Some("a toy")
        );
        assert!(designs.find_resource("raft").is_none());
        assert_eq!(
            ServiceShape::numbered("lease", 3),
            ["lease-1", "lease-2", "lease-3"]
        );
    }
}
