//! What ZooKeeper clients and the server say to each other: the few requests of ZooKeeper's
//! protocol the lock recipe uses, and their answers.

use fencesim::design::{DesignMessage, MessageKind};

/// A session id, given out by the server from its transaction counter, so that a restarted
/// server never gives out one it gave before (ZooKeeper derives them from the server id and
/// its start time).
pub type SessionId = u64;

/// A ZooKeeper request or answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZkMsg {
    /// Open a session for client `owner` that expires `timeout_ms` after the server last
    /// heard from it.
    CreateSession {
        /// The client's node name (the lease's holder in the history).
        owner: String,
        /// The session timeout, ms (the client's TTL).
        timeout_ms: u64,
    },
    /// `create("/<lock>/lock-", EPHEMERAL_SEQUENTIAL)`: a child of the lock's path that lives
    /// as long as the session. At most one per session and lock: a request the network
    /// duplicated or the client resent gets the child it already made (Curator's "protected"
    /// mode, which tags the name with a GUID for the same reason).
    Create {
        /// The session.
        session: SessionId,
        /// The lock's path.
        lock: String,
    },
    /// `getChildren("/<lock>")`: the children's sequence numbers.
    GetChildren {
        /// The session (any request keeps it alive).
        session: SessionId,
        /// The lock's path.
        lock: String,
    },
    /// `exists("/<lock>/lock-<seq>", watch = true)`: whether the child is there, and a
    /// one-shot watch that fires when it is deleted.
    Exists {
        /// The session.
        session: SessionId,
        /// The lock's path.
        lock: String,
        /// The child's sequence number.
        seq: u64,
    },
    /// A heartbeat: keeps the session alive.
    Ping {
        /// The session.
        session: SessionId,
    },
    /// Close the session: its ephemeral children are deleted.
    CloseSession {
        /// The session.
        session: SessionId,
    },
    /// The session is open.
    SessionCreated {
        /// Its id.
        session: SessionId,
    },
    /// The child was created (or already existed for this session).
    Created {
        /// Its sequence number.
        seq: u64,
        /// The transaction id that created it: the fencing token (`czxid`).
        czxid: u64,
    },
    /// The lock path's children, by sequence number, lowest first.
    Children {
        /// Sequence numbers.
        seqs: Vec<u64>,
    },
    /// Whether the asked-for child exists; if it does, a watch is now set on it.
    Stat {
        /// Whether it exists.
        exists: bool,
    },
    /// A watched child was deleted (sent unasked, to the request that set the watch).
    WatchFired {
        /// The lock's path.
        lock: String,
        /// The deleted child's sequence number.
        seq: u64,
    },
    /// The heartbeat was taken.
    Pong,
    /// The session is closed.
    Closed,
    /// The session named is unknown: it expired or was closed (`SESSIONEXPIRED`).
    NoSession {
        /// The kind of the request it answers, so that `hold` faults aimed at that request's
        /// answers match it too.
        answers: MessageKind,
    },
}

impl DesignMessage for ZkMsg {
    /// Requests travel as the lock operation they serve (everything the recipe sends to get
    /// the lock is an `acquire`, a heartbeat is a `renew`), and answers as that operation's
    /// reply.
    fn kind(&self) -> MessageKind {
        match self {
            ZkMsg::CreateSession { .. }
            | ZkMsg::Create { .. }
            | ZkMsg::GetChildren { .. }
            | ZkMsg::Exists { .. } => MessageKind::Acquire,
            ZkMsg::Ping { .. } => MessageKind::Renew,
            ZkMsg::CloseSession { .. } => MessageKind::Release,
            ZkMsg::SessionCreated { .. }
            | ZkMsg::Created { .. }
            | ZkMsg::Children { .. }
            | ZkMsg::Stat { .. }
            | ZkMsg::WatchFired { .. } => MessageKind::AcquireReply,
            ZkMsg::Pong => MessageKind::RenewReply,
            ZkMsg::Closed => MessageKind::ReleaseReply,
            ZkMsg::NoSession { answers } => *answers,
        }
    }
}

impl ZkMsg {
    /// The reply kind of a request's answers.
    pub fn reply_kind(&self) -> MessageKind {
        match self.kind() {
            MessageKind::Renew => MessageKind::RenewReply,
            MessageKind::Release => MessageKind::ReleaseReply,
            _ => MessageKind::AcquireReply,
        }
    }
}
