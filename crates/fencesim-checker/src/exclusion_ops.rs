//! `mutual-exclusion-client` from client operations alone, for a history whose acquires carry
//! the TTL they asked for (`ttl_ms`): a real system's client operations, with no service events
//! and no beliefs.
//!
//! What can be concluded soundly. An acquire of lock `l` by node A, invoked at `a_i` and
//! completed `ok` at `a_o`, was granted at some moment in `[a_i, a_o]`, so its lease lasts at
//! least until `a_i + ttl`: A certainly held `l` throughout `[a_o, a_i + ttl)`. A renewal of
//! that lease that completed `ok` while the lease certainly lived extends it to at least its
//! own invoke plus its TTL. A release by A may have taken effect as soon as it was invoked, so
//! the certain window ends at A's first release invoked after `a_o`. Another node's acquire B
//! of `l` was granted somewhere in `[b_i, b_o]`; if that whole interval lies inside A's certain
//! window, two nodes held `l` at once, whatever the clocks of the service and the order of
//! concurrent messages. Operations whose outcome is unknown (`info`, or never answered) prove
//! nothing: they neither convict nor end a window. The lock service is assumed to honour TTLs
//! in the history's time (true time, as Jepsen's `:time` is); a service whose clock runs fast
//! expires leases sooner, which is what this check would then report.

use std::collections::BTreeMap;

use fencesim_history::{Op, OpFn, OpType, ViolationKind};

use crate::{Records, Violation};

/// An operation with its invoke and its completion.
struct Paired<'h> {
    invoke: &'h Op,
    done: Option<&'h Op>,
}

/// Every acquire, renew and release, each paired with its completion, per lock, in invoke
/// order.
fn lock_ops<'h>(history: &Records<'h>) -> BTreeMap<&'h str, Vec<Paired<'h>>> {
    let relevant =
        |o: &Op| matches!(o.f, OpFn::Acquire | OpFn::Renew | OpFn::Release) && o.lock.is_some();
    let mut locks: BTreeMap<&'h str, Vec<Paired<'h>>> = BTreeMap::new();
    for (invoke, done) in history.paired(relevant) {
        let lock = invoke
            .lock
            .as_deref()
            .expect("relevant operations name their lock");
        locks.entry(lock).or_default().push(Paired { invoke, done });
    }
    for ops in locks.values_mut() {
        ops.sort_by_key(|p| p.invoke.at.index);
    }
    locks
}

/// Whether any acquire carries a TTL: the check has something to judge.
pub(crate) fn applies(history: &Records) -> bool {
    history
        .ops()
        .any(|o| o.f == OpFn::Acquire && o.ttl_ms.is_some())
}

fn ok(p: &Paired) -> Option<u64> {
    p.done
        .filter(|d| d.op_type == OpType::Ok)
        .map(|d| d.at.time_ns)
}

pub(crate) fn check(history: &Records) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (lock, ops) in lock_ops(history) {
        for (i, a) in ops.iter().enumerate() {
            let (OpFn::Acquire, Some(a_ok), Some(ttl_ms)) = (a.invoke.f, ok(a), a.invoke.ttl_ms)
            else {
                continue;
            };
            let holder = &a.invoke.node;
            // Saturating: a history may give any u64 (a TTL of 10^13 ms reaches past u64 ns);
            // a lease that ends past the end of time covers the rest of the history.
            let mut until_ns = a
                .invoke
                .at
                .time_ns
                .saturating_add(ttl_ms.saturating_mul(1_000_000));
            // A's own later operations on the lock, in invoke order: renewals extend the
            // window, the first release (or new acquire) ends it.
            for later in ops[i + 1..].iter().filter(|p| p.invoke.node == *holder) {
                let invoked = later.invoke.at.time_ns;
                if invoked >= until_ns {
                    break;
                }
                match (later.invoke.f, ok(later), later.invoke.ttl_ms) {
                    (OpFn::Renew, Some(done), Some(ttl)) if done < until_ns => {
                        until_ns =
                            until_ns.max(invoked.saturating_add(ttl.saturating_mul(1_000_000)));
                    }
                    (OpFn::Renew, _, _) => {}
                    _ => {
                        until_ns = invoked;
                        break;
                    }
                }
            }
            let overlapping = ops.iter().find(|b| {
                b.invoke.f == OpFn::Acquire
                    && b.invoke.node != *holder
                    && b.invoke.at.time_ns >= a_ok
                    && ok(b).is_some_and(|b_ok| b_ok < until_ns)
            });
            if let Some(b) = overlapping {
                let done = b.done.expect("an ok acquire has its completion");
                violations.push(Violation {
                    chain: Vec::new(),
                    kind: ViolationKind::MutualExclusionClient,
                    witnesses: vec![a.invoke.at.index, b.invoke.at.index, done.at.index],
                    explanation: format!(
                        "lock {lock:?}: {} acquired it at index {} (TTL {ttl_ms} ms, so held \
                         until at least {:.3} s with no release), yet {} acquired it too, \
                         invoked at index {} and ok at index {} ({:.3} s); judged from client \
                         operations alone",
                        holder,
                        a.done.map_or(a.invoke.at.index, |d| d.at.index),
                        until_ns as f64 / 1e9,
                        b.invoke.node,
                        b.invoke.at.index,
                        done.at.index,
                        done.at.time_ns as f64 / 1e9,
                    ),
                });
            }
        }
    }
    violations
}
