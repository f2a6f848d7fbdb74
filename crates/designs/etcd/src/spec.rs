//! The etcd design as a [`Design`]: its `kind`, its knobs, the shape of its service (members
//! `etcd-1`..`etcd-N`, one leading), and the member and client those settings build.

use fencesim_design::{
    ClientInfo, ClientWorkload, Clock, Design, KnobError, Knobs, MessageKind, SafeKnob, SafeValue,
    Safepoint, SafepointSide, ServiceShape,
};
use fencesim_lease::{
    lease_client_settings, LeaseClient, LeaseClientConfig, LEASE_CLIENT_KNOBS, LEASE_CLIENT_SAFE,
};
use fencesim_raft::{
    RaftPeer, RaftTiming, RAFT_ELECTION_TICKS, RAFT_HEARTBEAT_TICKS, RAFT_LESSOR_CHECK_TICKS,
    RAFT_TICK_MS,
};

use crate::store::EtcdPolicy;
use crate::{EtcdNode, EtcdNodeConfig};

/// The client's point in time when its lock call was answered that it blocks behind an
/// earlier key: a pause here stops its session's keepalives while it waits, which is how
/// etcd 3.4.3's lock-after-expiry defect is reached.
pub const LOCK_BLOCKED: Safepoint = Safepoint {
    name: "lock-blocked",
    side: SafepointSide::Client,
    about: "its lock call blocks behind an earlier key; it waits for its turn, keeping its session alive",
};

/// etcd's lock API on raft-rs members `etcd-1`..`etcd-N` (`kind = "etcd"`); the token is the
/// lock key's create revision. The session lease's TTL is the client's `ttl_ms`, its keepalive
/// interval the client's `renew_ms`.
#[derive(Clone, Copy, Debug, Default)]
pub struct EtcdDesign;

impl EtcdDesign {
    /// Its knobs.
    pub const KNOBS: &'static [&'static str] = &["members", "lock_checks_own_key"];
}

impl Design for EtcdDesign {
    type Node = EtcdNode;
    type Settings = EtcdNodeConfig;

    fn kind(&self) -> &'static str {
        "etcd"
    }

    fn about(&self) -> &'static str {
        "etcd's leases and v3 lock recipe on Raft members etcd-1..N; the token is the key's create revision"
    }

    fn knob_names(&self) -> &'static [&'static str] {
        Self::KNOBS
    }

    /// Any cluster size, and a lock call that checks its own key when its turn comes.
    fn safe_knobs(&self) -> &'static [SafeKnob] {
        &[
            SafeKnob {
                name: "members",
                values: &[
                    SafeValue::Integer(1),
                    SafeValue::Integer(3),
                    SafeValue::Integer(5),
                ],
            },
            SafeKnob {
                name: "lock_checks_own_key",
                values: &[SafeValue::Flag(true)],
            },
        ]
    }

    type Client = LeaseClient<RaftPeer>;
    type ClientSettings = LeaseClientConfig;

    fn client_knob_names(&self) -> &'static [&'static str] {
        LEASE_CLIENT_KNOBS
    }

    fn safe_client_knobs(&self) -> &'static [SafeKnob] {
        LEASE_CLIENT_SAFE
    }

    /// The lease services' client, whose session lease stays alive while its lock call blocks
    /// (etcd's clientv3 session).
    fn client_settings(
        &self,
        knobs: &mut Knobs,
        workload: &ClientWorkload,
        max_ttl_ms: u64,
    ) -> Result<LeaseClientConfig, KnobError> {
        Ok(LeaseClientConfig {
            keepalive_while_queued: true,
            queued_safepoint: Some(LOCK_BLOCKED.name),
            ..lease_client_settings(knobs, workload, max_ttl_ms)?
        })
    }

    fn client(
        _: &EtcdNodeConfig,
        client: &LeaseClientConfig,
        info: ClientInfo,
    ) -> LeaseClient<RaftPeer> {
        LeaseClient::new(info, *client)
    }

    fn settings(
        &self,
        knobs: &mut Knobs,
        max_ttl_ms: u64,
    ) -> Result<(EtcdNodeConfig, ServiceShape), KnobError> {
        let members = knobs.one_of("members", &[1, 3, 5], 3, |n| {
            format!("expected 1, 3 or 5 members, found {n}")
        })?;
        let lock_checks_own_key = knobs.boolean("lock_checks_own_key", true)?;
        let config = EtcdNodeConfig {
            policy: EtcdPolicy {
                max_ttl_ms,
                lock_checks_own_key,
            },
            timing: RaftTiming {
                tick_ms: RAFT_TICK_MS,
                election_ticks: RAFT_ELECTION_TICKS,
                heartbeat_ticks: RAFT_HEARTBEAT_TICKS,
                lessor_check_ticks: RAFT_LESSOR_CHECK_TICKS,
                // etcd's lessor counts by the monotonic clock.
                clock: Clock::Monotonic,
            },
        };
        let shape = ServiceShape {
            nodes: ServiceShape::numbered("etcd", members),
            has_leader: true,
            node_messages: vec![MessageKind::Raft, MessageKind::Redirect],
            node_expires: true,
            safepoints: &[LOCK_BLOCKED],
            ..ServiceShape::single("")
        };
        Ok((config, shape))
    }

    fn node_config(settings: &EtcdNodeConfig) -> EtcdNodeConfig {
        *settings
    }
}
