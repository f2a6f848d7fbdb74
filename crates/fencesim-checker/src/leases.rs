//! Lease intervals as the lock service recorded them: from a grant to the expire, release or
//! revoke of the same lock, holder and token, in true time.

use std::collections::BTreeMap;

use fencesim_history::EventKind;

use crate::Records;

/// One lease as the service's events describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LeaseInterval<'h> {
    pub lock: &'h str,
    pub holder: &'h str,
    pub token: u64,
    /// Index and true time of the grant event.
    pub granted_at: (u64, u64),
    /// Index and true time of the event that ended it, if one did.
    pub ended_at: Option<(u64, u64)>,
}

/// Every lease, keyed by (token, holder, lock); a holder may hold the same token on two locks.
/// The token comes first in every key here: it almost always tells leases apart on its own,
/// and comparing numbers costs far less than comparing names (this runs on every seed).
#[derive(Debug, Default)]
pub(crate) struct Leases<'h> {
    by_lease: BTreeMap<(u64, &'h str, &'h str), LeaseInterval<'h>>,
    /// (token, holder) to the lock of its latest grant, for [`Leases::for_write`].
    by_writer: BTreeMap<(u64, &'h str), &'h str>,
}

impl<'h> Leases<'h> {
    /// Every lease, in (token, holder, lock) order.
    pub fn iter(&self) -> impl Iterator<Item = &LeaseInterval<'h>> {
        self.by_lease.values()
    }

    /// Whether the history showed no lease at all.
    pub fn is_empty(&self) -> bool {
        self.by_lease.is_empty()
    }

    /// The lease a write by `holder` with `token` was made under, as a resource event (which
    /// does not know the lock) can find it: the one granted last, if several match.
    pub fn for_write(&self, holder: &'h str, token: u64) -> Option<&LeaseInterval<'h>> {
        let lock = self.by_writer.get(&(token, holder))?;
        self.by_lease.get(&(token, holder, *lock))
    }
}

pub(crate) fn lease_intervals<'h>(history: &Records<'h>) -> Leases<'h> {
    let mut leases = Leases::default();
    // Per (lock, token), the holder it was granted to last: what an end without a holder ends.
    let mut granted_to: BTreeMap<(u64, &str), &str> = BTreeMap::new();
    for ev in history.events() {
        let lease_event = ev.event.is_lease_change();
        let (Some(lock), Some(token), true) = (ev.lock.as_deref(), ev.token, lease_event) else {
            continue;
        };
        let at = (ev.at.index, ev.at.time_ns);
        if ev.event == EventKind::Grant {
            let holder = ev.holder.as_deref().unwrap_or_default();
            granted_to.insert((token, lock), holder);
            let lease = LeaseInterval {
                lock,
                holder,
                token,
                granted_at: at,
                ended_at: None,
            };
            leases.by_writer.insert((token, holder), lock);
            leases.by_lease.insert((token, holder, lock), lease);
            continue;
        }
        // The event's holder names the lease; when a token was handed out twice (after a
        // failover or restore), (lock, token) alone could end the wrong one.
        let holder = ev
            .holder
            .as_deref()
            .or_else(|| granted_to.get(&(token, lock)).copied())
            .unwrap_or_default();
        if let Some(lease) = leases
            .by_lease
            .get_mut(&(token, holder, lock))
            .filter(|l| l.ended_at.is_none())
        {
            lease.ended_at = Some(at);
        }
    }
    leases
}
