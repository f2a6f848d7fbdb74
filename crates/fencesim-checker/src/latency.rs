//! Latencies read off a history, for `fencesim bench` and reports: how long acquires took and
//! how long the lock service went without a leader after a fault struck its leader. Measures,
//! not checks.

use fencesim_history::{Entry, EventKind, History, OpFn, OpType, Phase};
use serde::{Deserialize, Serialize};

/// Summary of a set of durations, simulated ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// How many.
    pub count: usize,
    /// The median (nearest rank).
    pub median_ms: f64,
    /// The 99th percentile (nearest rank).
    pub p99_ms: f64,
    /// The largest.
    pub max_ms: f64,
}

impl Summary {
    /// Summarize durations given in ns.
    pub fn of(mut ns: Vec<u64>) -> Summary {
        if ns.is_empty() {
            return Summary::default();
        }
        ns.sort_unstable();
        let rank = |p: f64| {
            ns[((p * ns.len() as f64).ceil() as usize).clamp(1, ns.len()) - 1] as f64 / 1e6
        };
        Summary {
            count: ns.len(),
            median_ms: rank(0.5),
            p99_ms: rank(0.99),
            max_ms: *ns.last().expect("non-empty") as f64 / 1e6,
        }
    }
}

/// Invoke-to-ok time of every successful acquire (retries after `fail` are separate
/// operations), ns.
pub fn acquire_latencies(history: &History) -> Vec<u64> {
    let mut open: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for entry in &history.entries {
        let Entry::Op(op) = entry else { continue };
        if op.f != OpFn::Acquire {
            continue;
        }
        match op.op_type {
            OpType::Invoke => {
                open.insert(op.process, op.at.time_ns);
            }
            OpType::Ok => {
                if let Some(start) = open.remove(&op.process) {
                    out.push(op.at.time_ns - start);
                }
            }
            OpType::Fail | OpType::Info => {
                open.remove(&op.process);
            }
        }
    }
    out
}

/// For each fault that struck the node leading at the time (pause, crash, partition), the
/// time until some replica next became leader, ns. Leadership comes from `leader` events.
pub fn election_latencies(history: &History) -> Vec<u64> {
    let mut leader: Option<&str> = None;
    let mut waiting_since: Option<u64> = None;
    let mut out = Vec::new();
    for ev in history.events() {
        match ev.event {
            EventKind::Leader => {
                if let Some(since) = waiting_since.take() {
                    out.push(ev.at.time_ns - since);
                }
                leader = Some(&ev.node);
            }
            EventKind::Pause | EventKind::Crash | EventKind::Partition
                if ev.phase == Some(Phase::Start)
                    && ev.target.is_some()
                    && ev.target.as_deref() == leader =>
            {
                waiting_since.get_or_insert(ev.at.time_ns);
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let s = Summary::of((1..=100).map(|ms| ms * 1_000_000).collect());
        assert_eq!(
            (s.count, s.median_ms, s.p99_ms, s.max_ms),
            (100, 50.0, 99.0, 100.0)
        );
        assert_eq!(Summary::of(vec![]).count, 0);
    }
}
