//! The node loop of a design's lock-service node ([`LockNode`]): the one loop every design's
//! nodes run, monomorphised per design so a message costs no dynamic dispatch. Which handler
//! runs when (due work around every message, messages the node holds back) is
//! [`NodeHost`]'s, from fencesim-design, which any other driver of a design shares; this loop
//! is its simulated I/O.
//!
//! It starts the node from its disk (what the last synced write left), hands it each message
//! of its design with `now` from the node's own clocks, and applies its effects in order:
//! sends and replies go through the transport (and so through its faults), timers through
//! [`Timers`] (those on the node's clocks resolved again before every wait, as a clock fault
//! moves them), writes to the node's [`NodeDisk`], and decisions into the history as service
//! events. The node settles its due work ([`LockNode::settle`]) before every wait and around
//! every message. Event-triggered faults land at the safepoints around each request: before
//! it (by the request's kind: acquire, renew, release) and after each handler call, once per
//! decision the call took, in order, once its effects are applied.

use std::sync::Arc;

use fencesim_design::{
    Deadline, KeyEvent, KeyEventKind, LockNode, MessageKind, NodeCtx, NodeEffect, NodeHost,
    NodeStart, Origin, ServiceEvent, ServiceEventKind,
};
use fencesim_history::{Event, EventKind};
use fencesim_scenario::NodeEvent;
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::clock::ClockCache;
use crate::design_body::Boxes;
use crate::design_timers::{Timers, Wake};
use crate::disk::NodeDisk;
use crate::message::Message;
use crate::nemesis::{Nemesis, When};
use crate::recorder::true_ns;
use crate::seeds::{self, Stream};
use crate::timer::Alarm;
use crate::transport::Envelope;
use crate::world::World;

/// Lock-service node `index` (named `name`)'s main task, run again by madsim on every restart:
/// the node starts from `config` and what its disk kept.
pub(crate) async fn run<N: LockNode>(
    world: Arc<World>,
    name: String,
    index: usize,
    config: N::Config,
) {
    let incarnation = world.start(&name);
    let inbox = world.inbox(&name);
    let disk = world.design_disk::<N>(&name);
    let begin = NodeStart {
        name: name.clone(),
        index,
        service_nodes: world.lease_nodes(),
        incarnation,
        durable: disk.lock().durable(),
    };
    let stream = Stream::Replica {
        index: index as u32,
        incarnation,
    };
    let mut run = NodeRun::<N> {
        world: &world,
        name: &name,
        disk: &disk,
        effects: Vec::new(),
        timers: Timers::default(),
        random: Random {
            seed: world.seed,
            stream,
            rng: None,
        },
        applying: None,
        decided: Vec::new(),
        boxes: Boxes::default(),
        clock: ClockCache::default(),
        watched: world.nemesis.watches(&name),
    };
    let mut host = run.call(|ctx| NodeHost::<N>::start(&config, begin, ctx));
    // A start decides nothing a fault could be triggered by.
    run.apply();
    run.drain(&mut host).await;
    let alarm = Alarm::default();
    // Every path through the loop ends with the node settled, so it settles before each wait.
    loop {
        if let Some(kind) = host.take_held() {
            run.before(kind).await;
            run.drain(&mut host).await;
            continue;
        }
        run.resolve_timers();
        // With no timer set (most nodes, most of the time), a plain wait for the next message.
        let wake = if run.timers.is_empty() {
            match inbox.recv().await {
                Ok(env) => Wake::Message(env),
                Err(_) => Wake::Closed,
            }
        } else {
            crate::design_timers::next(&mut run.timers, &alarm, &inbox).await
        };
        let env = match wake {
            Wake::Message(env) => env,
            Wake::Timer(id) => {
                host.timer(id);
                run.drain(&mut host).await;
                continue;
            }
            Wake::Closed => return,
        };
        let Envelope {
            src, id, op, body, ..
        } = *env;
        match body {
            Message::Design(body) => {
                let Some(msg) = run.boxes.open(body) else {
                    continue; // another design's message: not for this node
                };
                // Held, or dropped by a node not serving: nothing to do until the next wake.
                let Some(kind) = host.deliver(Origin::new(src, id, op), msg) else {
                    continue;
                };
                run.before(kind).await;
            }
            Message::Deregister { holder } => host.deregister(holder),
            // A clock signal: a clock fault may have made something due, and the timers on
            // the node's clocks are resolved again before the next wait.
            Message::ClockChanged => host.clock_changed(),
            // The resource's messages: not for this node.
            _ => continue,
        }
        run.drain(&mut host).await;
    }
}

/// One start of a node: what its handlers' effects reach.
struct NodeRun<'a, N: LockNode> {
    world: &'a Arc<World>,
    name: &'a str,
    disk: &'a NodeDisk<N>,
    effects: Vec<NodeEffect<N::Msg, N::Durable>>,
    timers: Timers,
    random: Random,
    /// The log entry whose events were last applied here, and whether this replica was the
    /// first to apply it (so records its events).
    applying: Option<(u64, bool)>,
    /// The safepoint events of the decisions applied and not yet passed (kept for its room).
    decided: Vec<NodeEvent>,
    /// The boxes of the messages it received, for those it sends.
    boxes: Boxes<N::Msg>,
    /// Its clocks as last read.
    clock: ClockCache,
    /// Whether an event-triggered fault watches this node: if not, its safepoints do nothing
    /// and are skipped.
    watched: bool,
}

/// A node's random numbers: its own stream per start, made at the first draw (most designs'
/// nodes draw none).
struct Random {
    seed: u64,
    stream: Stream,
    rng: Option<Xoshiro256PlusPlus>,
}

impl Random {
    fn range(&mut self, low: u64, high: u64) -> u64 {
        let (seed, stream) = (self.seed, self.stream);
        let rng = self.rng.get_or_insert_with(|| seeds::rng(seed, stream));
        rng.gen_range(low..high)
    }
}

impl<N: LockNode> NodeRun<'_, N> {
    /// Call a handler with a fresh context (one instant of the node's clocks); its effects
    /// wait in `effects` for [`NodeRun::apply`].
    fn call<R>(&mut self, handler: impl FnOnce(&mut NodeCtx<'_, N::Msg, N::Durable>) -> R) -> R {
        let (world, name, cache) = (self.world, self.name, &self.clock);
        let clock = || world.now_cached(name, cache);
        let random = &mut self.random;
        let mut random = |low, high| random.range(low, high);
        handler(&mut NodeCtx::new(&clock, &mut self.effects).with_random(&mut random))
    }

    /// Make every handler call `host` owes, applying each call's effects and passing the
    /// `after` safepoints of its decisions before the next call.
    async fn drain(&mut self, host: &mut NodeHost<N>) {
        // Effects a design safepoint held back (in a start, or a call before).
        self.settle().await;
        while host.busy() {
            self.call(|ctx| host.call_next(ctx));
            self.settle().await;
        }
    }

    /// Apply the pending effects, passing the safepoints of its decisions and the design's
    /// own safepoints in order: effects pushed after a design safepoint wait until it passed.
    async fn settle(&mut self) {
        while self.apply() {
            self.pass().await;
        }
    }

    /// The safepoint before a request of `kind` the node is about to handle, if a fault
    /// watches the node.
    async fn before(&self, kind: MessageKind) {
        if !self.watched {
            return;
        }
        if let Some(event) = before_event(kind) {
            Nemesis::safepoint(self.world, self.name, When::Before, event).await;
        }
    }

    /// The true time of every timer set on the node's own clocks, as they read now.
    fn resolve_timers(&mut self) {
        if !self.timers.has_clock_deadlines() {
            return;
        }
        let clocks = self.world.clocks.get_cached(self.name, &self.clock);
        let now_ns = true_ns();
        self.timers.resolve(|Deadline { clock, at_ms }| {
            let clock = match clock {
                fencesim_design::Clock::Monotonic => clocks.mono,
                fencesim_design::Clock::Wall => clocks.wall,
            };
            now_ns.saturating_add(clock.true_ns_until(now_ns, at_ms))
        });
    }

    /// Pass the `after` safepoint of each decision [`NodeRun::apply`] kept, in order, and a
    /// design's own safepoint (both its `before` and `after` triggers: it is one instant).
    async fn pass(&mut self) {
        let mut decided = std::mem::take(&mut self.decided);
        for event in decided.drain(..) {
            if matches!(event, NodeEvent::Design(_)) {
                Nemesis::safepoint(self.world, self.name, When::Before, event).await;
            }
            Nemesis::safepoint(self.world, self.name, When::After, event).await;
        }
        self.decided = decided;
    }

    /// Apply the pending effects in order, keeping the safepoint events of the decisions in
    /// `decided` if the node is watched; true if there are any to pass.
    fn apply(&mut self) -> bool {
        if self.effects.is_empty() {
            return false; // most settle calls: nothing to drain
        }
        let decided = &mut self.decided;
        let watched = self.watched;
        let (world, name) = (self.world, self.name);
        let mut effects = std::mem::take(&mut self.effects);
        let mut held = None;
        let mut pending = effects.drain(..);
        while let Some(effect) = pending.next() {
            match effect {
                NodeEffect::Safepoint(point) => {
                    check_declared(world, point);
                    // Unwatched, no fault can strike there: nothing to wait for.
                    if watched {
                        decided.push(NodeEvent::Design(point));
                        held = Some(pending.by_ref().collect::<Vec<_>>());
                        break;
                    }
                }
                NodeEffect::Send { to, msg } => {
                    let body = Message::Design(self.boxes.wrap(msg));
                    world.net.send(name, &to, None, None, body);
                }
                NodeEffect::Reply { origin, msg } => {
                    let (to, reply_to, op) = (origin.from(), Some(origin.id()), origin.op());
                    let body = Message::Design(self.boxes.wrap(msg));
                    world.net.send(name, to, reply_to, op, body);
                }
                NodeEffect::Notify { origin, msg } => {
                    let body = Message::Design(self.boxes.wrap(msg));
                    world.net.send(name, origin.from(), None, origin.op(), body);
                }
                NodeEffect::SetTimer { id, after_ms } => {
                    self.timers.set_from(true_ns(), id, after_ms)
                }
                NodeEffect::SetTimerAt { id, deadline } => self.timers.set_at(id, deadline),
                NodeEffect::CancelTimer(id) => self.timers.cancel(id),
                NodeEffect::Persist { state, durability } => {
                    self.disk.lock().write(state, durability, true_ns());
                }
                NodeEffect::Sync => self.disk.lock().sync(true_ns()),
                NodeEffect::Record(event) => {
                    if first_to_apply(world, &mut self.applying, &event) {
                        if watched {
                            decided.extend(safepoint_after(event.kind));
                        }
                        record(world, name, event, N::FOLLOWS_LEASES);
                    }
                }
                NodeEffect::RecordOnly(event) => {
                    if first_to_apply(world, &mut self.applying, &event) {
                        record(world, name, event, N::FOLLOWS_LEASES);
                    }
                }
                NodeEffect::Decided(kind) => {
                    if watched {
                        decided.extend(safepoint_after(kind));
                    }
                }
                NodeEffect::RecordKey(key) => {
                    world.event(key_event(name, key));
                }
                NodeEffect::Leads { term, detail } => {
                    world.set_leader(term, name);
                    if let Some(detail) = detail {
                        world.event(Event {
                            node: name.into(),
                            detail: Some(detail),
                            ..Event::new(EventKind::Leader)
                        });
                    }
                }
                NodeEffect::HandOver {
                    from,
                    to,
                    kept,
                    reason,
                } => world.hand_over_leases([&from, &to, name], &kept, &reason),
            }
        }
        drop(pending);
        // The effects after a design safepoint, or the emptied buffer (its room kept).
        self.effects = held.unwrap_or(effects);
        !decided.is_empty()
    }
}

/// Panic on a safepoint the design did not declare for its service side: a bug in the
/// design's node, which the first run that passes it shows.
fn check_declared(world: &World, point: &str) {
    let shape = &world.scenario.lock_service.shape;
    let declared = shape
        .safepoints
        .iter()
        .any(|s| s.name == point && s.side == fencesim_design::SafepointSide::Service);
    assert!(
        declared,
        "the design's node passed safepoint {point:?}, which its ServiceShape does not declare \
         for the service side"
    );
}

/// Whether `event` is to be recorded by this node: always, unless it applies a replicated log
/// entry that another replica applied first. `applying` keeps the last entry asked about (an
/// entry may have two events) and the answer.
fn first_to_apply(world: &World, applying: &mut Option<(u64, bool)>, event: &ServiceEvent) -> bool {
    let Some(index) = event.log_index else {
        return true;
    };
    match *applying {
        Some((last, first)) if last == index => first,
        _ => {
            let first = world.first_to_apply(index);
            *applying = Some((index, first));
            first
        }
    }
}

/// Record node `name`'s decision `event`, following its lease if `follow`.
fn record(world: &World, name: &str, event: ServiceEvent, follow: bool) {
    if follow {
        follow_lease(world, name, &event);
    }
    world.event(history_event(name, event));
}

/// Keep the world's record of node `name`'s live leases, from which a crash's `revoke`s come.
fn follow_lease(world: &World, name: &str, event: &ServiceEvent) {
    match event.kind {
        ServiceEventKind::Grant => {
            world.lease_granted(name, &event.lock, &event.holder, event.token);
        }
        ServiceEventKind::Release | ServiceEventKind::Expire | ServiceEventKind::Revoke => {
            world.lease_ended(name, &event.lock);
        }
        ServiceEventKind::Renew => {}
    }
}

/// The safepoint before a request of `kind`.
fn before_event(kind: MessageKind) -> Option<NodeEvent> {
    match kind {
        MessageKind::Acquire => Some(NodeEvent::Acquire),
        MessageKind::Renew => Some(NodeEvent::Renew),
        MessageKind::Release => Some(NodeEvent::Release),
        _ => None,
    }
}

/// The safepoint after a decision of `kind` (a revocation has none of its own).
fn safepoint_after(kind: ServiceEventKind) -> Option<NodeEvent> {
    match kind {
        ServiceEventKind::Grant => Some(NodeEvent::Grant),
        ServiceEventKind::Renew => Some(NodeEvent::Renew),
        ServiceEventKind::Release => Some(NodeEvent::Release),
        ServiceEventKind::Expire => Some(NodeEvent::Expire),
        ServiceEventKind::Revoke => None,
    }
}

/// The history's service event for a design's decision on node `name`.
/// Node `name`'s record of what it did with a quorum lock's key, as a history event.
fn key_event(name: &str, e: KeyEvent) -> Event {
    let kind = match e.kind {
        KeyEventKind::Set => EventKind::KeySet,
        KeyEventKind::Extend => EventKind::KeyExtend,
        KeyEventKind::Delete => EventKind::KeyDelete,
        KeyEventKind::Expire => EventKind::KeyExpire,
        KeyEventKind::Refuse => EventKind::KeyRefuse,
    };
    Event {
        node: name.into(),
        lock: Some(e.lock.as_str().into()),
        holder: e.holder.as_deref().map(Into::into),
        token: e.value,
        ttl_ms: e.ttl_ms,
        expires_at_ms: e.expires_at_ms,
        nodes: e.nodes,
        detail: e.detail,
        ..Event::new(kind)
    }
}

fn history_event(name: &str, e: ServiceEvent) -> Event {
    let kind = match e.kind {
        ServiceEventKind::Grant => EventKind::Grant,
        ServiceEventKind::Renew => EventKind::Renew,
        ServiceEventKind::Release => EventKind::Release,
        ServiceEventKind::Expire => EventKind::Expire,
        ServiceEventKind::Revoke => EventKind::Revoke,
    };
    Event {
        node: name.into(),
        lock: Some(e.lock.as_str().into()),
        holder: Some(e.holder.as_str().into()),
        token: Some(e.token),
        expires_at_ms: e.expires_at_ms,
        ttl_ms: e.ttl_ms,
        detail: e.detail,
        op: e.op,
        ..Event::new(kind)
    }
}
