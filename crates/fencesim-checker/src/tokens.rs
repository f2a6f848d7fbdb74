//! `token-not-monotonic` and `token-reused`: per lock, acquisitions in history (true-time) order
//! must carry strictly increasing tokens, across failover, restart and restore alike. Opaque lock
//! values (header `token_order = "acquisition"`) have no order to break, so neither check runs.

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
        // Where each token first appears: what reuse is measured against, in both checks.
        let mut first_record: BTreeMap<u64, u64> = BTreeMap::new();
        for a in &acquired {
            first_record.entry(a.token).or_insert(a.record);
        }
        violations.extend(reused(history, lock, &acquired, &first_record));
        violations.extend(backwards(history, lock, acquired, &first_record));
    }
    violations.sort_by_key(|v| v.witnesses.first().copied());
    violations
}

/// A token handed out twice, in whatever order: the later record and the first. `acquired` is
/// in record order.
fn reused(
    history: &Records,
    lock: &str,
    acquired: &[Acquisition],
    first_record: &BTreeMap<u64, u64>,
) -> Vec<Violation> {
    acquired
        .iter()
        .filter_map(|a| {
            let earlier = *first_record.get(&a.token).filter(|&&r| r < a.record)?;
            Some(Violation {
                chain: Vec::new(),
                kind: ViolationKind::TokenReused,
                witnesses: vec![a.record, earlier],
                explanation: format!(
                    "lock {lock:?}: token {} granted at index {} was already granted at index {earlier}{}",
                    a.token,
                    a.record,
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
    first_record: &BTreeMap<u64, u64>,
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
            // A token seen before is reuse, reported as such.
            if first_record.get(&a.token).is_some_and(|&r| r < a.record) {
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
