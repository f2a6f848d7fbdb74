//! Regressions found by review, each a scenario under tests/fixtures/regressions/ that meets
//! its expectation on every seed of its range, plus what its history must show.

use crate::support;

use fencesim::run::{evaluate, RunOptions};
use fencesim_history::EventKind;

fn load(name: &str) -> fencesim::Scenario {
    let path = support::root().join(format!("tests/fixtures/regressions/{name}.toml"));
    crate::support::engine()
        .load_scenario(&path)
        .expect("regression scenario parses")
}

fn opts() -> RunOptions {
    RunOptions::in_memory()
}

/// The kinds of the violations a run's report holds.
fn violation_kinds(done: &fencesim::run::Evaluated) -> Vec<&str> {
    done.report
        .violations
        .iter()
        .map(|v| v.kind.as_str())
        .collect()
}

#[test]
fn a_queueing_service_honours_its_restart_grace() {
    support::assert_met_on_whole_range(&load("queue-restart-grace"), &opts());
}

#[test]
fn a_refusal_that_overtakes_the_queued_reply_is_not_taken_for_it() {
    let scenario = load("queue-answer-after-a-held-reply");
    support::assert_met_on_whole_range(&scenario, &opts());
    let done = evaluate(crate::support::engine(), &scenario, 0, &opts()).unwrap();
    assert!(done.report.failure.is_none(), "{:?}", done.report.failure);
}

#[test]
fn a_queue_grant_passes_the_grant_safepoint() {
    let scenario = load("queue-grant-passes-the-grant-safepoint");
    let done = evaluate(crate::support::engine(), &scenario, 0, &opts()).unwrap();
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
    let scenario = crate::support::engine()
        .parse_scenario(text, file)
        .expect("valid");
    let mut scenario = crate::support::engine()
        .with_knob(&scenario, "acquire", "queue".into())
        .expect("a knob of single");
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
    let done = evaluate(crate::support::engine(), &scenario, 0, &opts()).unwrap();
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

/// Issue 31, item 0: a read after an accepted delete saw the key never written, and the
/// linearizability check, which left deletes out, judged that impossible (invalid on 5 of 5
/// seeds without faults). The whole range is valid now, and the second cycle's read is the
/// one that sees no value.
#[test]
fn a_read_after_a_fenced_delete_is_linearizable() {
    let scenario = load("cleanup-read-after-delete");
    support::assert_met_on_whole_range(&scenario, &opts());
    let done = evaluate(crate::support::engine(), &scenario, 0, &opts()).unwrap();
    let reads: Vec<Option<&str>> = done
        .records
        .ops()
        .filter(|o| {
            o.f == fencesim_history::OpFn::Read && o.op_type == fencesim_history::OpType::Ok
        })
        .map(|o| o.value.as_deref())
        .collect();
    assert_eq!(reads.len(), 2, "{reads:?}");
    assert_eq!(reads[1], None, "the second cycle reads the deleted key");
}

/// The same with the other cleanups the issue named: a token-less delete refused by the
/// fenced resource (so the second read sees the first write), and one the resource accepts
/// (`tokenless = "accept"`, an unfenced mutation, but not a non-linearizable one).
#[test]
fn reads_after_either_cleanup_are_judged_as_the_register_ran() {
    let base = load("cleanup-read-after-delete");
    let mut unfenced = base.clone();
    unfenced.clients[0].cleanup = fencesim_scenario::Cleanup::Unfenced;
    let unfenced = crate::support::engine().revalidate(&unfenced).unwrap();
    let done = evaluate(crate::support::engine(), &unfenced, 0, &opts()).unwrap();
    let kinds = violation_kinds(&done);
    assert_eq!(kinds, Vec::<&str>::new(), "{:?}", done.report.violations);
    let mut accepting = unfenced.clone();
    accepting
        .resource
        .knobs
        .insert("tokenless".into(), "accept".into());
    let accepting = crate::support::engine().revalidate(&accepting).unwrap();
    let done = evaluate(crate::support::engine(), &accepting, 0, &opts()).unwrap();
    let kinds = violation_kinds(&done);
    assert!(kinds.contains(&"unfenced-mutation"), "{kinds:?}");
    assert!(!kinds.contains(&"not-linearizable"), "{kinds:?}");
}

/// Found by the safe-knobs sweep (issue 31): a duplicated write that lands after its holder's
/// own fenced delete is accepted (same token) and brings the deleted value back. A real
/// non-linearizable history, not a false positive: the resource fences, it does not dedupe.
#[test]
fn a_duplicate_write_after_its_holders_fenced_delete_is_not_linearizable() {
    let scenario = load("duplicate-write-after-fenced-delete");
    support::assert_met_on_whole_range(&scenario, &opts());
    let done = evaluate(crate::support::engine(), &scenario, 75, &opts()).unwrap();
    let accepts_of = |op: u64| {
        done.records
            .events()
            .filter(|e| e.event == EventKind::Accept && e.op == Some(op) && e.detail.is_none())
            .count()
    };
    // client-2's write with token 12 (invoked at index 316) was accepted twice.
    assert_eq!(accepts_of(316), 2);
}

/// Found by `fencesim verify single-fenced` with one duplicated message (issue 33): the first
/// copy of client-1's token-1 write is accepted and read by client-2, the second copy is
/// rejected as stale after client-2's token-2 write, and client-1 takes that rejection as its
/// write's outcome. The history says the write failed though it took effect: not
/// linearizable, and no stale write accepted. The resource fences; it does not dedupe.
#[test]
fn a_duplicate_writes_rejection_reports_an_applied_write_as_failed() {
    use fencesim_history::{OpFn, OpType};
    let scenario = load("duplicate-write-rejected-after-it-was-applied");
    support::assert_met_on_whole_range(&scenario, &opts());
    let done = evaluate(crate::support::engine(), &scenario, 0, &opts()).unwrap();
    let kinds = violation_kinds(&done);
    assert!(kinds.contains(&"not-linearizable"), "{kinds:?}");
    assert!(!kinds.contains(&"stale-write-accepted"), "{kinds:?}");
    let ops: Vec<_> = done.records.ops().collect();
    let write = |op_type| {
        ops.iter()
            .find(|o| o.node.as_str() == "client-1" && o.f == OpFn::Write && o.op_type == op_type)
            .copied()
            .expect("client-1's write")
    };
    let invoke = write(OpType::Invoke).at.index;
    let decided = |kind| {
        done.records
            .events()
            .filter(|e| e.event == kind && e.op == Some(invoke))
            .count()
    };
    assert_eq!(
        (decided(EventKind::Accept), decided(EventKind::Reject)),
        (1, 1)
    );
    assert_eq!(write(OpType::Fail).value.as_deref(), Some("client-1/1"));
    // client-2 read what the "failed" write wrote.
    assert!(ops.iter().any(|o| o.node.as_str() == "client-2"
        && o.f == OpFn::Read
        && o.op_type == OpType::Ok
        && o.value.as_deref() == Some("client-1/1")));
}
