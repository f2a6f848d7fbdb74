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
    let scenario = fencesim::parse_scenario(text, file).expect("valid");
    let mut scenario =
        fencesim::with_knob(&scenario, "acquire", "queue".into()).expect("a knob of single");
    scenario.seeds.end = 100;
    support::assert_met_on_whole_range(&scenario, &opts());
}

#[test]
fn waiters_a_crash_forgot_give_up_in_time_for_progress() {
    support::assert_met_on_whole_range(&load("queue-crash-forgets-waiters"), &opts());
}

/// A lock service's wall clock stepped below zero is honoured, not read as 0 (it was clamped
/// with `.max(0)`, so a 5 s lease granted at a reading of -97 s lasted until the clock came
/// back to +5 s, about 100 s later).
#[test]
fn a_negative_wall_clock_expires_leases_on_time() {
    let scenario = load("negative-wall-clock-expiry");
    support::assert_met_on_whole_range(&scenario, &opts());
    let done = evaluate(&scenario, 0, &opts()).unwrap();
    let events: Vec<_> = done.records.events().collect();
    let grant = |holder: &str| {
        events
            .iter()
            .find(|e| e.event == EventKind::Grant && e.holder.as_deref() == Some(holder))
            .unwrap_or_else(|| panic!("{holder} is granted the lock"))
    };
    let first = grant("client-1");
    // Asked at 3 s plus 1 ms of latency, on a clock 100 s behind: -96999 ms, so the lease
    // expires 5 s later by that clock.
    assert_eq!(first.at.wall_ms, -96_999);
    assert_eq!(first.expires_at_ms, Some(-91_999));
    let expired = events
        .iter()
        .find(|e| e.event == EventKind::Expire && e.token == first.token)
        .expect("client-1's lease expires");
    assert_eq!(
        expired.at.time_ns / 1_000_000,
        8_001,
        "expired 5 s after the grant"
    );
    assert!(expired.at.wall_ms < 0, "{}", expired.at.wall_ms);
    let second = grant("client-2");
    assert_eq!(second.token, Some(2));
    assert!(second.at.time_ns < 10_000_000_000, "{}", second.at.time_ns);
}
