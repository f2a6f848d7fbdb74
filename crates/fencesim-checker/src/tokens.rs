//! `token-not-monotonic` and `token-reused`: per lock, acquisitions in history (true-time) order
//! must carry strictly increasing tokens, across failover, restart and restore alike. Opaque lock
//! values (header `token_order = "acquisition"`) have no order to break, so neither check runs.

use std::collections::BTreeMap;

use fencesim_history::{History, TokenOrder, ViolationKind};

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
                    "lock {lock:?}: token {token} granted at index {} was already granted at index {earlier}",
                    index
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
                    "lock {lock:?}: token {token} granted at index {} after the higher token {higher} at index {higher_at}",
                    index
                ),
            });
        }
        tokens.entry(token).or_insert(index);
    }
    violations
}
