//! A table of hand-written histories, valid and invalid, each with the exact result the checker
//! must give: the verdict, the set of violation kinds, the number of violations, and for each
//! expected kind the witnesses of its first violation. Each expectation follows from the rule
//! in docs/checks.md for the check involved; the comment on each case says which rule.
//!
//! Then a property: histories drawn from a correct sequential model of a fenced register with
//! leases are valid, and lowering one accepted write's token to an earlier-granted one is a
//! stale write.
//!
//! The cases in `regression_cases` are histories on which an earlier checker disagreed with the
//! rules as documented (a lease keyed without its lock, ends matched by token alone, a wrong
//! release ending the live lease, fallback witnesses at the invoke, one belief per client);
//! each now gets the documented result.

use fencesim_checker::{check, check_with, CheckOptions, CheckResult, Verdict};
use fencesim_history::{
    Entry, Event, EventKind, Header, History, Op, OpFn, OpType, Phase, Stamp, TokenOrder,
    ViolationKind,
};
use proptest::prelude::*;

use EventKind::{Accept, Expire, Grant, Reject, Release, Revoke};
use OpType::{Fail, Info, Ok as Done};
use Phase::{End, Start};
use ViolationKind::{
    DuplicateExecution, LeaseEndedEarly, MutualExclusionClient, MutualExclusionService,
    NoProgressAfterHeal, NotLinearizable, ReleaseByNonHolder, StaleWriteAccepted, TokenNotGranted,
    TokenNotMonotonic, TokenReused, UnfencedMutation,
};

const LOCK: &str = "lock";
const KEY: &str = "k";
const MS: u64 = 1_000_000;

// ---------------------------------------------------------------------------------------------
// Building histories
// ---------------------------------------------------------------------------------------------

/// Builds a history record by record. Each record is stamped 1 ms of true time after the
/// previous one unless the time is set with `at_ms`, `at_ns` or `same_instant`.
struct B {
    entries: Vec<Entry>,
    token_order: TokenOrder,
    next_ns: u64,
}

impl B {
    fn new() -> Self {
        B {
            entries: Vec::new(),
            token_order: TokenOrder::Value,
            next_ns: 0,
        }
    }

    /// A history of opaque lock values (`token_order = "acquisition"`).
    fn opaque() -> Self {
        B {
            token_order: TokenOrder::Acquisition,
            ..B::new()
        }
    }

    fn at_ms(&mut self, ms: u64) -> &mut Self {
        self.at_ns(ms * MS)
    }

    fn at_ns(&mut self, ns: u64) -> &mut Self {
        self.next_ns = ns;
        self
    }

    /// The next record gets the true time of the previous one.
    fn same_instant(&mut self) -> &mut Self {
        self.next_ns = self.entries.last().map_or(0, |e| e.at().time_ns);
        self
    }

    fn stamp(&mut self) -> Stamp {
        let index = self.entries.len() as u64;
        let ns = self.next_ns;
        let last = self.entries.last().map_or(0, |e| e.at().time_ns);
        assert!(ns >= last, "true time must not go back (record {index})");
        self.next_ns = ns + MS;
        Stamp {
            index,
            time_ns: ns,
            mono_ms: (ns / MS) as i64,
            wall_ms: (ns / MS) as i64,
        }
    }

    fn push(&mut self, entry: Entry) -> u64 {
        self.entries.push(entry);
        self.entries.len() as u64 - 1
    }

    // --- events ---

    fn event(&mut self, kind: EventKind, node: &str, fill: impl FnOnce(&mut Event)) -> u64 {
        let mut ev = Event {
            at: self.stamp(),
            node: node.into(),
            ..Event::new(kind)
        };
        fill(&mut ev);
        self.push(Entry::from(ev))
    }

    fn lease_on(
        &mut self,
        kind: EventKind,
        lock: &str,
        holder: &str,
        token: u64,
        op: Option<u64>,
    ) -> u64 {
        self.event(kind, "lease-service", |e| {
            e.lock = Some(lock.into());
            e.holder = Some(holder.into());
            e.token = Some(token);
            e.op = op;
        })
    }

    /// A grant on the default lock.
    fn grant(&mut self, holder: &str, token: u64) -> u64 {
        self.lease_on(Grant, LOCK, holder, token, None)
    }

    /// An expire, release or revoke on the default lock, answering no operation.
    fn end(&mut self, kind: EventKind, holder: &str, token: u64) -> u64 {
        self.lease_on(kind, LOCK, holder, token, None)
    }

    fn resource_on(
        &mut self,
        kind: EventKind,
        key: &str,
        holder: &str,
        token: Option<u64>,
        op: Option<u64>,
    ) -> u64 {
        self.event(kind, "resource", |e| {
            e.key = Some(key.into());
            e.holder = Some(holder.into());
            e.token = token;
            e.op = op;
        })
    }

    fn accept(&mut self, holder: &str, token: u64, op: Option<u64>) -> u64 {
        self.resource_on(Accept, KEY, holder, Some(token), op)
    }

    fn reject(&mut self, holder: &str, token: u64, op: Option<u64>) -> u64 {
        self.resource_on(Reject, KEY, holder, Some(token), op)
    }

    fn belief_on(&mut self, client: &str, phase: Phase, lock: &str, token: u64) -> u64 {
        self.event(EventKind::Belief, client, |e| {
            e.phase = Some(phase);
            e.lock = Some(lock.into());
            e.holder = Some(client.into());
            e.token = Some(token);
        })
    }

    fn belief(&mut self, client: &str, phase: Phase, token: u64) -> u64 {
        self.belief_on(client, phase, LOCK, token)
    }

    fn final_heal(&mut self, window_ms: Option<u64>) -> u64 {
        self.event(EventKind::FinalHeal, "nemesis", |e| {
            e.phase = Some(Start);
            e.window_ms = window_ms;
        })
    }

    // --- operations ---

    fn op(
        &mut self,
        process: u64,
        node: &str,
        op_type: OpType,
        f: OpFn,
        fill: impl FnOnce(&mut Op),
    ) -> u64 {
        let mut op = Op {
            at: self.stamp(),
            process,
            node: node.into(),
            op_type,
            f,
            lock: None,
            key: None,
            token: None,
            value: None,
            expected: None,
            value_unknown: false,
            ttl_ms: None,
            error: None,
        };
        fill(&mut op);
        self.push(Entry::from(op))
    }

    /// A write record (invoke or completion) on `key`; completions repeat the invoke's fields.
    fn write_rec(
        &mut self,
        process: u64,
        node: &str,
        ty: OpType,
        key: &str,
        token: Option<u64>,
        value: &str,
    ) -> u64 {
        self.op(process, node, ty, OpFn::Write, |o| {
            o.key = Some(key.into());
            o.token = token;
            o.value = Some(value.into());
            match ty {
                Fail => o.error = Some("stale token".into()),
                Info => o.error = Some("no reply within 500 ms".into()),
                _ => {}
            }
        })
    }

    fn invoke_write(&mut self, process: u64, node: &str, token: u64, value: &str) -> u64 {
        self.write_rec(process, node, OpType::Invoke, KEY, Some(token), value)
    }

    fn complete_write(
        &mut self,
        process: u64,
        node: &str,
        ty: OpType,
        token: u64,
        value: &str,
    ) -> u64 {
        self.write_rec(process, node, ty, KEY, Some(token), value)
    }

    /// A write invoked and completed `ok` right away, with no resource event (for the
    /// linearizability cases, which judge the operations only).
    fn write(&mut self, process: u64, node: &str, value: &str) -> (u64, u64) {
        self.write_on(process, node, KEY, value)
    }

    fn write_on(&mut self, process: u64, node: &str, key: &str, value: &str) -> (u64, u64) {
        let inv = self.write_rec(process, node, OpType::Invoke, key, Some(1), value);
        let ok = self.write_rec(process, node, Done, key, Some(1), value);
        (inv, ok)
    }

    fn read_rec(
        &mut self,
        process: u64,
        node: &str,
        ty: OpType,
        key: &str,
        value: Option<&str>,
    ) -> u64 {
        self.op(process, node, ty, OpFn::Read, |o| {
            o.key = Some(key.into());
            o.value = value.map(Into::into);
            if ty == Info {
                o.error = Some("no reply within 500 ms".into());
            }
        })
    }

    fn invoke_read(&mut self, process: u64, node: &str) -> u64 {
        self.read_rec(process, node, OpType::Invoke, KEY, None)
    }

    /// A read invoked and completed `ok` right away with `value` (`None`: never written).
    fn read(&mut self, process: u64, node: &str, value: Option<&str>) -> (u64, u64) {
        self.read_on(process, node, KEY, value)
    }

    fn read_on(&mut self, process: u64, node: &str, key: &str, value: Option<&str>) -> (u64, u64) {
        let inv = self.read_rec(process, node, OpType::Invoke, key, None);
        let ok = self.read_rec(process, node, Done, key, value);
        (inv, ok)
    }

    fn invoke_acquire(&mut self, process: u64, node: &str) -> u64 {
        self.op(process, node, OpType::Invoke, OpFn::Acquire, |o| {
            o.lock = Some(LOCK.into());
        })
    }

    fn complete_acquire(
        &mut self,
        process: u64,
        node: &str,
        ty: OpType,
        token: Option<u64>,
    ) -> u64 {
        self.op(process, node, ty, OpFn::Acquire, |o| {
            o.lock = Some(LOCK.into());
            o.token = token;
        })
    }

    fn invoke_release(&mut self, process: u64, node: &str, token: u64) -> u64 {
        self.op(process, node, OpType::Invoke, OpFn::Release, |o| {
            o.lock = Some(LOCK.into());
            o.token = Some(token);
        })
    }

    fn complete_release(&mut self, process: u64, node: &str, ty: OpType, token: u64) -> u64 {
        self.op(process, node, ty, OpFn::Release, |o| {
            o.lock = Some(LOCK.into());
            o.token = Some(token);
        })
    }

    fn build(self) -> History {
        History {
            header: Header {
                format_version: 1,
                scenario: "table".into(),
                seed: 0,
                tool_version: "test".into(),
                token_order: self.token_order,
                untimed: false,
            },
            entries: self.entries,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Cases and how they are judged
// ---------------------------------------------------------------------------------------------

struct Case {
    name: &'static str,
    history: History,
    verdict: Verdict,
    /// Each expected kind with the witnesses of its first violation; the kinds are exactly
    /// the kinds of the result.
    expected: Vec<(ViolationKind, Vec<u64>)>,
    /// The number of violations in all.
    count: usize,
    /// The number of keys the linearizability search gave up on.
    unknown: usize,
    /// `Some`: run `check_with` with this step budget.
    steps: Option<u64>,
}

impl Case {
    fn valid(name: &'static str, b: B) -> Case {
        Case {
            name,
            history: b.build(),
            verdict: Verdict::Valid,
            expected: Vec::new(),
            count: 0,
            unknown: 0,
            steps: None,
        }
    }

    fn invalid(
        name: &'static str,
        b: B,
        kind: ViolationKind,
        witnesses: impl Into<Vec<u64>>,
    ) -> Case {
        Case {
            verdict: Verdict::Invalid,
            expected: vec![(kind, witnesses.into())],
            count: 1,
            ..Case::valid(name, b)
        }
    }

    fn unknown(name: &'static str, b: B, steps: u64, keys: usize) -> Case {
        Case {
            verdict: Verdict::Unknown,
            unknown: keys,
            steps: Some(steps),
            ..Case::valid(name, b)
        }
    }

    /// Another expected kind, with one violation of it.
    fn and(mut self, kind: ViolationKind, witnesses: impl Into<Vec<u64>>) -> Case {
        self.expected.push((kind, witnesses.into()));
        self.count += 1;
        self
    }

    /// The total number of violations, when a kind has more than one.
    fn count(mut self, n: usize) -> Case {
        self.count = n;
        self
    }

    fn steps(mut self, steps: u64, unknown_keys: usize) -> Case {
        self.steps = Some(steps);
        self.unknown = unknown_keys;
        self
    }

    fn run(&self) -> CheckResult {
        match self.steps {
            Some(steps) => check_with(
                &self.history,
                &CheckOptions {
                    linearizability_steps: steps,
                    ..CheckOptions::default()
                },
            ),
            None => check(&self.history),
        }
    }

    /// Every way the checker's result differs from the expectation.
    fn mismatches(&self) -> Vec<String> {
        let result = self.run();
        let mut out = Vec::new();
        let mut kinds: Vec<ViolationKind> = self.expected.iter().map(|(k, _)| *k).collect();
        kinds.sort();
        kinds.dedup();
        assert_eq!(
            kinds.len(),
            self.expected.len(),
            "{}: a kind twice",
            self.name
        );
        if result.verdict != self.verdict {
            out.push(format!(
                "verdict {:?}, expected {:?}",
                result.verdict, self.verdict
            ));
        }
        if result.kinds() != kinds {
            out.push(format!("kinds {:?}, expected {:?}", result.kinds(), kinds));
        }
        if result.violations.len() != self.count {
            out.push(format!(
                "{} violations, expected {}",
                result.violations.len(),
                self.count
            ));
        }
        for (kind, witnesses) in &self.expected {
            if let Some(v) = result.violations.iter().find(|v| v.kind == *kind) {
                if &v.witnesses != witnesses {
                    out.push(format!(
                        "{kind}: witnesses {:?}, expected {:?} ({})",
                        v.witnesses, witnesses, v.explanation
                    ));
                }
            }
        }
        if result.unknown.len() != self.unknown {
            out.push(format!(
                "unknown {:?}, expected {} entries",
                result.unknown, self.unknown
            ));
        }
        let len = self.history.entries.len() as u64;
        for v in &result.violations {
            if v.witnesses.is_empty() || v.witnesses.iter().any(|w| *w >= len) {
                out.push(format!(
                    "{}: witnesses {:?} out of range",
                    v.kind, v.witnesses
                ));
            }
        }
        if !out.is_empty() {
            let all: Vec<String> = result
                .violations
                .iter()
                .map(|v| format!("{}: {} {:?}", v.kind, v.explanation, v.witnesses))
                .collect();
            out.push(format!("all violations: {all:#?}"));
        }
        out
    }
}

fn run_table(cases: Vec<Case>) {
    let mut names: Vec<&str> = cases.iter().map(|c| c.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), cases.len(), "case names must be unique");
    let mut failed = Vec::new();
    for case in &cases {
        let problems = case.mismatches();
        if !problems.is_empty() {
            failed.push(format!("{}:\n  {}", case.name, problems.join("\n  ")));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} cases failed:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// stale-write-accepted
// ---------------------------------------------------------------------------------------------

/// Kleppmann's counterexample: a's write, sent under token 1, lands after b's token 2 was
/// accepted. The stale accept, then the accept of the higher token.
fn stale_write_after_the_lease_moved_on() -> Case {
    let mut b = B::new();
    b.grant("a", 1);
    let a_inv = b.invoke_write(0, "a", 1, "a/1");
    b.end(Expire, "a", 1);
    b.grant("b", 2);
    let b_inv = b.invoke_write(1, "b", 2, "b/1");
    let newer = b.accept("b", 2, Some(b_inv));
    b.complete_write(1, "b", Done, 2, "b/1");
    let stale = b.accept("a", 1, Some(a_inv));
    b.complete_write(0, "a", Done, 1, "a/1");
    Case::invalid(
        "stale_write_after_the_lease_moved_on",
        b,
        StaleWriteAccepted,
        [stale, newer],
    )
}

/// Accepts of 1, 3, 2, 3, 1: the 2 and the last 1 are below the running maximum; both are
/// witnessed by the first accept of 3, not the second.
fn stale_writes_witness_the_first_accept_of_the_highest_token() -> Case {
    let mut b = B::new();
    b.accept("w", 1, None);
    let three = b.accept("w", 3, None);
    let two = b.accept("w", 2, None);
    b.accept("w", 3, None);
    b.accept("w", 1, None);
    Case::invalid(
        "stale_writes_witness_the_first_accept_of_the_highest_token",
        b,
        StaleWriteAccepted,
        [two, three],
    )
    .count(2)
}

/// Token 1 granted to a, then to b: token-reused. Their writes carry the equal token 1, which
/// is taken as the same holder writing again: not stale, in either order.
fn equal_tokens_from_two_holders_after_reuse_are_not_stale() -> Case {
    let mut b = B::new();
    let first = b.grant("a", 1);
    b.end(Expire, "a", 1);
    let again = b.grant("b", 1);
    b.accept("a", 1, None);
    b.accept("b", 1, None);
    b.accept("a", 1, None);
    Case::invalid(
        "equal_tokens_from_two_holders_after_reuse_are_not_stale",
        b,
        TokenReused,
        [again, first],
    )
}

fn equal_tokens_from_two_holders_are_valid() -> Case {
    let mut b = B::new();
    b.accept("a", 2, None);
    b.accept("b", 2, None);
    b.accept("a", 2, None);
    b.accept("c", 3, None);
    Case::valid("equal_tokens_from_two_holders_are_valid", b)
}

/// Rejects of lower tokens are the fence working, never a violation.
fn a_reject_is_never_a_violation() -> Case {
    let mut b = B::new();
    b.accept("b", 2, None);
    b.reject("a", 1, None);
    b.reject("a", 1, None);
    b.reject("c", 0, None);
    Case::valid("a_reject_is_never_a_violation", b)
}

/// Opaque values ranked by their grants: 900 granted at index 0, 17 at index 2, so 900 after
/// 17 is stale. The token checks do not run on opaque values (by value, 17 after 900 would be
/// token-not-monotonic).
fn opaque_values_are_ranked_by_their_grants() -> Case {
    let mut b = B::opaque();
    b.grant("a", 900);
    b.end(Expire, "a", 900);
    b.grant("b", 17);
    let newer = b.accept("b", 17, None);
    let stale = b.accept("a", 900, None);
    Case::invalid(
        "opaque_values_are_ranked_by_their_grants",
        b,
        StaleWriteAccepted,
        [stale, newer],
    )
}

/// No grants: opaque values rank at their acquire's invoke. a invoked first (index 0) but
/// decided last; it still ranks before b (index 1), so a's write after b's is stale. (Ranked at
/// the `ok`s, a would be the later one and nothing would be stale.)
fn opaque_values_rank_at_the_acquire_invoke() -> Case {
    let mut b = B::opaque();
    b.invoke_acquire(0, "a");
    b.invoke_acquire(1, "b");
    b.complete_acquire(1, "b", Done, Some(17));
    b.complete_acquire(0, "a", Done, Some(900));
    let newer = b.accept("b", 17, None);
    let stale = b.accept("a", 900, None);
    Case::invalid(
        "opaque_values_rank_at_the_acquire_invoke",
        b,
        StaleWriteAccepted,
        [stale, newer],
    )
}

/// The same acquisitions, written in invoke order: valid. (Ranked at the `ok`s, b's write
/// after a's would be stale.)
fn opaque_writes_in_invoke_order_are_valid() -> Case {
    let mut b = B::opaque();
    b.invoke_acquire(0, "a");
    b.invoke_acquire(1, "b");
    b.complete_acquire(1, "b", Done, Some(17));
    b.complete_acquire(0, "a", Done, Some(900));
    b.accept("a", 900, None);
    b.accept("b", 17, None);
    Case::valid("opaque_writes_in_invoke_order_are_valid", b)
}

/// A value never seen acquired (5) is neither judged nor remembered as the key's latest: a's
/// stale write is witnessed by b's accept, not c's.
fn an_unacquired_opaque_value_is_neither_judged_nor_remembered() -> Case {
    let mut b = B::opaque();
    b.invoke_acquire(0, "a");
    b.complete_acquire(0, "a", Done, Some(900));
    b.invoke_acquire(1, "b");
    b.complete_acquire(1, "b", Done, Some(17));
    let newer = b.accept("b", 17, None);
    b.accept("c", 5, None);
    let stale = b.accept("a", 900, None);
    b.accept("c", 5, None);
    Case::invalid(
        "an_unacquired_opaque_value_is_neither_judged_nor_remembered",
        b,
        StaleWriteAccepted,
        [stale, newer],
    )
}

fn stale_writes_are_judged_per_key() -> Case {
    let mut b = B::new();
    let k5 = b.accept("a", 5, None);
    b.resource_on(Accept, "j", "b", Some(1), None);
    let k4 = b.accept("c", 4, None);
    b.resource_on(Accept, "j", "b", Some(1), None);
    b.resource_on(Accept, "j", "d", Some(2), None);
    Case::invalid(
        "stale_writes_are_judged_per_key",
        b,
        StaleWriteAccepted,
        [k4, k5],
    )
}

// ---------------------------------------------------------------------------------------------
// token-not-monotonic, token-reused
// ---------------------------------------------------------------------------------------------

fn a_lower_new_token_is_not_monotonic() -> Case {
    let mut b = B::new();
    b.grant("a", 1);
    b.end(Release, "a", 1);
    let three = b.grant("b", 3);
    b.end(Release, "b", 3);
    let two = b.grant("c", 2);
    Case::invalid(
        "a_lower_new_token_is_not_monotonic",
        b,
        TokenNotMonotonic,
        [two, three],
    )
}

/// 1, 2, 1: the second 1 is reused, and reported once, not also as not monotonic.
fn a_reused_lower_token_is_reuse_only() -> Case {
    let mut b = B::new();
    let first = b.grant("a", 1);
    b.end(Expire, "a", 1);
    b.grant("b", 2);
    b.end(Expire, "b", 2);
    let again = b.grant("c", 1);
    Case::invalid(
        "a_reused_lower_token_is_reuse_only",
        b,
        TokenReused,
        [again, first],
    )
}

/// A token granted again to its own holder (its lease expired and it took the lock back, or a
/// retried acquire was answered twice) is no reuse: nobody else can present it.
fn a_token_granted_again_to_its_holder_is_no_reuse() -> Case {
    let mut b = B::new();
    b.grant("a", 1);
    b.end(Expire, "a", 1);
    b.grant("a", 1);
    b.end(Release, "a", 1);
    b.grant("b", 2);
    Case::valid("a_token_granted_again_to_its_holder_is_no_reuse", b)
}

/// 1 to a, 2 to b, 1 to a again: no second holder has token 1, so no reuse, but a's token
/// came back below b's, which is not monotonic.
fn a_re_grant_below_a_higher_token_is_not_monotonic() -> Case {
    let mut b = B::new();
    b.grant("a", 1);
    b.end(Expire, "a", 1);
    let two = b.grant("b", 2);
    b.end(Expire, "b", 2);
    let again = b.grant("a", 1);
    Case::invalid(
        "a_re_grant_below_a_higher_token_is_not_monotonic",
        b,
        TokenNotMonotonic,
        [again, two],
    )
}

/// 1 to a, again to a, then to b: b's grant is the reuse, witnessed against a's first.
fn a_reuse_after_a_re_grant_names_the_first_other_holder() -> Case {
    let mut b = B::new();
    let first = b.grant("a", 1);
    b.end(Expire, "a", 1);
    b.grant("a", 1);
    b.end(Expire, "a", 1);
    let other = b.grant("b", 1);
    Case::invalid(
        "a_reuse_after_a_re_grant_names_the_first_other_holder",
        b,
        TokenReused,
        [other, first],
    )
}

/// Two locks: their tokens are unrelated and their leases may be live at once, so token 1 on
/// y after 5 on x is neither lower nor a clash. Token 1 again on y is a reuse on y, and an
/// overlap with b's y-lease, witnessed against y's grant only.
fn tokens_and_leases_are_per_lock() -> Case {
    let mut b = B::new();
    b.lease_on(Grant, "x", "a", 5, None);
    let first = b.lease_on(Grant, "y", "b", 1, None);
    let again = b.lease_on(Grant, "y", "c", 1, None);
    Case::invalid(
        "tokens_and_leases_are_per_lock",
        b,
        TokenReused,
        [again, first],
    )
    .and(MutualExclusionService, [again, first])
}

/// No grants: the acquisitions are the `acquire` `ok`s placed at their invokes. a's invoke
/// comes first, so 1 then 2 is monotonic although b's `ok` (token 2) comes first.
fn without_grants_acquisitions_are_ordered_by_invoke() -> Case {
    let mut b = B::new();
    b.invoke_acquire(0, "a");
    b.invoke_acquire(1, "b");
    b.complete_acquire(1, "b", Done, Some(2));
    b.complete_acquire(0, "a", Done, Some(1));
    Case::valid("without_grants_acquisitions_are_ordered_by_invoke", b)
}

/// No grants, `acquire` `ok` records with no invoke in the history (each placed at itself): a
/// lower token after a higher one, then that lower token again.
fn without_grants_a_lower_acquired_token_is_not_monotonic() -> Case {
    let mut b = B::new();
    let five = b.complete_acquire(0, "a", Done, Some(5));
    let three = b.complete_acquire(1, "b", Done, Some(3));
    let again = b.complete_acquire(2, "c", Done, Some(3));
    Case::invalid(
        "without_grants_a_lower_acquired_token_is_not_monotonic",
        b,
        TokenNotMonotonic,
        [three, five],
    )
    .and(TokenReused, [again, three])
}

/// A failed or timed-out (`info`) acquire is no acquisition, even if it names a token.
fn failed_and_info_acquires_are_not_acquisitions() -> Case {
    let mut b = B::new();
    b.invoke_acquire(0, "a");
    b.complete_acquire(0, "a", Done, Some(1));
    b.invoke_acquire(1, "b");
    b.complete_acquire(1, "b", Fail, Some(1));
    b.invoke_acquire(2, "c");
    b.complete_acquire(2, "c", Info, Some(1));
    b.invoke_acquire(3, "d");
    b.complete_acquire(3, "d", Done, Some(2));
    Case::valid("failed_and_info_acquires_are_not_acquisitions", b)
}

/// With grant events in the history, `acquire` `ok`s are not acquisitions: c's `ok` of token
/// 1 (no grant behind it) is not a reuse.
fn with_grants_acquire_oks_are_not_acquisitions() -> Case {
    let mut b = B::new();
    let inv = b.invoke_acquire(0, "a");
    b.lease_on(Grant, LOCK, "a", 1, Some(inv));
    b.complete_acquire(0, "a", Done, Some(1));
    b.end(Release, "a", 1);
    b.complete_acquire(1, "c", Done, Some(1));
    Case::valid("with_grants_acquire_oks_are_not_acquisitions", b)
}

// ---------------------------------------------------------------------------------------------
// mutual-exclusion-service
// ---------------------------------------------------------------------------------------------

fn overlapping_grants_break_service_exclusion() -> Case {
    let mut b = B::new();
    let a = b.grant("a", 1);
    let bb = b.grant("b", 2);
    b.end(Expire, "a", 1);
    b.end(Expire, "b", 2);
    Case::invalid(
        "overlapping_grants_break_service_exclusion",
        b,
        MutualExclusionService,
        [bb, a],
    )
}

fn a_lease_expired_before_the_next_grant_is_fine() -> Case {
    let mut b = B::new();
    b.grant("a", 1);
    b.end(Expire, "a", 1);
    b.grant("b", 2);
    b.end(Expire, "b", 2);
    b.grant("a", 3);
    Case::valid("a_lease_expired_before_the_next_grant_is_fine", b)
}

fn a_lease_released_by_its_holder_before_the_next_grant_is_fine() -> Case {
    let mut b = B::new();
    let acq = b.invoke_acquire(0, "a");
    b.lease_on(Grant, LOCK, "a", 1, Some(acq));
    b.complete_acquire(0, "a", Done, Some(1));
    let rel = b.invoke_release(0, "a", 1);
    b.lease_on(Release, LOCK, "a", 1, Some(rel));
    b.complete_release(0, "a", Done, 1);
    b.grant("b", 2);
    Case::valid(
        "a_lease_released_by_its_holder_before_the_next_grant_is_fine",
        b,
    )
}

fn a_lease_revoked_before_the_next_grant_is_fine() -> Case {
    let mut b = B::new();
    b.grant("a", 1);
    b.end(Revoke, "a", 1);
    b.grant("b", 2);
    Case::valid("a_lease_revoked_before_the_next_grant_is_fine", b)
}

/// a's lease ends at exactly the instant b's starts (recorded just after the grant): not a
/// clash, overlap is strict.
fn a_lease_ending_at_the_instant_of_the_next_grant_is_fine() -> Case {
    let mut b = B::new();
    b.grant("a", 1);
    b.at_ms(5).grant("b", 2);
    b.same_instant().end(Expire, "a", 1);
    Case::valid("a_lease_ending_at_the_instant_of_the_next_grant_is_fine", b)
}

/// One nanosecond later it is a clash.
fn a_lease_ending_one_ns_after_the_next_grant_clashes() -> Case {
    let mut b = B::new();
    let a = b.grant("a", 1);
    let bb = b.at_ms(5).grant("b", 2);
    b.at_ns(5 * MS + 1).end(Expire, "a", 1);
    Case::invalid(
        "a_lease_ending_one_ns_after_the_next_grant_clashes",
        b,
        MutualExclusionService,
        [bb, a],
    )
}

/// A client that presents an epoch it keeps (5) rather than the token it was granted (1):
/// `token-not-granted`, at the write's invoke, with its last grant (docs/checks.md,
/// token-not-granted). The resource accepts it: nothing else is wrong.
fn a_remembered_epoch_presented_is_token_not_granted() -> Case {
    let mut b = B::new();
    let acq = b.invoke_acquire(0, "a");
    let granted = b.lease_on(Grant, LOCK, "a", 1, Some(acq));
    b.complete_acquire(0, "a", Done, Some(1));
    let write = b.invoke_write(0, "a", 5, "x");
    b.accept("a", 5, Some(write));
    b.complete_write(0, "a", Done, 5, "x");
    Case::invalid(
        "a_remembered_epoch_presented_is_token_not_granted",
        b,
        TokenNotGranted,
        [write, granted],
    )
}

/// A client that presents the token the service granted another client, after its own lease
/// expired: not its own (witnesses: the write, its own last grant, the grant of that token).
fn another_clients_token_presented_is_token_not_granted() -> Case {
    let mut b = B::new();
    let own = b.grant("a", 1);
    b.end(Expire, "a", 1);
    let theirs = b.grant("b", 2);
    let write = b.invoke_write(0, "a", 2, "x");
    b.accept("a", 2, Some(write));
    b.complete_write(0, "a", Done, 2, "x");
    Case::invalid(
        "another_clients_token_presented_is_token_not_granted",
        b,
        TokenNotGranted,
        [write, own, theirs],
    )
}

/// A token given by a renewal is granted too: a write with it is its client's own.
fn a_renewed_token_presented_is_its_own() -> Case {
    let mut b = B::new();
    b.grant("a", 1);
    b.lease_on(EventKind::Renew, LOCK, "a", 1, None);
    let write = b.invoke_write(0, "a", 1, "x");
    b.accept("a", 1, Some(write));
    b.complete_write(0, "a", Done, 1, "x");
    Case::valid("a_renewed_token_presented_is_its_own", b)
}

/// A lease service's grant promising 10 ms, recorded with its TTL, after a's acquire invoke.
fn promised_grant(b: &mut B, holder: &str, token: u64, ttl_ms: u64) -> u64 {
    b.event(Grant, "lease-service", |e| {
        e.lock = Some(LOCK.into());
        e.holder = Some(holder.into());
        e.token = Some(token);
        e.ttl_ms = Some(ttl_ms);
    })
}

/// The service's wall clock jumps forward and it expires a's lease 6 ms into its 10 ms TTL,
/// while a still believes it holds the lock: lease-ended-early, the service to blame, with
/// the jump as its cause (witnesses: the expire, the grant, the jump).
fn a_service_that_expires_a_lease_before_its_ttl_ended_it_early() -> Case {
    let mut b = B::new();
    b.invoke_acquire(0, "a");
    let grant = promised_grant(&mut b, "a", 1, 10);
    b.belief("a", Start, 1);
    let jump = b.at_ms(5).event(EventKind::ClockJump, "nemesis", |e| {
        e.phase = Some(Start);
        e.target = Some("lease-service".into());
    });
    let expire = b.at_ms(6).end(Expire, "a", 1);
    b.at_ms(8).belief("a", End, 1);
    Case::invalid(
        "a_service_that_expires_a_lease_before_its_ttl_ended_it_early",
        b,
        LeaseEndedEarly,
        [expire, grant, jump],
    )
}

/// The same early expiry after a's belief has ended (its margin covered it) harms nobody;
/// an expiry at the TTL's end is on time.
fn an_early_expiry_nobody_counted_on_or_one_on_time_is_valid() -> Case {
    let mut b = B::new();
    b.invoke_acquire(0, "a");
    promised_grant(&mut b, "a", 1, 10);
    b.belief("a", Start, 1);
    b.at_ms(5).belief("a", End, 1);
    b.at_ms(6).end(Expire, "a", 1);
    b.invoke_acquire(1, "b");
    promised_grant(&mut b, "b", 2, 10);
    b.belief("b", Start, 2);
    b.at_ms(17).end(Expire, "b", 2);
    b.belief("b", End, 2);
    Case::valid(
        "an_early_expiry_nobody_counted_on_or_one_on_time_is_valid",
        b,
    )
}

/// A quorum lock (Redlock) on 3 nodes, by its nodes' key events (docs/checks.md, Quorum
/// locks): redis-2 crashes and comes back without a's key, then sets it for b, who gets a
/// majority (redis-2, redis-3) while a still believes on its own (redis-1, redis-2). The node's
/// fault (`lease-ended-early`: the key that ended, its set, the crash) and two majorities at
/// once (`mutual-exclusion-service`, at b's belief, against a's), besides the clients' view.
fn a_quorum_node_that_loses_a_key_breaks_the_quorum_lock() -> Case {
    let mut b = B::opaque();
    let key = |b: &mut B, node: &str, holder: &str, value: u64| {
        b.event(EventKind::KeySet, node, |e| {
            e.lock = Some(LOCK.into());
            e.holder = Some(holder.into());
            e.token = Some(value);
            e.ttl_ms = Some(1000);
            e.nodes = Some(3);
        })
    };
    b.invoke_acquire(0, "a");
    key(&mut b, "redis-1", "a", 7);
    let lost = key(&mut b, "redis-2", "a", 7);
    let a = b.belief("a", Start, 7);
    let crash = b.event(EventKind::Crash, "nemesis", |e| {
        e.phase = Some(Start);
        e.target = Some("redis-2".into());
    });
    b.invoke_acquire(1, "b");
    let taken = key(&mut b, "redis-2", "b", 9);
    key(&mut b, "redis-3", "b", 9);
    let bb = b.belief("b", Start, 9);
    Case::invalid(
        "a_quorum_node_that_loses_a_key_breaks_the_quorum_lock",
        b,
        LeaseEndedEarly,
        [taken, lost, crash],
    )
    .and(MutualExclusionService, [bb, a])
    .and(MutualExclusionClient, [bb, a])
}

/// The same holder with two different tokens live at once: the tokens differ, so it clashes.
fn one_holder_with_two_live_tokens_clashes() -> Case {
    let mut b = B::new();
    let one = b.grant("a", 1);
    let two = b.grant("a", 2);
    Case::invalid(
        "one_holder_with_two_live_tokens_clashes",
        b,
        MutualExclusionService,
        [two, one],
    )
}

/// Two overlaps separated in time are two incidents.
fn separate_overlaps_are_separate_incidents() -> Case {
    let mut b = B::new();
    let a = b.grant("a", 1);
    let bb = b.grant("b", 2);
    b.end(Expire, "a", 1);
    b.end(Expire, "b", 2);
    b.grant("c", 3);
    b.grant("d", 4);
    b.end(Expire, "c", 3);
    b.end(Expire, "d", 4);
    Case::invalid(
        "separate_overlaps_are_separate_incidents",
        b,
        MutualExclusionService,
        [bb, a],
    )
    .count(2)
}

/// b's lease is granted and revoked at one instant inside a's: an empty interval clashes with
/// nothing.
fn an_empty_lease_clashes_with_nothing() -> Case {
    let mut b = B::new();
    b.grant("a", 1);
    b.at_ms(2).grant("b", 2);
    b.same_instant().end(Revoke, "b", 2);
    b.at_ms(3).end(Expire, "a", 1);
    Case::valid("an_empty_lease_clashes_with_nothing", b)
}

/// A lease that never ends, and three later leases: one incident, witnessed by the first
/// later grant, the stuck one, then the rest in history order.
fn a_lease_that_never_ends_is_one_incident() -> Case {
    let mut b = B::new();
    let stuck = b.grant("a", 1);
    let g2 = b.grant("b", 2);
    b.end(Release, "b", 2);
    let g3 = b.grant("c", 3);
    b.end(Release, "c", 3);
    let g4 = b.grant("b", 4);
    Case::invalid(
        "a_lease_that_never_ends_is_one_incident",
        b,
        MutualExclusionService,
        [g2, stuck, g3, g4],
    )
}

// ---------------------------------------------------------------------------------------------
// mutual-exclusion-client
// ---------------------------------------------------------------------------------------------

/// The service's leases do not overlap (a's expires before b's grant), but a still believes
/// it holds the lock when b starts believing: client view only.
fn client_beliefs_overlap_while_service_leases_do_not() -> Case {
    let mut b = B::new();
    b.grant("a", 1);
    let a = b.belief("a", Start, 1);
    b.end(Expire, "a", 1);
    b.grant("b", 2);
    let bb = b.belief("b", Start, 2);
    b.belief("a", End, 1);
    b.belief("b", End, 2);
    Case::invalid(
        "client_beliefs_overlap_while_service_leases_do_not",
        b,
        MutualExclusionClient,
        [bb, a],
    )
}

/// a's start with token 2 closes its token-1 interval; b overlaps the token-2 one, so that is
/// the earlier witness (and a's two intervals do not clash with each other).
fn a_belief_in_a_new_token_closes_the_old_one() -> Case {
    let mut b = B::new();
    b.belief("a", Start, 1);
    let a2 = b.belief("a", Start, 2);
    let bb = b.belief("b", Start, 3);
    b.belief("a", End, 2);
    b.belief("b", End, 3);
    Case::invalid(
        "a_belief_in_a_new_token_closes_the_old_one",
        b,
        MutualExclusionClient,
        [bb, a2],
    )
}

/// A second start with the same token extends the interval (it starts at the first start),
/// and an interval still open at the end of the history lasts to the end.
fn a_renewed_belief_extends_and_an_open_one_lasts_to_the_end() -> Case {
    let mut b = B::new();
    let a = b.belief("a", Start, 1);
    b.belief("a", Start, 1);
    let bb = b.at_ms(100).belief("b", Start, 2);
    Case::invalid(
        "a_renewed_belief_extends_and_an_open_one_lasts_to_the_end",
        b,
        MutualExclusionClient,
        [bb, a],
    )
}

/// Beliefs handed over in order; an `end` with no belief open is ignored.
fn beliefs_handed_over_in_order_are_valid() -> Case {
    let mut b = B::new();
    b.belief("c", End, 7);
    b.belief("a", Start, 1);
    b.belief("a", Start, 1);
    b.belief("a", End, 1);
    b.belief("b", Start, 2);
    b.belief("b", End, 2);
    b.belief("a", Start, 3);
    Case::valid("beliefs_handed_over_in_order_are_valid", b)
}

fn beliefs_on_different_locks_do_not_clash() -> Case {
    let mut b = B::new();
    b.belief_on("a", Start, "x", 1);
    b.belief_on("b", Start, "y", 1);
    b.belief_on("a", End, "x", 1);
    Case::valid("beliefs_on_different_locks_do_not_clash", b)
}

fn service_and_client_overlap_are_both_reported() -> Case {
    let mut b = B::new();
    let ga = b.grant("a", 1);
    let ba = b.belief("a", Start, 1);
    let gb = b.grant("b", 2);
    let bb = b.belief("b", Start, 2);
    Case::invalid(
        "service_and_client_overlap_are_both_reported",
        b,
        MutualExclusionService,
        [gb, ga],
    )
    .and(MutualExclusionClient, [bb, ba])
}

// ---------------------------------------------------------------------------------------------
// release-by-non-holder
// ---------------------------------------------------------------------------------------------

/// b asks for the release and the service ends a's live lease: the release, b's invoke, a's
/// grant.
fn a_release_requested_by_another_node() -> Case {
    let mut b = B::new();
    let acq = b.invoke_acquire(0, "a");
    let grant = b.lease_on(Grant, LOCK, "a", 1, Some(acq));
    b.complete_acquire(0, "a", Done, Some(1));
    let inv = b.invoke_release(1, "b", 1);
    let rel = b.lease_on(Release, LOCK, "a", 1, Some(inv));
    b.complete_release(1, "b", Done, 1);
    Case::invalid(
        "a_release_requested_by_another_node",
        b,
        ReleaseByNonHolder,
        [rel, inv, grant],
    )
}

/// a's lease expired and b holds the lock; a's late release of its own (a, 1) ends nothing of
/// b's: valid (a release by the holder is never someone else's, even when its lease had ended,
/// as when a new primary revoked it while the old one still honoured it).
fn a_late_release_of_the_callers_own_lease_is_fine() -> Case {
    let mut b = B::new();
    b.grant("a", 1);
    b.end(Expire, "a", 1);
    b.grant("b", 2);
    let inv = b.invoke_release(0, "a", 1);
    b.lease_on(Release, LOCK, "a", 1, Some(inv));
    b.complete_release(0, "a", Done, 1);
    Case::valid("a_late_release_of_the_callers_own_lease_is_fine", b)
}

/// A release of a lease the lock never granted (b, 7), requested by b: the release, its
/// invoke, and the live lease at risk (a's).
fn a_release_of_a_lease_never_granted() -> Case {
    let mut b = B::new();
    let live = b.grant("a", 1);
    let inv = b.invoke_release(0, "b", 7);
    let rel = b.lease_on(Release, LOCK, "b", 7, Some(inv));
    b.complete_release(0, "b", Done, 7);
    Case::invalid(
        "a_release_of_a_lease_never_granted",
        b,
        ReleaseByNonHolder,
        [rel, inv, live],
    )
}

/// A release without an `op` that names the wrong holder: the release and the live grant.
fn a_release_naming_the_wrong_holder_without_an_op() -> Case {
    let mut b = B::new();
    let live = b.grant("a", 1);
    let rel = b.end(Release, "b", 1);
    Case::invalid(
        "a_release_naming_the_wrong_holder_without_an_op",
        b,
        ReleaseByNonHolder,
        [rel, live],
    )
}

// ---------------------------------------------------------------------------------------------
// unfenced-mutation
// ---------------------------------------------------------------------------------------------

/// The key is fenced (a tokened accept), so both tokenless accepts on it are violations, the
/// one before the first tokened write too; a tokenless accept on an unfenced key is not.
fn tokenless_accepts_on_a_fenced_key() -> Case {
    let mut b = B::new();
    let early = b.resource_on(Accept, KEY, "admin", None, None);
    b.accept("a", 1, None);
    b.resource_on(Accept, KEY, "cleanup", None, None);
    b.resource_on(Accept, "scratch", "admin", None, None);
    Case::invalid(
        "tokenless_accepts_on_a_fenced_key",
        b,
        UnfencedMutation,
        [early],
    )
    .count(2)
}

/// a's late token-less delete lands after b's fenced write: it destroyed b's data, and the
/// witnesses name that write after the delete.
fn a_tokenless_delete_names_what_it_destroyed() -> Case {
    let mut b = B::new();
    b.accept("a", 1, None);
    let theirs = b.accept("b", 2, None);
    let late = b.event(Accept, "resource", |e| {
        e.key = Some(KEY.into());
        e.holder = Some("a".into());
        e.detail = Some("delete".into());
    });
    Case::invalid(
        "a_tokenless_delete_names_what_it_destroyed",
        b,
        UnfencedMutation,
        [late, theirs],
    )
}

/// A tokened reject is enough to make the key fenced.
fn a_key_fenced_only_by_a_tokened_reject() -> Case {
    let mut b = B::new();
    b.reject("a", 3, None);
    let bypass = b.resource_on(Accept, KEY, "admin", None, None);
    Case::invalid(
        "a_key_fenced_only_by_a_tokened_reject",
        b,
        UnfencedMutation,
        [bypass],
    )
}

fn a_key_never_written_with_tokens_is_not_fenced() -> Case {
    let mut b = B::new();
    b.resource_on(Accept, "cache", "admin", None, None);
    b.accept("a", 1, None);
    b.resource_on(Accept, "cache", "cleanup", None, None);
    b.resource_on(Reject, "cache", "cleanup", None, None);
    Case::valid("a_key_never_written_with_tokens_is_not_fenced", b)
}

// ---------------------------------------------------------------------------------------------
// duplicate-execution
// ---------------------------------------------------------------------------------------------

fn the_same_work_from_two_operations() -> Case {
    let mut b = B::new();
    let a_inv = b.invoke_write(0, "a", 1, "job-7");
    let first = b.accept("a", 1, Some(a_inv));
    b.complete_write(0, "a", Done, 1, "job-7");
    let b_inv = b.invoke_write(1, "b", 2, "job-7");
    let second = b.accept("b", 2, Some(b_inv));
    b.complete_write(1, "b", Done, 2, "job-7");
    Case::invalid(
        "the_same_work_from_two_operations",
        b,
        DuplicateExecution,
        [second, first],
    )
}

/// The network delivered a's write twice: two accepts answering one invoke.
fn a_network_duplicate_is_one_operation() -> Case {
    let mut b = B::new();
    let inv = b.invoke_write(0, "a", 1, "job-7");
    b.accept("a", 1, Some(inv));
    b.accept("a", 1, Some(inv));
    b.complete_write(0, "a", Done, 1, "job-7");
    Case::valid("a_network_duplicate_is_one_operation", b)
}

/// Three operations of one unit of work: two violations, each against the first accept.
fn every_later_copy_is_witnessed_against_the_first() -> Case {
    let mut b = B::new();
    let i1 = b.invoke_write(0, "a", 1, "job-7");
    let first = b.accept("a", 1, Some(i1));
    b.complete_write(0, "a", Done, 1, "job-7");
    let i2 = b.invoke_write(1, "b", 2, "job-7");
    let second = b.accept("b", 2, Some(i2));
    b.complete_write(1, "b", Done, 2, "job-7");
    let i3 = b.invoke_write(2, "c", 3, "job-7");
    b.accept("c", 3, Some(i3));
    b.complete_write(2, "c", Done, 3, "job-7");
    Case::invalid(
        "every_later_copy_is_witnessed_against_the_first",
        b,
        DuplicateExecution,
        [second, first],
    )
    .count(2)
}

fn the_same_value_on_two_keys_is_two_units_of_work() -> Case {
    let mut b = B::new();
    let i1 = b.write_rec(0, "a", OpType::Invoke, KEY, Some(1), "job-7");
    b.resource_on(Accept, KEY, "a", Some(1), Some(i1));
    b.write_rec(0, "a", Done, KEY, Some(1), "job-7");
    let i2 = b.write_rec(1, "b", OpType::Invoke, "j", Some(1), "job-7");
    b.resource_on(Accept, "j", "b", Some(1), Some(i2));
    b.write_rec(1, "b", Done, "j", Some(1), "job-7");
    Case::valid("the_same_value_on_two_keys_is_two_units_of_work", b)
}

/// The retry was rejected (and failed): the work took effect once.
fn a_rejected_retry_did_not_execute_twice() -> Case {
    let mut b = B::new();
    let i1 = b.invoke_write(0, "b", 2, "job-7");
    b.accept("b", 2, Some(i1));
    b.complete_write(0, "b", Done, 2, "job-7");
    let i2 = b.invoke_write(1, "a", 1, "job-7");
    b.reject("a", 1, Some(i2));
    b.complete_write(1, "a", Fail, 1, "job-7");
    Case::valid("a_rejected_retry_did_not_execute_twice", b)
}

// ---------------------------------------------------------------------------------------------
// not-linearizable
// ---------------------------------------------------------------------------------------------

fn a_stale_read_after_a_completed_write() -> Case {
    let mut b = B::new();
    b.write(0, "a", "x");
    b.write(0, "a", "y");
    let (inv, ok) = b.read(1, "b", Some("x"));
    Case::invalid(
        "a_stale_read_after_a_completed_write",
        b,
        NotLinearizable,
        [inv, ok],
    )
}

/// Writes of x and y overlap; either may land last.
fn concurrent_writes_then(name: &'static str, seen: &str) -> Case {
    let mut b = B::new();
    b.write_rec(0, "a", OpType::Invoke, KEY, Some(1), "x");
    b.write_rec(1, "b", OpType::Invoke, KEY, Some(1), "y");
    b.write_rec(1, "b", Done, KEY, Some(1), "y");
    b.write_rec(0, "a", Done, KEY, Some(1), "x");
    b.read(2, "c", Some(seen));
    b.read(2, "c", Some(seen));
    Case::valid(name, b)
}

/// But not both orders: after x was read as the last write, y cannot be.
fn concurrent_writes_cannot_be_seen_in_both_orders() -> Case {
    let mut b = B::new();
    b.write_rec(0, "a", OpType::Invoke, KEY, Some(1), "x");
    b.write_rec(1, "b", OpType::Invoke, KEY, Some(1), "y");
    b.write_rec(1, "b", Done, KEY, Some(1), "y");
    b.write_rec(0, "a", Done, KEY, Some(1), "x");
    b.read(2, "c", Some("x"));
    let (inv, ok) = b.read(2, "c", Some("y"));
    Case::invalid(
        "concurrent_writes_cannot_be_seen_in_both_orders",
        b,
        NotLinearizable,
        [inv, ok],
    )
}

/// An `info` write may take effect after its timeout: read x, then y.
fn an_info_write_may_take_effect_late() -> Case {
    let mut b = B::new();
    b.write(0, "a", "x");
    b.write_rec(1, "b", OpType::Invoke, KEY, Some(1), "y");
    b.write_rec(1, "b", Info, KEY, Some(1), "y");
    b.read(2, "c", Some("x"));
    b.read(2, "c", Some("y"));
    Case::valid("an_info_write_may_take_effect_late", b)
}

/// Or never: an `info` write and a write never answered, and only x is ever read.
fn info_and_unanswered_writes_may_never_take_effect() -> Case {
    let mut b = B::new();
    b.write(0, "a", "x");
    b.write_rec(1, "b", OpType::Invoke, KEY, Some(1), "y");
    b.write_rec(1, "b", Info, KEY, Some(1), "y");
    b.write_rec(3, "d", OpType::Invoke, KEY, Some(1), "z");
    b.read(2, "c", Some("x"));
    b.read(2, "c", Some("x"));
    Case::valid("info_and_unanswered_writes_may_never_take_effect", b)
}

/// Once the `info` write was seen, the register cannot go back to x.
fn an_info_write_once_seen_cannot_be_unseen() -> Case {
    let mut b = B::new();
    b.write(0, "a", "x");
    b.write_rec(1, "b", OpType::Invoke, KEY, Some(1), "y");
    b.write_rec(1, "b", Info, KEY, Some(1), "y");
    b.read(2, "c", Some("y"));
    let (inv, ok) = b.read(2, "c", Some("x"));
    Case::invalid(
        "an_info_write_once_seen_cannot_be_unseen",
        b,
        NotLinearizable,
        [inv, ok],
    )
}

/// A `fail` write certainly did not happen: reading its value is not linearizable.
fn a_failed_write_never_takes_effect() -> Case {
    let mut b = B::new();
    b.write(0, "a", "x");
    b.write_rec(1, "b", OpType::Invoke, KEY, Some(1), "y");
    b.write_rec(1, "b", Fail, KEY, Some(1), "y");
    let (inv, ok) = b.read(2, "c", Some("y"));
    Case::invalid(
        "a_failed_write_never_takes_effect",
        b,
        NotLinearizable,
        [inv, ok],
    )
}

fn a_failed_write_leaves_the_old_value() -> Case {
    let mut b = B::new();
    b.write(0, "a", "x");
    b.write_rec(1, "b", OpType::Invoke, KEY, Some(1), "y");
    b.write_rec(1, "b", Fail, KEY, Some(1), "y");
    b.read(2, "c", Some("x"));
    Case::valid("a_failed_write_leaves_the_old_value", b)
}

/// Reads that did not complete `ok` say nothing, whatever value they carry.
fn failed_and_info_reads_are_ignored() -> Case {
    let mut b = B::new();
    b.write(0, "a", "x");
    b.invoke_read(1, "b");
    b.read_rec(1, "b", Fail, KEY, Some("ghost"));
    b.invoke_read(1, "b");
    b.read_rec(1, "b", Info, KEY, Some("y"));
    b.invoke_read(2, "c");
    b.read(3, "d", Some("x"));
    Case::valid("failed_and_info_reads_are_ignored", b)
}

fn a_read_of_a_value_nobody_wrote() -> Case {
    let mut b = B::new();
    b.write(0, "a", "x");
    let (inv, ok) = b.read(1, "b", Some("ghost"));
    Case::invalid(
        "a_read_of_a_value_nobody_wrote",
        b,
        NotLinearizable,
        [inv, ok],
    )
}

/// An empty read after a completed write: the register cannot be empty again.
fn an_empty_read_after_a_completed_write() -> Case {
    let mut b = B::new();
    b.write(0, "a", "x");
    let (inv, ok) = b.read(1, "b", None);
    Case::invalid(
        "an_empty_read_after_a_completed_write",
        b,
        NotLinearizable,
        [inv, ok],
    )
}

fn an_empty_read_before_the_first_write_is_fine() -> Case {
    let mut b = B::new();
    b.read(1, "b", None);
    b.write(0, "a", "x");
    b.read(1, "b", Some("x"));
    Case::valid("an_empty_read_before_the_first_write_is_fine", b)
}

/// Key k is fine; key j has the stale read.
fn keys_are_linearized_independently() -> Case {
    let mut b = B::new();
    b.write_on(0, "a", KEY, "x");
    b.write_on(0, "a", "j", "x");
    b.write_on(0, "a", "j", "y");
    b.read_on(1, "b", KEY, Some("x"));
    let (inv, ok) = b.read_on(1, "b", "j", Some("x"));
    b.read_on(1, "b", KEY, Some("x"));
    Case::invalid(
        "keys_are_linearized_independently",
        b,
        NotLinearizable,
        [inv, ok],
    )
}

/// Twelve concurrent writes and a read of a value none of them wrote: deciding it takes tens
/// of thousands of steps. Returns the builder and the read's invoke and completion.
fn many_concurrent_writes_then_a_ghost_read() -> (B, u64, u64) {
    let mut b = B::new();
    for p in 0..12 {
        b.write_rec(p, "w", OpType::Invoke, KEY, Some(1), &format!("v{p}"));
    }
    for p in 0..12 {
        b.write_rec(p, "w", Done, KEY, Some(1), &format!("v{p}"));
    }
    let (inv, ok) = b.read(12, "r", Some("ghost"));
    (b, inv, ok)
}

fn a_search_past_its_budget_is_unknown() -> Case {
    let (b, _, _) = many_concurrent_writes_then_a_ghost_read();
    Case::unknown("a_search_past_its_budget_is_unknown", b, 50, 1)
}

/// The same history with the default budget: decided, not linearizable, the read witnessed.
fn the_same_search_within_budget_is_decided() -> Case {
    let (b, inv, ok) = many_concurrent_writes_then_a_ghost_read();
    Case::invalid(
        "the_same_search_within_budget_is_decided",
        b,
        NotLinearizable,
        [inv, ok],
    )
}

/// Another check's violation makes the verdict invalid even with an undecided key.
fn another_violation_outweighs_an_undecided_key() -> Case {
    let (mut b, _, _) = many_concurrent_writes_then_a_ghost_read();
    let newer = b.accept("b", 2, None);
    let stale = b.accept("a", 1, None);
    Case::invalid(
        "another_violation_outweighs_an_undecided_key",
        b,
        StaleWriteAccepted,
        [stale, newer],
    )
    .steps(50, 1)
}

// ---------------------------------------------------------------------------------------------
// no-progress-after-heal
// ---------------------------------------------------------------------------------------------

fn no_write_accepted_after_the_final_heal() -> Case {
    let mut b = B::new();
    let heal = b.final_heal(Some(10));
    b.invoke_write(0, "a", 1, "a/1");
    Case::invalid(
        "no_write_accepted_after_the_final_heal",
        b,
        NoProgressAfterHeal,
        [heal],
    )
}

fn an_accept_within_the_window_is_progress() -> Case {
    let mut b = B::new();
    b.final_heal(Some(10));
    let inv = b.invoke_write(0, "a", 1, "a/1");
    b.accept("a", 1, Some(inv));
    b.complete_write(0, "a", Done, 1, "a/1");
    Case::valid("an_accept_within_the_window_is_progress", b)
}

/// Heal at 0 ms with a 10 ms window: an accept at 10 ms counts (at most `window_ms` after).
fn an_accept_at_the_end_of_the_window_counts() -> Case {
    let mut b = B::new();
    b.final_heal(Some(10));
    let inv = b.invoke_write(0, "a", 1, "a/1");
    b.at_ms(10).accept("a", 1, Some(inv));
    Case::valid("an_accept_at_the_end_of_the_window_counts", b)
}

/// At 11 ms it is too late.
fn an_accept_after_the_window_is_too_late() -> Case {
    let mut b = B::new();
    let heal = b.final_heal(Some(10));
    let inv = b.invoke_write(0, "a", 1, "a/1");
    b.at_ms(11).accept("a", 1, Some(inv));
    Case::invalid(
        "an_accept_after_the_window_is_too_late",
        b,
        NoProgressAfterHeal,
        [heal],
    )
}

/// Nothing is invoked after the heal (the write was invoked before it; only its completion
/// comes after): the clients had finished, nothing to judge.
fn without_demand_after_the_heal_nothing_is_judged() -> Case {
    let mut b = B::new();
    b.invoke_write(0, "a", 1, "a/1");
    b.final_heal(Some(10));
    b.complete_write(0, "a", Info, 1, "a/1");
    Case::valid("without_demand_after_the_heal_nothing_is_judged", b)
}

/// The only invoke comes after the window.
fn demand_only_after_the_window_is_not_judged() -> Case {
    let mut b = B::new();
    b.final_heal(Some(10));
    b.at_ms(20).invoke_write(0, "a", 1, "a/1");
    Case::valid("demand_only_after_the_window_is_not_judged", b)
}

fn a_reject_is_not_progress() -> Case {
    let mut b = B::new();
    let heal = b.final_heal(Some(10));
    let inv = b.invoke_write(0, "a", 1, "a/1");
    b.reject("a", 1, Some(inv));
    b.complete_write(0, "a", Fail, 1, "a/1");
    Case::invalid("a_reject_is_not_progress", b, NoProgressAfterHeal, [heal])
}

fn a_final_heal_without_a_window_is_not_judged() -> Case {
    let mut b = B::new();
    b.final_heal(None);
    b.invoke_write(0, "a", 1, "a/1");
    // Nothing else to judge either (a pending write constrains nothing): unknown, not valid
    // (issue 38, item 2).
    Case {
        verdict: Verdict::Unknown,
        unknown: 1,
        ..Case::valid("a_final_heal_without_a_window_is_not_judged", b)
    }
}

/// An accept before the heal is not progress after it.
fn an_accept_before_the_heal_is_not_progress() -> Case {
    let mut b = B::new();
    b.accept("a", 1, None);
    let heal = b.final_heal(Some(10));
    b.invoke_write(0, "a", 1, "a/1");
    Case::invalid(
        "an_accept_before_the_heal_is_not_progress",
        b,
        NoProgressAfterHeal,
        [heal],
    )
}

// ---------------------------------------------------------------------------------------------
// Whole runs
// ---------------------------------------------------------------------------------------------

/// Two fenced cycles done right, with a late write of the first holder rejected by the fence.
fn a_correct_fenced_run_is_valid() -> Case {
    let mut b = B::new();
    let acq = b.invoke_acquire(0, "a");
    b.lease_on(Grant, LOCK, "a", 1, Some(acq));
    b.complete_acquire(0, "a", Done, Some(1));
    b.belief("a", Start, 1);
    let w = b.invoke_write(0, "a", 1, "a/1");
    b.accept("a", 1, Some(w));
    b.complete_write(0, "a", Done, 1, "a/1");
    b.read(0, "a", Some("a/1"));
    let rel = b.invoke_release(0, "a", 1);
    b.belief("a", End, 1);
    b.lease_on(Release, LOCK, "a", 1, Some(rel));
    b.complete_release(0, "a", Done, 1);
    let acq = b.invoke_acquire(1, "b");
    b.lease_on(Grant, LOCK, "b", 2, Some(acq));
    b.complete_acquire(1, "b", Done, Some(2));
    b.belief("b", Start, 2);
    let w = b.invoke_write(1, "b", 2, "b/1");
    b.accept("b", 2, Some(w));
    b.complete_write(1, "b", Done, 2, "b/1");
    let late = b.invoke_write(0, "a", 1, "a/2");
    b.reject("a", 1, Some(late));
    b.complete_write(0, "a", Fail, 1, "a/2");
    b.read(1, "b", Some("b/1"));
    b.belief("b", End, 2);
    b.end(Expire, "b", 2);
    Case::valid("a_correct_fenced_run_is_valid", b)
}

/// The service lost a's lease (revoke) and granted b; a still believed and wrote last on an
/// unfenced-in-effect resource: a stale write and a client overlap, but no service overlap.
fn a_lost_lease_is_a_stale_write_and_a_client_overlap() -> Case {
    let mut b = B::new();
    b.grant("a", 1);
    let ba = b.belief("a", Start, 1);
    b.end(Revoke, "a", 1);
    b.grant("b", 2);
    let bb = b.belief("b", Start, 2);
    let bw = b.invoke_write(1, "b", 2, "b/1");
    let newer = b.accept("b", 2, Some(bw));
    b.complete_write(1, "b", Done, 2, "b/1");
    let aw = b.invoke_write(0, "a", 1, "a/1");
    let stale = b.accept("a", 1, Some(aw));
    b.complete_write(0, "a", Done, 1, "a/1");
    b.belief("a", End, 1);
    b.belief("b", End, 2);
    Case::invalid(
        "a_lost_lease_is_a_stale_write_and_a_client_overlap",
        b,
        StaleWriteAccepted,
        [stale, newer],
    )
    .and(MutualExclusionClient, [bb, ba])
}

fn cases() -> Vec<Case> {
    vec![
        a_remembered_epoch_presented_is_token_not_granted(),
        another_clients_token_presented_is_token_not_granted(),
        a_renewed_token_presented_is_its_own(),
        stale_write_after_the_lease_moved_on(),
        stale_writes_witness_the_first_accept_of_the_highest_token(),
        equal_tokens_from_two_holders_after_reuse_are_not_stale(),
        equal_tokens_from_two_holders_are_valid(),
        a_reject_is_never_a_violation(),
        opaque_values_are_ranked_by_their_grants(),
        opaque_values_rank_at_the_acquire_invoke(),
        opaque_writes_in_invoke_order_are_valid(),
        an_unacquired_opaque_value_is_neither_judged_nor_remembered(),
        stale_writes_are_judged_per_key(),
        a_lower_new_token_is_not_monotonic(),
        a_reused_lower_token_is_reuse_only(),
        a_service_that_expires_a_lease_before_its_ttl_ended_it_early(),
        an_early_expiry_nobody_counted_on_or_one_on_time_is_valid(),
        a_token_granted_again_to_its_holder_is_no_reuse(),
        a_re_grant_below_a_higher_token_is_not_monotonic(),
        a_reuse_after_a_re_grant_names_the_first_other_holder(),
        tokens_and_leases_are_per_lock(),
        without_grants_acquisitions_are_ordered_by_invoke(),
        without_grants_a_lower_acquired_token_is_not_monotonic(),
        failed_and_info_acquires_are_not_acquisitions(),
        with_grants_acquire_oks_are_not_acquisitions(),
        overlapping_grants_break_service_exclusion(),
        a_lease_expired_before_the_next_grant_is_fine(),
        a_lease_released_by_its_holder_before_the_next_grant_is_fine(),
        a_lease_revoked_before_the_next_grant_is_fine(),
        a_lease_ending_at_the_instant_of_the_next_grant_is_fine(),
        a_lease_ending_one_ns_after_the_next_grant_clashes(),
        a_quorum_node_that_loses_a_key_breaks_the_quorum_lock(),
        one_holder_with_two_live_tokens_clashes(),
        separate_overlaps_are_separate_incidents(),
        an_empty_lease_clashes_with_nothing(),
        a_lease_that_never_ends_is_one_incident(),
        client_beliefs_overlap_while_service_leases_do_not(),
        a_belief_in_a_new_token_closes_the_old_one(),
        a_renewed_belief_extends_and_an_open_one_lasts_to_the_end(),
        beliefs_handed_over_in_order_are_valid(),
        beliefs_on_different_locks_do_not_clash(),
        service_and_client_overlap_are_both_reported(),
        a_release_requested_by_another_node(),
        a_late_release_of_the_callers_own_lease_is_fine(),
        a_release_of_a_lease_never_granted(),
        a_release_naming_the_wrong_holder_without_an_op(),
        tokenless_accepts_on_a_fenced_key(),
        a_tokenless_delete_names_what_it_destroyed(),
        a_key_fenced_only_by_a_tokened_reject(),
        a_key_never_written_with_tokens_is_not_fenced(),
        the_same_work_from_two_operations(),
        a_network_duplicate_is_one_operation(),
        every_later_copy_is_witnessed_against_the_first(),
        the_same_value_on_two_keys_is_two_units_of_work(),
        a_rejected_retry_did_not_execute_twice(),
        a_stale_read_after_a_completed_write(),
        concurrent_writes_then("concurrent_writes_may_land_x_last", "x"),
        concurrent_writes_then("concurrent_writes_may_land_y_last", "y"),
        concurrent_writes_cannot_be_seen_in_both_orders(),
        an_info_write_may_take_effect_late(),
        info_and_unanswered_writes_may_never_take_effect(),
        an_info_write_once_seen_cannot_be_unseen(),
        a_failed_write_never_takes_effect(),
        a_failed_write_leaves_the_old_value(),
        failed_and_info_reads_are_ignored(),
        a_read_of_a_value_nobody_wrote(),
        an_empty_read_after_a_completed_write(),
        an_empty_read_before_the_first_write_is_fine(),
        keys_are_linearized_independently(),
        a_search_past_its_budget_is_unknown(),
        the_same_search_within_budget_is_decided(),
        another_violation_outweighs_an_undecided_key(),
        no_write_accepted_after_the_final_heal(),
        an_accept_within_the_window_is_progress(),
        an_accept_at_the_end_of_the_window_counts(),
        an_accept_after_the_window_is_too_late(),
        without_demand_after_the_heal_nothing_is_judged(),
        demand_only_after_the_window_is_not_judged(),
        a_reject_is_not_progress(),
        a_final_heal_without_a_window_is_not_judged(),
        an_accept_before_the_heal_is_not_progress(),
        a_correct_fenced_run_is_valid(),
        a_lost_lease_is_a_stale_write_and_a_client_overlap(),
    ]
}

#[test]
fn every_case_of_the_table_gets_its_exact_result() {
    let cases = cases();
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    run_table(cases);
}

/// The table exercises every violation kind, and every verdict.
#[test]
fn the_table_covers_every_kind_and_verdict() {
    let cases = cases();
    for kind in ViolationKind::ALL {
        assert!(
            cases
                .iter()
                .any(|c| c.expected.iter().any(|(k, _)| *k == kind)),
            "no case expects {kind}"
        );
    }
    for verdict in [Verdict::Valid, Verdict::Invalid, Verdict::Unknown] {
        assert!(
            cases.iter().any(|c| c.verdict == verdict),
            "no case expects {verdict:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Disputed: the checker disagrees with the documented rule (see each case)
// ---------------------------------------------------------------------------------------------

/// Leases are keyed by (holder, token) without the lock (`leases.rs`). a holds token 1 on lock
/// x and on lock y (each lock's counter starts at 1); the second grant overwrites the first
/// lease, so b's grant on x while a's x-lease is live is not seen as an overlap.
fn regression_one_holder_with_the_same_token_on_two_locks() -> Case {
    let mut b = B::new();
    let ax = b.lease_on(Grant, "x", "a", 1, None);
    b.lease_on(Grant, "y", "a", 1, None);
    let bx = b.lease_on(Grant, "x", "b", 2, None);
    Case::invalid(
        "regression_one_holder_with_the_same_token_on_two_locks",
        b,
        MutualExclusionService,
        [bx, ax],
    )
}

/// The fallback acquisitions: docs/checks.md says the token-reused witnesses are "the two
/// `acquire` `ok` records"; the checker gives the two invokes (where it ranks them).
fn regression_token_reused_witnesses_from_acquire_oks() -> Case {
    let mut b = B::new();
    b.invoke_acquire(0, "a");
    let first = b.complete_acquire(0, "a", Done, Some(1));
    b.invoke_acquire(1, "b");
    let again = b.complete_acquire(1, "b", Done, Some(1));
    Case::invalid(
        "regression_token_reused_witnesses_from_acquire_oks",
        b,
        TokenReused,
        [again, first],
    )
}

/// `release.rs` ends the live lease on an expire or revoke of the same token, whatever its
/// holder (`leases.rs` matches ends by holder). a's expire of reused token 1 ends b's live
/// lease there, so b's own release is reported as a release with no live lease.
fn regression_an_expire_of_another_holder_ends_the_live_lease() -> Case {
    let mut b = B::new();
    let ga = b.grant("a", 1);
    let gb = b.grant("b", 1);
    b.end(Expire, "a", 1);
    let inv = b.invoke_release(1, "b", 1);
    b.lease_on(Release, LOCK, "b", 1, Some(inv));
    b.complete_release(1, "b", Done, 1);
    Case::invalid(
        "regression_an_expire_of_another_holder_ends_the_live_lease",
        b,
        TokenReused,
        [gb, ga],
    )
    .and(MutualExclusionService, [gb, ga])
}

/// A late release of a's own ended lease used to clear b's live one in `release.rs`, so that
/// b's rightful release was reported. Neither release is anyone else's: valid.
fn regression_a_wrong_release_also_ends_the_live_lease() -> Case {
    let mut b = B::new();
    b.grant("a", 1);
    b.end(Expire, "a", 1);
    b.grant("b", 2);
    let inv = b.invoke_release(0, "a", 1);
    b.lease_on(Release, LOCK, "a", 1, Some(inv));
    b.complete_release(0, "a", Done, 1);
    let inv_b = b.invoke_release(1, "b", 2);
    b.lease_on(Release, LOCK, "b", 2, Some(inv_b));
    b.complete_release(1, "b", Done, 2);
    Case::valid("regression_a_wrong_release_also_ends_the_live_lease", b)
}

/// Doubtful rather than contrary to the docs (they do not say what a start on another lock
/// does): a client's beliefs are tracked one per client, so a's start on lock y closes its
/// belief on lock x, and b's belief on x while a still believes it holds x is not seen. The
/// simulator gives each client one lock; a history from another system need not.
fn regression_one_client_believing_two_locks() -> Case {
    let mut b = B::new();
    let ax = b.belief_on("a", Start, "x", 1);
    b.belief_on("a", Start, "y", 1);
    let bx = b.belief_on("b", Start, "x", 2);
    Case::invalid(
        "regression_one_client_believing_two_locks",
        b,
        MutualExclusionClient,
        [bx, ax],
    )
}

fn regression_cases() -> Vec<Case> {
    vec![
        regression_one_holder_with_the_same_token_on_two_locks(),
        regression_token_reused_witnesses_from_acquire_oks(),
        regression_an_expire_of_another_holder_ends_the_live_lease(),
        regression_a_wrong_release_also_ends_the_live_lease(),
        regression_one_client_believing_two_locks(),
    ]
}

#[test]
fn regression_cases_get_the_documented_result() {
    run_table(regression_cases());
}

// ---------------------------------------------------------------------------------------------
// Property: a correct sequential model is valid; one lowered token is a stale write
// ---------------------------------------------------------------------------------------------

/// One lease of the model: its holder, the gap from the previous token, its operations on the
/// register (true: write, false: read), how it ends (0 release, 1 expire, 2 revoke), and
/// whether the previous holder then tries a late write that the fence rejects.
type LeasePlan = (usize, u64, Vec<bool>, u8, bool);

/// An accepted write of the model, with the records to corrupt.
#[derive(Clone, Debug)]
struct Written {
    lease: usize,
    token: u64,
    invoke: u64,
    accept: u64,
    ok: u64,
}

struct Model {
    history: History,
    tokens: Vec<u64>,
    /// The client of each lease, as `tokens` has its token.
    clients: Vec<usize>,
    written: Vec<Written>,
}

fn model(plans: &[LeasePlan]) -> Model {
    let mut b = B::new();
    let name = |c: usize| format!("c{c}");
    let mut token = 0;
    let mut tokens = Vec::new();
    let mut clients = Vec::new();
    let mut written = Vec::new();
    let mut register: Option<(String, u64)> = None;
    let mut highest = 0;
    for (i, (client, gap, steps, end, late)) in plans.iter().enumerate() {
        let (p, node) = (*client as u64, name(*client));
        token += gap;
        tokens.push(token);
        clients.push(*client);
        let acq = b.invoke_acquire(p, &node);
        b.lease_on(Grant, LOCK, &node, token, Some(acq));
        b.complete_acquire(p, &node, Done, Some(token));
        b.belief(&node, Start, token);
        let mut writes = 0;
        for &is_write in steps {
            if is_write {
                let value = format!("{node}/{i}/{writes}");
                writes += 1;
                let invoke = b.invoke_write(p, &node, token, &value);
                highest = highest.max(token);
                let accept = b.event(Accept, "resource", |e| {
                    e.key = Some(KEY.into());
                    e.holder = Some(node.as_str().into());
                    e.token = Some(token);
                    e.highest = Some(highest);
                    e.op = Some(invoke);
                });
                let ok = b.complete_write(p, &node, Done, token, &value);
                register = Some((value, token));
                written.push(Written {
                    lease: i,
                    token,
                    invoke,
                    accept,
                    ok,
                });
                if *late && writes == 1 && i > 0 {
                    // The previous holder's late write, fenced off.
                    let (pc, pt) = (plans[i - 1].0, tokens[i - 1]);
                    let (pp, pnode) = (pc as u64, name(pc));
                    let value = format!("{pnode}/{}/late", i - 1);
                    let inv = b.invoke_write(pp, &pnode, pt, &value);
                    b.event(Reject, "resource", |e| {
                        e.key = Some(KEY.into());
                        e.holder = Some(pnode.as_str().into());
                        e.token = Some(pt);
                        e.highest = Some(highest);
                        e.op = Some(inv);
                    });
                    b.complete_write(pp, &pnode, Fail, pt, &value);
                }
            } else {
                b.invoke_read(p, &node);
                let seen = register.clone();
                b.op(p, &node, Done, OpFn::Read, |o| {
                    o.key = Some(KEY.into());
                    o.value = seen.as_ref().map(|(v, _)| v.clone());
                    o.token = seen.as_ref().map(|(_, t)| *t);
                });
            }
        }
        match end {
            0 => {
                let rel = b.invoke_release(p, &node, token);
                b.belief(&node, End, token);
                b.lease_on(Release, LOCK, &node, token, Some(rel));
                b.complete_release(p, &node, Done, token);
            }
            1 => {
                b.belief(&node, End, token);
                b.end(Expire, &node, token);
            }
            _ => {
                b.belief(&node, End, token);
                b.end(Revoke, &node, token);
            }
        }
    }
    Model {
        history: b.build(),
        tokens,
        clients,
        written,
    }
}

/// Lower the token of written[`w`] to `lower` in its invoke, accept and ok.
fn corrupt(history: &mut History, w: &Written, lower: u64) {
    for idx in [w.invoke, w.accept, w.ok] {
        match &mut history.entries[idx as usize] {
            Entry::Op(op) => op.token = Some(lower),
            Entry::Event(ev) => ev.token = Some(lower),
        }
    }
}

fn lease_plans() -> impl Strategy<Value = Vec<LeasePlan>> {
    prop::collection::vec(
        (
            0usize..3,
            1u64..4,
            prop::collection::vec(any::<bool>(), 0..5),
            0u8..3,
            any::<bool>(),
        ),
        1..7,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_correct_fenced_register_is_valid_and_a_lowered_token_is_stale(
        plans in lease_plans(),
        pick in any::<prop::sample::Index>(),
    ) {
        let Model { history, tokens, clients, written } = model(&plans);
        let result = check(&history);
        prop_assert_eq!(result.verdict, Verdict::Valid, "{:#?}", result.violations);
        prop_assert!(result.violations.is_empty());
        prop_assert!(result.unknown.is_empty());

        // (write, lower token granted earlier to the same client, the first accept of the
        // highest token before the write): lowering that write's token below an accepted one
        // makes it stale. (A token granted to another client would also be one presented
        // that its writer was never granted: token-not-granted, judged in its own cases.)
        let mut candidates = Vec::new();
        let mut best: Option<(u64, u64)> = None;
        for w in &written {
            if let Some((max, first)) = best {
                let own = (0..w.lease).filter(|&l| clients[l] == clients[w.lease]);
                for lower in own.map(|l| tokens[l]).filter(|t| *t < max) {
                    candidates.push((w.clone(), lower, first));
                }
            }
            if best.is_none_or(|(max, _)| w.token > max) {
                best = Some((w.token, w.accept));
            }
        }
        prop_assume!(!candidates.is_empty());
        let (w, lower, higher) = candidates[pick.index(candidates.len())].clone();
        let mut corrupted = history.clone();
        corrupt(&mut corrupted, &w, lower);
        let result = check(&corrupted);
        prop_assert_eq!(result.verdict, Verdict::Invalid);
        prop_assert_eq!(result.kinds(), vec![StaleWriteAccepted]);
        prop_assert_eq!(result.violations.len(), 1, "{:#?}", result.violations);
        prop_assert_eq!(&result.violations[0].witnesses, &vec![w.accept, higher]);
    }
}

/// The linearizability search has a total budget over all keys, not only one per key: three
/// hard keys with 50 steps each but 75 in all leave the third unsearched, and the verdict is
/// unknown with a reason per key.
#[test]
fn the_total_search_budget_bounds_a_history_of_many_hard_keys() {
    let mut b = B::new();
    for key in ["k1", "k2", "k3"] {
        for p in 0..12 {
            b.write_rec(p, "w", OpType::Invoke, key, Some(1), &format!("v{p}"));
        }
        for p in 0..12 {
            b.write_rec(p, "w", Done, key, Some(1), &format!("v{p}"));
        }
        b.read_on(12, "r", key, Some("ghost"));
    }
    let result = check_with(
        &b.build(),
        &CheckOptions {
            linearizability_steps: 50,
            linearizability_total_steps: 75,
            ..CheckOptions::default()
        },
    );
    assert_eq!(result.verdict, Verdict::Unknown);
    assert_eq!(result.unknown.len(), 3, "{:#?}", result.unknown);
    assert!(
        result.unknown[0].contains("\"k1\"")
            && result.unknown[0].contains("within 50 search steps")
    );
    assert!(
        result.unknown[1].contains("\"k2\"")
            && result.unknown[1].contains("within 25 search steps")
    );
    assert!(
        result.unknown[2].contains("\"k3\"") && result.unknown[2].contains("not searched"),
        "{}",
        result.unknown[2]
    );
}

/// A history with a header and nothing else has nothing to judge: unknown, not valid.
#[test]
fn an_empty_history_is_unknown_not_valid() {
    let result = check(&B::new().build());
    assert_eq!(result.verdict, Verdict::Unknown);
    assert_eq!(result.unknown.len(), 1);
    assert!(
        result.unknown[0].starts_with("nothing to judge"),
        "{}",
        result.unknown[0]
    );
    assert_eq!(result.not_checked.len(), 9);
}
