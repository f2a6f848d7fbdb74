//! `not-linearizable`: the resource's reads and writes, per key, must have a linearization
//! (Herlihy and Wing 1990) against a register: a read returns the value of the last write
//! linearized before it.
//!
//! The search is Wing and Gong's, with Lowe's memoization of (linearized set, state) pairs
//! (Lowe 2017, "Testing for linearizability"), over one key at a time, as Porcupine partitions
//! a history. Only what the clients saw is used: an `ok` write took effect, a `fail` write did
//! not (the resource rejected it), an `info` write (or one never answered) may or may not have:
//! it is pending to the end of time, and linearizing it last is the same as never applying it.
//! Reads that did not complete `ok` say nothing and are left out. Whether a write should have
//! been accepted is the fencing checks' business, not this one's.
//!
//! The search has a budget of steps per key; past it the key is reported as unknown, never as
//! valid and never as a hang.

use std::collections::{BTreeMap, BTreeSet};

use fencesim_history::{Name, Op, OpFn, OpType, ViolationKind};

use crate::{Records, Violation};

/// Search steps allowed per key before the verdict is unknown.
pub const DEFAULT_STEP_BUDGET: u64 = 10_000_000;

/// Search steps allowed over all keys together: without it a history of many hard keys costs
/// their number times the per-key budget (10 keys ran 19 s before the verdict was unknown).
pub const DEFAULT_TOTAL_STEP_BUDGET: u64 = 30_000_000;

/// A written value, interned: the search compares and copies numbers, not strings.
type Value = u32;

/// The register operation one client operation performed.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Action {
    /// Read and saw this value (`None`: never written).
    Read(Option<Value>),
    /// Wrote this value.
    Write(Value),
}

/// A completed or pending operation on one key, with its place in real time.
#[derive(Clone, Debug)]
struct KeyOp {
    action: Action,
    /// History index of the invoke.
    invoked: u64,
    /// History index of the completion; `u64::MAX` while pending (info, or never answered).
    returned: u64,
}

/// What the search concluded for one key.
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

/// Check every key, each within `budget` steps and all of them within `total` steps;
/// violations, and the keys left undecided (their search ran out of budget, or the total was
/// spent before their turn).
pub(crate) fn check(history: &Records, budget: u64, total: u64) -> (Vec<Violation>, Vec<String>) {
    let mut violations = Vec::new();
    let mut unknown = Vec::new();
    let mut left = total;
    for (key, ops) in per_key(history) {
        if left == 0 {
            unknown.push(format!(
                "linearizability of key {key:?} ({} operations) not searched: the total budget \
                 of {total} search steps was spent on earlier keys",
                ops.len()
            ));
            continue;
        }
        let (verdict, spent) = search_counted(&ops, budget.min(left));
        left -= spent.min(left);
        match verdict {
            KeyVerdict::Linearizable => {}
            KeyVerdict::Not { invoked, returned } => violations.push(Violation {
                chain: Vec::new(),
                kind: ViolationKind::NotLinearizable,
                witnesses: [invoked, returned]
                    .into_iter()
                    .filter(|i| *i != u64::MAX)
                    .collect(),
                explanation: format!(
                    "key {key:?}: no order of its {} reads and writes that respects real time \
                     explains the operation invoked at index {invoked}; every order placing the \
                     operations before it leaves the register with another value",
                    ops.len()
                ),
            }),
            KeyVerdict::Unknown { steps } => unknown.push(format!(
                "linearizability of key {key:?} ({} operations) not decided within {steps} \
                 search steps",
                ops.len()
            )),
        }
    }
    (violations, unknown)
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

/// The register operations of each key, pairing each invoke with its process's completion.
fn per_key(history: &Records) -> BTreeMap<Name, Vec<KeyOp>> {
    let mut values = Values::default();
    let mut pending: BTreeMap<u64, &Op> = BTreeMap::new();
    let mut keys: BTreeMap<Name, Vec<KeyOp>> = BTreeMap::new();
    let relevant = |op: &Op| matches!(op.f, OpFn::Read | OpFn::Write) && op.key.is_some();
    for op in history.ops().filter(|o| relevant(o)) {
        if op.op_type == OpType::Invoke {
            if let Some(orphan) = pending.insert(op.process, op) {
                push_pending(&mut keys, &mut values, orphan);
            }
            continue;
        }
        let Some(invoke) = pending.remove(&op.process) else {
            continue;
        };
        let key = invoke.key.clone().unwrap_or_default();
        let action = match (invoke.f, op.op_type) {
            (OpFn::Read, OpType::Ok) => {
                Action::Read(op.value.as_deref().map(|v| values.id(Some(v))))
            }
            (OpFn::Write, OpType::Ok) => Action::Write(values.id(invoke.value.as_deref())),
            (OpFn::Write, OpType::Info) => {
                push_pending(&mut keys, &mut values, invoke);
                continue;
            }
            // A failed write did not happen; a failed or unknown read saw nothing.
            _ => continue,
        };
        keys.entry(key).or_default().push(KeyOp {
            action,
            invoked: invoke.at.index,
            returned: op.at.index,
        });
    }
    for invoke in pending.into_values() {
        push_pending(&mut keys, &mut values, invoke);
    }
    keys
}

/// A write whose outcome is unknown: it may take effect at any time after its invoke.
fn push_pending<'h>(
    keys: &mut BTreeMap<Name, Vec<KeyOp>>,
    values: &mut Values<'h>,
    invoke: &'h Op,
) {
    if invoke.f != OpFn::Write {
        return;
    }
    keys.entry(invoke.key.clone().unwrap_or_default())
        .or_default()
        .push(KeyOp {
            action: Action::Write(values.id(invoke.value.as_deref())),
            invoked: invoke.at.index,
            returned: u64::MAX,
        });
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
fn build_list(ops: &[KeyOp]) -> Vec<Node> {
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

/// Apply `action` to the register holding `state`: the new state if the action is possible.
fn step(state: Option<Value>, action: &Action) -> Option<Option<Value>> {
    match action {
        Action::Read(seen) => (*seen == state).then_some(state),
        Action::Write(value) => Some(Some(*value)),
    }
}

/// The WGL search with memoization over one key's operations, within `budget` steps.
#[cfg(test)]
fn search(ops: &[KeyOp], budget: u64) -> KeyVerdict {
    search_counted(ops, budget).0
}

/// The WGL search with memoization over one key's operations: its verdict and the steps it
/// took (at most `budget`).
fn search_counted(ops: &[KeyOp], budget: u64) -> (KeyVerdict, u64) {
    let mut list = build_list(ops);
    let mut linearized = Linearized::default();
    let mut seen: BTreeSet<(Linearized, Option<Value>)> = BTreeSet::new();
    let mut state: Option<Value> = None;
    // (call position, state before it) of every operation linearized so far.
    let mut stack: Vec<(usize, Option<Value>)> = Vec::new();
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
            if let Some(next_state) = step(state, &ops[node.op].action) {
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

    fn read(v: Option<&str>, invoked: u64, returned: u64) -> KeyOp {
        KeyOp {
            action: Action::Read(v.map(id)),
            invoked,
            returned,
        }
    }

    fn write(v: &str, invoked: u64, returned: u64) -> KeyOp {
        KeyOp {
            action: Action::Write(id(v)),
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
        let ops: Vec<KeyOp> = (0..40)
            .map(|i| write(&i.to_string(), 0, 100))
            .chain([read(Some("x"), 101, 102)])
            .collect();
        assert_eq!(search(&ops, 50), KeyVerdict::Unknown { steps: 50 });
    }
}
