//! A quorum lock's claim (Redlock on three nodes), judged from its nodes' key events: whose
//! fault two holders are, the nodes' or the clients'.

use fencesim_checker::{check, Verdict};
use fencesim_history::{
    Entry, Event, EventKind, Header, History, Op, OpFn, OpType, Phase, Stamp, TokenOrder,
    ViolationKind,
};

/// A history of events at given true times (ms), clocks reading true time.
#[derive(Default)]
struct Timeline {
    entries: Vec<Entry>,
}

impl Timeline {
    fn at(&mut self, ms: u64, node: &str, kind: EventKind, fill: impl FnOnce(&mut Event)) -> u64 {
        let index = self.entries.len() as u64;
        let mut e = Event {
            at: Stamp {
                index,
                time_ns: ms * 1_000_000,
                mono_ms: ms as i64,
                wall_ms: ms as i64,
            },
            node: node.into(),
            lock: Some("l".into()),
            ..Event::new(kind)
        };
        fill(&mut e);
        self.entries.push(Entry::from(e));
        index
    }

    /// `client` invokes `f` (acquire or renew) on the lock: a round of requests to the nodes.
    fn invoke(&mut self, ms: u64, client: &str, f: OpFn) -> u64 {
        let index = self.entries.len() as u64;
        self.entries.push(Entry::from(Op {
            at: Stamp {
                index,
                time_ns: ms * 1_000_000,
                mono_ms: ms as i64,
                wall_ms: ms as i64,
            },
            process: u64::from(client == "b"),
            node: client.into(),
            op_type: OpType::Invoke,
            f,
            lock: Some("l".into()),
            key: None,
            token: None,
            value: None,
            expected: None,
            value_unknown: false,
            ttl_ms: None,
            error: None,
        }));
        index
    }

    /// `node` sets the key for `holder` with `value`, PX `ttl_ms`, one of 3 nodes.
    fn set(&mut self, ms: u64, node: &str, holder: &str, value: u64, ttl_ms: u64) -> u64 {
        self.at(ms, node, EventKind::KeySet, |e| {
            e.holder = Some(holder.into());
            e.token = Some(value);
            e.ttl_ms = Some(ttl_ms);
            e.expires_at_ms = Some((ms + ttl_ms) as i64);
            e.nodes = Some(3);
        })
    }

    fn extend(&mut self, ms: u64, node: &str, holder: &str, value: u64, ttl_ms: u64) -> u64 {
        self.at(ms, node, EventKind::KeyExtend, |e| {
            e.holder = Some(holder.into());
            e.token = Some(value);
            e.ttl_ms = Some(ttl_ms);
        })
    }

    fn expire(&mut self, ms: u64, node: &str, holder: &str, value: u64) -> u64 {
        self.at(ms, node, EventKind::KeyExpire, |e| {
            e.holder = Some(holder.into());
            e.token = Some(value);
        })
    }

    /// `client` starts believing it holds the lock with `value` until `until_ms` of its clock.
    fn believe(&mut self, ms: u64, client: &str, value: u64, until_ms: i64) -> u64 {
        self.at(ms, client, EventKind::Belief, |e| {
            e.phase = Some(Phase::Start);
            e.holder = Some(client.into());
            e.token = Some(value);
            e.expires_at_ms = Some(until_ms);
        })
    }

    fn stop_believing(&mut self, ms: u64, client: &str, value: u64) -> u64 {
        self.at(ms, client, EventKind::Belief, |e| {
            e.phase = Some(Phase::End);
            e.holder = Some(client.into());
            e.token = Some(value);
        })
    }

    fn nemesis(&mut self, ms: u64, kind: EventKind, phase: Phase, target: &str) -> u64 {
        self.at(ms, "nemesis", kind, |e| {
            e.lock = None;
            e.phase = Some(phase);
            e.target = Some(target.into());
        })
    }

    fn build(self) -> History {
        History {
            header: Header {
                token_order: TokenOrder::Acquisition,
                ..Header::unnamed()
            },
            entries: self.entries,
        }
    }
}

#[test]
fn a_key_lost_in_a_restart_while_its_holder_counts_on_it_is_the_nodes_fault() {
    let mut t = Timeline::default();
    t.invoke(0, "a", OpFn::Acquire);
    t.set(0, "redis-1", "a", 7, 1000);
    let lost = t.set(1, "redis-2", "a", 7, 1000);
    let a = t.believe(10, "a", 7, 900);
    let crash = t.nemesis(20, EventKind::Crash, Phase::Start, "redis-2");
    t.nemesis(30, EventKind::Crash, Phase::End, "redis-2");
    t.invoke(99, "b", OpFn::Acquire);
    let taken = t.set(100, "redis-2", "b", 9, 1000);
    t.set(101, "redis-3", "b", 9, 1000);
    let b = t.believe(110, "b", 9, 1000);
    let result = check(&t.build());
    assert_eq!(
        result.kinds(),
        [
            ViolationKind::MutualExclusionService,
            ViolationKind::MutualExclusionClient,
            ViolationKind::LeaseEndedEarly
        ]
    );
    let of = |kind| result.violations.iter().find(|v| v.kind == kind).unwrap();
    let early = of(ViolationKind::LeaseEndedEarly);
    assert_eq!(early.witnesses, [taken, lost, crash]);
    assert!(
        early
            .explanation
            .contains("redis-2 set the key for a with value 7")
            && early.explanation.contains("901 ms before its TTL ran out")
            && early.explanation.contains("crashed at index 4"),
        "{}",
        early.explanation
    );
    // b's majority (redis-2, redis-3) from its belief, while a's (redis-1, redis-2) lasts.
    assert_eq!(of(ViolationKind::MutualExclusionService).witnesses, [b, a]);
    let chain = &early.chain;
    assert!(
        chain.iter().any(|s| s == "redis-2 crashed at 0.0 s")
            && chain
                .iter()
                .any(|s| s.starts_with("redis-2 set the key for b")),
        "{chain:?}"
    );
}

#[test]
fn a_key_that_ends_after_its_holder_stopped_counting_on_it_is_no_ones_fault() {
    // redis-2's clock runs fast: a's key there expires 20 ms early, but a allowed for drift
    // and its validity ended at 900 ms.
    let mut t = Timeline::default();
    t.invoke(0, "a", OpFn::Acquire);
    t.set(0, "redis-1", "a", 7, 1000);
    t.set(1, "redis-2", "a", 7, 1000);
    t.believe(10, "a", 7, 900);
    t.stop_believing(900, "a", 7);
    t.expire(981, "redis-2", "a", 7);
    t.set(981, "redis-2", "b", 9, 1000);
    t.expire(1000, "redis-1", "a", 7);
    t.set(1000, "redis-1", "b", 9, 1000);
    t.believe(1010, "b", 9, 1900);
    assert_eq!(check(&t.build()).verdict, Verdict::Valid);
}

#[test]
fn a_key_a_renewal_did_not_reach_is_not_counted_on() {
    let mut t = Timeline::default();
    t.invoke(0, "a", OpFn::Acquire);
    for (ms, node) in [(0, "redis-1"), (1, "redis-2"), (2, "redis-3")] {
        t.set(ms, node, "a", 7, 1000);
    }
    t.believe(10, "a", 7, 900);
    // The renewal reaches redis-1 and redis-2 only: a's validity now ends at 1400 ms.
    t.invoke(499, "a", OpFn::Renew);
    t.extend(500, "redis-1", "a", 7, 1000);
    t.extend(501, "redis-2", "a", 7, 1000);
    t.believe(510, "a", 7, 1400);
    // redis-3's stale key, due at 1002 ms, goes 10 ms early: no part of that validity.
    t.expire(992, "redis-3", "a", 7);
    let result = check(&t.build());
    assert_eq!(result.verdict, Verdict::Valid, "{:?}", result.violations);
}

#[test]
fn a_client_that_believes_past_its_keys_is_at_fault_alone() {
    // Case K05: a believes it has its whole TTL from when the replies came in; the nodes keep
    // its keys for exactly their PX.
    let mut t = Timeline::default();
    t.invoke(0, "a", OpFn::Acquire);
    t.set(0, "redis-1", "a", 7, 1000);
    t.set(1, "redis-2", "a", 7, 1000);
    t.believe(600, "a", 7, 1500);
    t.expire(1000, "redis-1", "a", 7);
    t.set(1000, "redis-1", "b", 9, 1000);
    t.expire(1001, "redis-2", "a", 7);
    t.set(1001, "redis-2", "b", 9, 1000);
    t.believe(1010, "b", 9, 1900);
    let result = check(&t.build());
    assert_eq!(result.kinds(), [ViolationKind::MutualExclusionClient]);
    assert!(
        !result.not_checked.iter().any(
            |n| n.starts_with("mutual-exclusion-service") || n.starts_with("lease-ended-early")
        ),
        "judged from the key events: {:?}",
        result.not_checked
    );
}

/// The clock fault that explains a key's early expiry may have begun before the key was set
/// (a drift in force from the start), or be the end of one that put the clock back (a skew
/// undone, a jump undone by the final heal): each is named, never "no fault".
#[test]
fn a_clock_fault_in_force_or_undone_during_a_key_explains_its_early_end() {
    let explain = |faults: &dyn Fn(&mut Timeline)| {
        let mut t = Timeline::default();
        faults(&mut t);
        t.invoke(100, "a", OpFn::Acquire);
        t.set(100, "redis-1", "a", 7, 1000);
        t.set(101, "redis-2", "a", 7, 1000);
        t.believe(110, "a", 7, 1000);
        t.nemesis(500, EventKind::ClockSkew, Phase::End, "redis-2");
        t.expire(600, "redis-2", "a", 7);
        let result = check(&t.build());
        let early = result
            .violations
            .iter()
            .find(|v| v.kind == ViolationKind::LeaseEndedEarly)
            .expect("redis-2 expired the key 500 ms early")
            .explanation
            .clone();
        early
    };
    let drift_from_the_start = explain(&|t| {
        t.nemesis(0, EventKind::ClockDrift, Phase::Start, "redis-2");
    });
    assert!(
        drift_from_the_start.ends_with(
            "its clock had been changed at index 0 (t=0.000s: clock-drift), before the key was \
             set, and stayed so"
        ),
        "{drift_from_the_start}"
    );
    let skew_undone = explain(&|t| {
        t.nemesis(0, EventKind::ClockSkew, Phase::Start, "redis-2");
    });
    assert!(
        skew_undone
            .ends_with("its clock was put back at index 5 (t=0.500s: the end of clock-skew)"),
        "{skew_undone}"
    );
    let nothing = explain(&|_| {});
    assert!(
        nothing.ends_with("no fault on the node explains it"),
        "{nothing}"
    );
}
