//! One replica of the consensus-backed lease service: raft-rs (a pure state machine driven by
//! `tick` and `step`) around the [`ReplicatedLeases`] table. Sans-IO like the rest of this
//! crate: the caller feeds ticks, messages, client requests and its clock reading, and gets back
//! messages to send, replies to route and what each applied entry changed.
//!
//! The log and hard state live in a [`RaftStorage`] the caller keeps across crashes (persisted
//! before messages go out, as Raft requires). The table is volatile: a restarted replica
//! rebuilds it by applying the log from the start. The leader's lessor revokes leases its clock
//! shows expired; like etcd's, it learns of its own demotion only at its next periodic check,
//! which is why revocations carry the term they were decided in (see [`fencesim_lease::replicated`]).

use std::collections::BTreeSet;

use raft::eraftpb::{ConfState, Entry, EntryType};
use raft::{Config, RawNode, StateRole};

use fencesim_lease::replicated::{
    Applied, ClientOp, ClientOutcome, Command, LeaderChange, ReplicatedLeases, ReplicationPolicy,
};
use fencesim_lease::LeaseConfig;

/// A Raft message between replicas.
pub use raft::eraftpb::Message as RaftMessage;
/// Durable Raft log and hard state (clones share the same data).
pub use raft::storage::MemStorage as RaftStorage;

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
    /// Longest lease TTL, local-clock ms.
    pub max_ttl_ms: u64,
    /// The safety knobs.
    pub policy: ReplicationPolicy,
    /// How many ticks after Raft steps down the lessor still believes this replica leads.
    pub lessor_check_ticks: u64,
}

/// What a replica wants done after an input.
#[derive(Clone, Debug, Default)]
pub struct Output {
    /// Messages to send (`to` is the receiving replica's id).
    pub messages: Vec<RaftMessage>,
    /// Each entry applied here, with its log index.
    pub applied: Vec<(u64, Applied)>,
    /// Answers to requests this replica proposed: (client, request id, outcome).
    pub replies: Vec<(String, u64, ClientOutcome)>,
    /// Set when this replica became leader, with the term.
    pub became_leader: Option<u64>,
}

/// The answer to [`Replica::propose`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Proposal {
    /// In the log; the reply comes when it commits (or never, if leadership is lost first).
    Proposed,
    /// Not the leader; `leader` is the id it believes leads, if any.
    NotLeader {
        /// A hint for the client.
        leader: Option<u64>,
    },
}

/// One lease-service replica.
pub struct Replica {
    raw: RawNode<RaftStorage>,
    leases: ReplicatedLeases,
    config: ReplicaConfig,
    /// (client, request) proposed here and not yet applied.
    pending: BTreeSet<(String, u64)>,
    /// (lock, token) revocations proposed here and not yet applied.
    revoking: BTreeSet<(String, u64)>,
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

impl Replica {
    /// A replica over `storage` (fresh, or what survived a crash: the log is replayed).
    pub fn new(config: ReplicaConfig, storage: RaftStorage) -> Result<Self, raft::Error> {
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
        let leases = ReplicatedLeases::new(
            LeaseConfig {
                max_ttl_ms: config.max_ttl_ms,
            },
            config.policy,
        );
        let seen = (raw.raft.term, raw.raft.state);
        Ok(Replica {
            raw,
            leases,
            config,
            pending: BTreeSet::new(),
            revoking: BTreeSet::new(),
            lessor: None,
            ticks: 0,
            demoted_ticks: 0,
            led: None,
            seen,
            timeout_due: true,
        })
    }

    /// The applied lease table.
    pub fn leases(&self) -> &ReplicatedLeases {
        &self.leases
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

    /// A client's request, stamped with this replica's clock. Only a leader proposes.
    pub fn propose(&mut self, client: &str, request: u64, op: ClientOp, now_ms: i64) -> Proposal {
        if !self.is_leader() {
            return Proposal::NotLeader {
                leader: self.leader(),
            };
        }
        let command = Command::Client {
            client: client.to_owned(),
            request,
            op,
            now_ms,
        };
        if self.raw.propose(vec![], encode(&command)).is_err() {
            return Proposal::NotLeader {
                leader: self.leader(),
            };
        }
        self.pending.insert((client.to_owned(), request));
        Proposal::Proposed
    }

    /// Propose revoking every lease this (believed) leader's clock shows expired.
    fn revoke_expired(&mut self, now_ms: i64, term: u64) {
        let due: Vec<(String, u64)> = self
            .leases
            .service()
            .table()
            .iter()
            .filter_map(|(lock, r)| r.lease.as_ref().map(|l| (lock, l)))
            .filter(|(_, l)| l.expires_at_ms <= now_ms)
            .map(|(lock, l)| (lock.clone(), l.token))
            .filter(|key| !self.revoking.contains(key))
            .collect();
        for (lock, token) in due {
            let command = Command::Revoke {
                lock: lock.clone(),
                token,
                now_ms,
                term,
            };
            // A follower forwards the proposal to the leader it knows (the K08 path).
            if self.raw.propose(vec![], encode(&command)).is_ok() {
                self.revoking.insert((lock, token));
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
    pub fn drain(&mut self, now_ms: i64) -> Output {
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
            if self.config.policy.leader_change == LeaderChange::Extend {
                let _ = self
                    .raw
                    .propose(vec![], encode(&Command::Promote { now_ms }));
            }
            self.note_role();
            // The promotion needs its own round of ready handling.
            let more = self.drain(now_ms);
            out.messages.extend(more.messages);
            out.applied.extend(more.applied);
            out.replies.extend(more.replies);
        }
        out
    }

    fn apply(&mut self, entries: Vec<Entry>, out: &mut Output) {
        for entry in entries {
            if entry.get_entry_type() != EntryType::EntryNormal || entry.get_data().is_empty() {
                continue;
            }
            let command: Command = serde_json::from_slice(entry.get_data())
                .expect("entries are commands this crate encoded");
            let applied = self
                .leases
                .apply(entry.get_index(), entry.get_term(), command);
            match &applied {
                Applied::Client {
                    client,
                    request,
                    outcome,
                    ..
                } => {
                    if self.pending.remove(&(client.clone(), *request)) {
                        out.replies
                            .push((client.clone(), *request, outcome.clone()));
                    }
                }
                Applied::Revoked { lock, lease, .. } => {
                    self.revoking.remove(&(lock.clone(), lease.token));
                }
                Applied::RevokeRefused { lock, token } => {
                    self.revoking.remove(&(lock.clone(), *token));
                }
                Applied::Promoted => {}
            }
            out.applied.push((entry.get_index(), applied));
        }
    }
}

fn encode(command: &Command) -> Vec<u8> {
    serde_json::to_vec(command).expect("commands serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencesim_lease::AcquireOutcome;

    fn cluster(n: u64) -> Vec<Replica> {
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
                    max_ttl_ms: 1_000,
                    policy,
                    lessor_check_ticks: 10,
                };
                let mut r = Replica::new(config, new_storage(&peers)).unwrap();
                // Deterministic, distinct timeouts so replica 1 campaigns first.
                r.set_election_timeout(10 + id as usize);
                r
            })
            .collect()
    }

    /// Deliver every message until the cluster is quiet; returns what was applied where.
    fn settle(replicas: &mut [Replica], now_ms: i64) -> Vec<Output> {
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
        let op = ClientOp::Acquire {
            lock: "l".into(),
            ttl_ms: 500,
        };
        assert_eq!(
            rs[1].propose("c", 1, op.clone(), 3_000),
            Proposal::NotLeader { leader: Some(1) }
        );
        assert_eq!(rs[0].propose("c", 1, op, 3_000), Proposal::Proposed);
        let outputs = settle(&mut rs, 3_000);
        let replies: Vec<_> = outputs.iter().flat_map(|o| o.replies.clone()).collect();
        let [(
            client,
            1,
            ClientOutcome::Acquire(AcquireOutcome::Granted {
                token,
                expires_at_ms: 3_500,
            }),
        )] = &replies[..]
        else {
            panic!("{replies:?}")
        };
        assert_eq!(client, "c");
        // Entry 1 is the leader's empty entry and 2 its promotion, so the acquire is index 3.
        assert_eq!(*token, 3);
        for r in &rs {
            assert_eq!(r.leases().service().lease("l").map(|l| l.token), Some(3));
        }
    }
}
