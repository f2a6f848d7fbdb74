//! The Raft lease service as a design ([`Design`]): its `kind`, its knobs, the shape of its
//! service (replicas `lease-1`..`lease-N`, one leading), and the replica and client those
//! settings build.

use fencesim_design::{
    Clock, Design, KnobError, Knobs, MessageKind, SafeKnob, SafeValue, ServiceShape,
};
use fencesim_lease::replicated::{LeaderChange, ReplicationPolicy};

use crate::{RaftNode, RaftNodeConfig, RaftPeer};

/// Simulated ms per Raft tick.
pub const RAFT_TICK_MS: u64 = 100;
/// Ticks without a heartbeat before an election (so elections start after 1-2 s).
pub const RAFT_ELECTION_TICKS: usize = 10;
/// Ticks between Raft heartbeats.
pub const RAFT_HEARTBEAT_TICKS: usize = 3;
/// Ticks after Raft steps down during which the lessor still believes its replica leads.
pub const RAFT_LESSOR_CHECK_TICKS: u64 = 10;

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

    fencesim_lease::lease_client_side!(RaftPeer);

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

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs(source: &str) -> Knobs {
        Knobs::from_toml(source).expect("test source parses")
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
}
