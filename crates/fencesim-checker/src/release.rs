//! `release-by-non-holder`: a release took effect for a lock its caller did not hold (case K19:
//! an unconditional delete frees the next holder's lock). Releases must be a compare-and-delete
//! on the holder's token; the service's `release` events say whose lease ended, and the
//! operation each answers says who asked.

use std::collections::BTreeMap;

use fencesim_history::{Entry, EventKind, History, ViolationKind};

use crate::Violation;

pub(crate) fn check(history: &History) -> Vec<Violation> {
    // Per lock, the live lease by the service's events: (holder, token, grant index).
    let mut live: BTreeMap<&str, (&str, u64, u64)> = BTreeMap::new();
    let mut violations = Vec::new();
    for ev in history.events() {
        let (Some(lock), Some(token)) = (ev.lock.as_deref(), ev.token) else {
            continue;
        };
        let holder = ev.holder.as_deref().unwrap_or_default();
        match ev.event {
            EventKind::Grant => {
                live.insert(lock, (holder, token, ev.at.index));
            }
            EventKind::Expire | EventKind::Revoke
                if live
                    .get(lock)
                    .is_some_and(|l| (l.0, l.1) == (holder, token)) =>
            {
                live.remove(lock);
            }
            EventKind::Release => {
                let caller = ev.op.and_then(|i| match history.entries.get(i as usize) {
                    Some(Entry::Op(op)) => Some(op.node.as_str()),
                    _ => None,
                });
                let lease = live.get(lock).copied();
                let wrong_lease = lease.is_none_or(|(h, t, _)| (h, t) != (holder, token));
                let wrong_caller = caller.is_some_and(|c| c != holder);
                if wrong_lease || wrong_caller {
                    violations.push(violation(lock, ev.at.index, caller, lease, ev.op));
                }
                // The released lease, if it is the live one, has ended; a release of some other
                // lease does not end the live one.
                if !wrong_lease {
                    live.remove(lock);
                }
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
