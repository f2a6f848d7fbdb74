//! A `redis-N` node: the [`RedisNode`] store as a lock-service node. Keys expire lazily by the
//! node's expiry clock (its wall clock by default, as Redis does). Its fsync setting decides
//! which writes survive a crash (Redis's `appendfsync always | everysec | no`), and a restart
//! delay keeps a restarted node unavailable for that long (antirez's delayed restarts, his
//! answer to Kleppmann 2016's crash scenario). The node records no events: what a Redlock
//! client concluded is in its operations and its `belief` events, and that is what the checker
//! judges; its decisions still count for event-triggered faults.

use fencesim_design::{
    Clock, Deadline, FsyncPolicy, KeyEvent, KeyEventKind, LockNode, NodeCtx, NodeStart, Origin,
    ServiceEventKind, TimerId,
};

use crate::message::RedlockMessage;
use crate::store::RedisNode;

/// A Redis node's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedisConfig {
    /// When writes are synced (Redis's `appendfsync`; `everysec` is a 1000 ms period).
    pub fsync: FsyncPolicy,
    /// How long a restarted node stays unavailable, ms (0: none).
    pub restart_delay_ms: u64,
    /// The clock keys expire by: the wall clock, as Redis does (a clock jump expires keys
    /// early, Kleppmann 2016), or the monotonic one.
    pub expiry_clock: Clock,
}

const SYNC: TimerId = TimerId(1);
const RESTARTED: TimerId = TimerId(2);
/// The moment a key last set or extended expires, on the expiry clock: a mark, not a timer
/// (expiry stays lazy), so that `fencesim verify`'s clock can reach it. One per key (this bit
/// and a hash of the key's name): a shared one would let a later, shorter TTL on another key
/// replace the mark of a key that expires later, whose expiry the search could then not reach.
const EXPIRY: u64 = 1 << 63;

/// The expiry mark of `key`.
fn expiry_mark(key: &str) -> TimerId {
    // FNV-1a: stable across runs and platforms.
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    TimerId(EXPIRY | (hash >> 1))
}

/// A Redis-like node serving Redlock's commands.
#[derive(Clone, Debug)]
pub struct RedisServer {
    config: RedisConfig,
    data: RedisNode,
    serving: bool,
    /// How many Redis nodes the lock is spread over (its key events say it).
    nodes: u32,
}

type Ctx<'a> = NodeCtx<'a, RedlockMessage, RedisNode>;

impl RedisServer {
    /// Start syncing periodically, if that is the node's setting.
    fn start_syncing(&self, ctx: &mut Ctx<'_>) {
        if let Some(every_ms) = self.config.fsync.period_ms() {
            ctx.set_timer(SYNC, every_ms);
        }
    }

    /// Write the data after a change; say what the change decided.
    fn changed(&self, decision: ServiceEventKind, ctx: &mut Ctx<'_>) {
        ctx.persist(self.data.clone(), self.config.fsync.durability());
        ctx.decided(decision);
    }

    /// Drop `key` if it has expired by the node's expiry clock, recording that it did: Redis
    /// expires lazily, when a command next touches the key.
    fn drop_expired(&mut self, key: &str, now_ms: i64, ctx: &mut Ctx<'_>) {
        if let Some(gone) = self.data.take_expired(key, now_ms) {
            ctx.record_key(KeyEvent {
                holder: Some(gone.holder),
                value: Some(gone.value),
                expires_at_ms: Some(gone.expires_at_ms),
                ..KeyEvent::new(KeyEventKind::Expire, key)
            });
        }
    }

    /// Record that `holder`'s command on `key` was refused, and why.
    fn refused(key: &str, holder: &str, value: u64, why: String, ctx: &mut Ctx<'_>) {
        ctx.record_key(KeyEvent {
            holder: Some(holder.to_owned()),
            value: Some(value),
            detail: Some(why),
            ..KeyEvent::new(KeyEventKind::Refuse, key)
        });
    }

    /// Mark `expires_at_ms` on the expiry clock `clock` as the moment `key` depends on.
    fn mark_expiry(key: &str, clock: Clock, expires_at_ms: i64, ctx: &mut Ctx<'_>) {
        let deadline = Deadline {
            clock,
            at_ms: expires_at_ms,
        };
        ctx.mark_deadline(expiry_mark(key), deadline);
    }

    /// `SET key value NX PX ttl_ms` for the client `holder`.
    fn set(&mut self, key: &str, value: u64, ttl_ms: u64, holder: &str, ctx: &mut Ctx<'_>) -> bool {
        let now_ms = ctx.now().on(self.config.expiry_clock);
        self.drop_expired(key, now_ms, ctx);
        match self.data.set_nx_px(key, value, holder, ttl_ms, now_ms) {
            Ok(set) => {
                Self::mark_expiry(key, self.config.expiry_clock, set.expires_at_ms, ctx);
                let expires_at_ms = Some(set.expires_at_ms);
                ctx.record_key(KeyEvent {
                    holder: Some(holder.to_owned()),
                    value: Some(value),
                    ttl_ms: Some(ttl_ms),
                    expires_at_ms,
                    nodes: Some(self.nodes),
                    ..KeyEvent::new(KeyEventKind::Set, key)
                });
                self.changed(ServiceEventKind::Grant, ctx);
                true
            }
            Err(live) => {
                let why = format!("SET NX: held by {}", live.holder);
                Self::refused(key, holder, value, why, ctx);
                false
            }
        }
    }

    /// Extend `key` by `ttl_ms` if it is live and holds `value`.
    fn extend(
        &mut self,
        key: &str,
        value: u64,
        ttl_ms: u64,
        holder: &str,
        ctx: &mut Ctx<'_>,
    ) -> bool {
        let now_ms = ctx.now().on(self.config.expiry_clock);
        self.drop_expired(key, now_ms, ctx);
        match self.data.extend_if(key, value, ttl_ms, now_ms) {
            Some(extended) => {
                Self::mark_expiry(key, self.config.expiry_clock, extended.expires_at_ms, ctx);
                let expires_at_ms = Some(extended.expires_at_ms);
                ctx.record_key(KeyEvent {
                    holder: Some(holder.to_owned()),
                    value: Some(value),
                    ttl_ms: Some(ttl_ms),
                    expires_at_ms,
                    ..KeyEvent::new(KeyEventKind::Extend, key)
                });
                self.changed(ServiceEventKind::Renew, ctx);
                true
            }
            None => {
                let why = self.mismatch("extend", key, now_ms);
                Self::refused(key, holder, value, why, ctx);
                false
            }
        }
    }

    /// Delete `key` if it is live and holds `value` (the release script).
    fn delete(&mut self, key: &str, value: u64, holder: &str, ctx: &mut Ctx<'_>) -> bool {
        let now_ms = ctx.now().on(self.config.expiry_clock);
        self.drop_expired(key, now_ms, ctx);
        match self.data.delete_if(key, value, now_ms) {
            Some(deleted) => {
                ctx.record_key(KeyEvent {
                    holder: Some(deleted.holder),
                    value: Some(value),
                    ..KeyEvent::new(KeyEventKind::Delete, key)
                });
                self.changed(ServiceEventKind::Release, ctx);
                true
            }
            None => {
                let why = self.mismatch("delete", key, now_ms);
                Self::refused(key, holder, value, why, ctx);
                false
            }
        }
    }

    /// Why a compare-and-`command` of `key` found no key of its value.
    fn mismatch(&self, command: &str, key: &str, now_ms: i64) -> String {
        match self.data.get(key, now_ms) {
            Some(live) => format!("{command}: the key is {}'s", live.holder),
            None => format!("{command}: no key"),
        }
    }
}

impl LockNode for RedisServer {
    type Msg = RedlockMessage;
    type Durable = RedisNode;
    type Config = RedisConfig;

    fn start(config: &RedisConfig, start: NodeStart<RedisNode>, ctx: &mut Ctx<'_>) -> Self {
        let delayed = start.incarnation > 1 && config.restart_delay_ms > 0;
        let server = RedisServer {
            config: *config,
            data: start.durable.unwrap_or_default(),
            serving: !delayed,
            nodes: u32::try_from(start.service_nodes.len()).unwrap_or(u32::MAX),
        };
        if delayed {
            // Unavailable: whatever arrives meanwhile is dropped, and its sender times out.
            ctx.set_timer(RESTARTED, config.restart_delay_ms);
        } else {
            server.start_syncing(ctx);
        }
        server
    }

    fn on_message(&mut self, origin: &Origin, msg: RedlockMessage, ctx: &mut Ctx<'_>) {
        let from = origin.from();
        let reply = match msg {
            RedlockMessage::Set { key, value, ttl_ms } => {
                RedlockMessage::SetReply(self.set(&key, value, ttl_ms, from, ctx))
            }
            RedlockMessage::Extend { key, value, ttl_ms } => {
                RedlockMessage::ExtendReply(self.extend(&key, value, ttl_ms, from, ctx))
            }
            RedlockMessage::Delete { key, value } => {
                RedlockMessage::DeleteReply(self.delete(&key, value, from, ctx))
            }
            RedlockMessage::Incr { counter } => {
                let token = self.data.incr(&counter);
                self.changed(ServiceEventKind::Grant, ctx);
                RedlockMessage::IncrReply(token)
            }
            // Replies never come to a node.
            RedlockMessage::SetReply(_)
            | RedlockMessage::ExtendReply(_)
            | RedlockMessage::DeleteReply(_)
            | RedlockMessage::IncrReply(_) => return,
        };
        ctx.reply(origin, reply);
    }

    fn on_timer(&mut self, id: TimerId, ctx: &mut Ctx<'_>) {
        match id {
            SYNC => {
                ctx.sync();
                self.start_syncing(ctx);
            }
            RESTARTED => {
                self.serving = true;
                self.start_syncing(ctx);
            }
            _ => {}
        }
    }

    fn serving(&self) -> bool {
        self.serving
    }
}
