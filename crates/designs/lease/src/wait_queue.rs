//! A lock's queue of waiters: the blocking acquire of etcd's `concurrency.Mutex` and the
//! ZooKeeper lock recipe. A client that finds the lock held joins the queue with a token of
//! its own (etcd: its key's create revision), and is granted the lock, in queue order, when
//! the holder's lease ends. A waiter holds a lease of its own while it waits, and sends no
//! keepalive while blocked; if that lease has run out by its turn, the correct service drops
//! it and its acquire fails. Case K07 is the service that grants it anyway: the waiter is told
//! it holds the lock although its lease, and so its claim, is already gone, and the next waiter
//! is granted the lock right after.
//!
//! Sans-IO like the rest of the crate: the caller passes the [`LeaseService`] and its local
//! clock reading `now_ms`, and sends the answers [`WaitQueue::promote`] returns.

use std::collections::{BTreeMap, VecDeque};

use crate::service::{Lease, LeaseService};

/// One client waiting for a lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Waiter {
    /// The waiting client.
    pub holder: String,
    /// Its entry's token, issued when it joined.
    pub token: u64,
    /// The TTL it asked for (capped), local-clock ms.
    pub ttl_ms: u64,
    /// When its own lease runs out, local-clock ms: it joined at `now_ms` and renews nothing
    /// while it waits.
    pub lease_expires_at_ms: i64,
}

/// What [`WaitQueue::promote`] did with a waiter at the head of a queue.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Promotion {
    /// The waiter now holds `lock` with this lease.
    Granted {
        /// The lock.
        lock: String,
        /// The waiter's lease: from now for its TTL, or (K07's defect) its own lapsed lease.
        lease: Lease,
    },
    /// The waiter's lease had run out: it was dropped and its acquire fails.
    Dropped {
        /// The lock.
        lock: String,
        /// The dropped waiter.
        waiter: Waiter,
    },
}

/// The waiters of every lock, in arrival order. Kept in memory only: a crash empties it.
#[derive(Clone, Debug, Default, Hash)]
pub struct WaitQueue {
    queues: BTreeMap<String, VecDeque<Waiter>>,
}

impl WaitQueue {
    /// `holder` joins `lock`'s queue at `now_ms`; returns its entry's token.
    pub fn enqueue(
        &mut self,
        service: &mut LeaseService,
        lock: &str,
        holder: &str,
        ttl_ms: u64,
        now_ms: i64,
    ) -> u64 {
        let ttl_ms = ttl_ms.min(service.config().max_ttl_ms);
        let token = service.issue_token(lock);
        self.queues
            .entry(lock.to_owned())
            .or_default()
            .push_back(Waiter {
                holder: holder.to_owned(),
                token,
                ttl_ms,
                lease_expires_at_ms: now_ms.saturating_add_unsigned(ttl_ms),
            });
        token
    }

    /// Whether anyone waits for any lock.
    pub fn is_empty(&self) -> bool {
        self.queues.values().all(VecDeque::is_empty)
    }

    /// Whether anyone waits for `lock`.
    pub fn has_waiters(&self, lock: &str) -> bool {
        self.queues.get(lock).is_some_and(|q| !q.is_empty())
    }

    /// Hand every lock whose lease is gone (released, or expired and reaped) to the head of its
    /// queue, in lock-name order. A waiter whose own
    /// lease has run out is dropped, unless `grant_expired` (K07's defect), which grants it
    /// with that lapsed lease: the service's own table then holds an already expired lease,
    /// which the next reap ends, freeing the lock for the next waiter.
    pub fn promote(
        &mut self,
        service: &mut LeaseService,
        now_ms: i64,
        grant_expired: bool,
    ) -> Vec<Promotion> {
        let mut done = Vec::new();
        if service.recovering_until(now_ms).is_some() {
            // The restart grace holds for queued acquires too (K17): nothing is granted.
            return done;
        }
        for (lock, queue) in &mut self.queues {
            // Only once the last lease is gone from the table (released, or expired and
            // reaped, so its end is on record): a lapsed grant's lease stays in place until
            // the next reap ends it.
            while service.lease(lock).is_none() {
                let Some(waiter) = queue.pop_front() else {
                    break;
                };
                let lapsed = waiter.lease_expires_at_ms <= now_ms;
                if lapsed && !grant_expired {
                    done.push(Promotion::Dropped {
                        lock: lock.clone(),
                        waiter,
                    });
                    continue;
                }
                let expires_at_ms = if lapsed {
                    waiter.lease_expires_at_ms
                } else {
                    now_ms.saturating_add_unsigned(waiter.ttl_ms)
                };
                let lease = Lease {
                    holder: waiter.holder,
                    token: waiter.token,
                    ttl_ms: waiter.ttl_ms,
                    expires_at_ms,
                };
                service.install(lock, lease.clone());
                done.push(Promotion::Granted {
                    lock: lock.clone(),
                    lease,
                });
            }
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::{AcquireOutcome, LeaseConfig};

    fn setup() -> (LeaseService, WaitQueue) {
        let mut s = LeaseService::new(LeaseConfig { max_ttl_ms: 10_000 });
        assert!(matches!(
            s.acquire("l", "h", 8_000, 0),
            AcquireOutcome::Granted { token: 1, .. }
        ));
        (s, WaitQueue::default())
    }

    #[test]
    fn waiters_are_granted_in_order_with_their_queue_tokens() {
        let (mut s, mut q) = setup();
        assert_eq!(q.enqueue(&mut s, "l", "w", 5_000, 100), 2);
        assert_eq!(q.enqueue(&mut s, "l", "c", 5_000, 200), 3);
        assert!(q.promote(&mut s, 1_000, false).is_empty(), "still held");
        assert_eq!(
            s.release("l", "h", 1, 2_000),
            crate::service::ReleaseOutcome::Released
        );
        let granted = q.promote(&mut s, 2_000, false);
        assert_eq!(
            granted,
            vec![Promotion::Granted {
                lock: "l".into(),
                lease: Lease {
                    holder: "w".into(),
                    token: 2,
                    ttl_ms: 5_000,
                    expires_at_ms: 7_000
                }
            }]
        );
        assert!(q.has_waiters("l"));
    }

    #[test]
    fn an_expired_waiter_is_dropped_unless_the_k07_defect_grants_it() {
        for grant_expired in [false, true] {
            let (mut s, mut q) = setup();
            q.enqueue(&mut s, "l", "w", 5_000, 100); // its lease lapses at 5.1 s
            q.enqueue(&mut s, "l", "c", 5_000, 6_000);
            assert_eq!(
                s.release("l", "h", 1, 7_999),
                crate::service::ReleaseOutcome::Released
            );
            let done = q.promote(&mut s, 8_000, grant_expired);
            if grant_expired {
                // w is told it holds the lock with its lapsed lease (token 2)...
                assert!(matches!(&done[..], [Promotion::Granted { lease, .. }]
                    if lease.holder == "w" && lease.token == 2 && lease.expires_at_ms == 5_100));
                // ...which stays in place until a reap ends it (so the end is on record):
                assert!(q.promote(&mut s, 8_000, grant_expired).is_empty());
                // the next reap ends it, and c is granted right after.
                assert_eq!(s.expire_due(8_000).len(), 1);
                let next = q.promote(&mut s, 8_000, grant_expired);
                assert!(matches!(&next[..], [Promotion::Granted { lease, .. }]
                    if lease.holder == "c" && lease.token == 3));
            } else {
                assert!(matches!(&done[0], Promotion::Dropped { waiter, .. } if waiter.token == 2));
                assert!(matches!(&done[1], Promotion::Granted { lease, .. }
                    if lease.holder == "c" && lease.token == 3 && lease.expires_at_ms == 13_000));
            }
        }
    }
}
