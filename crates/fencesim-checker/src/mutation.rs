//! Writes that took effect outside the lock's discipline:
//! - `unfenced-mutation`: a key that is written with tokens was also changed by a write that
//!   carried none (an admin, cleanup or migration path that bypasses the fence; case K16).
//!   What it destroyed is said: the value it overwrote or deleted (the write the resource last
//!   accepted on the key, another holder's data or the mutator's own), or that the key held
//!   nothing then.
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
    // Per key, the mutation the resource last accepted: what the key held.
    let mut last: BTreeMap<&str, &Event> = BTreeMap::new();
    let mut violations = Vec::new();
    for e in accepts(history) {
        let Some(key) = e.key.as_deref() else {
            continue;
        };
        let before = last.insert(key, e);
        if e.token.is_some() || !fenced.contains(key) {
            continue;
        }
        let by = e.holder.as_deref().unwrap_or("an unknown writer");
        let mut witnesses = vec![e.at.index];
        let destroyed = match before.filter(|b| !is_delete(b)) {
            None => "; it destroyed nothing: the key held no value then".to_owned(),
            Some(b) => {
                let whose = b.holder.as_deref().unwrap_or("an unknown writer");
                let token = b
                    .token
                    .map_or("no token".to_owned(), |t| format!("token {t}"));
                let what = if is_delete(e) { "deleted" } else { "overwrote" };
                if whose == by {
                    format!(
                        "; it {what} only its own write (with {token}, accepted at index {})",
                        b.at.index
                    )
                } else {
                    witnesses.push(b.at.index);
                    format!(
                        "; it {what} {whose}'s data: the write with {token} accepted at index {}",
                        b.at.index
                    )
                }
            }
        };
        violations.push(Violation {
            chain: Vec::new(),
            kind: ViolationKind::UnfencedMutation,
            witnesses,
            explanation: format!(
                "key {key:?} is written with fencing tokens, but {by} changed it at index {} \
                 without one: no token check stood in its way{destroyed}",
                e.at.index
            ),
        });
    }
    violations
}

/// Whether a resource event is of a delete (the resource names its mutation in `detail`; a
/// write has none).
fn is_delete(e: &Event) -> bool {
    e.detail.as_deref() == Some("delete")
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
