//! Lock-service nodes: the server side of a design.

use crate::event::{ServiceEvent, ServiceEventKind};
use crate::message::{DesignMessage, Origin};
use crate::time::{Now, TimerId};

/// How far a [`NodeCtx::persist`] write gets before the node goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Durability {
    /// On disk before the node goes on (an `fsync` per write): survives a crash.
    Synced,
    /// In the page cache only: a crash before the next synced write loses it (a service with
    /// `fsync = never` or a periodic fsync, as in the incidents where a restarted lock server
    /// granted a lease it had already granted).
    Unsynced,
}

/// One effect of a lock-service node, applied by the harness in the order pushed.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeEffect<M, D> {
    /// Send `msg` to node `to` (a client, or another node of the service).
    Send {
        /// The receiving node's name.
        to: String,
        /// The message.
        msg: M,
    },
    /// Answer the request that came from `origin` with `msg`.
    Reply {
        /// The request's origin, as the node was given it.
        origin: Origin,
        /// The answer.
        msg: M,
    },
    /// Call [`LockNode::on_timer`] with `id` once `after_ms` of simulated time has passed.
    SetTimer {
        /// The timer.
        id: TimerId,
        /// How long from now, ms (at least 1: a timer never fires within the same instant).
        after_ms: u64,
    },
    /// Forget timer `id` if it is set.
    CancelTimer(TimerId),
    /// Write the node's durable state.
    Persist {
        /// The whole durable state (what [`LockNode`]'s start is given after a crash).
        state: D,
        /// Synced or not.
        durability: Durability,
    },
    /// Record a decision into the history (it also counts as [`NodeEffect::Decided`]).
    Record(ServiceEvent),
    /// A decision of this kind was taken, for event-triggered faults (`after = "grant"` on this
    /// node), without a history event: a node whose decisions are no ground truth (a Redis
    /// node of Redlock, whose grants only the client's majority turns into a lease).
    Decided(ServiceEventKind),
}

/// What a node's handler is given: its clocks, and where its effects go.
pub struct NodeCtx<'a, M, D> {
    clock: &'a dyn Fn() -> Now,
    /// The clocks, read at the first `now` of the call (one instant).
    now: std::cell::Cell<Option<Now>>,
    effects: &'a mut Vec<NodeEffect<M, D>>,
}

impl<M, D> std::fmt::Debug for NodeCtx<'_, M, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeCtx")
            .field("now", &self.now.get())
            .field("effects", &self.effects.len())
            .finish()
    }
}

impl<'a, M: DesignMessage, D> NodeCtx<'a, M, D> {
    /// A context whose clocks are read from `clock` (once per call, when first asked) and whose
    /// effects are appended to `effects` (made by the harness, or by a test driver; the harness
    /// drains `effects` after each call).
    pub fn new(clock: &'a dyn Fn() -> Now, effects: &'a mut Vec<NodeEffect<M, D>>) -> Self {
        NodeCtx {
            clock,
            now: std::cell::Cell::new(None),
            effects,
        }
    }

    /// The node's clocks now. Every reading within one call is the same instant.
    pub fn now(&self) -> Now {
        let now = self.now.get().unwrap_or_else(self.clock);
        self.now.set(Some(now));
        now
    }

    /// Send `msg` to node `to`.
    pub fn send(&mut self, to: impl Into<String>, msg: M) {
        self.effects.push(NodeEffect::Send { to: to.into(), msg });
    }

    /// Answer the request from `origin` with `msg`.
    pub fn reply(&mut self, origin: &Origin, msg: M) {
        self.effects.push(NodeEffect::Reply {
            origin: origin.clone(),
            msg,
        });
    }

    /// Set timer `id` to fire after `after_ms` ms (replacing it if set).
    pub fn set_timer(&mut self, id: TimerId, after_ms: u64) {
        self.effects.push(NodeEffect::SetTimer { id, after_ms });
    }

    /// Cancel timer `id`.
    pub fn cancel_timer(&mut self, id: TimerId) {
        self.effects.push(NodeEffect::CancelTimer(id));
    }

    /// Write `state` as the node's durable state.
    pub fn persist(&mut self, state: D, durability: Durability) {
        self.effects.push(NodeEffect::Persist { state, durability });
    }

    /// Record `event` into the history.
    pub fn record(&mut self, event: ServiceEvent) {
        self.effects.push(NodeEffect::Record(event));
    }

    /// Say a decision of `kind` was taken, without recording it (see [`NodeEffect::Decided`]).
    pub fn decided(&mut self, kind: ServiceEventKind) {
        self.effects.push(NodeEffect::Decided(kind));
    }
}

/// What a node starts from, each time it starts: the first time, and after every crash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStart<D> {
    /// The node's name (`lease-service`, `redis-2`).
    pub name: String,
    /// Its position among the lock service's nodes, from 0.
    pub index: usize,
    /// Which start this is: 1, then one more after each restart.
    pub incarnation: u64,
    /// What its disk kept: nothing on the first start; after a crash the last synced write.
    pub durable: Option<D>,
}

/// A node of a lock service: a state machine driven by messages and timers.
///
/// The harness makes the node (through its design) from a [`NodeStart`], with a context for
/// the effects of starting (a timer, say): its durable state is what its disk kept, on the first
/// start nothing, after a crash the last [`Durability::Synced`] write (which carries every
/// unsynced write before it). Everything else the node held is
/// gone, as a process's memory is. While it runs, the harness calls one handler at a time, each
/// at one instant; a paused node (a GC pause) is simply not called until the pause ends.
pub trait LockNode: Sized + Send + 'static {
    /// The design's message type.
    type Msg: DesignMessage;
    /// What the node writes to disk and starts from after a crash.
    type Durable: Clone + std::fmt::Debug + Send + 'static;
    /// The node's settings, from the scenario (the same at every start).
    type Config: Clone + std::fmt::Debug + Send + Sync + 'static;

    /// Start the node: the first time, and again after every crash.
    fn start(
        config: &Self::Config,
        start: NodeStart<Self::Durable>,
        ctx: &mut NodeCtx<'_, Self::Msg, Self::Durable>,
    ) -> Self;

    /// A message arrived from `origin`.
    fn on_message(
        &mut self,
        origin: &Origin,
        msg: Self::Msg,
        ctx: &mut NodeCtx<'_, Self::Msg, Self::Durable>,
    );

    /// Timer `id` fired. The default ignores it (a node without timers).
    fn on_timer(&mut self, id: TimerId, ctx: &mut NodeCtx<'_, Self::Msg, Self::Durable>) {
        let _ = (id, ctx);
    }

    /// Whether the node takes up messages now. While it does not (a node still restarting),
    /// the harness drops what arrives unseen, with no safepoint, and its senders time out. The
    /// default: always.
    fn serving(&self) -> bool {
        true
    }
}
