//! Sans-IO fenced resources.
//!
//! A fenced resource is the storage a lock protects. It remembers, per key, the highest fencing
//! token it has accepted and applies a write only if the write's token is at least that high, in
//! one atomic step (Kleppmann 2016; the `WHERE highest_fence_token <= :token` update). A paused
//! or delayed former holder then cannot overwrite a newer holder's data, whatever its lock
//! service believed. The `unfenced` mode accepts everything, to show the counterexample. The
//! `equality` mode is what a resource can do with a lock's random value (Redlock's): it cannot
//! order values, only tell whether a value is the one it has seen last.
//!
//! [`FencedStore`] is this resource on the design API (`fencesim_design::FencedResource`),
//! and [`FENCED`], [`UNFENCED`] and [`EQUALITY`] are its three `[resource] mode`s, each with the
//! `check` knob (K20's check-then-apply).
#![deny(missing_docs)]

#[cfg(feature = "live")]
pub mod live;
mod spec;

pub use spec::{Check, FencedStore, StoreConfig, StoreSpec, Tokenless, EQUALITY, FENCED, UNFENCED};

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// How a [`Resource`] treats tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FenceMode {
    /// Reject a write whose token is below the highest accepted token (the safe design).
    #[default]
    Fenced,
    /// Accept every write (tokens are recorded but not checked): the unsafe baseline.
    Unfenced,
    /// For opaque lock values (Redlock's random values, case K23), which cannot be ordered:
    /// accept the current value and any value never seen before (it may be a new holder's),
    /// reject a value once another has replaced it. A former holder that never wrote before its
    /// lease ran out presents a value the resource has not seen, and gets through.
    Equality,
}

pub use fencesim_design::{ReadValue, WriteOutcome};

#[derive(Clone, Debug, Default)]
struct Cell {
    current: ReadValue,
    highest: u64,
    /// Equality mode: values that another value has replaced.
    retired: BTreeSet<u64>,
}

/// A key-value store fenced per key.
#[derive(Clone, Debug, Default)]
pub struct Resource {
    mode: FenceMode,
    cells: BTreeMap<String, Cell>,
}

impl Resource {
    /// An empty resource.
    pub fn new(mode: FenceMode) -> Self {
        Self {
            mode,
            cells: BTreeMap::new(),
        }
    }

    /// The mode this resource was built with.
    pub fn mode(&self) -> FenceMode {
        self.mode
    }

    /// One atomic compare-and-update: in fenced mode store `value` if `token` is at least the
    /// key's highest accepted token (equal tokens are the same holder writing again), else reject
    /// and change nothing. Unfenced mode always stores. Equality mode stores unless `token` is a
    /// value that another has replaced.
    pub fn write(&mut self, key: &str, token: u64, value: &str) -> WriteOutcome {
        match self.check(key, token) {
            Some(rejected) => rejected,
            None => self.apply(key, token, value),
        }
    }

    /// The first half of [`Self::write`] alone, changing nothing: the rejection if `token` is
    /// stale now, else `None`. A resource that checks and later [`Self::apply`]s without
    /// checking again has the race of case K20.
    pub fn check(&self, key: &str, token: u64) -> Option<WriteOutcome> {
        let cell = self.cells.get(key)?;
        let stale = match self.mode {
            FenceMode::Fenced => token < cell.highest,
            FenceMode::Unfenced => false,
            FenceMode::Equality => cell.retired.contains(&token),
        };
        stale.then_some(WriteOutcome::Rejected {
            presented: token,
            highest: cell.highest,
        })
    }

    /// The second half of [`Self::write`]: store `value` with `token` without checking, and
    /// return the acceptance with the key's highest token afterwards.
    pub fn apply(&mut self, key: &str, token: u64, value: &str) -> WriteOutcome {
        let cell = self.cells.entry(key.to_owned()).or_default();
        if self.mode == FenceMode::Equality {
            if let Some(previous) = cell.current.token.filter(|t| *t != token) {
                cell.retired.insert(previous);
            }
            cell.highest = token;
        } else {
            cell.highest = cell.highest.max(token);
        }
        cell.current = ReadValue {
            value: Some(value.to_owned()),
            token: Some(token),
        };
        WriteOutcome::Accepted {
            highest: cell.highest,
        }
    }

    /// Delete `key` with fencing token `token`, checked as a write's (a stale token is
    /// rejected and changes nothing): afterwards a read finds it never written.
    pub fn delete(&mut self, key: &str, token: u64) -> WriteOutcome {
        if let Some(rejected) = self.check(key, token) {
            return rejected;
        }
        let outcome = self.apply(key, token, "");
        if let Some(cell) = self.cells.get_mut(key) {
            cell.current.value = None;
        }
        outcome
    }

    /// Delete `key` without any check: a cleanup that carries no token. The highest accepted
    /// token stays, so later writes are still fenced against it.
    pub fn clear(&mut self, key: &str) -> WriteOutcome {
        let cell = self.cells.entry(key.to_owned()).or_default();
        cell.current = ReadValue::default();
        WriteOutcome::Accepted {
            highest: cell.highest,
        }
    }

    /// The key's current value and its token.
    pub fn read(&self, key: &str) -> ReadValue {
        self.cells
            .get(key)
            .map(|c| c.current.clone())
            .unwrap_or_default()
    }

    /// The key's highest accepted token (0: none; equality mode: the current value).
    pub fn highest(&self, key: &str) -> u64 {
        self.cells.get(key).map_or(0, |c| c.highest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fenced_rejects_lower_tokens_and_changes_nothing() {
        let mut r = Resource::new(FenceMode::Fenced);
        assert_eq!(
            r.write("k", 34, "b"),
            WriteOutcome::Accepted { highest: 34 }
        );
        assert_eq!(
            r.write("k", 33, "a"),
            WriteOutcome::Rejected {
                presented: 33,
                highest: 34
            }
        );
        assert_eq!(
            r.read("k"),
            ReadValue {
                value: Some("b".into()),
                token: Some(34)
            }
        );
        assert_eq!(
            r.write("k", 34, "b2"),
            WriteOutcome::Accepted { highest: 34 }
        );
    }

    #[test]
    fn check_then_apply_lets_two_checked_writes_land_out_of_order() {
        // K20: tokens 33 and 34 both pass the check before either is applied; 33 lands last.
        let mut r = Resource::new(FenceMode::Fenced);
        assert_eq!(r.check("k", 33), None);
        assert_eq!(r.check("k", 34), None);
        assert_eq!(
            r.apply("k", 34, "b"),
            WriteOutcome::Accepted { highest: 34 }
        );
        assert_eq!(
            r.apply("k", 33, "a"),
            WriteOutcome::Accepted { highest: 34 }
        );
        assert_eq!(r.read("k").token, Some(33));
        // Checked again, 33 would have been refused.
        assert_eq!(
            r.check("k", 33),
            Some(WriteOutcome::Rejected {
                presented: 33,
                highest: 34
            })
        );
    }

    #[test]
    fn unfenced_accepts_stale_tokens_but_keeps_the_highest() {
        let mut r = Resource::new(FenceMode::Unfenced);
        r.write("k", 34, "b");
        assert_eq!(
            r.write("k", 33, "a"),
            WriteOutcome::Accepted { highest: 34 }
        );
        assert_eq!(
            r.read("k"),
            ReadValue {
                value: Some("a".into()),
                token: Some(33)
            }
        );
        assert_eq!(r.read("other"), ReadValue::default());
    }

    #[test]
    fn equality_rejects_replaced_values_but_cannot_tell_an_unseen_stale_one() {
        let mut r = Resource::new(FenceMode::Equality);
        assert_eq!(
            r.write("k", 900, "a"),
            WriteOutcome::Accepted { highest: 900 }
        );
        assert_eq!(
            r.write("k", 900, "a2"),
            WriteOutcome::Accepted { highest: 900 }
        );
        // A new holder's value replaces 900, which is now refused.
        assert_eq!(
            r.write("k", 17, "b"),
            WriteOutcome::Accepted { highest: 17 }
        );
        assert_eq!(
            r.write("k", 900, "a3"),
            WriteOutcome::Rejected {
                presented: 900,
                highest: 17
            }
        );
        // A former holder that never wrote (K23) presents an unseen value: accepted.
        assert_eq!(
            r.write("k", 5_000, "stale"),
            WriteOutcome::Accepted { highest: 5_000 }
        );
        assert_eq!(r.read("k").value.as_deref(), Some("stale"));
        assert_eq!(
            r.write("k", 17, "b2"),
            WriteOutcome::Rejected {
                presented: 17,
                highest: 5_000
            }
        );
    }
}
