//! The design registry: which design a scenario's `[lock_service] kind` names, what the
//! scenario parser asks of it, and how the simulator runs it.
//!
//! Each design is registered once, as a [`Registered`] pair: its [`DesignSpec`] (its kind, its
//! knobs read with located errors, the shape of its service), which the scenario parser asks,
//! and its [`SimDesign`] (its node type and client protocol, with the functions that build
//! their settings from the scenario's resolved knobs), which [`simulate`] hands the simulator.
//! Both sides read the knobs through the design's own `settings` function, so what a file says
//! and what the nodes do cannot drift apart. The simulator (`fencesim-sim`) and the scenario
//! crate depend on no design; this file and the design crates are the only places that name
//! one.

use std::sync::OnceLock;

use fencesim_live::form::{LiveForms, LockServiceForm, ResourceForm};

use fencesim_design::{ClientInfo, DesignSpec, Designs, Knobs, ResourceModeSpec};
use fencesim_lease::{
    lease_client_settings, LeaseClient, LeaseNode, LeaseNodeConfig, PrimaryBackupDesign,
    PrimaryBackupNode, PrimaryBackupNodeConfig, RaftDesign, RaftNode, RaftNodeConfig, SingleDesign,
};
use fencesim_lease_record::{record_client_settings, LeaseRecordDesign, RecordClient, StoreNode};
use fencesim_redlock::{RedisConfig, RedisServer, RedlockClient, RedlockDesign, RedlockSettings};
use fencesim_resource::{FencedStore, StoreConfig, StoreSpec, EQUALITY, FENCED, UNFENCED};
use fencesim_scenario::{ClientSpec, Scenario};
use fencesim_sim::{NodeDesign, ResourceDesign, RunOutcome, SimDesign, SimResource};

/// One design: what the scenario parser asks of it, and how the simulator runs it.
#[derive(Clone, Copy)]
pub struct Registered {
    /// Its kind, knobs and service shape.
    pub spec: &'static dyn DesignSpec,
    /// Its nodes and clients in the simulator.
    pub sim: &'static dyn SimDesign,
}

/// One resource: what the scenario parser asks of it, and how the simulator runs it.
#[derive(Clone, Copy)]
pub struct RegisteredResource {
    /// Its mode and knobs.
    pub spec: &'static dyn ResourceModeSpec,
    /// Its `resource` node in the simulator.
    pub sim: &'static dyn SimResource,
}

/// The designs and resources a scenario may name.
#[derive(Clone, Default)]
pub struct Registry {
    designs: Vec<Registered>,
    resources: Vec<RegisteredResource>,
    /// The designs' and resources' live forms (live mode), by kind and mode.
    live: LiveForms,
}

impl Registry {
    /// The five built-in designs: `single` (the default), `raft`, `redlock`,
    /// `primary-backup` and `lease-record`, in that order.
    pub fn built_in() -> Self {
        let designs = vec![
            Registered {
                spec: &SingleDesign,
                sim: &SINGLE,
            },
            Registered {
                spec: &RaftDesign,
                sim: &RAFT,
            },
            Registered {
                spec: &RedlockDesign,
                sim: &REDLOCK,
            },
            Registered {
                spec: &PrimaryBackupDesign,
                sim: &PRIMARY_BACKUP,
            },
            Registered {
                spec: &LeaseRecordDesign,
                sim: &LEASE_RECORD,
            },
        ];
        let resources = vec![
            RegisteredResource {
                spec: &FENCED,
                sim: &FENCED_STORE,
            },
            RegisteredResource {
                spec: &UNFENCED,
                sim: &UNFENCED_STORE,
            },
            RegisteredResource {
                spec: &EQUALITY,
                sim: &EQUALITY_STORE,
            },
        ];
        // Each filed under its design's own kind and its resource's own mode.
        let live = LiveForms {
            lock_services: vec![
                (SingleDesign.kind(), fencesim_lease::live::SINGLE_LIVE),
                (RedlockDesign.kind(), fencesim_redlock::live::REDLOCK_LIVE),
            ],
            resources: vec![
                (FENCED.mode(), fencesim_resource::live::FENCED_LIVE),
                (UNFENCED.mode(), fencesim_resource::live::UNFENCED_LIVE),
            ],
        };
        Registry {
            designs,
            resources,
            live,
        }
    }

    /// Add the live form of design `spec` (replacing one for the same kind): how `fencesim
    /// live` runs the design against real servers (docs/live.md).
    pub fn with_live_lock_service(mut self, spec: &dyn DesignSpec, form: LockServiceForm) -> Self {
        let kind = spec.kind();
        self.live.lock_services.retain(|(k, _)| *k != kind);
        self.live.lock_services.push((kind, form));
        self
    }

    /// Add the live form of resource `spec` (replacing one for the same mode).
    pub fn with_live_resource(mut self, spec: &dyn ResourceModeSpec, form: ResourceForm) -> Self {
        let mode = spec.mode();
        self.live.resources.retain(|(m, _)| *m != mode);
        self.live.resources.push((mode, form));
        self
    }

    /// The live forms this registry knows.
    pub fn live(&self) -> &LiveForms {
        &self.live
    }

    /// How the simulator runs the resource of `mode`, if there is one.
    pub fn resource_sim(&self, mode: &str) -> Option<&'static dyn SimResource> {
        self.resources
            .iter()
            .find(|r| r.spec.mode() == mode)
            .map(|r| r.sim)
    }

    /// Add lock design `spec`, run by `sim` (a [`NodeDesign`] of its node type and client
    /// protocol), replacing a design of the same kind. Statics serve as the `'static`
    /// references (as the built-in designs' do), or `Box::leak` of values made at run time.
    pub fn with_design(
        mut self,
        spec: &'static dyn DesignSpec,
        sim: &'static dyn SimDesign,
    ) -> Self {
        self.designs.retain(|d| d.spec.kind() != spec.kind());
        self.designs.push(Registered { spec, sim });
        self
    }

    /// Add resource `spec`, run by `sim` (a [`ResourceDesign`] of its state machine),
    /// replacing a resource of the same mode.
    pub fn with_resource(
        mut self,
        spec: &'static dyn ResourceModeSpec,
        sim: &'static dyn SimResource,
    ) -> Self {
        self.resources.retain(|r| r.spec.mode() != spec.mode());
        self.resources.push(RegisteredResource { spec, sim });
        self
    }

    /// How the simulator runs the design of `kind`, if there is one.
    pub fn sim(&self, kind: &str) -> Option<&'static dyn SimDesign> {
        self.designs
            .iter()
            .find(|d| d.spec.kind() == kind)
            .map(|d| d.sim)
    }
}

impl Designs for Registry {
    fn find(&self, kind: &str) -> Option<&dyn DesignSpec> {
        self.designs
            .iter()
            .find(|d| d.spec.kind() == kind)
            .map(|d| d.spec)
    }

    fn all(&self) -> Vec<&dyn DesignSpec> {
        self.designs.iter().map(|d| d.spec).collect()
    }

    fn find_resource(&self, mode: &str) -> Option<&dyn ResourceModeSpec> {
        self.resources
            .iter()
            .find(|r| r.spec.mode() == mode)
            .map(|r| r.spec)
    }

    fn all_resources(&self) -> Vec<&dyn ResourceModeSpec> {
        self.resources.iter().map(|r| r.spec).collect()
    }
}

/// The registry every command, [`crate::check_scenario`], [`crate::parse_scenario`] and
/// [`simulate`] of this process use: set once by [`install`], else the built-in designs.
static ACTIVE: OnceLock<Registry> = OnceLock::new();

/// Make `registry` the one this process uses ([`active`]), before any scenario is parsed: a
/// user's `main` adds its designs to the built-ins and then runs [`crate::cli::main`], and a
/// user's tests call it at the top of each test. The first call wins; a later one (or one
/// after a scenario was parsed with the built-in designs) changes nothing and hands its
/// registry back, so every test of a suite should install the same designs.
///
/// ```ignore
/// fencesim::registry::install(
///     Registry::built_in().with_design(&MyDesign, &MY_SIM),
/// ).ok();
/// ```
///
/// # Errors
/// A registry is already active: `registry` is returned unused.
pub fn install(registry: Registry) -> Result<(), Registry> {
    let mut given = Some(registry);
    ACTIVE.get_or_init(|| given.take().expect("taken once"));
    match given {
        None => Ok(()),
        Some(unused) => Err(unused),
    }
}

/// The registry in use: the one [`install`]ed, else the built-in designs.
pub fn active() -> &'static Registry {
    ACTIVE.get_or_init(Registry::built_in)
}

/// Simulate `scenario` under root seed `seed` with its design (see [`fencesim_sim::run`]).
///
/// # Panics
/// If no design of the [`active`] registry has the scenario's kind, or no resource its mode:
/// parsing refuses such a scenario.
pub fn simulate(scenario: &Scenario, seed: u64) -> RunOutcome {
    let (kind, mode) = (&scenario.lock_service.kind, &scenario.resource.mode);
    let design = active()
        .sim(kind)
        .unwrap_or_else(|| panic!("no design of kind {kind:?}: the scenario was not parsed"));
    let resource = active()
        .resource_sim(mode)
        .unwrap_or_else(|| panic!("no resource of mode {mode:?}: the scenario was not parsed"));
    fencesim_sim::run(scenario, seed, design, resource)
}

/// The store fenced by token (`mode = "fenced"`).
static FENCED_STORE: ResourceDesign<FencedStore> = ResourceDesign {
    config: |s| store_config(&FENCED, s),
};
/// The store that accepts every write (`mode = "unfenced"`).
static UNFENCED_STORE: ResourceDesign<FencedStore> = ResourceDesign {
    config: |s| store_config(&UNFENCED, s),
};
/// The store that compares opaque values (`mode = "equality"`).
static EQUALITY_STORE: ResourceDesign<FencedStore> = ResourceDesign {
    config: |s| store_config(&EQUALITY, s),
};

/// A store's settings from the scenario's resolved `[resource]` knobs.
fn store_config(spec: &StoreSpec, scenario: &Scenario) -> StoreConfig {
    let read = spec.settings(&mut Knobs::from_resolved(&scenario.resource.knobs));
    accepted(scenario, read)
}

/// The single lease service (`kind = "single"`).
static SINGLE: NodeDesign<LeaseNode, LeaseClient> = NodeDesign {
    node_config: lease_node_config,
    client: lease_client,
};
/// Raft replicas (`kind = "raft"`).
static RAFT: NodeDesign<RaftNode, LeaseClient> = NodeDesign {
    node_config: raft_node_config,
    client: lease_client,
};
/// A primary and its backup (`kind = "primary-backup"`).
static PRIMARY_BACKUP: NodeDesign<PrimaryBackupNode, LeaseClient> = NodeDesign {
    node_config: primary_backup_config,
    client: lease_client,
};
/// Redlock over independent Redis nodes (`kind = "redlock"`).
static REDLOCK: NodeDesign<RedisServer, RedlockClient> = NodeDesign {
    node_config: redis_config,
    client: redlock_client,
};
/// A lease record in a compare-and-swap store (`kind = "lease-record"`).
static LEASE_RECORD: NodeDesign<StoreNode, RecordClient> = NodeDesign {
    node_config: no_config,
    client: record_client,
};

/// The scenario's resolved knobs, read again by a design's `settings`. Parsing accepted them,
/// so reading them cannot fail unless the scenario was built by hand around the parser.
fn knobs(scenario: &Scenario) -> Knobs {
    Knobs::from_resolved(&scenario.lock_service.knobs)
}

/// A design's settings from knobs the parser accepted.
fn accepted<T>(scenario: &Scenario, read: Result<T, fencesim_design::KnobError>) -> T {
    read.unwrap_or_else(|e| {
        panic!(
            "scenario {:?}: knob `{}`: {} (the knobs were not parsed)",
            scenario.name, e.field, e.message
        )
    })
}

/// The single lease service's node.
fn lease_node_config(scenario: &Scenario) -> LeaseNodeConfig {
    let max_ttl_ms = scenario.lock_service.max_ttl_ms;
    accepted(
        scenario,
        SingleDesign::settings(&mut knobs(scenario), max_ttl_ms),
    )
}

/// A Raft scenario's `lease-N` replicas.
fn raft_node_config(scenario: &Scenario) -> RaftNodeConfig {
    let max_ttl_ms = scenario.lock_service.max_ttl_ms;
    accepted(
        scenario,
        RaftDesign::settings(&mut knobs(scenario), max_ttl_ms),
    )
    .0
}

/// A primary-backup scenario's `lease-1` and `lease-2`.
fn primary_backup_config(scenario: &Scenario) -> PrimaryBackupNodeConfig {
    let max_ttl_ms = scenario.lock_service.max_ttl_ms;
    accepted(
        scenario,
        PrimaryBackupDesign::settings(&mut knobs(scenario), max_ttl_ms),
    )
}

/// A Redlock scenario's settings.
fn redlock_settings(scenario: &Scenario) -> RedlockSettings {
    accepted(scenario, RedlockDesign::settings(&mut knobs(scenario)))
}

/// A Redlock scenario's `redis-N` nodes.
fn redis_config(scenario: &Scenario) -> RedisConfig {
    redlock_settings(scenario).node
}

/// The lease-record store has no settings of its own.
fn no_config(_: &Scenario) {}

/// A lease-record candidate.
fn record_client(scenario: &Scenario, spec: &ClientSpec, info: ClientInfo) -> RecordClient {
    let judgement = accepted(scenario, LeaseRecordDesign::settings(&mut knobs(scenario)));
    let takeover = accepted(scenario, record_client_settings(&mut client_knobs(spec)));
    RecordClient::new(info, judgement, takeover)
}

/// A Redlock client.
fn redlock_client(scenario: &Scenario, _: &ClientSpec, info: ClientInfo) -> RedlockClient {
    RedlockClient::new(info, redlock_settings(scenario).client)
}

/// A client of a lease service (single, primary-backup, Raft).
fn lease_client(scenario: &Scenario, spec: &ClientSpec, info: ClientInfo) -> LeaseClient {
    let max_ttl_ms = scenario.lock_service.max_ttl_ms;
    let read = lease_client_settings(&mut client_knobs(spec), &spec.workload(), max_ttl_ms);
    LeaseClient::new(info, accepted(scenario, read))
}

/// A client's resolved knobs, read again by its design's client settings.
fn client_knobs(spec: &ClientSpec) -> Knobs {
    Knobs::from_resolved(&spec.knobs)
}
