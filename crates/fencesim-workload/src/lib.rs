//! The client workload of a scenario's `[[clients]]` entry as one sans-IO state machine: for
//! `cycles` cycles, acquire the lock, read the key, work for `work_ms` (renewing the lease every
//! `renew_ms`), check the lease's validity by the client's own clock if asked, write with the
//! fencing token, clean up, release. This is the job of Kleppmann (2016)'s fencing example: a
//! holder that may be paused between its grant and its write.
//!
//! [`Workload`] decides what comes next; a driver does it and says how it went. The simulator
//! (`fencesim-sim`, on madsim's clock) and live mode's client process (`fencesim-live`, on
//! `CLOCK_MONOTONIC`) are the two drivers, so a client does the same steps in the same order in
//! both. What a step is made of stays the driver's: the records it writes (Jepsen's invoke,
//! ok, fail, info), the design's client protocol behind an acquire, safepoints and timeouts.
//!
//! ```
//! # use fencesim_workload::{Outcome, Step, Workload, WorkloadSpec};
//! let spec = WorkloadSpec { cycles: 1, work_ms: 10, renew_ms: None, validity_check: false,
//!     cleanup: fencesim_scenario::Cleanup::None };
//! let mut w = Workload::new(spec, "client-1", 1);
//! assert_eq!(w.step(0, Outcome::Begin), Step::Acquire);
//! assert_eq!(w.step(5, Outcome::Granted { token: 7 }), Step::Read);
//! assert_eq!(w.step(6, Outcome::Finished), Step::Work { for_ns: 10_000_000 });
//! let write = w.step(10_000_006, Outcome::Finished);
//! assert_eq!(write, Step::Write { token: 7, value: "client-1/1".into() });
//! assert_eq!(w.step(10_000_009, Outcome::Finished), Step::Release { token: 7 });
//! assert_eq!(w.step(10_000_010, Outcome::Finished), Step::Done);
//! ```
#![deny(missing_docs)]

use fencesim_scenario::{Cleanup, ClientSpec};

/// What of a `[[clients]]` entry the loop needs (docs/scenario-format.md gives each field).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WorkloadSpec {
    /// How many acquire-to-release cycles.
    pub cycles: u64,
    /// How long each cycle works between its read and its write, ms.
    pub work_ms: u64,
    /// The keepalive period while working, ms; `None`: no renewals.
    pub renew_ms: Option<u64>,
    /// Whether the client checks, by its own clock, that its lease is still valid before it
    /// writes (Redlock's validity time).
    pub validity_check: bool,
    /// What the cycle does after its write.
    pub cleanup: Cleanup,
}

impl From<&ClientSpec> for WorkloadSpec {
    fn from(c: &ClientSpec) -> Self {
        WorkloadSpec {
            cycles: c.cycles,
            work_ms: c.work_ms,
            renew_ms: c.renew_ms,
            validity_check: c.validity_check,
            cleanup: c.cleanup,
        }
    }
}

/// What the driver does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Acquire the lock through the design's client protocol, retrying with backoff until it
    /// is granted; answer [`Outcome::Granted`].
    Acquire,
    /// Renew lease `token` at once: its grant came from a wait queue, so the deadline the
    /// client counted from its acquire request may be long past (case K07). Answer
    /// [`Outcome::Renewed`].
    Renew {
        /// The lease's fencing token.
        token: u64,
    },
    /// Read the key from the resource; answer [`Outcome::Finished`] whatever the reply.
    Read,
    /// Work (wait) for `for_ns` nanoseconds of the driver's clock; answer
    /// [`Outcome::Finished`].
    Work {
        /// How long, ns.
        for_ns: u64,
    },
    /// The keepalive of lease `token` that falls due while working. A driver whose keepalive
    /// stream is stalled by a fault (case K18) sends nothing and answers `Renewed { kept:
    /// true }`: the work goes on regardless. Answer [`Outcome::Renewed`].
    Keepalive {
        /// The lease's fencing token.
        token: u64,
    },
    /// Check by the client's own clock that its lease is still valid; answer
    /// [`Outcome::Validity`]. Only with `validity_check`.
    CheckValidity,
    /// Write `value` to the key with the fencing token; answer [`Outcome::Finished`] whatever
    /// the reply (a stale-token rejection ends nothing but the driver's own view of its lease).
    Write {
        /// The fencing token presented.
        token: u64,
        /// The value: the unit of work, unique per client start and cycle
        /// (`client-1/2`; `client-1@3/2` for a client's third start, after restarts).
        value: String,
    },
    /// Delete the key (the cleanup after a write, as a `finally` block runs), with the lease's
    /// token if the cleanup is fenced, without one if it goes around the fence. Answer
    /// [`Outcome::Finished`].
    Delete {
        /// The fencing token presented, if any.
        token: Option<u64>,
    },
    /// Release lease `token`; answer [`Outcome::Finished`].
    Release {
        /// The lease's fencing token.
        token: u64,
    },
    /// Every cycle has ended: the client is done.
    Done,
}

/// How the last [`Step`] went (the first call gives [`Outcome::Begin`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// No step yet: the client starts.
    Begin,
    /// The lock was granted with fencing token `token` (after [`Step::Acquire`]).
    Granted {
        /// The lease's fencing token.
        token: u64,
    },
    /// After [`Step::Renew`] or [`Step::Keepalive`]: whether the lease is still held as far as
    /// the client knows (an unanswered renewal keeps it: the client renews again later). A
    /// lost lease ends the cycle without a write.
    Renewed {
        /// False: the service said the lease is gone.
        kept: bool,
    },
    /// After [`Step::CheckValidity`]: false ends the cycle without a write or a release (by
    /// its own clock there is nothing left to release).
    Validity {
        /// Whether the lease is still valid by the client's clock.
        valid: bool,
    },
    /// A read, a stretch of work, a write, a delete or a release is over.
    Finished,
}

/// Where a cycle is: the step whose outcome comes next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum At {
    Start,
    Acquiring,
    RenewingQueued,
    Reading,
    /// Working towards a keepalive.
    Working,
    /// Working out the rest of `work_ms`, no keepalive due.
    WorkingToEnd,
    Keepalive,
    Checking,
    Writing,
    Deleting,
    Releasing,
    Done,
}

/// One client start's workload: fed the driver's clock (`now_ns`, any monotonic origin) and
/// the outcome of each step, it answers the next [`Step`]. Deterministic and free of I/O: the
/// same outcomes at the same times give the same steps. Its `Hash` covers every field, as
/// `fencesim verify`'s fingerprints need.
#[derive(Clone, Debug, Hash)]
pub struct Workload {
    spec: WorkloadSpec,
    /// The client's name, for the values it writes.
    name: String,
    /// Which start of the client this is (1, then one more after each restart).
    incarnation: u64,
    /// The cycle under way, 1-based (0 before the first).
    cycle: u64,
    at: At,
    /// The current lease's fencing token.
    token: u64,
    /// When this cycle's work ends, ns of the driver's clock.
    work_end_ns: u64,
    /// The protocol's keepalive stream ended this cycle (case K09): no more renewals.
    keepalive_stopped: bool,
    /// This cycle's lease came from a wait queue, so the client renews at once (case K07).
    granted_from_queue: bool,
}

impl Workload {
    /// The workload of client `name`'s start number `incarnation` (1 for the first).
    pub fn new(spec: WorkloadSpec, name: &str, incarnation: u64) -> Self {
        Workload {
            spec,
            name: name.to_owned(),
            incarnation,
            cycle: 0,
            at: At::Start,
            token: 0,
            work_end_ns: 0,
            keepalive_stopped: false,
            granted_from_queue: false,
        }
    }

    /// The cycle under way, 1-based (0 before the first).
    pub fn cycle(&self) -> u64 {
        self.cycle
    }

    /// The design's client protocol says its keepalive stream has ended (a lease kept alive by
    /// a stream that closed silently, case K09): the rest of this cycle's work sends no
    /// renewals. Any time during a cycle.
    pub fn stop_renewing(&mut self) {
        self.keepalive_stopped = true;
    }

    /// The design's client protocol says this cycle's grant came from a wait queue: a client
    /// that renews its lease renews it before anything else (case K07). During the acquire.
    pub fn renew_now(&mut self) {
        self.granted_from_queue = true;
    }

    /// The next step, given the last one's `outcome` at `now_ns`.
    ///
    /// # Panics
    ///
    /// If `outcome` cannot answer the last step (a [`Outcome::Granted`] after a read, say): a
    /// bug of the driver's.
    pub fn step(&mut self, now_ns: u64, outcome: Outcome) -> Step {
        match (self.at, outcome) {
            (At::Start, Outcome::Begin) | (At::Releasing, Outcome::Finished) => self.next_cycle(),
            (At::Acquiring, Outcome::Granted { token }) => {
                self.token = token;
                if self.granted_from_queue && self.spec.renew_ms.is_some() {
                    self.at = At::RenewingQueued;
                    Step::Renew { token }
                } else {
                    self.read()
                }
            }
            (At::RenewingQueued, Outcome::Renewed { kept: true }) => self.read(),
            (At::Reading, Outcome::Finished) => {
                self.work_end_ns =
                    now_ns.saturating_add(self.spec.work_ms.saturating_mul(1_000_000));
                self.work(now_ns)
            }
            (At::Working, Outcome::Finished) if now_ns < self.work_end_ns => {
                self.at = At::Keepalive;
                Step::Keepalive { token: self.token }
            }
            (At::Working, Outcome::Finished) | (At::Keepalive, Outcome::Renewed { kept: true }) => {
                self.work(now_ns)
            }
            (At::WorkingToEnd, Outcome::Finished) => self.after_work(),
            (At::Checking, Outcome::Validity { valid: true }) => self.write(),
            // The lease is gone, by the service's word or the client's clock: this cycle
            // writes nothing.
            (At::RenewingQueued | At::Keepalive, Outcome::Renewed { kept: false })
            | (At::Checking, Outcome::Validity { valid: false }) => self.next_cycle(),
            (At::Writing, Outcome::Finished) => match self.spec.cleanup {
                Cleanup::None => self.release(),
                Cleanup::Fenced => self.delete(Some(self.token)),
                Cleanup::Unfenced => self.delete(None),
            },
            (At::Deleting, Outcome::Finished) => self.release(),
            (at, outcome) => panic!("workload at {at:?} answered with {outcome:?}"),
        }
    }

    fn next_cycle(&mut self) -> Step {
        if self.cycle >= self.spec.cycles {
            self.at = At::Done;
            return Step::Done;
        }
        self.cycle += 1;
        self.keepalive_stopped = false;
        self.granted_from_queue = false;
        self.at = At::Acquiring;
        Step::Acquire
    }

    fn read(&mut self) -> Step {
        self.at = At::Reading;
        Step::Read
    }

    /// Work on towards the end of `work_ms`: up to the next keepalive if one is due before the
    /// end, else to the end.
    fn work(&mut self, now_ns: u64) -> Step {
        let left_ns = self.work_end_ns.saturating_sub(now_ns);
        if left_ns == 0 {
            return self.after_work();
        }
        match self.spec.renew_ms.filter(|_| !self.keepalive_stopped) {
            Some(renew_ms) => {
                self.at = At::Working;
                Step::Work {
                    for_ns: left_ns.min(renew_ms.saturating_mul(1_000_000)),
                }
            }
            None => {
                self.at = At::WorkingToEnd;
                Step::Work { for_ns: left_ns }
            }
        }
    }

    fn after_work(&mut self) -> Step {
        if self.spec.validity_check {
            self.at = At::Checking;
            Step::CheckValidity
        } else {
            self.write()
        }
    }

    fn write(&mut self) -> Step {
        self.at = At::Writing;
        // The value names the unit of work, unique per client start: a restarted client starts
        // its cycles again, as new work (`duplicate-execution` relies on this).
        let value = match self.incarnation {
            1 => format!("{}/{}", self.name, self.cycle),
            n => format!("{}@{n}/{}", self.name, self.cycle),
        };
        Step::Write {
            token: self.token,
            value,
        }
    }

    fn delete(&mut self, token: Option<u64>) -> Step {
        self.at = At::Deleting;
        Step::Delete { token }
    }

    fn release(&mut self) -> Step {
        self.at = At::Releasing;
        Step::Release { token: self.token }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn spec(cycles: u64, renew_ms: Option<u64>) -> WorkloadSpec {
        WorkloadSpec {
            cycles,
            work_ms: 100,
            renew_ms,
            validity_check: false,
            cleanup: Cleanup::None,
        }
    }

    /// Acquire and read at 0 ms: the work of a cycle from `t0`, as the steps it asks for.
    fn start(w: &mut Workload, token: u64, t0: u64) {
        assert_eq!(w.step(t0, Outcome::Granted { token }), Step::Read);
    }

    #[test]
    fn work_is_cut_into_keepalive_periods_and_ends_on_time() {
        let mut w = Workload::new(spec(1, Some(30)), "c", 1);
        assert_eq!(w.step(0, Outcome::Begin), Step::Acquire);
        start(&mut w, 3, 0);
        assert_eq!(w.step(0, Outcome::Finished), Step::Work { for_ns: 30 * MS });
        assert_eq!(
            w.step(30 * MS, Outcome::Finished),
            Step::Keepalive { token: 3 }
        );
        // The renewal took 5 ms: the next period counts from its end.
        let kept = Outcome::Renewed { kept: true };
        assert_eq!(w.step(35 * MS, kept), Step::Work { for_ns: 30 * MS });
        assert_eq!(
            w.step(65 * MS, Outcome::Finished),
            Step::Keepalive { token: 3 }
        );
        assert_eq!(w.step(95 * MS, kept), Step::Work { for_ns: 5 * MS });
        // The work's end is no time for a keepalive: the write comes.
        assert_eq!(
            w.step(100 * MS, Outcome::Finished),
            Step::Write {
                token: 3,
                value: "c/1".into()
            }
        );
        assert_eq!(
            w.step(101 * MS, Outcome::Finished),
            Step::Release { token: 3 }
        );
        assert_eq!(w.step(102 * MS, Outcome::Finished), Step::Done);
    }

    #[test]
    fn a_lost_lease_ends_the_cycle_without_a_write_and_the_next_begins() {
        let mut w = Workload::new(spec(2, Some(30)), "c", 1);
        w.step(0, Outcome::Begin);
        start(&mut w, 3, 0);
        w.step(0, Outcome::Finished);
        w.step(30 * MS, Outcome::Finished);
        assert_eq!(
            w.step(31 * MS, Outcome::Renewed { kept: false }),
            Step::Acquire
        );
        assert_eq!(w.cycle(), 2);
        start(&mut w, 4, 40 * MS);
        w.step(40 * MS, Outcome::Finished);
        w.step(70 * MS, Outcome::Finished);
        assert_eq!(
            w.step(71 * MS, Outcome::Renewed { kept: false }),
            Step::Done
        );
    }

    #[test]
    fn a_stopped_keepalive_works_out_the_rest_without_renewals() {
        let mut w = Workload::new(spec(1, Some(30)), "c", 1);
        w.step(0, Outcome::Begin);
        start(&mut w, 3, 0);
        assert_eq!(w.step(0, Outcome::Finished), Step::Work { for_ns: 30 * MS });
        w.stop_renewing();
        assert_eq!(
            w.step(30 * MS, Outcome::Finished),
            Step::Keepalive { token: 3 }
        );
        assert_eq!(
            w.step(30 * MS, Outcome::Renewed { kept: true }),
            Step::Work { for_ns: 70 * MS }
        );
        assert!(matches!(
            w.step(100 * MS, Outcome::Finished),
            Step::Write { .. }
        ));
    }

    #[test]
    fn a_queued_grant_is_renewed_first_and_only_by_a_client_that_renews() {
        let mut w = Workload::new(spec(2, Some(30)), "c", 1);
        w.step(0, Outcome::Begin);
        w.renew_now();
        assert_eq!(
            w.step(0, Outcome::Granted { token: 9 }),
            Step::Renew { token: 9 }
        );
        assert_eq!(w.step(1, Outcome::Renewed { kept: false }), Step::Acquire);
        // The flag is the cycle's own: the second cycle's grant is read at once.
        assert_eq!(w.step(2, Outcome::Granted { token: 10 }), Step::Read);

        let mut w = Workload::new(spec(1, None), "c", 1);
        w.step(0, Outcome::Begin);
        w.renew_now();
        assert_eq!(w.step(0, Outcome::Granted { token: 9 }), Step::Read);
        assert_eq!(
            w.step(0, Outcome::Finished),
            Step::Work { for_ns: 100 * MS }
        );
    }

    #[test]
    fn validity_is_checked_after_the_work_and_an_elapsed_lease_is_not_released() {
        let mut s = spec(2, None);
        s.validity_check = true;
        let mut w = Workload::new(s, "c", 1);
        w.step(0, Outcome::Begin);
        start(&mut w, 1, 0);
        w.step(0, Outcome::Finished);
        assert_eq!(w.step(100 * MS, Outcome::Finished), Step::CheckValidity);
        assert_eq!(
            w.step(100 * MS, Outcome::Validity { valid: false }),
            Step::Acquire
        );
        start(&mut w, 2, 0);
        w.step(0, Outcome::Finished);
        w.step(100 * MS, Outcome::Finished);
        assert_eq!(
            w.step(100 * MS, Outcome::Validity { valid: true }),
            Step::Write {
                token: 2,
                value: "c/2".into()
            }
        );
    }

    #[test]
    fn cleanup_deletes_with_or_without_the_token_before_the_release() {
        for (cleanup, token) in [(Cleanup::Fenced, Some(5)), (Cleanup::Unfenced, None)] {
            let mut s = spec(1, None);
            s.cleanup = cleanup;
            // A restarted client's values name its start.
            let mut w = Workload::new(s, "c", 3);
            w.step(0, Outcome::Begin);
            start(&mut w, 5, 0);
            w.step(0, Outcome::Finished);
            assert_eq!(
                w.step(100 * MS, Outcome::Finished),
                Step::Write {
                    token: 5,
                    value: "c@3/1".into()
                }
            );
            assert_eq!(w.step(100 * MS, Outcome::Finished), Step::Delete { token });
            assert_eq!(
                w.step(100 * MS, Outcome::Finished),
                Step::Release { token: 5 }
            );
        }
    }

    #[test]
    fn no_work_and_no_cycles() {
        let mut s = spec(1, Some(30));
        s.work_ms = 0;
        let mut w = Workload::new(s, "c", 1);
        w.step(0, Outcome::Begin);
        start(&mut w, 1, 0);
        assert!(matches!(w.step(0, Outcome::Finished), Step::Write { .. }));
        let mut w = Workload::new(spec(0, None), "c", 1);
        assert_eq!(w.step(0, Outcome::Begin), Step::Done);
    }

    #[test]
    #[should_panic(expected = "workload at Reading answered with Granted")]
    fn an_outcome_that_answers_another_step_is_a_driver_bug() {
        let mut w = Workload::new(spec(1, None), "c", 1);
        w.step(0, Outcome::Begin);
        w.step(0, Outcome::Granted { token: 1 });
        w.step(0, Outcome::Granted { token: 1 });
    }
}
