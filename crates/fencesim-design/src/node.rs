//! Lock-service nodes: the server side of a design.

use crate::event::{HeldLease, KeyEvent, ServiceEvent, ServiceEventKind};
use crate::message::{DesignMessage, Origin};
use crate::time::{Deadline, Now, TimerId};

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

/// When a node's writes reach its disk: Redis's `appendfsync always | everysec | no`, a lease
/// server's `fsync` setting. A node with [`FsyncPolicy::Periodic`] sets itself a timer and
/// calls [`NodeCtx::sync`] when it fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FsyncPolicy {
    /// Every write, before the node goes on.
    Always,
    /// Every `every_ms`: a crash loses what came since the last sync.
    Periodic {
        /// The sync period, ms.
        every_ms: u64,
    },
    /// Never: a crash loses everything written since the start.
    Never,
}

impl FsyncPolicy {
    /// How a write under this policy is persisted.
    pub fn durability(self) -> Durability {
        match self {
            FsyncPolicy::Always => Durability::Synced,
            FsyncPolicy::Periodic { .. } | FsyncPolicy::Never => Durability::Unsynced,
        }
    }

    /// The period of a periodic sync, ms.
    pub fn period_ms(self) -> Option<u64> {
        match self {
            FsyncPolicy::Periodic { every_ms } => Some(every_ms),
            FsyncPolicy::Always | FsyncPolicy::Never => None,
        }
    }
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
    /// Send `msg` to the sender of an earlier request, later and not as its reply (a queued
    /// acquire's grant, a watch firing): the message names that request's operation.
    Notify {
        /// The earlier request's origin.
        origin: Origin,
        /// The message.
        msg: M,
    },
    /// Call [`LockNode::on_timer`] with `id` once `after_ms` of simulated time has passed.
    SetTimer {
        /// The timer.
        id: TimerId,
        /// How long from now, ms (at least 1: a timer never fires within the same instant).
        after_ms: u64,
    },
    /// Call [`LockNode::on_timer`] with `id` when the node's own clock reads the deadline.
    SetTimerAt {
        /// The timer.
        id: TimerId,
        /// When, on which clock.
        deadline: Deadline,
    },
    /// Mark the moment the node's own clock reads the deadline as one its state depends on,
    /// though nothing happens then (a lazily checked expiry): see [`NodeCtx::mark_deadline`].
    MarkDeadline {
        /// The mark (a new one replaces it).
        id: TimerId,
        /// When, on which clock.
        deadline: Deadline,
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
    /// Make every write so far durable (an `fsync`).
    Sync,
    /// Record a decision into the history (it also counts as [`NodeEffect::Decided`]).
    Record(ServiceEvent),
    /// Record a decision into the history now, and count it for event-triggered faults only
    /// when the node says [`NodeEffect::Decided`] later: when it takes effect for its
    /// requester (a synchronous primary's grant, answered once the backup acknowledged it).
    RecordOnly(ServiceEvent),
    /// This node leads from `term` on (a Raft leader, a promoted primary): `node = "leader"`
    /// faults and the targeted nemesis aim at the node that leads in the highest term.
    Leads {
        /// The term or epoch.
        term: u64,
        /// The text of the `leader` event to record (`"epoch 2: promoted"`); `None` records
        /// none (a node that leads from the start, as the scenario says).
        detail: Option<String>,
    },
    /// The leases node `from` honoured are now node `to`'s to serve, and `to` honours only
    /// `kept` of them: each other one has ended, recorded as a `revoke` by this node (a
    /// promoted backup lacking what the old primary never shipped; a primary stepping down to
    /// a newer one's table). The harness knows the leases `from` honoured from its events.
    HandOver {
        /// The node whose leases they were.
        from: String,
        /// The node that serves them now.
        to: String,
        /// The leases `to` honours.
        kept: Vec<HeldLease>,
        /// The revocations' `detail`.
        reason: String,
    },
    /// A decision of this kind was taken, for event-triggered faults (`after = "grant"` on this
    /// node), without a history event: a node whose decisions are no ground truth (a Redis
    /// node of Redlock, whose grants only the client's majority turns into a lease).
    Decided(ServiceEventKind),
    /// Record what this node, one of a quorum lock's, did with the lock's key (see
    /// [`KeyEvent`]): a record only, which no fault is triggered by.
    RecordKey(KeyEvent),
    /// The node passes the design's safepoint of this name ([`crate::Safepoint`], service
    /// side): a fault triggered on it strikes here, before the effects pushed after it are
    /// applied.
    Safepoint(&'static str),
}

/// What a node's handler is given: its clocks, its random numbers, and where its effects go.
pub struct NodeCtx<'a, M, D> {
    clock: &'a dyn Fn() -> Now,
    /// The clocks, read at the first `now` of the call (one instant).
    now: std::cell::Cell<Option<Now>>,
    effects: &'a mut Vec<NodeEffect<M, D>>,
    /// `(low, high)` -> a number in `low..high`, from the node's seeded stream.
    random: Option<&'a mut dyn FnMut(u64, u64) -> u64>,
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
            random: None,
        }
    }

    /// The same context with a source of random numbers: `random(low, high)` answers a number
    /// in `low..high` (the harness draws them from the node's own seeded stream, one per node
    /// and start, so a seed replays them).
    pub fn with_random(mut self, random: &'a mut dyn FnMut(u64, u64) -> u64) -> Self {
        self.random = Some(random);
        self
    }

    /// A random number in `low..high` (`low < high`), from the node's seeded stream: Raft's
    /// randomised election timeouts.
    ///
    /// # Panics
    /// If the context was made without [`NodeCtx::with_random`] (a test driver that gives the
    /// node no randomness), or if `low >= high`.
    pub fn random_range(&mut self, low: u64, high: u64) -> u64 {
        assert!(low < high, "random_range({low}, {high}): an empty range");
        match self.random.as_mut() {
            Some(random) => random(low, high),
            None => panic!("this node context has no random source (NodeCtx::with_random)"),
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

    /// Send `msg` to whoever sent the request from `origin`, later and not as its reply (see
    /// [`NodeEffect::Notify`]).
    pub fn notify(&mut self, origin: &Origin, msg: M) {
        self.effects.push(NodeEffect::Notify {
            origin: origin.clone(),
            msg,
        });
    }

    /// Set timer `id` to fire after `after_ms` ms (replacing it if set).
    pub fn set_timer(&mut self, id: TimerId, after_ms: u64) {
        self.effects.push(NodeEffect::SetTimer { id, after_ms });
    }

    /// Set timer `id` to fire when the node's own clock reaches `deadline` (replacing it if
    /// set). The harness follows the clock's drift and steps: a wall clock jumped forward
    /// brings the timer forward.
    pub fn set_timer_at(&mut self, id: TimerId, deadline: Deadline) {
        self.effects.push(NodeEffect::SetTimerAt { id, deadline });
    }

    /// Mark the moment the node's own clock reaches `deadline` as one its state depends on,
    /// though the node does nothing then: a key that expires lazily (Redis checks a key's TTL
    /// when the key is read) changes what the next request sees once the clock passes it. The
    /// simulator does nothing at a mark (its clocks run on their own, and `on_timer` is not
    /// called); `fencesim verify`, whose clocks move only to deadlines, lets the node's clock
    /// reach it, so that such an expiry can happen before any later request. A mark with the
    /// same `id` replaces it.
    pub fn mark_deadline(&mut self, id: TimerId, deadline: Deadline) {
        self.effects.push(NodeEffect::MarkDeadline { id, deadline });
    }

    /// Cancel timer `id`.
    pub fn cancel_timer(&mut self, id: TimerId) {
        self.effects.push(NodeEffect::CancelTimer(id));
    }

    /// Write `state` as the node's durable state.
    pub fn persist(&mut self, state: D, durability: Durability) {
        self.effects.push(NodeEffect::Persist { state, durability });
    }

    /// Make every write so far durable (an `fsync`).
    pub fn sync(&mut self) {
        self.effects.push(NodeEffect::Sync);
    }

    /// Record `event` into the history.
    pub fn record(&mut self, event: ServiceEvent) {
        self.effects.push(NodeEffect::Record(event));
    }

    /// Record `event` into the history, and say [`NodeCtx::decided`] later, when it takes
    /// effect (see [`NodeEffect::RecordOnly`]).
    pub fn record_only(&mut self, event: ServiceEvent) {
        self.effects.push(NodeEffect::RecordOnly(event));
    }

    /// Say this node leads from `term` on, recording a `leader` event with `detail` if given
    /// (see [`NodeEffect::Leads`]).
    pub fn leads(&mut self, term: u64, detail: Option<String>) {
        self.effects.push(NodeEffect::Leads { term, detail });
    }

    /// Hand node `from`'s leases over to node `to`, which honours `kept` of them (see
    /// [`NodeEffect::HandOver`]).
    pub fn hand_over(
        &mut self,
        from: impl Into<String>,
        to: impl Into<String>,
        kept: Vec<HeldLease>,
        reason: impl Into<String>,
    ) {
        self.effects.push(NodeEffect::HandOver {
            from: from.into(),
            to: to.into(),
            kept,
            reason: reason.into(),
        });
    }

    /// Say a decision of `kind` was taken, without recording it (see [`NodeEffect::Decided`]).
    pub fn decided(&mut self, kind: ServiceEventKind) {
        self.effects.push(NodeEffect::Decided(kind));
    }

    /// Record what this node did with a quorum lock's key (see [`NodeEffect::RecordKey`]).
    pub fn record_key(&mut self, event: KeyEvent) {
        self.effects.push(NodeEffect::RecordKey(event));
    }

    /// Pass the design's safepoint `name`, one its
    /// [`ServiceShape::safepoints`](crate::ServiceShape::safepoints) declares for the service
    /// side (see [`NodeEffect::Safepoint`]). Effects pushed after it wait for it.
    pub fn safepoint(&mut self, name: &'static str) {
        self.effects.push(NodeEffect::Safepoint(name));
    }
}

/// What a node starts from, each time it starts: the first time, and after every crash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStart<D> {
    /// The node's name (`lease-service`, `redis-2`).
    pub name: String,
    /// Its position among the lock service's nodes, from 0.
    pub index: usize,
    /// The names of all the lock service's nodes, its own included, in order.
    pub service_nodes: Vec<String>,
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
///
/// `Send + Sync`: `fencesim verify` shares one copy of a state among the search states that
/// hold it alike, across its worker threads (plain data is both; a `RefCell` or `Rc` is not).
pub trait LockNode: Sized + Send + Sync + 'static {
    /// The design's message type.
    type Msg: DesignMessage;
    /// What the node writes to disk and starts from after a crash.
    type Durable: Clone + std::fmt::Debug + Send + Sync + 'static;
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

    /// Due work that no message brings: reap expired leases, grant a freed lock to the next
    /// waiter. The harness calls it before every wait, before and after every message it hands
    /// the node, and again at once for as long as it returns true; each call's effects are
    /// applied and its decisions' `after` safepoints passed before the next call, so a fault
    /// triggered by an expiry strikes before the request that follows it is handled. As it runs
    /// last before every wait, it is where a node sets the timer of its next deadline. The
    /// default does nothing.
    fn settle(&mut self, ctx: &mut NodeCtx<'_, Self::Msg, Self::Durable>) -> bool {
        let _ = ctx;
        false
    }

    /// A maintenance job deregistered client `holder` (a `deregister` fault: the reaper of
    /// case K16, which removes a client's registration). The default ignores it.
    fn on_deregister(&mut self, holder: &str, ctx: &mut NodeCtx<'_, Self::Msg, Self::Durable>) {
        let _ = (holder, ctx);
    }

    /// Whether the harness follows the node's live leases from its recorded events (a grant
    /// starts one; a release, expiry or revocation ends it), so that leases a crash, a restore
    /// or a failover makes the service forget are recorded as `revoke`: after a crash or
    /// restore those [`LockNode::durable_leases`] lacks, at a [`NodeEffect::HandOver`] those
    /// it does not keep. The history then shows when the service stopped honouring each.
    const FOLLOWS_LEASES: bool = false;

    /// The leases a node starting from `durable` would honour, or `None` if a crash by itself
    /// ends none (a replica whose leases live on in its peers; the default).
    fn durable_leases(durable: Option<&Self::Durable>) -> Option<Vec<HeldLease>> {
        let _ = durable;
        None
    }

    /// What the disk holds after a crash: by default the last synced state, `synced`. A
    /// design with a record it writes through apart from the rest (a token counter synced on
    /// every grant) carries that record over from `lost`, the unsynced state the crash lost.
    fn after_crash(
        synced: Option<Self::Durable>,
        lost: Option<Self::Durable>,
    ) -> Option<Self::Durable> {
        let _ = lost;
        synced
    }

    /// Feed everything in `durable` into `hasher`, for `fencesim verify`'s fingerprint of a
    /// node's disk (a crash brings it back, so it decides what the node does after one). The
    /// default hashes its `Debug` form ([`crate::explore::hash_debug`]); a design whose durable
    /// type derives `Hash` may answer [`crate::explore::hash_derived`], several times cheaper.
    fn hash_durable(durable: &Self::Durable, hasher: &mut dyn std::hash::Hasher) {
        crate::explore::hash_debug(durable, hasher);
    }

    /// What the disk holds after it is restored from `backup` (the last state synced at or
    /// before the backup's time): by default the backup. A design with a record kept off the
    /// backed-up volume carries it over from `latest`, the state the restore replaced.
    fn after_restore(
        backup: Option<Self::Durable>,
        latest: Option<Self::Durable>,
    ) -> Option<Self::Durable> {
        let _ = latest;
        backup
    }

    /// Whether the node takes up `msg` now. If not, the harness holds it, and each later one
    /// the node does not take either, and hands them over in arrival order once it does, each
    /// with its safepoints: a synchronous primary waiting for its backup's acknowledgement
    /// takes only that. The default: every message.
    fn takes_now(&self, msg: &Self::Msg) -> bool {
        let _ = msg;
        true
    }

    /// Whether the node takes up messages now. While it does not (a node still restarting),
    /// the harness drops what arrives unseen, with no safepoint, and its senders time out. The
    /// default: always.
    fn serving(&self) -> bool {
        true
    }
}
