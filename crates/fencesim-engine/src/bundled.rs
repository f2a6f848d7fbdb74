//! The scenarios shipped in `scenarios/` (the incident library in `scenarios/incidents/`),
//! compiled into the binary so `fencesim list` and `fencesim run <name>` work from any
//! directory. A test checks this list against the folder.

/// `(path under scenarios/, text)` of `scenarios/<path>.toml`, read at compile time.
macro_rules! bundle {
    ($name:literal) => {
        (
            concat!($name, ".toml"),
            include_str!(concat!("../../../scenarios/", $name, ".toml")),
        )
    };
}

/// (path under `scenarios/`, TOML text) of every bundled scenario, in catalogue order. A
/// scenario's name is its file name without `.toml`.
pub const SCENARIOS: &[(&str, &str)] = &[
    bundle!("incidents/pause-unfenced"),
    bundle!("incidents/pause-fenced"),
    bundle!("incidents/delayed-write-unfenced"),
    bundle!("incidents/delayed-write-fenced"),
    bundle!("incidents/clock-jump-wall-expiry"),
    bundle!("incidents/clock-jump-monotonic-expiry"),
    bundle!("incidents/partition-holder-careful"),
    bundle!("incidents/partition-holder-careless"),
    bundle!("incidents/crash-durable-counter"),
    bundle!("incidents/crash-memory-counter"),
    bundle!("incidents/restore-store-counter"),
    bundle!("incidents/restore-durable-counter"),
    bundle!("random-nemesis-fenced"),
    bundle!("incidents/raft-leader-partitioned"),
    bundle!("incidents/raft-leader-crash"),
    bundle!("incidents/raft-k08-revoke-unchecked"),
    bundle!("incidents/raft-k08-revoke-checked"),
    bundle!("raft-random-nemesis"),
    bundle!("lease-record-random-nemesis"),
    bundle!("redlock-random-nemesis"),
    bundle!("etcd-random-nemesis"),
    bundle!("etcd-waiter-pauses"),
    bundle!("incidents/redlock-pause-unfenced"),
    bundle!("incidents/redlock-pause-equality"),
    bundle!("incidents/redlock-pause-counter-fenced"),
    bundle!("incidents/redlock-clock-jump"),
    bundle!("incidents/redlock-clock-jump-monotonic"),
    bundle!("incidents/redlock-crash-no-fsync"),
    bundle!("incidents/redlock-crash-restart-delay"),
    bundle!("incidents/redlock-reply-delay-no-recheck"),
    bundle!("incidents/redlock-reply-delay-recheck"),
    bundle!("incidents/redlock-counter-token-crash"),
    bundle!("incidents/redlock-counter-token-fsync"),
    bundle!("incidents/primary-backup-async-failover"),
    bundle!("incidents/primary-backup-sync-failover"),
    bundle!("incidents/lease-record-own-duration"),
    bundle!("incidents/lease-record-recorded-duration"),
    bundle!("incidents/lease-record-claim-pause-claimant-deadline"),
    bundle!("incidents/lease-record-claim-pause-recorded-duration"),
    bundle!("incidents/k09-keepalive-stops-silently"),
    bundle!("incidents/k09-keepalive-stops-checked"),
    bundle!("incidents/k12-deadline-from-notice"),
    bundle!("incidents/k12-deadline-from-request"),
    bundle!("incidents/k19-release-unconditional"),
    bundle!("incidents/k19-release-compare-and-delete"),
    bundle!("incidents/k22-job-visibility-timeout-unchecked"),
    bundle!("incidents/k22-job-visibility-timeout-checked"),
    bundle!("incidents/k24-zombie-coordinator-unchecked-epoch"),
    bundle!("incidents/k24-zombie-coordinator-epoch-checked"),
    bundle!("incidents/k20-check-then-apply"),
    bundle!("incidents/k20-atomic-check"),
    bundle!("incidents/k18-keepalive-stall-unchecked"),
    bundle!("incidents/k18-keepalive-stall-checked"),
    bundle!("incidents/k07-grant-to-expired-waiter"),
    bundle!("incidents/k07-expired-waiter-dropped"),
    bundle!("incidents/k21-unconditional-claim"),
    bundle!("incidents/k21-conditional-claim"),
    bundle!("incidents/k16-reaper-ignores-leases"),
    bundle!("incidents/k16-reaper-respects-leases"),
    bundle!("incidents/k13-old-session-entry"),
    bundle!("incidents/k13-session-owned-entry"),
    bundle!("incidents/k14-leader-keeps-role"),
    bundle!("incidents/k14-leader-steps-down"),
    bundle!("incidents/etcd-pause-unfenced"),
    bundle!("incidents/etcd-pause-revision-fenced"),
    bundle!("incidents/etcd-lock-after-expiry"),
    bundle!("incidents/etcd-lock-checks-own-key"),
    bundle!("incidents/etcd-holder-partitioned"),
    bundle!("incidents/etcd-leader-crash"),
    bundle!("incidents/etcd-leader-partitioned"),
    bundle!("bench-reference"),
    bundle!("verify/single-fenced"),
    bundle!("verify/single-unfenced"),
    bundle!("live/pg-pause-unfenced"),
    bundle!("live/pg-pause-fenced"),
    bundle!("live/pg-check-then-apply"),
    bundle!("live/redis-crash-no-fsync"),
    bundle!("live/redis-crash-fsync-always"),
    bundle!("live/pg-partition-holder-careless"),
    bundle!("live/redis-partition-crash-no-fsync"),
    bundle!("live/redis-clock-jump"),
    bundle!("live/pg-crash-durable"),
    bundle!("live/etcd-live-pause-unfenced"),
    bundle!("live/etcd-live-pause-fenced"),
    bundle!("live/etcd-live-leader-kill"),
    bundle!("live/etcd-live-member-partitioned"),
    bundle!("live/etcd-live-lock-after-expiry"),
    bundle!("live/etcd-live-lock-checks-own-key"),
    bundle!("live/etcd-live-holder-partitioned"),
];

/// The bundled scenario called `name` (with or without `.toml`), as (path under
/// `scenarios/`, text).
pub fn find(name: &str) -> Option<(&'static str, &'static str)> {
    let file = if name.ends_with(".toml") {
        name.to_owned()
    } else {
        format!("{name}.toml")
    };
    SCENARIOS
        .iter()
        .copied()
        .find(|(path, _)| *path == file || path.rsplit('/').next() == Some(file.as_str()))
}

/// The bundled scenario whose name is nearest to `name` by edit distance, if one is near
/// enough to be a slip of the keyboard (at most a third of the name's characters differ).
pub fn nearest(name: &str) -> Option<&'static str> {
    let name = name.trim_end_matches(".toml");
    let name = name.rsplit('/').next().unwrap_or(name);
    let stems = SCENARIOS.iter().map(|(path, _)| {
        let stem = path.rsplit('/').next().unwrap_or(path);
        stem.trim_end_matches(".toml")
    });
    fencesim_history::nearest(name, stems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slip_finds_its_scenario_and_noise_finds_none() {
        assert_eq!(nearest("pause-fencd"), Some("pause-fenced"));
        assert_eq!(
            nearest("scenarios/pause-unfencd.toml"),
            Some("pause-unfenced")
        );
        assert_eq!(nearest("my-lock"), None);
    }
}
