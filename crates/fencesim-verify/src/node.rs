//! A lock-service node in the explored configuration: the design's own node behind the
//! sans-IO driver the simulator runs it with ([`NodeDriver`]), its disk, and its own clock,
//! which moves only when one of its timers fires (nothing else tells a node the time).

use std::hash::Hasher;

use fencesim_design::{
    Deadline, DesignMessage, Disk, Durability, HeldLease, KeyEvent, LockNode, NodeStart, Now,
    Origin, ServiceEvent,
};
use fencesim_driver::node::{
    history_event, key_event, NodeDriver, NodeIo, NodeStep, NodeWake, Senses, Woken,
};
use fencesim_driver::timers::Timers;
use fencesim_history::{Event, EventKind};

use crate::net::{message_id, Agent, Body, Message};
use crate::world::{Setup, Shared};

/// Read `timers`' deadlines on a clock that reads true time, as every clock in the search
/// does (it has no clock faults).
fn on_true_clock(timers: &mut Timers) {
    timers.resolve(|Deadline { at_ms, .. }| at_ms.max(0) as u64 * 1_000_000);
}

/// One lock-service node: up (a driver) or crashed (none), and what outlives a crash.
pub struct NodeAgent<N: LockNode> {
    /// The running node; `None` while it is crashed.
    pub driver: Option<NodeDriver<N>>,
    /// Its disk, which a crash leaves with what was synced.
    pub disk: Disk<N::Durable>,
    /// Its clock, ns: where its last timer fired.
    pub clock_ns: u64,
    /// How many times it has started.
    pub incarnation: u64,
    /// How many messages it has sent (for their ids).
    pub sent: u64,
}

impl<N: LockNode> NodeAgent<N> {
    /// A copy, its node copied by `clone_node`.
    pub fn clone_with(&self, clone_node: fn(&N) -> N) -> Self {
        NodeAgent {
            driver: self.driver.as_ref().map(|d| d.clone_with(clone_node)),
            disk: self.disk.clone(),
            clock_ns: self.clock_ns,
            incarnation: self.incarnation,
            sent: self.sent,
        }
    }

    /// Feed its state into `h`, its node by `hash_node`.
    pub fn hash_with(&self, hash_node: fn(&N, &mut dyn Hasher), h: &mut dyn Hasher) {
        match &self.driver {
            Some(driver) => driver.hash_with(hash_node, h),
            None => h.write_u8(0),
        }
        self.disk.hash_with(N::hash_durable, h);
        h.write_u64(self.clock_ns);
        h.write_u64(self.incarnation);
        h.write_u64(self.sent);
    }

    /// Read every deadline on its clocks on its own clock (which reads its true time: the
    /// search has no clock faults). Done after each step that touches the node, so that
    /// [`NodeAgent::earliest_timer`] reads it without changing it and its fingerprint is
    /// taken of this form.
    pub fn resolve_deadlines(&mut self) {
        let Some(driver) = self.driver.as_mut() else {
            return;
        };
        let pending = &mut driver.pending;
        for timers in [&mut pending.timers, &mut pending.marks] {
            if timers.has_clock_deadlines() {
                on_true_clock(timers);
            }
        }
    }

    /// The earliest of its timers, its deadlines resolved ([`NodeAgent::resolve_deadlines`]).
    ///
    /// A node's marked deadlines ([`fencesim_design::NodeCtx::mark_deadline`]) count as its
    /// timers here: firing one only moves its clock, so a lazily checked expiry can pass.
    pub fn earliest_timer(&self) -> Option<u64> {
        let pending = &self.driver.as_ref()?.pending;
        debug_assert!(
            [&pending.timers, &pending.marks].into_iter().all(|t| {
                let mut resolved = t.clone();
                on_true_clock(&mut resolved);
                resolved == *t
            }),
            "a node's deadlines read before they were resolved"
        );
        let timer = pending.timers.earliest().map(|(at_ns, _)| at_ns);
        let mark = pending.marks.earliest().map(|(at_ns, _)| at_ns);
        timer.into_iter().chain(mark).min()
    }

    /// Every timer: its id, its deadline on its clock (ns), and whether the simulator sets it
    /// on the node's clock (`false`: a delay in true time). None while it is down.
    pub fn deadlines(&self) -> Vec<Deadlined> {
        let Some(driver) = self.driver.as_ref() else {
            return Vec::new();
        };
        let timers = driver
            .pending
            .timers
            .deadlines()
            .map(|(id, at_ns, on_clock)| Deadlined {
                key: id.0,
                at_ns,
                on_clock,
                may_repeat: true,
            });
        // A mark waits for nothing in the simulator: only its clock's reading matters.
        let marks = driver
            .pending
            .marks
            .deadlines()
            .map(|(id, at_ns, _)| Deadlined {
                key: (1 << 63) | id.0,
                at_ns,
                on_clock: true,
                may_repeat: true,
            });
        timers.chain(marks).collect()
    }
}

/// A pending timer of an agent's, as a counterexample's timing notes it
/// ([`crate::concretise`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadlined {
    /// What tells it from the agent's other timers (and from an earlier one that happened to
    /// have the same deadline).
    pub key: u64,
    /// Its deadline on the agent's clock, ns.
    pub at_ns: u64,
    /// Whether the simulator waits for it on the agent's clock (a clock fault moves it);
    /// `false`: a delay in true time (a sleep, a request's timeout).
    pub on_clock: bool,
    /// Whether the agent may set it again, to the same deadline on its standing clock,
    /// without the search seeing it (a design's timer, set again at a later step): in true
    /// time it then falls due later than first set.
    pub may_repeat: bool,
}

/// What node `index`'s effects reach in the explored configuration.
struct Io<'a, NM, CM, D> {
    index: usize,
    name: &'a str,
    setup: &'a Setup,
    clock_ns: u64,
    sent: &'a mut u64,
    disk: &'a mut Disk<D>,
    shared: &'a mut Shared<NM, CM>,
    follows_leases: bool,
}

impl<NM: DesignMessage, CM: DesignMessage, D: Clone> NodeIo<NM, D> for Io<'_, NM, CM, D> {
    fn now_ns(&self) -> u64 {
        self.clock_ns
    }

    fn send(&mut self, to: &str, reply_to: Option<u64>, op: Option<u64>, msg: NM) {
        // A name nobody has: the message goes nowhere (the simulator's network drops it too).
        let Some(to) = self.setup.agent(to) else {
            return;
        };
        let from = Agent::Node(self.index);
        let id = message_id(from, *self.sent);
        *self.sent += 1;
        self.shared.net.push(Message {
            id,
            from,
            to,
            reply_to,
            op,
            body: Body::FromNode(msg),
            kind: if reply_to.is_some() {
                "reply"
            } else {
                "message"
            },
        });
    }

    fn persist(&mut self, state: D, durability: Durability, now_ns: u64) {
        self.disk.write(state, durability, now_ns);
    }

    fn sync(&mut self, now_ns: u64) {
        self.disk.sync(now_ns);
    }

    fn declared(&self, point: &str) -> bool {
        self.setup.service_safepoints.contains(&point)
    }

    fn first_to_apply(&mut self, log_index: u64) -> bool {
        self.shared.ledger.get_mut().first_to_apply(log_index)
    }

    fn record(&mut self, event: ServiceEvent) {
        if self.follows_leases {
            self.shared.ledger.get_mut().follow(self.name, &event);
        }
        let event = history_event(self.name, event);
        self.shared.record(event, self.clock_ns, None);
    }

    fn record_key(&mut self, event: KeyEvent) {
        let event = key_event(self.name, event);
        self.shared.record(event, self.clock_ns, None);
    }

    fn leads(&mut self, term: u64, detail: Option<String>) {
        self.shared.ledger.get_mut().set_leader(term, self.name);
        if let Some(detail) = detail {
            let event = Event {
                node: self.name.into(),
                detail: Some(detail),
                ..Event::new(EventKind::Leader)
            };
            self.shared.record(event, self.clock_ns, None);
        }
    }

    fn hand_over(&mut self, from: &str, to: &str, kept: &[HeldLease], reason: &str) {
        self.shared
            .hand_over_leases([from, to, self.name], kept, reason, self.clock_ns);
    }
}

/// A node's clocks at `clock_ns`: both read its own time.
fn now_at(clock_ns: u64) -> Now {
    let ms = (clock_ns / 1_000_000) as i64;
    Now {
        mono_ms: ms,
        wall_ms: ms,
    }
}

/// A draw of a node's: the lowest value (what it draws never decides safety, only timing,
/// which the search does not know anyway).
fn lowest(low: u64, _high: u64) -> u64 {
    low
}

impl<N: LockNode> NodeAgent<N>
where
    N::Msg: Clone,
{
    /// Start the node (again) from its disk, and drain it.
    pub fn start<CM: DesignMessage>(
        &mut self,
        index: usize,
        setup: &Setup,
        config: &N::Config,
        shared: &mut Shared<N::Msg, CM>,
    ) {
        self.incarnation += 1;
        let name = &setup.node_names[index];
        let begin = NodeStart {
            name: name.clone(),
            index,
            service_nodes: setup.node_names.clone(),
            incarnation: self.incarnation,
            durable: self.disk.durable(),
        };
        let now = now_at(self.clock_ns);
        let clock = move || now;
        let mut random = lowest;
        let senses = Senses {
            clock: &clock,
            random: &mut random,
        };
        let mut io = Io {
            index,
            name,
            setup,
            clock_ns: self.clock_ns,
            sent: &mut self.sent,
            disk: &mut self.disk,
            shared,
            follows_leases: N::FOLLOWS_LEASES,
        };
        let driver = NodeDriver::start(config, begin, false, senses, &mut io);
        self.driver = Some(driver);
        self.settle(index, setup, shared);
    }

    /// Hand the node `wake` and make every handler call it owes, then take up what it held.
    pub fn wake<CM: DesignMessage>(
        &mut self,
        index: usize,
        setup: &Setup,
        wake: NodeWake<N::Msg>,
        shared: &mut Shared<N::Msg, CM>,
    ) {
        let Some(driver) = self.driver.as_mut() else {
            return; // crashed: what reached it is lost
        };
        if let Woken::Drain { .. } = driver.wake(wake) {
            self.drain(index, setup, shared);
        }
        self.settle(index, setup, shared);
    }

    /// A message from `from` (`id`, within operation `op`).
    pub fn deliver<CM: DesignMessage>(
        &mut self,
        index: usize,
        setup: &Setup,
        origin: Origin,
        msg: N::Msg,
        shared: &mut Shared<N::Msg, CM>,
    ) {
        self.wake(index, setup, NodeWake::Message { origin, msg }, shared);
    }

    /// Fire the earliest timer: the node's clock moves to its deadline.
    pub fn fire<CM: DesignMessage>(
        &mut self,
        index: usize,
        setup: &Setup,
        shared: &mut Shared<N::Msg, CM>,
    ) {
        self.resolve_deadlines();
        let Some(at_ns) = self.earliest_timer() else {
            return;
        };
        let Some(driver) = self.driver.as_mut() else {
            return;
        };
        // A timer before a mark of the same moment: the node acts on its clock's reading.
        let Some(id) = driver.pending.timers.pop_due(at_ns) else {
            // A mark: the clock moves, and the node does nothing until something arrives.
            driver.pending.marks.pop_due(at_ns);
            self.clock_ns = self.clock_ns.max(at_ns);
            return;
        };
        self.clock_ns = self.clock_ns.max(at_ns);
        self.wake(index, setup, NodeWake::Timer(id), shared);
    }

    /// Before it waits, a settled node takes up what it held, as the simulator's loop does.
    fn settle<CM: DesignMessage>(
        &mut self,
        index: usize,
        setup: &Setup,
        shared: &mut Shared<N::Msg, CM>,
    ) {
        loop {
            let Some(driver) = self.driver.as_mut() else {
                return;
            };
            match driver.take_held() {
                Woken::Drain { .. } => self.drain(index, setup, shared),
                Woken::Nothing => return,
            }
        }
    }

    /// Make every handler call the node owes, at its clock's time now.
    fn drain<CM: DesignMessage>(
        &mut self,
        index: usize,
        setup: &Setup,
        shared: &mut Shared<N::Msg, CM>,
    ) {
        let Some(driver) = self.driver.as_mut() else {
            return;
        };
        let now = now_at(self.clock_ns);
        let clock = move || now;
        let mut random = lowest;
        let mut io = Io {
            index,
            name: &setup.node_names[index],
            setup,
            clock_ns: self.clock_ns,
            sent: &mut self.sent,
            disk: &mut self.disk,
            shared,
            follows_leases: N::FOLLOWS_LEASES,
        };
        loop {
            let senses = Senses {
                clock: &clock,
                random: &mut random,
            };
            match driver.drain(senses, &mut io) {
                // No fault watches a node here: nothing to pass.
                NodeStep::Pass(decided) => driver.pending.passed(decided),
                NodeStep::Settled => return,
            }
        }
    }

    /// The node crashes: its process and everything not synced are gone; the leases its disk
    /// no longer has end, as `revoke`s (for a node whose leases the harness follows).
    pub fn crash<CM: DesignMessage>(
        &mut self,
        index: usize,
        setup: &Setup,
        shared: &mut Shared<N::Msg, CM>,
    ) {
        self.driver = None;
        self.disk.crash(N::after_crash);
        let kept = N::FOLLOWS_LEASES
            .then(|| N::durable_leases(self.disk.synced()))
            .flatten();
        if let Some(kept) = kept {
            let name = setup.node_names[index].as_str();
            let reason = "lost: not on disk when the service crashed";
            shared.hand_over_leases([name, name, name], &kept, reason, self.clock_ns);
        }
        shared.nemesis(EventKind::Crash, &setup.node_names[index], self.clock_ns);
    }
}
