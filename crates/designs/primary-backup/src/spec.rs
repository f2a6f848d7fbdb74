//! The primary-backup lease service as a design ([`Design`]): its `kind`, its knobs, the shape of
//! its service (a primary `lease-1` and a backup `lease-2`), and the nodes and client those
//! settings build.

use fencesim_design::{Clock, Design, KnobError, Knobs, MessageKind, ServiceShape};
use fencesim_lease::ReleaseMode;

use crate::replica::{PrimaryBackupConfig, Replication};
use crate::{PrimaryBackupMessage, PrimaryBackupNode, PrimaryBackupNodeConfig};

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

    fencesim_lease::lease_client_side!(PrimaryBackupMessage);

    /// The pair's node owns all its data (its replica, the acknowledgement it awaits) and the
    /// client is the single design's lease client; both derive `Clone` and `Debug`:
    /// `fencesim verify` copies and fingerprints them.
    fn explorable(&self) -> Option<fencesim_design::Explorable<Self::Node, Self::Client>> {
        Some(fencesim_design::Explorable::by_clone_and_debug())
    }

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
