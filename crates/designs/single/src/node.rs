//! The `lease-service` node of the single lease service: [`LeaseService`] as a [`LockNode`],
//! with its disk, its expiry deadline and, when it queues acquires, its [`WaitQueue`].
//!
//! Every change to the lease table (grant, renew, release, expire, revoke) is recorded and
//! written to disk; refusals are only in the reply. Due leases are reaped in
//! [`LockNode::settle`], which the harness runs before each request, so the history shows an
//! expiry before the grant that depended on it. After a crash the node resumes from what its
//! disk kept, as the `fsync`, `token_counter` and `restart_grace_ms` settings say: the designs
//! behind cases K04, K06, K10 and K17 (a restarted lock server that forgot a lease, or reissued
//! a token).

use std::collections::BTreeMap;

use fencesim_design::{
    Clock, Deadline, FsyncPolicy, HeldLease, LockNode, NodeCtx, NodeStart, Origin, ServiceEvent,
    ServiceEventKind, TimerId,
};

use fencesim_lease::wait_queue::{Promotion, WaitQueue};
use fencesim_lease::{
    expire_due, held_leases, serve, AcquireOutcome, Attempt, LeaseConfig, LeaseMessage,
    LeaseService, LeaseTable, ReleaseMode,
};

/// Where a restarted service's token counter comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TokenCounter {
    /// A separate record, synced on every write and never rewound by a restore (the safe
    /// design: like etcd's revision, it only moves forward).
    #[default]
    Durable,
    /// The lease table's own `last_token`: subject to fsync and rewound by a restore (defect:
    /// cases K04, K10).
    Store,
    /// Memory only: back to 0 after every restart (defect: K06/K17's token reuse).
    Memory,
}

/// What an acquire of a held lock does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AcquireMode {
    /// It is refused at once; the client backs off and tries again.
    #[default]
    FailFast,
    /// The caller waits in the lock's queue and is granted in turn (etcd's
    /// `concurrency.Mutex`, ZooKeeper's lock recipe); a waiter whose own lease ran out while it
    /// waited is dropped and its acquire fails.
    Queue,
    /// DEFECT (K07): the queue grants its head without re-checking the waiter's lease.
    QueueGrantToExpiredWaiter,
}

/// What the maintenance reaper does when a client is deregistered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Reaper {
    /// It leaves leases alone: one still being renewed is proof of life, and an expired one
    /// is reaped anyway.
    #[default]
    RespectsLeases,
    /// DEFECT (K16): it ends every lease of the deregistered client at once, live or not.
    IgnoresLeases,
}

/// The settings of a `lease-service` node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LeaseNodeConfig {
    /// The longest TTL granted, ms of the expiry clock (longer requests are capped).
    pub max_ttl_ms: u64,
    /// When writes reach the disk.
    pub fsync: FsyncPolicy,
    /// Where a restarted node's token counter comes from.
    pub token_counter: TokenCounter,
    /// After a restart, grant nothing for this long, ms (0: no grace). Waiting out the longest
    /// TTL is the fix for a service that forgets leases in a crash.
    pub restart_grace_ms: u64,
    /// The clock leases expire by.
    pub expiry_clock: Clock,
    /// What an acquire of a held lock does.
    pub acquire: AcquireMode,
    /// How a release works.
    pub release: ReleaseMode,
    /// What a deregistration does.
    pub reaper: Reaper,
}

/// What a `lease-service` node keeps on disk.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LeaseDisk {
    /// The lease table, as of the write.
    pub table: LeaseTable,
    /// The durable token record (`token_counter = durable`; empty otherwise): the highest token
    /// per lock, written through on every write, so no crash loses it and no restore rewinds it.
    pub tokens: BTreeMap<String, u64>,
}

/// The expiry deadline (or the end of a restart grace that holds waiters back).
const WAKE: TimerId = TimerId(1);
/// The periodic fsync.
const SYNC: TimerId = TimerId(2);

/// Which half of [`LockNode::settle`] runs next: reaping, then the queue's promotions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Settle {
    Reap,
    Promote,
}

/// The single lease service's node.
#[derive(Clone, Debug, Hash)]
pub struct LeaseNode {
    config: LeaseNodeConfig,
    service: LeaseService,
    /// The durable token record as last written (see [`LeaseDisk::tokens`]).
    tokens: BTreeMap<String, u64>,
    waiters: WaitQueue,
    /// Per queue entry (lock, entry token): the acquire its grant or refusal answers.
    waiting: BTreeMap<(String, u64), (Origin, Attempt)>,
    next_settle: Settle,
    /// Where the wake-up timer is set, as last asked of the harness: asked again only when it
    /// moves (the harness follows the clock's faults itself).
    wake_at_ms: Option<i64>,
}

type Ctx<'a> = NodeCtx<'a, LeaseMessage, LeaseDisk>;

impl LeaseNode {
    /// The expiry clock's reading now.
    fn now_ms(&self, ctx: &Ctx<'_>) -> i64 {
        ctx.now().on(self.config.expiry_clock)
    }

    /// Write the table (and the durable token record) to disk, as the fsync setting says.
    fn persist(&mut self, ctx: &mut Ctx<'_>) {
        if self.config.token_counter == TokenCounter::Durable {
            for (lock, record) in self.service.table() {
                // Looked up by `&str` first: a lock's name is allocated once, not per write.
                match self.tokens.get_mut(lock) {
                    Some(token) => *token = (*token).max(record.last_token),
                    None => {
                        self.tokens.insert(lock.clone(), record.last_token);
                    }
                }
            }
        }
        let disk = LeaseDisk {
            table: self.service.table().clone(),
            tokens: self.tokens.clone(),
        };
        ctx.persist(disk, self.config.fsync.durability());
    }

    /// Queue an acquire of a held lock, if the service queues: true if it did (and answered
    /// `Queued`).
    fn join_queue(&mut self, origin: &Origin, msg: &LeaseMessage, ctx: &mut Ctx<'_>) -> bool {
        let LeaseMessage::Acquire {
            lock,
            ttl_ms,
            attempt,
        } = msg
        else {
            return false;
        };
        let now = self.now_ms(ctx);
        let free = self.service.is_free(lock, now) && !self.waiters.has_waiters(lock);
        // During a restart grace the service answers `Recovering`, queue or not.
        if self.config.acquire == AcquireMode::FailFast
            || free
            || self.service.recovering_until(now).is_some()
        {
            return false;
        }
        let holder = origin.from();
        let token = self
            .waiters
            .enqueue(&mut self.service, lock, holder, *ttl_ms, now);
        self.persist(ctx);
        self.waiting
            .insert((lock.clone(), token), (origin.clone(), *attempt));
        let queued = AcquireOutcome::Queued { token };
        ctx.reply(origin, LeaseMessage::AcquireReply(queued));
        true
    }

    /// Expire every lease that is due, recording each.
    fn reap(&mut self, ctx: &mut Ctx<'_>) {
        let Some(next_expiry_ms) = self.service.next_expiry() else {
            return; // no lease: no clock to read
        };
        let now = self.now_ms(ctx);
        if next_expiry_ms > now {
            return;
        }
        for event in expire_due(&mut self.service, now) {
            ctx.record(event);
        }
        self.persist(ctx);
    }

    /// Grant free locks to their queues' heads (or drop lapsed waiters), recording each grant
    /// and answering each waiter. Returns how many waiters left a queue.
    fn promote(&mut self, ctx: &mut Ctx<'_>) -> usize {
        if self.waiters.is_empty() {
            return 0;
        }
        let grant_expired = self.config.acquire == AcquireMode::QueueGrantToExpiredWaiter;
        let now = self.now_ms(ctx);
        let promotions = self.waiters.promote(&mut self.service, now, grant_expired);
        let count = promotions.len();
        for promotion in promotions {
            let (lock, token, outcome) = match promotion {
                Promotion::Granted { lock, lease } => {
                    let (token, expires_at_ms) = (lease.token, lease.expires_at_ms);
                    let op = self
                        .waiting
                        .get(&(lock.clone(), token))
                        .and_then(|w| w.0.op());
                    ctx.record(ServiceEvent {
                        expires_at_ms: Some(expires_at_ms),
                        ttl_ms: Some(lease.ttl_ms),
                        ..ServiceEvent::new(ServiceEventKind::Grant, &lock, lease.holder, token, op)
                    });
                    let granted = AcquireOutcome::Granted {
                        token,
                        expires_at_ms,
                    };
                    (lock, token, granted)
                }
                Promotion::Dropped { lock, waiter } => {
                    let token = waiter.token;
                    (lock, token, AcquireOutcome::WaiterExpired { token })
                }
            };
            if let Some((origin, attempt)) = self.waiting.remove(&(lock, token)) {
                let answer = LeaseMessage::QueueAnswer {
                    entry: token,
                    attempt,
                    outcome,
                };
                ctx.notify(&origin, answer);
            }
            self.persist(ctx);
        }
        count
    }

    /// Set the wake-up timer for the next expiry, or the end of a restart grace that holds
    /// waiters back; cancel it if nothing is due.
    fn arm(&mut self, ctx: &mut Ctx<'_>) {
        let grace_end = (!self.waiters.is_empty())
            .then(|| self.service.recovering_until(self.now_ms(ctx)))
            .flatten();
        let wake_at_ms = [self.service.next_expiry(), grace_end]
            .into_iter()
            .flatten()
            .min();
        if wake_at_ms == self.wake_at_ms {
            return;
        }
        self.wake_at_ms = wake_at_ms;
        match wake_at_ms {
            Some(at_ms) => ctx.set_timer_at(
                WAKE,
                Deadline {
                    clock: self.config.expiry_clock,
                    at_ms,
                },
            ),
            None => ctx.cancel_timer(WAKE),
        }
    }
}

/// The table a node starts from: `disk`'s, with its token counters as `counter` says.
fn recover(disk: LeaseDisk, counter: TokenCounter) -> LeaseTable {
    let mut table = disk.table;
    match counter {
        TokenCounter::Store => {}
        TokenCounter::Memory => {
            for record in table.values_mut() {
                record.last_token = 0;
            }
        }
        TokenCounter::Durable => {
            for (lock, token) in disk.tokens {
                let record = table.entry(lock).or_default();
                record.last_token = record.last_token.max(token);
            }
        }
    }
    table
}

/// `into` with every token of `from` that is higher.
fn merge_tokens(into: &mut BTreeMap<String, u64>, from: BTreeMap<String, u64>) {
    for (lock, token) in from {
        let kept = into.entry(lock).or_default();
        *kept = (*kept).max(token);
    }
}

impl LockNode for LeaseNode {
    type Msg = LeaseMessage;
    type Durable = LeaseDisk;
    type Config = LeaseNodeConfig;

    /// The disk derives `Hash`: `fencesim verify` fingerprints it by that.
    fn hash_durable(durable: &LeaseDisk, hasher: &mut dyn std::hash::Hasher) {
        fencesim_design::explore::hash_derived(durable, hasher);
    }

    fn start(config: &LeaseNodeConfig, start: NodeStart<LeaseDisk>, ctx: &mut Ctx<'_>) -> Self {
        let disk = start.durable.unwrap_or_default();
        let tokens = disk.tokens.clone();
        let table = recover(disk, config.token_counter);
        let lease_config = LeaseConfig {
            max_ttl_ms: config.max_ttl_ms,
        };
        let mut node = LeaseNode {
            config: *config,
            service: LeaseService::from_table(lease_config, table),
            tokens,
            waiters: WaitQueue::default(),
            waiting: BTreeMap::new(),
            next_settle: Settle::Reap,
            wake_at_ms: None,
        };
        if start.incarnation > 1 && config.restart_grace_ms > 0 {
            let now = node.now_ms(ctx);
            let until_ms = now.saturating_add_unsigned(config.restart_grace_ms);
            node.service.recover_until(until_ms);
        }
        if let Some(every_ms) = config.fsync.period_ms() {
            ctx.set_timer(SYNC, every_ms);
        }
        node
    }

    fn on_message(&mut self, origin: &Origin, msg: LeaseMessage, ctx: &mut Ctx<'_>) {
        if self.join_queue(origin, &msg, ctx) {
            return;
        }
        let now = self.now_ms(ctx);
        let (holder, op) = (origin.from(), origin.op());
        let release = self.config.release;
        let Some(served) = serve(&mut self.service, &msg, holder, op, now, release) else {
            return;
        };
        if let Some(event) = served.event {
            ctx.record(event);
            self.persist(ctx);
        }
        ctx.reply(origin, served.reply);
    }

    fn on_timer(&mut self, id: TimerId, ctx: &mut Ctx<'_>) {
        if id == WAKE {
            // Nothing to do here: the harness settles before the next wait, which reaps (and
            // sets the timer again).
            self.wake_at_ms = None;
        }
        if let (SYNC, Some(every_ms)) = (id, self.config.fsync.period_ms()) {
            ctx.sync();
            ctx.set_timer(SYNC, every_ms);
        }
    }

    /// Reap due leases, then grant freed locks to waiters, until nothing changes: a lapsed
    /// waiter's grant (K07's defect) is due at once, and its expiry must be on record before
    /// the lock goes to anyone else, by the queue or by a direct acquire.
    fn settle(&mut self, ctx: &mut Ctx<'_>) -> bool {
        match self.next_settle {
            Settle::Reap => {
                self.reap(ctx);
                self.next_settle = Settle::Promote;
                true
            }
            Settle::Promote => {
                self.next_settle = Settle::Reap;
                if self.promote(ctx) > 0 {
                    return true;
                }
                self.arm(ctx);
                false
            }
        }
    }

    /// The correct reaper leaves a lease alone; the defect ends every lease of the holder at
    /// once, recorded as `revoke`.
    fn on_deregister(&mut self, holder: &str, ctx: &mut Ctx<'_>) {
        if self.config.reaper != Reaper::IgnoresLeases {
            return;
        }
        let locks = self.service.locks_held_by(holder);
        for lock in &locks {
            let Some(lease) = self.service.remove(lock) else {
                continue;
            };
            ctx.record(ServiceEvent {
                expires_at_ms: Some(lease.expires_at_ms),
                detail: Some("deregistered by the reaper".into()),
                ..ServiceEvent::new(
                    ServiceEventKind::Revoke,
                    lock,
                    lease.holder,
                    lease.token,
                    None,
                )
            });
        }
        if !locks.is_empty() {
            self.persist(ctx);
        }
    }

    const FOLLOWS_LEASES: bool = true;

    fn durable_leases(durable: Option<&LeaseDisk>) -> Option<Vec<HeldLease>> {
        Some(durable.map_or_else(Vec::new, |disk| held_leases(&disk.table)))
    }

    /// The durable token record is written through: a crash loses the table's unsynced
    /// writes, never a token.
    fn after_crash(synced: Option<LeaseDisk>, lost: Option<LeaseDisk>) -> Option<LeaseDisk> {
        let Some(lost) = lost else { return synced };
        let mut disk = synced.unwrap_or_default();
        merge_tokens(&mut disk.tokens, lost.tokens);
        Some(disk)
    }

    /// A backup holds the table; the durable token record is not part of it, so a restore
    /// does not rewind it.
    fn after_restore(backup: Option<LeaseDisk>, latest: Option<LeaseDisk>) -> Option<LeaseDisk> {
        Some(LeaseDisk {
            table: backup.map(|b| b.table).unwrap_or_default(),
            tokens: latest.map(|l| l.tokens).unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencesim_lease::LockRecord;

    fn table(last_token: u64) -> LeaseTable {
        let record = LockRecord {
            last_token,
            lease: None,
        };
        [("l".to_owned(), record)].into_iter().collect()
    }

    fn disk(table_token: u64, durable_token: u64) -> LeaseDisk {
        LeaseDisk {
            table: table(table_token),
            tokens: [("l".to_owned(), durable_token)].into_iter().collect(),
        }
    }

    #[test]
    fn the_token_counter_comes_from_where_the_setting_says() {
        let last = |counter| recover(disk(1, 2), counter)["l"].last_token;
        assert_eq!(last(TokenCounter::Store), 1);
        assert_eq!(last(TokenCounter::Durable), 2);
        assert_eq!(last(TokenCounter::Memory), 0);
    }

    #[test]
    fn a_crash_loses_the_unsynced_table_but_no_durable_token() {
        let kept = LeaseNode::after_crash(Some(disk(1, 1)), Some(disk(3, 3))).expect("a disk");
        assert_eq!(kept.table, table(1), "the unsynced table is gone");
        assert_eq!(kept.tokens["l"], 3, "the written-through token survives");
        let nothing_synced = LeaseNode::after_crash(None, Some(disk(3, 3))).expect("a disk");
        assert!(nothing_synced.table.is_empty());
        assert_eq!(nothing_synced.tokens["l"], 3);
    }

    #[test]
    fn a_restore_rewinds_the_table_but_not_the_durable_tokens() {
        let restored = LeaseNode::after_restore(Some(disk(1, 1)), Some(disk(4, 4)));
        assert_eq!(restored, Some(disk(1, 4)));
        let before_any_backup = LeaseNode::after_restore(None, Some(disk(4, 4)));
        let empty = LeaseDisk {
            table: LeaseTable::new(),
            tokens: disk(0, 4).tokens,
        };
        assert_eq!(before_any_backup, Some(empty));
    }
}
