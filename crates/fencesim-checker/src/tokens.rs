//! `token-not-monotonic` and `token-reused`: per lock, grants in history (true-time) order must
//! carry strictly increasing tokens, across failover, restart and restore alike.

use std::collections::BTreeMap;

use fencesim_history::{EventKind, History, ViolationKind};

use crate::Violation;

pub(crate) fn check(history: &History) -> Vec<Violation> {
    // Per lock: every token granted so far (with its grant index), and the highest one.
    let mut granted: BTreeMap<&str, BTreeMap<u64, u64>> = BTreeMap::new();
    let mut violations = Vec::new();
    for ev in history.events().filter(|e| e.event == EventKind::Grant) {
        let (Some(lock), Some(token)) = (ev.lock.as_deref(), ev.token) else {
            continue;
        };
        let tokens = granted.entry(lock).or_default();
        if let Some(&earlier) = tokens.get(&token) {
            violations.push(Violation {
                kind: ViolationKind::TokenReused,
                witnesses: vec![ev.at.index, earlier],
                explanation: format!(
                    "lock {lock:?}: token {token} granted at index {} was already granted at index {earlier}",
                    ev.at.index
                ),
            });
        } else if let Some((&higher, &higher_at)) =
            tokens.last_key_value().filter(|(t, _)| **t > token)
        {
            violations.push(Violation {
                kind: ViolationKind::TokenNotMonotonic,
                witnesses: vec![ev.at.index, higher_at],
                explanation: format!(
                    "lock {lock:?}: token {token} granted at index {} after the higher token {higher} at index {higher_at}",
                    ev.at.index
                ),
            });
        }
        tokens.entry(token).or_insert(ev.at.index);
    }
    violations
}
