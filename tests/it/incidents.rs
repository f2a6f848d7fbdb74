//! The incident library (scenarios/incidents/, one scenario or more per case of
//! ../shared/cases): every scenario meets its `[expect]` on every seed of its range, the unsafe
//! variants with the violation their case names, the corrected ones valid. One test per
//! scenario, so a failure names the case. pause-unfenced, pause-fenced and the delayed-write
//! pair are run through the binary by tests/it/scenarios.rs instead.

use crate::support;

use fencesim::run::RunOptions;

fn opts() -> RunOptions {
    RunOptions::in_memory()
}

fn met_on_whole_range(name: &str) {
    let path = support::root().join(format!("scenarios/incidents/{name}.toml"));
    let scenario = crate::support::engine()
        .load_scenario(&path)
        .expect("incident scenario parses");
    support::assert_met_on_whole_range(&scenario, &opts());
}

macro_rules! incidents {
    ($($test:ident: $name:literal,)*) => {
        $(
            #[test]
            fn $test() {
                met_on_whole_range($name);
            }
        )*

        /// The scenarios with a test here or in tests/it/scenarios.rs.
        const TESTED: &[&str] = &[$($name,)* "pause-unfenced", "pause-fenced",
            "delayed-write-unfenced", "delayed-write-fenced"];
    };
}

incidents! {
    etcd_pause_unfenced: "etcd-pause-unfenced",
    etcd_pause_revision_fenced: "etcd-pause-revision-fenced",
    etcd_lock_after_expiry: "etcd-lock-after-expiry",
    etcd_lock_checks_own_key: "etcd-lock-checks-own-key",
    etcd_holder_partitioned: "etcd-holder-partitioned",
    etcd_leader_crash: "etcd-leader-crash",
    etcd_leader_partitioned: "etcd-leader-partitioned",
    k13_old_session_entry: "k13-old-session-entry",
    k13_session_owned_entry: "k13-session-owned-entry",
    k14_leader_keeps_role: "k14-leader-keeps-role",
    k14_leader_steps_down: "k14-leader-steps-down",
    k16_reaper_ignores_leases: "k16-reaper-ignores-leases",
    k16_reaper_respects_leases: "k16-reaper-respects-leases",
    k21_unconditional_claim: "k21-unconditional-claim",
    k21_conditional_claim: "k21-conditional-claim",
    k07_grant_to_expired_waiter: "k07-grant-to-expired-waiter",
    k07_expired_waiter_dropped: "k07-expired-waiter-dropped",
    k18_keepalive_stall_unchecked: "k18-keepalive-stall-unchecked",
    k18_keepalive_stall_checked: "k18-keepalive-stall-checked",
    k20_check_then_apply: "k20-check-then-apply",
    k20_atomic_check: "k20-atomic-check",
    k22_job_visibility_timeout_unchecked: "k22-job-visibility-timeout-unchecked",
    k22_job_visibility_timeout_checked: "k22-job-visibility-timeout-checked",
    k24_zombie_coordinator_unchecked_epoch: "k24-zombie-coordinator-unchecked-epoch",
    k24_zombie_coordinator_epoch_checked: "k24-zombie-coordinator-epoch-checked",
    clock_jump_monotonic_expiry: "clock-jump-monotonic-expiry",
    clock_jump_wall_expiry: "clock-jump-wall-expiry",
    crash_durable_counter: "crash-durable-counter",
    crash_memory_counter: "crash-memory-counter",
    k09_keepalive_stops_checked: "k09-keepalive-stops-checked",
    k09_keepalive_stops_silently: "k09-keepalive-stops-silently",
    k12_deadline_from_notice: "k12-deadline-from-notice",
    k12_deadline_from_request: "k12-deadline-from-request",
    k19_release_compare_and_delete: "k19-release-compare-and-delete",
    k19_release_unconditional: "k19-release-unconditional",
    lease_record_claim_pause_claimant_deadline: "lease-record-claim-pause-claimant-deadline",
    lease_record_claim_pause_recorded_duration: "lease-record-claim-pause-recorded-duration",
    lease_record_own_duration: "lease-record-own-duration",
    lease_record_recorded_duration: "lease-record-recorded-duration",
    partition_holder_careful: "partition-holder-careful",
    partition_holder_careless: "partition-holder-careless",
    primary_backup_async_failover: "primary-backup-async-failover",
    primary_backup_sync_failover: "primary-backup-sync-failover",
    raft_k08_revoke_checked: "raft-k08-revoke-checked",
    raft_k08_revoke_unchecked: "raft-k08-revoke-unchecked",
    raft_leader_crash: "raft-leader-crash",
    raft_leader_partitioned: "raft-leader-partitioned",
    redlock_clock_jump_monotonic: "redlock-clock-jump-monotonic",
    redlock_clock_jump: "redlock-clock-jump",
    redlock_counter_token_crash: "redlock-counter-token-crash",
    redlock_counter_token_fsync: "redlock-counter-token-fsync",
    redlock_crash_no_fsync: "redlock-crash-no-fsync",
    redlock_crash_restart_delay: "redlock-crash-restart-delay",
    redlock_pause_counter_fenced: "redlock-pause-counter-fenced",
    redlock_pause_equality: "redlock-pause-equality",
    redlock_pause_unfenced: "redlock-pause-unfenced",
    redlock_reply_delay_no_recheck: "redlock-reply-delay-no-recheck",
    redlock_reply_delay_recheck: "redlock-reply-delay-recheck",
    restore_durable_counter: "restore-durable-counter",
    restore_store_counter: "restore-store-counter",
}

#[test]
fn every_incident_scenario_is_tested() {
    let dir = support::root().join("scenarios/incidents");
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .trim_end_matches(".toml")
                .to_owned()
        })
        .collect();
    on_disk.sort();
    let mut tested: Vec<String> = TESTED.iter().map(|s| s.to_string()).collect();
    tested.sort();
    assert_eq!(on_disk, tested);
}

#[test]
fn every_incident_names_its_case() {
    for name in TESTED {
        let path = support::root().join(format!("scenarios/incidents/{name}.toml"));
        let scenario = crate::support::engine().load_scenario(&path).unwrap();
        let names_case = scenario
            .description
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| {
                w.len() == 3
                    && w.starts_with('K')
                    && w[1..].parse::<u8>().is_ok_and(|n| (1..=24).contains(&n))
            });
        assert!(names_case, "{name}: the description names no case K01..K24");
    }
}

#[test]
fn k19s_chain_says_whose_release_ended_which_lease() {
    let path = support::root().join("scenarios/incidents/k19-release-unconditional.toml");
    let scenario = crate::support::engine().load_scenario(&path).unwrap();
    let done = fencesim::run::evaluate(crate::support::engine(), &scenario, 0, &opts()).unwrap();
    let release = done
        .report
        .violations
        .iter()
        .find(|v| v.kind == fencesim::ViolationKind::ReleaseByNonHolder)
        .expect("release-by-non-holder");
    assert_eq!(
        release.chain.last().map(String::as_str),
        Some("client-1's release ended client-3's lease (token 2) at 12.5 s")
    );
}
