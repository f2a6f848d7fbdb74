//! What nodes say to each other.

use fencesim_design::{ReadValue, WriteOutcome};
use fencesim_scenario::MessageKind;

use crate::design_body::DesignBody;

/// A message body. Requests go from clients to the lease service or the resource; each reply
/// carries the outcome of the sans-IO state machine unchanged.
#[derive(Clone, Debug)]
pub enum Message {
    /// From the nemesis's maintenance job to the lease service: `holder` is deregistered
    /// (case K16); the service's `reaper` knob says what becomes of its leases. No reply.
    Deregister {
        /// The deregistered client.
        holder: String,
    },
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
    /// The resource's answer (to a write or a delete).
    WriteReply(WriteOutcome),
    /// Delete `key`, under `token` or (a cleanup that goes around the fence) none. It travels
    /// as a `write`: a mutation of the resource, held by the same faults.
    Delete {
        /// The key.
        key: String,
        /// The fencing token, if the cleanup presents one.
        token: Option<u64>,
    },
    /// A message of a design on the design API (`fencesim-design`), carried unchanged.
    Design(DesignBody),
    /// A local signal, never sent over the network: the node's clock was changed by a fault,
    /// so timers computed from it must be recomputed.
    ClockChanged,
}

impl Message {
    /// A design's own message, as the transport carries it.
    pub fn design<M: fencesim_design::DesignMessage>(msg: M) -> Self {
        Message::Design(DesignBody::new(msg))
    }

    /// The kind, as `hold` faults name it.
    ///
    /// # Panics
    /// On a local signal ([`Message::ClockChanged`]), which never travels the network.
    pub fn kind(&self) -> MessageKind {
        match self {
            // A maintenance request: held or dropped like a release would be.
            Message::Deregister { .. } => MessageKind::Release,
            Message::Read { .. } => MessageKind::Read,
            Message::ReadReply(_) => MessageKind::ReadReply,
            Message::Write { .. } | Message::Delete { .. } => MessageKind::Write,
            Message::WriteReply(_) => MessageKind::WriteReply,
            Message::Design(body) => body.kind(),
            Message::ClockChanged => panic!("a local signal has no network kind"),
        }
    }
}
