//! The host of a lock-service node: what every driver of a [`LockNode`] does the same way,
//! as a sans-IO state machine of its own, so that the simulator and any other driver (an
//! explorer of every schedule) share one copy of it.
//!
//! - [`NodeHost`] keeps the node and decides which handler runs next: due work
//!   ([`LockNode::settle`]) before every wait and around every message, again for as long as
//!   it asks; messages the node does not take up now ([`LockNode::takes_now`]) held in arrival
//!   order and handed over once it does. The driver builds each call's [`NodeCtx`] (its clocks,
//!   its random numbers) and applies the effects; between two calls it passes the safepoints of
//!   the decisions the last call took (a fault may strike there).
//! - [`Disk`] is a node's disk: a write reaches it only when synced, a crash loses the rest
//!   ([`LockNode::after_crash`]), a restore brings back the backup as of a time
//!   ([`LockNode::after_restore`]).

use std::collections::VecDeque;

use crate::message::{DesignMessage, MessageKind, Origin};
use crate::node::{Durability, LockNode, NodeCtx, NodeStart};
use crate::time::TimerId;

/// One handler call the host owes the node.
#[derive(Clone, Debug)]
enum Call<M> {
    /// [`LockNode::settle`], again at once while it returns true.
    Settle,
    /// [`LockNode::on_message`].
    Message(Origin, M),
    /// [`LockNode::on_timer`].
    Timer(TimerId),
    /// [`LockNode::on_deregister`].
    Deregister(String),
}

/// A started node and the handler calls it is owed. Feed it what happens to the node
/// ([`deliver`](NodeHost::deliver), [`timer`](NodeHost::timer),
/// [`deregister`](NodeHost::deregister), [`clock_changed`](NodeHost::clock_changed)), then
/// make each call it owes with [`call_next`](NodeHost::call_next) while it is
/// [`busy`](NodeHost::busy); before a wait, [`take_held`](NodeHost::take_held) first.
pub struct NodeHost<N: LockNode> {
    node: N,
    /// Messages the node did not take up when they came, in arrival order.
    held: VecDeque<(Origin, N::Msg)>,
    /// The handler calls owed, in order.
    owed: VecDeque<Call<N::Msg>>,
}

impl<N: LockNode> NodeHost<N> {
    /// Start the node from `config` and what its disk kept (`start.durable`), its start's
    /// effects in `ctx`; its due work is owed next. A start decides nothing a safepoint
    /// follows.
    pub fn start(
        config: &N::Config,
        start: NodeStart<N::Durable>,
        ctx: &mut NodeCtx<'_, N::Msg, N::Durable>,
    ) -> Self {
        NodeHost {
            node: N::start(config, start, ctx),
            held: VecDeque::new(),
            owed: VecDeque::from([Call::Settle]),
        }
    }

    /// An independent copy, its node copied by `clone_node` (a design's
    /// [`crate::Explorable`]), for an explorer that steps a state and keeps its parent.
    pub fn clone_with(&self, clone_node: fn(&N) -> N) -> Self {
        NodeHost {
            node: clone_node(&self.node),
            held: self.held.clone(),
            owed: self.owed.clone(),
        }
    }

    /// Feed everything that decides what the host does next into `hasher`: the node by
    /// `hash_node` (a design's [`crate::Explorable`]), the messages it holds and the calls it
    /// owes by their `Debug` form.
    pub fn hash_with(
        &self,
        hash_node: fn(&N, &mut dyn std::hash::Hasher),
        hasher: &mut dyn std::hash::Hasher,
    ) {
        hash_node(&self.node, hasher);
        crate::explore::hash_debug(&self.held, hasher);
        crate::explore::hash_debug(&self.owed, hasher);
    }

    /// The node.
    pub fn node(&self) -> &N {
        &self.node
    }

    /// Whether a handler call is owed: make it with [`NodeHost::call_next`].
    pub fn busy(&self) -> bool {
        !self.owed.is_empty()
    }

    /// Make the next owed handler call, its effects in `ctx` (one instant of the node's
    /// clocks). Nothing if none is owed.
    pub fn call_next(&mut self, ctx: &mut NodeCtx<'_, N::Msg, N::Durable>) {
        let Some(call) = self.owed.pop_front() else {
            return;
        };
        match call {
            Call::Settle => {
                if self.node.settle(ctx) {
                    self.owed.push_front(Call::Settle);
                }
            }
            Call::Message(origin, msg) => self.node.on_message(&origin, msg, ctx),
            Call::Timer(id) => self.node.on_timer(id, ctx),
            Call::Deregister(holder) => self.node.on_deregister(&holder, ctx),
        }
    }

    /// A message of the node's design arrived from `origin`. If the node is not
    /// [`serving`](LockNode::serving) it is dropped unseen (`None`, nothing owed). If the node
    /// takes it up now ([`LockNode::takes_now`]), it goes first, even past held ones (the
    /// acknowledgement a synchronous primary waits for): due work, the message and due work
    /// again are owed, and its kind is returned, for the safepoint before it. Otherwise it is
    /// held (`None`).
    pub fn deliver(&mut self, origin: Origin, msg: N::Msg) -> Option<MessageKind> {
        if !self.node.serving() {
            return None;
        }
        if !self.node.takes_now(&msg) {
            self.held.push_back((origin, msg));
            return None;
        }
        Some(self.owe_message(origin, msg))
    }

    /// The oldest held message, if the node takes it up now: owed as [`NodeHost::deliver`]
    /// owes one, its kind returned. Call it before every wait, until `None`.
    pub fn take_held(&mut self) -> Option<MessageKind> {
        if !self
            .held
            .front()
            .is_some_and(|(_, msg)| self.node.takes_now(msg))
        {
            return None;
        }
        let (origin, msg) = self.held.pop_front()?;
        Some(self.owe_message(origin, msg))
    }

    fn owe_message(&mut self, origin: Origin, msg: N::Msg) -> MessageKind {
        let kind = msg.kind();
        self.owed.push_back(Call::Settle);
        self.owed.push_back(Call::Message(origin, msg));
        self.owed.push_back(Call::Settle);
        kind
    }

    /// Timer `id` fired: the timer's handler and then due work are owed.
    pub fn timer(&mut self, id: TimerId) {
        self.owed.push_back(Call::Timer(id));
        self.owed.push_back(Call::Settle);
    }

    /// A maintenance job deregistered client `holder` (a `deregister` fault): the handler and
    /// then due work are owed.
    pub fn deregister(&mut self, holder: String) {
        self.owed.push_back(Call::Deregister(holder));
        self.owed.push_back(Call::Settle);
    }

    /// The node's clock was stepped or its rate changed: something may have become due, so
    /// due work is owed.
    pub fn clock_changed(&mut self) {
        self.owed.push_back(Call::Settle);
    }
}

/// One node's disk, holding the design's durable state `D`. A write goes to the page cache
/// unless synced, and reaches the disk with the next synced write or sync; a crash loses what
/// was not synced. A disk made to keep backups also keeps every synced state with its time,
/// so that a restore can bring back "the backup as of T". How a design's durable parts
/// combine after a crash or a restore is the design's rule ([`LockNode::after_crash`],
/// [`LockNode::after_restore`]).
#[derive(Clone, Debug)]
pub struct Disk<D> {
    synced: Option<D>,
    pending: Option<D>,
    /// Whether to keep `backups`: only a run that restores reads them, and a copy of the state
    /// per sync costs memory and time in proportion to the run's length.
    keep_backups: bool,
    /// Every synced state, with the time (ns, the driver's true time) it reached the disk.
    backups: Vec<(u64, D)>,
}

impl<D> Disk<D> {
    /// Feed everything on the disk into `hasher`, each durable state by `hash_durable`
    /// ([`LockNode::hash_durable`]): the synced state, the unsynced one, and the backups.
    pub fn hash_with(
        &self,
        hash_durable: fn(&D, &mut dyn std::hash::Hasher),
        hasher: &mut dyn std::hash::Hasher,
    ) {
        for state in [&self.synced, &self.pending] {
            match state {
                Some(d) => {
                    hasher.write_u8(1);
                    hash_durable(d, hasher);
                }
                None => hasher.write_u8(0),
            }
        }
        hasher.write_u8(u8::from(self.keep_backups));
        hasher.write_usize(self.backups.len());
        for (at_ns, d) in &self.backups {
            hasher.write_u64(*at_ns);
            hash_durable(d, hasher);
        }
    }
}

impl<D: Clone> Disk<D> {
    /// An empty disk; `keep_backups` if it can be restored from backup.
    pub fn new(keep_backups: bool) -> Self {
        Disk {
            synced: None,
            pending: None,
            keep_backups,
            backups: Vec::new(),
        }
    }

    /// Write `state` at `now_ns`; a synced write makes it (and everything before it) durable.
    pub fn write(&mut self, state: D, durability: Durability, now_ns: u64) {
        self.pending = Some(state);
        if durability == Durability::Synced {
            self.sync(now_ns);
        }
    }

    /// Make pending writes durable (an `fsync`) at `now_ns`.
    pub fn sync(&mut self, now_ns: u64) {
        if let Some(state) = self.pending.take() {
            if self.keep_backups {
                self.backups.push((now_ns, state.clone()));
            }
            self.synced = Some(state);
        }
    }

    /// What a node starting now finds.
    pub fn durable(&self) -> Option<D> {
        self.synced.clone()
    }

    /// The durable state, without a copy of it.
    pub fn synced(&self) -> Option<&D> {
        self.synced.as_ref()
    }

    /// The node crashed: unsynced writes are gone, combined with the synced state by
    /// `after_crash` (a design's [`LockNode::after_crash`]).
    pub fn crash(&mut self, after_crash: fn(Option<D>, Option<D>) -> Option<D>) {
        self.synced = after_crash(self.synced.take(), self.pending.take());
    }

    /// Bring back the last state synced at or before `at_ns` (nothing if none was), combined
    /// with the state it replaces by `after_restore` (a design's [`LockNode::after_restore`]).
    /// Only a disk made with `keep_backups` has any backups.
    pub fn restore(&mut self, at_ns: u64, after_restore: fn(Option<D>, Option<D>) -> Option<D>) {
        debug_assert!(
            self.keep_backups,
            "a restore from a disk that keeps no backups"
        );
        self.pending = None;
        let backup = self
            .backups
            .iter()
            .rev()
            .find(|(t, _)| *t <= at_ns)
            .map(|(_, state)| state.clone());
        self.synced = after_restore(backup, self.synced.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synced_only(synced: Option<u32>, _lost: Option<u32>) -> Option<u32> {
        synced
    }

    fn backup_only(backup: Option<u32>, _latest: Option<u32>) -> Option<u32> {
        backup
    }

    use crate::message::MessageKind;
    use crate::time::Now;

    /// The bytes a disk feeds its hasher, kept whole.
    fn fed(disk: &Disk<u32>) -> Vec<u8> {
        #[derive(Default)]
        struct Bytes(Vec<u8>);
        impl std::hash::Hasher for Bytes {
            fn finish(&self) -> u64 {
                0
            }
            fn write(&mut self, bytes: &[u8]) {
                self.0.extend_from_slice(bytes);
            }
        }
        let mut h = Bytes::default();
        disk.hash_with(crate::explore::hash_derived::<u32>, &mut h);
        h.0
    }

    /// The synced and the unsynced state are both in a disk's fingerprint, and told apart: a
    /// crash keeps one and loses the other.
    #[test]
    fn a_disk_feeds_its_synced_and_unsynced_states_apart() {
        let mut synced = Disk::new(false);
        synced.write(7, Durability::Synced, 0);
        let mut unsynced = Disk::new(false);
        unsynced.write(7, Durability::Unsynced, 0);
        assert_ne!(fed(&synced), fed(&unsynced));
        assert_ne!(fed(&synced), fed(&Disk::new(false)));
        let mut again = Disk::new(false);
        again.write(7, Durability::Synced, 5);
        assert_eq!(fed(&synced), fed(&again));
        let mut other = Disk::new(false);
        other.write(8, Durability::Synced, 0);
        assert_ne!(fed(&synced), fed(&other));
    }

    /// A message: `true` asks to be taken up at once (an acknowledgement), `false` may wait.
    #[derive(Clone, Debug)]
    struct Msg(&'static str, bool);

    impl DesignMessage for Msg {
        fn kind(&self) -> MessageKind {
            MessageKind::Acquire
        }
    }

    /// A node that logs every call; it takes up only urgent messages while `waiting`, settles
    /// twice after each message, and serves once started unless told otherwise.
    struct Logger {
        log: Vec<String>,
        waiting: bool,
        to_settle: u32,
        serving: bool,
    }

    impl LockNode for Logger {
        type Msg = Msg;
        type Durable = u32;
        type Config = bool;

        fn start(serving: &bool, _: NodeStart<u32>, _: &mut NodeCtx<'_, Msg, u32>) -> Self {
            Logger {
                log: vec!["start".into()],
                waiting: false,
                to_settle: 0,
                serving: *serving,
            }
        }

        fn on_message(&mut self, _: &Origin, msg: Msg, _: &mut NodeCtx<'_, Msg, u32>) {
            self.log.push(format!("message {}", msg.0));
            self.to_settle = 2;
            if msg.0 == "wait" {
                self.waiting = true;
            }
            if msg.1 {
                self.waiting = false;
            }
        }

        fn on_timer(&mut self, id: TimerId, _: &mut NodeCtx<'_, Msg, u32>) {
            self.log.push(format!("timer {}", id.0));
        }

        fn settle(&mut self, _: &mut NodeCtx<'_, Msg, u32>) -> bool {
            self.log.push("settle".into());
            self.to_settle = self.to_settle.saturating_sub(1);
            self.to_settle > 0
        }

        fn on_deregister(&mut self, holder: &str, _: &mut NodeCtx<'_, Msg, u32>) {
            self.log.push(format!("deregister {holder}"));
        }

        fn takes_now(&self, msg: &Msg) -> bool {
            !self.waiting || msg.1
        }

        fn serving(&self) -> bool {
            self.serving
        }
    }

    fn started(serving: bool) -> NodeHost<Logger> {
        let mut effects = Vec::new();
        let clock = Now::default;
        let begin = NodeStart {
            name: "n".into(),
            index: 0,
            service_nodes: vec!["n".into()],
            incarnation: 1,
            durable: None,
        };
        NodeHost::start(&serving, begin, &mut NodeCtx::new(&clock, &mut effects))
    }

    /// Make every owed call; the log since the last drain.
    fn drain(host: &mut NodeHost<Logger>) -> Vec<String> {
        let mut effects = Vec::new();
        let clock = Now::default;
        while host.busy() {
            host.call_next(&mut NodeCtx::new(&clock, &mut effects));
        }
        std::mem::take(&mut host.node.log)
    }

    fn origin() -> Origin {
        Origin::new("client-1", 1, None)
    }

    #[test]
    fn due_work_runs_around_every_message_and_for_as_long_as_it_asks() {
        let mut host = started(true);
        assert_eq!(drain(&mut host), ["start", "settle"]);
        assert_eq!(
            host.deliver(origin(), Msg("a", false)),
            Some(MessageKind::Acquire)
        );
        assert_eq!(
            drain(&mut host),
            ["settle", "message a", "settle", "settle"],
            "the node asked to settle again once"
        );
        host.timer(TimerId(4));
        host.deregister("client-2".into());
        host.clock_changed();
        assert_eq!(
            drain(&mut host),
            [
                "timer 4",
                "settle",
                "deregister client-2",
                "settle",
                "settle"
            ]
        );
        assert!(!host.busy());
    }

    #[test]
    fn held_messages_wait_in_order_and_an_urgent_one_goes_past_them() {
        let mut host = started(true);
        drain(&mut host);
        host.deliver(origin(), Msg("wait", false));
        drain(&mut host);
        assert_eq!(host.deliver(origin(), Msg("b", false)), None);
        assert_eq!(host.deliver(origin(), Msg("c", false)), None);
        assert_eq!(host.take_held(), None, "still waiting");
        assert!(!host.busy());
        assert!(host.deliver(origin(), Msg("ack", true)).is_some());
        assert_eq!(
            drain(&mut host),
            ["settle", "message ack", "settle", "settle"]
        );
        assert!(host.take_held().is_some());
        assert_eq!(
            drain(&mut host),
            ["settle", "message b", "settle", "settle"]
        );
        assert!(host.take_held().is_some());
        assert_eq!(drain(&mut host)[1], "message c");
        assert_eq!(host.take_held(), None);
    }

    #[test]
    fn a_node_not_serving_drops_messages_unseen() {
        let mut host = started(false);
        drain(&mut host);
        assert_eq!(host.deliver(origin(), Msg("a", true)), None);
        assert!(!host.busy());
        assert_eq!(host.take_held(), None);
        assert!(drain(&mut host).is_empty());
    }

    #[test]
    fn a_crash_loses_the_writes_since_the_last_synced_one() {
        let mut disk = Disk::<u32>::new(false);
        assert_eq!(disk.durable(), None);
        disk.write(1, Durability::Synced, 0);
        disk.write(2, Durability::Unsynced, 0);
        assert_eq!(
            disk.durable(),
            Some(1),
            "an unsynced write is not on disk yet"
        );
        disk.crash(synced_only);
        disk.write(3, Durability::Unsynced, 0);
        disk.write(4, Durability::Synced, 0);
        disk.crash(synced_only);
        assert_eq!(
            disk.durable(),
            Some(4),
            "a synced write carries the ones before it"
        );
        disk.write(5, Durability::Unsynced, 0);
        disk.sync(0);
        disk.crash(synced_only);
        assert_eq!(
            disk.durable(),
            Some(5),
            "a sync makes the pending write durable"
        );
    }

    #[test]
    fn a_restore_brings_back_the_last_state_synced_by_then() {
        let mut disk = Disk::<u32>::new(true);
        disk.write(1, Durability::Synced, 10);
        disk.write(2, Durability::Unsynced, 15);
        disk.sync(20);
        disk.write(3, Durability::Synced, 30);
        disk.restore(25, backup_only);
        assert_eq!(disk.durable(), Some(2), "synced at 20");
        disk.restore(5, backup_only);
        assert_eq!(disk.durable(), None, "nothing was synced by 5");
        let latest_wins = |_backup: Option<u32>, latest: Option<u32>| latest.map(|l| l + 100);
        disk.write(7, Durability::Synced, 40);
        disk.restore(10, latest_wins);
        assert_eq!(
            disk.durable(),
            Some(107),
            "the design combines backup and latest"
        );
    }
}
