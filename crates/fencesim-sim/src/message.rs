//! What nodes say to each other.

use fencesim_lease::primary_backup::Shipment;
use fencesim_lease::raft_replica::RaftMessage;
use fencesim_lease::{AcquireOutcome, ReleaseOutcome, RenewOutcome};
use fencesim_resource::{ReadValue, WriteOutcome};
use fencesim_scenario::MessageKind;

use crate::design_body::DesignBody;

/// A message body. Requests go from clients to the lease service or the resource; each reply
/// carries the outcome of the sans-IO state machine unchanged.
#[derive(Clone, Debug)]
pub enum Message {
    /// Ask for a lease on `lock` for `ttl_ms`.
    Acquire {
        /// The lock.
        lock: String,
        /// Requested TTL, ms (the service caps it).
        ttl_ms: u64,
    },
    /// The lease service's answer.
    AcquireReply(AcquireOutcome),
    /// From the nemesis's maintenance job to the lease service: `holder` is deregistered
    /// (case K16); the service's `reaper` knob says what becomes of its leases. No reply.
    Deregister {
        /// The deregistered client.
        holder: String,
    },
    /// The lock service's second answer to a queued acquire (`acquire = "queue"`): the grant,
    /// or the refusal of a waiter whose lease lapsed. Not a reply (the `Queued` reply was), so
    /// it carries the queue entry's token and, in the envelope, the waiter's operation.
    QueueAnswer {
        /// The queue entry's token.
        entry: u64,
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
    /// The lease service's answer.
    RenewReply(RenewOutcome),
    /// Give back the lease with `token`.
    Release {
        /// The lock.
        lock: String,
        /// The lease's token.
        token: u64,
    },
    /// The lease service's answer.
    ReleaseReply(ReleaseOutcome),
    /// Read `key`.
    Read {
        /// The key.
        key: String,
    },
    /// The resource's answer.
    ReadReply(ReadValue),
    /// Write `value` to `key` under `token`.
    Write {
        /// The key.
        key: String,
        /// The fencing token.
        token: u64,
        /// The value.
        value: String,
    },
    /// The resource's answer.
    WriteReply(WriteOutcome),
    /// Between Raft replicas.
    Raft(Box<RaftMessage>),
    /// A Raft follower's answer to a client request: ask `leader` (if known) instead.
    Redirect {
        /// The leader's node name, if the follower knows it.
        leader: Option<String>,
    },
    /// Primary-backup: the primary's whole table, shipped to the backup; also its heartbeat.
    Replicate(Shipment),
    /// The backup has the table of a [`Message::Replicate`].
    ReplicateAck,
    /// A message of a design on the design API (`fencesim-design`), carried unchanged.
    Design(DesignBody),
    /// A local signal, never sent over the network: the node's clock was changed by a fault,
    /// so timers computed from it must be recomputed.
    ClockChanged,
}

impl Message {
    /// The kind, as `hold` faults name it.
    ///
    /// # Panics
    /// On a local signal ([`Message::ClockChanged`]), which never travels the network.
    pub fn kind(&self) -> MessageKind {
        match self {
            Message::Acquire { .. } => MessageKind::Acquire,
            Message::AcquireReply(_) | Message::QueueAnswer { .. } => MessageKind::AcquireReply,
            // A maintenance request: held or dropped like a release would be.
            Message::Deregister { .. } => MessageKind::Release,
            Message::Renew { .. } => MessageKind::Renew,
            Message::RenewReply(_) => MessageKind::RenewReply,
            Message::Release { .. } => MessageKind::Release,
            Message::ReleaseReply(_) => MessageKind::ReleaseReply,
            Message::Read { .. } => MessageKind::Read,
            Message::ReadReply(_) => MessageKind::ReadReply,
            Message::Write { .. } => MessageKind::Write,
            Message::WriteReply(_) => MessageKind::WriteReply,
            Message::Raft(_) => MessageKind::Raft,
            Message::Redirect { .. } => MessageKind::Redirect,
            Message::Replicate(_) | Message::ReplicateAck => MessageKind::Replicate,
            Message::Design(body) => body.kind(),
            Message::ClockChanged => panic!("a local signal has no network kind"),
        }
    }
}
