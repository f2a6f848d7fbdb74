//! Fault mechanics through whole (small) simulations, read back from the history.

use fencesim_history::{Entry, EventKind, History, Op, OpFn, OpType, Phase};

const BASE: &str = r#"
name = "mechanics"
duration_ms = 30000
[network]
latency_ms = [5, 5]
[resource]
mode = "fenced"
[[clients]]
name = "client-1"
ttl_ms = 10000
work_ms = 1000
[expect]
verdict = "valid"
"#;

fn run(faults: &str, seed: u64) -> History {
    let text = format!("{BASE}\n{faults}");
    let scenario = fencesim_scenario::parse(&text, "mechanics.toml").expect("valid scenario");
    let outcome = fencesim_sim::run(&scenario, seed);
    assert_eq!(outcome.failure, None);
    outcome.history
}

fn first_op(h: &History, f: OpFn, t: OpType) -> &Op {
    h.ops()
        .find(|o| o.f == f && o.op_type == t)
        .expect("operation present")
}

fn ms(ns: u64) -> u64 {
    ns / 1_000_000
}

#[test]
fn without_faults_the_cycle_takes_latency_and_work_only() {
    let h = run("", 0);
    // acquire (2 x 5 ms), read (2 x 5 ms), work 1000 ms: the write is invoked at 1020 ms.
    assert_eq!(
        ms(first_op(&h, OpFn::Write, OpType::Invoke).at.time_ns),
        1020
    );
}

#[test]
fn a_paused_nodes_timers_fire_late() {
    let h = run(
        "[[faults]]\nkind = \"pause\"\nnode = \"client-1\"\nat_ms = 200\nduration_ms = 3000",
        0,
    );
    let pauses: Vec<_> = h.events().filter(|e| e.event == EventKind::Pause).collect();
    assert_eq!(pauses.len(), 2);
    assert_eq!(
        (pauses[0].phase, ms(pauses[0].at.time_ns)),
        (Some(Phase::Start), 200)
    );
    assert_eq!(
        (pauses[1].phase, ms(pauses[1].at.time_ns)),
        (Some(Phase::End), 3200)
    );
    // The work timer was due at 1020 ms but the node was frozen until 3200 ms.
    assert_eq!(
        ms(first_op(&h, OpFn::Write, OpType::Invoke).at.time_ns),
        3200
    );
}

#[test]
fn an_event_triggered_pause_lands_at_its_safepoint() {
    let h = run(
        "[[faults]]\nkind = \"pause\"\nnode = \"client-1\"\nafter = \"grant\"\nduration_ms = 700",
        0,
    );
    let start = h.events().find(|e| e.event == EventKind::Pause).unwrap();
    let granted = first_op(&h, OpFn::Acquire, OpType::Ok);
    // Right after the grant come the client's belief in its lease, then the pause.
    let belief = &h.entries[granted.at.index as usize + 1];
    assert!(
        matches!(belief, Entry::Event(e) if e.event == EventKind::Belief && e.phase == Some(Phase::Start)),
        "{belief:?}"
    );
    assert_eq!(
        start.at.index,
        granted.at.index + 2,
        "the pause starts right after the grant"
    );
    assert_eq!(
        ms(first_op(&h, OpFn::Read, OpType::Invoke).at.time_ns),
        10 + 700
    );
}

#[test]
fn a_held_write_is_applied_after_the_hold() {
    let h = run(
        "[[faults]]\nkind = \"hold\"\nfrom = \"client-1\"\nmessage = \"write\"\nduration_ms = 4000",
        0,
    );
    let sent = first_op(&h, OpFn::Write, OpType::Invoke);
    let accept = h.events().find(|e| e.event == EventKind::Accept).unwrap();
    assert_eq!(accept.op, Some(sent.at.index));
    assert_eq!(ms(accept.at.time_ns - sent.at.time_ns), 4000);
    // The client's 1000 ms timeout ran out first, so the write is recorded as unknown.
    assert!(h
        .entries
        .iter()
        .any(|e| matches!(e, Entry::Op(o) if o.f == OpFn::Write && o.op_type == OpType::Info)));
    let holds: Vec<_> = h
        .events()
        .filter(|e| e.event == EventKind::Hold)
        .map(|e| e.phase)
        .collect();
    assert_eq!(holds, [Some(Phase::Start), Some(Phase::End)]);
}

#[test]
fn a_latency_window_changes_delays_only_inside_it() {
    let h = run(
        "[[faults]]\nkind = \"latency\"\nat_ms = 0\nduration_ms = 500\nlatency_ms = [100, 100]",
        0,
    );
    // acquire: 100 ms there, 100 back; read: same. Then the window closes and work follows.
    assert_eq!(ms(first_op(&h, OpFn::Acquire, OpType::Ok).at.time_ns), 200);
    let write_ok = first_op(&h, OpFn::Write, OpType::Ok);
    let write_invoke = first_op(&h, OpFn::Write, OpType::Invoke);
    assert_eq!(ms(write_ok.at.time_ns - write_invoke.at.time_ns), 10);
}
