//! What the candidates and the store say to each other.

use fencesim_design::{DesignMessage, MessageKind};

use crate::store::{CasOutcome, LeaseRecord, Versioned};

/// What a swap is for: it travels as that lock operation, so `hold` faults name it so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// A takeover of a free or expired record.
    Acquire,
    /// The holder swapping in its own record again.
    Renew,
    /// The holder clearing its record.
    Release,
}

/// A message of the lease-record design.
#[derive(Clone, Debug, PartialEq)]
pub enum RecordMessage {
    /// Read `lock`'s record.
    Get {
        /// The lock.
        lock: String,
    },
    /// The record as the store has it.
    GetReply(Versioned),
    /// Swap `lock`'s record if it is still at `expected_version`.
    Cas {
        /// The lock.
        lock: String,
        /// The version the client read (`None`: write whatever the version, an unconditional
        /// update: the K21 defect).
        expected_version: Option<u64>,
        /// The new record (`None`: release).
        record: Option<LeaseRecord>,
        /// What the swap is for.
        purpose: Purpose,
    },
    /// The store's answer to a swap.
    CasReply {
        /// Swapped or not.
        outcome: CasOutcome,
        /// The request's purpose (the reply is its `-reply` kind).
        purpose: Purpose,
    },
}

impl DesignMessage for RecordMessage {
    fn kind(&self) -> MessageKind {
        match self {
            RecordMessage::Get { .. } => MessageKind::Acquire,
            RecordMessage::GetReply(_) => MessageKind::AcquireReply,
            RecordMessage::Cas { purpose, .. } => match purpose {
                Purpose::Acquire => MessageKind::Acquire,
                Purpose::Renew => MessageKind::Renew,
                Purpose::Release => MessageKind::Release,
            },
            RecordMessage::CasReply { purpose, .. } => match purpose {
                Purpose::Acquire => MessageKind::AcquireReply,
                Purpose::Renew => MessageKind::RenewReply,
                Purpose::Release => MessageKind::ReleaseReply,
            },
        }
    }
}
