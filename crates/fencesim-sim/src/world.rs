//! What every task of one run shares: the scenario, the recorder, the clocks, the network, the
//! nemesis, the durable state that outlives crashes, and the clients' views of their leases.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::mailbox::{mailbox, Inbox, Outbox};
use fencesim_design::{HeldLease, LockNode, Now};
use fencesim_driver::beliefs::{belief_end, belief_start, Beliefs};
use fencesim_driver::ledger::Ledger;
pub(crate) use fencesim_driver::op::OpTemplate;
use fencesim_history::{Event, EventKind, Op};
use fencesim_scenario::Scenario;

use crate::clock::{ClockCache, Clocks};
use crate::disk::{AnyDisk, NodeDisk};
use crate::nemesis::Nemesis;
use crate::recorder::{true_ns, Recorder};
use crate::transport::{Envelope, Network};

/// The shared state of one simulated run. Tasks run one at a time on madsim's executor, so
/// the mutexes never contend; they exist because madsim's `spawn` wants `Send` futures.
pub(crate) struct World {
    pub scenario: Scenario,
    pub seed: u64,
    pub recorder: Arc<Recorder>,
    pub clocks: Arc<Clocks>,
    pub net: Arc<Network>,
    pub nemesis: Nemesis,
    /// The disks of the nodes of designs on the design API, by node.
    design_disks: Mutex<BTreeMap<String, Arc<dyn AnyDisk>>>,
    /// Whether disks keep backups: only for a run with a `restore` fault.
    keep_backups: bool,
    /// What the run knows across its lock-service nodes: the log entries recorded, the leases
    /// the nodes that can forget them honour (a crash or restore can make a node forget one;
    /// this is how the history learns), and the leader of the highest term.
    ledger: Mutex<Ledger>,
    inboxes: BTreeMap<String, Inbox<Box<Envelope>>>,
    /// The clients' own views of their leases.
    beliefs: Mutex<Beliefs>,
    starts: Mutex<BTreeMap<String, u64>>,
    next_process: Mutex<u64>,
    done: (Outbox<String>, Inbox<String>),
}

impl World {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        scenario: Scenario,
        seed: u64,
        recorder: Arc<Recorder>,
        clocks: Arc<Clocks>,
        net: Arc<Network>,
        nemesis: Nemesis,
        inboxes: BTreeMap<String, Inbox<Box<Envelope>>>,
    ) -> Self {
        let keep_backups = scenario
            .faults
            .iter()
            .any(|f| matches!(f.action, fencesim_scenario::Action::Restore { .. }));
        World {
            scenario,
            seed,
            recorder,
            clocks,
            net,
            nemesis,
            design_disks: Mutex::new(BTreeMap::new()),
            keep_backups,
            ledger: Mutex::new(Ledger::default()),
            inboxes,
            beliefs: Mutex::new(Beliefs::default()),
            starts: Mutex::new(BTreeMap::new()),
            next_process: Mutex::new(0),
            done: mailbox(),
        }
    }

    /// A fresh Jepsen process id (clients get a new one after every `info` and every restart).
    pub fn new_process(&self) -> u64 {
        let mut next = self.next_process.lock().expect("process counter");
        let p = *next;
        *next += 1;
        p
    }

    /// Record a service or nemesis event; returns its index.
    pub fn event(&self, event: Event) -> u64 {
        self.recorder.event(&self.clocks, event)
    }

    /// Record a client operation; returns its index. `cache` keeps the clocks of the
    /// operation's node (a client's own).
    pub fn op_cached(&self, op: Op, cache: &ClockCache) -> u64 {
        let clock = self.clocks.get_cached(&op.node, cache);
        self.recorder.op_on(clock, op)
    }

    /// The node's inbox (the same one across restarts).
    pub fn inbox(&self, node: &str) -> Inbox<Box<Envelope>> {
        self.inboxes
            .get(node)
            .expect("every node has an inbox")
            .clone()
    }

    /// Count a start of `node`'s main task; returns 1 for the first start, 2 after one restart...
    pub fn start(&self, node: &str) -> u64 {
        let mut starts = self.starts.lock().expect("starts");
        let n = starts.entry(node.to_owned()).or_insert(0);
        *n += 1;
        *n
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().expect("ledger")
    }

    /// True the first time any replica reports applying log `index` (entries apply in order).
    pub fn first_to_apply(&self, index: u64) -> bool {
        self.ledger().first_to_apply(index)
    }

    /// Follow node `node`'s decision `event` in the run's record of live leases
    /// ([`Ledger::follow`]), from which a crash's `revoke`s come.
    pub fn follow_lease(&self, node: &str, event: &fencesim_design::ServiceEvent) {
        self.ledger().follow(node, event);
    }

    /// `[from, to, by]`: the leases node `from` honoured are now `to`'s to serve, of which `to`
    /// honours `kept` ([`Ledger::hand_over`]). Each one `kept` lacks has ended, recorded as a
    /// `revoke` by node `by` (the one that decided it).
    pub fn hand_over_leases(&self, [from, to, by]: [&str; 3], kept: &[HeldLease], reason: &str) {
        let lost = self.ledger().hand_over(from, to, kept);
        for (lock, holder, token) in lost {
            self.event(Event {
                node: by.into(),
                lock: Some(lock.into()),
                holder: Some(holder.into()),
                token: Some(token),
                detail: Some(reason.to_owned()),
                ..Event::new(EventKind::Revoke)
            });
        }
    }

    /// `node` became Raft leader in `term`.
    pub fn set_leader(&self, term: u64, node: &str) {
        self.ledger().set_leader(term, node);
    }

    /// The Raft replica that led in the highest term seen so far.
    pub fn leader(&self) -> Option<String> {
        self.ledger().leader().map(str::to_owned)
    }

    /// The lock service's node names.
    pub fn lease_nodes(&self) -> Vec<String> {
        self.scenario.lock_service.nodes()
    }

    /// A client finished all its cycles.
    pub fn client_done(&self, node: &str) {
        self.done.0.send(node.to_owned());
    }

    /// Wait for the next client to finish.
    pub async fn next_done(&self) -> Option<String> {
        self.done.1.recv().await.ok()
    }

    /// Node `node`'s clocks now, as a design reads them; `cache` keeps them (the node's own).
    pub fn now_cached(&self, node: &str, cache: &ClockCache) -> Now {
        self.now_at(node, cache, true_ns())
    }

    /// [`World::now_cached`] at true time `now_ns` (now, read by the caller).
    pub fn now_at(&self, node: &str, cache: &ClockCache, now_ns: u64) -> Now {
        let clocks = self.clocks.get_cached(node, cache);
        Now {
            mono_ms: clocks.mono.read_ms(now_ns),
            wall_ms: clocks.wall.read_ms(now_ns),
        }
    }

    /// Design node `node`'s disk (empty at first), kept here across its crashes.
    pub fn design_disk<N: LockNode>(&self, node: &str) -> Arc<NodeDisk<N>> {
        let mut disks = self.design_disks.lock().expect("design disks");
        let disk = disks
            .entry(node.to_owned())
            .or_insert_with(|| Arc::new(NodeDisk::<N>::new(self.keep_backups)));
        match Arc::clone(disk).into_any().downcast::<NodeDisk<N>>() {
            Ok(disk) => disk,
            Err(_) => unreachable!("node {node}'s disk holds another design's state"),
        }
    }

    /// The node's monotonic clock now, local ms.
    pub fn mono_ms(&self, node: &str) -> i64 {
        self.clocks.get(node).mono.read_ms(true_ns())
    }

    /// Kill `node`: its tasks and volatile state go, messages to it are lost until it restarts,
    /// a lock-service node loses its unsynced writes (and the leases only they held), and a
    /// client stops believing anything.
    pub fn crash(self: &Arc<Self>, node: &str) {
        self.net.set_down(node, true);
        let disk = self.disk_of(node);
        if let Some(kept) = disk.and_then(|disk| disk.crash()) {
            let reason = "lost: not on disk when the service crashed";
            self.hand_over_leases([node, node, node], &kept, reason);
        }
        self.end_belief(node, "crashed");
        self.nemesis.forget_pauses(node);
        madsim::runtime::Handle::current().kill(node);
    }

    /// Node `node`'s disk, if it has one (a lock-service node of a design on the design API).
    fn disk_of(&self, node: &str) -> Option<Arc<dyn AnyDisk>> {
        let disks = self.design_disks.lock().expect("design disks");
        disks.get(node).cloned()
    }

    /// Bring back the backup of crashed node `node`'s disk as of true time `at_ns` (a restore
    /// fault); the leases the backup lacks have ended.
    pub fn restore(&self, node: &str, at_ns: u64) {
        let disk = self.disk_of(node);
        if let Some(kept) = disk.and_then(|disk| disk.restore(at_ns)) {
            let reason = "lost: the restored backup does not have it";
            self.hand_over_leases([node, node, node], &kept, reason);
        }
    }

    /// Start `node` again from its durable state. Messages that reached its mailbox before the
    /// crash died with the process.
    pub fn restart(self: &Arc<Self>, node: &str) {
        let inbox = self.inbox(node);
        while inbox.try_recv().is_ok() {}
        self.net.set_down(node, false);
        madsim::runtime::Handle::current().restart(node);
    }

    /// `client` now believes it holds `lock` with `token` until `until_ms` on its monotonic
    /// clock (`None`: until told otherwise). A second call for the same token extends.
    pub fn believe(self: &Arc<Self>, client: &str, lock: &str, token: u64, until_ms: Option<i64>) {
        if until_ms.is_some_and(|u| self.mono_ms(client) >= u) {
            // The reply came too late to be of use (the client was paused, or the network slow):
            // by its own reckoning the lease is already over, so it never believes it holds it.
            // This is the check Redlock's clients make (validity = TTL - elapsed), case K05.
            self.end_belief(client, "reply arrived after the lease's validity");
            return;
        }
        let watch = self
            .beliefs
            .lock()
            .expect("beliefs")
            .believe(client, lock, token, until_ms);
        self.event(belief_start(client, lock, token, until_ms));
        if let Some(generation) = watch {
            let (w, client) = (Arc::clone(self), client.to_owned());
            self.nemesis
                .spawn(async move { w.watch_belief(&client, generation).await });
        }
    }

    /// Whether `client` believes it holds a lease at this moment by its own clock.
    pub fn belief_valid(&self, client: &str) -> bool {
        let now = self.mono_ms(client);
        self.beliefs.lock().expect("beliefs").valid(client, now)
    }

    /// `client` stops believing it holds its lease, for `reason`.
    pub fn end_belief(&self, client: &str, reason: &str) {
        let ended = self.beliefs.lock().expect("beliefs").end(client);
        if let Some((lock, token)) = ended {
            self.event(belief_end(client, &lock, token, reason));
        }
    }

    /// End the belief when the client's own clock passes its validity: from the nemesis node,
    /// so that a paused client's belief still ends on time (the client computed it; pausing
    /// does not extend it). Re-checks at least every second so clock faults are followed.
    async fn watch_belief(&self, client: &str, generation: u64) {
        loop {
            let watched = self
                .beliefs
                .lock()
                .expect("beliefs")
                .watched_until(client, generation);
            // Ended, replaced, or without a deadline: nothing to watch.
            let Some(Some(until)) = watched else { return };
            let wait = self.clocks.get(client).mono.true_ns_until(true_ns(), until);
            if wait == 0 {
                self.end_belief(client, "validity elapsed");
                return;
            }
            crate::timer::sleep(Duration::from_nanos(wait.min(1_000_000_000))).await;
        }
    }
}
