//! The project's own transport: envelopes with request ids, delivered by the network.
//!
//! madsim's network has one latency range and cannot hold, duplicate or one-way-drop a chosen
//! message, so messages travel here instead. A message waits out its delay in the network's
//! queue of parcels, and one madsim timer per message delivers it when its time comes: the
//! timer's waker is the network's own ([`Arrival`]), which puts what is due in the receivers'
//! mailboxes as madsim's clock reaches it, before any task runs at that instant. No task
//! carries messages, and nothing a fault does to a node delays them: a sender that freezes or
//! crashes after sending does not delay what it sent. A paused receiver's messages wait in its
//! mailbox until it runs again; a crashed receiver's are lost. Messages due at the same instant
//! arrive in an order drawn from the seed.
//!
//! Partitions act at both ends of the flight: a message is dropped when it is sent over a cut
//! link, and also when the link is cut at the moment it would arrive (like packets on a cable
//! that is cut under them). A message sent before a heal that arrives after it is delivered.
//!
//! Requests and replies are matched by request id with explicit timeouts on the client side
//! (not madsim's `call_timeout`, whose late replies pile up in the endpoint's mailbox).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Wake, Waker};
use std::time::Duration;

use crate::mailbox::{mailbox, Inbox, Outbox};
use fencesim_history::{Event, EventKind, Phase};
use fencesim_scenario::{Cut, LatencyRange, LinkSel, MessageKind, NetworkSpec};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

use crate::clock::Clocks;
use crate::message::Message;
use crate::recorder::Recorder;

/// Node name under which nemesis events are recorded.
pub const NEMESIS_NODE: &str = "nemesis";

/// A message in transit.
#[derive(Clone, Debug)]
pub struct Envelope {
    /// Sender node (shared, not copied, per message: see [`Network::name`]).
    pub src: Arc<str>,
    /// Receiver node.
    pub dst: Arc<str>,
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
    /// If set, a second copy arrives this many ms after the send (a duplicate of this one
    /// message, however the duplication rate draws).
    pub copy_ms: Option<u64>,
}

/// A temporary network condition, added by a fault and removed when it ends.
#[derive(Clone, Debug, PartialEq)]
pub enum Rule {
    /// Latency of the selected links.
    Latency(LinkSel, LatencyRange),
    /// Extra loss probability on the selected links.
    Loss(LinkSel, f64),
    /// Extra duplication probability on the selected links.
    Duplicate(LinkSel, f64),
    /// Extra random delay up to this many ms.
    Reorder(u64),
    /// Messages of this kind (from this sender, if set) wait until `until_ns`.
    HoldAll {
        /// The kind.
        kind: MessageKind,
        /// The sender, or any.
        from: Option<String>,
        /// True time the window ends, ns.
        until_ns: u64,
    },
    /// Links cut.
    Cut(Cut),
}

/// What happened to messages, for the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetStats {
    /// Messages sent.
    pub sent: u64,
    /// Copies put in a mailbox.
    pub delivered: u64,
    /// Dropped because a partition cut the link (at send or at arrival).
    pub dropped_by_partition: u64,
    /// Dropped by random loss.
    pub lost: u64,
    /// Dropped because the receiver was down.
    pub dropped_receiver_down: u64,
    /// Extra copies made by duplication.
    pub duplicated: u64,
    /// Messages held by a `hold` or `hold-all` fault.
    pub held: u64,
}

struct NetState {
    rng: Xoshiro256PlusPlus,
    /// Draws each copy's [`Flight::tiebreak`]: a stream of its own, split from `rng` without
    /// advancing it, so that latencies, losses and duplications are drawn as if it did not
    /// exist.
    tiebreaks: Xoshiro256PlusPlus,
    spec: NetworkSpec,
    holds: Vec<HoldRule>,
    rules: Vec<(u64, Rule)>,
    down: BTreeSet<String>,
    sent: BTreeMap<String, BTreeMap<MessageKind, u64>>,
    next_id: u64,
    in_flight: u64,
    stats: NetStats,
}

/// The fate of one copy of a message, decided at send time.
struct Flight {
    delay_ns: u64,
    held: Option<String>,
    /// Where this copy goes among the messages due at the same instant (drawn from the seed):
    /// a real network releases a burst, such as the messages a `hold-all` kept, in no
    /// particular order, and an order fixed by sending would never let a later message
    /// overtake an earlier one.
    tiebreak: u64,
}

/// A message being sent, as its fate is decided.
#[derive(Clone, Copy)]
struct Sending<'a> {
    src: &'a str,
    dst: &'a str,
    kind: MessageKind,
    /// Its number among `src`'s messages of `kind` (0 when no hold rule is armed).
    nth: u64,
    id: u64,
    /// True time of sending, ns.
    now: u64,
}

/// One copy of a message in the network's queue. The envelope is boxed once, when the copy
/// flies, and reaches the receiver's task as it is: a queue, a mailbox and a task each move
/// a pointer, not the envelope.
struct Parcel {
    env: Box<Envelope>,
    /// The `hold` record's detail, if a fault holds this copy.
    held: Option<String>,
}

/// Mixed into the tiebreak stream's seed, so that it is not a copy of the latency stream.
const TIEBREAK_SALT: u64 = 0x7469_6562_7265_616b;

/// The shortest wait madsim's timers allow (its sleeps last at least 1 ms).
const MIN_DELAY_NS: u64 = 1_000_000;

/// Messages in flight.
#[derive(Default)]
struct Parcels {
    /// By (true time due, ns; the copy's tiebreak; order of sending).
    queue: BTreeMap<(u64, u64, u64), Parcel>,
    sent: u64,
}

/// The waker of a parcel's timer: when madsim's clock reaches `due_ns`, it delivers every
/// parcel due by then. madsim calls timer wakers while it advances its clock and before it
/// records the new time, so the arrival time is `due_ns`, not the clock's reading; and it holds
/// its timer heap then, so delivering must not arm a timer (it only fills mailboxes and wakes
/// their receivers, as madsim's own network does from its timers).
struct Arrival {
    net: Weak<Network>,
    due_ns: u64,
}

impl Wake for Arrival {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(net) = self.net.upgrade() {
            net.arrive(self.due_ns);
        }
    }
}

impl NetState {
    /// Count a message of `kind` from `src`; returns its 1-based number among those, which is
    /// what a `hold` rule picks by. Only counted while some `hold` rule is armed (rules are
    /// never added during a run), so a run without them does no bookkeeping per message.
    fn count_sent(&mut self, src: &str, kind: MessageKind) -> u64 {
        if self.holds.is_empty() {
            return 0;
        }
        // Looked up by `&str` first: a sender's name is allocated once, not per message.
        let per_kind = match self.sent.get_mut(src) {
            Some(per_kind) => per_kind,
            None => self.sent.entry(src.to_owned()).or_default(),
        };
        let count = per_kind.entry(kind).or_insert(0);
        *count += 1;
        *count
    }

    /// The `hold` rule that picks the `nth` message of `kind` from `src`: the first in the file.
    fn hold(&self, src: &str, kind: MessageKind, nth: u64) -> Option<&HoldRule> {
        self.holds
            .iter()
            .find(|h| h.from == src && h.kind == kind && h.nth == nth)
    }

    fn blocked(&self, src: &str, dst: &str) -> bool {
        self.rules
            .iter()
            .any(|(_, r)| matches!(r, Rule::Cut(c) if c.blocks(src, dst)))
    }

    /// The latency range for a message: the newest matching fault window, else a per-link
    /// setting, else the global range.
    fn latency(&self, src: &str, dst: &str) -> LatencyRange {
        let window = self.rules.iter().rev().find_map(|(_, r)| match r {
            Rule::Latency(sel, l) if sel.matches(src, dst) => Some(*l),
            _ => None,
        });
        let link = || {
            self.spec
                .links
                .iter()
                .rev()
                .find(|l| l.from == src && l.to == dst)
                .map(|l| l.latency_ms)
        };
        window.or_else(link).unwrap_or(self.spec.latency_ms)
    }

    /// Combined probability of the base rate and every matching rule: independent chances.
    fn chance(
        &self,
        base: f64,
        src: &str,
        dst: &str,
        pick: impl Fn(&Rule) -> Option<(&LinkSel, f64)>,
    ) -> f64 {
        let keep = self
            .rules
            .iter()
            .filter_map(|(_, r)| pick(r))
            .filter(|(sel, _)| sel.matches(src, dst))
            .fold(1.0 - base, |keep, (_, p)| keep * (1.0 - p));
        1.0 - keep
    }

    fn draw(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.gen_bool(p.min(1.0))
    }

    /// The fate of copy `copy` (0, or 1 for a duplicate) of message `m`.
    fn flight(&mut self, m: &Sending<'_>, copy: u32) -> Flight {
        let (src, dst, kind, nth, id, now) = (m.src, m.dst, m.kind, m.nth, m.id, m.now);
        let tiebreak = self.tiebreaks.gen::<u64>();
        let held = self.hold(src, kind, nth).and_then(|h| match copy {
            0 => Some((h.duration_ms, "")),
            _ => h.copy_ms.map(|ms| (ms, ", its copy")),
        });
        if let Some((ms, which)) = held {
            let detail = format!(
                "{} #{nth} from {src} to {dst}, message {id}{which}",
                kind.as_str()
            );
            return Flight {
                delay_ns: ms * 1_000_000,
                held: Some(detail),
                tiebreak,
            };
        }
        let LatencyRange { min_ms, max_ms } = self.latency(src, dst);
        let mut delay_ns = self.rng.gen_range(min_ms..=max_ms) * 1_000_000;
        let window = self
            .rules
            .iter()
            .filter_map(|(_, r)| match r {
                Rule::Reorder(w) => Some(*w),
                _ => None,
            })
            .chain([self.spec.reorder_window_ms])
            .max()
            .unwrap_or(0);
        if window > 0 {
            delay_ns += self.rng.gen_range(0..=window * 1_000_000);
        }
        let until = self.rules.iter().filter_map(|(_, r)| match r {
            Rule::HoldAll {
                kind: k,
                from,
                until_ns,
            } if *k == kind && from.as_deref().is_none_or(|f| f == src) => Some(*until_ns),
            _ => None,
        });
        match until.max().filter(|u| u.saturating_sub(now) > delay_ns) {
            Some(u) => Flight {
                delay_ns: u - now,
                held: Some(format!(
                    "{} from {src} to {dst}, message {id}, held until the window ends",
                    kind.as_str()
                )),
                tiebreak,
            },
            None => Flight {
                delay_ns,
                held: None,
                tiebreak,
            },
        }
    }
}

/// The simulated network.
pub struct Network {
    /// This network, for the wakers of its timers.
    me: Weak<Network>,
    state: Mutex<NetState>,
    parcels: Mutex<Parcels>,
    /// The run's clock (cheaper to keep than to look up at every message).
    time: madsim::time::TimeHandle,
    /// Each node's name, shared by every envelope from or to it, and its mailbox.
    mailboxes: BTreeMap<String, (Arc<str>, Outbox<Box<Envelope>>)>,
    recorder: Arc<Recorder>,
    clocks: Arc<Clocks>,
}

/// What [`Network::new`] returns besides the network: each node's inbox.
pub type Inboxes = BTreeMap<String, Inbox<Box<Envelope>>>;

impl Network {
    /// A network connecting `nodes`. Must be called inside the madsim runtime: its delivery
    /// timers are madsim's.
    pub fn new(
        nodes: &[&str],
        spec: NetworkSpec,
        rng: Xoshiro256PlusPlus,
        holds: Vec<HoldRule>,
        recorder: Arc<Recorder>,
        clocks: Arc<Clocks>,
    ) -> (Arc<Network>, Inboxes) {
        let mut mailboxes = BTreeMap::new();
        let mut inboxes = BTreeMap::new();
        for &node in nodes {
            let (tx, rx) = mailbox();
            mailboxes.insert(node.to_owned(), (Arc::from(node), tx));
            inboxes.insert(node.to_owned(), rx);
        }
        let tiebreaks = Xoshiro256PlusPlus::seed_from_u64(rng.clone().gen::<u64>() ^ TIEBREAK_SALT);
        let state = NetState {
            rng,
            tiebreaks,
            spec,
            holds,
            rules: Vec::new(),
            down: BTreeSet::new(),
            sent: BTreeMap::new(),
            next_id: 0,
            in_flight: 0,
            stats: NetStats::default(),
        };
        let net = Arc::new_cyclic(|me| Network {
            me: me.clone(),
            state: Mutex::new(state),
            parcels: Mutex::new(Parcels::default()),
            time: madsim::time::TimeHandle::current(),
            mailboxes,
            recorder,
            clocks,
        });
        (net, inboxes)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, NetState> {
        self.state.lock().expect("network state")
    }

    /// Send `body` from `src` to `dst`; returns the message's id. Its fate (cut, lost,
    /// duplicated, delayed, held) is decided now, from the seed and the rules in force.
    pub fn send(
        &self,
        src: &str,
        dst: &str,
        reply_to: Option<u64>,
        op: Option<u64>,
        body: Message,
    ) -> u64 {
        let kind = body.kind();
        let mut st = self.state();
        let id = st.next_id;
        st.next_id += 1;
        st.stats.sent += 1;
        let nth = st.count_sent(src, kind);
        if st.blocked(src, dst) {
            st.stats.dropped_by_partition += 1;
            return id;
        }
        let loss = st.chance(st.spec.loss, src, dst, |r| match r {
            Rule::Loss(sel, p) => Some((sel, *p)),
            _ => None,
        });
        if st.draw(loss) {
            st.stats.lost += 1;
            return id;
        }
        let dup = st.chance(st.spec.duplicate, src, dst, |r| match r {
            Rule::Duplicate(sel, p) => Some((sel, *p)),
            _ => None,
        });
        let copied = st.hold(src, kind, nth).is_some_and(|h| h.copy_ms.is_some());
        let copies = if st.draw(dup) || copied { 2 } else { 1 };
        st.stats.duplicated += copies - 1;
        // The copies' fates are drawn in order, all before either flies.
        let now = self.now_ns();
        let sending = Sending {
            src,
            dst,
            kind,
            nth,
            id,
            now,
        };
        let first = st.flight(&sending, 0);
        let second = (copies == 2).then(|| st.flight(&sending, 1));
        st.in_flight += copies;
        st.stats.held += [Some(&first), second.as_ref()]
            .into_iter()
            .flatten()
            .filter(|f| f.held.is_some())
            .count() as u64;
        drop(st);
        let env = Envelope {
            src: self.name(src),
            dst: self.name(dst),
            id,
            reply_to,
            op,
            body,
        };
        match second {
            Some(second) => {
                self.fly(env.clone(), first);
                self.fly(env, second);
            }
            None => self.fly(env, first),
        }
        id
    }

    /// True (simulated) time, ns: [`crate::recorder::true_ns`] from the clock the network keeps.
    fn now_ns(&self) -> u64 {
        crate::recorder::elapsed_ns(&self.time)
    }

    /// `node`'s shared name: a reference count, not a copy, for a node of this network.
    fn name(&self, node: &str) -> Arc<str> {
        self.mailboxes
            .get(node)
            .map_or_else(|| Arc::from(node), |(name, _)| Arc::clone(name))
    }

    fn fly(&self, env: Envelope, flight: Flight) {
        let now = self.now_ns();
        if let Some(detail) = &flight.held {
            self.record_hold(Phase::Start, &env, detail, now);
        }
        let delay_ns = flight.delay_ns.max(MIN_DELAY_NS);
        let due_ns = now + delay_ns;
        {
            let mut parcels = self.parcels.lock().expect("parcels");
            let order = parcels.sent;
            parcels.sent += 1;
            let parcel = Parcel {
                env: Box::new(env),
                held: flight.held,
            };
            parcels
                .queue
                .insert((due_ns, flight.tiebreak, order), parcel);
        }
        let arrival = Arrival {
            net: self.me.clone(),
            due_ns,
        };
        let waker = Waker::from(Arc::new(arrival));
        crate::timer::wake_after(&self.time, &waker, Duration::from_nanos(delay_ns));
    }

    /// Deliver, in order, every parcel due by `now_ns` (the true time, from a timer's
    /// [`Arrival`]).
    fn arrive(&self, now_ns: u64) {
        while let Some(parcel) = self.next_due(now_ns) {
            if let Some(detail) = &parcel.held {
                self.record_hold(Phase::End, &parcel.env, detail, now_ns);
            }
            self.deliver(parcel.env);
        }
    }

    /// The first parcel in the queue if it is due at `now_ns`, taken out of the queue.
    fn next_due(&self, now_ns: u64) -> Option<Parcel> {
        let mut parcels = self.parcels.lock().expect("parcels");
        let first = parcels.queue.first_entry()?;
        (first.key().0 <= now_ns).then(|| first.remove())
    }

    fn deliver(&self, env: Box<Envelope>) {
        let mut st = self.state();
        st.in_flight -= 1;
        if st.down.contains(&*env.dst) {
            st.stats.dropped_receiver_down += 1;
        } else if st.blocked(&env.src, &env.dst) {
            st.stats.dropped_by_partition += 1;
        } else if let Some((_, mailbox)) = self.mailboxes.get(&*env.dst) {
            st.stats.delivered += 1;
            mailbox.send(env);
        }
    }

    /// Put `body` straight into `node`'s own mailbox, not through the network: a local signal
    /// such as "your clock changed".
    pub fn signal(&self, node: &str, body: Message) {
        if let Some((name, mailbox)) = self.mailboxes.get(node) {
            let env = Envelope {
                src: Arc::clone(name),
                dst: Arc::clone(name),
                id: u64::MAX,
                reply_to: None,
                op: None,
                body,
            };
            mailbox.send(Box::new(env));
        }
    }

    /// Record the start or end of a hold at true time `at_ns`.
    fn record_hold(&self, phase: Phase, env: &Envelope, detail: &str, at_ns: u64) {
        self.recorder.event_at(
            at_ns,
            &self.clocks,
            Event {
                node: NEMESIS_NODE.into(),
                phase: Some(phase),
                target: Some((&*env.src).into()),
                op: env.op,
                detail: Some(detail.to_owned()),
                ..Event::new(EventKind::Hold)
            },
        );
    }

    /// Put `rule` in force under the caller's `id` (a fault's index).
    pub fn add_rule(&self, id: u64, rule: Rule) {
        self.state().rules.push((id, rule));
    }

    /// End the rules added under `id`.
    pub fn remove_rules(&self, id: u64) {
        self.state().rules.retain(|(i, _)| *i != id);
    }

    /// End every network fault (the final heal). `hold` rules, which pick one message by count,
    /// stay.
    pub fn clear_rules(&self) {
        self.state().rules.clear();
    }

    /// Disarm every `hold` fault whose message has not been sent yet (the final heal: no fault
    /// starts after it). A message already held stays in flight until its time is up.
    pub fn disarm_holds(&self) {
        self.state().holds.clear();
    }

    /// The nodes that are down.
    pub fn down_nodes(&self) -> Vec<String> {
        self.state().down.iter().cloned().collect()
    }

    /// End every partition.
    pub fn heal_all(&self) {
        self.state()
            .rules
            .retain(|(_, r)| !matches!(r, Rule::Cut(_)));
    }

    /// Mark `node` down (crashed: messages to it are lost) or up again.
    pub fn set_down(&self, node: &str, down: bool) {
        let mut st = self.state();
        if down {
            st.down.insert(node.to_owned());
        } else {
            st.down.remove(node);
        }
    }

    /// Whether `node` is down.
    pub fn is_down(&self, node: &str) -> bool {
        self.state().down.contains(node)
    }

    /// Messages sent and not yet delivered or dropped.
    pub fn in_flight(&self) -> u64 {
        self.state().in_flight
    }

    /// Counts of what happened to messages so far.
    pub fn stats(&self) -> NetStats {
        self.state().stats
    }
}
