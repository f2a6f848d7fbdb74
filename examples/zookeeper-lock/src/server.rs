//! A standalone ZooKeeper server, reduced to what the lock recipe uses: sessions kept alive
//! by heartbeats, ephemeral sequential children under a lock's path, one-shot watches on
//! deletion, and a transaction id (`zxid`) that every change takes the next of.
//!
//! The lock itself is not a ZooKeeper object: whoever owns the lowest child holds it. The
//! server records that ground truth for fencesim's checkers: a `grant` when a child becomes
//! the lowest (its token the child's creation zxid, `czxid`), a `renew` when the holder's
//! session hears a heartbeat, and a `release` or `expire` when the holder's child is deleted
//! because its session was closed or expired.

use std::collections::{BTreeMap, BTreeSet};

use fencesim::design::{
    Clock, Deadline, FsyncPolicy, HeldLease, LockNode, NodeCtx, NodeStart, Origin, ServiceEvent,
    ServiceEventKind, TimerId,
};

use crate::messages::{SessionId, ZkMsg};

/// The server's settings, from `[lock_service]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// When transactions reach the disk. ZooKeeper syncs its transaction log before it
    /// answers (`forceSync=yes`); `never` is its `forceSync=no`, which a crash punishes.
    pub fsync: FsyncPolicy,
}

/// A session as the transaction log keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRecord {
    /// The client that opened it.
    pub owner: String,
    /// Its timeout, ms.
    pub timeout_ms: u64,
}

/// An ephemeral sequential child of a lock's path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Child {
    /// The session it lives with.
    pub session: SessionId,
    /// The zxid of the transaction that created it: the fencing token.
    pub czxid: u64,
}

/// A lock's path: its children by sequence number.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockPath {
    /// The next sequence number to give out (ZooKeeper's parent `cversion`).
    pub next_seq: u64,
    /// The children, lowest sequence number first.
    pub children: BTreeMap<u64, Child>,
}

impl LockPath {
    /// The lowest child, which holds the lock.
    fn lowest(&self) -> Option<(u64, Child)> {
        self.children.first_key_value().map(|(s, c)| (*s, *c))
    }
}

/// What the server's disk holds: the data tree and sessions as its transaction log and
/// snapshots rebuild them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tree {
    /// The last transaction id given out.
    pub last_zxid: u64,
    /// Open sessions.
    pub sessions: BTreeMap<SessionId, SessionRecord>,
    /// Lock paths by name.
    pub locks: BTreeMap<String, LockPath>,
}

impl Tree {
    /// Each lock's holder: the owner of its lowest child.
    fn holders(&self) -> Vec<HeldLease> {
        let lease = |(lock, path): (&String, &LockPath)| {
            let (_, child) = path.lowest()?;
            Some(HeldLease {
                lock: lock.clone(),
                holder: self.sessions.get(&child.session)?.owner.clone(),
                token: child.czxid,
            })
        };
        self.locks.iter().filter_map(lease).collect()
    }
}

/// Each open session's expiry, ms of the monotonic clock, indexed by time as well, so that
/// finding the sessions due costs the number due, not the number open (the server looks
/// before and after every message).
#[derive(Debug, Default)]
struct Deadlines {
    by_session: BTreeMap<SessionId, i64>,
    by_time: BTreeSet<(i64, SessionId)>,
}

impl Deadlines {
    /// `session` was heard from: it now expires at `deadline_ms`.
    fn hear(&mut self, session: SessionId, deadline_ms: i64) {
        if let Some(old) = self.by_session.insert(session, deadline_ms) {
            self.by_time.remove(&(old, session));
        }
        self.by_time.insert((deadline_ms, session));
    }

    fn forget(&mut self, session: SessionId) {
        if let Some(old) = self.by_session.remove(&session) {
            self.by_time.remove(&(old, session));
        }
    }

    fn of(&self, session: SessionId) -> Option<i64> {
        self.by_session.get(&session).copied()
    }

    /// A session whose deadline is at or before `now_ms`, if any (the earliest).
    fn due(&self, now_ms: i64) -> Option<SessionId> {
        self.by_time
            .first()
            .filter(|(at_ms, _)| *at_ms <= now_ms)
            .map(|(_, s)| *s)
    }

    /// The earliest deadline.
    fn next(&self) -> Option<i64> {
        self.by_time.first().map(|(at_ms, _)| *at_ms)
    }
}

/// Why a child was deleted, which decides the event that ends its owner's lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Deleted {
    /// Its session was closed: `release`, answering operation `op`.
    Closed { op: Option<u64> },
    /// Its session expired: `expire`.
    Expired,
}

/// The session-expiry timer.
const EXPIRY: TimerId = TimerId(1);
/// The periodic-fsync timer.
const SYNC: TimerId = TimerId(2);

/// A ZooKeeper server.
#[derive(Debug)]
pub struct ZkServer {
    config: ServerConfig,
    tree: Tree,
    /// When each session expires unless heard from again. Not durable: a restarted server
    /// gives every session a whole timeout again, as ZooKeeper does.
    deadlines: Deadlines,
    /// Watches on children by (lock, seq): the requests that set them.
    watches: BTreeMap<(String, u64), Vec<Origin>>,
    /// Each lock's holder as last recorded: (seq, czxid).
    holders: BTreeMap<String, (u64, u64)>,
}

impl LockNode for ZkServer {
    type Msg = ZkMsg;
    type Durable = Tree;
    type Config = ServerConfig;

    fn start(
        config: &ServerConfig,
        start: NodeStart<Tree>,
        ctx: &mut NodeCtx<'_, ZkMsg, Tree>,
    ) -> Self {
        let tree = start.durable.unwrap_or_default();
        let now_ms = ctx.now().mono_ms;
        let mut deadlines = Deadlines::default();
        for (session, record) in &tree.sessions {
            deadlines.hear(*session, now_ms + record.timeout_ms as i64);
        }
        let holders = tree
            .locks
            .iter()
            .filter_map(|(lock, path)| Some((lock.clone(), path.lowest()?)))
            .map(|(lock, (seq, child))| (lock, (seq, child.czxid)))
            .collect();
        if let Some(every_ms) = config.fsync.period_ms() {
            ctx.set_timer(SYNC, every_ms);
        }
        ZkServer {
            config: *config,
            tree,
            deadlines,
            watches: BTreeMap::new(),
            holders,
        }
    }

    fn on_message(&mut self, origin: &Origin, msg: ZkMsg, ctx: &mut NodeCtx<'_, ZkMsg, Tree>) {
        let reply_kind = msg.reply_kind();
        let session = match &msg {
            ZkMsg::CreateSession { owner, timeout_ms } => {
                let session = self.open_session(owner, *timeout_ms, ctx);
                return ctx.reply(origin, ZkMsg::SessionCreated { session });
            }
            ZkMsg::Create { session, .. }
            | ZkMsg::GetChildren { session, .. }
            | ZkMsg::Exists { session, .. }
            | ZkMsg::Ping { session }
            | ZkMsg::CloseSession { session } => *session,
            // Answers are the clients' to read; a server ignores them.
            _ => return,
        };
        if !self.tree.sessions.contains_key(&session) {
            return ctx.reply(
                origin,
                ZkMsg::NoSession {
                    answers: reply_kind,
                },
            );
        }
        // Any request keeps its session alive.
        let deadline_ms = ctx.now().mono_ms + self.timeout_ms(session);
        self.deadlines.hear(session, deadline_ms);
        let answer = match msg {
            ZkMsg::Create { lock, .. } => self.create(session, &lock, origin, ctx),
            ZkMsg::GetChildren { lock, .. } => ZkMsg::Children {
                seqs: self
                    .tree
                    .locks
                    .get(&lock)
                    .map_or_else(Vec::new, |p| p.children.keys().copied().collect()),
            },
            ZkMsg::Exists { lock, seq, .. } => self.exists(lock, seq, origin),
            ZkMsg::Ping { .. } => {
                self.renew_held(session, origin, ctx);
                ZkMsg::Pong
            }
            ZkMsg::CloseSession { .. } => {
                self.end_session(session, Deleted::Closed { op: origin.op() }, ctx);
                ZkMsg::Closed
            }
            _ => return,
        };
        ctx.reply(origin, answer);
    }

    fn on_timer(&mut self, id: TimerId, ctx: &mut NodeCtx<'_, ZkMsg, Tree>) {
        if let (SYNC, Some(every_ms)) = (id, self.config.fsync.period_ms()) {
            ctx.sync();
            ctx.set_timer(SYNC, every_ms);
        }
        // EXPIRY needs nothing here: settle, which runs next, expires what is due.
    }

    /// Expire every session not heard from within its timeout, then wake up for the next.
    fn settle(&mut self, ctx: &mut NodeCtx<'_, ZkMsg, Tree>) -> bool {
        let now_ms = ctx.now().mono_ms;
        while let Some(session) = self.deadlines.due(now_ms) {
            self.end_session(session, Deleted::Expired, ctx);
        }
        match self.deadlines.next() {
            Some(at_ms) => ctx.set_timer_at(
                EXPIRY,
                Deadline {
                    clock: Clock::Monotonic,
                    at_ms,
                },
            ),
            None => ctx.cancel_timer(EXPIRY),
        }
        false
    }

    /// A crash loses the leases of children its disk did not keep: the harness records their
    /// revocation.
    const FOLLOWS_LEASES: bool = true;

    fn durable_leases(durable: Option<&Tree>) -> Option<Vec<HeldLease>> {
        Some(durable.map_or_else(Vec::new, Tree::holders))
    }
}

impl ZkServer {
    fn timeout_ms(&self, session: SessionId) -> i64 {
        self.tree
            .sessions
            .get(&session)
            .map_or(0, |s| s.timeout_ms as i64)
    }

    /// When `session` expires if nothing more is heard from it, ms of the monotonic clock.
    fn expires_at_ms(&self, session: SessionId) -> Option<i64> {
        self.deadlines.of(session)
    }

    /// Take the next zxid and write the tree: every change is a transaction, logged before
    /// it is answered.
    fn commit(&mut self, ctx: &mut NodeCtx<'_, ZkMsg, Tree>) -> u64 {
        self.tree.last_zxid += 1;
        ctx.persist(self.tree.clone(), self.config.fsync.durability());
        self.tree.last_zxid
    }

    fn open_session(
        &mut self,
        owner: &str,
        timeout_ms: u64,
        ctx: &mut NodeCtx<'_, ZkMsg, Tree>,
    ) -> SessionId {
        // The session id is the zxid of the transaction that opened it: never reused, even
        // across restarts, while the log survives.
        let session = self.tree.last_zxid + 1;
        let record = SessionRecord {
            owner: owner.to_owned(),
            timeout_ms,
        };
        self.tree.sessions.insert(session, record);
        self.deadlines
            .hear(session, ctx.now().mono_ms + timeout_ms as i64);
        self.commit(ctx);
        session
    }

    /// The session's child of `lock`, created unless it has one.
    fn create(
        &mut self,
        session: SessionId,
        lock: &str,
        origin: &Origin,
        ctx: &mut NodeCtx<'_, ZkMsg, Tree>,
    ) -> ZkMsg {
        let path = self.tree.locks.entry(lock.to_owned()).or_default();
        if let Some((seq, child)) = path.children.iter().find(|(_, c)| c.session == session) {
            return ZkMsg::Created {
                seq: *seq,
                czxid: child.czxid,
            };
        }
        let seq = path.next_seq;
        path.next_seq += 1;
        let czxid = self.tree.last_zxid + 1;
        path.children.insert(seq, Child { session, czxid });
        self.commit(ctx);
        self.promote(lock, origin.op(), ctx);
        ZkMsg::Created { seq, czxid }
    }

    /// Whether child `seq` of `lock` exists; if so, watch it for `origin`.
    fn exists(&mut self, lock: String, seq: u64, origin: &Origin) -> ZkMsg {
        let exists = self
            .tree
            .locks
            .get(&lock)
            .is_some_and(|p| p.children.contains_key(&seq));
        if exists {
            self.watches
                .entry((lock, seq))
                .or_default()
                .push(origin.clone());
        }
        ZkMsg::Stat { exists }
    }

    /// A heartbeat from the holder's session extends its lease: record the renewal.
    fn renew_held(&self, session: SessionId, origin: &Origin, ctx: &mut NodeCtx<'_, ZkMsg, Tree>) {
        for (lock, (seq, czxid)) in &self.holders {
            let owns = self.tree.locks[lock].children.get(seq).map(|c| c.session);
            if owns == Some(session) {
                let event =
                    self.lease_event(ServiceEventKind::Renew, lock, session, *czxid, origin.op());
                ctx.record(event);
            }
        }
    }

    /// Close or expire `session`: delete its children, fire their watches, and hand each
    /// lock it held to the next lowest child.
    fn end_session(
        &mut self,
        session: SessionId,
        why: Deleted,
        ctx: &mut NodeCtx<'_, ZkMsg, Tree>,
    ) {
        let owned: Vec<(String, u64)> = self
            .tree
            .locks
            .iter()
            .flat_map(|(lock, path)| {
                path.children
                    .iter()
                    .filter(|(_, c)| c.session == session)
                    .map(|(seq, _)| (lock.clone(), *seq))
            })
            .collect();
        for (lock, seq) in &owned {
            self.delete_child(lock, *seq, session, why, ctx);
        }
        self.tree.sessions.remove(&session);
        self.deadlines.forget(session);
        self.commit(ctx);
        for (lock, _) in &owned {
            self.promote(lock, None, ctx);
        }
    }

    fn delete_child(
        &mut self,
        lock: &str,
        seq: u64,
        session: SessionId,
        why: Deleted,
        ctx: &mut NodeCtx<'_, ZkMsg, Tree>,
    ) {
        let Some(child) = self
            .tree
            .locks
            .get_mut(lock)
            .and_then(|p| p.children.remove(&seq))
        else {
            return;
        };
        if self.holders.get(lock) == Some(&(seq, child.czxid)) {
            self.holders.remove(lock);
            let (kind, op) = match why {
                Deleted::Closed { op } => (ServiceEventKind::Release, op),
                Deleted::Expired => (ServiceEventKind::Expire, None),
            };
            let event = self.lease_event(kind, lock, session, child.czxid, op);
            ctx.record(event);
        }
        for watcher in self
            .watches
            .remove(&(lock.to_owned(), seq))
            .unwrap_or_default()
        {
            let fired = ZkMsg::WatchFired {
                lock: lock.to_owned(),
                seq,
            };
            ctx.notify(&watcher, fired);
        }
    }

    /// If `lock`'s lowest child is not its recorded holder, it holds the lock now: record the
    /// grant (answering operation `op` when a request caused it).
    fn promote(&mut self, lock: &str, op: Option<u64>, ctx: &mut NodeCtx<'_, ZkMsg, Tree>) {
        let Some((seq, child)) = self.tree.locks.get(lock).and_then(LockPath::lowest) else {
            return;
        };
        if self.holders.get(lock) == Some(&(seq, child.czxid)) {
            return;
        }
        self.holders.insert(lock.to_owned(), (seq, child.czxid));
        let event = self.lease_event(
            ServiceEventKind::Grant,
            lock,
            child.session,
            child.czxid,
            op,
        );
        ctx.record(event);
    }

    fn lease_event(
        &self,
        kind: ServiceEventKind,
        lock: &str,
        session: SessionId,
        czxid: u64,
        op: Option<u64>,
    ) -> ServiceEvent {
        let owner = self
            .tree
            .sessions
            .get(&session)
            .map_or("", |s| s.owner.as_str());
        let mut event = ServiceEvent::new(kind, lock, owner, czxid, op);
        if matches!(kind, ServiceEventKind::Grant | ServiceEventKind::Renew) {
            event.expires_at_ms = self.expires_at_ms(session);
        }
        event
    }
}
