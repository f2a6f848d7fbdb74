//! The replicated lease state machine: the lease table driven by commands from a replicated log.
//!
//! Every replica applies the same committed commands in the same order and so reaches the same
//! table. The leader stamps its clock reading into each command, so expiry decisions do not
//! depend on the applying replica's clock. The fencing token of a grant is the log index of the
//! committed acquire, as etcd uses a key's creation revision: it grows with the log, so no
//! failover can issue the same or a lower token (Chubby sequencers; etcd revisions).
//!
//! Two knobs keep the unsafe variants of the design available for scenarios:
//! - `revoke_term_check`: a revocation (TTL expiry decided by a leader) is applied only if it was
//!   proposed in the term of the entry that carries it, and only if the lease is still expired
//!   by the proposer's stamp. Without it, a deposed leader that wakes from a stall and still
//!   proposes revocations has them forwarded and applied (case K08).
//! - `leader_change`: `Extend` makes a new leader's first command extend every lease by its TTL
//!   from the new leader's clock, so no lease the old leader granted can look expired early
//!   (etcd's lessor promotion). `None` keeps the old leader's expiry times.

use serde::{Deserialize, Serialize};

use crate::service::{AcquireOutcome, LeaseConfig, LeaseService, ReleaseOutcome, RenewOutcome};
use crate::Lease;

/// What a new leader does to leases granted under earlier leaders.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum LeaderChange {
    /// Extend every lease by its TTL from the new leader's clock (safe).
    Extend,
    /// Keep the old expiry times (defect: a new leader whose clock runs ahead expires leases the
    /// old leader still honours).
    None,
}

/// The safety knobs of the replicated design.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub struct ReplicationPolicy {
    /// Refuse revocations proposed by a deposed leader (safe: `true`; case K08: `false`).
    pub revoke_term_check: bool,
    /// What a new leader does first.
    pub leader_change: LeaderChange,
}

/// A client's request, as replicated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub enum ClientOp {
    /// Acquire `lock` for `ttl_ms` (capped).
    Acquire {
        /// The lock.
        lock: String,
        /// Requested TTL, ms.
        ttl_ms: u64,
    },
    /// Renew the lease with `token`.
    Renew {
        /// The lock.
        lock: String,
        /// Its token.
        token: u64,
    },
    /// Release the lease with `token`.
    Release {
        /// The lock.
        lock: String,
        /// Its token.
        token: u64,
    },
}

impl ClientOp {
    /// The lock the request is about.
    pub fn lock(&self) -> &str {
        match self {
            ClientOp::Acquire { lock, .. }
            | ClientOp::Renew { lock, .. }
            | ClientOp::Release { lock, .. } => lock,
        }
    }
}

/// An entry of the replicated log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub enum Command {
    /// A client's request, stamped by the leader that proposed it.
    Client {
        /// The client (holder) name.
        client: String,
        /// The client's request id, to route the answer.
        request: u64,
        /// What it asks.
        op: ClientOp,
        /// The proposing leader's clock, local ms.
        now_ms: i64,
    },
    /// A leader decided that the lease on `lock` with `token` has expired by its clock.
    Revoke {
        /// The lock.
        lock: String,
        /// The lease's token.
        token: u64,
        /// The proposer's clock, local ms.
        now_ms: i64,
        /// The term in which the proposer was leader when it decided.
        term: u64,
    },
    /// A new leader's first command (with `LeaderChange::Extend`).
    Promote {
        /// The new leader's clock, local ms.
        now_ms: i64,
    },
}

/// The answer to a client's command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub enum ClientOutcome {
    /// Of an acquire.
    Acquire(AcquireOutcome),
    /// Of a renew.
    Renew(RenewOutcome),
    /// Of a release.
    Release(ReleaseOutcome),
}

/// What applying one entry changed, for the history.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Applied {
    /// A client command; `outcome` is also the reply.
    Client {
        /// Who asked.
        client: String,
        /// Its request id.
        request: u64,
        /// What it asked.
        op: ClientOp,
        /// The answer.
        outcome: ClientOutcome,
        /// A lease the command found expired by its stamp and ended before acting (an acquire
        /// may take over a lease no revocation has ended yet).
        expired: Option<Lease>,
    },
    /// A lease was revoked as expired.
    Revoked {
        /// The lock.
        lock: String,
        /// The lease as it was.
        lease: Lease,
        /// The proposer's clock when it decided, local ms (below `lease.expires_at_ms` only
        /// when a revocation was applied unchecked: the K08 defect).
        decided_at_ms: i64,
    },
    /// A revocation was refused (stale term, or the lease had been renewed or released).
    RevokeRefused {
        /// The lock.
        lock: String,
        /// The token it named.
        token: u64,
    },
    /// A new leader extended every lease.
    Promoted,
}

/// The lease table as the replicated log builds it.
#[derive(Clone, Debug, Hash)]
pub struct ReplicatedLeases {
    service: LeaseService,
    policy: ReplicationPolicy,
}

impl ReplicatedLeases {
    /// An empty table.
    pub fn new(config: LeaseConfig, policy: ReplicationPolicy) -> Self {
        ReplicatedLeases {
            service: LeaseService::new(config),
            policy,
        }
    }

    /// The applied table.
    pub fn service(&self) -> &LeaseService {
        &self.service
    }

    /// The knobs.
    pub fn policy(&self) -> ReplicationPolicy {
        self.policy
    }

    /// Apply the committed `command` found at log `index`, written in term `entry_term`.
    pub fn apply(&mut self, index: u64, entry_term: u64, command: Command) -> Applied {
        match command {
            Command::Client {
                client,
                request,
                op,
                now_ms,
            } => {
                let lock = op.lock().to_owned();
                let expired = self
                    .service
                    .lease(&lock)
                    .filter(|l| now_ms >= l.expires_at_ms)
                    .is_some()
                    .then(|| self.service.remove(&lock))
                    .flatten();
                let outcome = self.apply_client(index, &client, op.clone(), now_ms);
                Applied::Client {
                    client,
                    request,
                    op,
                    outcome,
                    expired,
                }
            }
            Command::Revoke {
                lock,
                token,
                now_ms,
                term,
            } => self.apply_revoke(lock, token, now_ms, term, entry_term),
            Command::Promote { now_ms } => {
                self.service.extend_all(now_ms);
                Applied::Promoted
            }
        }
    }

    fn apply_client(
        &mut self,
        index: u64,
        client: &str,
        op: ClientOp,
        now_ms: i64,
    ) -> ClientOutcome {
        match op {
            ClientOp::Acquire { lock, ttl_ms } => ClientOutcome::Acquire(
                self.service
                    .acquire_with_token(&lock, client, ttl_ms, now_ms, index),
            ),
            ClientOp::Renew { lock, token } => {
                ClientOutcome::Renew(self.service.renew(&lock, client, token, now_ms))
            }
            ClientOp::Release { lock, token } => {
                ClientOutcome::Release(self.service.release(&lock, client, token, now_ms))
            }
        }
    }

    fn apply_revoke(
        &mut self,
        lock: String,
        token: u64,
        now_ms: i64,
        term: u64,
        entry_term: u64,
    ) -> Applied {
        let lease = self
            .service
            .lease(&lock)
            .filter(|l| l.token == token)
            .cloned();
        let allowed = match &lease {
            None => false,
            // The fix for K08: only the leader of the entry's own term may revoke, and only a
            // lease that its stamp shows expired (a renewal applied since wins).
            Some(l) if self.policy.revoke_term_check => {
                term == entry_term && now_ms >= l.expires_at_ms
            }
            Some(_) => true,
        };
        match (allowed, lease) {
            (true, Some(lease)) => {
                self.service.remove(&lock);
                Applied::Revoked {
                    lock,
                    lease,
                    decided_at_ms: now_ms,
                }
            }
            _ => Applied::RevokeRefused { lock, token },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(revoke_term_check: bool) -> ReplicatedLeases {
        let policy = ReplicationPolicy {
            revoke_term_check,
            leader_change: LeaderChange::Extend,
        };
        ReplicatedLeases::new(LeaseConfig { max_ttl_ms: 1_000 }, policy)
    }

    fn acquire(client: &str, now_ms: i64) -> Command {
        Command::Client {
            client: client.into(),
            request: 1,
            op: ClientOp::Acquire {
                lock: "l".into(),
                ttl_ms: 1_000,
            },
            now_ms,
        }
    }

    #[test]
    fn tokens_are_log_indexes() {
        let mut t = table(true);
        let applied = t.apply(7, 2, acquire("a", 0));
        let Applied::Client {
            outcome: ClientOutcome::Acquire(AcquireOutcome::Granted { token, .. }),
            ..
        } = applied
        else {
            panic!("{applied:?}")
        };
        assert_eq!(token, 7);
    }

    #[test]
    fn a_deposed_leaders_revoke_is_refused_only_with_the_term_check() {
        for (check, revoked) in [(true, false), (false, true)] {
            let mut t = table(check);
            t.apply(3, 1, acquire("a", 0));
            // The new leader (term 2) renewed the lease; the old leader (term 1) revokes it.
            let renew = Command::Client {
                client: "a".into(),
                request: 2,
                op: ClientOp::Renew {
                    lock: "l".into(),
                    token: 3,
                },
                now_ms: 900,
            };
            t.apply(4, 2, renew);
            let applied = t.apply(
                5,
                2,
                Command::Revoke {
                    lock: "l".into(),
                    token: 3,
                    now_ms: 1_200,
                    term: 1,
                },
            );
            assert_eq!(
                matches!(applied, Applied::Revoked { .. }),
                revoked,
                "term check {check}: {applied:?}"
            );
        }
    }

    #[test]
    fn a_revoke_loses_to_a_renewal_applied_before_it() {
        let mut t = table(true);
        t.apply(1, 1, acquire("a", 0));
        let renew = Command::Client {
            client: "a".into(),
            request: 2,
            op: ClientOp::Renew {
                lock: "l".into(),
                token: 1,
            },
            now_ms: 900,
        };
        t.apply(2, 1, renew);
        let applied = t.apply(
            3,
            1,
            Command::Revoke {
                lock: "l".into(),
                token: 1,
                now_ms: 1_000,
                term: 1,
            },
        );
        assert_eq!(
            applied,
            Applied::RevokeRefused {
                lock: "l".into(),
                token: 1
            }
        );
        let applied = t.apply(
            4,
            1,
            Command::Revoke {
                lock: "l".into(),
                token: 1,
                now_ms: 1_900,
                term: 1,
            },
        );
        assert!(matches!(applied, Applied::Revoked { .. }), "{applied:?}");
    }

    #[test]
    fn promotion_extends_every_lease_from_the_new_leaders_clock() {
        let mut t = table(true);
        t.apply(1, 1, acquire("a", 0));
        t.apply(2, 2, Command::Promote { now_ms: 5_000 });
        assert_eq!(t.service().lease("l").map(|l| l.expires_at_ms), Some(6_000));
    }
}
