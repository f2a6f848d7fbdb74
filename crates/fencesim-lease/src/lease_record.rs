//! Leases as records in a linearizable compare-and-swap store, with expiry judged by the
//! candidates rather than by the store: the design of Kubernetes `coordination.k8s.io` Lease
//! objects with client-go's leader election, and of the DynamoDB Lock Client.
//!
//! The store only versions records. A candidate reads the record and remembers, on its own
//! clock, when it first saw the current version; if the version has not changed for a lease
//! duration, it judges the holder gone and takes the record over by compare-and-swap on that
//! version. The holder renews by swapping in a new version before others judge it gone. Which
//! duration a candidate waits is the crux of case K11: the one the holder recorded, or the
//! candidate's own configured one (the defect).
//!
//! The fencing token of a lease is the record version at which its holder acquired it: it
//! grows with every takeover, as etcd's revisions do.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a holder writes into the record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    /// The holder's name.
    pub holder: String,
    /// How long others should wait without seeing a renewal before taking over, ms of the
    /// candidates' own clocks.
    pub duration_ms: u64,
}

/// A record as the store keeps it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// Which duration a candidate waits before judging a silent holder gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExpiryJudgement {
    /// The duration the holder wrote into its record (the correct reading).
    RecordedDuration,
    /// The candidate's own configured duration, whatever the holder recorded (case K11).
    OwnDuration,
}

/// What a candidate concludes from a record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Judgement {
    /// Nobody holds it.
    Free,
    /// Its holder has been silent for a whole duration: take it over.
    Expired,
    /// Held, and judged alive for `remaining_ms` more (candidate's clock).
    Held {
        /// The holder.
        holder: String,
        /// How much longer the holder is judged alive, ms.
        remaining_ms: i64,
    },
}

/// A candidate's memory of one lock's record: which version it saw, and since when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    judgement: ExpiryJudgement,
    own_duration_ms: u64,
    observed: Option<(u64, i64)>,
}

impl Candidate {
    /// A candidate that would record `own_duration_ms` itself and judges by `judgement`.
    pub fn new(judgement: ExpiryJudgement, own_duration_ms: u64) -> Self {
        Candidate {
            judgement,
            own_duration_ms,
            observed: None,
        }
    }

    /// Judge `seen`, read at `now_ms` on the candidate's own clock.
    pub fn observe(&mut self, seen: &Versioned, now_ms: i64) -> Judgement {
        let Some(record) = &seen.record else {
            return Judgement::Free;
        };
        let since_ms = match self.observed {
            Some((version, since)) if version == seen.version => since,
            _ => {
                self.observed = Some((seen.version, now_ms));
                now_ms
            }
        };
        let duration_ms = match self.judgement {
            ExpiryJudgement::RecordedDuration => record.duration_ms,
            ExpiryJudgement::OwnDuration => self.own_duration_ms,
        } as i64;
        let remaining_ms = since_ms + duration_ms - now_ms;
        if remaining_ms <= 0 {
            Judgement::Expired
        } else {
            Judgement::Held {
                holder: record.holder.clone(),
                remaining_ms,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(holder: &str, duration_ms: u64) -> Option<LeaseRecord> {
        Some(LeaseRecord {
            holder: holder.into(),
            duration_ms,
        })
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

    #[test]
    fn k11_a_shorter_own_duration_judges_a_renewing_holder_gone() {
        let held = Versioned {
            version: 5,
            record: record("a", 10_000),
            acquired_version: 1,
        };
        for (judgement, at_3s) in [
            (ExpiryJudgement::OwnDuration, Judgement::Expired),
            (
                ExpiryJudgement::RecordedDuration,
                Judgement::Held {
                    holder: "a".into(),
                    remaining_ms: 7_000,
                },
            ),
        ] {
            let mut b = Candidate::new(judgement, 2_000);
            assert!(matches!(b.observe(&held, 1_000), Judgement::Held { .. }));
            assert_eq!(b.observe(&held, 4_000), at_3s, "{judgement:?}");
        }
    }

    #[test]
    fn a_renewal_restarts_the_candidates_count() {
        let mut b = Candidate::new(ExpiryJudgement::RecordedDuration, 2_000);
        let at = |version| Versioned {
            version,
            record: record("a", 3_000),
            acquired_version: 1,
        };
        b.observe(&at(1), 0);
        assert!(matches!(b.observe(&at(2), 2_500), Judgement::Held { .. }));
        assert_eq!(
            b.observe(&at(2), 5_000),
            Judgement::Held {
                holder: "a".into(),
                remaining_ms: 500
            }
        );
        assert_eq!(b.observe(&at(2), 5_500), Judgement::Expired);
        assert_eq!(b.observe(&Versioned::default(), 5_600), Judgement::Free);
    }
}
