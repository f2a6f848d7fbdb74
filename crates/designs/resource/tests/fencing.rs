//! Property tests for [`Resource`] fencing.
//!
//! Random write sequences over a few keys with small tokens (so equal, lower and higher tokens
//! all occur) are checked against what fencing promises: in fenced mode the accepted tokens
//! per key never go down and a rejected write leaves every key untouched; unfenced mode accepts
//! everything and merely records the highest token.

use std::collections::BTreeMap;

use fencesim_resource::{FenceMode, ReadValue, Resource, WriteOutcome};
use proptest::prelude::*;

const KEYS: [&str; 3] = ["k0", "k1", "k2"];

/// One write: key index and token. Values are derived from the write's position so that every
/// write stores a distinct value and reads can tell writes apart.
fn writes() -> impl Strategy<Value = Vec<(usize, u64)>> {
    prop::collection::vec((0..KEYS.len(), 0u64..20), 0..80)
}

/// Every key's (read, highest) pair: the full observable state of the resource.
fn snapshot(r: &Resource) -> Vec<(ReadValue, u64)> {
    KEYS.iter().map(|k| (r.read(k), r.highest(k))).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Fenced: accepted tokens per key never decrease; a write is rejected exactly when its
    /// token is below the key's highest accepted token, and then nothing changes anywhere.
    #[test]
    fn fenced_accepts_monotonically_and_rejects_without_effect(ops in writes()) {
        let mut r = Resource::new(FenceMode::Fenced);
        // The test's own record of accepted tokens per key, in order.
        let mut accepted: BTreeMap<&str, Vec<u64>> = BTreeMap::new();

        for (i, &(k, token)) in ops.iter().enumerate() {
            let key = KEYS[k];
            let value = format!("w{i}");
            let before = snapshot(&r);
            let highest_before = r.highest(key);
            let max_accepted = accepted.get(key).and_then(|v| v.iter().max()).copied();

            match r.write(key, token, &value) {
                WriteOutcome::Accepted { highest } => {
                    // Accepted only if no higher token was accepted before on this key.
                    prop_assert!(!matches!(max_accepted, Some(m) if token < m));
                    prop_assert_eq!(highest, token);
                    prop_assert_eq!(r.highest(key), token);
                    prop_assert_eq!(
                        r.read(key),
                        ReadValue { value: Some(value.clone()), token: Some(token) }
                    );
                    // Other keys are untouched.
                    let after = snapshot(&r);
                    for (j, other) in KEYS.iter().enumerate() {
                        if *other != key {
                            prop_assert_eq!(&after[j], &before[j]);
                        }
                    }
                    accepted.entry(key).or_default().push(token);
                }
                WriteOutcome::Rejected { presented, highest } => {
                    prop_assert_eq!(presented, token);
                    prop_assert_eq!(highest, highest_before);
                    prop_assert!(presented < highest);
                    // Rejected exactly when a higher token was accepted before.
                    prop_assert_eq!(Some(highest), max_accepted);
                    prop_assert_eq!(snapshot(&r), before);
                }
            }
        }

        // Accepted tokens never decrease, and `highest` is the last (= largest) of them.
        for (key, tokens) in &accepted {
            prop_assert!(tokens.windows(2).all(|w| w[0] <= w[1]), "{}: {:?}", key, tokens);
            prop_assert_eq!(r.highest(key), *tokens.last().unwrap());
            prop_assert_eq!(r.read(key).token, tokens.last().copied());
        }
        for key in KEYS.iter().filter(|k| !accepted.contains_key(*k)) {
            prop_assert_eq!(r.read(key), ReadValue::default());
            prop_assert_eq!(r.highest(key), 0);
        }
    }

    /// Unfenced: every write is accepted and stored (last write wins), and `highest` is the
    /// maximum token seen on the key, even when the stored value carries a lower one.
    #[test]
    fn unfenced_accepts_everything_and_tracks_max(ops in writes()) {
        let mut r = Resource::new(FenceMode::Unfenced);
        let mut max_seen: BTreeMap<&str, u64> = BTreeMap::new();

        for (i, &(k, token)) in ops.iter().enumerate() {
            let key = KEYS[k];
            let value = format!("w{i}");
            let max = max_seen.entry(key).or_insert(0);
            *max = (*max).max(token);

            prop_assert_eq!(r.write(key, token, &value), WriteOutcome::Accepted { highest: *max });
            prop_assert_eq!(r.highest(key), *max);
            prop_assert_eq!(r.read(key), ReadValue { value: Some(value), token: Some(token) });
        }
        for key in KEYS {
            prop_assert_eq!(r.highest(key), max_seen.get(key).copied().unwrap_or(0));
        }
    }
}

/// A fixed fenced sequence with exact values, including an equal-token rewrite and token 0.
#[test]
fn fenced_hand_written_sequence() {
    let mut r = Resource::new(FenceMode::Fenced);
    assert_eq!(r.write("k", 0, "a"), WriteOutcome::Accepted { highest: 0 });
    assert_eq!(r.write("k", 5, "b"), WriteOutcome::Accepted { highest: 5 });
    assert_eq!(
        r.write("k", 4, "stale"),
        WriteOutcome::Rejected {
            presented: 4,
            highest: 5
        }
    );
    assert_eq!(r.write("k", 5, "c"), WriteOutcome::Accepted { highest: 5 });
    assert_eq!(
        r.read("k"),
        ReadValue {
            value: Some("c".into()),
            token: Some(5)
        }
    );
    // Fencing is per key: a low token is fine on a fresh key.
    assert_eq!(r.write("j", 1, "x"), WriteOutcome::Accepted { highest: 1 });
    assert_eq!(r.highest("k"), 5);
}
