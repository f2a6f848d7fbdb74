//! `token-not-monotonic` and `token-reused`: per lock, acquisitions in history (true-time) order
//! must carry strictly increasing tokens, across failover, restart and restore alike. Opaque lock
//! values (header `token_order = "acquisition"`) have no order to break, so neither check runs.
//!
//! A token granted again to the holder it went to before (a retried acquire answered twice, a
//! service that gives an expired lease back to its last holder) is no reuse: nobody else can
//! present it, so the resource cannot confuse two holders by it. Only a token that reaches a
//! second holder is `token-reused`; a re-grant that comes after a higher token is still
//! `token-not-monotonic`. Telling them apart keeps shrink from settling on the harmless form.

use std::collections::BTreeMap;

use fencesim_history::{EventKind, Phase, TokenOrder, ViolationKind};

use crate::order::{acquisitions, Acquisition};
use crate::{Records, Violation};

pub(crate) fn check(history: &Records) -> Vec<Violation> {
    if history.header.token_order == TokenOrder::Acquisition {
        return Vec::new();
    }
    let mut by_lock: BTreeMap<&str, Vec<Acquisition>> = BTreeMap::new();
    for a in acquisitions(history) {
        by_lock.entry(a.lock).or_default().push(a);
    }
    let mut violations = Vec::new();
    for (lock, mut acquired) in by_lock {
        acquired.sort_by_key(|a| a.record);
        let reuses = reuses(&acquired);
        violations.extend(reused(history, lock, &acquired, &reuses));
        violations.extend(backwards(history, lock, acquired, &reuses));
    }
    violations.sort_by_key(|v| v.witnesses.first().copied());
    violations
}

/// Per acquisition record that reuses a token, the first earlier record of that token held by
/// someone else. `acquired` is in record order.
fn reuses(acquired: &[Acquisition]) -> BTreeMap<u64, u64> {
    // Per token, its first record for each holder, in record order.
    let mut holders: BTreeMap<u64, Vec<(&str, u64)>> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for a in acquired {
        let earlier = holders.entry(a.token).or_default();
        if let Some(&(_, r)) = earlier.iter().find(|(h, _)| *h != a.holder) {
            out.insert(a.record, r);
        }
        if !earlier.iter().any(|(h, _)| *h == a.holder) {
            earlier.push((a.holder, a.record));
        }
    }
    out
}

/// A token handed out to a second holder, in whatever order: the later record and the first
/// record of it held by another. `acquired` is in record order.
fn reused(
    history: &Records,
    lock: &str,
    acquired: &[Acquisition],
    reuses: &BTreeMap<u64, u64>,
) -> Vec<Violation> {
    acquired
        .iter()
        .filter_map(|a| {
            let earlier = *reuses.get(&a.record)?;
            Some(Violation {
                chain: Vec::new(),
                kind: ViolationKind::TokenReused,
                witnesses: vec![a.record, earlier],
                explanation: format!(
                    "lock {lock:?}: token {} granted to {} at index {} was already granted to \
                     {} at index {earlier}{}",
                    a.token,
                    a.holder,
                    a.record,
                    holder_at(acquired, earlier),
                    cause(history, earlier, a.record)
                ),
            })
        })
        .collect()
}

/// A lower token acquired after a higher one in real time: the higher one's record came before
/// the lower one's acquisition began. A service's grants are instants, so this is history
/// order; clients' acquisitions (no grants: the token came from a counter) span invoke to `ok`,
/// and two that overlap are not ordered, as linearizability orders operations.
fn backwards(
    history: &Records,
    lock: &str,
    mut acquired: Vec<Acquisition>,
    reuses: &BTreeMap<u64, u64>,
) -> Vec<Violation> {
    // `acquired` comes in record order: the order acquisitions finished in.
    let finished: Vec<(u64, u64)> = acquired.iter().map(|a| (a.record, a.token)).collect();
    acquired.sort_by_key(|a| (a.index, a.record));
    let mut done = finished.iter().peekable();
    // The highest token among acquisitions finished so far, and its record.
    let mut highest: Option<(u64, u64)> = None;
    let mut out = Vec::new();
    for a in acquired {
        while let Some(&&(record, token)) = done.peek().filter(|(r, _)| *r < a.index) {
            if highest.is_none_or(|(t, _)| token > t) {
                highest = Some((token, record));
            }
            done.next();
        }
        if let Some((higher, higher_at)) = highest.filter(|(t, _)| *t > a.token) {
            // A token another holder had before is reuse, reported as such.
            if reuses.contains_key(&a.record) {
                continue;
            }
            out.push(Violation {
                chain: Vec::new(),
                kind: ViolationKind::TokenNotMonotonic,
                witnesses: vec![a.record, higher_at],
                explanation: format!(
                    "lock {lock:?}: token {} granted at index {} after the higher token {higher} at index {higher_at}{}",
                    a.token,
                    a.record,
                    cause(history, higher_at, a.record)
                ),
            });
        }
    }
    out
}

/// The holder of the acquisition shown at `record`.
fn holder_at<'h>(acquired: &[Acquisition<'h>], record: u64) -> &'h str {
    acquired
        .iter()
        .find(|a| a.record == record)
        .map_or("?", |a| a.holder)
}

/// What, between two grants, can send a token counter back: a restart, a restore from backup
/// or a change of leader (failover), named as such; empty if none is in the history.
fn cause(history: &Records, from: u64, to: u64) -> String {
    // Entries are in index order, so the records between are a slice; found by index, not
    // position, since a Jepsen EDN history keeps its file's `:index`, which may skip numbers.
    let start = history.entries.partition_point(|e| e.at().index <= from);
    let end = history
        .entries
        .partition_point(|e| e.at().index < to)
        .max(start);
    let between = history.entries[start..end].iter().filter_map(|e| match e {
        fencesim_history::Entry::Event(ev) => Some(ev),
        fencesim_history::Entry::Op(_) => None,
    });
    let causes: Vec<String> = between
        .filter_map(|e| {
            let who = e.target.as_deref().unwrap_or(&e.node);
            let what = match (e.event, e.phase) {
                (EventKind::Crash, Some(Phase::End)) | (EventKind::Restart, _) => "restarted",
                (EventKind::Restore, Some(Phase::Start) | None) => "was restored from a backup",
                (EventKind::Leader, _) => "became leader (failover)",
                _ => return None,
            };
            Some(format!("{who} {what} at index {}", e.at.index))
        })
        .collect();
    if causes.is_empty() {
        String::new()
    } else {
        format!(", after {}", causes.join(", "))
    }
}
