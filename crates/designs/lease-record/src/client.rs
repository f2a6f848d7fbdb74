//! The candidates' side: read the record, judge by the client's own clock whether its holder
//! is gone, take it over by compare-and-swap; renew and release by swapping the client's own
//! version. Each lock operation is one Jepsen operation; the reads and swaps inside it are not
//! operations of their own.

use fencesim_design::{
    ClientCtx, ClientInfo, ClientProtocol, LockOp, OpResult, RequestId, Safepoint, SafepointSide,
    TimerId,
};

use crate::candidate::{Candidate, ExpiryJudgement, Judgement};
use crate::message::{Purpose, RecordMessage};
use crate::store::{CasOutcome, LeaseRecord};

/// How a candidate claims a record it judged free or expired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takeover {
    /// Compare-and-swap on the version it read (correct).
    CompareAndSwap,
    /// Write the record whatever its version: two candidates that both read it free both
    /// succeed (case K21).
    Unconditional,
}

/// The design's own safepoint: a candidate has sent its claim (the record with the deadline
/// it computed, under the claimant-deadline defect) and has not heard the answer yet. A stall
/// here lets the swap land while the claimant is away: a claimant that counts its lease from
/// the answer then counts from later than its record says.
pub const CLAIM_SENT: Safepoint = Safepoint {
    name: "claim-sent",
    side: SafepointSide::Client,
    about: "a candidate sent its claim (its record's deadline computed) and has not heard the \
            answer yet",
};

/// The design's own safepoint: the holder has sent its renewal and has not heard the answer
/// yet.
pub const RENEWAL_SENT: Safepoint = Safepoint {
    name: "renewal-sent",
    side: SafepointSide::Client,
    about: "the holder sent its renewal (its record's deadline computed) and has not heard the \
            answer yet",
};

/// The one timer: the reply deadline of the request in flight.
const REPLY_DEADLINE: TimerId = TimerId(1);

/// Where the current operation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// No operation in progress.
    Idle,
    /// Acquire: the record read is in flight.
    Reading(RequestId),
    /// Acquire: the takeover swap is in flight, sent at `sent_ms` (monotonic).
    Claiming { request: RequestId, sent_ms: i64 },
    /// Renew of the lease with `token`: the swap is in flight, sent at `sent_ms`.
    Renewing {
        request: RequestId,
        token: u64,
        sent_ms: i64,
    },
    /// Release: the clearing swap is in flight.
    Releasing(RequestId),
}

/// A client of the lease-record design.
#[derive(Clone, Debug)]
pub struct RecordClient {
    info: ClientInfo,
    takeover: Takeover,
    /// Its memory of the record: which version it saw, since when.
    candidate: Candidate,
    /// The version it last swapped in (renewals and the release swap on it).
    record_version: u64,
    step: Step,
}

type Ctx<'a> = ClientCtx<'a, RecordMessage>;

impl RecordClient {
    /// A client `info`, judging expiry by `judgement` and claiming by `takeover`.
    pub fn new(info: ClientInfo, judgement: ExpiryJudgement, takeover: Takeover) -> Self {
        let candidate = Candidate::new(judgement, info.ttl_ms);
        RecordClient {
            info,
            takeover,
            candidate,
            record_version: 0,
            step: Step::Idle,
        }
    }

    /// The record this client swaps in, built now: under the claimant-deadline defect it
    /// carries the deadline computed from the client's own wall clock.
    fn own_record(&self, ctx: &Ctx<'_>) -> LeaseRecord {
        let mut record = LeaseRecord::new(self.info.name.clone(), self.info.ttl_ms);
        if self.claimant_deadline() {
            record.deadline_ms = Some(ctx.now().wall_ms + self.info.ttl_ms as i64);
        }
        record
    }

    fn claimant_deadline(&self) -> bool {
        self.candidate.judgement() == ExpiryJudgement::ClaimantDeadline
    }

    /// Send the swap `msg`, then pass the design's safepoint `sent` (sent, answer not heard).
    fn send_swap(&self, msg: RecordMessage, sent: Safepoint, ctx: &mut Ctx<'_>) -> RequestId {
        let request = self.ask(msg, ctx);
        ctx.safepoint(sent.name);
        request
    }

    fn swap(
        &self,
        expected_version: Option<u64>,
        record: Option<LeaseRecord>,
        purpose: Purpose,
    ) -> RecordMessage {
        RecordMessage::Cas {
            lock: self.info.lock.clone(),
            expected_version,
            record,
            purpose,
        }
    }

    /// Send `msg` to the store under the reply deadline.
    fn ask(&self, msg: RecordMessage, ctx: &mut Ctx<'_>) -> RequestId {
        let request = ctx.request(0, msg);
        ctx.set_timer(REPLY_DEADLINE, self.info.timeout_ms);
        request
    }

    /// The conservative belief: valid until the request was sent + TTL - margin. Under the
    /// claimant-deadline defect, counted from the swap's success (now) instead.
    fn believe(&self, token: u64, sent_ms: i64, ctx: &mut Ctx<'_>) {
        let from_ms = if self.claimant_deadline() {
            ctx.now().mono_ms
        } else {
            sent_ms
        };
        ctx.believe(token, self.info.valid_until_ms(from_ms));
    }

    fn fail(&mut self, error: impl Into<String>, ctx: &mut Ctx<'_>) {
        self.step = Step::Idle;
        ctx.complete(OpResult::Fail {
            error: error.into(),
        });
    }

    /// The record read came back: take it over if free or judged expired.
    fn judge(&mut self, seen: &crate::store::Versioned, ctx: &mut Ctx<'_>) {
        let now_ms = ctx.now().mono_ms;
        match self.candidate.observe(seen, ctx.now()) {
            Judgement::Held {
                holder,
                remaining_ms,
            } => {
                let error = format!("held by {holder}, judged alive for {remaining_ms} ms more");
                self.fail(error, ctx);
            }
            Judgement::Free | Judgement::Expired => {
                let expected = match self.takeover {
                    Takeover::CompareAndSwap => Some(seen.version),
                    Takeover::Unconditional => None,
                };
                let claim = self.swap(expected, Some(self.own_record(ctx)), Purpose::Acquire);
                let request = self.send_swap(claim, CLAIM_SENT, ctx);
                self.step = Step::Claiming {
                    request,
                    sent_ms: now_ms,
                };
            }
        }
    }
}

impl ClientProtocol for RecordClient {
    type Msg = RecordMessage;

    fn begin(&mut self, op: LockOp, ctx: &mut Ctx<'_>) {
        self.step = match op {
            LockOp::Acquire => {
                let get = RecordMessage::Get {
                    lock: self.info.lock.clone(),
                };
                Step::Reading(self.ask(get, ctx))
            }
            LockOp::Renew { token } => {
                let sent_ms = ctx.now().mono_ms;
                let renew = self.swap(
                    Some(self.record_version),
                    Some(self.own_record(ctx)),
                    Purpose::Renew,
                );
                Step::Renewing {
                    request: self.send_swap(renew, RENEWAL_SENT, ctx),
                    token,
                    sent_ms,
                }
            }
            LockOp::Release { .. } => {
                let clear = self.swap(Some(self.record_version), None, Purpose::Release);
                Step::Releasing(self.ask(clear, ctx))
            }
        };
    }

    fn on_reply(&mut self, request: RequestId, msg: RecordMessage, ctx: &mut Ctx<'_>) {
        let step = self.step;
        let current = match step {
            Step::Idle => None,
            Step::Reading(r) | Step::Releasing(r) => Some(r),
            Step::Claiming { request, .. } | Step::Renewing { request, .. } => Some(request),
        };
        if current != Some(request) {
            return; // an answer nobody waits for any more
        }
        ctx.cancel_timer(REPLY_DEADLINE);
        match (step, msg) {
            (Step::Reading(_), RecordMessage::GetReply(seen)) => self.judge(&seen, ctx),
            (Step::Claiming { sent_ms, .. }, RecordMessage::CasReply { outcome, .. }) => {
                match outcome {
                    CasOutcome::Swapped {
                        version,
                        acquired_version,
                    } => {
                        self.record_version = version;
                        self.step = Step::Idle;
                        ctx.complete(OpResult::Ok {
                            token: Some(acquired_version),
                        });
                        self.believe(acquired_version, sent_ms, ctx);
                    }
                    CasOutcome::Conflict { .. } => {
                        self.fail("another candidate swapped first", ctx)
                    }
                }
            }
            (Step::Renewing { token, sent_ms, .. }, RecordMessage::CasReply { outcome, .. }) => {
                match outcome {
                    CasOutcome::Swapped { version, .. } => {
                        self.record_version = version;
                        self.step = Step::Idle;
                        ctx.complete(OpResult::Ok { token: None });
                        self.believe(token, sent_ms, ctx);
                    }
                    CasOutcome::Conflict { .. } => {
                        self.fail("the record moved on: lease lost", ctx);
                        ctx.lost("told the lease is lost");
                    }
                }
            }
            (Step::Releasing(_), RecordMessage::CasReply { outcome, .. }) => match outcome {
                CasOutcome::Swapped { .. } => {
                    self.step = Step::Idle;
                    ctx.complete(OpResult::Ok { token: None });
                }
                CasOutcome::Conflict { .. } => {
                    self.fail("not the holder: the record moved on", ctx)
                }
            },
            (step, msg) => unreachable!("the store answered {step:?} with {msg:?}"),
        }
    }

    fn on_timer(&mut self, id: TimerId, ctx: &mut Ctx<'_>) {
        if id == REPLY_DEADLINE && self.step != Step::Idle {
            self.step = Step::Idle;
            ctx.complete(OpResult::Unknown {
                error: format!("no reply within {} ms", self.info.timeout_ms),
            });
        }
    }
}
