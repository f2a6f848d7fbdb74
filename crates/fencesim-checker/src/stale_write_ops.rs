//! `stale-write-accepted` from client operations alone, for a history that has no `accept`
//! events (one recorded by a real system, Jepsen-style: invocations and completions only).
//!
//! What operations prove, on one key, with fencing tokens (the header's `token_order =
//! "value"`):
//! - a write (or a delete that presented a token: a fenced resource checks it as a write)
//!   acknowledged `ok` with token t, invoked after a write with a higher token was
//!   acknowledged `ok`, was accepted although a higher token had been: a fenced resource would
//!   have refused it;
//! - a read acknowledged `ok` that returns a value written with token t, invoked after a write
//!   with a higher token was acknowledged `ok`, shows that value stored after the higher one.
//!
//! Only `ok` completions prove anything: a write whose outcome is unknown (`info`) or that
//! never completed may or may not have taken effect, so it never convicts, and operations
//! that overlap in time are not ordered (the later one must be invoked after the earlier one
//! completed). A read's value names its write only when exactly one write wrote it. Opaque
//! tokens (`token_order = "acquisition"`) cannot be ordered from operations: no judgement.

use std::collections::BTreeMap;

use fencesim_history::{EventKind, Op, OpFn, OpType, TokenOrder, ViolationKind};

use crate::{Records, Violation};

/// The highest token acknowledged `ok` on a key so far, and the completion that said so.
#[derive(Clone, Copy)]
struct Acked<'h> {
    token: u64,
    ok: &'h Op,
}

/// An operation in flight: its invocation, and the highest write acknowledged on its key
/// when it was invoked.
struct InFlight<'h> {
    invoke: &'h Op,
    before: Option<Acked<'h>>,
}

/// Whether this check applies: tokens that order, and no resource events to judge by.
pub(crate) fn applies(history: &Records) -> bool {
    history.header.token_order == TokenOrder::Value
        && !history.events().any(|e| e.event == EventKind::Accept)
}

pub(crate) fn check(history: &Records) -> Vec<Violation> {
    if !applies(history) {
        return Vec::new();
    }
    let writers = unique_writers(history);
    let mut acked: BTreeMap<&str, Acked> = BTreeMap::new();
    let mut in_flight: BTreeMap<u64, InFlight> = BTreeMap::new();
    let mut violations = Vec::new();
    // A delete is a mutation fenced as a write is: one with a token checks it against the
    // key's highest, and raises that highest. One without a token carries nothing to judge
    // (the resource's own events tell an unfenced mutation).
    for op in history
        .ops()
        .filter(|o| matches!(o.f, OpFn::Write | OpFn::Read | OpFn::Delete))
    {
        if op.op_type == OpType::Invoke {
            let before = op.key.as_deref().and_then(|k| acked.get(k).copied());
            in_flight.insert(op.process, InFlight { invoke: op, before });
            continue;
        }
        let Some(flight) = in_flight.remove(&op.process) else {
            continue; // a completion without its invocation: nothing to pair
        };
        let invoke = flight.invoke;
        if op.op_type != OpType::Ok || invoke.f != op.f {
            continue; // fail: no effect; info: unknown effect, which never convicts
        }
        let Some(key) = invoke.key.as_deref() else {
            continue;
        };
        match op.f {
            OpFn::Write | OpFn::Delete => {
                let Some(token) = invoke.token.or(op.token) else {
                    continue;
                };
                if let Some(higher) = flight.before.filter(|h| h.token > token) {
                    violations.push(stale_write(key, token, invoke, op, higher));
                }
                if acked.get(key).is_none_or(|a| token > a.token) {
                    acked.insert(key, Acked { token, ok: op });
                }
            }
            OpFn::Read => {
                let value = op.value.as_deref();
                let Some(&(token, writer)) = value.and_then(|v| writers.get(&(key, v))) else {
                    continue;
                };
                if let Some(higher) = flight.before.filter(|h| h.token > token) {
                    violations.push(stale_read(key, token, writer, op, higher));
                }
            }
            _ => {}
        }
    }
    violations
}

/// For each (key, value) written by exactly one write invocation with a token: that token and
/// the invocation. A value written twice names no single write, and neither does one that a
/// write without a token or a compare-and-set also wrote: the read may have seen theirs.
fn unique_writers<'h>(history: &Records<'h>) -> BTreeMap<(&'h str, &'h str), (u64, &'h Op)> {
    let mut seen: BTreeMap<(&str, &str), Option<(u64, &Op)>> = BTreeMap::new();
    let writes = history
        .ops()
        .filter(|o| matches!(o.f, OpFn::Write | OpFn::Cas) && o.op_type == OpType::Invoke);
    for w in writes {
        if let (Some(key), Some(value)) = (w.key.as_deref(), w.value.as_deref()) {
            let named = w.token.filter(|_| w.f == OpFn::Write).map(|t| (t, w));
            seen.entry((key, value))
                .and_modify(|e| *e = None)
                .or_insert(named);
        }
    }
    seen.into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
}

/// The note every explanation of this check ends with: how the verdict was reached.
const FROM_OPERATIONS: &str = "judged from client operations alone: the history has no \
                               accept events from the resource";

fn stale_write(key: &str, token: u64, invoke: &Op, ok: &Op, higher: Acked) -> Violation {
    let did = if invoke.f == OpFn::Delete {
        "deleted the key"
    } else {
        "wrote"
    };
    let explanation = format!(
        "key {key:?}: {} {did} with token {token} (invoked at index {}, ok at index {}) after \
         {}'s {} with the higher token {} had been acknowledged ok at index {}, and it was \
         acknowledged ok too: the resource accepted a stale token ({FROM_OPERATIONS})",
        invoke.node,
        invoke.at.index,
        ok.at.index,
        higher.ok.node,
        mutation(higher.ok),
        higher.token,
        higher.ok.at.index,
    );
    Violation {
        chain: Vec::new(),
        kind: ViolationKind::StaleWriteAccepted,
        witnesses: vec![ok.at.index, higher.ok.at.index],
        explanation,
    }
}

/// What a fenced mutation was, for explanations: a write, or a delete (with a token).
fn mutation(op: &Op) -> &'static str {
    if op.f == OpFn::Delete {
        "delete"
    } else {
        "write"
    }
}

fn stale_read(key: &str, token: u64, writer: &Op, read: &Op, higher: Acked) -> Violation {
    let explanation = format!(
        "key {key:?}: {} read the value {:?}, written by {} with token {token} (invoked at index \
         {}), in a read invoked after {}'s {} with the higher token {} had been acknowledged \
         ok at index {}: the resource stored the stale token's write after the higher one \
         ({FROM_OPERATIONS})",
        read.node,
        read.value.as_deref().unwrap_or_default(),
        writer.node,
        writer.at.index,
        higher.ok.node,
        mutation(higher.ok),
        higher.token,
        higher.ok.at.index,
    );
    Violation {
        chain: Vec::new(),
        kind: ViolationKind::StaleWriteAccepted,
        witnesses: vec![read.at.index, higher.ok.at.index],
        explanation,
    }
}
