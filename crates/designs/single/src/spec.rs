//! The single lease service as a design ([`Design`]): its `kind`, its knobs (read from
//! `[lock_service]` with located errors, once, when a scenario is parsed), the shape of its
//! service, and the node and client those settings build.

use fencesim_design::{Clock, Design, KnobError, Knobs, SafeKnob, SafeValue, ServiceShape};
use fencesim_lease::{NoPeers, ReleaseMode};

use crate::{AcquireMode, LeaseNode, LeaseNodeConfig, Reaper, TokenCounter};

/// The single lease service's one node.
pub const LEASE_SERVICE_NODE: &str = "lease-service";

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

    fencesim_lease::lease_client_side!(NoPeers);

    /// The node and the client own all their data (maps, the wait queue, the lease table)
    /// and derive `Clone` and `Hash`: `fencesim verify` copies and fingerprints them.
    fn explorable(&self) -> Option<fencesim_design::Explorable<Self::Node, Self::Client>> {
        Some(fencesim_design::Explorable::by_clone_and_hash())
    }

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
}
