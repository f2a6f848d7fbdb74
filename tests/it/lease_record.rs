//! Case K11 on the lease-record design: a candidate that judges a record by its own shorter
//! duration takes over a healthy holder; one that reads the holder's duration waits. And the
//! design used safely stays safe under the random nemesis.

use crate::support;

use fencesim::run::{evaluate, RunOptions};
use fencesim::Scenario;
use fencesim_history::{EventKind, History};

fn load(name: &str) -> Scenario {
    let path = support::root().join(format!("scenarios/incidents/{name}.toml"));
    crate::support::engine()
        .load_scenario(&path)
        .expect("bundled scenario loads")
}

fn opts() -> RunOptions {
    RunOptions {
        out: support::unwritten_dir("lease-record"),
        scenario_arg: "lease-record".into(),
        check_determinism: false,
        swarm: false,
        cancel: Default::default(),
    }
}

fn history(name: &str, seed: u64) -> History {
    let bytes = evaluate(crate::support::engine(), &load(name), seed, &opts())
        .expect("runs")
        .history;
    fencesim_history::read_jsonl(&bytes[..]).expect("our own history parses")
}

/// `(event, holder, token, detail)` of the store's lease events.
fn store_events(h: &History) -> Vec<(EventKind, String, u64, Option<String>)> {
    h.events()
        .filter(|e| e.node == "lease-service" && e.event != EventKind::Renew)
        .map(|e| {
            let holder = e.holder.as_deref().unwrap_or_default().to_owned();
            (e.event, holder, e.token.unwrap_or(0), e.detail.clone())
        })
        .collect()
}

#[test]
fn the_impatient_candidate_takes_over_two_seconds_after_it_first_looked() {
    let h = history("lease-record-own-duration", 0);
    let events = store_events(&h);
    let takeover = (
        EventKind::Revoke,
        "client-1".to_owned(),
        1,
        Some("taken over by client-2".to_owned()),
    );
    assert_eq!(events[1], takeover, "{events:?}");
    assert_eq!(
        events[2],
        (EventKind::Grant, "client-2".to_owned(), 2, None)
    );
    // client-2 first read the record at about 1 s and took it at about 3 s, while client-1's
    // renewal was not due before 4 s.
    let grant_ms = h
        .events()
        .find(|e| e.event == EventKind::Grant && e.holder.as_deref() == Some("client-2"))
        .map(|e| e.at.time_ns / 1_000_000)
        .unwrap();
    assert!((3_000..3_100).contains(&grant_ms), "{grant_ms}");
}

#[test]
fn a_patient_candidate_waits_for_the_release_and_gets_a_higher_token() {
    let h = history("lease-record-recorded-duration", 0);
    let events = store_events(&h);
    let kinds: Vec<_> = events.iter().map(|e| (e.0, e.1.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (EventKind::Grant, "client-1"),
            (EventKind::Release, "client-1"),
            (EventKind::Grant, "client-2"),
            (EventKind::Release, "client-2"),
        ]
    );
    // client-1's four renewals each bumped the version: client-2 took the record at 7.
    assert_eq!((events[0].2, events[2].2), (1, 7));
}

/// Found by a review: a restarted client found its own name in the record and took it over.
/// The takeover is a new lease with a new token (2), so the crashed run's late write with
/// token 1 is rejected by the fence.
#[test]
fn a_restarted_holder_taking_its_own_record_gets_a_new_token() {
    let path = support::root().join("tests/fixtures/lease-record-restarted-holder.toml");
    let scenario = crate::support::engine()
        .load_scenario(&path)
        .expect("fixture loads");
    let bytes = evaluate(crate::support::engine(), &scenario, 0, &opts())
        .unwrap()
        .history;
    let h = fencesim_history::read_jsonl(&bytes[..]).unwrap();
    let events = store_events(&h);
    assert_eq!(
        events.iter().map(|e| (e.0, e.2)).collect::<Vec<_>>(),
        [
            (EventKind::Grant, 1),
            (EventKind::Revoke, 1),
            (EventKind::Grant, 2),
            (EventKind::Release, 2)
        ]
    );
    let late: Vec<_> = h
        .events()
        .filter(|e| e.event == EventKind::Reject)
        .map(|e| (e.token, e.highest))
        .collect();
    assert_eq!(late, [(Some(1), Some(2))]);
}

#[test]
fn the_random_nemesis_finds_nothing_on_any_seed_of_its_range() {
    let path = support::root().join("scenarios/lease-record-random-nemesis.toml");
    let scenario = crate::support::engine()
        .load_scenario(&path)
        .expect("bundled scenario loads");
    assert_eq!((scenario.seeds.start, scenario.seeds.end), (0, 500));
    support::assert_met_on_whole_range(&scenario, &opts());
}

/// The design's own safepoint, by name: client-1 pauses at `claim-sent` (its claim gone out,
/// the answer not heard). Its swap lands at once, but it hears of it 3 s later and counts its
/// lease from then, while client-2 takes the record over at the deadline the record carries:
/// the chain names the pause and where it struck, before the claimant's grant.
#[test]
fn a_pause_at_the_designs_claim_sent_point_is_named_in_the_chain() {
    let scenario = load("lease-record-claim-pause-claimant-deadline");
    let done = evaluate(crate::support::engine(), &scenario, 0, &opts()).expect("runs");
    let v = done
        .report
        .violations
        .iter()
        .find(|v| v.kind.as_str() == "mutual-exclusion-client")
        .expect("the overlap");
    assert_eq!(
        v.chain[..3],
        [
            "client-1 paused at 0.0 s (frozen for 3000 ms at claim-sent)",
            "client-1 was granted token 1 at 0.0 s",
            "client-1 resumed at 3.0 s",
        ],
        "{:?}",
        v.chain
    );
    // The safe twin: the same pause, a claimant counting from its claim, candidates from
    // what they saw: valid.
    let twin = load("lease-record-claim-pause-recorded-duration");
    let done = evaluate(crate::support::engine(), &twin, 0, &opts()).expect("runs");
    assert!(
        done.report.violations.is_empty(),
        "{:?}",
        done.report.violations
    );
}
