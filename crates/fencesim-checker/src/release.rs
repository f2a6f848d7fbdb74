//! `release-by-non-holder`: a release took effect for a lock its caller did not hold (case K19:
//! an unconditional delete frees the next holder's lock). Releases must be a compare-and-delete
//! on the holder's token; the service's `release` events say whose lease ended, and the
//! operation each answers says who asked. A release is a violation if its caller is not the
//! released lease's holder, or if that lease was never granted on the lock. A holder ending its
//! own lease late (after an expiry, or after a new primary revoked it while the old one still
//! honoured it) ends nothing of anyone else's.

use std::collections::{BTreeMap, BTreeSet};

use fencesim_history::{Entry, EventKind, ViolationKind};

use crate::{Records, Violation};

pub(crate) fn check(history: &Records) -> Vec<Violation> {
    // Per lock, the open leases by the service's events, oldest first: (holder, token, grant
    // index). Usually one; two primaries of a split brain may each have one open.
    let mut open: BTreeMap<&str, Vec<(&str, u64, u64)>> = BTreeMap::new();
    // (token, holder, lock): the token first, the cheapest to compare and almost always enough.
    let mut granted: BTreeSet<(u64, &str, &str)> = BTreeSet::new();
    let mut violations = Vec::new();
    for ev in history.events() {
        let lease_event = ev.event.is_lease_change();
        let (Some(lock), Some(token), true) = (ev.lock.as_deref(), ev.token, lease_event) else {
            continue;
        };
        let holder = ev.holder.as_deref().unwrap_or_default();
        let leases = open.entry(lock).or_default();
        let position = leases.iter().position(|l| (l.0, l.1) == (holder, token));
        match ev.event {
            EventKind::Grant => {
                granted.insert((token, holder, lock));
                leases.push((holder, token, ev.at.index));
            }
            EventKind::Expire | EventKind::Revoke => {
                if let Some(p) = position {
                    leases.remove(p);
                }
            }
            EventKind::Release => {
                let caller = ev.op.and_then(|i| match history.entries.get(i as usize) {
                    Some(Entry::Op(op)) => Some(op.node.as_str()),
                    _ => None,
                });
                let wrong_caller = caller.is_some_and(|c| c != holder);
                let never_granted = !granted.contains(&(token, holder, lock));
                if wrong_caller || never_granted {
                    // The latest open lease is the one at risk (it stays open: the service did
                    // not say it ended).
                    let live = leases.last().copied();
                    violations.push(violation(lock, ev.at.index, caller, live, ev.op));
                } else if let Some(p) = position {
                    leases.remove(p);
                }
                // A holder's release of its own lease that had already ended (expired, or
                // revoked by a new primary while the old one still honoured it) ends nothing
                // that is someone else's: not this check's business.
            }
            _ => {}
        }
    }
    violations
}

fn violation(
    lock: &str,
    at: u64,
    caller: Option<&str>,
    lease: Option<(&str, u64, u64)>,
    op: Option<u64>,
) -> Violation {
    let who = caller.unwrap_or("an unknown caller");
    let ended = match lease {
        Some((holder, token, granted)) => {
            format!("the lease of {holder} (token {token}, granted at index {granted})")
        }
        None => "no live lease".to_owned(),
    };
    let mut witnesses = vec![at];
    witnesses.extend(op);
    witnesses.extend(lease.map(|l| l.2));
    Violation {
        chain: Vec::new(),
        kind: ViolationKind::ReleaseByNonHolder,
        witnesses,
        explanation: format!(
            "lock {lock:?}: a release requested by {who} took effect at index {at} and ended \
             {ended}, which was not the caller's"
        ),
    }
}
