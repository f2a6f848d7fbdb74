//! Applying a lock-service node's effects ([`NodeEffect`]) in the order its handler pushed
//! them: sends, timers, disk writes, records and hand-overs, and the safepoints of its
//! decisions, which event-triggered faults strike at. What the effects reach outside the node
//! (the network, the disk, the history, the run's shared record of leases) is the caller's,
//! through [`NodeIo`]; which handler runs when is [`fencesim_design::NodeHost`]'s.

use fencesim_design::{
    Durability, HeldLease, KeyEvent, KeyEventKind, LockNode, MessageKind, NodeCtx, NodeEffect,
    NodeHost, NodeStart, Now, Origin, ServiceEvent, ServiceEventKind, TimerId,
};
use fencesim_history::{Event, EventKind};
use fencesim_scenario::NodeEvent;

use crate::timers::Timers;

/// What a node's effects reach outside it: implemented by the simulator over madsim's network,
/// the node's disk and the run's history, and by an explorer over its own state.
pub trait NodeIo<M, D> {
    /// True time now, ns: what a timer set now counts from, and when a disk write happens.
    fn now_ns(&self) -> u64;
    /// Send `msg` to `to`, as a reply to message `reply_to` if set, within client operation
    /// `op` if set.
    fn send(&mut self, to: &str, reply_to: Option<u64>, op: Option<u64>, msg: M);
    /// Write `state` to the node's disk with `durability`, at `now_ns`.
    fn persist(&mut self, state: D, durability: Durability, now_ns: u64);
    /// Sync the node's disk at `now_ns`.
    fn sync(&mut self, now_ns: u64);
    /// Whether the design declared a service-side safepoint named `point`.
    fn declared(&self, point: &str) -> bool;
    /// Whether this node is the first replica to apply log entry `log_index` (and so the one
    /// that records its events).
    fn first_to_apply(&mut self, log_index: u64) -> bool;
    /// Record the node's decision `event` (a service event of the history).
    fn record(&mut self, event: ServiceEvent);
    /// Record what the node did with a quorum lock's key.
    fn record_key(&mut self, event: KeyEvent);
    /// The node leads from `term` on (a history event if `detail` is set).
    fn leads(&mut self, term: u64, detail: Option<String>);
    /// The leases `kept` move from node `from` to node `to`, for `reason`.
    fn hand_over(&mut self, from: &str, to: &str, kept: &[HeldLease], reason: &str);
}

/// A node's effects not yet applied, its timers, and the safepoints of the decisions applied
/// and not yet passed: what one start of a node carries between its handler calls.
#[derive(Clone, Debug)]
pub struct NodeEffects<M, D> {
    /// The effects the handlers pushed, waiting for [`NodeEffects::apply`] (after a design
    /// safepoint, the ones it held back).
    pub effects: Vec<NodeEffect<M, D>>,
    /// The node's timers.
    pub timers: Timers,
    /// The moments its state depends on without a timer ([`NodeEffect::MarkDeadline`]): the
    /// simulator ignores them; an explorer may move the node's clock to one.
    pub marks: Timers,
    /// The log entry whose events were last applied, and whether this replica was the first
    /// to apply it (so records its events).
    applying: Option<(u64, bool)>,
    /// The safepoint events of the decisions applied and not yet passed (kept for its room).
    decided: Vec<NodeEvent>,
    /// Whether an event-triggered fault watches this node: if not, its safepoints do nothing
    /// and are not kept.
    watched: bool,
}

impl<M, D> NodeEffects<M, D> {
    /// Nothing pending yet, for a node that a fault does (`watched`) or does not watch.
    pub fn new(watched: bool) -> Self {
        NodeEffects {
            effects: Vec::new(),
            timers: Timers::default(),
            marks: Timers::default(),
            applying: None,
            decided: Vec::new(),
            watched,
        }
    }

    /// The safepoint events of the decisions applied since the last call, in order, to pass;
    /// hand the vector back with [`NodeEffects::passed`] to keep its room.
    pub fn take_decided(&mut self) -> Vec<NodeEvent> {
        std::mem::take(&mut self.decided)
    }

    /// The vector [`NodeEffects::take_decided`] gave, emptied.
    pub fn passed(&mut self, mut decided: Vec<NodeEvent>) {
        decided.clear();
        self.decided = decided;
    }

    /// Apply the pending effects in order through `io`, keeping the safepoint events of the
    /// decisions if the node is watched; true if there are any to pass. A design safepoint
    /// of a watched node stops the applying: the effects after it wait for the next call.
    ///
    /// # Panics
    /// On a safepoint the design did not declare for its service side: a bug in the design's
    /// node, which the first run that passes it shows.
    pub fn apply(&mut self, io: &mut impl NodeIo<M, D>) -> bool {
        if self.effects.is_empty() {
            return false; // most settle calls: nothing to drain
        }
        let watched = self.watched;
        let mut effects = std::mem::take(&mut self.effects);
        let mut held = None;
        let mut pending = effects.drain(..);
        while let Some(effect) = pending.next() {
            match effect {
                NodeEffect::Safepoint(point) => {
                    assert!(
                        io.declared(point),
                        "the design's node passed safepoint {point:?}, which its ServiceShape \
                         does not declare for the service side"
                    );
                    // Unwatched, no fault can strike there: nothing to wait for.
                    if watched {
                        self.decided.push(NodeEvent::Design(point));
                        held = Some(pending.by_ref().collect::<Vec<_>>());
                        break;
                    }
                }
                NodeEffect::Send { to, msg } => io.send(&to, None, None, msg),
                NodeEffect::Reply { origin, msg } => {
                    io.send(origin.from(), Some(origin.id()), origin.op(), msg);
                }
                NodeEffect::Notify { origin, msg } => {
                    io.send(origin.from(), None, origin.op(), msg)
                }
                NodeEffect::SetTimer { id, after_ms } => {
                    self.timers.set_from(io.now_ns(), id, after_ms);
                }
                NodeEffect::SetTimerAt { id, deadline } => self.timers.set_at(id, deadline),
                NodeEffect::MarkDeadline { id, deadline } => self.marks.set_at(id, deadline),
                NodeEffect::CancelTimer(id) => self.timers.cancel(id),
                NodeEffect::Persist { state, durability } => {
                    let now_ns = io.now_ns();
                    io.persist(state, durability, now_ns);
                }
                NodeEffect::Sync => {
                    let now_ns = io.now_ns();
                    io.sync(now_ns);
                }
                NodeEffect::Record(event) => {
                    if first_to_apply(io, &mut self.applying, &event) {
                        if watched {
                            self.decided.extend(safepoint_after(event.kind));
                        }
                        io.record(event);
                    }
                }
                NodeEffect::RecordOnly(event) => {
                    if first_to_apply(io, &mut self.applying, &event) {
                        io.record(event);
                    }
                }
                NodeEffect::Decided(kind) => {
                    if watched {
                        self.decided.extend(safepoint_after(kind));
                    }
                }
                NodeEffect::RecordKey(key) => io.record_key(key),
                NodeEffect::Leads { term, detail } => io.leads(term, detail),
                NodeEffect::HandOver {
                    from,
                    to,
                    kept,
                    reason,
                } => io.hand_over(&from, &to, &kept, &reason),
            }
        }
        drop(pending);
        // The effects after a design safepoint, or the emptied buffer (its room kept).
        self.effects = held.unwrap_or(effects);
        !self.decided.is_empty()
    }
}

/// One start of a lock-service node: its [`NodeHost`] (which handler runs next) and its
/// [`NodeEffects`] (what they left to apply, its timers, the safepoints to pass). The caller
/// hands it what happens (messages through `host`, due timers, clock changes) and then
/// [`NodeDriver::drain`]s it, passing each batch of safepoints it answers with before it goes
/// on: the simulator awaits event-triggered faults there.
pub struct NodeDriver<N: LockNode> {
    /// Which handler runs next, and the messages the node holds back.
    pub host: NodeHost<N>,
    /// What its handlers left to do.
    pub pending: NodeEffects<N::Msg, N::Durable>,
}

impl<N: LockNode> std::fmt::Debug for NodeDriver<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeDriver")
            .field("busy", &self.host.busy())
            .field("effects", &self.pending.effects.len())
            .field("timers", &self.pending.timers)
            .finish_non_exhaustive()
    }
}

/// What a node's handler calls read: its clocks (one reading per call) and its random numbers
/// (`(low, high)` -> a number in `low..high`, from the node's seeded stream).
pub struct Senses<'a> {
    /// The node's clocks now.
    pub clock: &'a dyn Fn() -> Now,
    /// Its random numbers.
    pub random: &'a mut dyn FnMut(u64, u64) -> u64,
}

/// What a node's driver answers once it can go no further by itself.
#[derive(Debug, PartialEq, Eq)]
pub enum NodeStep {
    /// Pass these safepoints in order (a design's own safepoint both `before` and `after`: it
    /// is one instant), hand the vector back with [`NodeEffects::passed`], and drain again.
    Pass(Vec<NodeEvent>),
    /// The node has done all it owes: nothing until the next message, timer or clock change.
    Settled,
}

impl<N: LockNode> NodeDriver<N> {
    /// Start the node from `config` and what its disk kept (`begin.durable`), applying its
    /// start's effects; a start decides nothing a fault could be triggered by. Then drain it.
    pub fn start(
        config: &N::Config,
        begin: NodeStart<N::Durable>,
        watched: bool,
        senses: Senses<'_>,
        io: &mut impl NodeIo<N::Msg, N::Durable>,
    ) -> Self {
        let mut pending = NodeEffects::new(watched);
        let ctx = &mut NodeCtx::new(senses.clock, &mut pending.effects).with_random(senses.random);
        let host = NodeHost::<N>::start(config, begin, ctx);
        // Its decisions' safepoints (none) wait for the first drain.
        pending.apply(io);
        NodeDriver { host, pending }
    }

    /// An independent copy, its node copied by `clone_node` (a design's
    /// [`fencesim_design::Explorable`]).
    pub fn clone_with(&self, clone_node: fn(&N) -> N) -> Self {
        NodeDriver {
            host: self.host.clone_with(clone_node),
            pending: self.pending.clone(),
        }
    }

    /// Feed everything that decides what the node does next into `hasher`: its host (the node
    /// by `hash_node`), its timers, its marked deadlines (an explorer may move its clock to
    /// one), the log entry it is applying and the effects it has yet to apply.
    pub fn hash_with(
        &self,
        hash_node: fn(&N, &mut dyn std::hash::Hasher),
        hasher: &mut dyn std::hash::Hasher,
    ) {
        self.host.hash_with(hash_node, hasher);
        fencesim_design::explore::hash_derived(&self.pending.timers, hasher);
        fencesim_design::explore::hash_derived(&self.pending.marks, hasher);
        fencesim_design::explore::hash_debug(&self.pending.applying, hasher);
        fencesim_design::explore::hash_debug(&self.pending.effects, hasher);
    }

    /// Make every handler call the host owes, applying each call's effects, until a batch of
    /// safepoints is to be passed first ([`NodeStep::Pass`]) or the node is settled.
    pub fn drain(
        &mut self,
        senses: Senses<'_>,
        io: &mut impl NodeIo<N::Msg, N::Durable>,
    ) -> NodeStep {
        loop {
            if self.pending.apply(io) {
                return NodeStep::Pass(self.pending.take_decided());
            }
            if !self.host.busy() {
                return NodeStep::Settled;
            }
            let ctx = &mut NodeCtx::new(senses.clock, &mut self.pending.effects)
                .with_random(&mut *senses.random);
            self.host.call_next(ctx);
        }
    }

    /// The safepoint before a request of `kind` the node is about to handle, if a fault
    /// watches the node and one is named for it.
    pub fn before(&self, kind: MessageKind) -> Option<NodeEvent> {
        self.pending.watched.then(|| before_event(kind)).flatten()
    }

    /// Hand the node what woke it: a message of its design, a due timer, a deregistration, or
    /// a change of its clocks (which may have made something due).
    pub fn wake(&mut self, wake: NodeWake<N::Msg>) -> Woken {
        match wake {
            // Held, or dropped by a node not serving: nothing to do until the next wake.
            NodeWake::Message { origin, msg } => match self.host.deliver(origin, msg) {
                Some(kind) => Woken::Drain {
                    before: self.before(kind),
                },
                None => Woken::Nothing,
            },
            NodeWake::Timer(id) => {
                self.host.timer(id);
                Woken::Drain { before: None }
            }
            NodeWake::Deregister(holder) => {
                self.host.deregister(holder);
                Woken::Drain { before: None }
            }
            NodeWake::ClockChanged => {
                self.host.clock_changed();
                Woken::Drain { before: None }
            }
        }
    }

    /// Take up the first message the node held back, if it will now: before it waits again,
    /// a settled node looks at what it held.
    pub fn take_held(&mut self) -> Woken {
        match self.host.take_held() {
            Some(kind) => Woken::Drain {
                before: self.before(kind),
            },
            None => Woken::Nothing,
        }
    }
}

/// What wakes a settled node.
#[derive(Debug)]
pub enum NodeWake<M> {
    /// A message of its design, from `origin`.
    Message {
        /// Who sent it, which message it is, within which client operation.
        origin: Origin,
        /// The message.
        msg: M,
    },
    /// A timer of its is due (and no longer set).
    Timer(TimerId),
    /// A maintenance job deregistered `holder` (case K16).
    Deregister(String),
    /// One of its clocks was stepped or set off.
    ClockChanged,
}

/// What the node made of a wake.
#[derive(Debug, PartialEq, Eq)]
pub enum Woken {
    /// Nothing to do until the next wake (a message held back or dropped).
    Nothing,
    /// Pass `before` (the safepoint before the request it took up, if any), then
    /// [`NodeDriver::drain`] it.
    Drain {
        /// The safepoint before the request.
        before: Option<NodeEvent>,
    },
}

/// Whether `event` is to be recorded by this node: always, unless it applies a replicated log
/// entry that another replica applied first. `applying` keeps the last entry asked about (an
/// entry may have two events) and the answer.
fn first_to_apply<M, D>(
    io: &mut impl NodeIo<M, D>,
    applying: &mut Option<(u64, bool)>,
    event: &ServiceEvent,
) -> bool {
    let Some(index) = event.log_index else {
        return true;
    };
    match *applying {
        Some((last, first)) if last == index => first,
        _ => {
            let first = io.first_to_apply(index);
            *applying = Some((index, first));
            first
        }
    }
}

/// The safepoint before a request of `kind` a node is about to handle.
pub fn before_event(kind: MessageKind) -> Option<NodeEvent> {
    match kind {
        MessageKind::Acquire => Some(NodeEvent::Acquire),
        MessageKind::Renew => Some(NodeEvent::Renew),
        MessageKind::Release => Some(NodeEvent::Release),
        _ => None,
    }
}

/// The safepoint after a decision of `kind` (a revocation has none of its own).
pub fn safepoint_after(kind: ServiceEventKind) -> Option<NodeEvent> {
    match kind {
        ServiceEventKind::Grant => Some(NodeEvent::Grant),
        ServiceEventKind::Renew => Some(NodeEvent::Renew),
        ServiceEventKind::Release => Some(NodeEvent::Release),
        ServiceEventKind::Expire => Some(NodeEvent::Expire),
        ServiceEventKind::Revoke => None,
    }
}

/// Node `name`'s record of what it did with a quorum lock's key, as a history event.
pub fn key_event(name: &str, e: KeyEvent) -> Event {
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

/// The history's service event for a design's decision on node `name`.
pub fn history_event(name: &str, e: ServiceEvent) -> Event {
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

#[cfg(test)]
mod tests {
    use fencesim_design::{
        Durability, HeldLease, KeyEvent, NodeEffect, Origin, ServiceEvent, ServiceEventKind,
        TimerId,
    };
    use fencesim_scenario::NodeEvent;

    use super::{NodeEffects, NodeIo};

    /// What the effects reached, in order, as words.
    #[derive(Default)]
    struct Log(Vec<String>);

    impl NodeIo<&'static str, u8> for Log {
        fn now_ns(&self) -> u64 {
            5_000_000
        }
        fn send(&mut self, to: &str, reply_to: Option<u64>, op: Option<u64>, msg: &'static str) {
            self.0
                .push(format!("send {msg} to {to} {reply_to:?} {op:?}"));
        }
        fn persist(&mut self, state: u8, _: Durability, now_ns: u64) {
            self.0.push(format!("persist {state} at {now_ns}"));
        }
        fn sync(&mut self, now_ns: u64) {
            self.0.push(format!("sync at {now_ns}"));
        }
        fn declared(&self, point: &str) -> bool {
            point == "mid"
        }
        fn first_to_apply(&mut self, log_index: u64) -> bool {
            self.0.push(format!("first to apply {log_index}?"));
            log_index != 2
        }
        fn record(&mut self, event: ServiceEvent) {
            self.0
                .push(format!("record {:?} {}", event.kind, event.token));
        }
        fn record_key(&mut self, _: KeyEvent) {}
        fn leads(&mut self, term: u64, _: Option<String>) {
            self.0.push(format!("leads {term}"));
        }
        fn hand_over(&mut self, from: &str, to: &str, _: &[HeldLease], _: &str) {
            self.0.push(format!("hand over {from} {to}"));
        }
    }

    fn grant(token: u64, log_index: Option<u64>) -> NodeEffect<&'static str, u8> {
        NodeEffect::Record(ServiceEvent {
            log_index,
            ..ServiceEvent::new(ServiceEventKind::Grant, "lock", "client-1", token, None)
        })
    }

    #[test]
    fn effects_apply_in_order_and_a_watched_safepoint_holds_back_the_rest() {
        let mut node = NodeEffects::<&'static str, u8>::new(true);
        node.effects = vec![
            NodeEffect::Reply {
                origin: Origin::new("client-1", 7, Some(3)),
                msg: "granted",
            },
            grant(1, Some(1)),
            // The same log entry's second event asks nobody again.
            grant(1, Some(1)),
            NodeEffect::SetTimer {
                id: TimerId(1),
                after_ms: 2,
            },
            NodeEffect::Safepoint("mid"),
            NodeEffect::Persist {
                state: 9,
                durability: Durability::Synced,
            },
            // Another replica applied entry 2 first: not recorded here.
            grant(2, Some(2)),
            NodeEffect::Leads {
                term: 4,
                detail: None,
            },
        ];
        let mut log = Log::default();
        assert!(node.apply(&mut log), "safepoints to pass");
        assert_eq!(
            log.0,
            [
                "send granted to client-1 Some(7) Some(3)",
                "first to apply 1?",
                "record Grant 1",
                "record Grant 1",
            ]
        );
        assert_eq!(node.timers.earliest(), Some((7_000_000, TimerId(1))));
        let decided = node.take_decided();
        assert_eq!(
            decided,
            [NodeEvent::Grant, NodeEvent::Grant, NodeEvent::Design("mid")]
        );
        node.passed(decided);
        log.0.clear();
        assert!(!node.apply(&mut log), "nothing decided after the safepoint");
        assert_eq!(
            log.0,
            ["persist 9 at 5000000", "first to apply 2?", "leads 4"]
        );
        assert!(node.effects.is_empty());
    }

    #[test]
    fn an_unwatched_node_keeps_no_safepoint_and_applies_everything() {
        let mut node = NodeEffects::<&'static str, u8>::new(false);
        node.effects = vec![
            grant(1, None),
            NodeEffect::Safepoint("mid"),
            NodeEffect::Sync,
        ];
        let mut log = Log::default();
        assert!(!node.apply(&mut log));
        assert_eq!(log.0, ["record Grant 1", "sync at 5000000"]);
    }

    #[test]
    #[should_panic(expected = "which its ServiceShape does not declare")]
    fn an_undeclared_safepoint_is_a_design_bug() {
        let mut node = NodeEffects::<&'static str, u8>::new(false);
        node.effects = vec![NodeEffect::Safepoint("undeclared")];
        node.apply(&mut Log::default());
    }
}
