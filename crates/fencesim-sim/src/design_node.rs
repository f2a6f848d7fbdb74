//! The node loop of a design's lock-service node ([`LockNode`]): the one loop every design's
//! nodes run, monomorphised per design so a message costs no dynamic dispatch.
//!
//! It starts the node from its disk (what the last synced write left), hands it each message
//! of its design with `now` from the node's own clocks, and applies its effects in order:
//! sends and replies go through the transport (and so through its faults), timers through
//! [`Timers`], writes to the node's [`Disk`], and decisions into the history as service
//! events. Event-triggered faults land at the safepoints around each request: before it (by
//! the request's kind: acquire, renew, release) and after it, once per decision the handler
//! took, in order, once its effects are applied.

use std::any::Any;
use std::sync::{Arc, Mutex};

use fencesim_design::{
    Durability, LockNode, MessageKind, NodeCtx, NodeEffect, NodeStart, Origin, ServiceEvent,
    ServiceEventKind,
};
use fencesim_history::{Event, EventKind};
use fencesim_scenario::NodeEvent;

use crate::design_body::DesignBody;
use crate::design_timers::{Timers, Wake};
use crate::message::Message;
use crate::nemesis::{Nemesis, When};
use crate::timer::Alarm;
use crate::transport::Envelope;
use crate::world::World;

/// A node's simulated disk: the last synced state, and what a crash would lose.
#[derive(Debug)]
pub(crate) struct Disk<D> {
    synced: Option<D>,
    pending: Option<D>,
}

impl<D> Default for Disk<D> {
    fn default() -> Self {
        Disk {
            synced: None,
            pending: None,
        }
    }
}

impl<D: Clone> Disk<D> {
    /// Write `state`; a synced write makes it (and everything before it) durable.
    pub fn write(&mut self, state: D, durability: Durability) {
        match durability {
            Durability::Synced => {
                self.synced = Some(state);
                self.pending = None;
            }
            Durability::Unsynced => self.pending = Some(state),
        }
    }

    /// What a node starting now finds.
    pub fn durable(&self) -> Option<D> {
        self.synced.clone()
    }
}

impl<D> Disk<D> {
    /// The node crashed: unsynced writes are gone.
    pub fn crash(&mut self) {
        self.pending = None;
    }
}

/// A disk of any design's state, as the world keeps it across a node's crashes; the node loop,
/// which knows the state's type, holds it as a [`SharedDisk`].
pub(crate) trait AnyDisk: Send + Sync {
    /// The node crashed: unsynced writes are gone.
    fn crash(&self);
    /// For the node loop.
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

/// One node's disk, shared by the world (which crashes it) and the node loop (which writes it).
pub(crate) type SharedDisk<D> = Mutex<Disk<D>>;

impl<D: Send + 'static> AnyDisk for SharedDisk<D> {
    fn crash(&self) {
        self.lock().expect("disk").crash();
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

/// Lock-service node `index` (named `name`)'s main task, run again by madsim on every restart:
/// the node starts from `config` and what its disk kept.
pub(crate) async fn run<N: LockNode>(
    world: Arc<World>,
    name: String,
    index: usize,
    config: N::Config,
) {
    let name = name.as_str();
    let incarnation = world.start(name);
    let inbox = world.inbox(name);
    let disk = world.design_disk::<N::Durable>(name);
    let begin = NodeStart {
        name: name.to_owned(),
        index,
        incarnation,
        durable: disk.lock().expect("disk").durable(),
    };
    let mut effects = Vec::new();
    let (mut timers, alarm) = (Timers::default(), Alarm::default());
    let clock = || world.now(name);
    let mut node = N::start(&config, begin, &mut NodeCtx::new(&clock, &mut effects));
    apply(&world, name, &disk, &mut effects, &mut timers);
    loop {
        let env = match timers.next(&alarm, &inbox).await {
            Wake::Message(env) => env,
            Wake::Timer(id) => {
                node.on_timer(id, &mut NodeCtx::new(&clock, &mut effects));
                let decided = apply(&world, name, &disk, &mut effects, &mut timers);
                after(&world, name, decided).await;
                continue;
            }
            Wake::Closed => return,
        };
        let Envelope {
            src, id, op, body, ..
        } = *env;
        let Some(msg) = design_message::<N::Msg>(body).filter(|_| node.serving()) else {
            continue;
        };
        let before = before_event(fencesim_design::DesignMessage::kind(&msg));
        if let Some(event) = before {
            Nemesis::safepoint(&world, name, When::Before, event).await;
        }
        let origin = Origin::new(src, id, op);
        node.on_message(&origin, msg, &mut NodeCtx::new(&clock, &mut effects));
        let decided = apply(&world, name, &disk, &mut effects, &mut timers);
        after(&world, name, decided).await;
    }
}

/// The message as design `M`'s; harness messages and local signals are not the node's.
fn design_message<M: fencesim_design::DesignMessage>(body: Message) -> Option<M> {
    match body {
        Message::Design(body) => DesignBody::downcast(body),
        _ => None,
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

/// Pass the `after` safepoint of each decision, in order.
async fn after(world: &Arc<World>, name: &str, decided: Vec<NodeEvent>) {
    for event in decided {
        Nemesis::safepoint(world, name, When::After, event).await;
    }
}

/// Apply `effects` in order; returns the safepoint events of the decisions taken.
fn apply<M: fencesim_design::DesignMessage, D: Clone + Send + 'static>(
    world: &World,
    name: &str,
    disk: &SharedDisk<D>,
    effects: &mut Vec<NodeEffect<M, D>>,
    timers: &mut Timers,
) -> Vec<NodeEvent> {
    let mut decided = Vec::new();
    for effect in effects.drain(..) {
        match effect {
            NodeEffect::Send { to, msg } => {
                world
                    .net
                    .send(name, &to, None, None, Message::Design(DesignBody::new(msg)));
            }
            NodeEffect::Reply { origin, msg } => {
                let body = Message::Design(DesignBody::new(msg));
                let (to, reply_to, op) = (origin.from(), Some(origin.id()), origin.op());
                world.net.send(name, to, reply_to, op, body);
            }
            NodeEffect::SetTimer { id, after_ms } => timers.set(id, after_ms),
            NodeEffect::CancelTimer(id) => timers.cancel(id),
            NodeEffect::Persist { state, durability } => {
                disk.lock().expect("disk").write(state, durability);
            }
            NodeEffect::Record(event) => {
                decided.extend(safepoint_after(event.kind));
                world.event(history_event(name, event));
            }
            NodeEffect::Decided(kind) => decided.extend(safepoint_after(kind)),
        }
    }
    decided
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
        detail: e.detail,
        op: e.op,
        ..Event::new(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_loses_the_writes_since_the_last_synced_one() {
        let mut disk = Disk::<u32>::default();
        assert_eq!(disk.durable(), None);
        disk.write(1, Durability::Synced);
        disk.write(2, Durability::Unsynced);
        assert_eq!(
            disk.durable(),
            Some(1),
            "an unsynced write is not on disk yet"
        );
        disk.crash();
        disk.write(3, Durability::Unsynced);
        disk.write(4, Durability::Synced);
        disk.crash();
        assert_eq!(
            disk.durable(),
            Some(4),
            "a synced write carries the ones before it"
        );
    }
}
