//! Quorum locks (antirez's Redlock on N Redis nodes), judged from their nodes' key events
//! (`key-set`, `key-extend`, `key-delete`, `key-expire`): the claim such a lock makes is that
//! at most one client holds live keys on a majority of its nodes at a time, and it rests on
//! every node keeping a key for its whole TTL (PX) in true time (Kleppmann 2016, "How to do
//! distributed locking", shows the two ways it does not: a node that restarts without the key,
//! a node whose clock jumps).
//!
//! - `lease-ended-early`: a node ended a holder's key before its TTL had passed in true time
//!   (found it expired by its own clock, or set the key for another client, having lost it in
//!   a restart) while the holder still believed it held the lock, from a round (its acquire or
//!   renewal) that set or extended that key. The node is to blame, and
//!   the fault that hit it in between (a crash, a clock change) is named. A key that ends
//!   early by less than the client's allowance for drift harms nobody and is not reported: by
//!   then its holder no longer counts on it. Nor is a stale key (one a renewal did not reach)
//!   that ends before a validity it was never part of.
//! - `mutual-exclusion-service`: two clients each held the lock at once, where holding is
//!   believing it held (its `belief`) while keys of one acquisition of it were live on a
//!   majority of the nodes, a key being live from its set to its TTL's end in true time (or
//!   its holder's delete): the keys the holder counts on, as the lock promises them.

use std::collections::BTreeMap;

use fencesim_history::{Event, EventKind, OpFn, OpType, Phase, ViolationKind};

use crate::exclusion::{belief_intervals, overlaps, Interval, NO_RECORD};
use crate::stale_write::fmt_ns;
use crate::{Records, Violation};

/// How a node's key for a holder ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// Deleted at its holder's request.
    Deleted,
    /// Found expired by the node's own expiry clock.
    Expired,
    /// Gone when the node set the key for another holder: lost without a record (a restart
    /// without it).
    Replaced,
}

/// One key a node held for one holder: from its set to its end.
#[derive(Clone, Debug)]
struct Tenure<'h> {
    node: &'h str,
    lock: &'h str,
    holder: &'h str,
    value: u64,
    /// The key-set: index, true ns.
    set: (u64, u64),
    /// The TTL last set or extended, ms.
    ttl_ms: u64,
    /// When it was last set or extended, true ns.
    refreshed_ns: u64,
    /// How many nodes the lock is spread over.
    nodes: u32,
    /// The record that ended it (index, true ns), and how.
    ended: Option<((u64, u64), Ended)>,
}

impl Tenure<'_> {
    /// When its TTL runs out in true time (its last set or extend plus its TTL), ns.
    fn due_ns(&self) -> u64 {
        self.refreshed_ns
            .saturating_add(self.ttl_ms.saturating_mul(1_000_000))
    }
}

/// The key events of `history`, as tenures per node, in the order they were set.
fn tenures<'h>(history: &Records<'h>) -> Vec<Tenure<'h>> {
    let mut all: Vec<Tenure<'h>> = Vec::new();
    // Per (lock, node), the tenure still open.
    let mut open: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for e in history.events().filter(|e| e.event.is_key()) {
        let (Some(lock), node) = (e.lock.as_deref(), e.node.as_str()) else {
            continue;
        };
        let at = (e.at.index, e.at.time_ns);
        match (e.event, e.token) {
            (EventKind::KeySet, Some(value)) => {
                if let Some(gone) = open.remove(&(lock, node)) {
                    all[gone].ended = Some((at, Ended::Replaced));
                }
                let ttl_ms = e.ttl_ms.unwrap_or_default();
                open.insert((lock, node), all.len());
                all.push(Tenure {
                    node,
                    lock,
                    holder: e.holder.as_deref().unwrap_or_default(),
                    value,
                    set: at,
                    ttl_ms,
                    refreshed_ns: e.at.time_ns,
                    nodes: e.nodes.unwrap_or_default(),
                    ended: None,
                });
            }
            (EventKind::KeyExtend, Some(value)) => {
                if let Some(&t) = open.get(&(lock, node)).filter(|&&t| all[t].value == value) {
                    all[t].ttl_ms = e.ttl_ms.unwrap_or(all[t].ttl_ms);
                    all[t].refreshed_ns = e.at.time_ns;
                }
            }
            (EventKind::KeyDelete | EventKind::KeyExpire, Some(value)) => {
                if let Some(t) = open
                    .get(&(lock, node))
                    .copied()
                    .filter(|&t| all[t].value == value)
                {
                    open.remove(&(lock, node));
                    let how = if e.event == EventKind::KeyDelete {
                        Ended::Deleted
                    } else {
                        Ended::Expired
                    };
                    all[t].ended = Some((at, how));
                }
            }
            _ => {}
        }
    }
    all
}

/// How far apart two true times may be and still count as one, ns: the nodes' and clients'
/// clocks are read in whole ms, so a key due at 37.850000100 s that a node's clock, reading
/// 37,850 ms, finds expired at 37.850000000 s is on time.
pub(crate) const CLOCK_GRAIN_NS: u64 = 1_000_000;

/// Whether `holder` counted on a key of `lock` refreshed (set or extended) at true time
/// `refreshed_ns` when that key ended at `ns`: it believed it held the lock then (a belief open
/// at `ns`), and the key was set or extended in the round its belief came from (at or after
/// the invoke of the acquire or renew behind the belief's latest start). The first record of
/// the belief. Judged by true time and history order alone, as every check is: a client's
/// own clocks are not read.
pub(crate) fn counted_on(
    history: &Records,
    beliefs: &[Interval],
    holder: &str,
    lock: &str,
    ns: u64,
    refreshed_ns: u64,
) -> Option<u64> {
    let open = beliefs
        .iter()
        .find(|b| b.holder == holder && b.lock == lock && b.start.1 <= ns && ns < b.end_ns())?;
    // The belief's latest start (a renewal starts it again) at or before `ns`...
    let latest = history
        .events()
        .filter(|e| e.event == EventKind::Belief && e.phase == Some(Phase::Start))
        .filter(|e| e.node == holder && e.lock.as_deref() == Some(lock))
        .take_while(|e| e.at.time_ns <= ns)
        .last()?;
    // ...and the round it came from: the holder's last acquire or renew invoked before it.
    let round_ns = history
        .ops()
        .filter(|o| o.op_type == OpType::Invoke && matches!(o.f, OpFn::Acquire | OpFn::Renew))
        .filter(|o| o.node == holder && o.lock.as_deref() == Some(lock))
        .take_while(|o| o.at.index < latest.at.index)
        .last()
        .map_or(0, |o| o.at.time_ns);
    (refreshed_ns >= round_ns).then_some(open.start.0)
}

/// A fault that can take a key from a node, and how it bears on a key set at one index and
/// ended at a later one.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bearing {
    /// A crash or restore between the set and the end: the restart came back with what was
    /// synced.
    Lost,
    /// A clock fault that began between the set and the end.
    Changed,
    /// A clock fault already in force when the key was set (a drift, a skew, a jump not yet
    /// healed): the node counted the key's PX by a clock that was off from the start.
    InForce,
    /// The end of a clock fault between the set and the end (the node's clock put back, by
    /// the fault's own end or the final heal), which moves a key's expiry as a jump does.
    PutBack,
}

/// The faults that can take a key from `node` set at index `from` and ended at `to`: crashes
/// and restores between them, and every change to the node's clocks that was in force or
/// happened in between, each with its [`Bearing`], in history order. A clock jump stays in
/// force until the final heal puts the clock back; a skew, drift or strobe until its `end`.
pub(crate) fn faults_on<'h>(
    history: &Records<'h>,
    node: &str,
    from: u64,
    to: u64,
) -> Vec<(&'h Event, Bearing)> {
    let is_clock = |k: EventKind| {
        matches!(
            k,
            EventKind::ClockJump
                | EventKind::ClockSkew
                | EventKind::ClockDrift
                | EventKind::ClockStrobe
        )
    };
    let mut in_force: Vec<&'h Event> = Vec::new();
    let mut out = Vec::new();
    for e in history.events().take_while(|e| e.at.index < to) {
        let during = e.at.index > from;
        let on_node = e.target.as_deref() == Some(node);
        match e.event {
            EventKind::Crash | EventKind::Restore
                if on_node && during && e.phase != Some(Phase::End) =>
            {
                out.push((e, Bearing::Lost));
            }
            // A jump's own `end` is the same instant; it holds until the final heal.
            k if on_node
                && is_clock(k)
                && e.phase == Some(Phase::End)
                && k != EventKind::ClockJump =>
            {
                if let Some(at) = in_force.iter().rposition(|f| f.event == k) {
                    in_force.remove(at);
                    if during {
                        out.push((e, Bearing::PutBack));
                    }
                }
            }
            k if on_node && is_clock(k) && e.phase != Some(Phase::End) => {
                in_force.push(e);
                if during {
                    out.push((e, Bearing::Changed));
                }
            }
            EventKind::FinalHeal if e.phase != Some(Phase::End) => {
                if during && !in_force.is_empty() {
                    out.push((e, Bearing::PutBack));
                }
                in_force.clear();
            }
            _ => {}
        }
    }
    let mut before: Vec<(&'h Event, Bearing)> = in_force
        .into_iter()
        .filter(|f| f.at.index <= from)
        .map(|f| (f, Bearing::InForce))
        .collect();
    // Those in force came at or before the set, the rest after it: history order as it is.
    before.extend(out);
    before
}

/// The words for the fault that best explains an early end of `what` (`the key`, `the
/// lease`), which `began` (`was set`, `was granted`): a crash that lost it over a clock, the
/// latest clock change over one already in force.
pub(crate) fn cause(faults: &[(&Event, Bearing)], what: &str, began: &str) -> String {
    let pick = |b: Bearing| faults.iter().rev().find(|(_, x)| *x == b).map(|(e, _)| *e);
    let at = |e: &Event| format!("index {} (t={}", e.at.index, fmt_ns(e.at.time_ns));
    if let Some(e) = pick(Bearing::Lost) {
        return format!(
            "; it had crashed at {}) and restarted without {what} (not synced)",
            at(e)
        );
    }
    let changed = faults
        .iter()
        .rev()
        .find(|(_, b)| matches!(b, Bearing::Changed | Bearing::PutBack));
    match (changed, pick(Bearing::InForce)) {
        (Some((e, Bearing::PutBack)), _) if e.event == EventKind::FinalHeal => {
            format!("; its clock was put back by the final heal at {})", at(e))
        }
        (Some((e, Bearing::PutBack)), _) => format!(
            "; its clock was put back at {}: the end of {})",
            at(e),
            e.event.as_str()
        ),
        (Some((e, _)), _) => format!(
            "; its clock was changed at {}: {})",
            at(e),
            e.event.as_str()
        ),
        (None, Some(e)) => format!(
            "; its clock had been changed at {}: {}), before {what} {began}, and stayed so",
            at(e),
            e.event.as_str()
        ),
        (None, None) => "; no fault on the node explains it".to_owned(),
    }
}

/// The keys nodes ended before their TTL while their holders counted on them.
fn ended_early(history: &Records, tenures: &[Tenure], beliefs: &[Interval]) -> Vec<Violation> {
    let mut out = Vec::new();
    for t in tenures {
        let Some(((index, ns), how)) = t.ended else {
            continue;
        };
        if how == Ended::Deleted || ns.saturating_add(CLOCK_GRAIN_NS) >= t.due_ns() {
            continue;
        }
        let Some(since) = counted_on(history, beliefs, t.holder, t.lock, ns, t.refreshed_ns) else {
            continue;
        };
        let faults = faults_on(history, t.node, t.set.0, index);
        let what = match how {
            Ended::Expired => format!(
                "expired it by its own clock at index {index} (t={}), {} ms early",
                fmt_ns(ns),
                (t.due_ns() - ns) / 1_000_000
            ),
            _ => format!(
                "no longer had it at index {index} (t={}), when it set the key for another \
                 client, {} ms before its TTL ran out",
                fmt_ns(ns),
                (t.due_ns() - ns) / 1_000_000
            ),
        };
        let cause = cause(&faults, "the key", "was set");
        let mut witnesses = vec![index, t.set.0];
        witnesses.extend(faults.iter().map(|(f, _)| f.at.index));
        out.push(Violation {
            kind: ViolationKind::LeaseEndedEarly,
            witnesses,
            explanation: format!(
                "lock {:?}: {} set the key for {} with value {} at index {} (t={}) for {} ms, \
                 due until t={}, and {what}, while {} still believed it held the lock (since \
                 index {since}){cause}",
                t.lock,
                t.node,
                t.holder,
                t.value,
                t.set.0,
                fmt_ns(t.set.1),
                t.ttl_ms,
                fmt_ns(t.due_ns()),
                t.holder,
            ),
            chain: Vec::new(),
        });
    }
    out
}

/// A change in how many of an acquisition's keys are live: at a record (index, true ns), by +1
/// or -1.
type Step = ((u64, u64), i32);

/// For each acquisition (holder, value) of each lock, when its keys the holder counts on
/// were live on a majority of the nodes: `[start, end)` with the records that bound it (the
/// set that made the majority, and the delete that unmade it, or, where a key's TTL ran out,
/// that true time with no record, [`NO_RECORD`]).
fn majorities<'h>(tenures: &[Tenure<'h>]) -> Vec<Interval<'h>> {
    // +1 at each key's set, -1 where the holder stops counting on it, per acquisition.
    let mut steps: BTreeMap<(&str, &str, u64), Vec<Step>> = BTreeMap::new();
    let mut nodes: BTreeMap<&str, u32> = BTreeMap::new();
    for t in tenures {
        let end = match t.ended {
            Some((at, Ended::Deleted)) if at.1 < t.due_ns() => at,
            _ => (NO_RECORD, t.due_ns()),
        };
        let acquisition = steps.entry((t.lock, t.holder, t.value)).or_default();
        acquisition.push((t.set, 1));
        acquisition.push((end, -1));
        let n = nodes.entry(t.lock).or_default();
        *n = (*n).max(t.nodes);
    }
    let mut out = Vec::new();
    for ((lock, holder, value), mut points) in steps {
        let majority = i32::try_from(nodes[lock] / 2 + 1).unwrap_or(i32::MAX);
        // Ends before starts at one instant: a key that ends as another is set is no overlap.
        points.sort_by_key(|&((index, ns), delta)| (ns, delta, index));
        let mut live = 0;
        let mut start = None;
        for (at, delta) in points {
            live += delta;
            match (start, live >= majority) {
                (None, true) => start = Some(at),
                (Some(from), false) => {
                    out.push(Interval {
                        lock,
                        holder,
                        token: value,
                        start: from,
                        end: Some(at),
                    });
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(from) = start {
            out.push(Interval {
                lock,
                holder,
                token: value,
                start: from,
                end: None,
            });
        }
    }
    out
}

/// Where two intervals of one lock and holder overlap, bounded by the later start and the
/// earlier end.
fn intersect<'h>(a: &Interval<'h>, b: &Interval<'h>) -> Option<Interval<'h>> {
    let start = if a.start.1 >= b.start.1 {
        a.start
    } else {
        b.start
    };
    let end = match (a.end, b.end) {
        (Some(x), Some(y)) => Some(if x.1 <= y.1 { x } else { y }),
        (x, None) => x,
        (None, y) => y,
    };
    let end_ns = end.map_or(u64::MAX, |e| e.1);
    (start.1 < end_ns).then_some(Interval {
        start,
        end,
        ..a.clone()
    })
}

/// Every check on a quorum lock's key events; nothing for a history without them.
pub(crate) fn check(history: &Records) -> Vec<Violation> {
    let tenures = tenures(history);
    if tenures.is_empty() {
        return Vec::new();
    }
    let beliefs = belief_intervals(history);
    let mut out = ended_early(history, &tenures, &beliefs);
    // Held: a majority of live keys of one acquisition, while its holder believed it held.
    let mut held = Vec::new();
    for m in majorities(&tenures) {
        for b in beliefs
            .iter()
            .filter(|b| b.holder == m.holder && b.lock == m.lock)
        {
            // The token the client knows its acquisition by (the value, or a counter's), so
            // that an older acquisition's keys still live do not read as another holder.
            held.extend(intersect(&m, b).map(|i| Interval {
                token: b.token,
                ..i
            }));
        }
    }
    out.extend(overlaps(
        &held,
        ViolationKind::MutualExclusionService,
        "a majority of the nodes held keys for",
    ));
    out
}
