//! `not-linearizable`: the operations on each object of the history, one object at a time,
//! must have a linearization (Herlihy and Wing 1990) against the object's sequential model:
//!
//! - each resource key is a **compare-and-set register** (Knossos's `cas-register`): a read
//!   returns the value of the last write or compare-and-set linearized before it, an `ok`
//!   `cas` found the value it expected and set its new one, and a delete leaves the register
//!   as if never written. The register starts never written, or with
//!   [`crate::CheckOptions::initial_value`];
//! - with [`crate::CheckOptions::lock_model`], each lock is a **mutex** (Knossos's
//!   `model/mutex`: an acquire of a held lock, or a release of a free one, is impossible) or a
//!   **fenced mutex** (the same, and the fence, the token an `ok` acquire returns, must exceed
//!   every earlier acquire's, as Jepsen's Hazelcast `FencedLock` tests require). A lease whose
//!   TTL runs out can be taken again without a release, so a lease history is never judged as
//!   a mutex unless its reader says the lock has no expiry.
//!
//! The search is Wing and Gong's, with Lowe's memoization of (linearized set, state) pairs
//! (Lowe 2017, "Testing for linearizability"), over one object at a time, as Porcupine
//! partitions a history; one search serves every model ([`Model`]). Only what the clients saw
//! is used: an `ok` operation took effect, a `fail` one did not, an `info` one (or one never
//! answered) may or may not have: it may be linearized at any point after its invoke, or never,
//! so an operation whose effect is uncertain never proves a violation. Reads that did not complete `ok` say nothing and are left out, and so are `ok`
//! reads of an unknown value (Knossos's `nil`), which any state explains. A failed `cas` is
//! read as [`FailedCas`] says: by default Knossos's reading (it never happened), or Porcupine's
//! (it happened, and found another value than it expected). Whether a write should have been
//! accepted is the fencing checks' business, not this one's.
//!
//! The search has a budget of steps per object; past it the object is reported as unknown,
//! never as valid and never as a hang.

use std::collections::{BTreeMap, BTreeSet};

use fencesim_history::{Name, Op, OpFn, OpType, ViolationKind};
use serde::{Deserialize, Serialize};

use crate::{CheckOptions, Records, Violation};

/// Search steps allowed per object (key or lock) before the verdict is unknown.
pub const DEFAULT_STEP_BUDGET: u64 = 10_000_000;

/// Search steps allowed over all objects together: without it a history of many hard keys
/// costs their number times the per-key budget (10 keys ran 19 s before the verdict was
/// unknown).
pub const DEFAULT_TOTAL_STEP_BUDGET: u64 = 30_000_000;

/// How a compare-and-set that completed `fail` is read. Checkers differ here, and a history
/// can be valid under one reading and not the other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailedCas {
    /// Knossos's: a `fail` operation never happened, so it is left out, as a failed write is.
    /// A store that reports a cas failed when it could not reach a quorum, for any reason,
    /// is judged fairly this way.
    #[default]
    Knossos,
    /// Porcupine's: a failed cas is a completed operation that read the register and found
    /// another value than it expected, at some point between its invoke and its completion.
    Porcupine,
}

impl FailedCas {
    /// How explanations name this reading.
    fn describe(self) -> &'static str {
        match self {
            FailedCas::Knossos => "a failed cas never happened (Knossos's reading)",
            FailedCas::Porcupine => {
                "a failed cas happened and found another value than it expected (Porcupine's \
                 reading)"
            }
        }
    }
}

/// The model a history's lock operations (`acquire`, `release`) are judged against, for a
/// lock that has no expiry. Without one they are not judged from operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LockModel {
    /// Knossos's `model/mutex`: an acquire of a held lock, or a release of a free one, is
    /// impossible. Who holds it is not tracked (Jepsen's processes change after a crash).
    Mutex,
    /// A mutex whose `ok` acquire returns a fence (the op's token) that must be greater than
    /// every fence returned before it: the model of Jepsen's Hazelcast `FencedLock` tests.
    FencedMutex,
}

impl LockModel {
    /// How explanations name this model.
    fn describe(self) -> &'static str {
        match self {
            LockModel::Mutex => {
                "as a mutex (Knossos's model/mutex: an acquire of a held lock or a release of a \
                 free one is impossible)"
            }
            LockModel::FencedMutex => {
                "as a fenced mutex (an acquire of a held lock or a release of a free one is \
                 impossible, and each acquire's fence must exceed every earlier one)"
            }
        }
    }
}

/// A written value, interned: the search compares and copies numbers, not strings.
type Value = u32;

/// A sequential specification (Herlihy and Wing 1990): the states an object goes through and
/// the operations legal in each. The search asks only this of a model, so that one search
/// serves the register and the locks.
trait Model {
    /// What the object holds between operations: copied at every step and kept in the memo,
    /// so small.
    type State: Copy + Ord;
    /// One operation as it completed (its arguments and what it returned).
    type Action;
    /// The state after `action`, if `action` is legal in `state`.
    fn step(state: Self::State, action: &Self::Action) -> Option<Self::State>;
}

/// The compare-and-set register; its state is its value (`None`: never written).
struct Register;

/// A register operation one client operation performed.
#[derive(Clone, Debug, PartialEq, Eq)]
enum RegisterOp {
    /// Read and saw this value (`None`: never written).
    Read(Option<Value>),
    /// Wrote this value.
    Write(Value),
    /// Found `from` (`None`: never written) and set `to`.
    Cas { from: Option<Value>, to: Value },
    /// Porcupine's failed cas: found another value than `from`, and left it.
    CasRefused { from: Option<Value> },
    /// Deleted the key: it is as if never written.
    Delete,
}

impl Model for Register {
    type State = Option<Value>;
    type Action = RegisterOp;

    fn step(state: Option<Value>, action: &RegisterOp) -> Option<Option<Value>> {
        match action {
            RegisterOp::Read(seen) => (*seen == state).then_some(state),
            RegisterOp::Write(value) => Some(Some(*value)),
            RegisterOp::Cas { from, to } => (*from == state).then_some(Some(*to)),
            RegisterOp::CasRefused { from } => (*from != state).then_some(state),
            RegisterOp::Delete => Some(None),
        }
    }
}

/// A lock without expiry: a mutex, fenced or not.
struct Lock;

/// What a lock holds between operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct LockState {
    held: bool,
    /// The highest fence an acquire linearized so far returned.
    fence: Option<u64>,
}

/// A lock operation one client operation performed.
#[derive(Clone, Debug, PartialEq, Eq)]
enum LockOp {
    /// Took the lock; with the fenced model, returned this fence (`None`: not known, as for an
    /// acquire whose outcome is unknown).
    Acquire { fence: Option<u64> },
    /// Gave it back.
    Release,
}

impl Model for Lock {
    type State = LockState;
    type Action = LockOp;

    fn step(state: LockState, action: &LockOp) -> Option<LockState> {
        match action {
            LockOp::Acquire { fence } => {
                let grows = match (fence, state.fence) {
                    (Some(new), Some(last)) => *new > last,
                    _ => true,
                };
                (!state.held && grows).then_some(LockState {
                    held: true,
                    fence: fence.or(state.fence),
                })
            }
            LockOp::Release => state.held.then_some(LockState {
                held: false,
                ..state
            }),
        }
    }
}

/// A completed or pending operation on one object, with its place in real time.
#[derive(Clone, Debug)]
struct KeyOp<A> {
    action: A,
    /// History index of the invoke.
    invoked: u64,
    /// History index of the completion; `u64::MAX` while pending (info, or never answered).
    returned: u64,
}

/// What the search concluded for one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum KeyVerdict {
    Linearizable,
    /// No linearization: the operation (invoke, completion indexes) that could not be placed.
    Not {
        invoked: u64,
        returned: u64,
    },
    /// The budget ran out after this many steps.
    Unknown {
        steps: u64,
    },
}

/// The step budgets of one check: per object, and what is left of the total.
struct Budget {
    per_object: u64,
    total: u64,
    left: u64,
}

/// Violations and undecided objects, in the order the objects were searched.
#[derive(Default)]
struct Findings {
    violations: Vec<Violation>,
    unknown: Vec<String>,
}

/// Check every key as a compare-and-set register and, with a lock model, every lock, each
/// within the per-object budget and all within the total; violations, and the objects left
/// undecided (their search ran out of budget, or the total was spent before their turn).
pub(crate) fn check(history: &Records, options: &CheckOptions) -> (Vec<Violation>, Vec<String>) {
    let mut budget = Budget {
        per_object: options.linearizability_steps,
        total: options.linearizability_total_steps,
        left: options.linearizability_total_steps,
    };
    let mut found = Findings::default();
    let (keys, initial) = per_key(history, options);
    let register = register_model(options);
    for (key, ops) in keys {
        let what = format!("key {key:?}");
        let witness = |op: &str| {
            format!(
                "{what}: no order of its {} operations that respects real time explains {op}; \
                 every order placing the operations before it leaves the register with another \
                 value (model: {register})",
                ops.len()
            )
        };
        judge::<Register>(&what, &ops, initial, &mut budget, witness, &mut found);
    }
    if let Some(model) = options.lock_model {
        for (lock, ops) in per_lock(history, model) {
            let what = format!("lock {lock:?}");
            let witness = |op: &str| {
                format!(
                    "{what}: no order of its {} acquires and releases that respects real time \
                     explains {op} {}; failed operations never happened, and ones whose outcome \
                     is unknown may have taken effect at any time after their invoke, or never",
                    ops.len(),
                    model.describe()
                )
            };
            let free = LockState {
                held: false,
                fence: None,
            };
            judge::<Lock>(&what, &ops, free, &mut budget, witness, &mut found);
        }
    }
    (found.violations, found.unknown)
}

/// The register model and reading in words, for explanations.
fn register_model(options: &CheckOptions) -> String {
    let start = match &options.initial_value {
        Some(v) => format!("initial value {v:?}"),
        None => "never written at the start".to_owned(),
    };
    format!(
        "compare-and-set register, {start}; {}",
        options.failed_cas.describe()
    )
}

/// Search one object's operations within the budget and record what was found: a violation
/// explained by `explain` (given the blocked operation in words), or the object undecided.
fn judge<M: Model>(
    what: &str,
    ops: &[KeyOp<M::Action>],
    initial: M::State,
    budget: &mut Budget,
    explain: impl Fn(&str) -> String,
    found: &mut Findings,
) {
    if budget.left == 0 {
        found.unknown.push(format!(
            "linearizability of {what} ({} operations) not searched: the total budget of {} \
             search steps was spent on earlier objects",
            ops.len(),
            budget.total
        ));
        return;
    }
    let (verdict, spent) = search_counted::<M>(ops, initial, budget.per_object.min(budget.left));
    budget.left -= spent.min(budget.left);
    match verdict {
        KeyVerdict::Linearizable => {}
        KeyVerdict::Not { invoked, returned } => found.violations.push(Violation {
            chain: Vec::new(),
            kind: ViolationKind::NotLinearizable,
            witnesses: [invoked, returned]
                .into_iter()
                .filter(|i| *i != u64::MAX)
                .collect(),
            explanation: explain(&format!("the operation invoked at index {invoked}")),
        }),
        KeyVerdict::Unknown { steps } => found.unknown.push(format!(
            "linearizability of {what} ({} operations) not decided within {steps} search steps",
            ops.len()
        )),
    }
}

/// Interned values: each distinct string gets the next number.
#[derive(Default)]
struct Values<'h>(BTreeMap<&'h str, Value>);

impl<'h> Values<'h> {
    fn id(&mut self, value: Option<&'h str>) -> Value {
        let next = self.0.len() as Value;
        *self.0.entry(value.unwrap_or_default()).or_insert(next)
    }
}

/// Where an operation sits in real time: from its invoke to its completion, or pending.
fn span<A>(action: A, invoke: &Op, done: Option<&Op>) -> KeyOp<A> {
    KeyOp {
        action,
        invoked: invoke.at.index,
        returned: done.map_or(u64::MAX, |d| d.at.index),
    }
}

/// The register operations of each key, and the register's initial state.
fn per_key<'h>(
    history: &Records<'h>,
    options: &'h CheckOptions,
) -> (BTreeMap<Name, Vec<KeyOp<RegisterOp>>>, Option<Value>) {
    let mut values = Values::default();
    let initial = options.initial_value.as_deref().map(|v| values.id(Some(v)));
    let mut keys: BTreeMap<Name, Vec<KeyOp<RegisterOp>>> = BTreeMap::new();
    // Every operation on the register: a delete left out would leave the value it removed in
    // place, and a later read of nothing (or a cas expecting the key never written) could not
    // be explained.
    let relevant = |op: &Op| {
        matches!(op.f, OpFn::Read | OpFn::Write | OpFn::Cas | OpFn::Delete) && op.key.is_some()
    };
    for (invoke, done) in history.paired(relevant) {
        let outcome = done.map(|d| d.op_type);
        let mut id = |v: Option<&'h String>| values.id(v.map(String::as_str));
        let action = match (invoke.f, outcome) {
            // An `ok` read of an unknown value matches every state and changes none: any
            // order explains it, so it constrains nothing.
            (OpFn::Read, Some(OpType::Ok)) if done.is_some_and(|d| d.value_unknown) => continue,
            (OpFn::Read, Some(OpType::Ok)) => {
                let seen = done.and_then(|d| d.value.as_ref());
                RegisterOp::Read(seen.map(|v| id(Some(v))))
            }
            // A failed or unknown read saw nothing.
            (OpFn::Read, _) => continue,
            // A failed write did not happen; an unknown one is pending.
            (OpFn::Write, Some(OpType::Fail)) => continue,
            (OpFn::Write, _) => RegisterOp::Write(id(invoke.value.as_ref())),
            (OpFn::Cas, Some(OpType::Fail)) => match options.failed_cas {
                FailedCas::Knossos => continue,
                FailedCas::Porcupine => RegisterOp::CasRefused {
                    from: invoke.expected.as_ref().map(|v| id(Some(v))),
                },
            },
            (OpFn::Cas, _) => RegisterOp::Cas {
                from: invoke.expected.as_ref().map(|v| id(Some(v))),
                to: id(invoke.value.as_ref()),
            },
            // A failed delete did not happen; an unknown one is pending.
            (OpFn::Delete, Some(OpType::Fail)) => continue,
            (OpFn::Delete, _) => RegisterOp::Delete,
            _ => continue,
        };
        // Only `ok` and `fail` complete an operation; an unknown outcome leaves it pending.
        let done = done.filter(|d| d.op_type != OpType::Info);
        keys.entry(invoke.key.clone().unwrap_or_default())
            .or_default()
            .push(span(action, invoke, done));
    }
    keys.values_mut().for_each(drop_unobserved_pending);
    (keys, initial)
}

/// Leave out the pending writes (and cas) of values no operation observed: each may take
/// effect never, and a linearization that places one can drop it, since nothing between it and
/// the next change of the register reads the value it set (a read or cas that did would have
/// observed it). Without this, a dozen unanswered writes multiply the search by every order
/// of them. A refused cas (Porcupine's reading) needs the register to differ from a value, which
/// any write may provide: with one on the key, nothing is left out.
fn drop_unobserved_pending(ops: &mut Vec<KeyOp<RegisterOp>>) {
    if ops
        .iter()
        .any(|o| matches!(o.action, RegisterOp::CasRefused { .. }))
    {
        return;
    }
    let observed: BTreeSet<Value> = ops
        .iter()
        .filter_map(|o| match o.action {
            RegisterOp::Read(seen) => seen,
            RegisterOp::Cas { from, .. } => from,
            _ => None,
        })
        .collect();
    ops.retain(|o| {
        let set = match o.action {
            RegisterOp::Write(v) | RegisterOp::Cas { to: v, .. } => Some(v),
            _ => None,
        };
        // A delete is kept: the never-written state it leaves is read as `None`, which the
        // observed values do not list.
        o.returned != u64::MAX || set.is_none_or(|v| observed.contains(&v))
    });
}

/// The acquires and releases of each lock, as `model` reads them. Renewals are left out: a
/// lock without expiry has nothing to renew.
fn per_lock<'h>(history: &Records<'h>, model: LockModel) -> BTreeMap<Name, Vec<KeyOp<LockOp>>> {
    let mut locks: BTreeMap<Name, Vec<KeyOp<LockOp>>> = BTreeMap::new();
    let relevant = |op: &Op| matches!(op.f, OpFn::Acquire | OpFn::Release) && op.lock.is_some();
    for (invoke, done) in history.paired(relevant) {
        // A failed operation did not happen.
        if done.is_some_and(|d| d.op_type == OpType::Fail) {
            continue;
        }
        let done = done.filter(|d| d.op_type == OpType::Ok);
        let action = match invoke.f {
            OpFn::Acquire => LockOp::Acquire {
                // Only an `ok` acquire says which fence it got.
                fence: done
                    .and_then(|d| d.token)
                    .filter(|_| model == LockModel::FencedMutex),
            },
            _ => LockOp::Release,
        };
        locks
            .entry(invoke.lock.clone().unwrap_or_default())
            .or_default()
            .push(span(action, invoke, done));
    }
    locks
}

/// One call or return in the doubly linked list the search walks.
#[derive(Clone, Copy, Debug)]
struct Node {
    op: usize,
    is_call: bool,
    /// For a call: the list position of its return.
    partner: usize,
    prev: usize,
    next: usize,
}

/// The list's sentinel: position 0, before every entry.
const HEAD: usize = 0;
const NONE: usize = usize::MAX;

/// Calls and returns in real-time order behind a sentinel, as a doubly linked list.
fn build_list<A>(ops: &[KeyOp<A>]) -> Vec<Node> {
    let mut points: Vec<(u64, bool, usize)> = Vec::with_capacity(ops.len() * 2);
    for (i, op) in ops.iter().enumerate() {
        points.push((op.invoked, true, i));
        points.push((op.returned, false, i));
    }
    // Pending returns all sit at the end (u64::MAX), in op order so the list is deterministic.
    points.sort_by_key(|(at, is_call, op)| (*at, !*is_call, *op));
    let mut list = vec![Node {
        op: NONE,
        is_call: false,
        partner: NONE,
        prev: NONE,
        next: 1,
    }];
    let mut return_at = vec![NONE; ops.len()];
    for (pos, (_, is_call, op)) in points.iter().enumerate() {
        let here = pos + 1;
        list.push(Node {
            op: *op,
            is_call: *is_call,
            partner: NONE,
            prev: here - 1,
            next: if here == points.len() { NONE } else { here + 1 },
        });
        if !is_call {
            return_at[*op] = here;
        }
    }
    for node in list.iter_mut().skip(1).filter(|n| n.is_call) {
        node.partner = return_at[node.op];
    }
    if points.is_empty() {
        list[HEAD].next = NONE;
    }
    list
}

fn unlink(list: &mut [Node], at: usize) {
    let (prev, next) = (list[at].prev, list[at].next);
    list[prev].next = next;
    if next != NONE {
        list[next].prev = prev;
    }
}

fn relink(list: &mut [Node], at: usize) {
    let (prev, next) = (list[at].prev, list[at].next);
    list[prev].next = at;
    if next != NONE {
        list[next].prev = at;
    }
}

/// A set of linearized operations, as a 128-bit Zobrist hash: the XOR of a fixed random key per
/// operation. Adding or removing an operation is one XOR, and the memo stores 16 bytes per
/// entry instead of a bitset as long as the history. Two different sets share a hash with
/// probability 2^-128 per pair (below 10^-24 for 10^7 memo entries); a shared hash could only
/// prune a branch, never make a non-linearizable history pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Linearized(u128);

impl Linearized {
    fn flip(&mut self, op: usize) {
        self.0 ^= zobrist(op);
    }
}

/// Operation `op`'s key: SplitMix64 outputs of two counters.
fn zobrist(op: usize) -> u128 {
    let mix = |mut z: u64| {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let i = op as u64;
    (u128::from(mix(2 * i)) << 64) | u128::from(mix(2 * i + 1))
}

/// The WGL search with memoization over one register's operations, never written at the
/// start, within `budget` steps.
#[cfg(test)]
fn search(ops: &[KeyOp<RegisterOp>], budget: u64) -> KeyVerdict {
    search_counted::<Register>(ops, None, budget).0
}

/// The WGL search with memoization over one object's operations under model `M`, from state
/// `initial`: its verdict and the steps it took (at most `budget`).
fn search_counted<M: Model>(
    ops: &[KeyOp<M::Action>],
    initial: M::State,
    budget: u64,
) -> (KeyVerdict, u64) {
    let mut list = build_list(ops);
    let mut linearized = Linearized::default();
    let mut seen: BTreeSet<(Linearized, M::State)> = BTreeSet::new();
    let mut state = initial;
    // (call position, state before it) of every operation linearized so far.
    let mut stack: Vec<(usize, M::State)> = Vec::new();
    let mut entry = list[HEAD].next;
    let mut steps = 0u64;
    // The operation that blocked the longest partial linearization: the witness, as Porcupine
    // reports the longest prefix it could explain.
    let mut blocked: Option<(usize, usize)> = None;
    while entry != NONE {
        steps += 1;
        if steps > budget {
            return (KeyVerdict::Unknown { steps: budget }, budget);
        }
        let node = list[entry];
        if node.is_call {
            if let Some(next_state) = M::step(state, &ops[node.op].action) {
                linearized.flip(node.op);
                if seen.insert((linearized, next_state)) {
                    stack.push((entry, std::mem::replace(&mut state, next_state)));
                    unlink(&mut list, entry);
                    unlink(&mut list, node.partner);
                    entry = list[HEAD].next;
                    continue;
                }
                linearized.flip(node.op);
            }
            entry = node.next;
        } else if ops[node.op].returned == u64::MAX {
            // The first pending return: every completed operation's return sorts before it,
            // so all of them are linearized, and the operations left are pending ones, which
            // may never take effect. (Linearizing them last instead would be wrong for a
            // model where they cannot: an acquire of a lock held at the end.)
            return (KeyVerdict::Linearizable, steps);
        } else {
            // A return whose call could not be linearized in any order tried so far: undo the
            // last choice and try the next call after it.
            if blocked.is_none_or(|(depth, _)| stack.len() > depth) {
                blocked = Some((stack.len(), node.op));
            }
            let Some((call, before)) = stack.pop() else {
                let op = &ops[blocked.map_or(node.op, |(_, op)| op)];
                let not = KeyVerdict::Not {
                    invoked: op.invoked,
                    returned: op.returned,
                };
                return (not, steps);
            };
            state = before;
            let call_node = list[call];
            linearized.flip(call_node.op);
            relink(&mut list, call_node.partner);
            relink(&mut list, call);
            entry = call_node.next;
        }
    }
    (KeyVerdict::Linearizable, steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test value's number: its first letter's offset from 'a' (digits for the budget test).
    fn id(v: &str) -> Value {
        v.parse().unwrap_or_else(|_| u32::from(v.as_bytes()[0]))
    }

    fn read(v: Option<&str>, invoked: u64, returned: u64) -> KeyOp<RegisterOp> {
        KeyOp {
            action: RegisterOp::Read(v.map(id)),
            invoked,
            returned,
        }
    }

    fn write(v: &str, invoked: u64, returned: u64) -> KeyOp<RegisterOp> {
        KeyOp {
            action: RegisterOp::Write(id(v)),
            invoked,
            returned,
        }
    }

    #[test]
    fn sequential_reads_of_the_last_write_are_linearizable() {
        let ops = [
            write("a", 0, 1),
            read(Some("a"), 2, 3),
            write("b", 4, 5),
            read(Some("b"), 6, 7),
        ];
        assert_eq!(search(&ops, 1_000), KeyVerdict::Linearizable);
    }

    #[test]
    fn a_stale_read_after_a_completed_write_is_not() {
        let ops = [write("a", 0, 1), write("b", 2, 3), read(Some("a"), 4, 5)];
        assert_eq!(
            search(&ops, 1_000),
            KeyVerdict::Not {
                invoked: 4,
                returned: 5
            }
        );
    }

    #[test]
    fn concurrent_writes_may_land_in_either_order() {
        let ops = [write("a", 0, 3), write("b", 1, 2), read(Some("a"), 4, 5)];
        assert_eq!(search(&ops, 1_000), KeyVerdict::Linearizable);
        let ops = [write("a", 0, 3), write("b", 1, 2), read(Some("b"), 4, 5)];
        assert_eq!(search(&ops, 1_000), KeyVerdict::Linearizable);
    }

    #[test]
    fn a_pending_write_may_take_effect_late_or_never() {
        let late = [
            write("a", 0, 1),
            write("b", 2, u64::MAX),
            read(Some("a"), 3, 4),
            read(Some("b"), 5, 6),
        ];
        assert_eq!(search(&late, 1_000), KeyVerdict::Linearizable);
        let never = [
            write("a", 0, 1),
            write("b", 2, u64::MAX),
            read(Some("a"), 3, 4),
        ];
        assert_eq!(search(&never, 1_000), KeyVerdict::Linearizable);
        // But once it is seen, the register cannot go back to the older value.
        let back = [
            write("a", 0, 1),
            write("b", 2, u64::MAX),
            read(Some("b"), 3, 4),
            read(Some("a"), 5, 6),
        ];
        assert_eq!(
            search(&back, 1_000),
            KeyVerdict::Not {
                invoked: 5,
                returned: 6
            }
        );
    }

    /// A pending operation that could not take effect at the end (a cas whose expected value
    /// the register no longer holds) may simply never have happened.
    #[test]
    fn a_pending_cas_that_cannot_apply_last_never_happened() {
        let ops = [
            write("a", 0, 1),
            KeyOp {
                action: RegisterOp::Cas {
                    from: Some(id("b")),
                    to: id("c"),
                },
                invoked: 2,
                returned: u64::MAX,
            },
            read(Some("a"), 3, 4),
        ];
        assert_eq!(search(&ops, 1_000), KeyVerdict::Linearizable);
    }

    #[test]
    fn a_read_of_a_value_nobody_wrote_is_not_linearizable() {
        let ops = [read(None, 0, 1), read(Some("ghost"), 2, 3)];
        assert_eq!(
            search(&ops, 1_000),
            KeyVerdict::Not {
                invoked: 2,
                returned: 3
            }
        );
    }

    #[test]
    fn the_budget_makes_the_verdict_unknown() {
        let ops: Vec<KeyOp<RegisterOp>> = (0..40)
            .map(|i| write(&i.to_string(), 0, 100))
            .chain([read(Some("x"), 101, 102)])
            .collect();
        assert_eq!(search(&ops, 50), KeyVerdict::Unknown { steps: 50 });
    }
}
