//! Messages: the design's own types, and the kinds the harness's faults match.

use std::fmt::Debug;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The kind of a message in the transport: what `hold` faults and the targeted nemesis match
/// (`message = "renew"` holds every keepalive, whatever the design calls it).
///
/// A design's messages travel as the lock operations they implement: a Redis `SET NX` is an
/// `acquire`, a compare-and-swap that renews a lease record is a `renew`, and its answer a
/// `renew-reply`. Messages between replicas are `raft` or `replicate`. The harness's own
/// messages to the resource are `read`, `write` and their replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MessageKind {
    /// Client to lease service.
    Acquire,
    /// Lease service to client.
    AcquireReply,
    /// Client to lease service.
    Renew,
    /// Lease service to client.
    RenewReply,
    /// Client to lease service.
    Release,
    /// Lease service to client.
    ReleaseReply,
    /// Client to resource.
    Read,
    /// Resource to client.
    ReadReply,
    /// Client to resource.
    Write,
    /// Resource to client.
    WriteReply,
    /// Between Raft replicas.
    Raft,
    /// A Raft follower's or a backup's answer to a client: ask the leader instead.
    Redirect,
    /// Primary-backup: the primary's table shipped to the backup (also its heartbeat), and the
    /// backup's acknowledgement.
    Replicate,
}

impl MessageKind {
    /// Every kind name, for error messages.
    pub const NAMES: &'static str = "acquire, acquire-reply, renew, renew-reply, release, \
         release-reply, read, read-reply, write, write-reply, raft, redirect, replicate";

    /// The name used in scenario files and histories (`"acquire-reply"`).
    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::Acquire => "acquire",
            MessageKind::AcquireReply => "acquire-reply",
            MessageKind::Renew => "renew",
            MessageKind::RenewReply => "renew-reply",
            MessageKind::Release => "release",
            MessageKind::ReleaseReply => "release-reply",
            MessageKind::Read => "read",
            MessageKind::ReadReply => "read-reply",
            MessageKind::Write => "write",
            MessageKind::WriteReply => "write-reply",
            MessageKind::Raft => "raft",
            MessageKind::Redirect => "redirect",
            MessageKind::Replicate => "replicate",
        }
    }
}

/// A design's message type: one enum for everything its nodes and clients say to each other.
///
/// The harness carries it unchanged (cloning it where a fault duplicates or a client resends
/// it) and asks only its [`kind`](DesignMessage::kind).
pub trait DesignMessage: Clone + Debug + Send + Sync + 'static {
    /// The kind `hold` faults name it by.
    fn kind(&self) -> MessageKind;
}

/// A client's request, numbered by the harness in the order the client made them (from 1, per
/// client start). A reply comes back to [`ClientProtocol::on_reply`](crate::ClientProtocol)
/// under the id its request got from [`ClientCtx::request`](crate::ClientCtx::request).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

/// Where a message to a node came from: its sender, the transport's id for it, and the history
/// operation it serves. A node answers a request with [`NodeCtx::reply`](crate::NodeCtx::reply)
/// given this origin, and names [`Origin::op`] in the events it records for it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Origin {
    /// Shared, not copied: a node answers every request with its origin.
    from: Arc<str>,
    id: u64,
    op: Option<u64>,
}

impl Origin {
    /// An origin: sender `from`, transport id `id`, history operation `op` (the history index
    /// of the invoke the message serves, if any). Made by the harness, or by a test driver.
    pub fn new(from: impl Into<Arc<str>>, id: u64, op: Option<u64>) -> Self {
        Origin {
            from: from.into(),
            id,
            op,
        }
    }

    /// The sender's node name.
    pub fn from(&self) -> &str {
        &self.from
    }

    /// The transport's id of the message (a reply names it).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The history index of the invoke this message serves, if any: record it as the `op` of
    /// the events it causes, so a report can say which request a grant answered.
    pub fn op(&self) -> Option<u64> {
        self.op
    }
}
