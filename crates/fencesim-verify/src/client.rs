//! A client in the explored configuration: the scenario's workload ([`Workload`]) and the
//! design's own client protocol, driven as the simulator's client drives them, with its own
//! clock, which moves only when one of its timers fires (its work, its backoff, a request's
//! timeout, or a timer of its protocol's). What it may receive is the search's choice: a
//! message waits in the network until the search delivers it.
//!
//! Within the bounds: a cycle makes at most [`crate::Bounds::attempts`] acquire attempts
//! (then the client stops) and sends at most [`crate::Bounds::renewals`] keepalives (the rest
//! are skipped, as a stalled keepalive stream is; the work goes on).

use std::hash::{Hash, Hasher};

use fencesim_design::{
    ClientCtx, ClientEffect, ClientEnv, ClientProtocol, DesignMessage, LockOp, Now, RequestId,
    TimerId,
};
use fencesim_driver::op::{completion, mutation_completion, timed_out, OpTemplate, Outcome};
use fencesim_driver::timers::Timers;
use fencesim_history::{Name, OpFn, OpType};
use fencesim_workload::{Outcome as Done, Step, Workload};

use crate::net::{message_id, Agent, Body, Message};
use crate::node::Deadlined;
use crate::world::{Setup, Shared};

/// Which lock operation is under way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockKind {
    /// An acquire (retried with backoff until granted, within the attempts bound).
    Acquire,
    /// A renewal.
    Renew,
    /// A release.
    Release,
}

/// Where a client is.
#[derive(Clone, Debug, Hash)]
pub enum Phase {
    /// The last step is over: the workload is told `Done` next.
    Next(Done),
    /// A lock operation, run by the protocol until it completes it.
    Lock {
        /// Which.
        kind: LockKind,
        /// Its record's fields.
        tpl: OpTemplate,
        /// Its key (`op` in its messages).
        op_key: u64,
        /// How the protocol completed it, once it has.
        ended: Option<Outcome>,
        /// Whether the protocol said the lease is lost.
        lost: bool,
    },
    /// A read, write or delete of the resource, waiting for its reply or its timeout.
    Call {
        /// Its record's fields.
        tpl: OpTemplate,
        /// The request's message id.
        id: u64,
        /// When it times out, on the client's clock, ns.
        deadline_ns: u64,
    },
    /// Working, or backing off before another acquire, until `until_ns` on its clock.
    Sleep {
        /// Until when, ns.
        until_ns: u64,
        /// True: an acquire follows (a backoff); false: the work is over.
        retry: bool,
    },
    /// Every cycle ended, or it used its acquire attempts.
    Done,
}

/// One client.
pub struct ClientAgent<P: ClientProtocol> {
    /// The design's client protocol.
    pub protocol: P,
    /// Its workload.
    pub workload: Workload,
    /// Where it is.
    pub phase: Phase,
    /// Its clock, ns.
    pub clock_ns: u64,
    /// Its Jepsen process (a new one after each `info`).
    pub process: u64,
    /// How many messages it sent (for their ids).
    pub sent: u64,
    /// How many operations it invoked (for their keys).
    pub ops: u64,
    /// The protocol's last request id.
    pub last_request: u64,
    /// The current lock operation's requests in flight: (message id, the protocol's id).
    pub requests: Vec<(u64, RequestId)>,
    /// The protocol's timers.
    pub timers: Timers,
    /// Acquire attempts that failed this cycle.
    pub attempts: u32,
    /// Keepalives sent this cycle.
    pub renewals: u32,
    /// Keepalives skipped this cycle, past the renewals bound: what a counterexample's
    /// scenario writes as a `stall-renewals` fault.
    pub skipped: u32,
}

/// The client's clocks and draws for one protocol call.
struct Env {
    now: Now,
    /// What tells this client's draws from every other client's, and this operation's from
    /// its others': its index and its count of operations invoked.
    draw: (usize, u64),
}

impl ClientEnv for Env {
    fn now(&self) -> Now {
        self.now
    }

    /// Near the lowest value, but distinct per client and per operation: a draw that decides
    /// timing is as good as any (the search does not know time), and one that names something
    /// (a Redlock lock's random value) must differ between clients, as random 53-bit values
    /// do but for a vanishing chance. Two clients drawing the same value would hold one lock
    /// value, and the checker could not tell their writes apart.
    fn range_u64(&mut self, low: u64, high: u64) -> u64 {
        let (index, ops) = self.draw;
        let offset = ((index as u64) << 32) | ops;
        match high.checked_sub(low).and_then(|span| span.checked_add(1)) {
            Some(span) => low + offset % span,
            None => low.wrapping_add(offset), // the whole range of u64
        }
    }
}

/// What the protocol is handed.
enum Input<M> {
    Begin(LockOp),
    Reply(RequestId, M),
    Message(String, M),
    Timer(TimerId),
}

impl<P: ClientProtocol> ClientAgent<P> {
    /// Client `index` at its start, its protocol `protocol`.
    pub fn new(index: usize, setup: &Setup, protocol: P) -> Self {
        let spec = &setup.scenario.clients[index];
        let workload = Workload::new((&spec.clone()).into(), &spec.name, 1);
        ClientAgent {
            protocol,
            workload,
            phase: Phase::Next(Done::Begin),
            clock_ns: 0,
            process: process_id(index, 0),
            sent: 0,
            ops: 0,
            last_request: 0,
            requests: Vec::new(),
            timers: Timers::default(),
            attempts: 0,
            renewals: 0,
            skipped: 0,
        }
    }

    /// A copy, its protocol copied by `clone_client`.
    pub fn clone_with(&self, clone_client: fn(&P) -> P) -> Self {
        ClientAgent {
            protocol: clone_client(&self.protocol),
            workload: self.workload.clone(),
            phase: self.phase.clone(),
            clock_ns: self.clock_ns,
            process: self.process,
            sent: self.sent,
            ops: self.ops,
            last_request: self.last_request,
            requests: self.requests.clone(),
            timers: self.timers.clone(),
            attempts: self.attempts,
            renewals: self.renewals,
            skipped: self.skipped,
        }
    }

    /// Feed its state into `h`, its protocol by `hash_client`.
    pub fn hash_with(&self, hash_client: fn(&P, &mut dyn Hasher), h: &mut dyn Hasher) {
        hash_client(&self.protocol, h);
        // Derived `Hash`, not the `Debug` form: the same fields, a tenth of the work.
        let mut h = h;
        self.workload.hash(&mut h);
        self.phase.hash(&mut h);
        self.requests.hash(&mut h);
        self.timers.hash(&mut h);
        for n in [
            self.clock_ns,
            self.process,
            self.sent,
            self.ops,
            self.last_request,
        ] {
            h.write_u64(n);
        }
        h.write_u32(self.attempts);
        h.write_u32(self.renewals);
        h.write_u32(self.skipped);
    }

    /// Whether it takes a message now: only while it waits for a reply (a message that
    /// comes between its operations stays in the network until the search delivers it).
    pub fn receiving(&self) -> bool {
        matches!(
            self.phase,
            Phase::Lock { ended: None, .. } | Phase::Call { .. }
        )
    }

    /// Whether a message to it that answers `reply_to` (`None`: not a reply) can still
    /// change anything. A reply to a request it no longer waits for (its call timed out, its
    /// protocol gave the request up) is dropped whenever it comes, as the simulator's client
    /// drops it: request ids are never reused, so such a reply is dead.
    pub fn may_use(&self, reply_to: Option<u64>) -> bool {
        let Some(id) = reply_to else {
            return !matches!(self.phase, Phase::Done);
        };
        matches!(self.phase, Phase::Call { id: current, .. } if current == id)
            || self.requests.iter().any(|(n, _)| *n == id)
    }

    /// When its next timer fires, on its clock, ns: its work's or backoff's end, its call's
    /// timeout, or its protocol's earliest timer.
    pub fn next_timer(&self) -> Option<u64> {
        match self.phase {
            Phase::Sleep { until_ns, .. } => Some(until_ns),
            Phase::Call { deadline_ns, .. } => Some(deadline_ns),
            Phase::Lock { ended: None, .. } => self.timers.earliest().map(|(at, _)| at),
            _ => None,
        }
    }

    /// Every timer that may fire next ([`Self::next_timer`]'s candidates): a key that tells
    /// it from the timers before it (a work's end from the call before it that had the same
    /// deadline), and its deadline on its clock, ns.
    /// A client's timers are all delays in true time in the simulator (its sleeps, its
    /// timeouts, its protocol's `SetTimer`s).
    pub fn deadlines(&self) -> Vec<Deadlined> {
        // Each phase's timer is its operation's: the count of operations invoked tells them
        // apart, the top bits what waits.
        let (sleep, call, lock) = (1 << 62, 2 << 62, 3 << 62);
        let timer = |key, at_ns, may_repeat| Deadlined {
            key,
            at_ns,
            on_clock: false,
            may_repeat,
        };
        match self.phase {
            Phase::Sleep { until_ns, .. } => vec![timer(sleep | self.ops, until_ns, false)],
            Phase::Call { deadline_ns, .. } => vec![timer(call | self.ops, deadline_ns, false)],
            Phase::Lock { ended: None, .. } => self
                .timers
                .deadlines()
                .map(|(id, at_ns, _)| timer(lock | (self.ops << 16) | id.0, at_ns, true))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Go on until it waits: at the start, and after anything that may have ended a step.
    pub fn run<NM: DesignMessage>(
        &mut self,
        index: usize,
        setup: &Setup,
        shared: &mut Shared<NM, P::Msg>,
    ) {
        loop {
            let outcome = match &self.phase {
                Phase::Next(outcome) => *outcome,
                Phase::Lock {
                    kind,
                    ended: Some(result),
                    lost,
                    ..
                } => match (kind, *result) {
                    (LockKind::Acquire, Outcome::Ok(Some(token))) => {
                        self.attempts = 0;
                        Done::Granted { token }
                    }
                    (LockKind::Acquire, Outcome::Ok(None)) => {
                        panic!("the design's client protocol completed an acquire with no token")
                    }
                    (LockKind::Acquire, _) => {
                        self.attempts += 1;
                        self.phase = if self.attempts >= setup.bounds.attempts {
                            Phase::Done
                        } else {
                            let backoff_ms = setup.scenario.clients[index].backoff_ms.min_ms;
                            Phase::Sleep {
                                until_ns: self.clock_ns + backoff_ms.max(1) * 1_000_000,
                                retry: true,
                            }
                        };
                        return;
                    }
                    (LockKind::Renew, _) => Done::Renewed { kept: !*lost },
                    (LockKind::Release, _) => Done::Finished,
                },
                _ => return,
            };
            self.step(index, setup, outcome, shared);
        }
    }

    /// Tell the workload how the last step went, and begin the next.
    fn step<NM: DesignMessage>(
        &mut self,
        index: usize,
        setup: &Setup,
        outcome: Done,
        shared: &mut Shared<NM, P::Msg>,
    ) {
        let spec = &setup.scenario.clients[index];
        let name = spec.name.as_str();
        self.phase = match self.workload.step(self.clock_ns, outcome) {
            Step::Acquire => {
                self.renewals = 0;
                self.skipped = 0;
                return self.begin_lock(index, setup, LockKind::Acquire, None, shared);
            }
            Step::Renew { token } => {
                return self.begin_lock(index, setup, LockKind::Renew, Some(token), shared);
            }
            Step::Keepalive { token } => {
                if self.renewals >= setup.bounds.renewals {
                    // Past the bound: skipped, as a stalled keepalive is; the work goes on.
                    self.skipped += 1;
                    Phase::Next(Done::Renewed { kept: true })
                } else {
                    self.renewals += 1;
                    return self.begin_lock(index, setup, LockKind::Renew, Some(token), shared);
                }
            }
            Step::Read => {
                let body = Body::Read {
                    key: spec.key.clone(),
                };
                return self.begin_call(index, setup, OpFn::Read, None, None, body, shared);
            }
            Step::Work { for_ns } => Phase::Sleep {
                until_ns: self.clock_ns + for_ns,
                retry: false,
            },
            Step::CheckValidity => {
                let mono_ms = (self.clock_ns / 1_000_000) as i64;
                let valid = shared.beliefs.valid(name, mono_ms);
                if !valid {
                    shared.end_belief(name, "validity elapsed before the write", self.clock_ns);
                }
                Phase::Next(Done::Validity { valid })
            }
            Step::Write { token, value } => {
                let body = Body::Write {
                    key: spec.key.clone(),
                    token,
                    value: value.clone(),
                };
                let (t, v) = (Some(token), Some(value));
                return self.begin_call(index, setup, OpFn::Write, t, v, body, shared);
            }
            Step::Delete { token } => {
                let body = Body::Delete {
                    key: spec.key.clone(),
                    token,
                };
                return self.begin_call(index, setup, OpFn::Delete, token, None, body, shared);
            }
            Step::Release { token } => {
                shared.end_belief(name, "released", self.clock_ns);
                return self.begin_lock(index, setup, LockKind::Release, Some(token), shared);
            }
            Step::Done => Phase::Done,
        };
    }

    /// The record fields of operation `f`.
    fn template(
        &self,
        setup: &Setup,
        index: usize,
        f: OpFn,
        token: Option<u64>,
        value: Option<String>,
    ) -> OpTemplate {
        let names = &setup.client_names[index];
        let place: [&Name; 2] = [&names.1, &names.2];
        OpTemplate::new(self.process, &names.0, place, f, token, value)
    }

    /// Invoke `tpl`: record it, with a fresh key.
    fn invoke<NM: DesignMessage>(
        &mut self,
        index: usize,
        tpl: &OpTemplate,
        shared: &mut Shared<NM, P::Msg>,
    ) -> u64 {
        self.ops += 1;
        let op_key = op_key(index, self.ops);
        shared.record(tpl.record(OpType::Invoke), self.clock_ns, Some(op_key));
        op_key
    }

    /// Begin lock operation `kind` in the protocol.
    fn begin_lock<NM: DesignMessage>(
        &mut self,
        index: usize,
        setup: &Setup,
        kind: LockKind,
        token: Option<u64>,
        shared: &mut Shared<NM, P::Msg>,
    ) {
        let (f, op) = match (kind, token) {
            (LockKind::Acquire, _) => (OpFn::Acquire, LockOp::Acquire),
            (LockKind::Renew, Some(token)) => (OpFn::Renew, LockOp::Renew { token }),
            (LockKind::Release, Some(token)) => (OpFn::Release, LockOp::Release { token }),
            (_, None) => unreachable!("a renewal or release has its lease's token"),
        };
        let tpl = self.template(setup, index, f, token, None);
        let op_key = self.invoke(index, &tpl, shared);
        self.phase = Phase::Lock {
            kind,
            tpl,
            op_key,
            ended: None,
            lost: false,
        };
        self.requests.clear();
        self.feed(index, setup, Input::Begin(op), shared);
    }

    /// Send a read, write or delete to the resource, and wait for its reply.
    #[allow(clippy::too_many_arguments)]
    fn begin_call<NM: DesignMessage>(
        &mut self,
        index: usize,
        setup: &Setup,
        f: OpFn,
        token: Option<u64>,
        value: Option<String>,
        body: Body<NM, P::Msg>,
        shared: &mut Shared<NM, P::Msg>,
    ) {
        let tpl = self.template(setup, index, f, token, value);
        let op_key = self.invoke(index, &tpl, shared);
        let id = self.send(
            index,
            Agent::Resource,
            Some(op_key),
            body,
            f.as_str(),
            shared,
        );
        let timeout_ms = setup.scenario.clients[index].timeout_ms;
        self.phase = Phase::Call {
            tpl,
            id,
            deadline_ns: self.clock_ns + timeout_ms.max(1) * 1_000_000,
        };
    }

    /// Put a message in flight; its id.
    fn send<NM: DesignMessage>(
        &mut self,
        index: usize,
        to: Agent,
        op: Option<u64>,
        body: Body<NM, P::Msg>,
        kind: &'static str,
        shared: &mut Shared<NM, P::Msg>,
    ) -> u64 {
        let from = Agent::Client(index);
        let id = message_id(from, self.sent);
        self.sent += 1;
        shared.net.push(Message {
            id,
            from,
            to,
            reply_to: None,
            op,
            body,
            kind,
        });
        id
    }

    /// Message `msg` reached the client.
    pub fn deliver<NM: DesignMessage>(
        &mut self,
        index: usize,
        setup: &Setup,
        msg: Message<NM, P::Msg>,
        shared: &mut Shared<NM, P::Msg>,
    ) {
        match &self.phase {
            Phase::Call { tpl, id, .. } if msg.reply_to == Some(*id) => {
                let record = match msg.body {
                    Body::ReadReply(read) => fencesim_history::Op {
                        value: read.value,
                        token: read.token,
                        ..tpl.record(OpType::Ok)
                    },
                    Body::WriteReply(outcome) => {
                        if matches!(outcome, fencesim_design::WriteOutcome::Rejected { .. })
                            && tpl.f == OpFn::Write
                        {
                            let name = setup.scenario.clients[index].name.as_str();
                            shared.end_belief(name, "write rejected as stale", self.clock_ns);
                        }
                        mutation_completion(tpl, &outcome)
                    }
                    _ => return, // not an answer the resource gives
                };
                shared.record(record, self.clock_ns, None);
                self.phase = Phase::Next(Done::Finished);
                self.run(index, setup, shared);
            }
            Phase::Lock { ended: None, .. } => {
                let Some(design) = msg.body.design::<P::Msg>() else {
                    return; // a harness message, or another design's: dropped
                };
                let input = match msg.reply_to {
                    Some(id) => {
                        let Some(slot) = self.requests.iter().position(|(n, _)| *n == id) else {
                            return; // a reply to an earlier operation: dropped
                        };
                        Input::Reply(self.requests.swap_remove(slot).1, design)
                    }
                    None => Input::Message(setup.name_of(msg.from).to_owned(), design),
                };
                self.feed(index, setup, input, shared);
            }
            // Not waiting for it: a late reply, dropped as the client's connection does.
            _ => {}
        }
    }

    /// Its next timer fires: the client's clock moves to its deadline.
    pub fn fire<NM: DesignMessage>(
        &mut self,
        index: usize,
        setup: &Setup,
        shared: &mut Shared<NM, P::Msg>,
    ) {
        let Some(at_ns) = self.next_timer() else {
            return;
        };
        self.clock_ns = self.clock_ns.max(at_ns);
        match &self.phase {
            Phase::Sleep { retry: true, .. } => {
                self.begin_lock(index, setup, LockKind::Acquire, None, shared);
                self.run(index, setup, shared);
            }
            Phase::Sleep { retry: false, .. } => {
                self.phase = Phase::Next(Done::Finished);
                self.run(index, setup, shared);
            }
            Phase::Call { tpl, .. } => {
                let timeout_ms = setup.scenario.clients[index].timeout_ms;
                shared.record(timed_out(tpl, timeout_ms), self.clock_ns, None);
                self.new_process(index);
                self.phase = Phase::Next(Done::Finished);
                self.run(index, setup, shared);
            }
            Phase::Lock { .. } => {
                if let Some(id) = self.timers.pop_due(at_ns) {
                    self.feed(index, setup, Input::Timer(id), shared);
                }
            }
            Phase::Next(_) | Phase::Done => {}
        }
    }

    /// A fresh Jepsen process, after an `info`.
    fn new_process(&mut self, index: usize) {
        self.process = process_id(index, self.process % 1_000 + 1);
    }

    /// Call the protocol with `input`, apply its effects in order, and go on if it completed
    /// the operation.
    fn feed<NM: DesignMessage>(
        &mut self,
        index: usize,
        setup: &Setup,
        input: Input<P::Msg>,
        shared: &mut Shared<NM, P::Msg>,
    ) {
        let mut effects = Vec::new();
        {
            let mut push = |e: ClientEffect<P::Msg>| effects.push(e);
            let ms = (self.clock_ns / 1_000_000) as i64;
            let mut env = Env {
                now: Now {
                    mono_ms: ms,
                    wall_ms: ms,
                },
                draw: (index, self.ops),
            };
            let mut ctx = ClientCtx::new(&mut push, &mut self.last_request, &mut env);
            match input {
                Input::Begin(op) => self.protocol.begin(op, &mut ctx),
                Input::Reply(id, msg) => self.protocol.on_reply(id, msg, &mut ctx),
                Input::Message(from, msg) => self.protocol.on_message(&from, msg, &mut ctx),
                Input::Timer(id) => self.protocol.on_timer(id, &mut ctx),
            }
        }
        for effect in effects {
            self.apply(index, setup, effect, shared);
        }
        self.run(index, setup, shared);
    }

    /// Apply one effect of the protocol's, as the simulator's client does (a design's
    /// safepoint passes at once: no fault is triggered here).
    fn apply<NM: DesignMessage>(
        &mut self,
        index: usize,
        setup: &Setup,
        effect: ClientEffect<P::Msg>,
        shared: &mut Shared<NM, P::Msg>,
    ) {
        let spec = &setup.scenario.clients[index];
        let name = spec.name.as_str();
        let Phase::Lock {
            tpl,
            op_key,
            ended,
            lost,
            ..
        } = &mut self.phase
        else {
            return; // the operation already ended: what follows its completion goes nowhere
        };
        let op_key = *op_key;
        match effect {
            ClientEffect::Request { id, node, msg } => {
                let net_id = message_id(Agent::Client(index), self.sent);
                self.sent += 1;
                self.requests.push((net_id, id));
                shared.net.push(Message {
                    id: net_id,
                    from: Agent::Client(index),
                    to: Agent::Node(node),
                    reply_to: None,
                    op: Some(op_key),
                    kind: msg.kind().as_str(),
                    body: Body::FromClient(msg),
                });
            }
            ClientEffect::Send { node, msg } => {
                let net_id = message_id(Agent::Client(index), self.sent);
                self.sent += 1;
                shared.net.push(Message {
                    id: net_id,
                    from: Agent::Client(index),
                    to: Agent::Node(node),
                    reply_to: None,
                    op: Some(op_key),
                    kind: msg.kind().as_str(),
                    body: Body::FromClient(msg),
                });
            }
            ClientEffect::SetTimer { id, after_ms } => {
                self.timers.set_from(self.clock_ns, id, after_ms)
            }
            ClientEffect::CancelTimer(id) => self.timers.cancel(id),
            ClientEffect::Complete(result) => {
                let (record, outcome) = completion(tpl, result);
                let retired = record.op_type == OpType::Info;
                shared.record(record, self.clock_ns, None);
                *ended = Some(outcome);
                if retired {
                    self.process = process_id(index, self.process % 1_000 + 1);
                }
            }
            ClientEffect::Believe { token, until_ms } => {
                let until = spec.validity_check.then_some(until_ms);
                let mono_ms = (self.clock_ns / 1_000_000) as i64;
                shared.believe(name, &spec.lock, token, until, mono_ms, self.clock_ns);
            }
            ClientEffect::Lost { reason } => {
                shared.end_belief(name, &reason, self.clock_ns);
                *lost = true;
            }
            ClientEffect::RenewNow => self.workload.renew_now(),
            ClientEffect::StopRenewing => self.workload.stop_renewing(),
            ClientEffect::Safepoint(_) => {}
        }
    }
}

/// Client `index`'s Jepsen process number `n` (0 first, one more after each `info`).
fn process_id(index: usize, n: u64) -> u64 {
    (index as u64 + 1) * 1_000 + n
}

/// Client `index`'s operation number `n`, as its messages and the service's events name it.
fn op_key(index: usize, n: u64) -> u64 {
    ((index as u64 + 1) << 32) | n
}
