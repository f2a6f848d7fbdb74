//! The etcd design beyond its incident scenarios: etcd 3.4.3's lock-after-expiry defect is
//! masked by clients that keep their own deadline, and the search finds it against a waiter
//! that trusts its lock call, and shrinks it.

use fencesim::mutation_table::knob;
use fencesim::run::{default_jobs, evaluate, sweep, RunOptions};
use fencesim::Scenario;
use fencesim_history::EventKind;

/// The detail of the `expire` that follows a lapsed waiter's grant.
const LAPSED: &str = "its session lease had expired while it waited";

fn bundled(name: &str) -> Scenario {
    let (file, text) = fencesim::bundled::find(name).expect("bundled");
    crate::support::engine()
        .parse_scenario(text, file)
        .expect("valid")
}

#[test]
fn lock_after_expiry_strikes_but_harms_no_client_that_keeps_its_own_deadline() {
    let mut s = bundled("etcd-random-nemesis");
    knob(&mut s, "lock_checks_own_key", false);
    let seeds: Vec<u64> = (0..60).collect();
    let outcomes = sweep(
        crate::support::engine(),
        &s,
        &seeds,
        default_jobs(),
        &RunOptions::in_memory(),
        |done| {
            let violations: Vec<String> = done
                .report
                .violations
                .iter()
                .map(|v| v.kind.to_string())
                .collect();
            // A lapsed grant: the service's grant and, at once, the expiry of the session lease
            // that had run out while the call waited.
            let lapsed = done
                .records
                .events()
                .filter(|e| e.event == EventKind::Expire)
                .filter(|e| e.detail.as_deref() == Some(LAPSED))
                .count();
            Ok((done.records.header.seed, violations, lapsed))
        },
    )
    .expect("sweep");
    let struck: usize = outcomes.iter().map(|(_, _, lapsed)| *lapsed).sum();
    assert!(
        struck > 0,
        "no lapsed waiter was granted: the defect never struck"
    );
    for (seed, violations, _) in &outcomes {
        assert!(violations.is_empty(), "seed {seed}: {violations:?}");
    }
}

#[test]
fn the_search_finds_lock_after_expiry_and_shrinks_it_to_the_waiters_pause() {
    let dir = crate::support::out_dir("etcd-search");
    let mut mutant = bundled("etcd-waiter-pauses");
    knob(&mut mutant, "lock_checks_own_key", false);
    let file = dir.join("mutant.toml");
    std::fs::write(&file, fencesim_scenario::to_toml(&mutant)).unwrap();
    let (file, out_root) = (file.to_string_lossy(), dir.join("out"));
    let out_root = out_root.to_string_lossy();
    let args = [
        "explore", "--seeds", "0..40", "--shrink", "--quiet", "--out", &out_root, &file,
    ];
    let out = crate::support::fencesim(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("mutual-exclusion-client"), "{stdout}");
    // Shrunk to a few pauses of client-2 (the only node the nemesis strikes), while it waits.
    let shrunk = std::fs::read_dir(dir.join("out/shrunk"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "toml"))
        .expect("a minimal scenario");
    let minimal = crate::support::engine().load_scenario(&shrunk).unwrap();
    assert!(
        !minimal.faults.is_empty() && minimal.faults.len() <= 3,
        "{:?}",
        minimal.faults
    );
    let seed = minimal.seeds.start;
    let done = evaluate(
        crate::support::engine(),
        &minimal,
        seed,
        &RunOptions::in_memory(),
    )
    .unwrap();
    assert!(
        !done.report.violations.is_empty(),
        "the minimal scenario reproduces"
    );
}
