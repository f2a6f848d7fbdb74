//! The scenarios shipped in `scenarios/`, compiled into the binary so `fencesim list` and
//! `fencesim run <name>` work from any directory. A test checks this list against the folder.

/// `(file name, text)` of `scenarios/<name>.toml`, read at compile time.
macro_rules! bundle {
    ($name:literal) => {
        (
            concat!($name, ".toml"),
            include_str!(concat!("../scenarios/", $name, ".toml")),
        )
    };
}

/// (file name, TOML text) of every bundled scenario, in catalogue order.
pub const SCENARIOS: &[(&str, &str)] = &[
    bundle!("pause-unfenced"),
    bundle!("pause-fenced"),
    bundle!("delayed-write-unfenced"),
    bundle!("delayed-write-fenced"),
    bundle!("clock-jump-wall-expiry"),
    bundle!("clock-jump-monotonic-expiry"),
    bundle!("partition-holder-careful"),
    bundle!("partition-holder-careless"),
    bundle!("crash-durable-counter"),
    bundle!("crash-memory-counter"),
    bundle!("restore-store-counter"),
    bundle!("restore-durable-counter"),
    bundle!("random-nemesis-fenced"),
    bundle!("raft-leader-partitioned"),
    bundle!("raft-leader-crash"),
    bundle!("raft-k08-revoke-unchecked"),
    bundle!("raft-k08-revoke-checked"),
    bundle!("raft-random-nemesis"),
    bundle!("redlock-pause-unfenced"),
    bundle!("redlock-pause-equality"),
    bundle!("redlock-pause-counter-fenced"),
    bundle!("redlock-clock-jump"),
    bundle!("redlock-clock-jump-monotonic"),
    bundle!("redlock-crash-no-fsync"),
    bundle!("redlock-crash-restart-delay"),
    bundle!("redlock-reply-delay-no-recheck"),
    bundle!("redlock-reply-delay-recheck"),
    bundle!("redlock-counter-token-crash"),
    bundle!("redlock-counter-token-fsync"),
    bundle!("primary-backup-async-failover"),
    bundle!("primary-backup-sync-failover"),
    bundle!("lease-record-own-duration"),
    bundle!("lease-record-recorded-duration"),
    bundle!("bench-reference"),
];

/// The bundled scenario called `name` (with or without `.toml`), as (file name, text).
pub fn find(name: &str) -> Option<(&'static str, &'static str)> {
    let file = if name.ends_with(".toml") {
        name.to_owned()
    } else {
        format!("{name}.toml")
    };
    SCENARIOS.iter().copied().find(|(f, _)| *f == file)
}
