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
    let scenario = fencesim_scenario::parse(
        &text,
        "mechanics.toml",
        None,
        crate::support::engine().registry(),
    )
    .expect("valid scenario");
    let outcome = crate::support::engine().simulate(&scenario, seed);
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
fn an_event_trigger_counted_from_a_time_strikes_at_the_nth_event_after_it() {
    for nth in [1, 2] {
        let text = format!(
            "{}\n[[faults]]\nkind = \"pause\"\nnode = \"client-1\"\nafter = \"grant\"\nnth = {nth}\ncount_from_ms = 2500\nduration_ms = 300",
            BASE.replace("work_ms = 1000", "work_ms = 1000\ncycles = 10")
        );
        let scenario = fencesim_scenario::parse(
            &text,
            "mechanics.toml",
            None,
            crate::support::engine().registry(),
        )
        .expect("valid scenario");
        let h = crate::support::engine().simulate(&scenario, 0).history;
        let grants: Vec<&Op> = h
            .ops()
            .filter(|o| o.f == OpFn::Acquire && o.op_type == OpType::Ok)
            .collect();
        let first_after = grants
            .iter()
            .position(|g| ms(g.at.time_ns) >= 2500)
            .expect("a grant after 2.5 s");
        assert!(first_after > 0, "grants before 2.5 s are not counted");
        let struck = grants[first_after + nth - 1];
        let start = h.events().find(|e| e.event == EventKind::Pause).unwrap();
        assert_eq!(
            start.at.index,
            struck.at.index + 2,
            "nth = {nth}: the pause starts right after the grant at {} ms",
            ms(struck.at.time_ns)
        );
    }
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

/// (wall_ms - mono_ms) of every record made by `node`, with its true time in ms.
fn offsets(h: &History, node: &str) -> Vec<(u64, i64)> {
    h.entries
        .iter()
        .filter_map(|e| match e {
            Entry::Op(o) if o.node == node => Some((ms(o.at.time_ns), o.at.wall_ms - o.at.mono_ms)),
            Entry::Event(ev) if ev.node == node => {
                Some((ms(ev.at.time_ns), ev.at.wall_ms - ev.at.mono_ms))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_wall_clock_jump_moves_only_the_wall_clock_of_its_node() {
    let h = run(
        "[[faults]]\nkind = \"clock-jump\"\nnode = \"client-1\"\nat_ms = 15\ndelta_ms = -5000",
        0,
    );
    let client = offsets(&h, "client-1");
    assert!(client.iter().any(|(t, _)| *t < 15));
    for (t, offset) in client {
        assert_eq!(offset, if t < 15 { 0 } else { -5000 }, "at {t} ms");
    }
    // The monotonic clock did not move: client-1's records keep mono_ms == true ms.
    for e in h.ops() {
        assert_eq!(e.at.mono_ms as u64, ms(e.at.time_ns));
    }
    assert!(offsets(&h, "lease-service").iter().all(|(_, o)| *o == 0));
}

#[test]
fn drift_makes_both_clocks_run_fast_from_the_moment_it_strikes() {
    let h = run(
        "[[faults]]\nkind = \"clock-drift\"\nnode = \"client-1\"\nat_ms = 0\nppm = 100000",
        0,
    );
    let write = first_op(&h, OpFn::Write, OpType::Invoke);
    // 1020 ms of true time at 1.1x.
    assert_eq!((write.at.mono_ms, write.at.wall_ms), (1122, 1122));
}

#[test]
fn a_strobe_flips_the_wall_clock_and_returns_it_to_its_offset() {
    // Flipped on from 8 ms to 12 ms and ended at 14 ms; client-1 records at 0 and 10 ms (no
    // record falls on a flip, where the order of the two is the seed's).
    let faults = "[[faults]]\nkind = \"clock-skew\"\nnode = \"client-1\"\nat_ms = 0\noffset_ms = 300\n\
                  [[faults]]\nkind = \"clock-strobe\"\nnode = \"client-1\"\nat_ms = 8\noffset_ms = 5000\nperiod_ms = 4\nduration_ms = 6";
    let h = run(faults, 0);
    let client = offsets(&h, "client-1");
    let (during, after): (Vec<_>, Vec<_>) = client.iter().partition(|(t, _)| *t < 14);
    assert!(during.iter().any(|(_, o)| *o == 5300), "{during:?}");
    assert!(
        !after.is_empty() && after.iter().all(|(_, o)| *o == 300),
        "{after:?}"
    );
    let strobe: Vec<_> = h
        .events()
        .filter(|e| e.event == EventKind::ClockStrobe)
        .map(|e| (e.phase, ms(e.at.time_ns)))
        .collect();
    assert_eq!(strobe, [(Some(Phase::Start), 8), (Some(Phase::End), 14)]);
}

/// Two clients; the lease service syncs every 1000 ms and keeps its counter in the store.
fn crash_at(at_ms: u64) -> Vec<u64> {
    let text = format!(
        "name = \"crash\"\nduration_ms = 30000\n[network]\nlatency_ms = [5, 5]\n\
         [lock_service]\ntoken_counter = \"store\"\nfsync = \"periodic\"\nfsync_every_ms = 1000\n\
         [[clients]]\nname = \"client-1\"\nttl_ms = 3000\nwork_ms = 100\n\
         [[clients]]\nname = \"client-2\"\nttl_ms = 3000\nwork_ms = 100\nstart_ms = 4000\n\
         [[faults]]\nkind = \"crash\"\nnode = \"lease-service\"\nat_ms = {at_ms}\nduration_ms = 100\n\
         [expect]\nverdict = \"valid\"\n"
    );
    let scenario = fencesim_scenario::parse(
        &text,
        "crash.toml",
        None,
        crate::support::engine().registry(),
    )
    .unwrap();
    let outcome = crate::support::engine().simulate(&scenario, 0);
    assert_eq!(outcome.failure, None);
    outcome
        .history
        .events()
        .filter(|e| e.event == EventKind::Grant)
        .map(|e| e.token.unwrap())
        .collect()
}

#[test]
fn a_crash_loses_exactly_the_writes_not_yet_synced() {
    // Grant at ~10 ms and release at ~130 ms, both unsynced at 500 ms: the counter is lost.
    assert_eq!(crash_at(500), [1, 1]);
    // By 1500 ms the 1000 ms sync has made them durable.
    assert_eq!(crash_at(1500), [1, 2]);
}

#[test]
fn a_crashed_client_restarts_as_a_new_process_from_its_first_cycle() {
    let h = run(
        "[[faults]]\nkind = \"crash\"\nnode = \"client-1\"\nafter = \"grant\"\nduration_ms = 200",
        0,
    );
    let acquires: Vec<_> = h
        .ops()
        .filter(|o| o.f == OpFn::Acquire && o.op_type == OpType::Invoke)
        .map(|o| o.process)
        .collect();
    assert_eq!(acquires[0], 0);
    assert!(
        acquires[1..].iter().all(|p| *p == 1),
        "the restarted client is process 1: {acquires:?}"
    );
    // Its old lease (token 1, TTL 10 s) still blocks it until the service expires it.
    let grants: Vec<_> = h
        .events()
        .filter(|e| e.event == EventKind::Grant)
        .map(|e| (e.token, ms(e.at.time_ns) >= 10_000))
        .collect();
    assert_eq!(grants, [(Some(1), false), (Some(2), true)]);
    let beliefs: Vec<_> = h
        .events()
        .filter(|e| e.event == EventKind::Belief)
        .map(|e| (e.phase, e.detail.clone()))
        .collect();
    assert_eq!(beliefs[1], (Some(Phase::End), Some("crashed".into())));
}

/// The correct K17 design: the service loses its leases in a crash (nothing synced) but grants
/// nothing for one maximum TTL after restarting. The history shows the lost lease as revoked
/// at the crash, so the service's own view never has two holders.
#[test]
fn a_lease_lost_in_a_crash_is_recorded_and_a_restart_grace_keeps_exclusion() {
    let text = "name = \"grace\"\nduration_ms = 30000\n[network]\nlatency_ms = [5, 5]\n\
                [lock_service]\nmax_ttl_ms = 3000\nfsync = \"never\"\nrestart_grace_ms = 3000\n\
                [[clients]]\nname = \"client-1\"\nttl_ms = 3000\nwork_ms = 2000\n\
                [[clients]]\nname = \"client-2\"\nttl_ms = 3000\nwork_ms = 100\nstart_ms = 500\n\
                [[faults]]\nkind = \"crash\"\nnode = \"lease-service\"\nat_ms = 1000\nduration_ms = 100\n\
                [expect]\nverdict = \"valid\"\n";
    let scenario = fencesim_scenario::parse(
        text,
        "grace.toml",
        None,
        crate::support::engine().registry(),
    )
    .unwrap();
    let h = crate::support::engine().simulate(&scenario, 0).history;
    let revoke = h
        .events()
        .find(|e| e.event == EventKind::Revoke)
        .expect("the lost lease is recorded");
    assert_eq!((revoke.token, ms(revoke.at.time_ns)), (Some(1), 1000));
    assert!(
        revoke.detail.as_deref().unwrap().starts_with("lost"),
        "{revoke:?}"
    );
    // No grant before the grace (restart at 1100 + 3000) ran out.
    let second = h
        .events()
        .filter(|e| e.event == EventKind::Grant)
        .nth(1)
        .expect("a second grant");
    assert!(ms(second.at.time_ns) >= 4100, "{second:?}");
    let result = fencesim_checker::check(&h);
    assert!(
        !result
            .kinds()
            .contains(&fencesim_history::ViolationKind::MutualExclusionService),
        "{:?}",
        result.violations
    );
}

/// Two crashes of the lease service overlap: the node restarts once, when the first of them
/// ends, and the later end leaves it running (no unrecorded second crash).
#[test]
fn overlapping_crashes_restart_the_node_once() {
    let text = "name = \"double\"\nduration_ms = 30000\n[network]\nlatency_ms = [5, 5]\n\
                [lock_service]\nmax_ttl_ms = 3000\nfsync = \"never\"\n\
                [[clients]]\nname = \"client-1\"\nttl_ms = 3000\nwork_ms = 8000\n\
                [[faults]]\nkind = \"crash\"\nnode = \"lease-service\"\nat_ms = 1000\nduration_ms = 4000\n\
                [[faults]]\nkind = \"crash\"\nnode = \"lease-service\"\nat_ms = 1500\nduration_ms = 500\n\
                [expect]\nverdict = \"valid\"\n";
    let scenario = fencesim_scenario::parse(
        text,
        "double.toml",
        None,
        crate::support::engine().registry(),
    )
    .unwrap();
    let h = crate::support::engine().simulate(&scenario, 0).history;
    let ends: Vec<_> = h
        .events()
        .filter(|e| e.event == EventKind::Crash && e.phase == Some(Phase::End))
        .map(|e| (ms(e.at.time_ns), e.detail.clone().unwrap()))
        .collect();
    assert_eq!(
        ends,
        [
            (2000, "lease-service restarted".to_owned()),
            (5000, "lease-service already running".to_owned())
        ]
    );
    let revokes = h.events().filter(|e| e.event == EventKind::Revoke).count();
    assert_eq!(
        revokes, 1,
        "the lease lost at the first crash, recorded once"
    );
    assert!(!fencesim_checker::check(&h)
        .kinds()
        .contains(&fencesim_history::ViolationKind::MutualExclusionService));
}

#[test]
fn faults_at_the_same_instant_start_in_file_order_on_every_seed() {
    let faults = "[[faults]]\nkind = \"crash\"\nnode = \"client-1\"\nat_ms = 3\n\
                  [[faults]]\nkind = \"restart\"\nnode = \"client-1\"\nat_ms = 3";
    for seed in 0..6 {
        let h = run(faults, seed);
        let order: Vec<_> = h
            .events()
            .filter(|e| e.event.is_nemesis() && e.phase == Some(Phase::Start))
            .map(|e| e.event)
            .collect();
        assert_eq!(order, [EventKind::Crash, EventKind::Restart], "seed {seed}");
        assert!(
            h.ops().any(|o| o.f == OpFn::Write),
            "seed {seed}: the restarted client works"
        );
    }
}

#[test]
fn overlapping_drifts_add_up_and_each_end_takes_back_only_its_own() {
    let faults = "[[faults]]\nkind = \"clock-drift\"\nnode = \"client-1\"\nat_ms = 0\nppm = 500000\nduration_ms = 400\n\
                  [[faults]]\nkind = \"clock-drift\"\nnode = \"client-1\"\nat_ms = 200\nppm = -250000\nduration_ms = 600";
    let h = run(faults, 0);
    // 0-200: x1.5 (300); 200-400: x1.25 (+250 = 550); 400-800: x0.75 (+300 = 850); then x1.
    let write = first_op(&h, OpFn::Write, OpType::Invoke);
    let true_ms = ms(write.at.time_ns) as i64;
    assert!(true_ms > 800, "{true_ms}");
    assert_eq!(write.at.mono_ms, 850 + (true_ms - 800));
}
