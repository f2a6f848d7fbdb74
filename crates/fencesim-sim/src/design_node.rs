//! The node loop of a design's lock-service node ([`LockNode`]): the one loop every design's
//! nodes run, monomorphised per design so a message costs no dynamic dispatch. Which handler
//! runs when (due work around every message, messages the node holds back) is
//! [`NodeHost`]'s, from fencesim-design, which any other driver of a design shares; this loop
//! is its simulated I/O.
//!
//! It starts the node from its disk (what the last synced write left), hands it each message
//! of its design with `now` from the node's own clocks, and applies its effects in order
//! ([`NodeEffects::apply`], the sans-IO driver's, through [`SimNodeIo`]):
//! sends and replies go through the transport (and so through its faults), timers through
//! the driver's `Timers` (those on the node's clocks resolved again before every wait, as a clock fault
//! moves them), writes to the node's [`NodeDisk`], and decisions into the history as service
//! events. The node settles its due work ([`LockNode::settle`]) before every wait and around
//! every message. Event-triggered faults land at the safepoints around each request: before
//! it (by the request's kind: acquire, renew, release) and after each handler call, once per
//! decision the call took, in order, once its effects are applied.

use std::sync::Arc;

use fencesim_design::{
    Deadline, Durability, HeldLease, KeyEvent, LockNode, NodeStart, Origin, ServiceEvent,
};
use fencesim_driver::node::{
    history_event, key_event, NodeDriver, NodeIo, NodeStep, NodeWake, Senses, Woken,
};
use fencesim_driver::timers::Timers;
use fencesim_history::{Event, EventKind};
use fencesim_scenario::NodeEvent;
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::clock::ClockCache;
use crate::design_body::Boxes;
use crate::design_timers::Wake;
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
    let watched = world.nemesis.watches(&name);
    let mut run = NodeRun::<N> {
        world: &world,
        name: &name,
        disk: &disk,
        random: Random {
            seed: world.seed,
            stream,
            rng: None,
        },
        boxes: Boxes::default(),
        clock: ClockCache::default(),
    };
    let mut node = run.with(|senses, io| NodeDriver::start(&config, begin, watched, senses, io));
    run.drain(&mut node).await;
    let alarm = Alarm::default();
    // Every path through the loop ends with the node settled, so it settles before each wait.
    loop {
        if let Woken::Drain { before } = node.take_held() {
            run.before(before).await;
            run.drain(&mut node).await;
            continue;
        }
        run.resolve_timers(&mut node.pending.timers);
        // With no timer set (most nodes, most of the time), a plain wait for the next message.
        let wake = if node.pending.timers.is_empty() {
            match inbox.recv().await {
                Ok(env) => Wake::Message(env),
                Err(_) => Wake::Closed,
            }
        } else {
            crate::design_timers::next(&mut node.pending.timers, &alarm, &inbox).await
        };
        let env = match wake {
            Wake::Message(env) => env,
            Wake::Timer(id) => {
                node.wake(NodeWake::Timer(id));
                run.drain(&mut node).await;
                continue;
            }
            Wake::Closed => return,
        };
        let Envelope {
            src, id, op, body, ..
        } = *env;
        let wake = match body {
            Message::Design(body) => {
                let Some(msg) = run.boxes.open(body) else {
                    continue; // another design's message: not for this node
                };
                let origin = Origin::new(src, id, op);
                NodeWake::Message { origin, msg }
            }
            Message::Deregister { holder } => NodeWake::Deregister(holder),
            // A clock signal: a clock fault may have made something due, and the timers on
            // the node's clocks are resolved again before the next wait.
            Message::ClockChanged => NodeWake::ClockChanged,
            // The resource's messages: not for this node.
            _ => continue,
        };
        if let Woken::Drain { before } = node.wake(wake) {
            run.before(before).await;
            run.drain(&mut node).await;
        }
    }
}

/// One start of a node: what its handlers read and what their effects reach, around its
/// [`NodeDriver`].
struct NodeRun<'a, N: LockNode> {
    world: &'a Arc<World>,
    name: &'a str,
    disk: &'a NodeDisk<N>,
    random: Random,
    /// The boxes of the messages it received, for those it sends.
    boxes: Boxes<N::Msg>,
    /// Its clocks as last read.
    clock: ClockCache,
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
    /// Run `f` with the node's senses (its clocks, one reading per handler call, and its
    /// random stream) and its simulated I/O.
    fn with<R>(&mut self, f: impl FnOnce(Senses<'_>, &mut SimNodeIo<'_, N>) -> R) -> R {
        let (world, name, cache) = (self.world, self.name, &self.clock);
        let clock = || world.now_cached(name, cache);
        let random = &mut self.random;
        let mut random = |low, high| random.range(low, high);
        let mut io = SimNodeIo::<N> {
            world,
            name,
            disk: self.disk,
            boxes: &mut self.boxes,
        };
        let senses = Senses {
            clock: &clock,
            random: &mut random,
        };
        f(senses, &mut io)
    }

    /// Make every handler call `node` owes ([`NodeDriver::drain`]), passing the safepoints
    /// of its decisions as they come, in order.
    async fn drain(&mut self, node: &mut NodeDriver<N>) {
        loop {
            match self.with(|senses, io| node.drain(senses, io)) {
                NodeStep::Pass(decided) => {
                    self.pass(&decided).await;
                    node.pending.passed(decided);
                }
                NodeStep::Settled => return,
            }
        }
    }

    /// The safepoint before a request the node is about to handle, if it has one.
    async fn before(&self, before: Option<NodeEvent>) {
        if let Some(event) = before {
            Nemesis::safepoint(self.world, self.name, When::Before, event).await;
        }
    }

    /// The true time of every timer set on the node's own clocks, as they read now.
    fn resolve_timers(&self, timers: &mut Timers) {
        if !timers.has_clock_deadlines() {
            return;
        }
        let clocks = self.world.clocks.get_cached(self.name, &self.clock);
        let now_ns = true_ns();
        timers.resolve(|Deadline { clock, at_ms }| {
            let clock = match clock {
                fencesim_design::Clock::Monotonic => clocks.mono,
                fencesim_design::Clock::Wall => clocks.wall,
            };
            now_ns.saturating_add(clock.true_ns_until(now_ns, at_ms))
        });
    }

    /// Pass the `after` safepoint of each decision, in order, and a design's own safepoint
    /// (both its `before` and `after` triggers: it is one instant).
    async fn pass(&self, decided: &[NodeEvent]) {
        for &event in decided {
            if matches!(event, NodeEvent::Design(_)) {
                Nemesis::safepoint(self.world, self.name, When::Before, event).await;
            }
            Nemesis::safepoint(self.world, self.name, When::After, event).await;
        }
    }
}

/// What node `name`'s effects reach in a simulation: madsim's network (through the design's
/// message boxes), its disk, the history and the run's record of leases.
struct SimNodeIo<'a, N: LockNode> {
    world: &'a World,
    name: &'a str,
    disk: &'a NodeDisk<N>,
    boxes: &'a mut Boxes<N::Msg>,
}

impl<N: LockNode> NodeIo<N::Msg, N::Durable> for SimNodeIo<'_, N> {
    fn now_ns(&self) -> u64 {
        true_ns()
    }

    fn send(&mut self, to: &str, reply_to: Option<u64>, op: Option<u64>, msg: N::Msg) {
        let body = Message::Design(self.boxes.wrap(msg));
        self.world.net.send(self.name, to, reply_to, op, body);
    }

    fn persist(&mut self, state: N::Durable, durability: Durability, now_ns: u64) {
        self.disk.lock().write(state, durability, now_ns);
    }

    fn sync(&mut self, now_ns: u64) {
        self.disk.lock().sync(now_ns);
    }

    fn declared(&self, point: &str) -> bool {
        let shape = &self.world.scenario.lock_service.shape;
        shape
            .safepoints
            .iter()
            .any(|s| s.name == point && s.side == fencesim_design::SafepointSide::Service)
    }

    fn first_to_apply(&mut self, log_index: u64) -> bool {
        self.world.first_to_apply(log_index)
    }

    fn record(&mut self, event: ServiceEvent) {
        if N::FOLLOWS_LEASES {
            self.world.follow_lease(self.name, &event);
        }
        self.world.event(history_event(self.name, event));
    }

    fn record_key(&mut self, event: KeyEvent) {
        self.world.event(key_event(self.name, event));
    }

    fn leads(&mut self, term: u64, detail: Option<String>) {
        self.world.set_leader(term, self.name);
        if let Some(detail) = detail {
            self.world.event(Event {
                node: self.name.into(),
                detail: Some(detail),
                ..Event::new(EventKind::Leader)
            });
        }
    }

    fn hand_over(&mut self, from: &str, to: &str, kept: &[HeldLease], reason: &str) {
        self.world
            .hand_over_leases([from, to, self.name], kept, reason);
    }
}
