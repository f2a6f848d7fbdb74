//! The client side of the lease-record design (case K11): the client reads the lock's record,
//! judges by its own clock whether the holder is gone (the sans-IO [`Candidate`]) and takes the
//! record over by compare-and-swap; it renews and releases by swapping its own version. Each
//! step is still one Jepsen operation; the reads and swaps inside it are not operations of
//! their own.

use fencesim_history::{OpFn, OpType};
use fencesim_lease::lease_record::{
    Candidate, CasOutcome, ExpiryJudgement, Judgement, LeaseRecord,
};
use fencesim_scenario::{ExpiryJudgedBy, MessageKind, NodeEvent, Takeover};

use super::{Client, Dst};
use crate::message::Message;
use crate::nemesis::When;

impl Client {
    fn own_record(&self) -> LeaseRecord {
        LeaseRecord {
            holder: self.spec.name.clone(),
            duration_ms: self.spec.ttl_ms,
        }
    }

    fn candidate(&mut self, judged_by: ExpiryJudgedBy) -> &mut Candidate {
        let judgement = match judged_by {
            ExpiryJudgedBy::RecordedDuration => ExpiryJudgement::RecordedDuration,
            ExpiryJudgedBy::OwnDuration => ExpiryJudgement::OwnDuration,
        };
        let ttl_ms = self.spec.ttl_ms;
        self.candidate
            .get_or_insert_with(|| Candidate::new(judgement, ttl_ms))
    }

    /// Read the record, and take it over if it is free or judged expired; retry with backoff.
    /// Returns the token: the version the client took the record at.
    pub(super) async fn record_acquire(&mut self, judged_by: ExpiryJudgedBy) -> u64 {
        loop {
            self.safepoint(When::Before, NodeEvent::Acquire).await;
            let op = self.template(OpFn::Acquire, None, None);
            let invoke = self.world.op(op.record(OpType::Invoke));
            let get = Message::RecordGet {
                lock: self.spec.lock.clone(),
            };
            let seen = match self.exchange(Dst::Lease, &op, invoke, get).await {
                Some(Message::RecordGetReply(seen)) => seen,
                Some(other) => unreachable!("a record read answered with {other:?}"),
                None => {
                    self.backoff().await;
                    continue;
                }
            };
            let now_ms = self.world.mono_ms(&self.spec.name);
            let error = match self.candidate(judged_by).observe(&seen, now_ms) {
                Judgement::Held {
                    holder,
                    remaining_ms,
                } => format!("held by {holder}, judged alive for {remaining_ms} ms more"),
                Judgement::Free | Judgement::Expired => {
                    let sent_ms = self.world.mono_ms(&self.spec.name);
                    // K21's defect claims without comparing: an update by key.
                    let expected = match self.spec.takeover {
                        Takeover::CompareAndSwap => Some(seen.version),
                        Takeover::Unconditional => None,
                    };
                    let swap = self.cas(expected, Some(self.own_record()), MessageKind::Acquire);
                    let reply = self.exchange(Dst::Lease, &op, invoke, swap).await;
                    match reply {
                        Some(Message::RecordCasReply {
                            outcome:
                                CasOutcome::Swapped {
                                    version,
                                    acquired_version,
                                },
                            ..
                        }) => {
                            self.record_version = version;
                            self.complete(&op, OpType::Ok, |o| o.token = Some(acquired_version));
                            self.believe(acquired_version, sent_ms);
                            self.safepoint(When::After, NodeEvent::Grant).await;
                            return acquired_version;
                        }
                        Some(Message::RecordCasReply { .. }) => {
                            "another candidate swapped first".into()
                        }
                        Some(other) => unreachable!("a takeover swap answered with {other:?}"),
                        None => {
                            self.backoff().await;
                            continue;
                        }
                    }
                }
            };
            self.complete(&op, OpType::Fail, |o| o.error = Some(error));
            self.backoff().await;
        }
    }

    /// Renew by swapping in the client's own record again; false if the record moved on (the
    /// lease is lost).
    pub(super) async fn record_renew(&mut self, token: u64) -> bool {
        self.safepoint(When::Before, NodeEvent::Renew).await;
        let op = self.template(OpFn::Renew, Some(token), None);
        let sent_ms = self.world.mono_ms(&self.spec.name);
        let swap = self.cas(
            Some(self.record_version),
            Some(self.own_record()),
            MessageKind::Renew,
        );
        let kept = match self.call(Dst::Lease, &op, swap).await {
            Some(Message::RecordCasReply {
                outcome: CasOutcome::Swapped { version, .. },
                ..
            }) => {
                self.record_version = version;
                self.complete(&op, OpType::Ok, |_| {});
                self.believe(token, sent_ms);
                true
            }
            Some(Message::RecordCasReply { .. }) => {
                self.complete(&op, OpType::Fail, |o| {
                    o.error = Some("the record moved on: lease lost".into())
                });
                self.world
                    .end_belief(&self.spec.name, "told the lease is lost");
                false
            }
            Some(other) => unreachable!("a renewal swap answered with {other:?}"),
            None => true,
        };
        self.safepoint(When::After, NodeEvent::Renew).await;
        kept
    }

    /// Release by swapping in an empty record, if the record is still the client's.
    pub(super) async fn record_release(&mut self, token: u64) {
        self.safepoint(When::Before, NodeEvent::Release).await;
        self.world.end_belief(&self.spec.name, "released");
        let op = self.template(OpFn::Release, Some(token), None);
        let swap = self.cas(Some(self.record_version), None, MessageKind::Release);
        match self.call(Dst::Lease, &op, swap).await {
            Some(Message::RecordCasReply {
                outcome: CasOutcome::Swapped { .. },
                ..
            }) => self.complete(&op, OpType::Ok, |_| {}),
            Some(Message::RecordCasReply { .. }) => self.complete(&op, OpType::Fail, |o| {
                o.error = Some("not the holder: the record moved on".into())
            }),
            Some(other) => unreachable!("a release swap answered with {other:?}"),
            None => {}
        }
        self.safepoint(When::After, NodeEvent::Release).await;
    }

    fn cas(
        &self,
        expected_version: Option<u64>,
        record: Option<LeaseRecord>,
        purpose: MessageKind,
    ) -> Message {
        Message::RecordCas {
            lock: self.spec.lock.clone(),
            expected_version,
            record,
            purpose,
        }
    }
}
