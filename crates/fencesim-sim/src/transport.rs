//! The project's own transport: envelopes with request ids, delivered by the network.
//!
//! madsim's network has one latency range and cannot hold a chosen message, so messages travel
//! here instead. A message's delay is spent in a task on the `network` node, which no fault
//! pauses: a sender that freezes or crashes after sending does not delay what it sent. A paused
//! receiver's messages wait in its mailbox until it runs again. Requests and replies are matched
//! by request id with explicit timeouts on the client side (not madsim's `call_timeout`, whose
//! late replies pile up in the endpoint's mailbox).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_channel::{Receiver, Sender};
use fencesim_history::{Event, EventKind, Phase};
use fencesim_scenario::{LatencyRange, MessageKind};
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::clock::Clocks;
use crate::message::Message;
use crate::recorder::Recorder;

/// Name of the helper node that carries messages.
pub const NETWORK_NODE: &str = "network";
/// Node name under which nemesis events are recorded.
pub const NEMESIS_NODE: &str = "nemesis";

/// A message in transit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// Sender node.
    pub src: String,
    /// Receiver node.
    pub dst: String,
    /// Unique per run, in send order.
    pub id: u64,
    /// For a reply: the id of the request it answers.
    pub reply_to: Option<u64>,
    /// The history index of the client invoke this message belongs to, if any.
    pub op: Option<u64>,
    /// The payload.
    pub body: Message,
}

/// "Keep the `nth` message of kind `kind` sent by `from` for `duration_ms`" (a `hold` fault).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HoldRule {
    /// Sender node.
    pub from: String,
    /// Message kind.
    pub kind: MessageKind,
    /// 1-based count among that sender's messages of that kind.
    pub nth: u64,
    /// Time in the network instead of the drawn latency, simulated ms.
    pub duration_ms: u64,
}

struct NetState {
    rng: Xoshiro256PlusPlus,
    latency: LatencyRange,
    holds: Vec<HoldRule>,
    sent: BTreeMap<(String, MessageKind), u64>,
    next_id: u64,
    in_flight: u64,
}

/// The simulated network.
pub struct Network {
    state: Mutex<NetState>,
    mailboxes: BTreeMap<String, Sender<Envelope>>,
    carrier: madsim::runtime::NodeHandle,
    recorder: Arc<Recorder>,
    clocks: Arc<Clocks>,
}

/// What [`Network::new`] returns: the network and each node's inbox.
pub type Inboxes = BTreeMap<String, Receiver<Envelope>>;

impl Network {
    /// A network connecting `nodes`. Must be called inside the madsim runtime: it creates the
    /// `network` node that carries messages.
    pub fn new(
        nodes: &[&str],
        latency: LatencyRange,
        rng: Xoshiro256PlusPlus,
        holds: Vec<HoldRule>,
        recorder: Arc<Recorder>,
        clocks: Arc<Clocks>,
    ) -> (Arc<Network>, Inboxes) {
        let mut mailboxes = BTreeMap::new();
        let mut inboxes = BTreeMap::new();
        for &node in nodes {
            let (tx, rx) = async_channel::unbounded();
            mailboxes.insert(node.to_owned(), tx);
            inboxes.insert(node.to_owned(), rx);
        }
        let carrier = madsim::runtime::Handle::current()
            .create_node()
            .name(NETWORK_NODE)
            .build();
        let state = NetState {
            rng,
            latency,
            holds,
            sent: BTreeMap::new(),
            next_id: 0,
            in_flight: 0,
        };
        let net = Network {
            state: Mutex::new(state),
            mailboxes,
            carrier,
            recorder,
            clocks,
        };
        (Arc::new(net), inboxes)
    }

    /// Send `body` from `src` to `dst`; returns the message's id. The delay is drawn now from
    /// the seed, or set by a matching hold rule.
    pub fn send(
        self: &Arc<Self>,
        src: &str,
        dst: &str,
        reply_to: Option<u64>,
        op: Option<u64>,
        body: Message,
    ) -> u64 {
        let kind = body.kind();
        let (id, delay_ms, held) = {
            let mut st = self.state.lock().expect("network state");
            let id = st.next_id;
            st.next_id += 1;
            st.in_flight += 1;
            let count = st.sent.entry((src.to_owned(), kind)).or_insert(0);
            *count += 1;
            let nth = *count;
            let hold = st
                .holds
                .iter()
                .find(|h| h.from == src && h.kind == kind && h.nth == nth);
            match hold.map(|h| h.duration_ms) {
                Some(d) => (id, d, Some(nth)),
                None => {
                    let LatencyRange { min_ms, max_ms } = st.latency;
                    (id, st.rng.gen_range(min_ms..=max_ms), None)
                }
            }
        };
        let env = Envelope {
            src: src.to_owned(),
            dst: dst.to_owned(),
            id,
            reply_to,
            op,
            body,
        };
        let detail =
            held.map(|nth| format!("{} #{nth} from {src} to {dst}, message {id}", kind.as_str()));
        if let Some(detail) = &detail {
            self.record_hold(Phase::Start, &env, detail);
        }
        let net = Arc::clone(self);
        self.carrier.spawn(async move {
            madsim::time::sleep(Duration::from_millis(delay_ms)).await;
            if let Some(detail) = &detail {
                net.record_hold(Phase::End, &env, detail);
            }
            net.deliver(env);
        });
        id
    }

    fn deliver(&self, env: Envelope) {
        if let Some(mailbox) = self.mailboxes.get(&env.dst) {
            // The receiver owns the other end for the whole run; a closed mailbox means the
            // simulation is shutting down, and the message is simply lost.
            let _ = mailbox.try_send(env);
        }
        self.state.lock().expect("network state").in_flight -= 1;
    }

    fn record_hold(&self, phase: Phase, env: &Envelope, detail: &str) {
        self.recorder.event(
            &self.clocks,
            Event {
                node: NEMESIS_NODE.to_owned(),
                phase: Some(phase),
                target: Some(env.src.clone()),
                op: env.op,
                detail: Some(detail.to_owned()),
                ..Event::new(EventKind::Hold)
            },
        );
    }

    /// Change the latency range of messages sent from now on.
    pub fn set_latency(&self, latency: LatencyRange) {
        self.state.lock().expect("network state").latency = latency;
    }

    /// The current latency range.
    pub fn latency(&self) -> LatencyRange {
        self.state.lock().expect("network state").latency
    }

    /// Messages sent and not yet delivered.
    pub fn in_flight(&self) -> u64 {
        self.state.lock().expect("network state").in_flight
    }
}
