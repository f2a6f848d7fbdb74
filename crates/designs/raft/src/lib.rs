//! The Raft lease service (`kind = "raft"`): `lease-1` .. `lease-N` replicas of raft-rs (the
//! Rust port of etcd's Raft) around `fencesim-lease`'s replicated lease table, with a lessor on
//! the leader that revokes what its clock shows expired, as etcd's leases. The fencing token is
//! the log index of the grant (etcd's create revision); a new leader extends the leases it
//! inherits; a deposed leader learns of its demotion only at its next lessor check (case K08).
//!
//! [`RaftDesign`] is the design. The replicas' own messages travel as [`RaftPeer`], the peer
//! part of the lease messages every lease-table service shares.
#![deny(missing_docs)]

mod host;
mod node;
pub mod replica;
mod spec;

use fencesim_design::MessageKind;
use fencesim_lease::PeerMessage;

pub use host::{RaftCore, RaftLog, RaftTiming};
pub use node::{RaftNode, RaftNodeConfig};
pub use replica::{RaftMessage, Replica, ReplicaConfig, StateMachine};
pub use spec::{
    RaftDesign, RAFT_ELECTION_TICKS, RAFT_HEARTBEAT_TICKS, RAFT_LESSOR_CHECK_TICKS, RAFT_TICK_MS,
};

/// A raft-rs message between two replicas (boxed: it is several times larger than a lease
/// request). A `hold` fault names it `raft`.
#[derive(Clone, Debug, PartialEq)]
pub struct RaftPeer(pub Box<RaftMessage>);

impl RaftPeer {
    /// `message` as a lease message between the replicas of a Raft design (the Raft lease
    /// service's and the etcd design's).
    pub fn wrap(message: RaftMessage) -> fencesim_lease::LeaseMessage<RaftPeer> {
        fencesim_lease::LeaseMessage::Peer(RaftPeer(Box::new(message)))
    }
}

impl PeerMessage for RaftPeer {
    fn kind(&self) -> MessageKind {
        MessageKind::Raft
    }
}
