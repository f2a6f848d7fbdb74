//! The store of the lease-record design: a linearizable compare-and-swap store of lease
//! records, one per lock, which only versions them (it never expires anything).

use std::collections::BTreeMap;

/// What a holder writes into the record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRecord {
    /// The holder's name.
    pub holder: String,
    /// How long others should wait without seeing a renewal before taking over, ms of the
    /// candidates' own clocks.
    pub duration_ms: u64,
    /// When the lease ends, ms of the wall clock of the holder, which computed it when it
    /// built this record (`expiry_judged_by = "claimant-deadline"`); `None` otherwise.
    pub deadline_ms: Option<i64>,
}

impl LeaseRecord {
    /// `holder`'s record, asking others to wait `duration_ms` without a renewal.
    pub fn new(holder: impl Into<String>, duration_ms: u64) -> Self {
        LeaseRecord {
            holder: holder.into(),
            duration_ms,
            deadline_ms: None,
        }
    }
}

/// A record as the store keeps it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Versioned {
    /// Bumped by every successful swap; 0 for a lock never written.
    pub version: u64,
    /// The record (`None`: free).
    pub record: Option<LeaseRecord>,
    /// The version at which the current (or, when free, the last) holder took the record: its
    /// fencing token.
    pub acquired_version: u64,
}

/// The answer to [`RecordStore::cas`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CasOutcome {
    /// Swapped: the record is now at `version`, held since `acquired_version`.
    Swapped {
        /// The new version.
        version: u64,
        /// The holder's fencing token (equal to `version` when the holder changed).
        acquired_version: u64,
    },
    /// The record was no longer at the expected version; nothing changed.
    Conflict {
        /// The record as it is.
        current: Versioned,
    },
}

/// A linearizable compare-and-swap store of lease records, one per lock.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordStore {
    records: BTreeMap<String, Versioned>,
}

impl RecordStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The record of `lock` (version 0 and free if never written).
    pub fn get(&self, lock: &str) -> Versioned {
        self.records.get(lock).cloned().unwrap_or_default()
    }

    /// Replace `lock`'s record by `record` if it is still at `expected_version`. `takeover`:
    /// the swap starts a new lease (a candidate taking the record, even one that finds its own
    /// name in it after a restart), so its token is the new version; otherwise a swap by the
    /// same holder is a renewal and keeps the token.
    pub fn cas(
        &mut self,
        lock: &str,
        expected_version: u64,
        record: Option<LeaseRecord>,
        takeover: bool,
    ) -> CasOutcome {
        let current = self.records.entry(lock.to_owned()).or_default();
        if current.version != expected_version {
            return CasOutcome::Conflict {
                current: current.clone(),
            };
        }
        let version = current.version + 1;
        let same_holder = match (&current.record, &record) {
            (Some(old), Some(new)) => old.holder == new.holder && !takeover,
            _ => false,
        };
        // A new holder's token is this version; a release keeps the last holder's.
        if !same_holder && record.is_some() {
            current.acquired_version = version;
        }
        current.version = version;
        current.record = record;
        CasOutcome::Swapped {
            version,
            acquired_version: current.acquired_version,
        }
    }
}

impl RecordStore {
    /// Write `record` into `lock`'s record whatever its version: an unconditional update by
    /// key, the defect of case K21 (two schedulers that both read a task as free both claim
    /// it, and both succeed). Always a takeover: the token is the new version.
    pub fn put(&mut self, lock: &str, record: LeaseRecord) -> CasOutcome {
        let version = self.get(lock).version;
        self.cas(lock, version, Some(record), true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(holder: &str, duration_ms: u64) -> Option<LeaseRecord> {
        Some(LeaseRecord::new(holder, duration_ms))
    }

    #[test]
    fn swaps_need_the_current_version_and_tokens_grow_at_each_takeover() {
        let mut s = RecordStore::new();
        let swapped = |version, acquired_version| CasOutcome::Swapped {
            version,
            acquired_version,
        };
        assert_eq!(s.cas("l", 0, record("a", 10_000), true), swapped(1, 1));
        assert_eq!(
            s.cas("l", 1, record("a", 10_000), false),
            swapped(2, 1),
            "a renewal"
        );
        assert!(matches!(
            s.cas("l", 1, record("b", 2_000), true),
            CasOutcome::Conflict { .. }
        ));
        assert_eq!(
            s.cas("l", 2, record("b", 2_000), true),
            swapped(3, 3),
            "a takeover"
        );
        assert_eq!(s.cas("l", 3, None, false), swapped(4, 3), "a release");
        assert_eq!(s.get("l").record, None);
        assert_eq!(s.cas("l", 4, record("b", 2_000), true), swapped(5, 5));
        assert_eq!(
            s.cas("l", 5, record("b", 2_000), true),
            swapped(6, 6),
            "b again, after a restart"
        );
    }
}
