//! Writes that took effect outside the lock's discipline:
//! - `unfenced-mutation`: a key that is written with tokens was also changed by a write that
//!   carried none (an admin, cleanup or migration path that bypasses the fence; case K16).
//! - `duplicate-execution`: one unit of work (a write's value names it: a job, a task attempt)
//!   took effect twice, from two separate operations (two workers, or a retried task; cases
//!   K21, K22). A message the network delivered twice belongs to one operation and is not
//!   counted: fenced writes with the same token and value are idempotent.

use std::collections::{BTreeMap, BTreeSet};

use fencesim_history::{Entry, Event, EventKind, ViolationKind};

use crate::{Records, Violation};

fn accepts<'a, 'h>(history: &'a Records<'h>) -> impl Iterator<Item = &'h Event> + 'a {
    history.events().filter(|e| e.event == EventKind::Accept)
}

pub(crate) fn check_unfenced(history: &Records) -> Vec<Violation> {
    let fenced: BTreeSet<&str> = history
        .events()
        .filter(|e| matches!(e.event, EventKind::Accept | EventKind::Reject) && e.token.is_some())
        .filter_map(|e| e.key.as_deref())
        .collect();
    accepts(history)
        .filter(|e| e.token.is_none())
        .filter_map(|e| {
            let key = e.key.as_deref().filter(|k| fenced.contains(k))?;
            let by = e.holder.as_deref().unwrap_or("an unknown writer");
            Some(Violation {
                chain: Vec::new(),
                kind: ViolationKind::UnfencedMutation,
                witnesses: vec![e.at.index],
                explanation: format!(
                    "key {key:?} is written with fencing tokens, but {by} changed it at index {} \
                     without one: no token check stood in its way",
                    e.at.index
                ),
            })
        })
        .collect()
}

pub(crate) fn check_duplicates(history: &Records) -> Vec<Violation> {
    // Per (value, key): the first accept and the operation it answered. The value first: it
    // tells writes apart, the key mostly does not.
    let mut first: BTreeMap<(&str, &str), (u64, u64)> = BTreeMap::new();
    let mut violations = Vec::new();
    for e in accepts(history) {
        let (Some(key), Some(op)) = (e.key.as_deref(), e.op) else {
            continue;
        };
        let Some(Entry::Op(invoke)) = history.entries.get(op as usize) else {
            continue;
        };
        let Some(value) = invoke.value.as_deref() else {
            continue;
        };
        match first.get(&(value, key)) {
            Some(&(at, first_op)) if first_op != op => violations.push(Violation {
                chain: Vec::new(),
                kind: ViolationKind::DuplicateExecution,
                witnesses: vec![e.at.index, at],
                explanation: format!(
                    "key {key:?}: the work {value:?} took effect at index {at} (operation at \
                     index {first_op}) and again at index {} (operation at index {op})",
                    e.at.index
                ),
            }),
            Some(_) => {}
            None => {
                first.insert((value, key), (e.at.index, op));
            }
        }
    }
    violations
}
