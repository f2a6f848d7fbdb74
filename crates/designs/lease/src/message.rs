//! What the clients of a lease service (single, primary-backup or Raft) and its nodes say to
//! each other: the lease requests and answers every such service shares, and its nodes' own
//! messages to each other (a design's [`PeerMessage`]).

use std::fmt::Debug;

use fencesim_design::{DesignMessage, MessageKind};

use crate::{AcquireOutcome, ReleaseOutcome, RenewOutcome};

/// What the nodes of one lease service say to each other, beside the lease requests: Raft's
/// messages, a primary's shipments. Each design brings its own; a service of one node has none
/// ([`NoPeers`]).
pub trait PeerMessage: Clone + Debug + PartialEq + Send + Sync + 'static {
    /// The kind `hold` faults name it by (`raft`, `replicate`).
    fn kind(&self) -> MessageKind;
}

/// The peer messages of a service whose one node has no peers: there are none.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NoPeers {}

impl PeerMessage for NoPeers {
    fn kind(&self) -> MessageKind {
        match *self {}
    }
}

/// Which acquire attempt of which client start an acquire is: a queued grant names it, so a
/// client never takes an answer meant for an earlier attempt with the same queue token (a
/// service that lost its counter hands the same token out again).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Attempt {
    /// The client's start (1, then one more after each restart).
    pub incarnation: u64,
    /// The attempt's number within that start, from 1.
    pub number: u64,
}

/// A lease request, a lease service's answer, a redirect, or a message between the service's
/// own nodes (`P`: Raft's, or primary-backup's replication).
#[derive(Clone, Debug, PartialEq, Hash)]
pub enum LeaseMessage<P = NoPeers> {
    /// Ask for a lease on `lock` for `ttl_ms`.
    Acquire {
        /// The lock.
        lock: String,
        /// Requested TTL, ms (the service caps it).
        ttl_ms: u64,
        /// Which attempt this is (echoed by a queued answer).
        attempt: Attempt,
    },
    /// The service's answer.
    AcquireReply(AcquireOutcome),
    /// The service's second answer to a queued acquire (`acquire = "queue"`): the grant, or the
    /// refusal of a waiter whose lease lapsed. Not a reply (the `Queued` reply was), so it
    /// names the queue entry's token and the attempt it answers.
    QueueAnswer {
        /// The queue entry's token.
        entry: u64,
        /// The acquire attempt it answers.
        attempt: Attempt,
        /// `Granted` or `WaiterExpired`.
        outcome: AcquireOutcome,
    },
    /// Keepalive for the lease with `token`.
    Renew {
        /// The lock.
        lock: String,
        /// The lease's token.
        token: u64,
    },
    /// The service's answer.
    RenewReply(RenewOutcome),
    /// Give back the lease with `token`.
    Release {
        /// The lock.
        lock: String,
        /// The lease's token.
        token: u64,
    },
    /// The service's answer.
    ReleaseReply(ReleaseOutcome),
    /// A Raft follower's or a backup's answer to a request: ask `leader` (if known) instead.
    Redirect {
        /// The leader's node name, if the node knows it.
        leader: Option<String>,
    },
    /// Between the service's own nodes.
    Peer(P),
}

impl<P: PeerMessage> DesignMessage for LeaseMessage<P> {
    fn kind(&self) -> MessageKind {
        match self {
            LeaseMessage::Acquire { .. } => MessageKind::Acquire,
            LeaseMessage::AcquireReply(_) | LeaseMessage::QueueAnswer { .. } => {
                MessageKind::AcquireReply
            }
            LeaseMessage::Renew { .. } => MessageKind::Renew,
            LeaseMessage::RenewReply(_) => MessageKind::RenewReply,
            LeaseMessage::Release { .. } => MessageKind::Release,
            LeaseMessage::ReleaseReply(_) => MessageKind::ReleaseReply,
            LeaseMessage::Redirect { .. } => MessageKind::Redirect,
            LeaseMessage::Peer(peer) => peer.kind(),
        }
    }
}
