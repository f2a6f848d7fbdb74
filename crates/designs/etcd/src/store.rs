//! The state every etcd member applies from the Raft log: the key space and the leases
//! ([`crate::mvcc`]), and the v3 lock recipe on them, which etcd runs in its `v3lock` service
//! on the member a client asks (`concurrency.Mutex`).
//!
//! A lock call for lock `L` by a client asking for a TTL:
//! 1. grants a lease with that TTL (the client's session) and puts `L/<lease id>` under it; the
//!    key's create revision is the client's fencing token;
//! 2. if no key under `L/` was created before its own, the call returns: the client holds;
//! 3. otherwise the call blocks, and returns once every key under `L/` created before its own
//!    is deleted (released, or its lease expired).
//!
//! At step 3, etcd 3.4.3's `Mutex.Lock` returned without checking that its own key still
//! existed: a waiter whose lease expired while it waited was told it held the lock, while the
//! next waiter, whose lower keys were now all gone, was granted it too (Jepsen's etcd 3.4.3
//! analysis, 2020; K07 in etcd's terms). The fixed recipe fails such a call with "session
//! expired". `lock_checks_own_key` chooses.
//!
//! A keepalive names the lock and the token, the key's create revision: the member finds the
//! key and keeps its lease alive. An unlock deletes the key and revokes its lease (the session
//! ends with the lock, as fencesim's clients take a new session per acquire).
//!
//! The leader stamps every command with its clock (`now_ms`), so every member decides the same.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use fencesim_lease::{AcquireOutcome, Attempt, ReleaseOutcome, RenewOutcome};
use fencesim_raft::StateMachine;

use crate::mvcc::{KeySpace, LeaseId, Lessor};

/// The safety knobs of the etcd design.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EtcdPolicy {
    /// The longest TTL a lease is granted, ms.
    pub max_ttl_ms: u64,
    /// Whether a blocked lock call checks, when its turn comes, that its own key still exists
    /// (safe: `true`; etcd 3.4.3: `false`).
    pub lock_checks_own_key: bool,
}

/// A client's request, as replicated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Lock `lock` under a new lease of `ttl_ms` (capped).
    Lock {
        /// The lock (the key prefix, without the `/`).
        lock: String,
        /// The session lease's TTL, ms.
        ttl_ms: u64,
        /// Which acquire attempt of the client this is: a blocked call's later answer names it.
        attempt: Attempt,
    },
    /// Keep alive the lease of the lock key with create revision `token`.
    KeepAlive {
        /// The lock.
        lock: String,
        /// The key's create revision.
        token: u64,
    },
    /// Delete the lock key with create revision `token` and revoke its lease.
    Unlock {
        /// The lock.
        lock: String,
        /// The key's create revision.
        token: u64,
    },
}

impl Request {
    /// The lock the request is about.
    pub fn lock(&self) -> &str {
        match self {
            Request::Lock { lock, .. }
            | Request::KeepAlive { lock, .. }
            | Request::Unlock { lock, .. } => lock,
        }
    }
}

/// An entry of the replicated log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// A client's request, stamped by the leader that proposed it.
    Client {
        /// The client's name.
        client: String,
        /// Its request id, to route the answer.
        request: u64,
        /// What it asks.
        op: Request,
        /// The proposing leader's clock, ms.
        now_ms: i64,
    },
    /// The lessor found `lease` expired by its clock.
    Revoke {
        /// The lease.
        lease: LeaseId,
        /// The proposer's clock, ms.
        now_ms: i64,
        /// The term in which the proposer believed it led.
        term: u64,
    },
    /// A new leader's first command: every lease restarts its TTL from its clock.
    Promote {
        /// The new leader's clock, ms.
        now_ms: i64,
    },
}

/// The answer to a client's request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Of a lock call (granted at once, or queued: then a [`Turn`] answers it later).
    Lock(AcquireOutcome),
    /// Of a keepalive.
    KeepAlive(RenewOutcome),
    /// Of an unlock.
    Unlock(ReleaseOutcome),
}

/// A lock key that a lock call had returned for, deleted: the holder's lock ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ended {
    /// The lock.
    pub lock: String,
    /// The holder.
    pub holder: String,
    /// Its token (the key's create revision).
    pub token: u64,
    /// When its lease expired, ms of the leader's clock.
    pub expires_at_ms: i64,
}

/// A blocked lock call whose turn came: every key under the lock created before its own is
/// gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Turn {
    /// The lock.
    pub lock: String,
    /// The waiting client.
    pub client: String,
    /// The request the call was.
    pub request: u64,
    /// The client's attempt the call was.
    pub attempt: Attempt,
    /// `Granted` (with its lease's expiry, passed already if its key is gone and the recipe
    /// does not check), or `WaiterExpired`.
    pub outcome: AcquireOutcome,
    /// What is left of its lease at its turn, ms of the leader's clock (its lease was kept
    /// alive while it waited, so this is less than its whole TTL): the time a grant promises.
    pub ttl_ms: u64,
    /// When its lease had expired, ms of the leader's clock, if it had: a call granted all the
    /// same (`lock_checks_own_key = false`) holds a lock whose lease ended before it began.
    pub lapsed_at_ms: Option<i64>,
}

/// What applying one entry changed, for the history and the answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// What the entry was.
    pub what: AppliedKind,
    /// Locks that ended with it, in order (a revoked lease, an unlock).
    pub ended: Vec<Ended>,
    /// Blocked lock calls answered by it, in order.
    pub turns: Vec<Turn>,
}

/// The kind of entry applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppliedKind {
    /// A client's request and its answer.
    Client {
        /// Who asked.
        client: String,
        /// Its request id.
        request: u64,
        /// What it asked.
        op: Request,
        /// The answer.
        outcome: Outcome,
        /// The TTL the lease now promises its holder (a grant, or a holder's keepalive), ms;
        /// `None` for a blocked caller's keepalive, which promises a holder nothing.
        ttl_ms: Option<u64>,
        /// Whether the request was about a lock the client held (a lock call that returned at
        /// once, a holder's keepalive or unlock), not a blocked call's key.
        held: bool,
    },
    /// A lease revoked as expired, decided at `decided_at_ms` by the leader's clock.
    Revoked {
        /// The lease.
        lease: LeaseId,
        /// The proposer's clock.
        decided_at_ms: i64,
    },
    /// A revocation refused (a stale term, or the lease was kept alive or is gone).
    RevokeRefused {
        /// The lease.
        lease: LeaseId,
    },
    /// A new leader restarted every lease's TTL.
    Promoted,
}

/// A lock call's key, and whether the call has returned (the client holds) or blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
struct LockKey {
    client: String,
    request: u64,
    attempt: Attempt,
    key: String,
    lease: LeaseId,
    ttl_ms: u64,
    held: bool,
    /// When its lease expired while the call blocked, ms of the leader's clock.
    lapsed_at_ms: Option<i64>,
}

/// The applied state of an etcd member.
#[derive(Clone, Debug)]
pub struct EtcdStore {
    policy: EtcdPolicy,
    keys: KeySpace,
    lessor: Lessor,
    /// Every lock call's key by (lock, token), until the key is deleted and the call answered.
    calls: BTreeMap<(String, u64), LockKey>,
    /// The token of every lock call applied, by (client, request): a call applied again (a
    /// duplicated message) is the same call, as etcd's `Lock` with the same lease finds the
    /// same key.
    lock_calls: BTreeMap<(String, u64), u64>,
}

impl EtcdStore {
    /// An empty store.
    pub fn new(policy: EtcdPolicy) -> Self {
        EtcdStore {
            policy,
            keys: KeySpace::default(),
            lessor: Lessor::default(),
            calls: BTreeMap::new(),
            lock_calls: BTreeMap::new(),
        }
    }

    /// The key space.
    pub fn keys(&self) -> &KeySpace {
        &self.keys
    }

    /// The holders whose lock call returned and whose key still exists: (lock, holder, token).
    pub fn holders(&self) -> Vec<(String, String, u64)> {
        self.calls
            .iter()
            .filter(|(_, call)| call.held && self.keys.get(&call.key).is_some())
            .map(|((lock, token), call)| (lock.clone(), call.client.clone(), *token))
            .collect()
    }

    fn prefix(lock: &str) -> String {
        format!("{lock}/")
    }

    fn lock(
        &mut self,
        client: &str,
        request: u64,
        lock: &str,
        ttl_ms: u64,
        attempt: Attempt,
        now_ms: i64,
    ) -> Applied {
        let ttl_ms = ttl_ms.min(self.policy.max_ttl_ms);
        let op = Request::Lock {
            lock: lock.to_owned(),
            ttl_ms,
            attempt,
        };
        if let Some(&token) = self.lock_calls.get(&(client.to_owned(), request)) {
            // Applied before: nothing new, and no answer (the first application gave it).
            let again = Outcome::Lock(AcquireOutcome::Queued { token });
            return Applied {
                what: client_applied(client, request, op, again, None, false),
                ended: Vec::new(),
                turns: Vec::new(),
            };
        }
        let lease = self.lessor.grant(ttl_ms, now_ms);
        // etcd names the key by the lease id in hex.
        let key = format!("{}{lease:x}", Self::prefix(lock));
        let token = self.keys.put(&key, client, Some(lease)).create_revision;
        self.lessor.attach(lease, &key);
        let held = !self.keys.any_created_before(&Self::prefix(lock), token);
        let outcome = if held {
            AcquireOutcome::Granted {
                token,
                expires_at_ms: now_ms.saturating_add_unsigned(ttl_ms),
            }
        } else {
            AcquireOutcome::Queued { token }
        };
        let call = LockKey {
            client: client.to_owned(),
            request,
            attempt,
            key,
            lease,
            ttl_ms,
            held,
            lapsed_at_ms: None,
        };
        self.calls.insert((lock.to_owned(), token), call);
        self.lock_calls.insert((client.to_owned(), request), token);
        Applied {
            what: client_applied(
                client,
                request,
                op,
                Outcome::Lock(outcome),
                held.then_some(ttl_ms),
                held,
            ),
            ended: Vec::new(),
            turns: Vec::new(),
        }
    }

    /// `client`'s lock call for (`lock`, `token`), if its key exists.
    fn call(&self, lock: &str, token: u64, client: &str) -> Option<&LockKey> {
        self.calls
            .get(&(lock.to_owned(), token))
            .filter(|call| call.client == client)
            .filter(|call| self.keys.get(&call.key).is_some())
    }

    /// A keepalive of the session lease of `client`'s lock key with `token`, held or still
    /// blocked (a session keeps its lease alive while its lock call waits). Returns the
    /// answer, and the TTL it promises a holder (`None` for a waiter or a refusal).
    fn keep_alive(
        &mut self,
        client: &str,
        lock: &str,
        token: u64,
        now_ms: i64,
    ) -> (RenewOutcome, Option<u64>) {
        let Some(call) = self.call(lock, token, client) else {
            return (RenewOutcome::Lost, None);
        };
        let (lease, ttl_ms, held) = (call.lease, call.ttl_ms, call.held);
        match self.lessor.keep_alive(lease, now_ms) {
            Some(expires_at_ms) => (
                RenewOutcome::Renewed { expires_at_ms },
                held.then_some(ttl_ms),
            ),
            None => (RenewOutcome::Lost, None),
        }
    }

    /// Revoke `lease`: delete its keys, and answer the lock calls whose turn that brings.
    fn revoke(&mut self, lease: LeaseId, now_ms: i64, applied: &mut Applied) {
        let Some(revoked) = self.lessor.revoke(lease) else {
            return;
        };
        for key in &revoked.keys {
            let Some(kv) = self.keys.delete(key) else {
                continue;
            };
            let Some((lock, _)) = key.rsplit_once('/') else {
                continue;
            };
            let lock = lock.to_owned();
            let id = (lock.clone(), kv.create_revision);
            if let Some(call) = self.calls.get_mut(&id) {
                if call.held {
                    applied.ended.push(Ended {
                        lock: lock.clone(),
                        holder: call.client.clone(),
                        token: kv.create_revision,
                        expires_at_ms: revoked.expires_at_ms,
                    });
                    self.calls.remove(&id);
                } else {
                    // A blocked call's key is gone with its lease; the call blocks on.
                    call.lapsed_at_ms = Some(revoked.expires_at_ms);
                }
            }
            // Every lock whose prefix holds the key waits on it: `a/b`'s keys are under `a/`
            // too, as etcd's watch of the prefix sees them.
            for waiting in self.waiting_locks() {
                if key.starts_with(&Self::prefix(&waiting)) {
                    self.take_turns(&waiting, now_ms, &mut applied.turns);
                }
            }
        }
    }

    /// The locks with a blocked call, in order.
    fn waiting_locks(&self) -> Vec<String> {
        let mut locks: Vec<String> = self
            .calls
            .iter()
            .filter(|(_, call)| !call.held)
            .map(|((lock, _), _)| lock.clone())
            .collect();
        locks.dedup();
        locks
    }

    /// Answer every blocked call on `lock` with no key created before its own left, in token
    /// order: it holds if its key still exists; if its lease expired while it waited, its call
    /// fails, or (etcd 3.4.3) returns as if it held.
    fn take_turns(&mut self, lock: &str, now_ms: i64, turns: &mut Vec<Turn>) {
        let prefix = Self::prefix(lock);
        let waiting: Vec<u64> = self
            .calls
            .range((lock.to_owned(), 0)..=(lock.to_owned(), u64::MAX))
            .filter(|(_, call)| !call.held)
            .map(|((_, token), _)| *token)
            .collect();
        for token in waiting {
            if self.keys.any_created_before(&prefix, token) {
                break;
            }
            let id = (lock.to_owned(), token);
            let Some(call) = self.calls.get_mut(&id) else {
                continue;
            };
            let lease = self.lessor.get(call.lease).map(|l| l.expires_at_ms);
            let key_exists = self.keys.get(&call.key).is_some();
            let outcome = match lease {
                Some(expires_at_ms) if key_exists => AcquireOutcome::Granted {
                    token,
                    expires_at_ms,
                },
                // Its key went with its lease: the check a fixed etcd makes.
                _ if self.policy.lock_checks_own_key => AcquireOutcome::WaiterExpired { token },
                _ => AcquireOutcome::Granted {
                    token,
                    expires_at_ms: call.lapsed_at_ms.or(lease).unwrap_or_default(),
                },
            };
            let granted = matches!(outcome, AcquireOutcome::Granted { .. });
            turns.push(Turn {
                lock: lock.to_owned(),
                client: call.client.clone(),
                request: call.request,
                attempt: call.attempt,
                // What is left of its lease: kept alive while it waited, it runs out sooner than
                // a whole TTL from now.
                ttl_ms: lease.map_or(0, |at| at.saturating_sub(now_ms).max(0) as u64),
                outcome,
                lapsed_at_ms: call.lapsed_at_ms.filter(|_| granted),
            });
            if granted && key_exists {
                call.held = true;
            } else {
                // A lapsed waiter's call is over, answered either way: its key is gone.
                self.calls.remove(&id);
            }
        }
    }

    fn apply_client(&mut self, client: String, request: u64, op: Request, now_ms: i64) -> Applied {
        match op {
            Request::Lock {
                lock,
                ttl_ms,
                attempt,
            } => self.lock(&client, request, &lock, ttl_ms, attempt, now_ms),
            Request::KeepAlive { ref lock, token } => {
                let (outcome, ttl_ms) = self.keep_alive(&client, lock, token, now_ms);
                Applied {
                    what: client_applied(
                        &client,
                        request,
                        op,
                        Outcome::KeepAlive(outcome),
                        ttl_ms,
                        false,
                    ),
                    ended: Vec::new(),
                    turns: Vec::new(),
                }
            }
            Request::Unlock { ref lock, token } => {
                // etcd's unlock deletes the key whoever holds it; here only the caller's own
                // key, held, or blocked and given up (then no lock ends with it).
                let call = self.call(lock, token, &client);
                let (lease, held) = match call {
                    Some(call) => (Some(call.lease), call.held),
                    None => (None, false),
                };
                let outcome = match lease {
                    Some(_) => ReleaseOutcome::Released,
                    None => ReleaseOutcome::NotHolder,
                };
                let mut applied = Applied {
                    what: client_applied(
                        &client,
                        request,
                        op.clone(),
                        Outcome::Unlock(outcome),
                        None,
                        held,
                    ),
                    ended: Vec::new(),
                    turns: Vec::new(),
                };
                if let Some(lease) = lease {
                    if !held {
                        self.calls.remove(&(lock.clone(), token));
                    }
                    self.revoke(lease, now_ms, &mut applied);
                    // The unlock is the release itself, not an end to record beside it.
                    applied
                        .ended
                        .retain(|e| !(e.lock == *lock && e.token == token));
                }
                applied
            }
        }
    }

    fn apply_revoke(&mut self, lease: LeaseId, now_ms: i64, term: u64, entry_term: u64) -> Applied {
        let expired = self
            .lessor
            .get(lease)
            .is_some_and(|l| l.expires_at_ms <= now_ms);
        // A revocation decided by a deposed leader, or of a lease kept alive since, is refused.
        if !expired || term != entry_term {
            return Applied {
                what: AppliedKind::RevokeRefused { lease },
                ended: Vec::new(),
                turns: Vec::new(),
            };
        }
        let mut applied = Applied {
            what: AppliedKind::Revoked {
                lease,
                decided_at_ms: now_ms,
            },
            ended: Vec::new(),
            turns: Vec::new(),
        };
        self.revoke(lease, now_ms, &mut applied);
        applied
    }
}

/// A client request's entry; it was about a held lock if it promised a TTL or `held`.
fn client_applied(
    client: &str,
    request: u64,
    op: Request,
    outcome: Outcome,
    ttl_ms: Option<u64>,
    held: bool,
) -> AppliedKind {
    AppliedKind::Client {
        client: client.to_owned(),
        request,
        op,
        outcome,
        held: held || ttl_ms.is_some(),
        ttl_ms,
    }
}

impl StateMachine for EtcdStore {
    type Command = Command;
    type Applied = Applied;
    type LeaseId = LeaseId;

    fn expired(&self, now_ms: i64) -> Vec<LeaseId> {
        self.lessor.expired(now_ms)
    }

    fn revoke(&self, lease: &LeaseId, now_ms: i64, term: u64) -> Command {
        Command::Revoke {
            lease: *lease,
            now_ms,
            term,
        }
    }

    fn promote(&self, now_ms: i64) -> Option<Command> {
        Some(Command::Promote { now_ms })
    }

    fn apply(&mut self, _index: u64, entry_term: u64, command: Command) -> Applied {
        match command {
            Command::Client {
                client,
                request,
                op,
                now_ms,
            } => self.apply_client(client, request, op, now_ms),
            Command::Revoke {
                lease,
                now_ms,
                term,
            } => self.apply_revoke(lease, now_ms, term, entry_term),
            Command::Promote { now_ms } => {
                self.lessor.promote(now_ms);
                Applied {
                    what: AppliedKind::Promoted,
                    ended: Vec::new(),
                    turns: Vec::new(),
                }
            }
        }
    }

    fn revocation_settled(applied: &Applied) -> Option<LeaseId> {
        match applied.what {
            AppliedKind::Revoked { lease, .. } | AppliedKind::RevokeRefused { lease } => {
                Some(lease)
            }
            AppliedKind::Client { .. } | AppliedKind::Promoted => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(lock_checks_own_key: bool) -> EtcdStore {
        EtcdStore::new(EtcdPolicy {
            max_ttl_ms: 10_000,
            lock_checks_own_key,
        })
    }

    fn attempt() -> Attempt {
        Attempt {
            incarnation: 1,
            number: 1,
        }
    }

    fn apply(s: &mut EtcdStore, client: &str, request: u64, op: Request, now_ms: i64) -> Applied {
        let command = Command::Client {
            client: client.into(),
            request,
            op,
            now_ms,
        };
        StateMachine::apply(s, request, 1, command)
    }

    fn lock(s: &mut EtcdStore, client: &str, request: u64, now_ms: i64) -> AcquireOutcome {
        let op = Request::Lock {
            lock: "l".into(),
            ttl_ms: 1_000,
            attempt: attempt(),
        };
        match apply(s, client, request, op, now_ms).what {
            AppliedKind::Client {
                outcome: Outcome::Lock(o),
                ..
            } => o,
            other => panic!("{other:?}"),
        }
    }

    fn expire(s: &mut EtcdStore, now_ms: i64) -> Applied {
        let due = s.expired(now_ms);
        assert_eq!(due.len(), 1, "{due:?}");
        let revoke = StateMachine::revoke(s, &due[0], now_ms, 1);
        StateMachine::apply(s, 99, 1, revoke)
    }

    #[test]
    fn the_first_caller_holds_with_its_keys_create_revision_and_the_next_blocks() {
        let mut s = store(true);
        let first = lock(&mut s, "a", 1, 0);
        assert_eq!(
            first,
            AcquireOutcome::Granted {
                token: 1,
                expires_at_ms: 1_000
            }
        );
        assert_eq!(
            lock(&mut s, "b", 2, 10),
            AcquireOutcome::Queued { token: 2 }
        );
        assert_eq!(s.holders(), [("l".into(), "a".into(), 1)]);
        // a's unlock deletes its key (revision 3) and b's turn comes.
        let unlock = Request::Unlock {
            lock: "l".into(),
            token: 1,
        };
        let applied = apply(&mut s, "a", 3, unlock, 500);
        assert!(
            applied.ended.is_empty(),
            "an unlock is a release, not an end"
        );
        let [turn] = &applied.turns[..] else {
            panic!("{applied:?}")
        };
        assert_eq!((turn.client.as_str(), turn.request), ("b", 2));
        assert_eq!(
            turn.outcome,
            AcquireOutcome::Granted {
                token: 2,
                expires_at_ms: 1_010
            }
        );
        // Its grant promises what is left of its lease (1 010 - 500), not a whole TTL.
        assert_eq!(turn.ttl_ms, 510);
        assert_eq!(s.keys().revision(), 3);
        // The next lock call's key is revision 4: tokens grow with every write.
        assert_eq!(
            lock(&mut s, "c", 4, 600),
            AcquireOutcome::Queued { token: 4 }
        );
    }

    #[test]
    fn a_waiter_whose_lease_expired_fails_its_turn_unless_the_recipe_does_not_check() {
        for checks in [true, false] {
            let mut s = store(checks);
            lock(&mut s, "a", 1, 0);
            lock(&mut s, "b", 2, 10);
            // a keeps its lease alive; b's expires while it waits, and its key goes with it
            // (revision 3), so c's key is revision 4.
            let keep = Request::KeepAlive {
                lock: "l".into(),
                token: 1,
            };
            apply(&mut s, "a", 3, keep, 900);
            let expired = expire(&mut s, 1_010);
            assert!(expired.turns.is_empty() && expired.ended.is_empty());
            lock(&mut s, "c", 4, 1_100);
            let unlock = Request::Unlock {
                lock: "l".into(),
                token: 1,
            };
            let turns = apply(&mut s, "a", 5, unlock, 1_200).turns;
            let outcomes: Vec<_> = turns
                .iter()
                .map(|t| (t.client.as_str(), &t.outcome))
                .collect();
            let lapsed = if checks {
                AcquireOutcome::WaiterExpired { token: 2 }
            } else {
                AcquireOutcome::Granted {
                    token: 2,
                    expires_at_ms: 1_010,
                }
            };
            let c = AcquireOutcome::Granted {
                token: 4,
                expires_at_ms: 2_100,
            };
            assert_eq!(outcomes, [("b", &lapsed), ("c", &c)], "checks {checks}");
            assert_eq!(turns[0].lapsed_at_ms, (!checks).then_some(1_010));
            // Only c holds: b's key is gone either way.
            assert_eq!(s.holders(), [("l".into(), "c".into(), 4)]);
        }
    }

    #[test]
    fn a_holders_expired_lease_ends_its_lock_and_a_stale_revocation_is_refused() {
        let mut s = store(true);
        lock(&mut s, "a", 1, 0);
        // Proposed at 1 000 in term 1 but applied in term 2: a deposed leader's decision.
        let revoke = StateMachine::revoke(&s, &1, 1_000, 1);
        let refused = StateMachine::apply(&mut s, 2, 2, revoke);
        assert_eq!(refused.what, AppliedKind::RevokeRefused { lease: 1 });
        let ended = expire(&mut s, 1_000).ended;
        assert_eq!(
            ended,
            [Ended {
                lock: "l".into(),
                holder: "a".into(),
                token: 1,
                expires_at_ms: 1_000
            }]
        );
        let keep = Request::KeepAlive {
            lock: "l".into(),
            token: 1,
        };
        let AppliedKind::Client { outcome, .. } = apply(&mut s, "a", 3, keep, 1_001).what else {
            panic!()
        };
        assert_eq!(outcome, Outcome::KeepAlive(RenewOutcome::Lost));
    }
}
