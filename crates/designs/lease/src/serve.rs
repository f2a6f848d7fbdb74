//! One client request to a lease table, as every lease service serves it (the single service
//! and a primary-backup primary): the decision, its reply, and the service event it records.
//! Refusals (held, lost, not the holder) are only in the reply; every change to the table is
//! an event.

use fencesim_design::{HeldLease, ServiceEvent, ServiceEventKind};

use crate::message::{LeaseMessage, NoPeers};
use crate::service::{AcquireOutcome, LeaseService, LeaseTable, ReleaseOutcome, RenewOutcome};

/// How the service's release works.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ReleaseMode {
    /// An atomic compare-and-delete on (holder, token): a release by anyone but the current
    /// holder changes nothing (the Redis documentation's Lua script, etcd's lease revoke).
    #[default]
    CompareAndDelete,
    /// DEFECT (K19): release deletes the lock whoever holds it, like a plain `DEL lock`: a
    /// client that wakes after its lease expired frees the next holder's lock.
    Unconditional,
}

/// What serving one request did.
#[derive(Clone, Debug, PartialEq)]
pub struct Served<P = NoPeers> {
    /// The answer to send back.
    pub reply: LeaseMessage<P>,
    /// The change to the table, if there was one.
    pub event: Option<ServiceEvent>,
}

/// Serve `request` from client `holder` (answering history operation `op`) at `now_ms` on the
/// service's expiry clock. `None` if `request` is not a request (a reply, a redirect).
pub fn serve<P>(
    service: &mut LeaseService,
    request: &LeaseMessage<P>,
    holder: &str,
    op: Option<u64>,
    now_ms: i64,
    release: ReleaseMode,
) -> Option<Served<P>> {
    // A grant or renewal promises its TTL from now, as the service counts it.
    let event = |kind, lock: &str, token, expires_at_ms: Option<i64>| {
        Some(ServiceEvent {
            expires_at_ms,
            ttl_ms: expires_at_ms.map(|at| u64::try_from(at - now_ms).unwrap_or_default()),
            ..ServiceEvent::new(kind, lock, holder, token, op)
        })
    };
    let served = match request {
        LeaseMessage::Acquire { lock, ttl_ms, .. } => {
            let outcome = service.acquire(lock, holder, *ttl_ms, now_ms);
            let event = match &outcome {
                AcquireOutcome::Granted {
                    token,
                    expires_at_ms,
                } => event(ServiceEventKind::Grant, lock, *token, Some(*expires_at_ms)),
                _ => None,
            };
            Served {
                reply: LeaseMessage::AcquireReply(outcome),
                event,
            }
        }
        LeaseMessage::Renew { lock, token } => {
            let outcome = service.renew(lock, holder, *token, now_ms);
            let event = match &outcome {
                RenewOutcome::Renewed { expires_at_ms } => {
                    event(ServiceEventKind::Renew, lock, *token, Some(*expires_at_ms))
                }
                RenewOutcome::Lost => None,
            };
            Served {
                reply: LeaseMessage::RenewReply(outcome),
                event,
            }
        }
        LeaseMessage::Release { lock, .. } if release == ReleaseMode::Unconditional => {
            // K19's plain DEL: whoever's lease it was ends, and the caller is told "OK" (a
            // delete of nothing changes nothing and records nothing).
            let ended = service.release_unconditional(lock);
            Served {
                reply: LeaseMessage::ReleaseReply(ReleaseOutcome::Released),
                event: ended.map(|lease| {
                    ServiceEvent::new(
                        ServiceEventKind::Release,
                        lock,
                        lease.holder,
                        lease.token,
                        op,
                    )
                }),
            }
        }
        LeaseMessage::Release { lock, token } => {
            let outcome = service.release(lock, holder, *token, now_ms);
            let event = match &outcome {
                ReleaseOutcome::Released => {
                    ServiceEvent::new(ServiceEventKind::Release, lock, holder, *token, op).into()
                }
                ReleaseOutcome::NotHolder => None,
            };
            Served {
                reply: LeaseMessage::ReleaseReply(outcome),
                event,
            }
        }
        // Not a request: a real server drops what it cannot parse.
        _ => return None,
    };
    Some(served)
}

/// Expire every lease of `service` due at `now_ms`: one `expire` event each, in lock order.
pub fn expire_due(service: &mut LeaseService, now_ms: i64) -> Vec<ServiceEvent> {
    service
        .expire_due(now_ms)
        .into_iter()
        .map(|expired| ServiceEvent {
            expires_at_ms: Some(expired.lease.expires_at_ms),
            ..ServiceEvent::new(
                ServiceEventKind::Expire,
                expired.lock,
                expired.lease.holder,
                expired.lease.token,
                None,
            )
        })
        .collect()
}

/// The leases `table` holds (expired ones not yet reaped included: a service starting from it
/// honours them until it reaps them).
pub fn held_leases(table: &LeaseTable) -> Vec<HeldLease> {
    table
        .iter()
        .filter_map(|(lock, record)| {
            let lease = record.lease.as_ref()?;
            Some(HeldLease {
                lock: lock.clone(),
                holder: lease.holder.clone(),
                token: lease.token,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::LeaseConfig;

    fn service() -> LeaseService {
        LeaseService::new(LeaseConfig { max_ttl_ms: 1_000 })
    }

    fn acquire(lock: &str) -> LeaseMessage {
        LeaseMessage::Acquire {
            lock: lock.into(),
            ttl_ms: 100,
            attempt: crate::Attempt {
                incarnation: 1,
                number: 1,
            },
        }
    }

    #[test]
    fn a_grant_is_an_event_and_a_refusal_only_a_reply() {
        let mut s = service();
        let mode = ReleaseMode::CompareAndDelete;
        let granted = serve(&mut s, &acquire("l"), "c1", Some(4), 10, mode).expect("a request");
        let event = granted.event.expect("a grant is recorded");
        assert_eq!(
            (
                event.kind,
                event.holder.as_str(),
                event.token,
                event.expires_at_ms,
                event.ttl_ms,
                event.op
            ),
            (
                ServiceEventKind::Grant,
                "c1",
                1,
                Some(110),
                Some(100),
                Some(4)
            )
        );
        let refused = serve(&mut s, &acquire("l"), "c2", None, 20, mode).expect("a request");
        assert_eq!(refused.event, None);
        assert!(matches!(
            refused.reply,
            LeaseMessage::AcquireReply(AcquireOutcome::Held { token: 1, .. })
        ));
        assert_eq!(held_leases(s.table()).len(), 1);
    }

    #[test]
    fn an_unconditional_release_ends_whoevers_lease_it_is() {
        let mut s = service();
        serve(
            &mut s,
            &acquire("l"),
            "c1",
            None,
            0,
            ReleaseMode::Unconditional,
        );
        let release: LeaseMessage = LeaseMessage::Release {
            lock: "l".into(),
            token: 99,
        };
        let cad = serve(
            &mut s,
            &release,
            "c2",
            None,
            1,
            ReleaseMode::CompareAndDelete,
        );
        assert_eq!(cad.and_then(|s| s.event), None, "not c2's lease");
        let del = serve(
            &mut s,
            &release,
            "c2",
            Some(7),
            1,
            ReleaseMode::Unconditional,
        )
        .and_then(|s| s.event)
        .expect("c1's lease ends");
        assert_eq!((del.holder.as_str(), del.token, del.op), ("c1", 1, Some(7)));
        let again = serve(&mut s, &release, "c2", None, 2, ReleaseMode::Unconditional);
        assert_eq!(again.and_then(|s| s.event), None, "nothing left to delete");
    }

    #[test]
    fn expiries_come_in_lock_order_with_their_deadlines() {
        let mut s = service();
        serve(&mut s, &acquire("b"), "c1", None, 0, ReleaseMode::default());
        serve(&mut s, &acquire("a"), "c2", None, 5, ReleaseMode::default());
        assert!(expire_due(&mut s, 99).is_empty());
        let expired: Vec<_> = expire_due(&mut s, 105)
            .into_iter()
            .map(|e| (e.lock, e.holder, e.expires_at_ms))
            .collect();
        assert_eq!(
            expired,
            [
                ("a".to_owned(), "c2".to_owned(), Some(105)),
                ("b".to_owned(), "c1".to_owned(), Some(100))
            ]
        );
    }
}
