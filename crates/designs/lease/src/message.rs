//! What the clients of a lease service (single, primary-backup or Raft) and its nodes say to
//! each other.

use fencesim_design::{DesignMessage, MessageKind};

use crate::primary_backup::Shipment;
use crate::raft_replica::RaftMessage;
use crate::{AcquireOutcome, ReleaseOutcome, RenewOutcome};

/// Which acquire attempt of which client start an acquire is: a queued grant names it, so a
/// client never takes an answer meant for an earlier attempt with the same queue token (a
/// service that lost its counter hands the same token out again).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Attempt {
    /// The client's start (1, then one more after each restart).
    pub incarnation: u64,
    /// The attempt's number within that start, from 1.
    pub number: u64,
}

/// A lease request, a lease service's answer, a redirect, or replication between the nodes of
/// primary-backup.
#[derive(Clone, Debug, PartialEq)]
pub enum LeaseMessage {
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
    /// Primary-backup: the primary's whole table, shipped to the backup; also its heartbeat.
    Replicate {
        /// The shipment's number from its primary (echoed by the acknowledgement).
        seq: u64,
        /// The table and the primary's epoch.
        shipment: Shipment,
    },
    /// The backup adopted shipment `seq`.
    ReplicateAck {
        /// The shipment's number.
        seq: u64,
    },
    /// Between Raft replicas (raft-rs's message).
    Raft(Box<RaftMessage>),
}

impl DesignMessage for LeaseMessage {
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
            LeaseMessage::Replicate { .. } | LeaseMessage::ReplicateAck { .. } => {
                MessageKind::Replicate
            }
            LeaseMessage::Raft(_) => MessageKind::Raft,
        }
    }
}
