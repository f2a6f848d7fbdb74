//! One replica of a Raft-replicated service: raft-rs (a pure state machine driven by `tick` and
//! `step`) around a [`StateMachine`] it applies, with a lessor on the leader. The Raft lease
//! service applies fencesim-lease's replicated lease table ([`ReplicatedLeases`]); the etcd
//! design applies its MVCC key space and leases. Sans-IO like the rest of this crate: the
//! caller feeds ticks, messages, commands and its clock reading, and gets back messages to send
//! and what each applied entry changed.
//!
//! The log and hard state live in a [`RaftStorage`] the caller keeps across crashes (persisted
//! before messages go out, as Raft requires). The state machine is volatile: a restarted
//! replica rebuilds it by applying the log from the start. The leader's lessor revokes leases
//! its clock shows expired; like etcd's, it learns of its own demotion only at its next periodic
//! check, which is why revocations carry the term they were decided in (see
//! [`fencesim_lease::replicated`]).

use std::collections::BTreeSet;

use raft::eraftpb::{ConfState, Entry, EntryType};
use raft::{Config, RawNode, StateRole};
use serde::de::DeserializeOwned;
use serde::Serialize;

use fencesim_lease::replicated::{Applied, Command, LeaderChange, ReplicatedLeases};

/// A Raft message between replicas.
pub use raft::eraftpb::Message as RaftMessage;
/// Durable Raft log and hard state (clones share the same data).
pub use raft::storage::MemStorage as RaftStorage;

/// What a [`Replica`] applies: a deterministic state machine fed the committed commands in log
/// order, whose leases a lessor on the leader revokes when they expire by the leader's clock
/// (etcd's lessor). Every replica applies the same commands and so reaches the same state.
pub trait StateMachine {
    /// An entry of the log (serialized with serde into the entry's data).
    type Command: Serialize + DeserializeOwned;
    /// What applying one entry changed, for the node to record and answer.
    type Applied;
    /// Names one lease, so that one revocation of it at a time is in flight.
    type LeaseId: Ord + Clone;

    /// The leases whose expiry is at or before `now_ms` (the leader's clock, local ms), in a
    /// deterministic order.
    fn expired(&self, now_ms: i64) -> Vec<Self::LeaseId>;

    /// The command revoking `lease`, decided at `now_ms` by a lessor that believes it leads in
    /// `term`.
    fn revoke(&self, lease: &Self::LeaseId, now_ms: i64, term: u64) -> Self::Command;

    /// A new leader's first command, if it has one (etcd's lessor promotion: extend every
    /// lease by its TTL from the new leader's clock, `now_ms`).
    fn promote(&self, now_ms: i64) -> Option<Self::Command>;

    /// Apply the committed `command` found at log `index`, written in term `entry_term`.
    fn apply(&mut self, index: u64, entry_term: u64, command: Self::Command) -> Self::Applied;

    /// The lease a revocation ended or refused to end, if `applied` was one: the lessor may
    /// propose revoking it again.
    fn revocation_settled(applied: &Self::Applied) -> Option<Self::LeaseId>;
}

/// The Raft lease service's state machine: the replicated lease table, whose leases are named
/// by (lock, token).
impl StateMachine for ReplicatedLeases {
    type Command = Command;
    type Applied = Applied;
    type LeaseId = (String, u64);

    fn expired(&self, now_ms: i64) -> Vec<(String, u64)> {
        self.service()
            .table()
            .iter()
            .filter_map(|(lock, r)| r.lease.as_ref().map(|l| (lock, l)))
            .filter(|(_, l)| l.expires_at_ms <= now_ms)
            .map(|(lock, l)| (lock.clone(), l.token))
            .collect()
    }

    fn revoke(&self, (lock, token): &(String, u64), now_ms: i64, term: u64) -> Command {
        Command::Revoke {
            lock: lock.clone(),
            token: *token,
            now_ms,
            term,
        }
    }

    fn promote(&self, now_ms: i64) -> Option<Command> {
        (self.policy().leader_change == LeaderChange::Extend).then_some(Command::Promote { now_ms })
    }

    fn apply(&mut self, index: u64, entry_term: u64, command: Command) -> Applied {
        ReplicatedLeases::apply(self, index, entry_term, command)
    }

    fn revocation_settled(applied: &Applied) -> Option<(String, u64)> {
        match applied {
            Applied::Revoked { lock, lease, .. } => Some((lock.clone(), lease.token)),
            Applied::RevokeRefused { lock, token } => Some((lock.clone(), *token)),
            Applied::Client { .. } | Applied::Promoted => None,
        }
    }
}

/// Settings of one replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaConfig {
    /// This replica's Raft id (1-based).
    pub id: u64,
    /// Every replica's id.
    pub peers: Vec<u64>,
    /// Ticks without a leader's heartbeat before an election (raft-rs `election_tick`).
    pub election_tick: usize,
    /// Ticks between heartbeats.
    pub heartbeat_tick: usize,
    /// How many ticks after Raft steps down the lessor still believes this replica leads.
    pub lessor_check_ticks: u64,
}

/// What a replica wants done after an input.
#[derive(Clone, Debug)]
pub struct Output<A> {
    /// Messages to send (`to` is the receiving replica's id).
    pub messages: Vec<RaftMessage>,
    /// Each entry applied here, with its log index.
    pub applied: Vec<(u64, A)>,
    /// Set when this replica became leader, with the term.
    pub became_leader: Option<u64>,
}

impl<A> Default for Output<A> {
    fn default() -> Self {
        Output {
            messages: Vec::new(),
            applied: Vec::new(),
            became_leader: None,
        }
    }
}

/// The answer to [`Replica::propose`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Proposal {
    /// In the log; it is applied when it commits (or never, if leadership is lost first).
    Proposed,
    /// Not the leader; `leader` is the id it believes leads, if any.
    NotLeader {
        /// A hint for the client.
        leader: Option<u64>,
    },
}

/// One replica applying `S`.
pub struct Replica<S: StateMachine> {
    raw: RawNode<RaftStorage>,
    state: S,
    config: ReplicaConfig,
    /// Revocations proposed here and not yet applied.
    revoking: BTreeSet<S::LeaseId>,
    /// The lessor's belief that this replica leads, and in which term.
    lessor: Option<u64>,
    ticks: u64,
    /// Ticks since Raft stepped down while the lessor still believed it led.
    demoted_ticks: u64,
    /// The last term in which this replica took up leadership (promoted, lessor started).
    led: Option<u64>,
    seen: (u64, StateRole),
    timeout_due: bool,
}

/// Storage for a fresh cluster of `peers`.
pub fn new_storage(peers: &[u64]) -> RaftStorage {
    RaftStorage::new_with_conf_state(ConfState::from((peers.to_vec(), vec![])))
}

impl<S: StateMachine> Replica<S> {
    /// A replica over `storage` (fresh, or what survived a crash: the log is replayed into
    /// `state`, which starts empty).
    pub fn new(config: ReplicaConfig, storage: RaftStorage, state: S) -> Result<Self, raft::Error> {
        let raft_config = Config {
            id: config.id,
            election_tick: config.election_tick,
            heartbeat_tick: config.heartbeat_tick,
            applied: 0,
            check_quorum: true,
            pre_vote: true,
            ..Default::default()
        };
        raft_config.validate()?;
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let raw = RawNode::new(&raft_config, storage, &logger)?;
        let seen = (raw.raft.term, raw.raft.state);
        Ok(Replica {
            raw,
            state,
            config,
            revoking: BTreeSet::new(),
            lessor: None,
            ticks: 0,
            demoted_ticks: 0,
            led: None,
            seen,
            timeout_due: true,
        })
    }

    /// The applied state.
    pub fn state(&self) -> &S {
        &self.state
    }

    /// Whether this replica leads, by Raft's current state.
    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    /// The leader's id as this replica knows it.
    pub fn leader(&self) -> Option<u64> {
        Some(self.raw.raft.leader_id).filter(|id| *id != 0)
    }

    /// The current term.
    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    /// The lessor's term, while it believes this replica leads (it may lag Raft's own role
    /// by up to `lessor_check_ticks` after a demotion).
    pub fn lessor_term(&self) -> Option<u64> {
        self.lessor
    }

    /// True once after each change of term or role: the caller should then draw a new election
    /// timeout from its seeded generator and pass it to [`Self::set_election_timeout`]
    /// (raft-rs would draw it from an unseeded one).
    pub fn take_timeout_due(&mut self) -> bool {
        std::mem::take(&mut self.timeout_due)
    }

    /// Use `ticks` as the randomized election timeout, in [election_tick, 2 * election_tick).
    pub fn set_election_timeout(&mut self, ticks: usize) {
        self.raw.raft.set_randomized_election_timeout(ticks);
    }

    /// One clock tick; `now_ms` is this replica's clock, used by the lessor.
    pub fn tick(&mut self, now_ms: i64) {
        self.raw.tick();
        self.ticks += 1;
        // The lessor hears of a demotion only `lessor_check_ticks` ticks after Raft notices it
        // (as etcd's lessor is demoted asynchronously); until then it still revokes.
        if self.lessor.is_some() && !self.is_leader() {
            self.demoted_ticks += 1;
            if self.demoted_ticks >= self.config.lessor_check_ticks {
                self.lessor = None;
            }
        } else {
            self.demoted_ticks = 0;
        }
        if let Some(term) = self.lessor {
            self.revoke_expired(now_ms, term);
        }
        self.note_role();
    }

    /// A message from another replica. Messages from unknown peers or stale ones are dropped
    /// by Raft itself.
    pub fn step(&mut self, message: RaftMessage) {
        let _ = self.raw.step(message);
        self.note_role();
    }

    /// Propose `command` (a client's request, stamped by the caller with this replica's
    /// clock). Only a leader proposes.
    pub fn propose(&mut self, command: &S::Command) -> Proposal {
        if !self.is_leader() || self.raw.propose(vec![], encode(command)).is_err() {
            return Proposal::NotLeader {
                leader: self.leader(),
            };
        }
        Proposal::Proposed
    }

    /// Propose revoking every lease this (believed) leader's clock shows expired.
    fn revoke_expired(&mut self, now_ms: i64, term: u64) {
        let due = self.state.expired(now_ms);
        for lease in due {
            if self.revoking.contains(&lease) {
                continue;
            }
            let command = self.state.revoke(&lease, now_ms, term);
            // A follower forwards the proposal to the leader it knows (the K08 path).
            if self.raw.propose(vec![], encode(&command)).is_ok() {
                self.revoking.insert(lease);
            }
        }
    }

    fn note_role(&mut self) {
        let now = (self.raw.raft.term, self.raw.raft.state);
        if now != self.seen {
            self.seen = now;
            self.timeout_due = true;
            // A revocation proposed before may have been dropped with the old leader; let the
            // lessor propose it again if it still leads.
            self.revoking.clear();
        }
    }

    /// Persist, apply and collect everything Raft has ready. Call after every input.
    pub fn drain(&mut self, now_ms: i64) -> Output<S::Applied> {
        let mut out = Output::default();
        while self.raw.has_ready() {
            let mut ready = self.raw.ready();
            out.messages.extend(ready.take_messages());
            self.apply(ready.take_committed_entries(), &mut out);
            let store = self.raw.mut_store().clone();
            if !ready.entries().is_empty() {
                store
                    .wl()
                    .append(ready.entries())
                    .expect("append to the in-memory log");
            }
            if let Some(hs) = ready.hs() {
                store.wl().set_hardstate(hs.clone());
            }
            out.messages.extend(ready.take_persisted_messages());
            let mut light = self.raw.advance(ready);
            if let Some(commit) = light.commit_index() {
                store.wl().mut_hard_state().set_commit(commit);
            }
            out.messages.extend(light.take_messages());
            self.apply(light.take_committed_entries(), &mut out);
            self.raw.advance_apply();
        }
        if self.is_leader() && self.led != Some(self.term()) {
            let term = self.term();
            self.led = Some(term);
            out.became_leader = Some(term);
            self.lessor = Some(term);
            if let Some(promote) = self.state.promote(now_ms) {
                let _ = self.raw.propose(vec![], encode(&promote));
            }
            self.note_role();
            // The promotion needs its own round of ready handling.
            let more = self.drain(now_ms);
            out.messages.extend(more.messages);
            out.applied.extend(more.applied);
        }
        out
    }

    fn apply(&mut self, entries: Vec<Entry>, out: &mut Output<S::Applied>) {
        for entry in entries {
            if entry.get_entry_type() != EntryType::EntryNormal || entry.get_data().is_empty() {
                continue;
            }
            let command: S::Command = serde_json::from_slice(entry.get_data())
                .expect("entries are commands this crate encoded");
            let applied = self
                .state
                .apply(entry.get_index(), entry.get_term(), command);
            if let Some(lease) = S::revocation_settled(&applied) {
                self.revoking.remove(&lease);
            }
            out.applied.push((entry.get_index(), applied));
        }
    }
}

fn encode<C: Serialize>(command: &C) -> Vec<u8> {
    serde_json::to_vec(command).expect("commands serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencesim_lease::replicated::{ClientOp, ClientOutcome, ReplicationPolicy};
    use fencesim_lease::{AcquireOutcome, LeaseConfig};

    fn cluster(n: u64) -> Vec<Replica<ReplicatedLeases>> {
        let peers: Vec<u64> = (1..=n).collect();
        let policy = ReplicationPolicy {
            revoke_term_check: true,
            leader_change: LeaderChange::Extend,
        };
        peers
            .iter()
            .map(|&id| {
                let config = ReplicaConfig {
                    id,
                    peers: peers.clone(),
                    election_tick: 10,
                    heartbeat_tick: 3,
                    lessor_check_ticks: 10,
                };
                let leases = ReplicatedLeases::new(LeaseConfig { max_ttl_ms: 1_000 }, policy);
                let mut r = Replica::new(config, new_storage(&peers), leases).unwrap();
                // Deterministic, distinct timeouts so replica 1 campaigns first.
                r.set_election_timeout(10 + id as usize);
                r
            })
            .collect()
    }

    /// Deliver every message until the cluster is quiet; returns what was applied where.
    fn settle(replicas: &mut [Replica<ReplicatedLeases>], now_ms: i64) -> Vec<Output<Applied>> {
        let mut outputs = Vec::new();
        loop {
            let mut messages = Vec::new();
            for r in replicas.iter_mut() {
                let out = r.drain(now_ms);
                messages.extend(out.messages.clone());
                outputs.push(out);
            }
            if messages.is_empty() {
                return outputs;
            }
            for m in messages {
                replicas[m.get_to() as usize - 1].step(m);
            }
        }
    }

    fn acquire(request: u64) -> Command {
        Command::Client {
            client: "c".into(),
            request,
            op: ClientOp::Acquire {
                lock: "l".into(),
                ttl_ms: 500,
            },
            now_ms: 3_000,
        }
    }

    #[test]
    fn a_cluster_elects_a_leader_and_grants_with_the_log_index_as_token() {
        let mut rs = cluster(3);
        for t in 0..30 {
            for r in rs.iter_mut() {
                r.tick(t * 100);
            }
            settle(&mut rs, t * 100);
        }
        let leaders: Vec<u64> = rs
            .iter()
            .filter(|r| r.is_leader())
            .map(|r| r.config.id)
            .collect();
        assert_eq!(leaders, [1]);
        assert_eq!(
            rs[1].propose(&acquire(1)),
            Proposal::NotLeader { leader: Some(1) }
        );
        assert_eq!(rs[0].propose(&acquire(1)), Proposal::Proposed);
        let outputs = settle(&mut rs, 3_000);
        // Every replica applies the acquire once.
        let grants: Vec<_> = outputs
            .iter()
            .flat_map(|o| o.applied.clone())
            .filter_map(|(index, applied)| match applied {
                Applied::Client {
                    outcome:
                        ClientOutcome::Acquire(AcquireOutcome::Granted {
                            token,
                            expires_at_ms,
                        }),
                    ..
                } => Some((index, token, expires_at_ms)),
                _ => None,
            })
            .collect();
        // Entry 1 is the leader's empty entry and 2 its promotion, so the acquire is index 3.
        assert_eq!(grants, [(3, 3, 3_500); 3]);
        for r in &rs {
            assert_eq!(r.state().service().lease("l").map(|l| l.token), Some(3));
        }
    }
}
