//! `token-not-monotonic` and `token-reused`: per lock, acquisitions in history (true-time) order
//! must carry strictly increasing tokens, across failover, restart and restore alike. Opaque lock
//! values (header `token_order = "acquisition"`) have no order to break, so neither check runs.

use std::collections::BTreeMap;

use fencesim_history::{EventKind, History, Phase, TokenOrder, ViolationKind};

use crate::order::acquisitions;
use crate::Violation;

pub(crate) fn check(history: &History) -> Vec<Violation> {
    if history.header.token_order == TokenOrder::Acquisition {
        return Vec::new();
    }
    // Per lock: every token granted so far (with its grant index), and the highest one.
    let mut granted: BTreeMap<&str, BTreeMap<u64, u64>> = BTreeMap::new();
    let mut violations = Vec::new();
    for acq in acquisitions(history) {
        let (lock, token, index) = (acq.lock, acq.token, acq.record);
        let tokens = granted.entry(lock).or_default();
        if let Some(&earlier) = tokens.get(&token) {
            violations.push(Violation {
                chain: Vec::new(),
                kind: ViolationKind::TokenReused,
                witnesses: vec![index, earlier],
                explanation: format!(
                    "lock {lock:?}: token {token} granted at index {} was already granted at index {earlier}{}",
                    index,
                    cause(history, earlier, index)
                ),
            });
        } else if let Some((&higher, &higher_at)) =
            tokens.last_key_value().filter(|(t, _)| **t > token)
        {
            violations.push(Violation {
                chain: Vec::new(),
                kind: ViolationKind::TokenNotMonotonic,
                witnesses: vec![index, higher_at],
                explanation: format!(
                    "lock {lock:?}: token {token} granted at index {} after the higher token {higher} at index {higher_at}{}",
                    index,
                    cause(history, higher_at, index)
                ),
            });
        }
        tokens.entry(token).or_insert(index);
    }
    violations
}

/// What, between two grants, can send a token counter back: a restart, a restore from backup
/// or a change of leader (failover), named as such; empty if none is in the history.
fn cause(history: &History, from: u64, to: u64) -> String {
    let between = history
        .events()
        .filter(|e| e.at.index > from && e.at.index < to);
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
