//! A `lease-N` node: one replica of the consensus-backed lease service (the sans-IO
//! [`Replica`] around raft-rs) behind a mailbox, ticking every `TICK_MS`.
//!
//! The replica answers a client only if it leads; otherwise it redirects the client to the
//! leader it knows. Election timeouts come from this node's seeded generator, re-drawn at every
//! change of term or role (raft-rs would draw them from an unseeded one). The log survives a
//! crash; the lease table is rebuilt by replaying it. The history records each log entry's
//! effect once, when the first replica applies it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fencesim_history::{Event, EventKind};
use fencesim_lease::raft_replica::{Output, Proposal, Replica, ReplicaConfig};
use fencesim_lease::replicated::{
    Applied, ClientOp, ClientOutcome, LeaderChange, ReplicationPolicy,
};
use fencesim_lease::{AcquireOutcome, LeaseMessage, ReleaseOutcome, RenewOutcome};
use fencesim_scenario::{LeaderChangeMode, NodeEvent};
use rand::Rng;

use crate::message::Message;
use crate::nemesis::{Nemesis, When};
use crate::recorder::true_ns;
use crate::seeds::{self, Stream};
use crate::transport::Envelope;
use crate::world::World;

/// Simulated ms per Raft tick.
pub const TICK_MS: u64 = 100;
/// Ticks without a heartbeat before an election (so elections start after 1-2 s).
pub const ELECTION_TICKS: usize = 10;
/// Ticks between heartbeats.
pub const HEARTBEAT_TICKS: usize = 3;
/// Ticks after Raft steps down during which the lessor still believes this replica leads.
pub const LESSOR_CHECK_TICKS: u64 = 10;

/// Replica `index` (0-based; node `lease-{index+1}`); madsim runs it again on every restart.
pub(crate) async fn run(world: Arc<World>, index: usize) {
    let name = format!("lease-{}", index + 1);
    let incarnation = world.start(&name);
    let mut rng = seeds::rng(
        world.seed,
        Stream::Replica {
            index: index as u32,
            incarnation,
        },
    );
    let peers: Vec<u64> = (1..=world.scenario.lock_service.replicas).collect();
    let spec = &world.scenario.lock_service;
    let policy = ReplicationPolicy {
        revoke_term_check: spec.revoke_term_check,
        leader_change: match spec.leader_change {
            LeaderChangeMode::Extend => LeaderChange::Extend,
            LeaderChangeMode::None => LeaderChange::None,
        },
    };
    let config = ReplicaConfig {
        id: index as u64 + 1,
        peers: peers.clone(),
        election_tick: ELECTION_TICKS,
        heartbeat_tick: HEARTBEAT_TICKS,
        max_ttl_ms: spec.max_ttl_ms,
        policy,
        lessor_check_ticks: LESSOR_CHECK_TICKS,
    };
    let storage = world.raft_storage(&name, &peers);
    let mut replica = Replica::new(config, storage).expect("a valid Raft configuration");
    let mut node = ReplicaNode {
        world: Arc::clone(&world),
        name,
        requests: BTreeMap::new(),
    };
    let inbox = world.inbox(&node.name);
    let tick = Duration::from_millis(TICK_MS);
    let mut next_tick = true_ns() + TICK_MS * 1_000_000;
    loop {
        if replica.take_timeout_due() {
            replica.set_election_timeout(rng.gen_range(ELECTION_TICKS..2 * ELECTION_TICKS));
        }
        let wait = Duration::from_nanos(next_tick.saturating_sub(true_ns()));
        match crate::timer::timeout(wait, inbox.recv()).await {
            Ok(Ok(env)) => node.receive(&mut replica, *env).await,
            Ok(Err(_closed)) => return,
            Err(_tick_due) => {
                replica.tick(node.now_ms());
                next_tick = true_ns() + tick.as_nanos() as u64;
            }
        }
        let out = replica.drain(node.now_ms());
        node.dispatch(out).await;
    }
}

struct ReplicaNode {
    world: Arc<World>,
    name: String,
    /// Client requests proposed here: (client, request id) -> the invoke's history index.
    requests: BTreeMap<(String, u64), Option<u64>>,
}

impl ReplicaNode {
    /// This replica's expiry clock, local ms (its stamp on the commands it proposes).
    fn now_ms(&self) -> i64 {
        self.world.expiry_now_ms(&self.name)
    }

    async fn receive(&mut self, replica: &mut Replica, env: Envelope) {
        let (op, event) = match &env.body {
            Message::Raft(_) => {
                let Message::Raft(m) = env.body else {
                    unreachable!("matched above")
                };
                return replica.step(*m);
            }
            body => match body.as_lease() {
                Some(LeaseMessage::Acquire { lock, ttl_ms, .. }) => {
                    let (lock, ttl_ms) = (lock.clone(), *ttl_ms);
                    (ClientOp::Acquire { lock, ttl_ms }, NodeEvent::Acquire)
                }
                Some(LeaseMessage::Renew { lock, token }) => {
                    let (lock, token) = (lock.clone(), *token);
                    (ClientOp::Renew { lock, token }, NodeEvent::Renew)
                }
                Some(LeaseMessage::Release { lock, token }) => {
                    let (lock, token) = (lock.clone(), *token);
                    (ClientOp::Release { lock, token }, NodeEvent::Release)
                }
                // Clock signals need nothing: the clock is read at every tick and proposal.
                _ => return,
            },
        };
        Nemesis::safepoint(&self.world, &self.name, When::Before, event).await;
        match replica.propose(&env.src, env.id, op, self.now_ms()) {
            Proposal::Proposed => {
                self.requests.insert((env.src.to_string(), env.id), env.op);
            }
            Proposal::NotLeader { leader } => {
                let leader = leader.map(|id| format!("lease-{id}"));
                self.world.net.send(
                    &self.name,
                    &env.src,
                    Some(env.id),
                    env.op,
                    Message::lease(LeaseMessage::Redirect { leader }),
                );
            }
        }
    }

    async fn dispatch(&mut self, out: Output) {
        for m in out.messages {
            let to = format!("lease-{}", m.get_to());
            self.world
                .net
                .send(&self.name, &to, None, None, Message::Raft(Box::new(m)));
        }
        if let Some(term) = out.became_leader {
            self.world.set_leader(term, &self.name);
            self.world.event(Event {
                node: self.name.as_str().into(),
                detail: Some(format!("term {term}")),
                ..Event::new(EventKind::Leader)
            });
        }
        for (index, applied) in out.applied {
            if self.world.first_to_apply(index) {
                if let Some(event) = self.record(&applied) {
                    Nemesis::safepoint(&self.world, &self.name, When::After, event).await;
                }
            }
        }
        for (client, request, outcome) in out.replies {
            let op = self.requests.remove(&(client.clone(), request)).flatten();
            let reply = match outcome {
                ClientOutcome::Acquire(o) => Message::lease(LeaseMessage::AcquireReply(o)),
                ClientOutcome::Renew(o) => Message::lease(LeaseMessage::RenewReply(o)),
                ClientOutcome::Release(o) => Message::lease(LeaseMessage::ReleaseReply(o)),
            };
            self.world
                .net
                .send(&self.name, &client, Some(request), op, reply);
        }
    }

    /// The history event for an applied entry, if it changed a lease; returns its node event.
    fn record(&self, applied: &Applied) -> Option<NodeEvent> {
        let (kind, lock, holder, token, expires_at_ms, op, event) = match applied {
            Applied::Client {
                client,
                request,
                op: request_op,
                outcome,
                expired,
            } => {
                let op = self
                    .requests
                    .get(&(client.clone(), *request))
                    .copied()
                    .flatten();
                if let Some(lease) = expired {
                    self.world.event(Event {
                        node: self.name.as_str().into(),
                        lock: Some(request_op.lock().into()),
                        holder: Some(lease.holder.as_str().into()),
                        token: Some(lease.token),
                        expires_at_ms: Some(lease.expires_at_ms),
                        ..Event::new(EventKind::Expire)
                    });
                }
                match (request_op, outcome) {
                    (
                        ClientOp::Acquire { lock, .. },
                        ClientOutcome::Acquire(AcquireOutcome::Granted {
                            token,
                            expires_at_ms,
                        }),
                    ) => (
                        EventKind::Grant,
                        lock,
                        client,
                        *token,
                        Some(*expires_at_ms),
                        op,
                        NodeEvent::Grant,
                    ),
                    (
                        ClientOp::Renew { lock, token },
                        ClientOutcome::Renew(RenewOutcome::Renewed { expires_at_ms }),
                    ) => (
                        EventKind::Renew,
                        lock,
                        client,
                        *token,
                        Some(*expires_at_ms),
                        op,
                        NodeEvent::Renew,
                    ),
                    (
                        ClientOp::Release { lock, token },
                        ClientOutcome::Release(ReleaseOutcome::Released),
                    ) => (
                        EventKind::Release,
                        lock,
                        client,
                        *token,
                        None,
                        op,
                        NodeEvent::Release,
                    ),
                    _ => return None,
                }
            }
            // A revocation of a lease not yet expired by the decider's own stamp is not an
            // expiry: record it as what it is.
            Applied::Revoked {
                lock,
                lease,
                decided_at_ms,
            } => (
                if *decided_at_ms >= lease.expires_at_ms {
                    EventKind::Expire
                } else {
                    EventKind::Revoke
                },
                lock,
                &lease.holder,
                lease.token,
                Some(lease.expires_at_ms),
                None,
                NodeEvent::Expire,
            ),
            Applied::RevokeRefused { .. } | Applied::Promoted => return None,
        };
        self.world.event(Event {
            node: self.name.as_str().into(),
            lock: Some(lock.as_str().into()),
            holder: Some(holder.as_str().into()),
            token: Some(token),
            expires_at_ms,
            op,
            ..Event::new(kind)
        });
        Some(event)
    }
}
