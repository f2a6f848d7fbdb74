//! A candidate's judgement of a lease record: the holder is gone once the record has not
//! changed for a lease duration on the candidate's own clock.

use crate::store::Versioned;

/// Which duration a candidate waits before judging a silent holder gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpiryJudgement {
    /// The duration the holder wrote into its record (the correct reading).
    RecordedDuration,
    /// The candidate's own configured duration, whatever the holder recorded (case K11).
    OwnDuration,
}

/// What a candidate concludes from a record.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    use crate::store::LeaseRecord;

    fn record(holder: &str, duration_ms: u64) -> Option<LeaseRecord> {
        Some(LeaseRecord::new(holder, duration_ms))
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
