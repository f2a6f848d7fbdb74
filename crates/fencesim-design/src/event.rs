//! The ground truth a lock service records: what it decided, and when.

/// What a lock-service node decided about a lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServiceEventKind {
    /// A lease was granted to `holder` with fencing token `token`.
    Grant,
    /// The holder's lease was renewed (a keepalive took effect).
    Renew,
    /// The holder gave the lease back.
    Release,
    /// The service let the lease lapse at the end of its TTL.
    Expire,
    /// The service ended the lease before its TTL: taken over, deregistered, or fenced off.
    Revoke,
}

/// One decision, as the history's service events carry it. The harness stamps it with the
/// node's name and clocks when it applies the effect, in the order the effects were pushed;
/// the checkers (lease exclusion, token order, stale writes) read these events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceEvent {
    /// What was decided.
    pub kind: ServiceEventKind,
    /// The lock.
    pub lock: String,
    /// The lease's holder.
    pub holder: String,
    /// The lease's fencing token (strictly increasing per lock in a correct design: Chubby's
    /// sequencers, etcd's revisions, the version of a lease record).
    pub token: u64,
    /// When the lease expires, ms of the clock the service judges expiry by (grant, renew);
    /// `None` where the service keeps no expiry (the candidates judge it).
    pub expires_at_ms: Option<i64>,
    /// Free text for a report (`"taken over by c2"`).
    pub detail: Option<String>,
    /// The history index of the invoke this decision answers ([`Origin::op`](crate::Origin::op)).
    pub op: Option<u64>,
    /// The replicated log entry whose application this is, in a design whose every replica
    /// applies every entry (Raft): the harness records an entry's events once, from the first
    /// replica to apply it, and passes their safepoints there only. `None`: a decision of this
    /// node alone.
    pub log_index: Option<u64>,
}

impl ServiceEvent {
    /// An event of `kind` for `holder`'s lease on `lock` with `token`, answering `op`; no
    /// expiry and no detail (set the fields to add them).
    pub fn new(
        kind: ServiceEventKind,
        lock: impl Into<String>,
        holder: impl Into<String>,
        token: u64,
        op: Option<u64>,
    ) -> Self {
        ServiceEvent {
            kind,
            lock: lock.into(),
            holder: holder.into(),
            token,
            expires_at_ms: None,
            detail: None,
            op,
            log_index: None,
        }
    }
}

/// A lease as a lock service honours it: which lock, whose, and its fencing token.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HeldLease {
    /// The lock.
    pub lock: String,
    /// The holder.
    pub holder: String,
    /// The fencing token.
    pub token: u64,
}
