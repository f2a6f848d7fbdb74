//! Mutual exclusion, two ways:
//! - `mutual-exclusion-service`: by the lock service's own events, two leases on one lock with
//!   different tokens were live at once (grant to expire/release/revoke, in true time);
//! - `mutual-exclusion-client`: by the clients' own `belief` events, two clients believed they
//!   held one lock at once. Kleppmann 2016's point is that the second can happen while the
//!   first does not, which is why the resource must fence.

use std::collections::BTreeMap;

use fencesim_history::{EventKind, Phase, ViolationKind};
use petgraph::unionfind::UnionFind;

use crate::leases::Leases;
use crate::stale_write::fmt_ns;
use crate::{Records, Violation};

/// One holder's interval on one lock: `[start, end)` in true ns, with the records that bound it
/// (index, true ns).
#[derive(Clone, Debug)]
pub(crate) struct Interval<'h> {
    pub lock: &'h str,
    pub holder: &'h str,
    pub token: u64,
    pub start: (u64, u64),
    pub end: Option<(u64, u64)>,
}

/// The index of an interval's end that no record marks: a time alone (a key whose TTL ran out
/// in true time, which nothing recorded at that moment).
pub(crate) const NO_RECORD: u64 = u64::MAX;

impl Interval<'_> {
    /// Its end in true ns; `u64::MAX` for one that never ended.
    pub(crate) fn end_ns(&self) -> u64 {
        self.end.map_or(u64::MAX, |(_, t)| t)
    }
}

/// Report overlapping intervals of different holders or tokens on one lock. Overlap is
/// strict: an interval that ends where another starts does not clash, and an empty one clashes
/// with nothing. Clashing intervals are grouped into incidents (connected components of the
/// overlap graph), so that one lease that never ends is one violation, not one per later grant.
pub(crate) fn overlaps(intervals: &[Interval], kind: ViolationKind, what: &str) -> Vec<Violation> {
    let mut by_lock: BTreeMap<&str, Vec<&Interval>> = BTreeMap::new();
    for i in intervals {
        by_lock.entry(i.lock).or_default().push(i);
    }
    let mut out = Vec::new();
    for (lock, mut list) in by_lock {
        list.sort_by_key(|i| i.start);
        let mut incidents = UnionFind::<usize>::new(list.len());
        // For each interval, the earliest earlier interval it clashes with (the explanation).
        let mut first_clash: Vec<Option<usize>> = vec![None; list.len()];
        // Sweep in start order, keeping only the intervals still open at each start.
        let mut open: Vec<usize> = Vec::new();
        for (n, later) in list.iter().enumerate() {
            open.retain(|&m| list[m].end_ns() > later.start.1);
            if later.end_ns() > later.start.1 {
                for &m in &open {
                    let earlier = list[m];
                    if earlier.holder != later.holder || earlier.token != later.token {
                        incidents.union(m, n);
                        first_clash[n].get_or_insert(m);
                    }
                }
                open.push(n);
            }
        }
        let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for n in 0..list.len() {
            members.entry(incidents.find(n)).or_default().push(n);
        }
        for group in members.values().filter(|g| g.len() > 1) {
            // The first interval of the incident that clashed, against the one it clashed with.
            let later = *group
                .iter()
                .find(|n| first_clash[**n].is_some())
                .expect("a group of two or more has a clash");
            let earlier = first_clash[later].expect("found just above");
            let (l, e) = (list[later], list[earlier]);
            let until = match e.end {
                None => "the end of the history".to_owned(),
                Some((NO_RECORD, t)) => format!("t={}", fmt_ns(t)),
                Some((i, t)) => format!("index {i} (t={})", fmt_ns(t)),
            };
            let mut witnesses = vec![l.start.0, e.start.0];
            witnesses.extend(
                group
                    .iter()
                    .filter(|n| **n != later && **n != earlier)
                    .map(|n| list[*n].start.0),
            );
            let others = group.len() - 2;
            let more = if others > 0 {
                format!("; {others} more overlapping holder intervals in this incident")
            } else {
                String::new()
            };
            out.push(Violation {
                chain: Vec::new(),
                kind,
                witnesses,
                explanation: format!(
                    "lock {lock:?}: {what} {} with token {} from index {} (t={}) while {} with token {} from index {} until {until}{more}",
                    l.holder, l.token, l.start.0, fmt_ns(l.start.1), e.holder, e.token, e.start.0,
                ),
            });
        }
    }
    out
}

pub(crate) fn check_service(leases: &Leases) -> Vec<Violation> {
    let intervals: Vec<Interval> = leases
        .iter()
        .map(|l| Interval {
            lock: l.lock,
            holder: l.holder,
            token: l.token,
            start: l.granted_at,
            end: l.ended_at,
        })
        .collect();
    overlaps(
        &intervals,
        ViolationKind::MutualExclusionService,
        "the service granted",
    )
}

pub(crate) fn check_client(history: &Records) -> Vec<Violation> {
    overlaps(
        &belief_intervals(history),
        ViolationKind::MutualExclusionClient,
        "client",
    )
}

/// Each client's beliefs that it held a lock, from its `belief` events: a start opens one, an
/// end (or a start with another token) closes it; one never closed lasts to the end.
pub(crate) fn belief_intervals<'h>(history: &Records<'h>) -> Vec<Interval<'h>> {
    // Open beliefs per client; a start while one is open for the same token extends it.
    // A client's open belief per lock: a client may hold several locks at once.
    let mut open: BTreeMap<(&str, &str), Interval> = BTreeMap::new();
    let mut done = Vec::new();
    for ev in history.events().filter(|e| e.event == EventKind::Belief) {
        let at = (ev.at.index, ev.at.time_ns);
        let client = ev.node.as_str();
        let Some(lock) = ev.lock.as_deref() else {
            continue;
        };
        match ev.phase {
            Some(Phase::Start) => {
                let Some(token) = ev.token else {
                    continue;
                };
                let same = open.get(&(client, lock)).is_some_and(|i| i.token == token);
                if !same {
                    if let Some(mut prev) = open.remove(&(client, lock)) {
                        prev.end = Some(at);
                        done.push(prev);
                    }
                    open.insert(
                        (client, lock),
                        Interval {
                            lock,
                            holder: client,
                            token,
                            start: at,
                            end: None,
                        },
                    );
                }
            }
            Some(Phase::End) => {
                if let Some(mut i) = open.remove(&(client, lock)) {
                    i.end = Some(at);
                    done.push(i);
                }
            }
            None => {}
        }
    }
    done.extend(open.into_values());
    done
}
