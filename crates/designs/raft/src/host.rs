//! What every node of a Raft-replicated design does the same way, whatever state machine its
//! replica applies: start from the durable log, tick, step the peers' messages, send what Raft
//! wants sent, announce leadership, and draw each election timeout from the node's seeded
//! stream. The Raft lease service ([`crate::RaftNode`]) and the etcd design each wrap one
//! [`RaftCore`] and add only how client requests become commands and what an applied entry
//! records and answers.

use std::collections::VecDeque;

use fencesim_design::{Clock, DesignMessage, Durability, NodeCtx, NodeStart, TimerId};

use crate::replica::{new_storage, Output, Proposal, RaftStorage, Replica, ReplicaConfig};
use crate::{RaftMessage, StateMachine};

/// The Raft timing of a node (ticks of `tick_ms` simulated ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaftTiming {
    /// Simulated ms per Raft tick.
    pub tick_ms: u64,
    /// Ticks without a heartbeat before an election; each timeout is drawn from
    /// `election_ticks..2 * election_ticks`.
    pub election_ticks: usize,
    /// Ticks between heartbeats.
    pub heartbeat_ticks: usize,
    /// Ticks after Raft steps down during which the lessor still believes this replica leads.
    pub lessor_check_ticks: u64,
    /// The clock the lessor and the command stamps read (the leader's, local ms).
    pub clock: Clock,
}

/// The Raft tick's timer.
const TICK: TimerId = TimerId(1);

/// A Raft replica's durable log and hard state: raft-rs's storage, written before any
/// message leaves the replica (as Raft requires), so every write is synced. The node persists
/// the handle once, at its first start; the replica writes through it.
#[derive(Clone)]
pub struct RaftLog(pub RaftStorage);

impl std::fmt::Debug for RaftLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RaftLog")
    }
}

/// The Raft half of a replicated design's node: the replica applying `S`, and its timing.
pub struct RaftCore<S: StateMachine> {
    timing: RaftTiming,
    replica: Replica<S>,
    /// The service's node names: Raft id `i` is `nodes[i - 1]`.
    nodes: Vec<String>,
    /// Entries applied and not yet handed out: the node records one per `settle`, so that
    /// each passes its safepoints before the next.
    queued: VecDeque<(u64, S::Applied)>,
}

impl<S: StateMachine> RaftCore<S> {
    /// Start replica `start.index + 1` of `start.service_nodes.len()` over what its disk kept
    /// (on the first start a fresh log, persisted once), applying into `state` (empty: the log
    /// is replayed into it), and set the first tick. `wrap` makes the design's message from a
    /// Raft message.
    ///
    /// Panics on an invalid Raft configuration (a design's bug: the timing is its constant).
    pub fn start<M: DesignMessage>(
        timing: RaftTiming,
        start: NodeStart<RaftLog>,
        state: S,
        ctx: &mut NodeCtx<'_, M, RaftLog>,
    ) -> Self {
        let peers: Vec<u64> = (1..=start.service_nodes.len() as u64).collect();
        let log = match start.durable {
            Some(log) => log,
            None => {
                let log = RaftLog(new_storage(&peers));
                ctx.persist(log.clone(), Durability::Synced);
                log
            }
        };
        let config = ReplicaConfig {
            id: start.index as u64 + 1,
            peers,
            election_tick: timing.election_ticks,
            heartbeat_tick: timing.heartbeat_ticks,
            lessor_check_ticks: timing.lessor_check_ticks,
        };
        let replica = match Replica::new(config, log.0, state) {
            Ok(replica) => replica,
            Err(e) => panic!("an invalid Raft configuration: {e}"),
        };
        ctx.set_timer(TICK, timing.tick_ms);
        RaftCore {
            timing,
            replica,
            nodes: start.service_nodes,
            queued: VecDeque::new(),
        }
    }

    /// The replica.
    pub fn replica(&self) -> &Replica<S> {
        &self.replica
    }

    /// This replica's clock, ms: what it stamps commands with.
    pub fn now_ms<M: DesignMessage>(&self, ctx: &NodeCtx<'_, M, RaftLog>) -> i64 {
        ctx.now().on(self.timing.clock)
    }

    /// Propose `command` if this replica leads.
    pub fn propose(&mut self, command: &S::Command) -> Proposal {
        self.replica.propose(command)
    }

    /// The leader's node name as this replica knows it.
    pub fn leader_name(&self) -> Option<String> {
        self.replica.leader().map(|id| self.node_name(id))
    }

    /// The node name of Raft id `id` (1-based, as the service's shape lists them).
    fn node_name(&self, id: u64) -> String {
        self.nodes[id as usize - 1].clone()
    }

    /// Step a peer's message; returns what it applied.
    pub fn on_peer<M: DesignMessage>(
        &mut self,
        message: RaftMessage,
        wrap: impl Fn(RaftMessage) -> M,
        ctx: &mut NodeCtx<'_, M, RaftLog>,
    ) -> Vec<(u64, S::Applied)> {
        self.replica.step(message);
        self.drain(wrap, ctx)
    }

    /// The tick, if `id` is its timer; `None` for another timer.
    pub fn on_timer<M: DesignMessage>(
        &mut self,
        id: TimerId,
        wrap: impl Fn(RaftMessage) -> M,
        ctx: &mut NodeCtx<'_, M, RaftLog>,
    ) -> Option<Vec<(u64, S::Applied)>> {
        if id != TICK {
            return None;
        }
        let now = self.now_ms(ctx);
        self.replica.tick(now);
        ctx.set_timer(TICK, self.timing.tick_ms);
        Some(self.drain(wrap, ctx))
    }

    /// After any input: send what Raft wants sent and announce a new leadership at once;
    /// return the entries applied, for the design to record and answer.
    pub fn drain<M: DesignMessage>(
        &mut self,
        wrap: impl Fn(RaftMessage) -> M,
        ctx: &mut NodeCtx<'_, M, RaftLog>,
    ) -> Vec<(u64, S::Applied)> {
        let now = self.now_ms(ctx);
        let Output {
            messages,
            applied,
            became_leader,
        } = self.replica.drain(now);
        for m in messages {
            let to = self.node_name(m.get_to());
            ctx.send(to, wrap(m));
        }
        if let Some(term) = became_leader {
            ctx.leads(term, Some(format!("term {term}")));
        }
        applied
    }

    /// Keep `applied` (what a drain returned, after the node has answered what it must) to be
    /// handed out by [`Self::next_applied`], in order.
    pub fn queue(&mut self, applied: Vec<(u64, S::Applied)>) {
        // Handed out by the settles that follow, so the queue is empty here: take it whole.
        if self.queued.is_empty() {
            self.queued = VecDeque::from(applied);
        } else {
            self.queued.extend(applied);
        }
    }

    /// The next entry applied, for `settle` to record.
    pub fn next_applied(&mut self) -> Option<(u64, S::Applied)> {
        self.queued.pop_front()
    }

    /// At the end of a settle: a fresh election timeout from the node's seeded stream if the
    /// term or role changed.
    pub fn settle_timeout<M: DesignMessage>(&mut self, ctx: &mut NodeCtx<'_, M, RaftLog>) {
        if self.replica.take_timeout_due() {
            let ticks = self.timing.election_ticks as u64;
            let timeout = ctx.random_range(ticks, 2 * ticks);
            self.replica.set_election_timeout(timeout as usize);
        }
    }
}
