//! An asynchronously replicated lock service: a primary that answers at once and ships its
//! changes to one backup later (case K06, the replication of Redis Sentinel and of many
//! database-backed lock tables). When the primary fails, the backup is promoted with whatever
//! it had received: the latest grants, and the counter increments that came with them, are lost.
//! Sans-IO: the shell decides when replication happens and when to fail over.

use std::collections::VecDeque;

use crate::service::{AcquireOutcome, LeaseConfig, LeaseService, LeaseTable};

/// A primary with one asynchronously updated backup.
#[derive(Clone, Debug)]
pub struct AsyncReplicated {
    primary: LeaseService,
    backup: LeaseTable,
    /// Table states the primary has produced and the backup has not yet received, oldest first.
    in_flight: VecDeque<LeaseTable>,
}

impl AsyncReplicated {
    /// Empty primary and backup.
    pub fn new(config: LeaseConfig) -> Self {
        AsyncReplicated {
            primary: LeaseService::new(config),
            backup: LeaseTable::new(),
            in_flight: VecDeque::new(),
        }
    }

    /// The primary, to serve requests; call [`Self::changed`] after each one that changed it.
    pub fn primary(&mut self) -> &mut LeaseService {
        &mut self.primary
    }

    /// The primary changed: queue its state for the backup.
    pub fn changed(&mut self) {
        self.in_flight.push_back(self.primary.table().clone());
    }

    /// Deliver the `n` oldest queued states to the backup (replication catching up).
    pub fn replicate(&mut self, n: usize) {
        for _ in 0..n {
            match self.in_flight.pop_front() {
                Some(table) => self.backup = table,
                None => break,
            }
        }
    }

    /// How many changes the backup lags behind.
    pub fn lag(&self) -> usize {
        self.in_flight.len()
    }

    /// The primary is gone: promote the backup with what it has. Changes still in flight are
    /// lost, and so is the part of the token counter they carried.
    pub fn fail_over(&mut self) {
        let config = self.primary.config();
        self.primary = LeaseService::from_table(config, std::mem::take(&mut self.backup));
        self.in_flight.clear();
        self.backup = self.primary.table().clone();
    }

    /// Acquire on the primary and queue the change (a convenience for the common path).
    pub fn acquire(
        &mut self,
        lock: &str,
        holder: &str,
        ttl_ms: u64,
        now_ms: u64,
    ) -> AcquireOutcome {
        let outcome = self.primary.acquire(lock, holder, ttl_ms, now_ms);
        if matches!(outcome, AcquireOutcome::Granted { .. }) {
            self.changed();
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k06_a_lagging_backup_hands_out_a_held_lock_and_an_old_token() {
        let mut s = AsyncReplicated::new(LeaseConfig { max_ttl_ms: 10_000 });
        s.acquire("l", "a", 10_000, 0);
        s.replicate(1);
        s.primary().release("l", "a", 1, 10);
        s.changed();
        assert!(matches!(
            s.acquire("l", "b", 10_000, 20),
            AcquireOutcome::Granted { token: 2, .. }
        ));
        assert_eq!(
            s.lag(),
            2,
            "the release and b's grant are not on the backup yet"
        );
        s.fail_over();
        // The promoted backup still has a's lease, so b's lease is gone (H for b), and once a's
        // lease ends, token 2 is issued again (T).
        assert_eq!(s.primary().lease("l").map(|l| l.holder.as_str()), Some("a"));
        assert!(matches!(
            s.acquire("l", "c", 10_000, 10_001),
            AcquireOutcome::Granted { token: 2, .. }
        ));
    }

    #[test]
    fn a_backup_that_caught_up_keeps_everything() {
        let mut s = AsyncReplicated::new(LeaseConfig { max_ttl_ms: 10_000 });
        s.acquire("l", "a", 10_000, 0);
        s.replicate(usize::MAX);
        s.fail_over();
        assert!(matches!(
            s.acquire("l", "b", 100, 10_000),
            AcquireOutcome::Granted { token: 2, .. }
        ));
    }
}
