//! What a Redlock client and the Redis nodes say to each other: the Redis commands Redlock uses.

use fencesim_design::{DesignMessage, MessageKind};

/// A Redis command or its reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedlockMessage {
    /// `SET key value NX PX ttl_ms`: lock one node.
    Set {
        /// The lock's key.
        key: String,
        /// The acquisition's random value.
        value: u64,
        /// TTL, ms of the node's expiry clock.
        ttl_ms: u64,
    },
    /// Whether the key was set.
    SetReply(bool),
    /// Compare-and-extend (a Lua script in practice): reset the key's TTL if it still holds
    /// `value`.
    Extend {
        /// The lock's key.
        key: String,
        /// The holder's value.
        value: u64,
        /// New TTL, ms.
        ttl_ms: u64,
    },
    /// Whether the key was extended.
    ExtendReply(bool),
    /// Compare-and-delete: delete the key if it still holds `value`.
    Delete {
        /// The lock's key.
        key: String,
        /// The holder's value.
        value: u64,
    },
    /// Whether the key was deleted.
    DeleteReply(bool),
    /// `INCR counter`: a token from one node's counter.
    Incr {
        /// The counter's key.
        counter: String,
    },
    /// The counter's new value.
    IncrReply(u64),
}

impl DesignMessage for RedlockMessage {
    /// Redis commands travel as the lock operations they implement, so `hold` faults name them
    /// the same way for every design.
    fn kind(&self) -> MessageKind {
        match self {
            RedlockMessage::Set { .. } | RedlockMessage::Incr { .. } => MessageKind::Acquire,
            RedlockMessage::SetReply(_) | RedlockMessage::IncrReply(_) => MessageKind::AcquireReply,
            RedlockMessage::Extend { .. } => MessageKind::Renew,
            RedlockMessage::ExtendReply(_) => MessageKind::RenewReply,
            RedlockMessage::Delete { .. } => MessageKind::Release,
            RedlockMessage::DeleteReply(_) => MessageKind::ReleaseReply,
        }
    }
}
