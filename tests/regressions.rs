//! Regressions found by review, each a scenario under tests/fixtures/regressions/ that meets
//! its expectation on every seed of its range, plus what its history must show.

mod support;

use fencesim::run::{evaluate, RunOptions};
use fencesim_history::EventKind;

fn load(name: &str) -> fencesim::Scenario {
    let path = support::root().join(format!("tests/fixtures/regressions/{name}.toml"));
    fencesim::load_scenario(&path).expect("regression scenario parses")
}

fn opts() -> RunOptions {
    RunOptions::in_memory()
}

#[test]
fn a_queueing_service_honours_its_restart_grace() {
    support::assert_met_on_whole_range(&load("queue-restart-grace"), &opts());
}

#[test]
fn a_refusal_that_overtakes_the_queued_reply_is_not_taken_for_it() {
    let scenario = load("queue-answer-after-a-held-reply");
    support::assert_met_on_whole_range(&scenario, &opts());
    let done = evaluate(&scenario, 0, &opts()).unwrap();
    assert!(done.report.failure.is_none(), "{:?}", done.report.failure);
}

#[test]
fn a_queue_grant_passes_the_grant_safepoint() {
    let scenario = load("queue-grant-passes-the-grant-safepoint");
    let done = evaluate(&scenario, 0, &opts()).unwrap();
    let paused = done
        .records
        .events()
        .filter(|e| e.event == EventKind::Pause)
        .count();
    assert_eq!(
        paused, 2,
        "the pause after the second grant starts and ends"
    );
}

/// The safe design with a queueing service (`acquire = "queue"`) under the random nemesis:
/// found by the K07 mutation test, a waiter granted after a long wait counted its deadline from
/// its old request, did not write, and the run made no progress after the heal (seed 86);
/// a renewing client now renews as soon as a queued grant reaches it.
#[test]
fn the_queueing_safe_design_survives_the_random_nemesis() {
    let (file, text) = fencesim::bundled::find("random-nemesis-fenced").expect("bundled");
    let mut scenario = fencesim::parse_scenario(text, file).expect("valid");
    scenario.lock_service.acquire = fencesim_scenario::AcquireMode::Queue;
    scenario.seeds.end = 100;
    support::assert_met_on_whole_range(&scenario, &opts());
}

#[test]
fn waiters_a_crash_forgot_give_up_in_time_for_progress() {
    support::assert_met_on_whole_range(&load("queue-crash-forgets-waiters"), &opts());
}
