//! Mutual exclusion, two ways:
//! - `mutual-exclusion-service`: by the lock service's own events, two leases on one lock with
//!   different tokens were live at once (grant to expire/release/revoke, in true time);
//! - `mutual-exclusion-client`: by the clients' own `belief` events, two clients believed they
//!   held one lock at once. Kleppmann 2016's point is that the second can happen while the
//!   first does not, which is why the resource must fence.

use std::collections::BTreeMap;

use fencesim_history::{EventKind, History, Phase, ViolationKind};

use crate::leases::Leases;
use crate::stale_write::fmt_ns;
use crate::Violation;

/// One holder's interval on one lock: `[start, end)` in true ns, with the records that bound it.
#[derive(Clone, Debug)]
struct Interval {
    lock: String,
    holder: String,
    token: u64,
    start: (u64, u64),
    end: Option<(u64, u64)>,
}

impl Interval {
    fn end_ns(&self) -> u64 {
        self.end.map_or(u64::MAX, |(_, t)| t)
    }
}

/// Report each pair of overlapping intervals of different holders or tokens on one lock,
/// pairing each interval with the earlier one it overlaps.
fn overlaps(intervals: &[Interval], kind: ViolationKind, what: &str) -> Vec<Violation> {
    let mut by_lock: BTreeMap<&str, Vec<&Interval>> = BTreeMap::new();
    for i in intervals {
        by_lock.entry(&i.lock).or_default().push(i);
    }
    let mut out = Vec::new();
    for (lock, mut list) in by_lock {
        list.sort_by_key(|i| i.start);
        for (n, later) in list.iter().enumerate() {
            // Strict overlap: an interval that ends where another starts does not clash, and an
            // empty one clashes with nothing.
            let clash = list[..n].iter().find(|earlier| {
                (earlier.holder != later.holder || earlier.token != later.token)
                    && earlier.end_ns() > later.start.1
                    && later.end_ns() > later.start.1
            });
            if let Some(earlier) = clash {
                let until = earlier
                    .end
                    .map_or("the end of the history".to_owned(), |(i, t)| {
                        format!("index {i} (t={})", fmt_ns(t))
                    });
                out.push(Violation {
                    kind,
                    witnesses: vec![later.start.0, earlier.start.0],
                    explanation: format!(
                        "lock {lock:?}: {what} {} with token {} from index {} (t={}) while {} with token {} from index {} until {until}",
                        later.holder, later.token, later.start.0, fmt_ns(later.start.1),
                        earlier.holder, earlier.token, earlier.start.0,
                    ),
                });
            }
        }
    }
    out
}

pub(crate) fn check_service(leases: &Leases) -> Vec<Violation> {
    let intervals: Vec<Interval> = leases
        .values()
        .map(|l| Interval {
            lock: l.lock.clone(),
            holder: l.holder.clone(),
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

pub(crate) fn check_client(history: &History) -> Vec<Violation> {
    // Open beliefs per client; a start while one is open for the same token extends it.
    let mut open: BTreeMap<&str, Interval> = BTreeMap::new();
    let mut done = Vec::new();
    for ev in history.events().filter(|e| e.event == EventKind::Belief) {
        let at = (ev.at.index, ev.at.time_ns);
        let client = ev.node.as_str();
        match ev.phase {
            Some(Phase::Start) => {
                let (Some(lock), Some(token)) = (&ev.lock, ev.token) else {
                    continue;
                };
                let same = open
                    .get(client)
                    .is_some_and(|i| i.token == token && &i.lock == lock);
                if !same {
                    if let Some(mut prev) = open.remove(client) {
                        prev.end = Some(at);
                        done.push(prev);
                    }
                    open.insert(
                        client,
                        Interval {
                            lock: lock.clone(),
                            holder: client.to_owned(),
                            token,
                            start: at,
                            end: None,
                        },
                    );
                }
            }
            Some(Phase::End) => {
                if let Some(mut i) = open.remove(client) {
                    i.end = Some(at);
                    done.push(i);
                }
            }
            None => {}
        }
    }
    done.extend(open.into_values());
    overlaps(&done, ViolationKind::MutualExclusionClient, "client")
}
