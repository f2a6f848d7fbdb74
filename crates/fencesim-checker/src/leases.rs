//! Lease intervals as the lock service recorded them: from a grant to the expire, release or
//! revoke of the same lock and token, in true time.

use std::collections::BTreeMap;

use fencesim_history::{EventKind, History};

/// One lease as the service's events describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LeaseInterval {
    pub lock: String,
    pub holder: String,
    pub token: u64,
    /// Index and true time of the grant event.
    pub granted_at: (u64, u64),
    /// Index and true time of the event that ended it, if one did.
    pub ended_at: Option<(u64, u64)>,
}

/// Lease intervals keyed by (holder, token): how a resource event (which knows the writer and
/// its token, not the lock) finds the lease it was written under.
pub(crate) type Leases = BTreeMap<(String, u64), LeaseInterval>;

pub(crate) fn lease_intervals(history: &History) -> Leases {
    let mut leases: Leases = BTreeMap::new();
    let mut by_lock_token: BTreeMap<(String, u64), (String, u64)> = BTreeMap::new();
    for ev in history.events() {
        let (Some(lock), Some(token)) = (&ev.lock, ev.token) else {
            continue;
        };
        let at = (ev.at.index, ev.at.time_ns);
        match ev.event {
            EventKind::Grant => {
                let holder = ev.holder.clone().unwrap_or_default();
                by_lock_token.insert((lock.clone(), token), (holder.clone(), token));
                leases.insert(
                    (holder.clone(), token),
                    LeaseInterval {
                        lock: lock.clone(),
                        holder,
                        token,
                        granted_at: at,
                        ended_at: None,
                    },
                );
            }
            EventKind::Expire | EventKind::Release | EventKind::Revoke => {
                // The event's holder names the lease; when a token was handed out twice (after
                // a failover or restore), (lock, token) alone would end the wrong one.
                let open = |k: &(String, u64)| {
                    leases
                        .get(k)
                        .is_some_and(|l| &l.lock == lock && l.ended_at.is_none())
                };
                let key = ev
                    .holder
                    .clone()
                    .map(|h| (h, token))
                    .filter(open)
                    .or_else(|| by_lock_token.get(&(lock.clone(), token)).cloned());
                if let Some(lease) = key
                    .and_then(|k| leases.get_mut(&k))
                    .filter(|l| l.ended_at.is_none())
                {
                    lease.ended_at = Some(at);
                }
            }
            _ => {}
        }
    }
    leases
}
