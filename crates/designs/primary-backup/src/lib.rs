//! The primary-backup lease service (`kind = "primary-backup"`, case K06): a primary that
//! ships its whole lease table to a backup, which promotes itself when the primary falls silent
//! (the shape of Redis with Sentinel, or of a lock table on a database with a standby). What the
//! primary had not shipped when it fell silent is lost, its token counter's increments
//! included, so a promoted backup can grant a lock that is held, with a token already used.
//!
//! [`PrimaryBackupDesign`] is the design; [`replica`] the sans-IO replica; the replicas' own
//! messages travel as [`PrimaryBackupMessage`], the peer part of the lease messages every
//! lease-table service shares.
#![deny(missing_docs)]

mod node;
pub mod replica;
mod spec;

use fencesim_design::MessageKind;
use fencesim_lease::PeerMessage;

pub use node::{PrimaryBackupNode, PrimaryBackupNodeConfig};
pub use spec::PrimaryBackupDesign;

/// What the primary and the backup say to each other. A `hold` fault names both `replicate`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrimaryBackupMessage {
    /// The primary's whole table, shipped to the backup; also its heartbeat.
    Replicate {
        /// The shipment's number from its primary (echoed by the acknowledgement).
        seq: u64,
        /// The table and the primary's epoch.
        shipment: replica::Shipment,
    },
    /// The backup adopted shipment `seq`.
    ReplicateAck {
        /// The shipment's number.
        seq: u64,
    },
}

impl PeerMessage for PrimaryBackupMessage {
    fn kind(&self) -> MessageKind {
        MessageKind::Replicate
    }
}
