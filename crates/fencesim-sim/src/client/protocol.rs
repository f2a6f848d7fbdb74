//! The client side of a design on the design API: the workload's acquire, renew and release,
//! each one Jepsen operation run through the design's [`ClientProtocol`].
//!
//! For each operation the client records the invoke, begins it in the protocol, and then feeds
//! the protocol the replies to its requests, other messages of its design, and its timers, until
//! the protocol completes the operation. Effects are applied in the order the protocol pushed
//! them. While the protocol's timers stay as they are, the client waits for messages under one
//! timeout for the earliest of them, so a stream of messages nobody waits for does not move a
//! deadline.

use fencesim_design::{
    ClientCtx, ClientEffect, ClientEnv, ClientProtocol, LockOp, Now, RequestId, TimerId,
};
use std::cell::Cell;
use std::sync::Arc;

use fencesim_history::{OpFn, OpType};
use fencesim_scenario::{ClientSpec, NodeEvent};
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::Client;
use crate::clock::ClockCache;
use crate::design_body::Boxes;
use crate::message::Message;
use crate::nemesis::When;
use crate::recorder::true_ns;
use crate::transport::Envelope;
use crate::world::{OpTemplate, World};
use fencesim_driver::op::{completion, Outcome};

/// What the protocol is handed.
enum Input<M> {
    Begin(LockOp),
    Reply(RequestId, M),
    Message(String, M),
    Timer(TimerId),
}

/// The client's clocks and seeded stream, lent to the protocol for one call.
struct Env<'a> {
    world: &'a World,
    name: &'a str,
    clock: &'a ClockCache,
    rng: &'a mut Xoshiro256PlusPlus,
    /// True time, read at the first `now` or timer of the call (one instant).
    now_ns: &'a Cell<Option<u64>>,
    /// The clocks, read at the first `now` of the call.
    now: Cell<Option<Now>>,
}

/// True time from `cell`, read into it if it has none yet.
fn true_ns_in(cell: &Cell<Option<u64>>) -> u64 {
    let now_ns = cell.get().unwrap_or_else(true_ns);
    cell.set(Some(now_ns));
    now_ns
}

impl ClientEnv for Env<'_> {
    fn now(&self) -> Now {
        let now = self.now.get().unwrap_or_else(|| {
            let now_ns = true_ns_in(self.now_ns);
            self.world.now_at(self.name, self.clock, now_ns)
        });
        self.now.set(Some(now));
        now
    }

    fn range_u64(&mut self, low: u64, high: u64) -> u64 {
        self.rng.gen_range(low..high)
    }
}

/// How an operation ended (its result as recorded; the error text went to the history).
#[derive(Debug, Default)]
struct Ended {
    result: Option<Outcome>,
    lost: bool,
}

/// The protocol's side of the client: the protocol, its requests in flight and its timers.
pub(crate) struct ProtocolState<P: ClientProtocol> {
    protocol: P,
    /// The lock service's nodes, as the protocol numbers them.
    service_nodes: Vec<String>,
    /// Requests of the current operation: (transport id, the protocol's id).
    requests: Vec<(u64, RequestId)>,
    last_request: u64,
    timers: crate::design_timers::Timers,
    /// The boxes of the messages it received, for those it sends.
    boxes: Boxes<P::Msg>,
    /// A design safepoint the protocol passed, and the effects it pushed after it, which wait
    /// until the safepoint has been passed (a fault triggered there strikes first).
    pending: Option<(&'static str, Vec<ClientEffect<P::Msg>>)>,
}

impl<P: ClientProtocol> ProtocolState<P> {
    /// `protocol`, talking to `service_nodes`.
    pub fn new(protocol: P, service_nodes: Vec<String>) -> Self {
        ProtocolState {
            protocol,
            service_nodes,
            requests: Vec::new(),
            last_request: 0,
            timers: Default::default(),
            boxes: Boxes::default(),
            pending: None,
        }
    }
}

impl<P: ClientProtocol> Client<P> {
    /// Acquire through the protocol, retrying with backoff until it succeeds; the token.
    pub(super) async fn protocol_acquire(&mut self) -> u64 {
        loop {
            self.safepoint(When::Before, NodeEvent::Acquire).await;
            let op = self.template(OpFn::Acquire, None, None);
            let invoke = self.world.op_cached(op.record(OpType::Invoke), &self.clock);
            let ended = self.protocol_op(LockOp::Acquire, &op, invoke).await;
            match ended.result {
                Some(Outcome::Ok(Some(token))) => {
                    self.safepoint(When::After, NodeEvent::Grant).await;
                    return token;
                }
                Some(Outcome::Ok(None)) => {
                    panic!("the design's client protocol completed an acquire with no token")
                }
                _ => self.backoff().await,
            }
        }
    }

    /// One keepalive through the protocol; false if the protocol says the lease is lost.
    pub(super) async fn protocol_renew(&mut self, token: u64) -> bool {
        self.safepoint(When::Before, NodeEvent::Renew).await;
        let op = self.template(OpFn::Renew, Some(token), None);
        let invoke = self.world.op_cached(op.record(OpType::Invoke), &self.clock);
        let ended = self.protocol_op(LockOp::Renew { token }, &op, invoke).await;
        self.safepoint(When::After, NodeEvent::Renew).await;
        !ended.lost
    }

    /// Release through the protocol.
    pub(super) async fn protocol_release(&mut self, token: u64) {
        self.safepoint(When::Before, NodeEvent::Release).await;
        self.world.end_belief(&self.spec.name, "released");
        let op = self.template(OpFn::Release, Some(token), None);
        let invoke = self.world.op_cached(op.record(OpType::Invoke), &self.clock);
        self.protocol_op(LockOp::Release { token }, &op, invoke)
            .await;
        self.safepoint(When::After, NodeEvent::Release).await;
    }

    /// Run `op` (invoked at history index `invoke`) until the protocol completes it.
    async fn protocol_op(&mut self, op: LockOp, tpl: &OpTemplate, invoke: u64) -> Ended {
        let mut ended = Ended::default();
        self.protocol.requests.clear();
        // The true time the call read, if it did: nothing has waited since.
        let mut read_ns = self.feed(Input::Begin(op), tpl, invoke, &mut ended);
        loop {
            if self.protocol.pending.is_some() {
                self.pass_design_safepoints(tpl, invoke, &mut ended).await;
                read_ns = None; // time may have passed (a pause struck there)
            }
            if ended.result.is_some() {
                break;
            }
            let known_ns = read_ns.take();
            let Some((deadline_ns, _)) = self.protocol.timers.earliest() else {
                match self.inbox.recv().await {
                    Ok(env) => self.deliver(*env, tpl, invoke, &mut ended),
                    Err(_) => break,
                }
                continue;
            };
            let now_ns = known_ns.unwrap_or_else(true_ns);
            if deadline_ns <= now_ns {
                // A message already waiting comes before a due timer.
                match self.inbox.try_recv() {
                    Ok(env) => self.deliver(*env, tpl, invoke, &mut ended),
                    Err(_) => {
                        let due = self.protocol.timers.pop_due(true_ns());
                        if let Some(id) = due {
                            self.feed(Input::Timer(id), tpl, invoke, &mut ended);
                        }
                    }
                }
                continue;
            }
            self.wait_until(deadline_ns, now_ns, tpl, invoke, &mut ended)
                .await;
        }
        ended
    }

    /// Deliver messages until `deadline_ns`, the operation's completion, or a change of the
    /// earliest timer, whichever comes first; at the deadline, fire that timer. `now_ns` is the
    /// true time now.
    async fn wait_until(
        &mut self,
        deadline_ns: u64,
        now_ns: u64,
        tpl: &OpTemplate,
        invoke: u64,
        ended: &mut Ended,
    ) {
        let left = std::time::Duration::from_nanos(deadline_ns - now_ns);
        // The same alarm (a clone shares it), so the wait can lend `self` to the protocol.
        let alarm = self.alarm.clone();
        let waited = alarm
            .timeout(left, async {
                loop {
                    let Ok(env) = self.inbox.recv().await else {
                        return false;
                    };
                    self.deliver(*env, tpl, invoke, ended);
                    let earliest = self.protocol.timers.earliest().map(|t| t.0);
                    let passing = self.protocol.pending.is_some();
                    if passing || ended.result.is_some() || earliest != Some(deadline_ns) {
                        return true;
                    }
                }
            })
            .await;
        match waited {
            Ok(true) => {}
            // The inbox is gone: the simulation is ending.
            Ok(false) => ended.result = Some(Outcome::Unknown),
            Err(_elapsed) => {
                let due = self.protocol.timers.pop_due(true_ns());
                if let Some(id) = due {
                    self.feed(Input::Timer(id), tpl, invoke, ended);
                }
            }
        }
    }

    /// Hand `env` to the protocol: a reply to one of this operation's requests, or another
    /// message of its design. Replies to earlier operations and harness messages are dropped.
    fn deliver(&mut self, env: Envelope, tpl: &OpTemplate, invoke: u64, ended: &mut Ended) {
        let Envelope {
            src,
            reply_to,
            body,
            ..
        } = env;
        let Message::Design(body) = body else {
            return;
        };
        let Some(msg) = self.protocol.boxes.open(body) else {
            return; // another design's message: not for this client
        };
        let input = match reply_to {
            Some(net_id) => {
                let requests = &mut self.protocol.requests;
                let Some(slot) = requests.iter().position(|(n, _)| *n == net_id) else {
                    return;
                };
                Input::Reply(requests.swap_remove(slot).1, msg)
            }
            None => Input::Message(src.to_string(), msg),
        };
        self.feed(input, tpl, invoke, ended);
    }

    /// Call the protocol with `input`, applying its effects in the order it pushes them (as
    /// it pushes them: nothing the protocol can see changes when one is applied, since it reads
    /// only its clocks, read once per call, and its own seeded stream).
    /// Returns the true time the call read, if it read it.
    fn feed(
        &mut self,
        input: Input<P::Msg>,
        tpl: &OpTemplate,
        invoke: u64,
        ended: &mut Ended,
    ) -> Option<u64> {
        let Client {
            world,
            spec,
            rng,
            process,
            protocol: state,
            workload,
            clock,
            ..
        } = self;
        let ProtocolState {
            protocol,
            service_nodes,
            requests,
            last_request,
            timers,
            boxes,
            pending,
        } = state;
        let world: &Arc<World> = world;
        let spec: &ClientSpec = spec;
        let name = spec.name.as_str();
        let clock: &ClockCache = clock;
        // True time, read at the first `now` or timer set (one instant throughout the call).
        let now_ns = Cell::new(None);
        let mut env = Env {
            world,
            name,
            clock,
            rng,
            now_ns: &now_ns,
            now: Cell::new(None),
        };
        let mut parts = Parts {
            world,
            spec,
            name,
            clock,
            process,
            workload,
            service_nodes,
            requests,
            timers,
            boxes,
            now_ns: &now_ns,
        };
        // Effects pushed after a design safepoint wait for it (`pending`).
        let mut held: Option<(&'static str, Vec<ClientEffect<P::Msg>>)> = None;
        let mut apply = |effect: ClientEffect<P::Msg>| match (effect, &mut held) {
            (effect, Some((_, after))) => after.push(effect),
            (ClientEffect::Safepoint(name), None) => held = Some((name, Vec::new())),
            (effect, None) => apply_effect(effect, &mut parts, tpl, invoke, ended),
        };
        let mut ctx = ClientCtx::new(&mut apply, last_request, &mut env);
        match input {
            Input::Begin(op) => protocol.begin(op, &mut ctx),
            Input::Reply(id, msg) => protocol.on_reply(id, msg, &mut ctx),
            Input::Message(from, msg) => protocol.on_message(&from, msg, &mut ctx),
            Input::Timer(id) => protocol.on_timer(id, &mut ctx),
        }
        *pending = held;
        now_ns.get()
    }

    /// Pass each design safepoint the protocol passed (both its `before` and `after`
    /// triggers: a design's point is one instant), then apply the effects it pushed after it,
    /// which may pass another.
    async fn pass_design_safepoints(&mut self, tpl: &OpTemplate, invoke: u64, ended: &mut Ended) {
        while let Some((point, after)) = self.protocol.pending.take() {
            self.check_declared(point);
            self.safepoint(When::Before, NodeEvent::Design(point)).await;
            self.safepoint(When::After, NodeEvent::Design(point)).await;
            // A new instant: the effects after the safepoint read the time they are applied at.
            let now_ns = Cell::new(None);
            let Client {
                world,
                spec,
                process,
                protocol: state,
                workload,
                clock,
                ..
            } = self;
            let mut parts = Parts {
                world,
                spec,
                name: spec.name.as_str(),
                clock,
                process,
                workload,
                service_nodes: &state.service_nodes,
                requests: &mut state.requests,
                timers: &mut state.timers,
                boxes: &mut state.boxes,
                now_ns: &now_ns,
            };
            let mut rest = after.into_iter();
            while let Some(effect) = rest.next() {
                if let ClientEffect::Safepoint(next) = effect {
                    state.pending = Some((next, rest.collect()));
                    break;
                }
                apply_effect(effect, &mut parts, tpl, invoke, ended);
            }
        }
    }

    /// Panic on a safepoint the design did not declare: a bug in the design's code, which the
    /// first run that passes it shows.
    fn check_declared(&self, point: &str) {
        let shape = &self.world.scenario.lock_service.shape;
        let declared = shape
            .safepoints
            .iter()
            .any(|s| s.name == point && s.side == fencesim_design::SafepointSide::Client);
        assert!(
            declared,
            "the design's client protocol passed safepoint {point:?}, which its ServiceShape \
             does not declare for the client side"
        );
    }
}

/// What applying one effect of a client protocol touches: the client's parts, split out so
/// that effects can be applied while the protocol runs and, after a design safepoint, later.
struct Parts<'a, M> {
    world: &'a Arc<World>,
    spec: &'a ClientSpec,
    name: &'a str,
    clock: &'a ClockCache,
    process: &'a mut u64,
    workload: &'a mut fencesim_workload::Workload,
    service_nodes: &'a [String],
    requests: &'a mut Vec<(u64, RequestId)>,
    timers: &'a mut crate::design_timers::Timers,
    boxes: &'a mut Boxes<M>,
    /// True time of the instant the effect belongs to, read at its first use.
    now_ns: &'a Cell<Option<u64>>,
}

/// Apply one effect of a client protocol, for operation `tpl` invoked at history index
/// `invoke`.
fn apply_effect<M: fencesim_design::DesignMessage>(
    effect: ClientEffect<M>,
    parts: &mut Parts<'_, M>,
    tpl: &OpTemplate,
    invoke: u64,
    ended: &mut Ended,
) {
    let Parts {
        world,
        spec,
        name,
        clock,
        process,
        workload,
        service_nodes,
        requests,
        timers,
        boxes,
        now_ns,
    } = parts;
    let (world, spec, name, clock, now_ns) = (*world, *spec, *name, *clock, *now_ns);
    match effect {
        ClientEffect::Request { id, node, msg } => {
            let to = &service_nodes[node];
            let body = Message::Design(boxes.wrap(msg));
            let net_id = world.net.send(name, to, None, Some(invoke), body);
            requests.push((net_id, id));
        }
        ClientEffect::Send { node, msg } => {
            let to = &service_nodes[node];
            let body = Message::Design(boxes.wrap(msg));
            world.net.send(name, to, None, Some(invoke), body);
        }
        ClientEffect::SetTimer { id, after_ms } => {
            timers.set_from(true_ns_in(now_ns), id, after_ms);
        }
        ClientEffect::CancelTimer(id) => timers.cancel(id),
        ClientEffect::Complete(result) => {
            let (record, outcome) = completion(tpl, result);
            let retired = record.op_type == OpType::Info;
            world.op_cached(record, clock);
            if retired {
                **process = world.new_process();
            }
            ended.result = Some(outcome);
        }
        ClientEffect::Believe { token, until_ms } => {
            // Valid until `until_ms` on the monotonic clock, or until told otherwise when
            // the client does not check validity.
            let until = spec.validity_check.then_some(until_ms);
            world.believe(name, &spec.lock, token, until);
        }
        ClientEffect::Lost { reason } => {
            world.end_belief(name, &reason);
            ended.lost = true;
        }
        ClientEffect::RenewNow => workload.renew_now(),
        ClientEffect::StopRenewing => workload.stop_renewing(),
        // Split off before it reaches here (`feed`, `pass_design_safepoints`).
        ClientEffect::Safepoint(_) => unreachable!("a safepoint is not applied"),
    }
}
