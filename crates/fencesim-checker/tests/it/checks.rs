//! The checks on small hand-built histories, and a property over generated accept sequences.

use fencesim_checker::{check, UnsafeExposure, Verdict};
use fencesim_history::{
    Entry, Event, EventKind, Header, History, Op, OpFn, OpType, Stamp, TokenOrder, ViolationKind,
};
use proptest::prelude::*;

/// Builds a history entry by entry, one ms of true time apart.
#[derive(Default)]
struct Builder {
    entries: Vec<Entry>,
    token_order: TokenOrder,
}

impl Builder {
    fn stamp(&self) -> Stamp {
        let index = self.entries.len() as u64;
        Stamp {
            index,
            time_ns: index * 1_000_000,
            mono_ms: index as i64,
            wall_ms: index as i64,
        }
    }

    fn event(&mut self, kind: EventKind, fill: impl FnOnce(&mut Event)) -> u64 {
        let mut ev = Event {
            at: self.stamp(),
            node: "n".into(),
            ..Event::new(kind)
        };
        fill(&mut ev);
        self.entries.push(Entry::from(ev));
        self.entries.len() as u64 - 1
    }

    fn lease(&mut self, kind: EventKind, holder: &str, token: u64) -> u64 {
        self.event(kind, |e| {
            e.lock = Some("l".into());
            e.holder = Some(holder.into());
            e.token = Some(token);
        })
    }

    fn write(&mut self, kind: EventKind, holder: &str, token: u64, op: Option<u64>) -> u64 {
        self.event(kind, |e| {
            e.key = Some("k".into());
            e.holder = Some(holder.into());
            e.token = Some(token);
            e.op = op;
        })
    }

    /// A Redlock-style acquisition: the client's own `acquire` ok, no service event.
    fn acquired(&mut self, node: &str, token: u64) -> u64 {
        let op = Op {
            at: self.stamp(),
            process: 0,
            node: node.into(),
            op_type: OpType::Ok,
            f: OpFn::Acquire,
            lock: Some("l".into()),
            key: None,
            token: Some(token),
            value: None,
            expected: None,
            value_unknown: false,
            ttl_ms: None,
            error: None,
        };
        self.entries.push(Entry::from(op));
        self.entries.len() as u64 - 1
    }

    fn invoke_write(&mut self, node: &str, token: u64) -> u64 {
        let op = Op {
            at: self.stamp(),
            process: 0,
            node: node.into(),
            op_type: OpType::Invoke,
            f: OpFn::Write,
            lock: None,
            key: Some("k".into()),
            token: Some(token),
            value: None,
            expected: None,
            value_unknown: false,
            ttl_ms: None,
            error: None,
        };
        self.entries.push(Entry::from(op));
        self.entries.len() as u64 - 1
    }

    /// A client operation on key `k` by `process` (named `node`).
    fn op(
        &mut self,
        process: u64,
        op_type: OpType,
        f: OpFn,
        token: Option<u64>,
        value: Option<&str>,
    ) -> u64 {
        let op = Op {
            at: self.stamp(),
            process,
            node: format!("client-{process}").into(),
            op_type,
            f,
            lock: None,
            key: Some("k".into()),
            token,
            value: value.map(str::to_owned),
            expected: None,
            value_unknown: false,
            ttl_ms: None,
            error: None,
        };
        self.entries.push(Entry::from(op));
        self.entries.len() as u64 - 1
    }

    /// A write of `value` with `token`, invoked and completed as `done`; the two indexes.
    fn op_write(&mut self, process: u64, token: u64, value: &str, done: OpType) -> (u64, u64) {
        let invoke = self.op(
            process,
            OpType::Invoke,
            OpFn::Write,
            Some(token),
            Some(value),
        );
        let end = self.op(process, done, OpFn::Write, Some(token), Some(value));
        (invoke, end)
    }

    fn build(self) -> History {
        let header = Header {
            format_version: 1,
            scenario: "t".into(),
            seed: 0,
            tool_version: "t".into(),
            token_order: self.token_order,
            untimed: false,
        };
        History {
            header,
            entries: self.entries,
        }
    }
}

#[test]
fn the_pause_counterexample_is_a_stale_write_with_both_witnesses() {
    let mut b = Builder::default();
    b.lease(EventKind::Grant, "a", 1);
    let a_invoke = b.invoke_write("a", 1);
    b.lease(EventKind::Expire, "a", 1);
    b.lease(EventKind::Grant, "b", 2);
    let newer = b.write(EventKind::Accept, "b", 2, None);
    let stale = b.write(EventKind::Accept, "a", 1, Some(a_invoke));
    let result = check(&b.build());
    assert_eq!(result.verdict, Verdict::Invalid);
    assert_eq!(result.kinds(), [ViolationKind::StaleWriteAccepted]);
    assert_eq!(result.violations[0].witnesses, [stale, newer]);
    let text = &result.violations[0].explanation;
    assert!(
        text.contains("accepted token 1 from a at index 5"),
        "{text}"
    );
    assert!(text.contains("higher token 2 from b at index 4"), "{text}");
    assert!(text.contains("its lease had ended at index 2"), "{text}");
    // Sent while the lease was valid, processed after it ended, and accepted.
    assert_eq!(
        result.unsafe_exposure,
        UnsafeExposure {
            writes_after_lease_end: 1,
            accepted: 1,
            rejected: 0,
            sent_after_lease_end: 0,
            unmeasured: false
        }
    );
}

#[test]
fn a_rejected_stale_write_is_exposure_not_a_violation() {
    let mut b = Builder::default();
    b.lease(EventKind::Grant, "a", 1);
    b.lease(EventKind::Expire, "a", 1);
    b.lease(EventKind::Grant, "b", 2);
    b.write(EventKind::Accept, "b", 2, None);
    let late = b.invoke_write("a", 1);
    b.write(EventKind::Reject, "a", 1, Some(late));
    let result = check(&b.build());
    assert_eq!(result.verdict, Verdict::Valid);
    assert!(result.violations.is_empty());
    assert_eq!(
        result.unsafe_exposure,
        UnsafeExposure {
            writes_after_lease_end: 1,
            accepted: 0,
            rejected: 1,
            sent_after_lease_end: 1,
            unmeasured: false
        }
    );
}

#[test]
fn equal_tokens_are_the_same_holder_writing_again() {
    let mut b = Builder::default();
    b.write(EventKind::Accept, "a", 3, None);
    b.write(EventKind::Accept, "a", 3, None);
    b.write(EventKind::Accept, "b", 4, None);
    assert_eq!(check(&b.build()).verdict, Verdict::Valid);
}

#[test]
fn keys_are_fenced_independently() {
    let mut b = Builder::default();
    b.write(EventKind::Accept, "a", 5, None);
    b.event(EventKind::Accept, |e| {
        e.key = Some("other".into());
        e.token = Some(1);
    });
    assert_eq!(check(&b.build()).verdict, Verdict::Valid);
}

#[test]
fn a_reused_and_a_lower_token_are_told_apart() {
    let mut b = Builder::default();
    let first = b.lease(EventKind::Grant, "a", 1);
    b.lease(EventKind::Release, "a", 1);
    b.lease(EventKind::Grant, "b", 2);
    b.lease(EventKind::Expire, "b", 2);
    let reused = b.lease(EventKind::Grant, "c", 1);
    let result = check(&b.build());
    assert_eq!(result.kinds(), [ViolationKind::TokenReused]);
    assert_eq!(result.violations[0].witnesses, [reused, first]);

    let mut b = Builder::default();
    b.lease(EventKind::Grant, "a", 5);
    b.lease(EventKind::Expire, "a", 5);
    let lower = b.lease(EventKind::Grant, "b", 3);
    let result = check(&b.build());
    assert_eq!(result.kinds(), [ViolationKind::TokenNotMonotonic]);
    assert_eq!(result.violations[0].witnesses, [lower, 0]);
}

proptest! {
    /// Over any sequence of accepts on one key, the check reports exactly the accepts whose
    /// token is below the running maximum, each witnessed by the first accept of that maximum.
    #[test]
    fn stale_writes_are_exactly_the_accepts_below_the_running_maximum(tokens in prop::collection::vec(0u64..8, 0..40)) {
        let mut b = Builder::default();
        let mut expected = Vec::new();
        let mut best: Option<(u64, u64)> = None;
        for t in &tokens {
            let idx = b.write(EventKind::Accept, "w", *t, None);
            match best {
                Some((max, at)) if *t < max => expected.push(vec![idx, at]),
                Some((max, _)) if *t == max => {}
                _ => best = Some((*t, idx)),
            }
        }
        let result = check(&b.build());
        let found: Vec<Vec<u64>> = result.violations.iter().map(|v| v.witnesses.clone()).collect();
        prop_assert_eq!(found, expected.clone());
        // No accept at all leaves every check with nothing to judge: unknown, not valid.
        let want = match (tokens.is_empty(), expected.is_empty()) {
            (true, _) => Verdict::Unknown,
            (false, true) => Verdict::Valid,
            (false, false) => Verdict::Invalid,
        };
        prop_assert_eq!(result.verdict, want);
    }
}

fn belief(b: &mut Builder, client: &str, phase: fencesim_history::Phase, token: u64) -> u64 {
    b.event(EventKind::Belief, |e| {
        e.node = client.into();
        e.phase = Some(phase);
        e.lock = Some("l".into());
        e.holder = Some(client.into());
        e.token = Some(token);
    })
}

#[test]
fn overlapping_client_beliefs_are_a_client_view_violation_only() {
    use fencesim_history::Phase::{End, Start};
    let mut b = Builder::default();
    b.lease(EventKind::Grant, "a", 1);
    let a_believes = belief(&mut b, "a", Start, 1);
    b.lease(EventKind::Expire, "a", 1);
    b.lease(EventKind::Grant, "b", 2);
    let b_believes = belief(&mut b, "b", Start, 2);
    belief(&mut b, "a", End, 1);
    belief(&mut b, "b", End, 2);
    let result = check(&b.build());
    assert_eq!(result.kinds(), [ViolationKind::MutualExclusionClient]);
    assert_eq!(result.violations[0].witnesses, [b_believes, a_believes]);
}

#[test]
fn an_extension_is_not_a_second_holder_and_handovers_do_not_overlap() {
    use fencesim_history::Phase::{End, Start};
    let mut b = Builder::default();
    b.lease(EventKind::Grant, "a", 1);
    belief(&mut b, "a", Start, 1);
    belief(&mut b, "a", Start, 1);
    belief(&mut b, "a", End, 1);
    b.lease(EventKind::Release, "a", 1);
    b.lease(EventKind::Grant, "b", 2);
    belief(&mut b, "b", Start, 2);
    assert_eq!(check(&b.build()).verdict, Verdict::Valid);
}

#[test]
fn two_live_grants_on_one_lock_break_service_exclusion() {
    let mut b = Builder::default();
    let first = b.lease(EventKind::Grant, "a", 1);
    let second = b.lease(EventKind::Grant, "b", 2);
    let result = check(&b.build());
    assert_eq!(result.kinds(), [ViolationKind::MutualExclusionService]);
    assert_eq!(result.violations[0].witnesses, [second, first]);
}

#[test]
fn one_lease_that_never_ends_is_one_incident_not_one_per_later_grant() {
    let mut b = Builder::default();
    let stuck = b.lease(EventKind::Grant, "a", 1);
    let mut later = Vec::new();
    for (holder, token) in [("b", 2), ("c", 3), ("b", 4)] {
        later.push(b.lease(EventKind::Grant, holder, token));
        b.lease(EventKind::Release, holder, token);
    }
    let result = check(&b.build());
    assert_eq!(result.kinds(), [ViolationKind::MutualExclusionService]);
    assert_eq!(result.violations.len(), 1, "{:?}", result.violations);
    assert_eq!(
        result.violations[0].witnesses,
        [later[0], stuck, later[1], later[2]]
    );
    assert!(result.violations[0]
        .explanation
        .ends_with("2 more overlapping holder intervals in this incident"));
}

#[test]
fn progress_is_owed_only_to_clients_that_still_work_after_the_heal() {
    let heal = |b: &mut Builder| {
        b.event(EventKind::FinalHeal, |e| {
            e.phase = Some(fencesim_history::Phase::Start);
            e.window_ms = Some(1);
        })
    };
    // Everyone finished before the heal: nothing to judge.
    let mut b = Builder::default();
    b.write(EventKind::Accept, "a", 1, None);
    heal(&mut b);
    assert_eq!(check(&b.build()).verdict, Verdict::Valid);
    // A client still writes after the heal but nothing is accepted in the window.
    let mut b = Builder::default();
    let at = heal(&mut b);
    b.invoke_write("a", 1);
    let result = check(&b.build());
    assert_eq!(result.kinds(), [ViolationKind::NoProgressAfterHeal]);
    assert_eq!(result.violations[0].witnesses, [at]);
}

/// Redlock's random values: a's value is numerically higher but was acquired first, so b's
/// write followed by a's is the stale one, and value order would have missed it.
#[test]
fn opaque_values_are_judged_by_acquisition_order() {
    let history = |order: TokenOrder| {
        let mut b = Builder {
            token_order: order,
            ..Builder::default()
        };
        b.acquired("a", 900);
        b.acquired("b", 17);
        let newer = b.write(EventKind::Accept, "b", 17, None);
        let stale = b.write(EventKind::Accept, "a", 900, None);
        (b.build(), stale, newer)
    };
    let (by_acquisition, stale, newer) = history(TokenOrder::Acquisition);
    let result = check(&by_acquisition);
    assert_eq!(result.kinds(), [ViolationKind::StaleWriteAccepted]);
    assert_eq!(result.violations[0].witnesses, [stale, newer]);
    let text = &result.violations[0].explanation;
    assert!(text.contains("later-acquired token 17 from b"), "{text}");
    assert!(text.contains("acquired at index 0 and 1"), "{text}");
    // Read as fencing tokens, 17 after 900 goes backwards and 900 after 17 is fine.
    let by_value = check(&history(TokenOrder::Value).0);
    assert_eq!(by_value.kinds(), [ViolationKind::TokenNotMonotonic]);
}

#[test]
fn opaque_values_written_in_acquisition_order_are_valid_and_unordered_ones_unjudged() {
    let mut b = Builder {
        token_order: TokenOrder::Acquisition,
        ..Builder::default()
    };
    b.acquired("a", 900);
    b.write(EventKind::Accept, "a", 900, None);
    b.acquired("b", 17);
    b.write(EventKind::Accept, "b", 17, None);
    // A value never seen acquired has no place in the order: not judged.
    b.write(EventKind::Accept, "c", 5, None);
    let result = check(&b.build());
    assert_eq!(result.verdict, Verdict::Valid, "{:?}", result.violations);
}

/// Without grant events (Redlock with a counter token), the token checks read the clients'
/// acquisitions: token 1 handed out twice is reused.
#[test]
fn without_grant_events_tokens_are_checked_on_acquisitions() {
    let mut b = Builder::default();
    let first = b.acquired("a", 1);
    b.acquired("b", 2);
    let again = b.acquired("c", 1);
    let result = check(&b.build());
    assert_eq!(result.kinds(), [ViolationKind::TokenReused]);
    assert_eq!(result.violations[0].witnesses, [again, first]);
}

// From client operations alone (no accept events): what a real system's history can show.

#[test]
fn an_ok_write_with_a_lower_token_after_a_higher_one_was_acked_is_stale() {
    let mut b = Builder::default();
    let (_, newer_ok) = b.op_write(2, 2, "b", OpType::Ok);
    let (_, stale_ok) = b.op_write(1, 1, "a", OpType::Ok);
    let result = check(&b.build());
    assert_eq!(result.verdict, Verdict::Invalid);
    assert_eq!(result.kinds(), [ViolationKind::StaleWriteAccepted]);
    assert_eq!(result.violations[0].witnesses, [stale_ok, newer_ok]);
    let text = &result.violations[0].explanation;
    assert!(
        text.contains("client-1 wrote with token 1 (invoked at index 2, ok at index 3) after client-2's write with the higher token 2 had been acknowledged ok at index 1"),
        "{text}"
    );
    assert!(
        text.contains("judged from client operations alone"),
        "{text}"
    );
    assert!(
        !result
            .not_checked
            .iter()
            .any(|n| n.starts_with("stale-write-accepted")),
        "{:?}",
        result.not_checked
    );
}

#[test]
fn concurrent_and_info_writes_never_prove_a_stale_write_from_operations() {
    // Invoked before the higher write was acknowledged: concurrent, so either order is
    // possible, though it completed after (a naive completion-order rule would convict).
    let mut b = Builder::default();
    b.op(1, OpType::Invoke, OpFn::Write, Some(1), Some("a"));
    b.op_write(2, 2, "b", OpType::Ok);
    b.op(1, OpType::Ok, OpFn::Write, Some(1), Some("a"));
    assert_eq!(check(&b.build()).verdict, Verdict::Valid);
    // Invoked after, but its outcome is unknown: it may never have taken effect.
    let mut b = Builder::default();
    b.op_write(2, 2, "b", OpType::Ok);
    b.op_write(1, 1, "a", OpType::Info);
    assert_eq!(check(&b.build()).verdict, Verdict::Valid);
}

#[test]
fn a_read_of_a_lower_tokens_value_after_a_higher_write_was_acked_is_stale() {
    let mut b = Builder::default();
    // client-1's write of "a" with token 1 never completes: alone it proves nothing...
    b.op(1, OpType::Invoke, OpFn::Write, Some(1), Some("a"));
    let (_, newer_ok) = b.op_write(2, 2, "b", OpType::Ok);
    // ...but a read invoked after token 2's write was acknowledged still sees "a".
    b.op(3, OpType::Invoke, OpFn::Read, None, None);
    let read = b.op(3, OpType::Ok, OpFn::Read, None, Some("a"));
    let result = check(&b.build());
    assert_eq!(result.kinds(), [ViolationKind::StaleWriteAccepted]);
    assert_eq!(result.violations[0].witnesses, [read, newer_ok]);
    assert!(
        result.violations[0]
            .explanation
            .contains("read the value \"a\", written by client-1 with token 1"),
        "{}",
        result.violations[0].explanation
    );
}

#[test]
fn opaque_tokens_are_not_judged_from_operations() {
    let mut b = Builder {
        token_order: TokenOrder::Acquisition,
        ..Builder::default()
    };
    b.op_write(2, 2, "b", OpType::Ok);
    b.op_write(1, 1, "a", OpType::Ok);
    let result = check(&b.build());
    assert!(
        !result.kinds().contains(&ViolationKind::StaleWriteAccepted),
        "{:?}",
        result.kinds()
    );
    assert!(
        result
            .not_checked
            .iter()
            .any(|n| n.starts_with("stale-write-accepted")),
        "{:?}",
        result.not_checked
    );
}

/// A record without what its kind needs (the readers refuse it; a history built in code may
/// hold it) gives no check anything to judge, so alone it makes the verdict unknown, not
/// valid (issue 38 item 2: a lone `accept` with no key, token or op, and a lone `grant` with
/// no lock, holder or token, were judged valid). A record that carries its fields is judged.
#[test]
fn bare_records_give_nothing_to_judge() {
    for kind in [
        EventKind::Accept,
        EventKind::Reject,
        EventKind::Grant,
        EventKind::Renew,
        EventKind::Release,
        EventKind::Expire,
        EventKind::Revoke,
        EventKind::Belief,
    ] {
        let mut b = Builder::default();
        b.event(kind, |_| {});
        let result = check(&b.build());
        assert_eq!(
            (result.verdict, result.unknown),
            (
                Verdict::Unknown,
                vec![
                    "nothing to judge: the history's one entry is no completed operation or event any \
                      check can judge"
                        .to_owned()
                ]
            ),
            "{kind:?}"
        );
    }
    // A belief without its phase, and a grant without its token, count for nothing either.
    let mut b = Builder::default();
    b.event(EventKind::Belief, |e| {
        e.lock = Some("l".into());
        e.token = Some(1);
    });
    b.event(EventKind::Grant, |e| {
        e.lock = Some("l".into());
        e.holder = Some("c".into());
    });
    let result = check(&b.build());
    assert_eq!(
        result.unknown,
        [
            "nothing to judge: none of the history's 2 entries is a completed operation or an \
             event any check can judge"
        ]
    );
    // A whole grant is judged (one lease, nothing overlaps it): valid. A whole renewal alone
    // is judged by no check.
    let mut b = Builder::default();
    b.lease(EventKind::Grant, "c", 1);
    assert_eq!(check(&b.build()).verdict, Verdict::Valid);
    let mut b = Builder::default();
    b.lease(EventKind::Renew, "c", 1);
    assert_eq!(check(&b.build()).verdict, Verdict::Unknown);
    assert_eq!(
        check(&Builder::default().build()).unknown,
        ["nothing to judge: the history has no entries"]
    );
}

/// unfenced-mutation says what a token-less mutation destroyed: another holder's write (and
/// names it as a witness), only the mutator's own, or nothing (the key was empty).
#[test]
fn a_tokenless_mutation_says_what_it_destroyed() {
    let mut b = Builder::default();
    let mutation = |b: &mut Builder, holder: &str, token: Option<u64>, delete: bool| {
        b.event(EventKind::Accept, |e| {
            e.key = Some("k".into());
            e.holder = Some(holder.into());
            e.token = token;
            e.detail = delete.then(|| "delete".into());
        })
    };
    mutation(&mut b, "a", Some(1), false);
    let own = mutation(&mut b, "a", None, true);
    let empty = mutation(&mut b, "a", None, true);
    let theirs = mutation(&mut b, "b", Some(2), false);
    let late = mutation(&mut b, "a", None, false);
    let result = check(&b.build());
    let found: Vec<(&[u64], &str)> = result
        .violations
        .iter()
        .map(|v| {
            let tail = v.explanation.split("; it ").nth(1).unwrap_or("");
            (v.witnesses.as_slice(), tail)
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                &[own][..],
                "deleted only its own write (with token 1, accepted at index 0)"
            ),
            (
                &[empty][..],
                "destroyed nothing: the key held no value then"
            ),
            (
                &[late, theirs][..],
                "overwrote b's data: the write with token 2 accepted at index 3"
            ),
        ]
    );
}
