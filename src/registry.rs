//! The design registry: which design a scenario's `[lock_service] kind` runs, and how each
//! design's nodes and client protocol get their settings from the scenario.
//!
//! The simulator (`fencesim-sim`) depends on no design: [`simulate`] hands it the design of
//! the scenario's kind as a [`SimDesign`], a [`NodeDesign`] of the design's node type and
//! client protocol. Every built-in design is registered here and nowhere else in the sim.
//! Their knobs are still parsed and validated by `fencesim-scenario` (the registry does not
//! own them yet, see docs/design-api.md).

use fencesim_design::{ClientInfo, Clock, FsyncPolicy};
use fencesim_history::TokenOrder;
use fencesim_lease::primary_backup::{PrimaryBackupConfig, Replication};
use fencesim_lease::replicated::{LeaderChange, ReplicationPolicy};
use fencesim_lease::{
    AcquireMode, LeaseClient, LeaseClientConfig, LeaseNodeConfig, PrimaryBackupNodeConfig,
    RaftNodeConfig, Reaper, ReleaseMode, TokenCounter,
};
use fencesim_lease::{LeaseNode, PrimaryBackupNode, RaftNode};
use fencesim_lease_record::StoreNode;
use fencesim_lease_record::{ExpiryJudgement, RecordClient, Takeover};
use fencesim_redlock::RedisServer;
use fencesim_redlock::{RedisConfig, RedlockClient, RedlockClientConfig, TokenSource};
use fencesim_scenario as scenario;
use fencesim_scenario::LockServiceKind;
use fencesim_scenario::{
    ClientSpec, DeadlineFrom, ExpiryJudgedBy, Fsync, LockServiceSpec, OnLostLease, Reclaim,
    RenewAfterFailure, Scenario,
};
use fencesim_sim::{NodeDesign, RunOutcome, SimDesign};

/// The single lease service (`kind = "single"`).
static SINGLE: NodeDesign<LeaseNode, LeaseClient> = NodeDesign {
    node_config: lease_node_config,
    client: lease_client,
    has_leader: false,
    token_order: fencing_tokens,
};
/// Raft replicas (`kind = "raft"`).
static RAFT: NodeDesign<RaftNode, LeaseClient> = NodeDesign {
    node_config: raft_node_config,
    client: lease_client,
    has_leader: true,
    token_order: fencing_tokens,
};
/// A primary and its backup (`kind = "primary-backup"`).
static PRIMARY_BACKUP: NodeDesign<PrimaryBackupNode, LeaseClient> = NodeDesign {
    node_config: primary_backup_config,
    client: lease_client,
    has_leader: true,
    token_order: fencing_tokens,
};
/// Redlock over independent Redis nodes (`kind = "redlock"`).
static REDLOCK: NodeDesign<RedisServer, RedlockClient> = NodeDesign {
    node_config: redis_config,
    client: redlock_client,
    has_leader: false,
    token_order: redlock_token_order,
};
/// A lease record in a compare-and-swap store (`kind = "lease-record"`).
static LEASE_RECORD: NodeDesign<StoreNode, RecordClient> = NodeDesign {
    node_config: no_config,
    client: record_client,
    has_leader: false,
    token_order: fencing_tokens,
};

/// The design a scenario of `kind` runs.
pub fn design(kind: LockServiceKind) -> &'static dyn SimDesign {
    match kind {
        LockServiceKind::Single => &SINGLE,
        LockServiceKind::Raft => &RAFT,
        LockServiceKind::PrimaryBackup => &PRIMARY_BACKUP,
        LockServiceKind::Redlock => &REDLOCK,
        LockServiceKind::LeaseRecord => &LEASE_RECORD,
    }
}

/// Simulate `scenario` under root seed `seed` with its design (see [`fencesim_sim::run`]).
pub fn simulate(scenario: &Scenario, seed: u64) -> RunOutcome {
    fencesim_sim::run(scenario, seed, design(scenario.lock_service.kind))
}

/// A design that hands out fencing tokens: they compare by value.
fn fencing_tokens(_: &Scenario) -> TokenOrder {
    TokenOrder::Value
}

/// Redlock clients that present their lock's random value write opaque tokens, ordered only
/// by when they were acquired; with a counter token they are fencing tokens.
fn redlock_token_order(scenario: &Scenario) -> TokenOrder {
    match scenario.lock_service.redlock {
        Some(r) if r.token_source == scenario::TokenSource::Random => TokenOrder::Acquisition,
        _ => TokenOrder::Value,
    }
}

/// The lease-record store has no settings of its own.
fn no_config(_: &Scenario) {}

/// A lease-record candidate.
fn record_client(scenario: &Scenario, spec: &ClientSpec, info: ClientInfo) -> RecordClient {
    let judgement = match scenario.lock_service.expiry_judged_by {
        Some(ExpiryJudgedBy::OwnDuration) => ExpiryJudgement::OwnDuration,
        Some(ExpiryJudgedBy::RecordedDuration) | None => ExpiryJudgement::RecordedDuration,
    };
    let takeover = match spec.takeover {
        fencesim_scenario::Takeover::CompareAndSwap => Takeover::CompareAndSwap,
        fencesim_scenario::Takeover::Unconditional => Takeover::Unconditional,
    };
    RecordClient::new(info, judgement, takeover)
}

/// A Redlock client.
fn redlock_client(scenario: &Scenario, _: &ClientSpec, info: ClientInfo) -> RedlockClient {
    let spec = scenario
        .lock_service
        .redlock
        .expect("a redlock scenario has its redlock settings");
    let config = RedlockClientConfig {
        drift_ppm: spec.drift_ppm,
        recheck_elapsed: spec.recheck_elapsed,
        node_timeout_ms: spec.node_timeout_ms,
        token_source: match spec.token_source {
            fencesim_scenario::TokenSource::Random => TokenSource::Random,
            fencesim_scenario::TokenSource::Counter => TokenSource::Counter,
        },
    };
    RedlockClient::new(info, config)
}

/// A client of a lease service (single, primary-backup, Raft).
fn lease_client(scenario: &Scenario, spec: &ClientSpec, info: ClientInfo) -> LeaseClient {
    let config = LeaseClientConfig {
        reclaim_by_name: spec.reclaim == Reclaim::ByName,
        keep_role_when_lost: spec.on_lost_lease == OnLostLease::KeepRole,
        deadline_from_notice: spec.deadline_from == DeadlineFrom::Notice,
        stop_renewing_after_failure: spec.renew_after_failure == RenewAfterFailure::Stop,
        max_ttl_ms: scenario.lock_service.max_ttl_ms,
    };
    LeaseClient::new(info, config)
}

/// The settings of a Redlock scenario's `redis-N` nodes.
fn redis_config(scenario: &Scenario) -> RedisConfig {
    let spec = &scenario.lock_service;
    RedisConfig {
        fsync: fsync_policy(spec),
        restart_delay_ms: spec.redlock.map_or(0, |r| r.restart_delay_ms),
        expiry_clock: expiry_clock(spec),
    }
}

/// The settings of the single lease service's node.
fn lease_node_config(scenario: &Scenario) -> LeaseNodeConfig {
    let spec = &scenario.lock_service;
    LeaseNodeConfig {
        max_ttl_ms: spec.max_ttl_ms,
        fsync: fsync_policy(spec),
        token_counter: match spec.token_counter {
            scenario::TokenCounter::Durable => TokenCounter::Durable,
            scenario::TokenCounter::Store => TokenCounter::Store,
            scenario::TokenCounter::Memory => TokenCounter::Memory,
        },
        restart_grace_ms: spec.restart_grace_ms,
        expiry_clock: expiry_clock(spec),
        acquire: match spec.acquire {
            scenario::AcquireMode::FailFast => AcquireMode::FailFast,
            scenario::AcquireMode::Queue => AcquireMode::Queue,
            scenario::AcquireMode::QueueGrantToExpiredWaiter => {
                AcquireMode::QueueGrantToExpiredWaiter
            }
        },
        release: release_mode(spec),
        reaper: match spec.reaper {
            scenario::Reaper::RespectsLeases => Reaper::RespectsLeases,
            scenario::Reaper::IgnoresLeases => Reaper::IgnoresLeases,
        },
    }
}

/// The settings of a primary-backup scenario's `lease-1` and `lease-2`.
fn primary_backup_config(scenario: &Scenario) -> PrimaryBackupNodeConfig {
    let spec = &scenario.lock_service;
    let pb = spec
        .primary_backup
        .expect("a primary-backup scenario has its primary-backup settings");
    PrimaryBackupNodeConfig {
        pair: PrimaryBackupConfig {
            replication: match pb.replication {
                scenario::Replication::Async => Replication::Async,
                scenario::Replication::Sync => Replication::Sync,
            },
            replication_lag_ms: pb.replication_lag_ms,
            failover_after_ms: pb.failover_after_ms,
        },
        max_ttl_ms: spec.max_ttl_ms,
        expiry_clock: expiry_clock(spec),
        release: release_mode(spec),
    }
}

/// Simulated ms per Raft tick.
pub const RAFT_TICK_MS: u64 = 100;
/// Ticks without a heartbeat before an election (so elections start after 1-2 s).
pub const RAFT_ELECTION_TICKS: usize = 10;
/// Ticks between Raft heartbeats.
pub const RAFT_HEARTBEAT_TICKS: usize = 3;
/// Ticks after Raft steps down during which the lessor still believes its replica leads.
pub const RAFT_LESSOR_CHECK_TICKS: u64 = 10;

/// The settings of a Raft scenario's `lease-N` replicas.
fn raft_node_config(scenario: &Scenario) -> RaftNodeConfig {
    let spec = &scenario.lock_service;
    RaftNodeConfig {
        policy: ReplicationPolicy {
            revoke_term_check: spec.revoke_term_check,
            leader_change: match spec.leader_change {
                scenario::LeaderChangeMode::Extend => LeaderChange::Extend,
                scenario::LeaderChangeMode::None => LeaderChange::None,
            },
        },
        max_ttl_ms: spec.max_ttl_ms,
        expiry_clock: expiry_clock(spec),
        tick_ms: RAFT_TICK_MS,
        election_ticks: RAFT_ELECTION_TICKS,
        heartbeat_ticks: RAFT_HEARTBEAT_TICKS,
        lessor_check_ticks: RAFT_LESSOR_CHECK_TICKS,
    }
}

/// The `release` knob.
fn release_mode(spec: &LockServiceSpec) -> ReleaseMode {
    match spec.release {
        scenario::ReleaseMode::CompareAndDelete => ReleaseMode::CompareAndDelete,
        scenario::ReleaseMode::Unconditional => ReleaseMode::Unconditional,
    }
}

/// The `fsync` and `fsync_every_ms` knobs.
fn fsync_policy(spec: &LockServiceSpec) -> FsyncPolicy {
    match (spec.fsync, spec.fsync_every_ms) {
        (Fsync::Always, _) => FsyncPolicy::Always,
        (Fsync::Periodic, Some(every_ms)) => FsyncPolicy::Periodic { every_ms },
        // Validation requires a period with `periodic`; without one nothing would sync.
        (Fsync::Periodic, None) | (Fsync::Never, _) => FsyncPolicy::Never,
    }
}

/// The `expiry_clock` knob.
fn expiry_clock(spec: &LockServiceSpec) -> Clock {
    match spec.expiry_clock {
        scenario::ExpiryClock::Wall => Clock::Wall,
        scenario::ExpiryClock::Monotonic => Clock::Monotonic,
    }
}
