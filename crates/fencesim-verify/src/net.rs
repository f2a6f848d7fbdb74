//! The messages in flight between the explored configuration's agents. Nothing here decides
//! when one arrives: any message in flight may be delivered next, lost or duplicated, and the
//! search tries each.

use std::any::Any;
use std::fmt::Debug;
use std::ops::Index;
use std::sync::Arc;

use fencesim_design::{ReadValue, WriteOutcome};

/// Who sends and receives: a lock-service node, a client (by index in the scenario), or the
/// resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Agent {
    /// Lock-service node `i` (the scenario's `[lock_service]` order).
    Node(usize),
    /// Client `i` (the scenario's `[[clients]]` order).
    Client(usize),
    /// The fenced resource.
    Resource,
}

/// What a message carries: a design's message, from a node (`NM`) or a client (`CM`), or one
/// of the harness's own to and from the resource.
#[derive(Clone, Debug)]
pub enum Body<NM, CM> {
    /// A lock-service node's message.
    FromNode(NM),
    /// A client protocol's message.
    FromClient(CM),
    /// A client reads `key`.
    Read {
        /// The key.
        key: String,
    },
    /// A client writes `value` to `key` with `token`.
    Write {
        /// The key.
        key: String,
        /// The fencing token presented.
        token: u64,
        /// The value.
        value: String,
    },
    /// A client deletes `key` (with `token`, or around the fence without one).
    Delete {
        /// The key.
        key: String,
        /// The fencing token presented, if any.
        token: Option<u64>,
    },
    /// The resource's answer to a read.
    ReadReply(ReadValue),
    /// The resource's answer to a write or delete.
    WriteReply(WriteOutcome),
}

impl<NM: 'static, CM: 'static> Body<NM, CM> {
    /// The design's message as the type `T` its receiver reads (`None`: a harness message,
    /// or another type, which the receiver drops as the simulator's boxes do).
    pub fn design<T: 'static>(self) -> Option<T> {
        let any: Box<dyn Any> = match self {
            Body::FromNode(m) => Box::new(m),
            Body::FromClient(m) => Box::new(m),
            _ => return None,
        };
        any.downcast::<T>().ok().map(|m| *m)
    }
}

/// One message in flight.
#[derive(Clone, Debug)]
pub struct Message<NM, CM> {
    /// Its id: the sender's own count of its sends, above the sender's number, so that the
    /// same sends get the same ids whatever the other agents did in between.
    pub id: u64,
    /// Who sent it.
    pub from: Agent,
    /// To whom.
    pub to: Agent,
    /// The message it answers, if it is a reply.
    pub reply_to: Option<u64>,
    /// The client operation it belongs to (the operation's key: see `record.rs`).
    pub op: Option<u64>,
    /// What it carries.
    pub body: Body<NM, CM>,
    /// What it is, in a word (`acquire`, `write`, `reply`), for a counterexample's steps.
    pub kind: &'static str,
}

/// The messages in flight, in the order sent. Each is shared by the states that have it in
/// flight, and fingerprinted once, when it is sent: a state's fingerprint takes every message
/// in flight, and a state's successors inherit most of them.
pub struct InFlight<NM, CM> {
    messages: Vec<(u64, Arc<Message<NM, CM>>)>,
}

impl<NM, CM> Clone for InFlight<NM, CM> {
    fn clone(&self) -> Self {
        InFlight {
            messages: self.messages.clone(),
        }
    }
}

impl<NM, CM> Default for InFlight<NM, CM> {
    fn default() -> Self {
        InFlight {
            messages: Vec::new(),
        }
    }
}

impl<NM: Clone + Debug, CM: Clone + Debug> InFlight<NM, CM> {
    /// Send `message`.
    pub fn push(&mut self, message: Message<NM, CM>) {
        let m = &message;
        let fp = crate::fingerprint::of_debug(&(m.id, m.from, m.to, m.reply_to, m.op, &m.body));
        self.messages.push((fp, Arc::new(message)));
    }

    /// Take out the message at `i` (a delivery or a loss).
    pub fn remove(&mut self, i: usize) -> Message<NM, CM> {
        Arc::unwrap_or_clone(self.messages.remove(i).1)
    }

    /// A second copy of the message at `i`, in flight after the others.
    pub fn duplicate(&mut self, i: usize) {
        let copy = self.messages[i].clone();
        self.messages.push(copy);
    }

    /// Keep only the messages `keep` answers true for.
    pub fn retain(&mut self, mut keep: impl FnMut(&Message<NM, CM>) -> bool) {
        self.messages.retain(|(_, m)| keep(m));
    }

    /// The messages, in the order sent.
    pub fn iter(&self) -> impl Iterator<Item = &Message<NM, CM>> {
        self.messages.iter().map(|(_, m)| &**m)
    }

    /// Each message's fingerprint, in the order sent.
    pub fn fingerprints(&self) -> impl Iterator<Item = u64> + '_ {
        self.messages.iter().map(|(fp, _)| *fp)
    }
}

impl<NM, CM> Index<usize> for InFlight<NM, CM> {
    type Output = Message<NM, CM>;

    fn index(&self, i: usize) -> &Message<NM, CM> {
        &self.messages[i].1
    }
}

/// The first id of `agent`'s sends; `count` more follow.
pub fn message_id(agent: Agent, count: u64) -> u64 {
    let base = match agent {
        Agent::Node(i) => i as u64 + 1,
        Agent::Client(i) => 1_000 + i as u64,
        Agent::Resource => 2_000,
    };
    (base << 32) | count
}
