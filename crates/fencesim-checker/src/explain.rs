//! Causal chains: why a violation happened, in plain words, from a graph of the history's
//! events.
//!
//! The graph (petgraph) has an edge from each event to the events it made possible:
//! - a fault's start to its end, and to the first lease end of the node it hit (a paused holder's
//!   lease expiring, a service whose clock jumped expiring a lease) while it lasted;
//! - a grant to the end of that lease (expire, release, revoke), to the writes made under it
//!   (accept, reject) and to its holder's belief;
//! - a lease end to the next grant of the same lock (the lock was free), and to the writes
//!   made with that lease's token after it ended (they came too late);
//! - a fault's end to the first write of the node it hit that landed after it (a paused
//!   writer's write, a held message), and a lock service's crash or restore to its next grant;
//! - a pause's end to the paused client's next belief (one decided on replies that waited out
//!   the pause, K05) and to its next grant (a claim it prepared before the pause and made
//!   after it, such as a lease record's swap with an expiry computed before);
//! - a held message's hold to the write it carried;
//! - on a quorum lock's node (a Redis node of Redlock), a key's set to its expiry, and the key
//!   that ended (its expiry, or its set when the node lost it) to the next holder's set on
//!   that node, which leads to that holder's belief that it held the lock; a crash's restart
//!   to the node's next set, and a clock change to the node's next expiry;
//! - a belief to the writes made with its token, where no grant was recorded (Redlock).
//!
//! A lease that its service expired before the TTL its grant promised had run out in true time
//! is told as the service's act (`lease-service expired client-1's lease ... before its TTL ran
//! out`), so that the chain of the overlap that follows names who was at fault.
//!
//! A violation's chain is its witnesses and their ancestors a few steps back, in history order,
//! each told as one short phrase, the way Jepsen and Elle tell an anomaly's cycle.

use std::collections::{BTreeMap, BTreeSet};

use fencesim_history::{Event, EventKind, History, Phase};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::{Bfs, Reversed};

/// How many steps back from a witness the chain looks.
const DEPTH: usize = 4;
/// The most steps a chain tells.
const MAX_STEPS: usize = 8;

/// Events linked by cause.
pub(crate) struct CausalGraph<'h> {
    graph: DiGraph<&'h Event, ()>,
    by_index: BTreeMap<u64, NodeIndex>,
    history: &'h History,
    /// The `expire`s that broke their grant's or renewal's TTL: index, how early in ns. Their
    /// step names the service that ended the lease, as `lease-ended-early` does. None in an
    /// untimed history.
    early: BTreeMap<u64, u64>,
    /// Whether the history is untimed (a `fencesim verify` schedule): its steps say where
    /// they are by index, not by time.
    untimed: bool,
}

/// Whether an event is part of the story a chain tells.
fn relevant(e: &Event) -> bool {
    match e.event {
        EventKind::Grant
        | EventKind::Expire
        | EventKind::Release
        | EventKind::Revoke
        | EventKind::Accept
        | EventKind::Reject
        | EventKind::Leader
        | EventKind::KeySet
        | EventKind::KeyExpire => true,
        EventKind::Belief => e.phase == Some(Phase::Start),
        k => k.is_nemesis() && e.target.is_some(),
    }
}

fn is_lease_end(e: &Event) -> bool {
    matches!(
        e.event,
        EventKind::Expire | EventKind::Release | EventKind::Revoke
    )
}

fn is_write(e: &Event) -> bool {
    matches!(e.event, EventKind::Accept | EventKind::Reject)
}

impl<'h> CausalGraph<'h> {
    /// The graph of `history`'s events.
    pub fn build(history: &'h History) -> Self {
        let mut graph = DiGraph::new();
        let mut by_index = BTreeMap::new();
        let events: Vec<&Event> = history.events().filter(|e| relevant(e)).collect();
        for e in &events {
            by_index.insert(e.at.index, graph.add_node(*e));
        }
        let untimed = history.header.untimed;
        let early = if untimed {
            BTreeMap::new()
        } else {
            crate::service_expiry::early_expiries(history)
                .iter()
                .map(|x| (x.expire.at.index, x.early_ns()))
                .collect()
        };
        let mut g = CausalGraph {
            graph,
            by_index,
            history,
            early,
            untimed,
        };
        g.link_leases(&events);
        g.link_keys(&events);
        g.link_faults(&events);
        g
    }

    fn link(&mut self, from: &Event, to: &Event) {
        let (a, b) = (self.by_index[&from.at.index], self.by_index[&to.at.index]);
        self.graph.update_edge(a, b, ());
    }

    /// Grants to their ends, writes and beliefs; lease ends to the lock's next grant and to
    /// the lease's late writes.
    fn link_leases(&mut self, events: &[&'h Event]) {
        let mut grants: BTreeMap<(&str, u64), &Event> = BTreeMap::new();
        let mut ends: BTreeMap<(&str, u64), &Event> = BTreeMap::new();
        let mut last_end: BTreeMap<&str, &Event> = BTreeMap::new();
        for e in events {
            let holder = e.holder.as_deref().unwrap_or_default();
            match (e.event, e.token) {
                (EventKind::Grant, Some(t)) => {
                    if let Some(end) = e.lock.as_deref().and_then(|l| last_end.get(l)) {
                        self.link(end, e);
                    }
                    grants.insert((holder, t), e);
                }
                (_, Some(t)) if is_lease_end(e) || is_write(e) || e.event == EventKind::Belief => {
                    if let Some(grant) = grants.get(&(holder, t)).copied() {
                        self.link(grant, e);
                    }
                    if is_write(e) {
                        if let Some(end) = ends.get(&(holder, t)).copied() {
                            self.link(end, e);
                        }
                    }
                    if is_lease_end(e) {
                        ends.insert((holder, t), e);
                        if let Some(lock) = e.lock.as_deref() {
                            last_end.insert(lock, e);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// On each node of a quorum lock, the key that ended (expired, or lost: set again for
    /// another holder with no record of its end) to the next holder's set, that set to the
    /// holder's next belief, and a key's set to its expiry; a belief to the writes with its
    /// token that no grant accounts for.
    fn link_keys(&mut self, events: &[&'h Event]) {
        // Per (lock, node): the last record of its key (a set, or an expiry).
        let mut last: BTreeMap<(&str, &str), &Event> = BTreeMap::new();
        // Per (lock, holder): a set that took a key from another holder, awaiting the belief.
        let mut contested: BTreeMap<(&str, &str), Vec<&Event>> = BTreeMap::new();
        // Per (holder, token): the belief, where no grant names the token.
        let mut granted: BTreeSet<(&str, u64)> = BTreeSet::new();
        let mut beliefs: BTreeMap<(&str, u64), &Event> = BTreeMap::new();
        for e in events {
            let (lock, holder) = (
                e.lock.as_deref().unwrap_or_default(),
                e.holder.as_deref().unwrap_or_default(),
            );
            match e.event {
                EventKind::KeySet => {
                    if let Some(before) = last.insert((lock, e.node.as_str()), e) {
                        if before.holder != e.holder {
                            self.link(before, e);
                            contested.entry((lock, holder)).or_default().push(e);
                        }
                    }
                }
                EventKind::KeyExpire => {
                    if let Some(set) = last.insert((lock, e.node.as_str()), e) {
                        if set.event == EventKind::KeySet && set.token == e.token {
                            self.link(set, e);
                        }
                    }
                }
                EventKind::Grant => {
                    granted.extend(e.token.map(|t| (holder, t)));
                }
                EventKind::Belief => {
                    for set in contested
                        .remove(&(lock, e.node.as_str()))
                        .unwrap_or_default()
                    {
                        self.link(set, e);
                    }
                    if let Some(t) = e
                        .token
                        .filter(|t| !granted.contains(&(e.node.as_str(), *t)))
                    {
                        beliefs.insert((e.node.as_str(), t), e);
                    }
                }
                EventKind::Accept | EventKind::Reject => {
                    if let Some(belief) = e.token.and_then(|t| beliefs.get(&(holder, t))) {
                        self.link(belief, e);
                    }
                }
                _ => {}
            }
        }
    }

    /// Fault starts to their ends and to what they caused.
    fn link_faults(&mut self, events: &[&'h Event]) {
        for (i, start) in events.iter().enumerate() {
            if !start.event.is_nemesis() || start.phase != Some(Phase::Start) {
                continue;
            }
            let target = start.target.as_deref().unwrap_or_default();
            let later = &events[i + 1..];
            let end = later.iter().find(|e| {
                e.event == start.event && e.phase == Some(Phase::End) && e.target == start.target
            });
            if let Some(end) = end {
                self.link(start, end);
            }
            // An instantaneous fault (a clock jump) acts after its end; others while they last.
            let instant = end.is_some_and(|e| e.at.time_ns == start.at.time_ns);
            let until = end.filter(|_| !instant).map_or(u64::MAX, |e| e.at.index);
            let touches = |e: &&&Event| e.node == target || e.holder.as_deref() == Some(target);
            if let Some(ended) = later
                .iter()
                .take_while(|e| e.at.index < until)
                .filter(touches)
                .find(|e| is_lease_end(e) || e.event == EventKind::KeyExpire)
            {
                self.link(start, ended);
            }
            let Some(end) = end.filter(|_| !instant) else {
                continue;
            };
            // A paused client's belief that began after it resumed: it decided on replies that
            // waited out the pause (K05), and believes from then.
            if start.event == EventKind::Pause {
                let late_belief = |e: &&&Event| {
                    e.event == EventKind::Belief
                        && e.phase == Some(Phase::Start)
                        && e.node == target
                };
                if let Some(belief) = later
                    .iter()
                    .filter(|e| e.at.index > end.at.index)
                    .find(late_belief)
                {
                    self.link(end, belief);
                }
                // Its first grant after it resumed: a claim it prepared before the pause (a
                // lease record whose expiry it computed from its clock, then swapped in late)
                // or sent after, on what it knew before.
                let late_grant = |e: &&&Event| {
                    e.event == EventKind::Grant && e.holder.as_deref() == Some(target)
                };
                if let Some(grant) = later
                    .iter()
                    .filter(|e| e.at.index > end.at.index)
                    .find(late_grant)
                {
                    self.link(end, grant);
                }
            }
            // A lock service that lost state (crash, restore) grants again after it restarts;
            // a quorum lock's node sets its key again.
            if matches!(start.event, EventKind::Crash | EventKind::Restore) {
                let grants = |e: &&&Event| matches!(e.event, EventKind::Grant | EventKind::KeySet);
                if let Some(grant) = later
                    .iter()
                    .filter(|e| e.at.index > end.at.index)
                    .filter(grants)
                    .find(|e| e.node == target)
                {
                    self.link(end, grant);
                }
            }
            let carried = |e: &&&Event| match start.event {
                EventKind::Hold => start.op.is_some() && e.op == start.op,
                _ => e.holder.as_deref() == Some(target),
            };
            if let Some(write) = later
                .iter()
                .filter(|e| e.at.index > end.at.index && is_write(e))
                .find(carried)
            {
                self.link(end, write);
            }
        }
    }

    /// The chain behind `witnesses`: each step one phrase, in history order.
    pub fn chain(&self, witnesses: &[u64]) -> Vec<String> {
        // Each witness's ancestors, nearest first.
        let reversed = Reversed(&self.graph);
        let mut ancestries: Vec<Vec<(usize, u64)>> = Vec::new();
        for w in witnesses {
            let Some(&start) = self.by_index.get(w) else {
                continue;
            };
            let mut depth: BTreeMap<NodeIndex, usize> = BTreeMap::from([(start, 0)]);
            let mut bfs = Bfs::new(reversed, start);
            let mut ancestry = Vec::new();
            while let Some(n) = bfs.next(reversed) {
                let d = depth[&n];
                ancestry.push((d, self.graph[n].at.index));
                for parent in self
                    .graph
                    .neighbors_directed(n, petgraph::Direction::Incoming)
                {
                    depth.entry(parent).or_insert(d + 1);
                }
                if d >= DEPTH {
                    break;
                }
            }
            ancestries.push(ancestry);
        }
        // Keep the steps nearest to the witnesses, level by level across all of them, so that
        // one witness's long past cannot crowd out another's own grant or hold.
        let mut picked: BTreeSet<u64> = BTreeSet::new();
        'levels: for level in 0..=DEPTH {
            for ancestry in &ancestries {
                for &(_, index) in ancestry.iter().filter(|(d, _)| *d == level) {
                    if picked.len() >= MAX_STEPS {
                        break 'levels;
                    }
                    picked.insert(index);
                }
            }
        }
        picked
            .iter()
            .map(|i| {
                let e = self.graph[self.by_index[i]];
                let at = if self.untimed {
                    format!("index {}", e.at.index)
                } else {
                    secs(e.at.time_ns)
                };
                match self.early.get(i) {
                    Some(&early_ns) => early_expiry(e, &at, early_ns),
                    None => phrase(e, &at, self.caller(e)),
                }
            })
            .collect()
    }

    /// The node that invoked the operation an event answers (a release's caller).
    fn caller(&self, e: &Event) -> Option<&'h str> {
        match self.history.entries.get(e.op? as usize)? {
            fencesim_history::Entry::Op(op) => Some(op.node.as_str()),
            fencesim_history::Entry::Event(_) => None,
        }
    }
}

fn secs(ns: u64) -> String {
    format!("{:.1} s", ns as f64 / 1e9)
}

/// An `expire` that came `early_ns` before its lease's promised TTL ran out: the service's
/// doing, so the step names it.
fn early_expiry(e: &Event, at: &str, early_ns: u64) -> String {
    let who = e.holder.as_deref().unwrap_or("?");
    let token = e.token.map_or(String::new(), |t| format!(" {t}"));
    format!(
        "{} expired {who}'s lease (token{token}) at {}, {} before its TTL ran out",
        e.node,
        at,
        secs(early_ns)
    )
}

/// One step of a chain, in words, `at` saying where it is; `caller` is who asked for it,
/// when the event answers an operation (a release requested by another than the holder reads
/// as such, K19).
fn phrase(e: &Event, at: &str, caller: Option<&str>) -> String {
    let who = e.holder.as_deref().unwrap_or("?");
    let token = e.token.map_or(String::new(), |t| format!(" {t}"));
    let target = e.target.as_deref().unwrap_or("?");
    let detail = e
        .detail
        .as_deref()
        .map_or(String::new(), |d| format!(" ({d})"));
    match (e.event, e.phase) {
        (EventKind::Grant, _) => format!("{who} was granted token{token} at {at}"),
        (EventKind::Expire, _) => format!("{who}'s lease (token{token}) expired at {at}"),
        (EventKind::Release, _) => match caller.filter(|c| *c != who) {
            Some(c) => format!("{c}'s release ended {who}'s lease (token{token}) at {at}"),
            None => format!("{who} released token{token} at {at}"),
        },
        (EventKind::Revoke, _) => {
            format!("{who}'s lease (token{token}) was revoked at {at}{detail}")
        }
        (EventKind::Accept | EventKind::Reject, _) => {
            // A write, or the mutation the resource named (`delete`); with its token or none.
            let what = e.detail.as_deref().unwrap_or("write");
            let with = match e.token {
                Some(t) => format!("with token {t}"),
                None => "without a token".to_owned(),
            };
            let how = if e.event == EventKind::Accept {
                "accepted"
            } else {
                "rejected"
            };
            format!("{who}'s {what} {with} was {how} at {at}")
        }
        // The believer is the node that recorded it, as mutual-exclusion-client names it.
        (EventKind::Belief, _) => format!("{} believed it held token{token} from {at}", e.node),
        (EventKind::Leader, _) => format!("{} became leader at {at}{detail}", e.node),
        (EventKind::KeySet, _) => {
            format!("{} set the key for {who} (value{token}) at {at}", e.node)
        }
        (EventKind::KeyExpire, _) => {
            format!("{} expired {who}'s key (value{token}) at {at}", e.node)
        }
        (EventKind::Pause, Some(Phase::Start)) => format!("{target} paused at {at}{detail}"),
        (EventKind::Pause, _) => format!("{target} resumed at {at}"),
        (EventKind::Crash, Some(Phase::Start)) => format!("{target} crashed at {at}"),
        (EventKind::Crash, _) => format!("{target} restarted at {at}"),
        (EventKind::Hold, Some(Phase::Start)) => {
            format!("the network held a message at {at}{detail}")
        }
        (EventKind::Hold, _) => format!("the held message was delivered at {at}{detail}"),
        (EventKind::Partition, Some(Phase::Start)) => format!("{target} was cut off at {at}"),
        (EventKind::Partition, _) => format!("{target}'s partition healed at {at}"),
        (EventKind::Stall, Some(Phase::Start)) => {
            format!("{target}'s keepalive stalled at {at}{detail}")
        }
        (EventKind::Stall, _) => format!("{target}'s keepalive ran again at {at}"),
        (EventKind::Deregister, Some(Phase::Start)) => {
            format!("{target} was deregistered by a maintenance job at {at}")
        }
        (kind, Some(Phase::End)) => format!("{} on {target} ended at {at}", kind.as_str()),
        (kind, _) => format!("{} on {target} at {at}{detail}", kind.as_str()),
    }
}
