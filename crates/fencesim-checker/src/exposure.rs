//! The unsafe-exposure metric: how often a write reached the resource after the lease it was
//! written under had ended, and how often the fence caught it. Not a violation by itself: in a
//! fenced design these writes are expected and rejected.

use fencesim_history::{Entry, EventKind};

use crate::Records;
use serde::{Deserialize, Serialize};

use crate::leases::Leases;

/// Writes processed by the resource after their lease had ended (by the service's events).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnsafeExposure {
    /// Writes the resource processed after their lease ended.
    pub writes_after_lease_end: u64,
    /// Of those, how many the resource accepted (each one unsafe).
    pub accepted: u64,
    /// Of those, how many the resource rejected (the fence at work).
    pub rejected: u64,
    /// Writes whose client sent them (invoke) after their lease had already ended.
    pub sent_after_lease_end: u64,
    /// True when the history has no lease events to measure against (Redlock: the clients
    /// decide, no service grants), so the counts above say nothing. Left out when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unmeasured: bool,
}

pub(crate) fn measure(history: &Records, leases: &Leases) -> UnsafeExposure {
    let mut m = UnsafeExposure {
        unmeasured: leases.is_empty(),
        ..UnsafeExposure::default()
    };
    let writes = history
        .events()
        .filter(|e| matches!(e.event, EventKind::Accept | EventKind::Reject));
    for ev in writes {
        let Some(lease) = ev
            .holder
            .as_deref()
            .zip(ev.token)
            .and_then(|(h, t)| leases.for_write(h, t))
        else {
            continue;
        };
        let Some((_, ended_ns)) = lease.ended_at else {
            continue;
        };
        if ev.at.time_ns < ended_ns {
            continue;
        }
        m.writes_after_lease_end += 1;
        if ev.event == EventKind::Accept {
            m.accepted += 1;
        } else {
            m.rejected += 1;
        }
        let invoked_ns = ev
            .op
            .and_then(|i| history.entries.get(i as usize))
            .map(|e| match e {
                Entry::Op(op) => op.at.time_ns,
                Entry::Event(ev) => ev.at.time_ns,
            });
        if invoked_ns.is_some_and(|t| t >= ended_ns) {
            m.sent_after_lease_end += 1;
        }
    }
    m
}
