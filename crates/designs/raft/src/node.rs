//! A `lease-N` node of the consensus-backed lease service: the sans-IO [`Replica`] around
//! raft-rs as a [`LockNode`], ticking every `tick_ms`.
//!
//! The replica answers a client only if it leads; otherwise it redirects the client to the
//! leader it knows. Election timeouts come from the node's seeded stream
//! ([`NodeCtx::random_range`]), re-drawn at every change of term or role (raft-rs would draw
//! them from an unseeded one). The log survives a crash; the lease table is rebuilt by
//! replaying it. Every replica applies every entry, so each entry's events carry its log index
//! ([`ServiceEvent::log_index`]) and the history has them once, from the first replica to
//! apply it. An applied entry's `after` safepoint comes right after it, before the replies:
//! the node hands out what one drain applied one entry per [`LockNode::settle`] call.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use fencesim_design::{
    Clock, LockNode, NodeCtx, NodeStart, Origin, ServiceEvent, ServiceEventKind, TimerId,
};

use fencesim_lease::replicated::{
    Applied, ClientOp, ClientOutcome, Command, ReplicatedLeases, ReplicationPolicy,
};
use fencesim_lease::{AcquireOutcome, LeaseConfig, ReleaseOutcome, RenewOutcome};

use crate::host::{RaftCore, RaftLog, RaftTiming};
use crate::replica::Proposal;
use crate::RaftPeer;

/// This service's lease messages: the requests and answers every lease service shares, and
/// Raft's own.
type LeaseMessage = fencesim_lease::LeaseMessage<RaftPeer>;

/// The settings of a Raft replica node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaftNodeConfig {
    /// The safety knobs (K08's revocation term check, the leader change).
    pub policy: ReplicationPolicy,
    /// The longest TTL granted, ms of the expiry clock.
    pub max_ttl_ms: u64,
    /// The clock leases expire by (the replica stamps its proposals with it).
    pub expiry_clock: Clock,
    /// Simulated ms per Raft tick.
    pub tick_ms: u64,
    /// Ticks without a heartbeat before an election; each timeout is drawn from
    /// `election_ticks..2 * election_ticks`.
    pub election_ticks: usize,
    /// Ticks between heartbeats.
    pub heartbeat_ticks: usize,
    /// Ticks after Raft steps down during which the lessor still believes this replica leads.
    pub lessor_check_ticks: u64,
}

/// One Raft replica of the lease service.
pub struct RaftNode {
    core: RaftCore<ReplicatedLeases>,
    /// Client requests proposed here, by request id (unique in a run) -> their origin.
    requests: BTreeMap<u64, Origin>,
    /// (client, request) proposed here and not yet applied: the first application of each is
    /// answered (a duplicated request may be proposed and applied twice).
    pending: BTreeSet<(String, u64)>,
    /// The replies to what the last drain applied, sent once its entries are recorded.
    replies: Vec<(String, u64, ClientOutcome)>,
}

impl std::fmt::Debug for RaftNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let replica = self.core.replica();
        f.debug_struct("RaftNode")
            .field("term", &replica.term())
            .field("leader", &replica.leader())
            .finish_non_exhaustive()
    }
}

type Ctx<'a> = NodeCtx<'a, LeaseMessage, RaftLog>;

impl RaftNodeConfig {
    /// The Raft timing and the clock its lessor reads.
    pub fn timing(&self) -> RaftTiming {
        RaftTiming {
            tick_ms: self.tick_ms,
            election_ticks: self.election_ticks,
            heartbeat_ticks: self.heartbeat_ticks,
            lessor_check_ticks: self.lessor_check_ticks,
            clock: self.expiry_clock,
        }
    }
}

impl RaftNode {
    /// After any input: what the replica applied waits for `settle`, and so do the replies
    /// to what this replica proposed.
    fn take(&mut self, applied: Vec<(u64, Applied)>) {
        let replies: Vec<_> = applied
            .iter()
            .filter_map(|(_, applied)| self.reply_to(applied))
            .collect();
        self.core.queue(applied);
        if self.replies.is_empty() {
            self.replies = replies;
        } else {
            self.replies.extend(replies);
        }
    }

    /// A client's request: proposed if this replica leads, redirected otherwise.
    fn propose(&mut self, origin: &Origin, op: ClientOp, ctx: &mut Ctx<'_>) {
        let command = Command::Client {
            client: origin.from().to_owned(),
            request: origin.id(),
            op,
            now_ms: self.core.now_ms(ctx),
        };
        match self.core.propose(&command) {
            Proposal::Proposed => {
                self.requests.insert(origin.id(), origin.clone());
                self.pending.insert((origin.from().to_owned(), origin.id()));
            }
            Proposal::NotLeader { .. } => {
                let leader = self.core.leader_name();
                ctx.reply(origin, LeaseMessage::Redirect { leader });
            }
        }
    }

    /// The answer to a client's command applied here, if this replica proposed it and has not
    /// answered it yet.
    fn reply_to(&mut self, applied: &Applied) -> Option<(String, u64, ClientOutcome)> {
        let Applied::Client {
            client,
            request,
            outcome,
            ..
        } = applied
        else {
            return None;
        };
        let key = (client.clone(), *request);
        self.pending
            .remove(&key)
            .then(|| (key.0, key.1, outcome.clone()))
    }

    /// The history events of entry `index`, if it changed a lease.
    fn record(&self, index: u64, applied: &Applied, ctx: &mut Ctx<'_>) {
        let event = |kind, lock: &str, holder: &str, token, op| ServiceEvent {
            log_index: Some(index),
            ..ServiceEvent::new(kind, lock, holder, token, op)
        };
        match applied {
            Applied::Client {
                client,
                request,
                op: command,
                outcome,
                expired,
            } => {
                let op = self.requests.get(request).and_then(Origin::op);
                if let Some(lease) = expired {
                    // Ended by the command itself before it acted: on record, but with no
                    // safepoint of its own.
                    let (lock, holder) = (command.lock(), &lease.holder);
                    ctx.record_only(ServiceEvent {
                        expires_at_ms: Some(lease.expires_at_ms),
                        ..event(ServiceEventKind::Expire, lock, holder, lease.token, None)
                    });
                }
                let (kind, lock, token, expires_at_ms) = match (command, outcome) {
                    (
                        ClientOp::Acquire { lock, .. },
                        ClientOutcome::Acquire(AcquireOutcome::Granted {
                            token,
                            expires_at_ms,
                        }),
                    ) => (ServiceEventKind::Grant, lock, *token, Some(*expires_at_ms)),
                    (
                        ClientOp::Renew { lock, token },
                        ClientOutcome::Renew(RenewOutcome::Renewed { expires_at_ms }),
                    ) => (ServiceEventKind::Renew, lock, *token, Some(*expires_at_ms)),
                    (
                        ClientOp::Release { lock, token },
                        ClientOutcome::Release(ReleaseOutcome::Released),
                    ) => (ServiceEventKind::Release, lock, *token, None),
                    _ => return,
                };
                // The TTL a grant or renewal promised: the lease's own, while the table still
                // has this lease (the same token; a later entry may have ended it since).
                let ttl_ms = expires_at_ms.and_then(|_| {
                    let lease = self.core.replica().state().service().lease(lock)?;
                    (lease.token == token).then_some(lease.ttl_ms)
                });
                ctx.record(ServiceEvent {
                    expires_at_ms,
                    ttl_ms,
                    ..event(kind, lock, client, token, op)
                });
            }
            // A revocation of a lease not yet expired by the decider's own stamp is not an
            // expiry: it is recorded as what it is.
            Applied::Revoked {
                lock,
                lease,
                decided_at_ms,
            } => {
                let kind = if *decided_at_ms >= lease.expires_at_ms {
                    ServiceEventKind::Expire
                } else {
                    ServiceEventKind::Revoke
                };
                ctx.record(ServiceEvent {
                    expires_at_ms: Some(lease.expires_at_ms),
                    ..event(kind, lock, &lease.holder, lease.token, None)
                });
            }
            Applied::RevokeRefused { .. } | Applied::Promoted => {}
        }
    }

    /// Answer every request the last drain settled.
    fn reply_all(&mut self, ctx: &mut Ctx<'_>) {
        for (client, request, outcome) in std::mem::take(&mut self.replies) {
            let origin = self
                .requests
                .remove(&request)
                .unwrap_or_else(|| Origin::new(Arc::from(client.as_str()), request, None));
            let reply = match outcome {
                ClientOutcome::Acquire(o) => LeaseMessage::AcquireReply(o),
                ClientOutcome::Renew(o) => LeaseMessage::RenewReply(o),
                ClientOutcome::Release(o) => LeaseMessage::ReleaseReply(o),
            };
            ctx.reply(&origin, reply);
        }
    }
}

impl LockNode for RaftNode {
    type Msg = LeaseMessage;
    type Durable = RaftLog;
    type Config = RaftNodeConfig;

    fn start(config: &RaftNodeConfig, start: NodeStart<RaftLog>, ctx: &mut Ctx<'_>) -> Self {
        let leases = ReplicatedLeases::new(
            LeaseConfig {
                max_ttl_ms: config.max_ttl_ms,
            },
            config.policy,
        );
        RaftNode {
            core: RaftCore::start(config.timing(), start, leases, ctx),
            requests: BTreeMap::new(),
            pending: BTreeSet::new(),
            replies: Vec::new(),
        }
    }

    fn on_message(&mut self, origin: &Origin, msg: LeaseMessage, ctx: &mut Ctx<'_>) {
        let op = match msg {
            LeaseMessage::Peer(RaftPeer(m)) => {
                let applied = self.core.on_peer(*m, RaftPeer::wrap, ctx);
                return self.take(applied);
            }
            LeaseMessage::Acquire { lock, ttl_ms, .. } => ClientOp::Acquire { lock, ttl_ms },
            LeaseMessage::Renew { lock, token } => ClientOp::Renew { lock, token },
            LeaseMessage::Release { lock, token } => ClientOp::Release { lock, token },
            // Answers are for clients: a server drops them.
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

    /// One applied entry per call, so that each passes its safepoint before the next and
    /// before the replies; then the replies, and a fresh election timeout if the term or role
    /// changed.
    fn settle(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if let Some((index, applied)) = self.core.next_applied() {
            self.record(index, &applied, ctx);
            return true;
        }
        self.reply_all(ctx);
        self.core.settle_timeout(ctx);
        false
    }
}
