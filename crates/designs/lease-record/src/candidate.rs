//! A candidate's judgement of a lease record: the holder is gone once the record has not
//! changed for a lease duration on the candidate's own clock (or, with the claimant-deadline
//! defect, once the candidate's wall clock passes the deadline the holder wrote).

use fencesim_design::Now;

use crate::store::Versioned;

/// Which duration a candidate waits before judging a silent holder gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpiryJudgement {
    /// The duration the holder wrote into its record (the correct reading).
    RecordedDuration,
    /// The candidate's own configured duration, whatever the holder recorded (case K11).
    OwnDuration,
    /// DEFECT: the deadline the holder wrote, computed from its own wall clock when it built
    /// its claim or renewal, against the candidate's wall clock; and the holder counts its
    /// lease from when it hears that its swap succeeded. A holder that stalls between sending
    /// its record and hearing the answer (the design's `claim-sent` and `renewal-sent`
    /// safepoints) counts on a lease the others already judge over, and wall clocks apart (skew, a jump) move the deadline for
    /// one side only. A lease record whose expiry the claimant computes before the swap, as
    /// a user's design had it (issue 35).
    ClaimantDeadline,
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

    /// How it judges.
    pub fn judgement(&self) -> ExpiryJudgement {
        self.judgement
    }

    /// Judge `seen`, read at `now` on the candidate's own clocks.
    pub fn observe(&mut self, seen: &Versioned, now: Now) -> Judgement {
        let now_ms = now.mono_ms;
        let Some(record) = &seen.record else {
            return Judgement::Free;
        };
        if let (ExpiryJudgement::ClaimantDeadline, Some(deadline_ms)) =
            (self.judgement, record.deadline_ms)
        {
            return judged(&record.holder, deadline_ms - now.wall_ms);
        }
        let since_ms = match self.observed {
            Some((version, since)) if version == seen.version => since,
            _ => {
                self.observed = Some((seen.version, now_ms));
                now_ms
            }
        };
        let duration_ms = match self.judgement {
            ExpiryJudgement::RecordedDuration | ExpiryJudgement::ClaimantDeadline => {
                record.duration_ms
            }
            ExpiryJudgement::OwnDuration => self.own_duration_ms,
        } as i64;
        judged(&record.holder, since_ms + duration_ms - now_ms)
    }
}

/// A record of `holder` with `remaining_ms` left before it is judged gone.
fn judged(holder: &str, remaining_ms: i64) -> Judgement {
    if remaining_ms <= 0 {
        Judgement::Expired
    } else {
        Judgement::Held {
            holder: holder.to_owned(),
            remaining_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::LeaseRecord;

    /// Both clocks at `ms`.
    fn at_ms(ms: i64) -> Now {
        Now {
            mono_ms: ms,
            wall_ms: ms,
        }
    }

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
            assert!(matches!(
                b.observe(&held, at_ms(1_000)),
                Judgement::Held { .. }
            ));
            assert_eq!(b.observe(&held, at_ms(4_000)), at_3s, "{judgement:?}");
        }
    }

    /// The claimant-deadline defect judges by the holder's written deadline on the
    /// candidate's wall clock, whatever its monotonic clock says.
    #[test]
    fn a_claimant_deadline_is_judged_on_the_candidates_wall_clock() {
        let mut held = Versioned {
            version: 5,
            record: record("a", 10_000),
            acquired_version: 1,
        };
        if let Some(r) = held.record.as_mut() {
            r.deadline_ms = Some(4_000);
        }
        let mut b = Candidate::new(ExpiryJudgement::ClaimantDeadline, 10_000);
        let now = |mono_ms, wall_ms| Now { mono_ms, wall_ms };
        assert_eq!(
            b.observe(&held, now(0, 3_000)),
            Judgement::Held {
                holder: "a".into(),
                remaining_ms: 1_000
            }
        );
        assert_eq!(b.observe(&held, now(1, 4_000)), Judgement::Expired);
    }

    #[test]
    fn a_renewal_restarts_the_candidates_count() {
        let mut b = Candidate::new(ExpiryJudgement::RecordedDuration, 2_000);
        let at = |version| Versioned {
            version,
            record: record("a", 3_000),
            acquired_version: 1,
        };
        b.observe(&at(1), at_ms(0));
        assert!(matches!(
            b.observe(&at(2), at_ms(2_500)),
            Judgement::Held { .. }
        ));
        assert_eq!(
            b.observe(&at(2), at_ms(5_000)),
            Judgement::Held {
                holder: "a".into(),
                remaining_ms: 500
            }
        );
        assert_eq!(b.observe(&at(2), at_ms(5_500)), Judgement::Expired);
        assert_eq!(
            b.observe(&Versioned::default(), at_ms(5_600)),
            Judgement::Free
        );
    }
}
