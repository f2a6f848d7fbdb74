//! A `redis-N` node: the [`RedisNode`] store as a lock-service node. Keys expire lazily by the
//! node's expiry clock (its wall clock by default, as Redis does). Its fsync setting decides
//! which writes survive a crash (Redis's `appendfsync always | everysec | no`), and a restart
//! delay keeps a restarted node unavailable for that long (antirez's delayed restarts, his
//! answer to Kleppmann 2016's crash scenario). The node records no events: what a Redlock
//! client concluded is in its operations and its `belief` events, and that is what the checker
//! judges; its decisions still count for event-triggered faults.

use fencesim_design::{
    Clock, FsyncPolicy, LockNode, NodeCtx, NodeStart, Origin, ServiceEventKind, TimerId,
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

/// A Redis-like node serving Redlock's commands.
#[derive(Clone, Debug)]
pub struct RedisServer {
    config: RedisConfig,
    data: RedisNode,
    serving: bool,
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
        let now_ms = ctx.now().on(self.config.expiry_clock);
        let reply = match msg {
            RedlockMessage::Set { key, value, ttl_ms } => {
                let ok = self.data.set_nx_px(&key, value, ttl_ms, now_ms);
                if ok {
                    self.changed(ServiceEventKind::Grant, ctx);
                }
                RedlockMessage::SetReply(ok)
            }
            RedlockMessage::Extend { key, value, ttl_ms } => {
                let ok = self.data.extend_if(&key, value, ttl_ms, now_ms);
                if ok {
                    self.changed(ServiceEventKind::Renew, ctx);
                }
                RedlockMessage::ExtendReply(ok)
            }
            RedlockMessage::Delete { key, value } => {
                let ok = self.data.delete_if(&key, value, now_ms);
                if ok {
                    self.changed(ServiceEventKind::Release, ctx);
                }
                RedlockMessage::DeleteReply(ok)
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
