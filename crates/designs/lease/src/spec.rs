//! The three lease services as designs ([`Design`]): their `kind`, their knobs (read from
//! `[lock_service]` and `[[clients]]` with located errors, once, when a scenario is parsed),
//! the shape of their service, and the node type and client protocol those settings build.

use fencesim_design::{
    ClientInfo, ClientWorkload, Clock, Design, KnobError, Knobs, MessageKind, SafeKnob, SafeValue,
    ServiceShape,
};

use crate::primary_backup::{PrimaryBackupConfig, Replication};
use crate::replicated::{LeaderChange, ReplicationPolicy};
use crate::{
    AcquireMode, LeaseClient, LeaseClientConfig, LeaseNode, LeaseNodeConfig, PrimaryBackupNode,
    PrimaryBackupNodeConfig, RaftNode, RaftNodeConfig, Reaper, ReleaseMode, TokenCounter,
};

/// The single lease service's one node.
pub const LEASE_SERVICE_NODE: &str = "lease-service";

/// Simulated ms per Raft tick.
pub const RAFT_TICK_MS: u64 = 100;
/// Ticks without a heartbeat before an election (so elections start after 1-2 s).
pub const RAFT_ELECTION_TICKS: usize = 10;
/// Ticks between Raft heartbeats.
pub const RAFT_HEARTBEAT_TICKS: usize = 3;
/// Ticks after Raft steps down during which the lessor still believes its replica leads.
pub const RAFT_LESSOR_CHECK_TICKS: u64 = 10;

/// The `[[clients]]` knobs of the lease services' client ([`LeaseClientConfig`](crate::LeaseClientConfig)'s
/// defect knobs, cases K09, K12, K13, K14).
pub const LEASE_CLIENT_KNOBS: &[&str] = &[
    "reclaim",
    "on_lost_lease",
    "deadline_from",
    "renew_after_failure",
];

/// The lease client's knob values claimed safe ([`fencesim_design::safe`]): each defect off,
/// and `renew_after_failure = "stop"` too, which only a client that does not check its own
/// lease acts on (K09 is masked by `validity_check`, which the claim assumes).
pub const LEASE_CLIENT_SAFE: &[SafeKnob] = &[
    SafeKnob {
        name: "deadline_from",
        values: &[SafeValue::Text("request")],
    },
    SafeKnob {
        name: "renew_after_failure",
        values: &[SafeValue::Text("retry"), SafeValue::Text("stop")],
    },
    SafeKnob {
        name: "reclaim",
        values: &[SafeValue::Text("by-session")],
    },
    SafeKnob {
        name: "on_lost_lease",
        values: &[SafeValue::Text("stop")],
    },
];

/// One `[[clients]]` table's knobs for the lease services' client: each defect knob (`true`)
/// or its correct default (`false`). `max_ttl_ms` is `[lock_service]`'s.
pub fn lease_client_settings(
    knobs: &mut Knobs,
    workload: &ClientWorkload,
    max_ttl_ms: u64,
) -> Result<LeaseClientConfig, KnobError> {
    let deadline_from_notice = defect_needing(
        knobs,
        "deadline_from",
        ["request", "notice"],
        workload.checks_validity,
        "a client with validity_check = false has no deadline of its own to count",
    )?;
    let stop_renewing_after_failure = defect_needing(
        knobs,
        "renew_after_failure",
        ["retry", "stop"],
        workload.renews,
        "a client without renew_ms never renews, so it has no keepalive to stop",
    )?;
    let reclaim_by_name = defect_needing(knobs, "reclaim", ["by-session", "by-name"], true, "")?;
    let keep_role_when_lost = defect_needing(
        knobs,
        "on_lost_lease",
        ["stop", "keep-role"],
        workload.renews,
        "a client without renew_ms is never told its lease is lost by a renewal",
    )?;
    Ok(LeaseClientConfig {
        reclaim_by_name,
        keep_role_when_lost,
        deadline_from_notice,
        stop_renewing_after_failure,
        max_ttl_ms,
    })
}

/// The client side of [`Design`] the three lease services share: their one client protocol
/// ([`LeaseClient`]) and its knobs ([`LEASE_CLIENT_KNOBS`], read by [`lease_client_settings`]).
macro_rules! lease_client_side {
    () => {
        type Client = LeaseClient;
        type ClientSettings = LeaseClientConfig;

        fn client_knob_names(&self) -> &'static [&'static str] {
            LEASE_CLIENT_KNOBS
        }

        fn safe_client_knobs(&self) -> &'static [SafeKnob] {
            LEASE_CLIENT_SAFE
        }

        fn client_settings(
            &self,
            knobs: &mut Knobs,
            workload: &ClientWorkload,
            max_ttl_ms: u64,
        ) -> Result<LeaseClientConfig, KnobError> {
            lease_client_settings(knobs, workload, max_ttl_ms)
        }

        fn client(_: &Self::Settings, client: &LeaseClientConfig, info: ClientInfo) -> LeaseClient {
            LeaseClient::new(info, client.clone())
        }
    };
}

/// A client defect knob named `[correct, defect]`: whether the defect is on. A defect that would
/// do nothing unless `needed` holds (the client renews, or keeps a deadline of its own) is
/// refused with `why`.
fn defect_needing(
    knobs: &mut Knobs,
    name: &str,
    [correct, defect]: [&str; 2],
    needed: bool,
    why: &str,
) -> Result<bool, KnobError> {
    let on = knobs.choice(name, &[(correct, false), (defect, true)], false)?;
    if on && !needed {
        return Err(knobs.error(name, why));
    }
    Ok(on)
}

/// `release`: how a release is matched to the lease it ends (K19's knob).
fn release(knobs: &mut Knobs) -> Result<ReleaseMode, KnobError> {
    let options = [
        ("compare-and-delete", ReleaseMode::CompareAndDelete),
        ("unconditional", ReleaseMode::Unconditional),
    ];
    knobs.choice("release", &options, ReleaseMode::CompareAndDelete)
}

/// One `lease-service` node with a lease table on its own disk (`kind = "single"`, the
/// default): etcd's lessor or a lock table on one database, without replication.
#[derive(Clone, Copy, Debug, Default)]
pub struct SingleDesign;

impl SingleDesign {
    /// Its knobs.
    pub const KNOBS: &'static [&'static str] = &[
        "fsync",
        "fsync_every_ms",
        "expiry_clock",
        "token_counter",
        "restart_grace_ms",
        "acquire",
        "reaper",
        "release",
    ];

    /// The node's settings from the knobs; `max_ttl_ms` is `[lock_service]`'s.
    fn node_settings(knobs: &mut Knobs, max_ttl_ms: u64) -> Result<LeaseNodeConfig, KnobError> {
        knobs.one_node()?;
        let fsync = knobs.fsync()?;
        let expiry_clock = knobs.expiry_clock(Clock::Monotonic)?;
        let counters = [
            ("durable", TokenCounter::Durable),
            ("store", TokenCounter::Store),
            ("memory", TokenCounter::Memory),
        ];
        let token_counter = knobs.choice("token_counter", &counters, TokenCounter::Durable)?;
        let restart_grace_ms = knobs.integer("restart_grace_ms", 0, 0)?;
        let modes = [
            ("fail-fast", AcquireMode::FailFast),
            ("queue", AcquireMode::Queue),
            (
                "queue-grant-to-expired-waiter",
                AcquireMode::QueueGrantToExpiredWaiter,
            ),
        ];
        let acquire = knobs.choice("acquire", &modes, AcquireMode::FailFast)?;
        let reapers = [
            ("respects-leases", Reaper::RespectsLeases),
            ("ignores-leases", Reaper::IgnoresLeases),
        ];
        let reaper = knobs.choice("reaper", &reapers, Reaper::RespectsLeases)?;
        Ok(LeaseNodeConfig {
            max_ttl_ms,
            fsync,
            token_counter,
            restart_grace_ms,
            expiry_clock,
            acquire,
            release: release(knobs)?,
            reaper,
        })
    }
}

impl Design for SingleDesign {
    type Node = LeaseNode;
    type Settings = LeaseNodeConfig;

    fn kind(&self) -> &'static str {
        "single"
    }

    fn about(&self) -> &'static str {
        "one lease-service node with a lease table on its own disk"
    }

    fn knob_names(&self) -> &'static [&'static str] {
        Self::KNOBS
    }

    /// Synced writes, a durable token counter, expiry by the monotonic clock, a reaper that
    /// waits for leases and a compare-and-delete release; either acquire that does not hand a
    /// queued lock to a waiter whose lease already expired.
    fn safe_knobs(&self) -> &'static [SafeKnob] {
        &[
            SafeKnob {
                name: "fsync",
                values: &[SafeValue::Text("always")],
            },
            SafeKnob {
                name: "expiry_clock",
                values: &[SafeValue::Text("monotonic")],
            },
            SafeKnob {
                name: "token_counter",
                values: &[SafeValue::Text("durable")],
            },
            SafeKnob {
                name: "acquire",
                values: &[SafeValue::Text("fail-fast"), SafeValue::Text("queue")],
            },
            SafeKnob {
                name: "reaper",
                values: &[SafeValue::Text("respects-leases")],
            },
            SafeKnob {
                name: "release",
                values: &[SafeValue::Text("compare-and-delete")],
            },
        ]
    }

    lease_client_side!();

    fn settings(
        &self,
        knobs: &mut Knobs,
        max_ttl_ms: u64,
    ) -> Result<(LeaseNodeConfig, ServiceShape), KnobError> {
        let shape = ServiceShape {
            node_expires: true,
            reaps: true,
            backups: vec![LEASE_SERVICE_NODE.to_owned()],
            ..ServiceShape::single(LEASE_SERVICE_NODE)
        };
        Ok((Self::node_settings(knobs, max_ttl_ms)?, shape))
    }

    fn node_config(settings: &LeaseNodeConfig) -> LeaseNodeConfig {
        *settings
    }
}

/// Raft replicas `lease-1`..`lease-N` (tikv raft-rs) with a lessor on the leader, as etcd's
/// leases are (`kind = "raft"`); the token is the log index of the committed acquire.
#[derive(Clone, Copy, Debug, Default)]
pub struct RaftDesign;

impl RaftDesign {
    /// Its knobs.
    pub const KNOBS: &'static [&'static str] = &[
        "replicas",
        "expiry_clock",
        "revoke_term_check",
        "leader_change",
    ];

    /// The replicas' settings and their number.
    fn node_settings(
        knobs: &mut Knobs,
        max_ttl_ms: u64,
    ) -> Result<(RaftNodeConfig, u64), KnobError> {
        let replicas = knobs.one_of("replicas", &[3, 5], 3, |n| {
            format!("expected 3 or 5 replicas, found {n}")
        })?;
        let expiry_clock = knobs.expiry_clock(Clock::Monotonic)?;
        let revoke_term_check = knobs.boolean("revoke_term_check", true)?;
        let changes = [
            ("extend", LeaderChange::Extend),
            ("none", LeaderChange::None),
        ];
        let leader_change = knobs.choice("leader_change", &changes, LeaderChange::Extend)?;
        let config = RaftNodeConfig {
            policy: ReplicationPolicy {
                revoke_term_check,
                leader_change,
            },
            max_ttl_ms,
            expiry_clock,
            tick_ms: RAFT_TICK_MS,
            election_ticks: RAFT_ELECTION_TICKS,
            heartbeat_ticks: RAFT_HEARTBEAT_TICKS,
            lessor_check_ticks: RAFT_LESSOR_CHECK_TICKS,
        };
        Ok((config, replicas))
    }
}

impl Design for RaftDesign {
    type Node = RaftNode;
    type Settings = RaftNodeConfig;

    fn kind(&self) -> &'static str {
        "raft"
    }

    fn about(&self) -> &'static str {
        "Raft replicas lease-1..N with a lessor on the leader; the token is the log index"
    }

    fn knob_names(&self) -> &'static [&'static str] {
        Self::KNOBS
    }

    /// Either size, expiry by the monotonic clock, revokes checked against the term and
    /// leases extended on a leader change (K08's knobs off).
    fn safe_knobs(&self) -> &'static [SafeKnob] {
        &[
            SafeKnob {
                name: "replicas",
                values: &[SafeValue::Integer(3), SafeValue::Integer(5)],
            },
            SafeKnob {
                name: "expiry_clock",
                values: &[SafeValue::Text("monotonic")],
            },
            SafeKnob {
                name: "revoke_term_check",
                values: &[SafeValue::Flag(true)],
            },
            SafeKnob {
                name: "leader_change",
                values: &[SafeValue::Text("extend")],
            },
        ]
    }

    lease_client_side!();

    fn settings(
        &self,
        knobs: &mut Knobs,
        max_ttl_ms: u64,
    ) -> Result<(RaftNodeConfig, ServiceShape), KnobError> {
        let (config, replicas) = Self::node_settings(knobs, max_ttl_ms)?;
        let shape = ServiceShape {
            nodes: ServiceShape::numbered("lease", replicas),
            has_leader: true,
            node_messages: vec![MessageKind::Raft, MessageKind::Redirect],
            node_expires: true,
            ..ServiceShape::single("")
        };
        Ok((config, shape))
    }

    fn node_config(settings: &RaftNodeConfig) -> RaftNodeConfig {
        *settings
    }
}

/// A primary `lease-1` and a backup `lease-2` that it replicates to, promoted when the primary
/// falls silent (Redis Sentinel, database-backed lock tables; case K06), `kind =
/// "primary-backup"`.
#[derive(Clone, Copy, Debug, Default)]
pub struct PrimaryBackupDesign;

impl PrimaryBackupDesign {
    /// Its knobs.
    pub const KNOBS: &'static [&'static str] = &[
        "replicas",
        "expiry_clock",
        "replication",
        "replication_lag_ms",
        "failover_after_ms",
    ];

    /// The pair's settings.
    fn node_settings(
        knobs: &mut Knobs,
        max_ttl_ms: u64,
    ) -> Result<PrimaryBackupNodeConfig, KnobError> {
        knobs.one_of("replicas", &[2], 2, |n| {
            format!("a primary-backup service has 2 nodes, found {n}")
        })?;
        let expiry_clock = knobs.expiry_clock(Clock::Monotonic)?;
        let modes = [("async", Replication::Async), ("sync", Replication::Sync)];
        let replication = knobs.choice("replication", &modes, Replication::Async)?;
        let replication_lag_ms = knobs.integer("replication_lag_ms", 1, 1_000)?;
        let failover_after_ms = knobs.integer("failover_after_ms", 1, 3_000)?;
        if failover_after_ms <= replication_lag_ms {
            // Point at whichever of the two the file set (the default of the other is implied).
            let at = if knobs.is_given("failover_after_ms") {
                "failover_after_ms"
            } else {
                "replication_lag_ms"
            };
            let m = format!(
                "must be greater than replication_lag_ms ({replication_lag_ms} ms): a backup \
                 would promote itself between two shipments"
            );
            return Err(KnobError {
                field: "failover_after_ms".to_owned(),
                ..knobs.error(at, m)
            });
        }
        Ok(PrimaryBackupNodeConfig {
            pair: PrimaryBackupConfig {
                replication,
                replication_lag_ms,
                failover_after_ms,
            },
            max_ttl_ms,
            expiry_clock,
            release: ReleaseMode::CompareAndDelete,
        })
    }
}

impl Design for PrimaryBackupDesign {
    type Node = PrimaryBackupNode;
    type Settings = PrimaryBackupNodeConfig;

    fn kind(&self) -> &'static str {
        "primary-backup"
    }

    fn about(&self) -> &'static str {
        "a primary lease-1 replicating to a backup lease-2, promoted when the primary is silent"
    }

    fn knob_names(&self) -> &'static [&'static str] {
        Self::KNOBS
    }

    lease_client_side!();

    fn settings(
        &self,
        knobs: &mut Knobs,
        max_ttl_ms: u64,
    ) -> Result<(PrimaryBackupNodeConfig, ServiceShape), KnobError> {
        let shape = ServiceShape {
            nodes: ServiceShape::numbered("lease", 2),
            has_leader: true,
            node_messages: vec![MessageKind::Replicate, MessageKind::Redirect],
            node_expires: true,
            ..ServiceShape::single("")
        };
        Ok((Self::node_settings(knobs, max_ttl_ms)?, shape))
    }

    fn node_config(settings: &PrimaryBackupNodeConfig) -> PrimaryBackupNodeConfig {
        *settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs(source: &str) -> Knobs {
        Knobs::from_toml(source).expect("test source parses")
    }

    #[test]
    fn the_single_service_reads_its_defect_knobs() {
        let mut k = knobs("token_counter = \"memory\"\nacquire = \"queue\"\nfsync = \"never\"");
        let config = SingleDesign::node_settings(&mut k, 20_000).unwrap();
        assert_eq!(config.token_counter, TokenCounter::Memory);
        assert_eq!(config.acquire, AcquireMode::Queue);
        assert_eq!(config.fsync, fencesim_design::FsyncPolicy::Never);
        assert_eq!(config.max_ttl_ms, 20_000);
        assert_eq!(config.reaper, Reaper::RespectsLeases);
        let e = SingleDesign::node_settings(&mut knobs("replicas = 3"), 1).unwrap_err();
        assert_eq!(
            e.message,
            "this lock service has one node; leave `replicas` out"
        );
    }

    #[test]
    fn a_client_defect_that_would_do_nothing_is_refused() {
        let renews = ClientWorkload {
            renews: true,
            checks_validity: true,
        };
        let mut k = knobs("on_lost_lease = \"keep-role\"\nreclaim = \"by-name\"");
        let config = lease_client_settings(&mut k, &renews, 9).unwrap();
        assert!(config.keep_role_when_lost && config.reclaim_by_name);
        assert!(!config.deadline_from_notice && !config.stop_renewing_after_failure);
        let idle = ClientWorkload::default();
        let e = lease_client_settings(&mut knobs("on_lost_lease = \"keep-role\""), &idle, 9)
            .unwrap_err();
        assert_eq!(
            e.message,
            "a client without renew_ms is never told its lease is lost by a renewal"
        );
        // The correct value is accepted whatever the workload.
        assert!(lease_client_settings(&mut knobs("deadline_from = \"request\""), &idle, 9).is_ok());
    }

    #[test]
    fn raft_has_three_or_five_replicas_and_a_leader() {
        let (_, shape) = RaftDesign.settings(&mut knobs("replicas = 5"), 1).unwrap();
        assert_eq!(shape.nodes.len(), 5);
        assert!(shape.has_leader);
        let e = RaftDesign
            .settings(&mut knobs("replicas = 4"), 1)
            .unwrap_err();
        assert_eq!(e.message, "expected 3 or 5 replicas, found 4");
    }

    #[test]
    fn a_backup_must_not_promote_itself_between_shipments() {
        let source = "replication_lag_ms = 5000";
        let e = PrimaryBackupDesign
            .settings(&mut knobs(source), 1)
            .unwrap_err();
        assert_eq!(e.field, "failover_after_ms");
        assert_eq!(
            &source[e.span.clone()],
            "5000",
            "points at the knob the file set"
        );
    }
}
