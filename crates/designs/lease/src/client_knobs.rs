//! The client side the three lease services' designs share (single, Raft, primary-backup):
//! their one client protocol's `[[clients]]` knobs, read with located errors once, when a
//! scenario is parsed, and [`lease_client_side!`](crate::lease_client_side), the part of
//! `Design` that names the client.

use fencesim_design::{ClientWorkload, KnobError, Knobs, SafeKnob, SafeValue};

use crate::LeaseClientConfig;

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
        keepalive_while_queued: false,
        queued_safepoint: None,
    })
}

/// The client side of `Design` the three lease services share: their one client protocol
/// ([`LeaseClient`](crate::LeaseClient), over the design's own peer messages `$peers`) and its
/// knobs ([`LEASE_CLIENT_KNOBS`], read by [`lease_client_settings`]). Used inside an
/// `impl Design for ...` block: `fencesim_lease::lease_client_side!(NoPeers);`.
#[macro_export]
macro_rules! lease_client_side {
    ($peers:ty) => {
        type Client = $crate::LeaseClient<$peers>;
        type ClientSettings = $crate::LeaseClientConfig;

        fn client_knob_names(&self) -> &'static [&'static str] {
            $crate::LEASE_CLIENT_KNOBS
        }

        fn safe_client_knobs(&self) -> &'static [fencesim_design::SafeKnob] {
            $crate::LEASE_CLIENT_SAFE
        }

        fn client_settings(
            &self,
            knobs: &mut fencesim_design::Knobs,
            workload: &fencesim_design::ClientWorkload,
            max_ttl_ms: u64,
        ) -> Result<$crate::LeaseClientConfig, fencesim_design::KnobError> {
            $crate::lease_client_settings(knobs, workload, max_ttl_ms)
        }

        fn client(
            _: &Self::Settings,
            client: &$crate::LeaseClientConfig,
            info: fencesim_design::ClientInfo,
        ) -> $crate::LeaseClient<$peers> {
            $crate::LeaseClient::new(info, client.clone())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs(source: &str) -> Knobs {
        Knobs::from_toml(source).expect("test source parses")
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
}
