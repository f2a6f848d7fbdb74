//! The fixed names of the properties fencesim checks; scenarios name them in `expect`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A kind of safety or liveness violation. The names (kebab-case in files) are fixed by the
/// design so scenarios, reports and CI jobs can rely on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ViolationKind {
    /// On a key, a write accepted with a token lower than one already accepted (Kleppmann 2016).
    StaleWriteAccepted,
    /// Per lock, a grant later in true time carries a lower token than an earlier one.
    TokenNotMonotonic,
    /// Per lock, the same token was granted twice.
    TokenReused,
    /// A client presented, in a mutation, a fencing token the lock service never granted it
    /// (one it chose or remembered): the fence is only as good as the tokens presented to it.
    TokenNotGranted,
    /// Two holders' validity intervals overlap, by the service's own grants and expiries.
    MutualExclusionService,
    /// Two clients believed they held the lock at once, by their own validity computation.
    MutualExclusionClient,
    /// A lock's node ended a holder's key before its TTL had passed in true time (lost it in a
    /// restart, or expired it early by a clock that jumped), while the holder still counted
    /// on it: the service broke the promise the lock's safety rests on (Kleppmann 2016 on
    /// Redlock).
    LeaseEndedEarly,
    /// A release took effect for a lock its caller did not hold.
    ReleaseByNonHolder,
    /// A fenced key was mutated without a token check.
    UnfencedMutation,
    /// One unit of work had its effects applied twice.
    DuplicateExecution,
    /// The fenced register's reads and writes have no linearization.
    NotLinearizable,
    /// After the final heal no fenced write succeeded within K lease periods.
    NoProgressAfterHeal,
}

impl ViolationKind {
    /// Every kind, in declaration order.
    pub const ALL: [ViolationKind; 12] = [
        ViolationKind::StaleWriteAccepted,
        ViolationKind::TokenNotMonotonic,
        ViolationKind::TokenReused,
        ViolationKind::TokenNotGranted,
        ViolationKind::MutualExclusionService,
        ViolationKind::MutualExclusionClient,
        ViolationKind::LeaseEndedEarly,
        ViolationKind::ReleaseByNonHolder,
        ViolationKind::UnfencedMutation,
        ViolationKind::DuplicateExecution,
        ViolationKind::NotLinearizable,
        ViolationKind::NoProgressAfterHeal,
    ];

    /// The file name of the kind, e.g. `stale-write-accepted`.
    pub fn as_str(self) -> &'static str {
        match self {
            ViolationKind::StaleWriteAccepted => "stale-write-accepted",
            ViolationKind::TokenNotMonotonic => "token-not-monotonic",
            ViolationKind::TokenReused => "token-reused",
            ViolationKind::TokenNotGranted => "token-not-granted",
            ViolationKind::MutualExclusionService => "mutual-exclusion-service",
            ViolationKind::MutualExclusionClient => "mutual-exclusion-client",
            ViolationKind::LeaseEndedEarly => "lease-ended-early",
            ViolationKind::ReleaseByNonHolder => "release-by-non-holder",
            ViolationKind::UnfencedMutation => "unfenced-mutation",
            ViolationKind::DuplicateExecution => "duplicate-execution",
            ViolationKind::NotLinearizable => "not-linearizable",
            ViolationKind::NoProgressAfterHeal => "no-progress-after-heal",
        }
    }
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_match_serde_names() {
        for kind in ViolationKind::ALL {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
    }
}
