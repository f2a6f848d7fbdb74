//! The single-node lease table: one lease per lock, one token counter per lock.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Settings of a [`LeaseService`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub struct LeaseConfig {
    /// The longest TTL the service grants, in local-clock ms. A client asking for more gets
    /// this much (the service caps, it does not refuse), as etcd caps lease TTLs.
    pub max_ttl_ms: u64,
}

/// A granted lease, as the service sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub struct Lease {
    /// Who holds it (a client name).
    pub holder: String,
    /// The fencing token issued with the grant.
    pub token: u64,
    /// The TTL granted (after capping), in local-clock ms; renewals extend by this much.
    pub ttl_ms: u64,
    /// Local-clock ms at which the lease stops being valid: valid while `now_ms < expires_at_ms`.
    pub expires_at_ms: i64,
}

/// The answer to [`LeaseService::acquire`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub enum AcquireOutcome {
    /// The caller now holds the lock.
    Granted {
        /// A token greater than every token this lock issued before.
        token: u64,
        /// Local-clock ms at which the new lease expires.
        expires_at_ms: i64,
    },
    /// The service is in its restart grace and grants nothing before `until_ms` (local ms).
    Recovering {
        /// When grants resume, local-clock ms.
        until_ms: i64,
    },
    /// The lock is held and the caller now waits in its queue (a blocking acquire, see
    /// [`crate::wait_queue`]); `token` is its queue entry's, and the grant or the refusal
    /// comes later, as a second answer to the same request.
    Queued {
        /// The token the waiter's entry took when it joined the queue.
        token: u64,
    },
    /// The waiter's own lease ran out while it waited, so the service dropped it from the
    /// queue: its acquire fails (the correct answer in case K07).
    WaiterExpired {
        /// The token its entry had.
        token: u64,
    },
    /// Someone holds an unexpired lease (possibly the caller itself: leases are not reentrant).
    Held {
        /// The current holder.
        holder: String,
        /// The current lease's token (a lock entry's sequence number, which a client that finds
        /// its own name may wrongly take for its lock, case K13).
        token: u64,
        /// When the current lease expires unless renewed, local-clock ms.
        expires_at_ms: i64,
    },
}

/// The answer to [`LeaseService::renew`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub enum RenewOutcome {
    /// The lease was extended to `expires_at_ms` (local-clock ms).
    Renewed {
        /// The new expiry.
        expires_at_ms: i64,
    },
    /// The caller does not hold an unexpired lease with that token: it must stop acting as holder.
    Lost,
}

/// The answer to [`LeaseService::release`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub enum ReleaseOutcome {
    /// The lease ended; the lock is free.
    Released,
    /// The caller does not hold an unexpired lease with that token; nothing changed. Release is
    /// a compare-and-delete on (holder, token), never an unconditional delete (cases K19).
    NotHolder,
}

/// A lease that [`LeaseService::expire_due`] just ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub struct Expired {
    /// The lock it was on.
    pub lock: String,
    /// The lease as it was when it expired.
    pub lease: Lease,
}

/// One lock's record: what a service persists and restores.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub struct LockRecord {
    /// The last token issued for this lock (0: none yet). Only ever grows while the service runs.
    pub last_token: u64,
    /// The current lease, if any (possibly expired but not yet reaped).
    pub lease: Option<Lease>,
}

/// The whole lease table, by lock name: the service's persistent state.
pub type LeaseTable = BTreeMap<String, LockRecord>;

/// A single-node lease service: a table of locks, each with at most one lease.
///
/// Invariants: per lock, tokens are issued in strictly increasing order and never twice; at any
/// `now_ms` at most one unexpired lease exists per lock.
#[derive(Clone, Debug, Hash)]
pub struct LeaseService {
    config: LeaseConfig,
    locks: LeaseTable,
    /// No grant before this local-clock ms (a restart grace), if set.
    recovering_until_ms: Option<i64>,
}

impl LeaseService {
    /// A service with no locks.
    pub fn new(config: LeaseConfig) -> Self {
        Self::from_table(config, LeaseTable::new())
    }

    /// A service resuming from a persisted table (after a restart or a restore).
    pub fn from_table(config: LeaseConfig, locks: LeaseTable) -> Self {
        Self {
            config,
            locks,
            recovering_until_ms: None,
        }
    }

    /// The table as it stands, to persist.
    pub fn table(&self) -> &LeaseTable {
        &self.locks
    }

    /// Refuse every grant until local-clock `until_ms`: after losing state, a service that
    /// waits out one maximum TTL cannot hand out a lock an old holder may still use (case K17).
    pub fn recover_until(&mut self, until_ms: i64) {
        self.recovering_until_ms = Some(until_ms);
    }

    /// When the restart grace ends, if it is still on at `now_ms` (local-clock ms).
    pub fn recovering_until(&self, now_ms: i64) -> Option<i64> {
        self.recovering_until_ms.filter(|u| now_ms < *u)
    }

    /// The service's settings.
    pub fn config(&self) -> LeaseConfig {
        self.config
    }

    /// Grant `lock` to `holder` for `ttl_ms` (capped at `max_ttl_ms`) unless an unexpired lease
    /// exists. An expired lease that [`Self::expire_due`] has not reaped yet does not block.
    pub fn acquire(
        &mut self,
        lock: &str,
        holder: &str,
        ttl_ms: u64,
        now_ms: i64,
    ) -> AcquireOutcome {
        let ttl_ms = ttl_ms.min(self.config.max_ttl_ms);
        if let Some(until_ms) = self.recovering_until_ms.filter(|u| now_ms < *u) {
            return AcquireOutcome::Recovering { until_ms };
        }
        let state = self.locks.entry(lock.to_owned()).or_default();
        if let Some(lease) = state.lease.as_ref().filter(|l| now_ms < l.expires_at_ms) {
            return AcquireOutcome::Held {
                holder: lease.holder.clone(),
                token: lease.token,
                expires_at_ms: lease.expires_at_ms,
            };
        }
        state.last_token += 1;
        let expires_at_ms = now_ms.saturating_add_unsigned(ttl_ms);
        state.lease = Some(Lease {
            holder: holder.to_owned(),
            token: state.last_token,
            ttl_ms,
            expires_at_ms,
        });
        AcquireOutcome::Granted {
            token: state.last_token,
            expires_at_ms,
        }
    }

    /// Like [`Self::acquire`], but the token is `token` (a replicated log's index) instead of the
    /// next counter value. Panics unless `token` is above every token issued for `lock`: the
    /// caller guarantees it (log indexes only grow).
    pub fn acquire_with_token(
        &mut self,
        lock: &str,
        holder: &str,
        ttl_ms: u64,
        now_ms: i64,
        token: u64,
    ) -> AcquireOutcome {
        let last = self.last_token(lock);
        assert!(
            token > last,
            "token {token} is not above the last token {last} of {lock:?}"
        );
        if let Some(state) = self.locks.get_mut(lock) {
            state.last_token = token - 1;
        } else {
            self.locks.insert(
                lock.to_owned(),
                LockRecord {
                    last_token: token - 1,
                    lease: None,
                },
            );
        }
        let outcome = self.acquire(lock, holder, ttl_ms, now_ms);
        if !matches!(outcome, AcquireOutcome::Granted { .. }) {
            // Nothing was issued: keep the counter where it was.
            if let Some(state) = self.locks.get_mut(lock) {
                state.last_token = last;
            }
        }
        outcome
    }

    /// Extend every lease to at least `now_ms` + its TTL (a new leader's promotion).
    pub fn extend_all(&mut self, now_ms: i64) {
        for lease in self.locks.values_mut().filter_map(|s| s.lease.as_mut()) {
            lease.expires_at_ms = lease
                .expires_at_ms
                .max(now_ms.saturating_add_unsigned(lease.ttl_ms));
        }
    }

    /// The locks whose lease `holder` has in the table, in lock-name order (live or expired
    /// but not yet reaped).
    pub fn locks_held_by(&self, holder: &str) -> Vec<String> {
        self.locks
            .iter()
            .filter(|(_, s)| s.lease.as_ref().is_some_and(|l| l.holder == holder))
            .map(|(lock, _)| lock.clone())
            .collect()
    }

    /// End the lease on `lock` whatever its state (a revocation decided elsewhere).
    pub fn remove(&mut self, lock: &str) -> Option<Lease> {
        self.locks.get_mut(lock).and_then(|s| s.lease.take())
    }

    /// Extend the caller's lease by its TTL from `now_ms`, if the caller holds `lock` with
    /// `token` and the lease has not expired.
    pub fn renew(&mut self, lock: &str, holder: &str, token: u64, now_ms: i64) -> RenewOutcome {
        match self.live_lease_mut(lock, holder, token, now_ms) {
            Some(lease) => {
                lease.expires_at_ms = now_ms.saturating_add_unsigned(lease.ttl_ms);
                RenewOutcome::Renewed {
                    expires_at_ms: lease.expires_at_ms,
                }
            }
            None => RenewOutcome::Lost,
        }
    }

    /// End the caller's lease, if the caller holds `lock` with `token` and it has not expired.
    pub fn release(&mut self, lock: &str, holder: &str, token: u64, now_ms: i64) -> ReleaseOutcome {
        if self.live_lease_mut(lock, holder, token, now_ms).is_none() {
            return ReleaseOutcome::NotHolder;
        }
        if let Some(state) = self.locks.get_mut(lock) {
            state.lease = None;
        }
        ReleaseOutcome::Released
    }

    /// End whatever lease `lock` has, whoever holds it, and return it: the unconditional
    /// `DEL lock` of case K19, a defect a scenario switches on with `release =
    /// "unconditional"`. [`Self::release`] is the correct compare-and-delete.
    pub fn release_unconditional(&mut self, lock: &str) -> Option<Lease> {
        self.locks
            .get_mut(lock)
            .and_then(|state| state.lease.take())
    }

    /// Remove and return every lease with `expires_at_ms <= now_ms`, in lock-name order.
    pub fn expire_due(&mut self, now_ms: i64) -> Vec<Expired> {
        let mut expired = Vec::new();
        for (lock, state) in &mut self.locks {
            if state
                .lease
                .as_ref()
                .is_some_and(|l| l.expires_at_ms <= now_ms)
            {
                let lease = state.lease.take().expect("checked just above");
                expired.push(Expired {
                    lock: lock.clone(),
                    lease,
                });
            }
        }
        expired
    }

    /// The earliest `expires_at_ms` of any lease (local-clock ms), or `None` if no lease exists:
    /// the shell should call [`Self::expire_due`] once its clock reaches it.
    pub fn next_expiry(&self) -> Option<i64> {
        self.locks
            .values()
            .filter_map(|s| s.lease.as_ref().map(|l| l.expires_at_ms))
            .min()
    }

    /// The current lease on `lock`, expired or not, if [`Self::expire_due`] has not reaped it.
    pub fn lease(&self, lock: &str) -> Option<&Lease> {
        self.locks.get(lock).and_then(|s| s.lease.as_ref())
    }

    /// Take the next token of `lock` without granting anything (a queue entry's, whose grant
    /// may come later).
    pub fn issue_token(&mut self, lock: &str) -> u64 {
        let state = self.locks.entry(lock.to_owned()).or_default();
        state.last_token += 1;
        state.last_token
    }

    /// Whether `lock` has no unexpired lease at `now_ms`.
    pub fn is_free(&self, lock: &str, now_ms: i64) -> bool {
        self.lease(lock).is_none_or(|l| l.expires_at_ms <= now_ms)
    }

    /// Make `lease` the lease of `lock` (a waiter's grant), replacing an expired one.
    pub fn install(&mut self, lock: &str, lease: Lease) {
        self.locks.entry(lock.to_owned()).or_default().lease = Some(lease);
    }

    /// The last token issued for `lock` (0 if none).
    pub fn last_token(&self, lock: &str) -> u64 {
        self.locks.get(lock).map_or(0, |s| s.last_token)
    }

    fn live_lease_mut(
        &mut self,
        lock: &str,
        holder: &str,
        token: u64,
        now_ms: i64,
    ) -> Option<&mut Lease> {
        self.locks
            .get_mut(lock)?
            .lease
            .as_mut()
            .filter(|l| l.holder == holder && l.token == token && now_ms < l.expires_at_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service() -> LeaseService {
        LeaseService::new(LeaseConfig { max_ttl_ms: 10_000 })
    }

    #[test]
    fn grant_caps_ttl_and_blocks_others_until_expiry() {
        let mut s = service();
        assert_eq!(
            s.acquire("l", "a", 50_000, 100),
            AcquireOutcome::Granted {
                token: 1,
                expires_at_ms: 10_100
            }
        );
        assert_eq!(
            s.acquire("l", "b", 1_000, 10_099),
            AcquireOutcome::Held {
                holder: "a".into(),
                token: 1,
                expires_at_ms: 10_100
            }
        );
        assert_eq!(
            s.acquire("l", "b", 1_000, 10_100),
            AcquireOutcome::Granted {
                token: 2,
                expires_at_ms: 11_100
            }
        );
    }

    #[test]
    fn renew_extends_only_the_live_lease_of_the_holder() {
        let mut s = service();
        s.acquire("l", "a", 1_000, 0);
        assert_eq!(s.renew("l", "b", 1, 500), RenewOutcome::Lost);
        assert_eq!(s.renew("l", "a", 2, 500), RenewOutcome::Lost);
        assert_eq!(
            s.renew("l", "a", 1, 500),
            RenewOutcome::Renewed {
                expires_at_ms: 1_500
            }
        );
        assert_eq!(s.renew("l", "a", 1, 1_500), RenewOutcome::Lost);
    }

    #[test]
    fn release_is_compare_and_delete() {
        let mut s = service();
        s.acquire("l", "a", 1_000, 0);
        assert_eq!(s.release("l", "a", 7, 10), ReleaseOutcome::NotHolder);
        assert_eq!(s.release("l", "a", 1, 10), ReleaseOutcome::Released);
        assert_eq!(s.release("l", "a", 1, 11), ReleaseOutcome::NotHolder);
        assert!(matches!(
            s.acquire("l", "b", 1_000, 12),
            AcquireOutcome::Granted { token: 2, .. }
        ));
    }

    #[test]
    fn an_unconditional_release_ends_the_next_holders_lease() {
        let mut s = service();
        s.acquire("l", "a", 1_000, 0);
        let s_expired = s.expire_due(2_000);
        assert_eq!(s_expired.len(), 1);
        s.acquire("l", "b", 1_000, 2_000);
        // a wakes and deletes the lock: b's lease goes, though a asked.
        let ended = s.release_unconditional("l").expect("b's lease");
        assert_eq!((ended.holder.as_str(), ended.token), ("b", 2));
        assert!(matches!(
            s.acquire("l", "c", 1_000, 2_001),
            AcquireOutcome::Granted { token: 3, .. }
        ));
        assert_eq!(s.release_unconditional("nothing-here"), None);
    }

    #[test]
    fn expire_due_reaps_in_lock_order_and_next_expiry_follows() {
        let mut s = service();
        s.acquire("z", "a", 300, 0);
        s.acquire("m", "b", 200, 0);
        assert_eq!(s.next_expiry(), Some(200));
        assert!(s.expire_due(199).is_empty());
        let reaped = s.expire_due(300);
        let locks: Vec<_> = reaped.iter().map(|e| e.lock.as_str()).collect();
        assert_eq!(locks, ["m", "z"]);
        assert_eq!(s.next_expiry(), None);
        assert_eq!(s.last_token("z"), 1);
    }
}

#[cfg(test)]
mod recovery_tests {
    use super::*;

    #[test]
    fn a_restored_table_keeps_tokens_and_leases_and_grace_refuses_grants() {
        let mut s = LeaseService::new(LeaseConfig { max_ttl_ms: 1_000 });
        s.acquire("l", "a", 1_000, 0);
        let mut restarted = LeaseService::from_table(s.config(), s.table().clone());
        assert_eq!(
            restarted.renew("l", "a", 1, 500),
            RenewOutcome::Renewed {
                expires_at_ms: 1_500
            }
        );
        restarted.recover_until(3_000);
        assert_eq!(
            restarted.acquire("l", "b", 100, 2_999),
            AcquireOutcome::Recovering { until_ms: 3_000 }
        );
        assert!(matches!(
            restarted.acquire("l", "b", 100, 3_000),
            AcquireOutcome::Granted { token: 2, .. }
        ));
    }
}
