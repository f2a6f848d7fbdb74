//! The consensus-backed lease service: failover keeps tokens growing, histories are
//! deterministic, and the random nemesis finds nothing over its whole seed range.

use crate::support;

use fencesim::run::{evaluate, RunOptions};
use fencesim_history::{EventKind, History};

fn load(name: &str) -> fencesim::Scenario {
    let (path, _) = fencesim::bundled::find(name).expect("a bundled scenario");
    crate::support::engine()
        .load_scenario(&support::root().join("scenarios").join(path))
        .unwrap()
}

fn opts() -> RunOptions {
    RunOptions {
        out: support::unwritten_dir("raft"),
        scenario_arg: "raft".into(),
        check_determinism: false,
        swarm: false,
        cancel: Default::default(),
    }
}

fn history(name: &str, seed: u64) -> History {
    let done = evaluate(crate::support::engine(), &load(name), seed, &opts()).unwrap();
    assert!(
        done.report.expectation.met,
        "{name} seed {seed}: {:?}",
        done.report.violations
    );
    fencesim_history::read_jsonl(&done.history[..]).unwrap()
}

#[test]
fn failover_elects_a_new_leader_and_tokens_keep_growing() {
    for seed in 0..5 {
        let h = history("raft-leader-partitioned", seed);
        let leaders: Vec<_> = h
            .events()
            .filter(|e| e.event == EventKind::Leader)
            .map(|e| e.node.clone())
            .collect();
        assert!(leaders.len() >= 2, "seed {seed}: {leaders:?}");
        assert_ne!(
            leaders[0], leaders[1],
            "seed {seed}: a different replica takes over"
        );
        let tokens: Vec<u64> = h
            .events()
            .filter(|e| e.event == EventKind::Grant)
            .map(|e| e.token.unwrap())
            .collect();
        assert!(
            tokens.len() >= 2 && tokens.windows(2).all(|w| w[0] < w[1]),
            "seed {seed}: {tokens:?}"
        );
    }
}

#[test]
fn a_restarted_replica_rebuilds_its_table_from_the_log_without_repeating_history() {
    let h = history("raft-leader-crash", 3);
    let crashes = h.events().filter(|e| e.event == EventKind::Crash).count();
    assert_eq!(crashes, 2, "start and end of one crash");
    // Each log entry's effect is recorded once, although every replica (and the restarted one
    // again) applies it: no token is granted twice.
    let mut tokens: Vec<u64> = h
        .events()
        .filter(|e| e.event == EventKind::Grant)
        .map(|e| e.token.unwrap())
        .collect();
    let n = tokens.len();
    tokens.dedup();
    assert_eq!(tokens.len(), n);
}

#[test]
fn a_raft_run_is_byte_identical_when_repeated() {
    let scenario = load("raft-random-nemesis");
    let a = evaluate(crate::support::engine(), &scenario, 11, &opts()).unwrap();
    let b = evaluate(crate::support::engine(), &scenario, 11, &opts()).unwrap();
    assert_eq!(a.history, b.history);
    assert_ne!(
        a.history,
        evaluate(crate::support::engine(), &scenario, 12, &opts())
            .unwrap()
            .history
    );
}

#[test]
fn the_random_nemesis_finds_nothing_on_any_seed_of_its_range() {
    let scenario = load("raft-random-nemesis");
    assert_eq!((scenario.seeds.start, scenario.seeds.end), (0, 500));
    support::assert_met_on_whole_range(&scenario, &opts());
}
