//! `lease-ended-early` on a lease service: the service expired a lease before the TTL its grant
//! or last renewal promised (the `ttl_ms` of that `grant` or `renew`) had passed in true time,
//! while the holder still counted on the lease. The clients' overlap that follows is reported
//! as `mutual-exclusion-client`; this check names the service's part in it, and the fault on
//! the service that explains it (a wall clock that jumped forward, Kleppmann 2016's argument
//! against timing assumptions in a lock service; case K03).
//!
//! The same judgement as a quorum lock's keys get (`quorum.rs`): true times and history order
//! only, a grain of one clock tick, and only while the holder's belief from the round that
//! made the promise was open (a lease that ends early by less than the client's allowance for
//! drift ends after the holder stopped counting on it, and harms nobody).

use std::collections::BTreeMap;

use fencesim_history::{Event, EventKind, History, ViolationKind};

use crate::exclusion::belief_intervals;
use crate::quorum::{cause, counted_on, faults_on, CLOCK_GRAIN_NS};
use crate::stale_write::fmt_ns;
use crate::{Records, Violation};

/// An `expire` that came before its lease's promised TTL ran out in true time.
pub(crate) struct EarlyExpiry<'h> {
    /// The `expire`.
    pub expire: &'h Event,
    /// The `grant` or `renew` whose promise it broke.
    pub promise: &'h Event,
    /// The TTL promised, ms.
    pub ttl_ms: u64,
    /// When the promise ran out, true ns.
    pub due_ns: u64,
}

impl EarlyExpiry<'_> {
    /// How early, ns.
    pub fn early_ns(&self) -> u64 {
        self.due_ns - self.expire.at.time_ns
    }
}

/// Every `expire` of `history` that came more than a clock tick before the TTL promised by its
/// lease's last `grant` or `renew` with a `ttl_ms`, in history order.
pub(crate) fn early_expiries(history: &History) -> Vec<EarlyExpiry<'_>> {
    // Per (lock, holder, token): the last promise, and its TTL.
    let mut promised: BTreeMap<(&str, &str, u64), (&Event, u64)> = BTreeMap::new();
    let mut out = Vec::new();
    for e in history.events() {
        let (Some(lock), Some(holder), Some(token)) =
            (e.lock.as_deref(), e.holder.as_deref(), e.token)
        else {
            continue;
        };
        let lease = (lock, holder, token);
        match e.event {
            EventKind::Grant | EventKind::Renew => match e.ttl_ms {
                Some(ttl_ms) => {
                    promised.insert(lease, (e, ttl_ms));
                }
                // A renewal that promises nothing judgeable leaves no promise to hold it to.
                None => {
                    promised.remove(&lease);
                }
            },
            EventKind::Expire => {
                let Some((promise, ttl_ms)) = promised.remove(&lease) else {
                    continue;
                };
                let due_ns = promise
                    .at
                    .time_ns
                    .saturating_add(ttl_ms.saturating_mul(1_000_000));
                if e.at.time_ns.saturating_add(CLOCK_GRAIN_NS) < due_ns {
                    out.push(EarlyExpiry {
                        expire: e,
                        promise,
                        ttl_ms,
                        due_ns,
                    });
                }
            }
            EventKind::Release | EventKind::Revoke => {
                promised.remove(&lease);
            }
            _ => {}
        }
    }
    out
}

/// The leases a service expired early while their holders counted on them.
pub(crate) fn check(history: &Records) -> Vec<Violation> {
    let early = early_expiries(history);
    if early.is_empty() {
        return Vec::new();
    }
    let beliefs = belief_intervals(history);
    let mut out = Vec::new();
    for x in early {
        let (expire, promise) = (x.expire, x.promise);
        let (lock, holder) = (
            expire.lock.as_deref().unwrap_or_default(),
            expire.holder.as_deref().unwrap_or_default(),
        );
        let at = expire.at.time_ns;
        let Some(since) = counted_on(history, &beliefs, holder, lock, at, promise.at.time_ns)
        else {
            continue;
        };
        let faults = faults_on(history, &expire.node, promise.at.index, expire.at.index);
        let mut witnesses = vec![expire.at.index, promise.at.index];
        witnesses.extend(faults.iter().map(|(f, _)| f.at.index));
        let token = expire.token.unwrap_or_default();
        let promised = if promise.event == EventKind::Grant {
            format!("granted {holder} token {token}")
        } else {
            format!("renewed {holder}'s lease (token {token})")
        };
        out.push(Violation {
            kind: ViolationKind::LeaseEndedEarly,
            witnesses,
            explanation: format!(
                "lock {lock:?}: {} {promised} at index {} (t={}) \
                 for {} ms, due until t={}, and expired it by its own clock at index {} \
                 (t={}), {} ms early, while {holder} still believed it held the lock (since \
                 index {since}){}",
                expire.node,
                promise.at.index,
                fmt_ns(promise.at.time_ns),
                x.ttl_ms,
                fmt_ns(x.due_ns),
                expire.at.index,
                fmt_ns(at),
                x.early_ns() / 1_000_000,
                cause(&faults, "the lease", "was granted"),
            ),
            chain: Vec::new(),
        });
    }
    out
}
