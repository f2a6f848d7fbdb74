//! An `etcd-N` member: fencesim-raft's [`RaftCore`] applying an [`EtcdStore`], serving the
//! lease clients' requests as etcd's lock API serves them.
//!
//! The member a client asks proposes its request if it leads, and redirects the client to the
//! leader otherwise (etcd forwards a follower's proposals itself; the client's redirect costs one
//! round trip more and changes nothing else). A blocked lock call is answered later, when the
//! entry that brings its turn is applied, by every member that applies it (etcd's `v3lock`
//! waits on a watch of the member the client asked; a real client whose member dies calls again
//! with the same session and finds its own key, which the answer from every member stands
//! for).
//!
//! Every member applies every entry, so each event carries its log index and the history has
//! it once, from the first member to apply it; an entry's `after` safepoints come before the
//! answers, as in the Raft lease service.

use std::collections::BTreeMap;
use std::sync::Arc;

use fencesim_design::{
    LockNode, NodeCtx, NodeStart, Origin, ServiceEvent, ServiceEventKind, TimerId,
};
use fencesim_lease::{AcquireOutcome, ReleaseOutcome, RenewOutcome};
use fencesim_raft::replica::Proposal;
use fencesim_raft::{RaftCore, RaftLog, RaftPeer, RaftTiming};

use crate::store::{Applied, AppliedKind, Command, EtcdPolicy, EtcdStore, Outcome, Request};

/// The etcd design's messages: the lease requests and answers every lease service shares,
/// and Raft's own between members.
pub type EtcdMessage = fencesim_lease::LeaseMessage<RaftPeer>;

/// The settings of an etcd member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EtcdNodeConfig {
    /// The store's knobs.
    pub policy: EtcdPolicy,
    /// The Raft timing, and the clock the lessor reads (monotonic, as etcd's).
    pub timing: RaftTiming,
}

/// One answer to send once the entries applied with it are recorded.
#[derive(Clone, Debug)]
enum Answer {
    /// The reply to a request.
    Reply(Origin, EtcdMessage),
    /// A blocked lock call's later answer.
    Notify(Origin, EtcdMessage),
}

/// One etcd member.
pub struct EtcdNode {
    core: RaftCore<EtcdStore>,
    /// Requests proposed here and not yet answered, by request id (unique in a run).
    asked: BTreeMap<u64, Origin>,
    /// Lock calls proposed here that block, by request id.
    blocked: BTreeMap<u64, Origin>,
    /// The answers the last drain's entries gave, sent once those entries are recorded.
    answers: Vec<Answer>,
}

impl std::fmt::Debug for EtcdNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let replica = self.core.replica();
        f.debug_struct("EtcdNode")
            .field("term", &replica.term())
            .field("leader", &replica.leader())
            .finish_non_exhaustive()
    }
}

type Ctx<'a> = NodeCtx<'a, EtcdMessage, RaftLog>;

impl EtcdNode {
    /// A client's request: proposed if this member leads, redirected otherwise.
    fn propose(&mut self, origin: &Origin, op: Request, ctx: &mut Ctx<'_>) {
        let command = Command::Client {
            client: origin.from().to_owned(),
            request: origin.id(),
            op,
            now_ms: self.core.now_ms(ctx),
        };
        match self.core.propose(&command) {
            Proposal::Proposed => {
                self.asked.insert(origin.id(), origin.clone());
            }
            Proposal::NotLeader { .. } => {
                let leader = self.core.leader_name();
                ctx.reply(origin, EtcdMessage::Redirect { leader });
            }
        }
    }

    /// What one drain applied: recorded by the settles that follow, then answered.
    fn take(&mut self, applied: Vec<(u64, Applied)>) {
        for (_, entry) in &applied {
            self.answer(entry);
        }
        self.core.queue(applied);
    }

    /// The answers an applied entry gives to requests proposed here (once each: a duplicated
    /// request may be applied twice).
    fn answer(&mut self, entry: &Applied) {
        if let AppliedKind::Client {
            request, outcome, ..
        } = &entry.what
        {
            if let Some(asked) = self.asked.remove(request) {
                let reply = match outcome.clone() {
                    Outcome::Lock(o) => {
                        if matches!(o, AcquireOutcome::Queued { .. }) {
                            self.blocked.insert(*request, asked.clone());
                        }
                        EtcdMessage::AcquireReply(o)
                    }
                    Outcome::KeepAlive(o) => EtcdMessage::RenewReply(o),
                    Outcome::Unlock(o) => EtcdMessage::ReleaseReply(o),
                };
                self.answers.push(Answer::Reply(asked, reply));
            }
        }
        // Every member answers every turn it applies, not only the one the call was proposed
        // to: a real client whose member dies gets an error at once and calls again with the
        // same session, finding its own key; here the answer comes from the members alive.
        // The client takes the first answer naming its attempt and ignores the rest.
        for turn in &entry.turns {
            let (AcquireOutcome::Granted { token, .. } | AcquireOutcome::WaiterExpired { token }) =
                turn.outcome
            else {
                continue;
            };
            let origin = match self.blocked.remove(&turn.request) {
                Some(origin) => origin,
                None => Origin::new(Arc::from(turn.client.as_str()), turn.request, None),
            };
            let answer = EtcdMessage::QueueAnswer {
                entry: token,
                attempt: turn.attempt,
                outcome: turn.outcome.clone(),
            };
            self.answers.push(Answer::Notify(origin, answer));
        }
    }

    /// The history events of entry `index`: what the request did, the locks it ended, the
    /// blocked calls it granted.
    fn record(&self, index: u64, entry: &Applied, ctx: &mut Ctx<'_>) {
        let event = |kind, lock: &str, holder: &str, token, op| ServiceEvent {
            log_index: Some(index),
            ..ServiceEvent::new(kind, lock, holder, token, op)
        };
        if let AppliedKind::Client {
            client,
            request,
            op,
            outcome,
            ttl_ms,
            held,
        } = &entry.what
        {
            let recorded = match (op, outcome) {
                (
                    Request::Lock { lock, .. },
                    Outcome::Lock(AcquireOutcome::Granted {
                        token,
                        expires_at_ms,
                    }),
                ) => Some((ServiceEventKind::Grant, lock, *token, Some(*expires_at_ms))),
                // A blocked caller's keepalive renews no lock.
                (
                    Request::KeepAlive { lock, token },
                    Outcome::KeepAlive(RenewOutcome::Renewed { expires_at_ms }),
                ) if *held => Some((ServiceEventKind::Renew, lock, *token, Some(*expires_at_ms))),
                // A blocked call given up deletes its key, but ends no lock.
                (Request::Unlock { lock, token }, Outcome::Unlock(ReleaseOutcome::Released))
                    if *held =>
                {
                    Some((ServiceEventKind::Release, lock, *token, None))
                }
                _ => None,
            };
            if let Some((kind, lock, token, expires_at_ms)) = recorded {
                let op = self.recorded_op(*request);
                ctx.record(ServiceEvent {
                    expires_at_ms,
                    ttl_ms: *ttl_ms,
                    ..event(kind, lock, client, token, op)
                });
            }
        }
        for ended in &entry.ended {
            ctx.record(ServiceEvent {
                expires_at_ms: Some(ended.expires_at_ms),
                ..event(
                    ServiceEventKind::Expire,
                    &ended.lock,
                    &ended.holder,
                    ended.token,
                    None,
                )
            });
        }
        for turn in &entry.turns {
            let AcquireOutcome::Granted {
                token,
                expires_at_ms,
            } = turn.outcome
            else {
                continue;
            };
            let op = self.recorded_op(turn.request);
            ctx.record(ServiceEvent {
                expires_at_ms: Some(expires_at_ms),
                ttl_ms: turn.lapsed_at_ms.is_none().then_some(turn.ttl_ms),
                ..event(ServiceEventKind::Grant, &turn.lock, &turn.client, token, op)
            });
            if let Some(lapsed_at_ms) = turn.lapsed_at_ms {
                // Granted with a lease that had already expired (etcd 3.4.3): it ends at once,
                // as the service's own record says.
                ctx.record(ServiceEvent {
                    expires_at_ms: Some(lapsed_at_ms),
                    detail: Some("its session lease had expired while it waited".into()),
                    ..event(
                        ServiceEventKind::Expire,
                        &turn.lock,
                        &turn.client,
                        token,
                        None,
                    )
                });
            }
        }
    }

    /// The history index of the invoke that `request` was, if it was proposed here: its
    /// answer waits among `answers` (given when its entry was applied, before the record).
    fn recorded_op(&self, request: u64) -> Option<u64> {
        self.answers.iter().find_map(|answer| match answer {
            Answer::Reply(origin, _) | Answer::Notify(origin, _) if origin.id() == request => {
                origin.op()
            }
            _ => None,
        })
    }

    /// Send every answer the last drain's entries gave.
    fn answer_all(&mut self, ctx: &mut Ctx<'_>) {
        for answer in std::mem::take(&mut self.answers) {
            match answer {
                Answer::Reply(origin, msg) => ctx.reply(&origin, msg),
                Answer::Notify(origin, msg) => ctx.notify(&origin, msg),
            }
        }
    }
}

impl LockNode for EtcdNode {
    type Msg = EtcdMessage;
    type Durable = RaftLog;
    type Config = EtcdNodeConfig;

    fn start(config: &EtcdNodeConfig, start: NodeStart<RaftLog>, ctx: &mut Ctx<'_>) -> Self {
        let store = EtcdStore::new(config.policy);
        EtcdNode {
            core: RaftCore::start(config.timing, start, store, ctx),
            asked: BTreeMap::new(),
            blocked: BTreeMap::new(),
            answers: Vec::new(),
        }
    }

    fn on_message(&mut self, origin: &Origin, msg: EtcdMessage, ctx: &mut Ctx<'_>) {
        let op = match msg {
            EtcdMessage::Peer(RaftPeer(m)) => {
                let applied = self.core.on_peer(*m, RaftPeer::wrap, ctx);
                return self.take(applied);
            }
            EtcdMessage::Acquire {
                lock,
                ttl_ms,
                attempt,
            } => Request::Lock {
                lock,
                ttl_ms,
                attempt,
            },
            EtcdMessage::Renew { lock, token } => Request::KeepAlive { lock, token },
            EtcdMessage::Release { lock, token } => Request::Unlock { lock, token },
            // Answers are for clients: a member drops them.
            _ => return,
        };
        self.propose(origin, op, ctx);
        let applied = self.core.drain(RaftPeer::wrap, ctx);
        self.take(applied);
    }

    fn on_timer(&mut self, id: TimerId, ctx: &mut Ctx<'_>) {
        if let Some(applied) = self.core.on_timer(id, RaftPeer::wrap, ctx) {
            self.take(applied);
        }
    }

    /// One applied entry per call, so that each passes its safepoints before the next and
    /// before the answers; then the answers, and a fresh election timeout if the term or role
    /// changed.
    fn settle(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if let Some((index, entry)) = self.core.next_applied() {
            self.record(index, &entry, ctx);
            return true;
        }
        self.answer_all(ctx);
        self.core.settle_timeout(ctx);
        false
    }
}
