//! The client of a lease service (the single service, primary-backup or Raft): one request per
//! lock operation to one of the service's nodes, following redirects to the leader within the
//! operation's time budget; a queued acquire waits for the service's later answer. The client
//! defect knobs of the incident cases are its settings ([`LeaseClientConfig`]).

use fencesim_design::{
    ClientCtx, ClientInfo, ClientProtocol, LockOp, OpResult, RequestId, TimerId,
};

use std::marker::PhantomData;

use crate::message::{Attempt, LeaseMessage, NoPeers, PeerMessage};
use crate::{AcquireOutcome, ReleaseOutcome, RenewOutcome};

/// A lease client's settings: the correct client has every flag `false`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LeaseClientConfig {
    /// K13: back under a new session, it takes a lock entry that bears its own name (left by
    /// its old session) for its own lock.
    pub reclaim_by_name: bool,
    /// K14: told its lease is lost, it keeps its role as if renewed.
    pub keep_role_when_lost: bool,
    /// K12: when a renewal goes unanswered, its validity countdown restarts from the moment it
    /// notices, rather than counting on from its last answered request.
    pub deadline_from_notice: bool,
    /// K09: after a renewal goes unanswered, its keepalive stream ends silently.
    pub stop_renewing_after_failure: bool,
    /// The service's maximum TTL, ms: a queued acquire waits twice that (plus its timeout) for
    /// the service's answer, long enough to outlive its own lease in the queue (K07).
    pub max_ttl_ms: u64,
    /// While its acquire blocks in the queue, it keeps its own lease alive every third of its
    /// TTL, as etcd's clientv3 session does while `Mutex.Lock` waits (etcd design). Without
    /// it a waiter renews nothing while blocked (the single service's queue, K07). The
    /// keepalive goes to every node, as an etcd follower forwards it to the leader, and its
    /// answer is not awaited.
    pub keepalive_while_queued: bool,
    /// The design's client safepoint passed when an acquire is queued (`Queued`), after the
    /// client has set its timers: the etcd design's `lock-blocked`, where a pause keeps a
    /// waiter from keeping its session alive. `None`: no safepoint (the single service's queue).
    pub queued_safepoint: Option<&'static str>,
}

/// The reply deadline of the request in flight (kept across redirects).
const REPLY: TimerId = TimerId(1);
/// The wait for a queued acquire's answer.
const QUEUE: TimerId = TimerId(2);
/// The pause after a redirect that names no leader.
const PAUSE: TimerId = TimerId(3);
/// The next keepalive of a queued acquire's lease (`keepalive_while_queued`).
const KEEPALIVE: TimerId = TimerId(4);

/// How long a client waits after a redirect that names no leader before trying the next node,
/// ms: an election is on.
const REDIRECT_PAUSE_MS: u64 = 50;

/// The operation a request serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Purpose {
    Acquire,
    Renew { token: u64 },
    Release { token: u64 },
}

/// Where the current operation is.
#[derive(Clone, Copy, Debug, Hash)]
enum Step {
    Idle,
    /// The request for `purpose` is in flight as `request`; sent first at `sent_ms`
    /// (monotonic).
    Asking {
        request: RequestId,
        purpose: Purpose,
        sent_ms: i64,
    },
    /// Redirected with no leader named: the request goes to the next node after a pause.
    Pausing {
        purpose: Purpose,
        sent_ms: i64,
    },
    /// Queued with `entry`, waiting for the service's answer to `attempt`.
    Queued {
        entry: u64,
        attempt: Attempt,
        sent_ms: i64,
    },
}

/// A client of a lease service whose nodes speak `P` among themselves (which it never sees).
#[derive(Clone, Debug, Hash)]
pub struct LeaseClient<P = NoPeers> {
    info: ClientInfo,
    config: LeaseClientConfig,
    /// Which of the service's nodes it asks.
    target: usize,
    attempt: Attempt,
    step: Step,
    /// The keepalives a queued acquire sent (`keepalive_while_queued`): request and send
    /// time (monotonic ms).
    keepalives: Vec<(RequestId, i64)>,
    /// The send time of the latest keepalive the service answered with a renewal while the
    /// acquire was queued: its lease is good for a TTL from then.
    alive_from_ms: Option<i64>,
    /// A queued acquire's second answer that arrived before the reply that queued it.
    early: Option<(u64, Attempt, AcquireOutcome)>,
    peers: PhantomData<P>,
}

type Ctx<'a, P> = ClientCtx<'a, LeaseMessage<P>>;

impl<P: PeerMessage> LeaseClient<P> {
    /// A client `info` with `config`.
    pub fn new(info: ClientInfo, config: LeaseClientConfig) -> Self {
        let attempt = Attempt {
            incarnation: info.incarnation,
            number: 0,
        };
        LeaseClient {
            info,
            config,
            target: 0,
            attempt,
            step: Step::Idle,
            keepalives: Vec::new(),
            alive_from_ms: None,
            early: None,
            peers: PhantomData,
        }
    }

    fn next_node(&mut self) {
        self.target = (self.target + 1) % self.info.service_nodes.len();
    }

    /// The request for `purpose` (made again for a redirect, rather than kept: most requests
    /// are sent once).
    fn message(&self, purpose: Purpose) -> LeaseMessage<P> {
        let lock = self.info.lock.clone();
        match purpose {
            Purpose::Acquire => LeaseMessage::Acquire {
                lock,
                ttl_ms: self.info.ttl_ms,
                attempt: self.attempt,
            },
            Purpose::Renew { token } => LeaseMessage::Renew { lock, token },
            Purpose::Release { token } => LeaseMessage::Release { lock, token },
        }
    }

    /// Send the request for `purpose` to the current node (the reply deadline is already set).
    fn ask(&mut self, purpose: Purpose, sent_ms: i64, ctx: &mut Ctx<'_, P>) {
        let request = ctx.request(self.target, self.message(purpose));
        self.step = Step::Asking {
            request,
            purpose,
            sent_ms,
        };
    }

    /// The conservative belief: valid until `from_ms` + TTL - margin (monotonic clock).
    fn believe(&self, token: u64, from_ms: i64, ctx: &mut Ctx<'_, P>) {
        ctx.believe(token, self.info.valid_until_ms(from_ms));
    }

    fn complete(&mut self, result: OpResult, ctx: &mut Ctx<'_, P>) {
        self.step = Step::Idle;
        ctx.complete(result);
    }

    fn fail(&mut self, error: String, ctx: &mut Ctx<'_, P>) {
        self.complete(OpResult::Fail { error }, ctx);
    }

    fn acquired(&mut self, token: u64, sent_ms: i64, ctx: &mut Ctx<'_, P>) {
        self.complete(OpResult::Ok { token: Some(token) }, ctx);
        self.believe(token, sent_ms, ctx);
    }

    fn on_acquire(&mut self, outcome: AcquireOutcome, sent_ms: i64, ctx: &mut Ctx<'_, P>) {
        match outcome {
            AcquireOutcome::Granted { token, .. } => self.acquired(token, sent_ms, ctx),
            AcquireOutcome::Held {
                holder,
                token,
                expires_at_ms,
            } => {
                let own = holder == self.info.name && self.info.incarnation > 1;
                if self.config.reclaim_by_name && own {
                    // K13: back under a new session, it finds the entry its old session left
                    // and takes the lock for its own.
                    self.acquired(token, sent_ms, ctx);
                } else {
                    self.fail(held_by(&holder, expires_at_ms), ctx);
                }
            }
            AcquireOutcome::Recovering { until_ms } => {
                self.fail(refusal("service recovering until ", until_ms), ctx);
            }
            AcquireOutcome::Queued { token: entry } => {
                // Blocked in the lock's queue (K07): the service answers when the client's
                // turn comes; meanwhile its lease is kept alive only by an etcd session.
                ctx.set_timer(QUEUE, self.queue_wait_ms());
                if self.config.keepalive_while_queued {
                    ctx.set_timer(KEEPALIVE, self.keepalive_ms());
                }
                if let Some(point) = self.config.queued_safepoint {
                    ctx.safepoint(point);
                }
                self.step = Step::Queued {
                    entry,
                    attempt: self.attempt,
                    sent_ms,
                };
                if let Some((e, a, outcome)) = self.early.take() {
                    if (e, a) == (entry, self.attempt) {
                        self.on_queue_answer(entry, sent_ms, outcome, ctx);
                    }
                }
            }
            AcquireOutcome::WaiterExpired { .. } => {
                unreachable!("a lease service answers a waiter's expiry only in the queue")
            }
        }
    }

    /// Long enough to outlive its own lease in the queue (a blocking acquire has no deadline of
    /// its own: K07), short enough not to wait out a recovery window on a service whose crash
    /// forgot the queue.
    fn queue_wait_ms(&self) -> u64 {
        2 * self.config.max_ttl_ms + self.info.timeout_ms
    }

    /// A keepalive's answer while the acquire is queued: a renewal proves the lease good for a
    /// TTL from the keepalive's send time; a follower's redirect or a refusal proves nothing.
    fn on_keepalive_reply(&mut self, request: RequestId, reply: LeaseMessage<P>) {
        let Some(&(_, sent_ms)) = self.keepalives.iter().find(|(id, _)| *id == request) else {
            return;
        };
        if let LeaseMessage::RenewReply(RenewOutcome::Renewed { .. }) = reply {
            self.alive_from_ms = Some(self.alive_from_ms.map_or(sent_ms, |t| t.max(sent_ms)));
        }
    }

    /// Delete the key of a queued acquire given up (`entry`), at every node, not waiting for
    /// an answer.
    fn abandon(&mut self, entry: u64, ctx: &mut Ctx<'_, P>) {
        for node in 0..self.info.service_nodes.len() {
            let lock = self.info.lock.clone();
            ctx.send(node, LeaseMessage::Release { lock, token: entry });
        }
    }

    /// Forget the queued acquire's keepalives; returns the send time of the latest answered.
    fn leave_queue(&mut self) -> Option<i64> {
        self.keepalives.clear();
        self.alive_from_ms.take()
    }

    /// The service's second answer to the queued acquire with `entry`, sent at `sent_ms`.
    fn on_queue_answer(
        &mut self,
        entry: u64,
        sent_ms: i64,
        outcome: AcquireOutcome,
        ctx: &mut Ctx<'_, P>,
    ) {
        ctx.cancel_timer(QUEUE);
        ctx.cancel_timer(KEEPALIVE);
        let alive_from_ms = self.leave_queue();
        match outcome {
            AcquireOutcome::Granted { token, .. } => {
                // The conservative deadline counts from the request, not the grant, or from
                // the latest keepalive the service answered while the acquire waited.
                ctx.renew_now();
                let from_ms = alive_from_ms.map_or(sent_ms, |alive| alive.max(sent_ms));
                self.acquired(token, from_ms, ctx);
            }
            _waiter_expired => {
                let error = format!("waited with token {entry} until its own lease expired");
                self.fail(error, ctx);
            }
        }
    }

    /// A queued acquire's keepalive interval: a third of its TTL, as etcd's clientv3 sends
    /// them.
    fn keepalive_ms(&self) -> u64 {
        (self.info.ttl_ms / 3).max(1)
    }

    fn on_renew(&mut self, outcome: RenewOutcome, token: u64, sent_ms: i64, ctx: &mut Ctx<'_, P>) {
        match outcome {
            RenewOutcome::Renewed { .. } => {
                self.complete(OpResult::Ok { token: None }, ctx);
                self.believe(token, sent_ms, ctx);
            }
            RenewOutcome::Lost => {
                self.fail("lease lost".into(), ctx);
                if self.config.keep_role_when_lost {
                    // K14: told its lease is gone, it keeps its role as if renewed.
                    self.believe(token, sent_ms, ctx);
                } else {
                    ctx.lost("told the lease is lost");
                }
            }
        }
    }

    /// A renewal got no answer: normally nothing changes (the deadline still counts from the
    /// last answered request, and the next renewal tries again). The defect knobs model two
    /// real client bugs here.
    fn renewal_unanswered(&mut self, token: u64, ctx: &mut Ctx<'_, P>) {
        if self.config.deadline_from_notice {
            // K12: the countdown restarts when the silence is noticed.
            let now_ms = ctx.now().mono_ms;
            self.believe(token, now_ms, ctx);
        }
        if self.config.stop_renewing_after_failure {
            // K09: the keepalive stream is gone, and nobody says so.
            ctx.stop_renewing();
        }
    }
}

impl<P: PeerMessage> ClientProtocol for LeaseClient<P> {
    type Msg = LeaseMessage<P>;

    fn begin(&mut self, op: LockOp, ctx: &mut Ctx<'_, P>) {
        self.early = None;
        let purpose = match op {
            LockOp::Acquire => {
                self.attempt.number += 1;
                Purpose::Acquire
            }
            LockOp::Renew { token } => Purpose::Renew { token },
            LockOp::Release { token } => Purpose::Release { token },
        };
        ctx.set_timer(REPLY, self.info.timeout_ms);
        let sent_ms = ctx.now().mono_ms;
        self.ask(purpose, sent_ms, ctx);
    }

    fn on_reply(&mut self, request: RequestId, reply: LeaseMessage<P>, ctx: &mut Ctx<'_, P>) {
        if let Step::Queued { .. } = self.step {
            return self.on_keepalive_reply(request, reply);
        }
        let Step::Asking {
            request: waiting,
            purpose,
            sent_ms,
        } = self.step
        else {
            return;
        };
        if waiting != request {
            return; // an answer nobody waits for any more
        }
        if let LeaseMessage::Redirect { leader } = reply {
            let nodes = &self.info.service_nodes;
            match leader.and_then(|l| nodes.iter().position(|n| *n == l)) {
                Some(hinted) => {
                    self.target = hinted;
                    self.ask(purpose, sent_ms, ctx);
                }
                None => {
                    // No leader known yet (an election is on): give it a moment, within budget.
                    ctx.set_timer(PAUSE, REDIRECT_PAUSE_MS);
                    self.step = Step::Pausing { purpose, sent_ms };
                }
            }
            return;
        }
        ctx.cancel_timer(REPLY);
        match (purpose, reply) {
            (Purpose::Acquire, LeaseMessage::AcquireReply(outcome)) => {
                self.on_acquire(outcome, sent_ms, ctx)
            }
            (Purpose::Renew { token }, LeaseMessage::RenewReply(outcome)) => {
                self.on_renew(outcome, token, sent_ms, ctx)
            }
            (Purpose::Release { .. }, LeaseMessage::ReleaseReply(outcome)) => match outcome {
                ReleaseOutcome::Released => self.complete(OpResult::Ok { token: None }, ctx),
                ReleaseOutcome::NotHolder => self.fail("not the holder".into(), ctx),
            },
            (purpose, reply) => unreachable!("{purpose:?} answered with {reply:?}"),
        }
    }

    fn on_message(&mut self, _from: &str, msg: LeaseMessage<P>, ctx: &mut Ctx<'_, P>) {
        let LeaseMessage::QueueAnswer {
            entry: e,
            attempt: a,
            outcome,
        } = msg
        else {
            return;
        };
        match self.step {
            Step::Queued {
                entry,
                attempt,
                sent_ms,
            } if (e, a) == (entry, attempt) => self.on_queue_answer(entry, sent_ms, outcome, ctx),
            // The answer overtook the reply that queues the acquire (two messages, each with
            // its own latency): kept for that reply.
            Step::Asking {
                purpose: Purpose::Acquire,
                ..
            } if a == self.attempt => self.early = Some((e, a, outcome)),
            // Meant for an earlier entry or attempt.
            _ => {}
        }
    }

    fn on_timer(&mut self, id: TimerId, ctx: &mut Ctx<'_, P>) {
        match (id, self.step) {
            (REPLY, Step::Asking { purpose, .. } | Step::Pausing { purpose, .. }) => {
                ctx.cancel_timer(PAUSE);
                self.next_node();
                let error = format!("no reply within {} ms", self.info.timeout_ms);
                self.complete(OpResult::Unknown { error }, ctx);
                if let Purpose::Renew { token } = purpose {
                    self.renewal_unanswered(token, ctx);
                }
            }
            (PAUSE, Step::Pausing { purpose, sent_ms }) => {
                self.next_node();
                self.ask(purpose, sent_ms, ctx);
            }
            (KEEPALIVE, Step::Queued { entry, .. }) => {
                let sent_ms = ctx.now().mono_ms;
                for node in 0..self.info.service_nodes.len() {
                    let lock = self.info.lock.clone();
                    let request = ctx.request(node, LeaseMessage::Renew { lock, token: entry });
                    self.keepalives.push((request, sent_ms));
                }
                ctx.set_timer(KEEPALIVE, self.keepalive_ms());
            }
            (QUEUE, Step::Queued { entry, .. }) => {
                ctx.cancel_timer(KEEPALIVE);
                self.leave_queue();
                if self.config.keepalive_while_queued {
                    // Giving up, etcd's Mutex deletes its own key, which would otherwise block
                    // every later caller until its lease ran out.
                    self.abandon(entry, ctx);
                }
                let error = format!("no answer within {} ms in the queue", self.queue_wait_ms());
                self.complete(OpResult::Unknown { error }, ctx);
            }
            _ => {}
        }
    }
}

/// The refusal of an acquire whose lock is held: `held by client-2 until 5012 ms`.
///
/// Written by hand rather than with `format!`: a client records one per refused acquire, the
/// most frequent text of a run, and the formatting machinery cost 2.7% of a random-nemesis
/// seed's instructions (docs/performance.md). The bytes are `format!`'s.
fn held_by(holder: &str, expires_at_ms: i64) -> String {
    let mut text = String::with_capacity(40 + holder.len());
    text.push_str("held by ");
    text.push_str(holder);
    text.push_str(" until ");
    push_ms(&mut text, expires_at_ms);
    text
}

/// `prefix` then `at_ms` in milliseconds (`service recovering until 812 ms`), as
/// [`held_by`] writes.
fn refusal(prefix: &str, at_ms: i64) -> String {
    let mut text = String::with_capacity(prefix.len() + 24);
    text.push_str(prefix);
    push_ms(&mut text, at_ms);
    text
}

fn push_ms(text: &mut String, ms: i64) {
    text.push_str(itoa::Buffer::new().format(ms));
    text.push_str(" ms");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_texts_are_the_bytes_format_writes() {
        for ms in [0, 7, -3, 5012, i64::MAX, i64::MIN] {
            assert_eq!(
                held_by("client-2", ms),
                format!("held by client-2 until {ms} ms")
            );
            assert_eq!(
                refusal("service recovering until ", ms),
                format!("service recovering until {ms} ms")
            );
        }
    }
}
