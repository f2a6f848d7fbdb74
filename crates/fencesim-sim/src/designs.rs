//! Which design on the design API a scenario runs, until the design registry takes this over:
//! the client protocol each client runs. (The lock-service nodes are started in `runner.rs`.)

use fencesim_design::ClientInfo;
use fencesim_lease_record::{ExpiryJudgement, RecordClient, Takeover};
use fencesim_scenario::{ClientSpec, ExpiryJudgedBy, LockServiceKind, Scenario};

use crate::client::Protocol;

/// The client protocol of `spec`'s design, or `None` for a design not yet on the design API.
pub(crate) fn client_protocol(
    scenario: &Scenario,
    spec: &ClientSpec,
    incarnation: u64,
    service_nodes: &[String],
) -> Option<Box<dyn Protocol>> {
    let info = ClientInfo {
        name: spec.name.clone(),
        lock: spec.lock.clone(),
        ttl_ms: spec.ttl_ms,
        safety_margin_ms: spec.safety_margin_ms,
        timeout_ms: spec.timeout_ms,
        incarnation,
        service_nodes: service_nodes.to_vec(),
    };
    match scenario.lock_service.kind {
        LockServiceKind::LeaseRecord => {
            let judgement = match scenario.lock_service.expiry_judged_by {
                Some(ExpiryJudgedBy::OwnDuration) => ExpiryJudgement::OwnDuration,
                Some(ExpiryJudgedBy::RecordedDuration) | None => ExpiryJudgement::RecordedDuration,
            };
            let takeover = match spec.takeover {
                fencesim_scenario::Takeover::CompareAndSwap => Takeover::CompareAndSwap,
                fencesim_scenario::Takeover::Unconditional => Takeover::Unconditional,
            };
            Some(Box::new(RecordClient::new(info, judgement, takeover)))
        }
        LockServiceKind::Single
        | LockServiceKind::Raft
        | LockServiceKind::Redlock
        | LockServiceKind::PrimaryBackup => None,
    }
}
