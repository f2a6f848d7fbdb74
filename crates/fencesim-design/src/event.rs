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
    /// The TTL this grant or renewal promises its holder, ms: from this decision on, the lease
    /// is the holder's for that long in true time unless it is released or revoked. The
    /// checker holds the service to it: an `Expire` before it has passed in true time, while
    /// the holder still counts on the lease, is `lease-ended-early`, with the service to blame
    /// (a wall clock that jumped forward, Kleppmann 2016). `None`: no promise to judge.
    pub ttl_ms: Option<u64>,
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
            ttl_ms: None,
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

/// What a node of a quorum lock did with the lock's key: a lock spread over N independent
/// nodes (antirez's Redlock on N Redis nodes), each keeping the key for one holder at a time,
/// held by whoever holds live keys on a majority. Recorded only ([`NodeCtx::record_key`]):
/// the clients act on their replies, and the checker judges the lock's claim from these
/// (docs/checks.md: a node that drops a key before its TTL while its holder's majority counts
/// on it breaks the claim).
///
/// [`NodeCtx::record_key`]: crate::NodeCtx::record_key
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyEventKind {
    /// The key was set for a holder (`SET key value NX PX ttl`).
    Set,
    /// The holder's key was extended (its value matched).
    Extend,
    /// The holder's key was deleted at its request (its value matched).
    Delete,
    /// The key was found expired by the node's own expiry clock and dropped.
    Expire,
    /// A set, extend or delete was refused (another holder's key live, or the value did not
    /// match): `detail` says which.
    Refuse,
}

/// One record of a quorum lock's node about its key (see [`KeyEventKind`]). The harness
/// stamps it with the node's name and clocks, in the order the effects were pushed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyEvent {
    /// What happened to the key.
    pub kind: KeyEventKind,
    /// The lock (the key's name).
    pub lock: String,
    /// The client the key is or was for (set, extend, delete), or whose request was refused.
    pub holder: Option<String>,
    /// The key's value (Redlock's random value), the token by which the holder knows it;
    /// `None` for a refusal that names no value.
    pub value: Option<u64>,
    /// The key's time to live, ms (set, extend: Redis's PX).
    pub ttl_ms: Option<u64>,
    /// When the key expires, ms of the node's expiry clock (set, extend).
    pub expires_at_ms: Option<i64>,
    /// How many nodes the lock's keys are spread over (set).
    pub nodes: Option<u32>,
    /// Free text for a report (`"held by client-1"`).
    pub detail: Option<String>,
}

impl KeyEvent {
    /// A record of `kind` on `lock` with every optional field empty, to fill with
    /// struct-update syntax.
    pub fn new(kind: KeyEventKind, lock: impl Into<String>) -> Self {
        KeyEvent {
            kind,
            lock: lock.into(),
            holder: None,
            value: None,
            ttl_ms: None,
            expires_at_ms: None,
            nodes: None,
            detail: None,
        }
    }
}
