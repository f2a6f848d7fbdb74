//! Pinned histories: the SHA-256 of the history of seed 0 of every bundled scenario (and a few
//! more seeds of the random nemesis). Work on the simulator's speed must leave every history
//! byte for byte as it was (issue 9); a change that is meant to alter histories updates the
//! list on purpose:
//!
//! ```sh
//! FENCESIM_BLESS=1 cargo test --test it history_hashes
//! ```

use crate::support;

use fencesim::run::{evaluate, RunOptions};

const PINNED: &str = "tests/fixtures/history-hashes.txt";

/// `(scenario name, seed)` pairs whose histories are pinned.
fn cases() -> Vec<(String, u64)> {
    let mut cases: Vec<(String, u64)> = fencesim::bundled::SCENARIOS
        .iter()
        .map(|(file, text)| {
            let s = crate::support::engine()
                .parse_scenario(text, file)
                .expect("bundled scenario parses");
            (s.name, 0)
        })
        .collect();
    for seed in 1..4 {
        cases.push(("random-nemesis-fenced".into(), seed));
        cases.push(("raft-random-nemesis".into(), seed));
    }
    cases
}

/// One line per case: `name seed sha256`.
fn current() -> String {
    let opts = RunOptions::in_memory();
    cases()
        .into_iter()
        .map(|(name, seed)| {
            let scenario = crate::support::engine()
                .load_named(&name)
                .expect("bundled scenario");
            let done =
                evaluate(crate::support::engine(), &scenario, seed, &opts).expect("serializes");
            format!("{name} {seed} {}\n", done.report.history.sha256)
        })
        .collect()
}

#[test]
fn every_pinned_history_is_byte_for_byte_the_same() {
    let path = support::root().join(PINNED);
    let now = current();
    if std::env::var_os("FENCESIM_BLESS").is_some() {
        std::fs::write(&path, &now).expect("write the pinned hashes");
        return;
    }
    let pinned = std::fs::read_to_string(&path).expect("pinned hashes exist");
    let changed: Vec<String> = pinned
        .lines()
        .zip(now.lines())
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("  pinned {a}\n  now    {b}"))
        .collect();
    assert!(
        changed.is_empty() && pinned.lines().count() == now.lines().count(),
        "{} of {} histories changed (or the list did; rerun with FENCESIM_BLESS=1 if meant):\n{}",
        changed.len(),
        now.lines().count(),
        changed.join("\n")
    );
}
