//! Same scenario + seed + binary => byte-identical history, in one process and across two.

use crate::support;

use crate::support::{fencesim, out_dir, text};
use fencesim_history::write_jsonl;

fn history_bytes(file: &str, seed: u64) -> Vec<u8> {
    let (path, _) = fencesim::bundled::find(file).expect("a bundled scenario");
    let scenario = crate::support::engine()
        .load_scenario(&support::root().join("scenarios").join(path))
        .unwrap();
    let outcome = crate::support::engine().simulate(&scenario, seed);
    assert_eq!(outcome.failure, None);
    let mut bytes = Vec::new();
    write_jsonl(&outcome.history, &mut bytes).unwrap();
    bytes
}

#[test]
fn same_seed_twice_in_one_process_is_byte_identical() {
    for file in ["pause-unfenced.toml", "delayed-write-fenced.toml"] {
        for seed in [0, 1, 17] {
            assert_eq!(
                history_bytes(file, seed),
                history_bytes(file, seed),
                "{file} seed {seed}"
            );
        }
    }
}

#[test]
fn different_seeds_give_different_histories() {
    assert_ne!(
        history_bytes("pause-fenced.toml", 0),
        history_bytes("pause-fenced.toml", 1)
    );
}

#[test]
fn same_seed_in_two_processes_is_byte_identical() {
    let (a, b) = (out_dir("det-a"), out_dir("det-b"));
    for out in [&a, &b] {
        let o = fencesim(&[
            "run",
            "scenarios/incidents/pause-fenced.toml",
            "--seed",
            "5",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o).0);
    }
    let read = |d: &std::path::Path| std::fs::read(d.join("pause-fenced/5/history.jsonl")).unwrap();
    assert_eq!(read(&a), read(&b));
    assert!(read(&a).len() > 1000);
}

#[test]
fn check_determinism_flag_passes_for_a_deterministic_run() {
    let out = out_dir("det-flag");
    let o = fencesim(&[
        "run",
        "scenarios/incidents/delayed-write-unfenced.toml",
        "--seed",
        "2",
        "--expect",
        "--check-determinism",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).0);
}

/// `explore --check-determinism` says what the reruns found, as `run` does; a seed whose first
/// run failed is not rerun, and is counted apart instead of as a rerun that differed.
#[test]
fn the_determinism_line_counts_reruns_and_seeds_not_rerun() {
    let out = out_dir("det-explore");
    let o = fencesim(&[
        "explore",
        "pause-fenced",
        "--seeds",
        "0..4",
        "--check-determinism",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("determinism: 4 of 4 seeds ran twice with the same history\n"),
        "{stdout}"
    );
    let failing = support::history_limit_scenario(&out);
    let o = fencesim(&[
        "run",
        failing.to_str().unwrap(),
        "--seed",
        "1",
        "--check-determinism",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, _) = text(&o);
    assert_eq!(o.status.code(), Some(4), "{stdout}");
    assert!(
        stdout.contains(
            "determinism: 0 of 0 seeds ran twice with the same history (1 not rerun: their first run failed)"
        ),
        "{stdout}"
    );
}
