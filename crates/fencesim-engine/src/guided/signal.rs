//! What a run did, as a set of features: the signal of guided exploration. A run that shows a
//! feature no earlier run showed reached new behaviour, and its fault schedule is kept to be
//! mutated (as coverage-guided fuzzers keep inputs that reach new edges: AFL, libFuzzer).
//!
//! The features come from the history alone, the same for every design: which events
//! happened while which fault was active on which kind of node (a pause of a client spanning
//! the expiry of its own lease, a grant during a partition of the lock service), how writes
//! met the leases they were made under (a write accepted after its lease ended), how close
//! two clients' beliefs of the same lock came (a gap of 2^k ms, or an overlap), how long a
//! lock passed from one holder to the next, each node's sequence of decisions, and the
//! words of the reasons designs give for revoking a lease (their own state transitions).
//! Times are bucketed by powers of two, so that a run closer to a hazard than any before it
//! counts as new. Nothing here reads the scenario's defect knobs or its expected violations.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use fencesim_history::{Entry, Event, EventKind, History, OpFn, OpType, Phase};
use fencesim_scenario::{NodeRole, Scenario};

/// One feature: a short, deterministic description (`"during:pause:client:expire:self"`).
pub type Feature = String;

/// A nemesis fault's window in true time, ns, and what it aimed at.
struct Window<'h> {
    kind: EventKind,
    target: Option<&'h str>,
    role: &'static str,
    start_ns: u64,
    end_ns: u64,
}

/// The features of `history`, a run of `scenario`.
pub fn features(history: &History, scenario: &Scenario) -> BTreeSet<Feature> {
    let mut out = BTreeSet::new();
    let end_ns = history.entries.last().map_or(0, |e| e.at().time_ns);
    let windows = fault_windows(history, scenario, end_ns);
    let mut active = ActiveWindows::new(&windows);
    let mut seen: BTreeSet<Key> = BTreeSet::new();
    let mut state = Leases::default();
    let mut last_decision: BTreeMap<&str, EventKind> = BTreeMap::new();
    let mut op_counts: BTreeMap<(OpFn, OpType), u64> = BTreeMap::new();
    for entry in &history.entries {
        match entry {
            Entry::Event(e) if e.event.is_nemesis() => {}
            Entry::Event(e) => {
                let what = What::Event(e.event);
                let at = active.at(e.at.time_ns);
                during(at, what, involves(e), &mut seen);
                state.see(e, &mut seen);
                if let Some(previous) = last_decision.insert(&e.node, e.event) {
                    seen.insert(Key::Seq {
                        role: role_name(scenario, &e.node),
                        previous,
                        next: e.event,
                    });
                }
                if let (EventKind::Revoke, Some(detail)) = (e.event, &e.detail) {
                    out.insert(format!("revoke:{}", words(detail)));
                }
            }
            Entry::Op(op) if op.op_type != OpType::Invoke => {
                let what = What::Op(op.f, op.op_type);
                let node: &str = &op.node;
                let at = active.at(op.at.time_ns);
                during(at, what, |t| t == node, &mut seen);
                *op_counts.entry((op.f, op.op_type)).or_default() += 1;
            }
            Entry::Op(_) => {}
        }
    }
    for ((f, op_type), n) in op_counts {
        out.insert(format!("ops:{f:?}:{op_type:?}:{}", bucket(n)).to_lowercase());
    }
    out.extend(state.belief_gaps());
    out.extend(seen.into_iter().map(Key::feature));
    out
}

/// A feature of the run's events before it is written out, kept as a value so that each is
/// formatted once per run rather than once per event (a run has thousands of events and a
/// few dozen distinct features; a dense schedule, thousands of overlapping fault windows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    /// `during:pause:client:expire:self`, `during:partition:lease:op-write-ok:other`: what
    /// happened while a fault was on a kind of node, and whose it was.
    During {
        fault: EventKind,
        role: &'static str,
        what: What,
        whose: &'static str,
    },
    /// `seq:client:grant>belief`: two decisions of one node in a row.
    Seq {
        role: &'static str,
        previous: EventKind,
        next: EventKind,
    },
    /// `handover:expire:12`: a lock granted to another holder 2^11..2^12 ms after the last
    /// lease ended, and how it ended.
    Handover { how: EventKind, gap: u32 },
    /// `grant:higher`, `grant:not-higher`: a grant's token against the latest of its lock.
    Grant { higher: bool },
    /// `write:accept:ended-3:older`: how a write met the lease it was made under.
    Write {
        event: EventKind,
        lease: LeaseAtWrite,
        older: &'static str,
    },
}

/// The lease a write was made under, when the write landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum LeaseAtWrite {
    /// No grant of its holder and token was seen.
    Ungranted,
    Live,
    /// Ended this power-of-two bucket of ms before.
    Ended(u32),
}

impl Key {
    fn feature(self) -> Feature {
        match self {
            Key::During {
                fault,
                role,
                what,
                whose,
            } => {
                let what = match what {
                    What::Event(e) => e.as_str().to_owned(),
                    What::Op(f, op_type) => format!("op-{f:?}-{op_type:?}").to_lowercase(),
                };
                format!("during:{}:{role}:{what}:{whose}", fault.as_str())
            }
            Key::Seq {
                role,
                previous,
                next,
            } => format!("seq:{role}:{}>{}", previous.as_str(), next.as_str()),
            Key::Handover { how, gap } => format!("handover:{}:{gap}", how.as_str()),
            Key::Grant { higher: true } => "grant:higher".to_owned(),
            Key::Grant { higher: false } => "grant:not-higher".to_owned(),
            Key::Write {
                event,
                lease,
                older,
            } => {
                let lease = match lease {
                    LeaseAtWrite::Ungranted => "ungranted".to_owned(),
                    LeaseAtWrite::Live => "live".to_owned(),
                    LeaseAtWrite::Ended(bucket) => format!("ended-{bucket}"),
                };
                format!("write:{}:{lease}:{older}", event.as_str())
            }
        }
    }
}

/// Each nemesis fault's window: from its start event to its end (or the end of the run); an
/// instantaneous fault (a clock jump) is a window of a millisecond.
fn fault_windows<'h>(history: &'h History, scenario: &Scenario, end_ns: u64) -> Vec<Window<'h>> {
    let mut open: BTreeMap<(EventKind, Option<&str>), usize> = BTreeMap::new();
    let mut windows: Vec<Window<'h>> = Vec::new();
    for e in history.events().filter(|e| e.event.is_nemesis()) {
        let target = e.target.as_deref();
        let role = target.map_or("all", |t| role_name(scenario, t));
        match e.phase {
            Some(Phase::Start) => {
                open.insert((e.event, target), windows.len());
                windows.push(Window {
                    kind: e.event,
                    target,
                    role,
                    start_ns: e.at.time_ns,
                    end_ns,
                });
            }
            Some(Phase::End) => {
                if let Some(i) = open.remove(&(e.event, target)) {
                    windows[i].end_ns = e.at.time_ns;
                }
            }
            None => windows.push(Window {
                kind: e.event,
                target,
                role,
                start_ns: e.at.time_ns,
                end_ns: e.at.time_ns + 1_000_000,
            }),
        }
    }
    windows
}

/// What happened during a fault: an event, or an operation's completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum What {
    Event(EventKind),
    Op(OpFn, OpType),
}

/// The fault windows active at a time, for a run read in time order: counted per fault kind,
/// target and role, so that each step costs the windows that start or end, not all of them.
struct ActiveWindows<'w, 'h> {
    windows: &'w [Window<'h>],
    /// The next window to start (windows are in the order they started).
    next: usize,
    /// The started windows' ends, soonest first.
    ends: BinaryHeap<Reverse<(u64, usize)>>,
    counts: BTreeMap<(EventKind, Option<&'h str>, &'static str), usize>,
    last_ns: u64,
}

impl<'w, 'h> ActiveWindows<'w, 'h> {
    fn new(windows: &'w [Window<'h>]) -> Self {
        ActiveWindows {
            windows,
            next: 0,
            ends: BinaryHeap::new(),
            counts: BTreeMap::new(),
            last_ns: 0,
        }
    }

    /// The (fault kind, target, role) of every window with `start_ns <= time_ns <= end_ns`.
    fn at(
        &mut self,
        time_ns: u64,
    ) -> impl Iterator<Item = (EventKind, Option<&'h str>, &'static str)> + '_ {
        if time_ns < self.last_ns {
            // Read out of time order: start again from the first window.
            *self = ActiveWindows::new(self.windows);
        }
        self.last_ns = time_ns;
        let key = |w: &Window<'h>| (w.kind, w.target, w.role);
        while let Some(w) = self.windows.get(self.next) {
            if w.start_ns > time_ns {
                break;
            }
            *self.counts.entry(key(w)).or_default() += 1;
            self.ends.push(Reverse((w.end_ns, self.next)));
            self.next += 1;
        }
        while let Some(&Reverse((end_ns, i))) = self.ends.peek() {
            if end_ns >= time_ns {
                break;
            }
            self.ends.pop();
            let k = key(&self.windows[i]);
            if let Some(n) = self.counts.get_mut(&k) {
                *n -= 1;
                if *n == 0 {
                    self.counts.remove(&k);
                }
            }
        }
        self.counts.keys().copied()
    }
}

/// Note a feature for each fault window active at an event (`active`): what happened, while
/// which fault was on which kind of node, and whether it happened to the fault's own target.
fn during<'h>(
    active: impl Iterator<Item = (EventKind, Option<&'h str>, &'static str)>,
    what: What,
    concerns: impl Fn(&str) -> bool,
    seen: &mut BTreeSet<Key>,
) {
    for (fault, target, role) in active {
        let whose = match target {
            Some(t) if concerns(t) => "self",
            Some(_) => "other",
            None => "any",
        };
        seen.insert(Key::During {
            fault,
            role,
            what,
            whose,
        });
    }
}

/// Whether an event concerns a node: it decided it, or the lease or write is that node's.
fn involves(e: &Event) -> impl Fn(&str) -> bool + '_ {
    move |node| *e.node == *node || e.holder.as_deref() == Some(node)
}

fn role_name(scenario: &Scenario, node: &str) -> &'static str {
    match scenario.role(node) {
        NodeRole::Client => "client",
        NodeRole::LeaseService => "lease",
        NodeRole::Resource => "resource",
    }
}

/// `n` as a power-of-two bucket: 0 for 0, else 1 + floor(log2 n).
fn bucket(n: u64) -> u32 {
    64 - n.leading_zeros()
}

/// A reason's words with numbers masked, at most three: `"taken over by"`.
fn words(detail: &str) -> String {
    detail
        .split_whitespace()
        .take(3)
        .map(|w| {
            if w.chars().any(|c| c.is_ascii_digit()) {
                "#"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// How a lock's last lease ended: when (true time, ns), by which event, and whose it was.
type LastEnd<'h> = Option<(u64, EventKind, &'h str)>;

/// What the service granted and what clients believed, followed through the run.
#[derive(Default)]
struct Leases<'h> {
    /// (holder, token) to the lock and the time its lease ended, if it has.
    granted: BTreeMap<(&'h str, u64), (&'h str, Option<u64>)>,
    /// Per lock, the latest token granted and when the last lease ended (how, and to whom).
    latest: BTreeMap<&'h str, (u64, LastEnd<'h>)>,
    /// Per lock, each client's belief intervals in true time, ns (end: `u64::MAX` if open).
    beliefs: BTreeMap<&'h str, Vec<(&'h str, u64, u64)>>,
}

impl<'h> Leases<'h> {
    fn see(&mut self, e: &'h Event, out: &mut BTreeSet<Key>) {
        let (holder, token, t) = (e.holder.as_deref().unwrap_or(""), e.token, e.at.time_ns);
        match (e.event, e.lock.as_deref(), token) {
            (EventKind::Grant, Some(lock), Some(token)) => {
                self.granted.insert((holder, token), (lock, None));
                let (latest, ended) = self.latest.entry(lock).or_insert((0, None));
                if let Some((end_ns, how, previous)) = *ended {
                    if previous != holder {
                        let gap_ms = t.saturating_sub(end_ns) / 1_000_000;
                        out.insert(Key::Handover {
                            how,
                            gap: bucket(gap_ms),
                        });
                    }
                }
                out.insert(Key::Grant {
                    higher: token > *latest,
                });
                *latest = (*latest).max(token);
                *ended = None;
            }
            (
                EventKind::Expire | EventKind::Revoke | EventKind::Release,
                Some(lock),
                Some(token),
            ) => {
                if let Some(lease) = self.granted.get_mut(&(holder, token)) {
                    lease.1 = Some(t);
                }
                self.latest.entry(lock).or_insert((0, None)).1 = Some((t, e.event, holder));
            }
            (EventKind::Accept | EventKind::Reject, _, Some(token)) => {
                let lease = self.granted.get(&(holder, token)).copied();
                let (lease, older) = match lease {
                    None => (LeaseAtWrite::Ungranted, "?"),
                    Some((lock, ended)) => {
                        let latest = self.latest.get(lock).map_or(0, |l| l.0);
                        let older = if token < latest { "older" } else { "latest" };
                        match ended {
                            None => (LeaseAtWrite::Live, older),
                            Some(end_ns) => {
                                let late_ms = t.saturating_sub(end_ns) / 1_000_000;
                                (LeaseAtWrite::Ended(bucket(late_ms)), older)
                            }
                        }
                    }
                };
                out.insert(Key::Write {
                    event: e.event,
                    lease,
                    older,
                });
            }
            (EventKind::Belief, Some(lock), _) => {
                let list = self.beliefs.entry(lock).or_default();
                match e.phase {
                    Some(Phase::Start) => {
                        if !list.iter().any(|b| b.0 == holder && b.2 == u64::MAX) {
                            list.push((holder, t, u64::MAX));
                        }
                    }
                    _ => {
                        if let Some(b) = list
                            .iter_mut()
                            .rev()
                            .find(|b| b.0 == holder && b.2 == u64::MAX)
                        {
                            b.2 = t;
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// For each pair of beliefs of one lock by two clients, one starting after the other:
    /// how long after the earlier one's end the later one began (bucketed), or an overlap.
    fn belief_gaps(&self) -> BTreeSet<Feature> {
        let mut out = BTreeSet::new();
        for list in self.beliefs.values() {
            let mut sorted = list.clone();
            sorted.sort_by_key(|b| b.1);
            for pair in sorted.windows(2) {
                let ((a, _, a_end), (b, b_start, _)) = (pair[0], pair[1]);
                if a == b {
                    continue;
                }
                let feature = if b_start < a_end {
                    "belief-gap:overlap".to_owned()
                } else {
                    format!("belief-gap:{}", bucket((b_start - a_end) / 1_000_000))
                };
                out.insert(feature);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The windows active at each time, kept as the run is read, are those a scan of every
        /// window finds, whatever the windows overlap and in whatever order the times come.
        #[test]
        fn active_windows_are_those_a_full_scan_finds(
            mut spans in prop::collection::vec((0u64..50, 0u64..30, 0usize..3, 0usize..2), 0..40),
            times in prop::collection::vec(0u64..90, 1..40),
        ) {
            spans.sort_by_key(|s| s.0);
            let kinds = [EventKind::Pause, EventKind::Partition, EventKind::Crash];
            let targets = [Some("client-1"), None];
            let windows: Vec<Window<'_>> = spans
                .iter()
                .map(|&(start, len, kind, target)| Window {
                    kind: kinds[kind],
                    target: targets[target],
                    role: "client",
                    start_ns: start,
                    end_ns: start + len,
                })
                .collect();
            let mut active = ActiveWindows::new(&windows);
            // Mostly in order, as a history is, with a step back now and then.
            for t in times {
                let got: BTreeSet<_> = active.at(t).collect();
                let want: BTreeSet<_> = windows
                    .iter()
                    .filter(|w| w.start_ns <= t && t <= w.end_ns)
                    .map(|w| (w.kind, w.target, w.role))
                    .collect();
                prop_assert_eq!(got, want);
            }
        }
    }

    #[test]
    fn buckets_and_words() {
        assert_eq!(
            [bucket(0), bucket(1), bucket(2), bucket(3), bucket(1024)],
            [0, 1, 2, 2, 11]
        );
        assert_eq!(words("taken over by client-2 at 5"), "taken over by");
        assert_eq!(words("epoch 2: promoted"), "epoch # promoted");
    }
}

/// How close a run came to each safety property's breaking, ms (lower is closer; a value at
/// or below 0 is a violation the checkers report): the objectives guided exploration climbs,
/// as IJON's annotated maxima let a fuzzer climb towards a state. Only ends that are not a
/// holder's own release count: a lease handed on by its release is the everyday case, and
/// would pin every measure at a few milliseconds. `None` where the run gave a measure nothing
/// to measure.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Distances {
    /// From the end of one client's belief of a lock (its own deadline, or losing it), when it
    /// did not release it, to the start of another client's belief: mutual exclusion by the
    /// clients' view.
    pub belief_gap_ms: Option<i64>,
    /// From a client's own deadline for a lease to the service's: how far the client's
    /// reckoning stays inside the service's.
    pub belief_inside_lease_ms: Option<i64>,
    /// From a write's acceptance to the end of the lease it was made under, when that lease
    /// ran out or was revoked rather than released: a stale write.
    pub write_before_lease_end_ms: Option<i64>,
}

impl Distances {
    /// The measures in a fixed order, for a search that keeps the best of each.
    pub fn all(&self) -> [Option<i64>; 3] {
        [
            self.belief_gap_ms,
            self.belief_inside_lease_ms,
            self.write_before_lease_end_ms,
        ]
    }
}

/// A deadline read on a node's clock at an event, in true time, ms: the event's true time
/// plus what was left on the clock (drift ignored: a few parts in a hundred).
fn deadline_true_ms(e: &Event) -> Option<i64> {
    let left_ms = e.expires_at_ms? - e.at.mono_ms;
    Some((e.at.time_ns / 1_000_000) as i64 + left_ms)
}

/// One client's belief of one lease: when it began, its deadline, and when and why it ended.
struct Belief<'h> {
    holder: &'h str,
    start_ms: i64,
    deadline_ms: Option<i64>,
    ended: Option<(i64, bool)>,
}

impl Belief<'_> {
    /// When the belief stopped, unless the holder released the lease: its end event, or its
    /// deadline, whichever came first.
    fn hazard_end_ms(&self) -> Option<i64> {
        match (self.ended, self.deadline_ms) {
            (Some((_, true)), _) => None,
            (Some((t, false)), Some(d)) => Some(t.min(d)),
            (Some((t, false)), None) => Some(t),
            (None, d) => d,
        }
    }
}

/// The run's [`Distances`].
pub fn distances(history: &History) -> Distances {
    // Per (lock, holder, token): the service's deadline and how the lease ended.
    let mut service_deadline: BTreeMap<(&str, &str, u64), i64> = BTreeMap::new();
    let mut ran_out: BTreeMap<(&str, &str, u64), i64> = BTreeMap::new();
    let mut lock_of: BTreeMap<(&str, u64), &str> = BTreeMap::new();
    let mut beliefs: BTreeMap<(&str, &str, u64), Belief<'_>> = BTreeMap::new();
    let mut accepts: Vec<(&str, u64, i64)> = Vec::new();
    for e in history.events() {
        let t_ms = (e.at.time_ns / 1_000_000) as i64;
        let (Some(token), holder) = (e.token, e.holder.as_deref().unwrap_or("")) else {
            continue;
        };
        let lock = e.lock.as_deref();
        match (e.event, lock) {
            (EventKind::Grant | EventKind::Renew, Some(lock)) => {
                if let Some(d) = deadline_true_ms(e) {
                    service_deadline.insert((lock, holder, token), d);
                }
                lock_of.insert((holder, token), lock);
            }
            (EventKind::Expire | EventKind::Revoke, Some(lock)) => {
                ran_out.insert((lock, holder, token), t_ms);
            }
            (EventKind::Accept, _) => accepts.push((holder, token, t_ms)),
            (EventKind::Belief, Some(lock)) => {
                let belief = beliefs.entry((lock, holder, token)).or_insert(Belief {
                    holder,
                    start_ms: t_ms,
                    deadline_ms: None,
                    ended: None,
                });
                match e.phase {
                    Some(Phase::Start) => belief.deadline_ms = deadline_true_ms(e),
                    _ => {
                        let released = e.detail.as_deref() == Some("released");
                        belief.ended.get_or_insert((t_ms, released));
                    }
                }
            }
            _ => {}
        }
    }
    let mut d = Distances::default();
    let closer = |slot: &mut Option<i64>, value: i64| {
        *slot = Some(slot.map_or(value, |v| v.min(value)));
    };
    for ((lock, holder, token), belief) in &beliefs {
        if let (Some(client), Some(service)) = (
            belief.deadline_ms,
            service_deadline.get(&(*lock, *holder, *token)),
        ) {
            closer(&mut d.belief_inside_lease_ms, service - client);
        }
        let Some(end) = belief.hazard_end_ms() else {
            continue;
        };
        // The next belief of the same lock by another client, after this one began.
        let next = beliefs
            .range((*lock, "", 0)..)
            .take_while(|((l, _, _), _)| l == lock)
            .filter(|(_, b)| b.holder != belief.holder && b.start_ms >= belief.start_ms)
            .map(|(_, b)| b.start_ms)
            .min();
        if let Some(start) = next {
            closer(&mut d.belief_gap_ms, start - end);
        }
    }
    for (holder, token, t_ms) in accepts {
        let end = lock_of
            .get(&(holder, token))
            .and_then(|lock| ran_out.get(&(*lock, holder, token)));
        if let Some(end) = end {
            closer(&mut d.write_before_lease_end_ms, end - t_ms);
        }
    }
    d
}
