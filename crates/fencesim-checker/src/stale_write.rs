//! `stale-write-accepted`: on a key, the resource accepted a write whose token is lower than a
//! token it had already accepted (Kleppmann 2016's paused or delayed former holder). For opaque
//! lock values, "lower" means acquired earlier in true time (see [`crate::order`]).

use std::collections::BTreeMap;

use fencesim_history::{Event, EventKind, ViolationKind};

use crate::leases::Leases;
use crate::order::TokenRanks;
use crate::{Records, Violation};

/// The highest-ranked accept seen so far on a key.
struct Highest<'a> {
    token: u64,
    rank: u64,
    event: &'a Event,
}

pub(crate) fn check(history: &Records, leases: &Leases) -> Vec<Violation> {
    let ranks = TokenRanks::new(history);
    let mut highest: BTreeMap<&str, Highest> = BTreeMap::new();
    let mut violations = Vec::new();
    for ev in history.events().filter(|e| e.event == EventKind::Accept) {
        let (Some(key), Some(token)) = (ev.key.as_deref(), ev.token) else {
            continue;
        };
        // A value never seen acquired cannot be ordered: no judgement either way.
        let Some(rank) = ranks.rank(token) else {
            continue;
        };
        match highest.get(key) {
            Some(h) if rank < h.rank => {
                let untimed = history.header.untimed;
                violations.push(violation(key, ev, h, leases, &ranks, untimed));
            }
            Some(h) if rank == h.rank => {}
            _ => {
                highest.insert(
                    key,
                    Highest {
                        token,
                        rank,
                        event: ev,
                    },
                );
            }
        }
    }
    violations
}

fn violation(
    key: &str,
    stale: &Event,
    higher: &Highest,
    leases: &Leases,
    ranks: &TokenRanks,
    untimed: bool,
) -> Violation {
    let writer = |e: &Event| {
        e.holder
            .clone()
            .unwrap_or_else(|| "an unknown writer".into())
    };
    let newer = if ranks.by_acquisition() {
        "the later-acquired token"
    } else {
        "the higher token"
    };
    let mut explanation = format!(
        "key {key:?}: the resource accepted token {} from {} at {} although it had already \
         accepted {newer} {} from {} at {}",
        stale.token.unwrap_or_default(),
        writer(stale),
        at_index(untimed, stale.at.index, stale.at.time_ns),
        higher.token,
        writer(higher.event),
        at_index(untimed, higher.event.at.index, higher.event.at.time_ns),
    );
    let lease = stale
        .holder
        .as_deref()
        .zip(stale.token)
        .and_then(|(h, t)| leases.for_write(h, t));
    if ranks.by_acquisition() {
        // Opaque values: say when each was acquired, the only order they have.
        let at = |t: Option<u64>| t.and_then(|t| ranks.rank(t)).unwrap_or_default();
        explanation.push_str(&format!(
            "; the tokens are opaque lock values, acquired at index {} and {} respectively",
            at(stale.token),
            at(Some(higher.token))
        ));
    }
    if let Some(lease) = lease {
        explanation.push_str(&format!(
            "; token {} was granted on lock {:?} at index {}",
            lease.token, lease.lock, lease.granted_at.0
        ));
        if let Some((idx, t)) = lease.ended_at.filter(|(_, t)| *t <= stale.at.time_ns) {
            explanation.push_str(&format!(
                " and its lease had ended at {}, before the write landed",
                at_index(untimed, idx, t)
            ));
        }
    }
    Violation {
        chain: Vec::new(),
        kind: ViolationKind::StaleWriteAccepted,
        witnesses: vec![stale.at.index, higher.event.at.index],
        explanation,
    }
}

/// True time as seconds with millisecond precision, for explanations.
/// Where a record is, as explanations say it: `index 7 (t=1.250s)`; in an untimed history
/// (a `fencesim verify` schedule, whose times are only its records' order) the index alone.
pub(crate) fn at_index(untimed: bool, index: u64, time_ns: u64) -> String {
    if untimed {
        format!("index {index}")
    } else {
        format!("index {index} (t={})", fmt_ns(time_ns))
    }
}

pub(crate) fn fmt_ns(ns: u64) -> String {
    format!("{}.{:03}s", ns / 1_000_000_000, (ns / 1_000_000) % 1_000)
}
