//! `no-progress-after-heal`: after the random nemesis's final heal, some fenced write must be
//! accepted within the recorded window (K lease periods). Safety checks say nothing bad
//! happened; this one says the system recovered once the faults stopped (Jepsen's final
//! generator phase). Only clients that still invoke operations after the heal are owed progress.

use fencesim_history::{EventKind, OpType, ViolationKind};

use crate::stale_write::fmt_ns;
use crate::{Records, Violation};

pub(crate) fn check(history: &Records) -> Vec<Violation> {
    let last_ns = history.entries.last().map_or(0, |e| e.at().time_ns);
    history
        .events()
        .filter(|e| e.event == EventKind::FinalHeal)
        .filter_map(|heal| {
            let window_ms = heal.window_ms?;
            let from = heal.at.time_ns;
            let until = from.saturating_add(window_ms.saturating_mul(1_000_000));
            let progressed = history
                .events()
                .any(|e| e.event == EventKind::Accept && e.at.index > heal.at.index && e.at.time_ns <= until);
            // Progress is owed only to clients that still had work: if no client operation
            // was invoked after the heal, they had all finished and there is nothing to judge.
            let demand = history
                .ops()
                .any(|op| op.op_type == OpType::Invoke && op.at.index > heal.at.index && op.at.time_ns <= until);
            (demand && !progressed).then(|| Violation {
                chain: Vec::new(),
                kind: ViolationKind::NoProgressAfterHeal,
                witnesses: vec![heal.at.index],
                explanation: format!(
                    "no write was accepted within {window_ms} ms of the final heal at index {} (t={}); the history ends at t={}",
                    heal.at.index,
                    fmt_ns(from),
                    fmt_ns(last_ns)
                ),
            })
        })
        .collect()
}
