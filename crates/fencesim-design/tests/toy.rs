//! A toy design (one lock server with a token counter, and its client) driven through the
//! design API by a small sans-IO driver: virtual time, a network with a fixed delay, crashes
//! that keep only what was persisted. It shows the API carries a whole design, and pins the
//! contract the harness keeps (effects applied in order, one completion per operation, timers
//! replaced by id, synced state surviving a crash and unsynced state not).

use std::collections::BTreeMap;

use fencesim_design::{
    ClientCtx, ClientEffect, ClientEnv, ClientInfo, ClientProtocol, DesignMessage, Durability,
    LockNode, LockOp, MessageKind, NodeCtx, NodeEffect, NodeStart, Now, OpResult, Origin,
    RequestId, ServiceEvent, ServiceEventKind, TimerId,
};

#[derive(Clone, Debug, PartialEq)]
enum ToyMsg {
    Acquire { holder: String, ttl_ms: u64 },
    Granted { token: u64 },
    Busy { holder: String },
}

impl DesignMessage for ToyMsg {
    fn kind(&self) -> MessageKind {
        match self {
            ToyMsg::Acquire { .. } => MessageKind::Acquire,
            ToyMsg::Granted { .. } | ToyMsg::Busy { .. } => MessageKind::AcquireReply,
        }
    }
}

const EXPIRY: TimerId = TimerId(1);

/// Grants one lease at a time; expires it by a timer; keeps its token counter on disk.
struct ToyServer {
    durability: Durability,
    last_token: u64,
    holder: Option<(String, u64)>,
}

impl ToyServer {
    fn new(durability: Durability, durable: Option<u64>) -> Self {
        ToyServer {
            durability,
            last_token: durable.unwrap_or(0),
            holder: None,
        }
    }
}

impl LockNode for ToyServer {
    type Msg = ToyMsg;
    type Durable = u64;
    type Config = Durability;

    fn start(config: &Durability, start: NodeStart<u64>, _: &mut NodeCtx<'_, ToyMsg, u64>) -> Self {
        ToyServer::new(*config, start.durable)
    }

    fn on_message(&mut self, origin: &Origin, msg: ToyMsg, ctx: &mut NodeCtx<'_, ToyMsg, u64>) {
        let ToyMsg::Acquire { holder, ttl_ms } = msg else {
            return;
        };
        if let Some((current, _)) = &self.holder {
            let busy = ToyMsg::Busy {
                holder: current.clone(),
            };
            ctx.reply(origin, busy);
            return;
        }
        self.last_token += 1;
        let token = self.last_token;
        ctx.persist(token, self.durability);
        let mut grant =
            ServiceEvent::new(ServiceEventKind::Grant, "l", &holder, token, origin.op());
        grant.expires_at_ms = Some(ctx.now().mono_ms + ttl_ms as i64);
        ctx.record(grant);
        ctx.set_timer(EXPIRY, ttl_ms);
        self.holder = Some((holder, token));
        ctx.reply(origin, ToyMsg::Granted { token });
    }

    fn on_timer(&mut self, id: TimerId, ctx: &mut NodeCtx<'_, ToyMsg, u64>) {
        if let (EXPIRY, Some((holder, token))) = (id, self.holder.take()) {
            ctx.record(ServiceEvent::new(
                ServiceEventKind::Expire,
                "l",
                holder,
                token,
                None,
            ));
        }
    }
}

const REPLY_DEADLINE: TimerId = TimerId(7);

/// Asks the server, gives up after its timeout.
struct ToyClient {
    info: ClientInfo,
    waiting: Option<(RequestId, i64)>,
}

impl ClientProtocol for ToyClient {
    type Msg = ToyMsg;

    fn begin(&mut self, op: LockOp, ctx: &mut ClientCtx<'_, ToyMsg>) {
        assert_eq!(op, LockOp::Acquire, "the toy only acquires");
        let msg = ToyMsg::Acquire {
            holder: self.info.name.clone(),
            ttl_ms: self.info.ttl_ms,
        };
        let id = ctx.request(0, msg);
        self.waiting = Some((id, ctx.now().mono_ms));
        ctx.set_timer(REPLY_DEADLINE, self.info.timeout_ms);
    }

    fn on_reply(&mut self, request: RequestId, msg: ToyMsg, ctx: &mut ClientCtx<'_, ToyMsg>) {
        let Some((waiting, sent_ms)) = self.waiting else {
            return;
        };
        if waiting != request {
            return;
        }
        self.waiting = None;
        ctx.cancel_timer(REPLY_DEADLINE);
        match msg {
            ToyMsg::Granted { token } => {
                ctx.complete(OpResult::Ok { token: Some(token) });
                ctx.believe(token, self.info.valid_until_ms(sent_ms));
            }
            ToyMsg::Busy { holder } => ctx.complete(OpResult::Fail {
                error: format!("held by {holder}"),
            }),
            ToyMsg::Acquire { .. } => unreachable!("a server never asks"),
        }
    }

    fn on_timer(&mut self, id: TimerId, ctx: &mut ClientCtx<'_, ToyMsg>) {
        if id == REPLY_DEADLINE && self.waiting.take().is_some() {
            ctx.complete(OpResult::Unknown {
                error: format!("no reply within {} ms", self.info.timeout_ms),
            });
        }
    }
}

/// The driver's clock reading for one call, and draws counted up from 0 (so a test can see
/// the protocol asked).
struct Env {
    now: Now,
    draws: u64,
}

impl ClientEnv for Env {
    fn now(&self) -> Now {
        self.now
    }

    fn range_u64(&mut self, low: u64, high: u64) -> u64 {
        self.draws += 1;
        low + self.draws % (high - low)
    }
}

/// What the driver saw, in order.
#[derive(Debug, PartialEq)]
enum Seen {
    Event(i64, ServiceEventKind, String, u64),
    Completed(i64, String, OpResult),
    Believed(String, u64, i64),
}

#[derive(Debug)]
enum Delivery {
    ToServer(Origin, ToyMsg),
    ToClient {
        client: usize,
        reply_to: u64,
        msg: ToyMsg,
    },
}

/// A network with a fixed one-way delay, one server, some clients, and virtual time in ms.
struct Driver {
    now_ms: i64,
    delay_ms: i64,
    server: Option<ToyServer>,
    durability: Durability,
    disk_synced: Option<u64>,
    disk_pending: Option<u64>,
    server_timers: BTreeMap<TimerId, i64>,
    clients: Vec<ToyClient>,
    client_timers: Vec<BTreeMap<TimerId, i64>>,
    last_request: Vec<u64>,
    /// Transport id → (client, request id) of requests still awaiting a reply.
    requests: BTreeMap<u64, (usize, RequestId)>,
    next_id: u64,
    in_flight: Vec<(i64, u64, Delivery)>,
    seen: Vec<Seen>,
}

impl Driver {
    fn new(durability: Durability, clients: &[&str]) -> Self {
        let info = |name: &str| ClientInfo {
            name: name.into(),
            lock: "l".into(),
            ttl_ms: 100,
            safety_margin_ms: 0,
            timeout_ms: 50,
            incarnation: 1,
            service_nodes: vec!["server".into()],
        };
        Driver {
            now_ms: 0,
            delay_ms: 5,
            server: Some(ToyServer::new(durability, None)),
            durability,
            disk_synced: None,
            disk_pending: None,
            server_timers: BTreeMap::new(),
            clients: clients
                .iter()
                .map(|n| ToyClient {
                    info: info(n),
                    waiting: None,
                })
                .collect(),
            client_timers: vec![BTreeMap::new(); clients.len()],
            last_request: vec![0; clients.len()],
            requests: BTreeMap::new(),
            next_id: 0,
            in_flight: Vec::new(),
            seen: Vec::new(),
        }
    }

    fn now(&self) -> Now {
        Now {
            mono_ms: self.now_ms,
            wall_ms: self.now_ms + 1_000,
        }
    }

    fn client_call(
        &mut self,
        c: usize,
        f: impl FnOnce(&mut ToyClient, &mut ClientCtx<'_, ToyMsg>),
    ) {
        let mut effects = Vec::new();
        let mut env = Env {
            now: self.now(),
            draws: 0,
        };
        let mut push = |e| effects.push(e);
        let mut ctx = ClientCtx::new(&mut push, &mut self.last_request[c], &mut env);
        f(&mut self.clients[c], &mut ctx);
        for effect in effects {
            match effect {
                ClientEffect::Request { id, node, msg } => {
                    assert_eq!(self.clients[c].info.service_nodes[node], "server");
                    self.next_id += 1;
                    self.requests.insert(self.next_id, (c, id));
                    let origin = Origin::new(self.clients[c].info.name.clone(), self.next_id, None);
                    let at = self.now_ms + self.delay_ms;
                    self.in_flight
                        .push((at, self.next_id, Delivery::ToServer(origin, msg)));
                }
                ClientEffect::SetTimer { id, after_ms } => {
                    self.client_timers[c].insert(id, self.now_ms + after_ms as i64);
                }
                ClientEffect::CancelTimer(id) => {
                    self.client_timers[c].remove(&id);
                }
                ClientEffect::Complete(result) => {
                    let name = self.clients[c].info.name.clone();
                    self.seen.push(Seen::Completed(self.now_ms, name, result));
                }
                ClientEffect::Believe { token, until_ms } => {
                    let name = self.clients[c].info.name.clone();
                    self.seen.push(Seen::Believed(name, token, until_ms));
                }
                other => panic!("the toy client never asks for {other:?}"),
            }
        }
    }

    fn server_call(&mut self, f: impl FnOnce(&mut ToyServer, &mut NodeCtx<'_, ToyMsg, u64>)) {
        let now = self.now();
        let Some(server) = self.server.as_mut() else {
            return; // crashed: the message is lost
        };
        let mut effects = Vec::new();
        let clock = move || now;
        f(server, &mut NodeCtx::new(&clock, &mut effects));
        for effect in effects {
            match effect {
                NodeEffect::Reply { origin, msg } => {
                    let (client, _) = self.requests[&origin.id()];
                    let delivery = Delivery::ToClient {
                        client,
                        reply_to: origin.id(),
                        msg,
                    };
                    self.next_id += 1;
                    self.in_flight
                        .push((self.now_ms + self.delay_ms, self.next_id, delivery));
                }
                NodeEffect::SetTimer { id, after_ms } => {
                    self.server_timers.insert(id, self.now_ms + after_ms as i64);
                }
                NodeEffect::Persist { state, durability } => match durability {
                    Durability::Synced => {
                        self.disk_synced = Some(state);
                        self.disk_pending = None;
                    }
                    Durability::Unsynced => self.disk_pending = Some(state),
                },
                NodeEffect::Record(e) => {
                    self.seen
                        .push(Seen::Event(self.now_ms, e.kind, e.holder, e.token))
                }
                other => panic!("the toy server never asks for {other:?}"),
            }
        }
    }

    /// Kill the server and start it again from its disk.
    fn crash_and_restart(&mut self) {
        self.disk_pending = None;
        self.server_timers.clear();
        let start = NodeStart {
            name: "server".into(),
            index: 0,
            service_nodes: vec!["server".into()],
            incarnation: 2,
            durable: self.disk_synced,
        };
        let mut effects = Vec::new();
        let now = self.now();
        let clock = move || now;
        let mut ctx = NodeCtx::new(&clock, &mut effects);
        self.server = Some(ToyServer::start(&self.durability, start, &mut ctx));
        assert!(effects.is_empty(), "the toy starts without effects");
    }

    /// Run until `until_ms`, delivering messages and firing timers in time order (messages
    /// first at equal times, then the server's timers, then the clients').
    fn run_until(&mut self, until_ms: i64) {
        loop {
            let message = self.in_flight.iter().map(|(at, id, _)| (*at, *id)).min();
            let server_timer = self.server_timers.iter().map(|(id, at)| (*at, *id)).min();
            let client_timer = (0..self.clients.len())
                .flat_map(|c| {
                    self.client_timers[c]
                        .iter()
                        .map(move |(id, at)| (*at, c, *id))
                })
                .min();
            let next = [
                message.map(|m| m.0),
                server_timer.map(|t| t.0),
                client_timer.map(|t| t.0),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(at) = next.filter(|at| *at <= until_ms) else {
                self.now_ms = until_ms;
                return;
            };
            self.now_ms = at;
            if let Some((m_at, id)) = message.filter(|m| m.0 == at) {
                let slot = self
                    .in_flight
                    .iter()
                    .position(|(a, i, _)| (*a, *i) == (m_at, id));
                let (_, _, delivery) = self.in_flight.swap_remove(slot.expect("found above"));
                match delivery {
                    Delivery::ToServer(origin, msg) => {
                        self.server_call(|s, ctx| s.on_message(&origin, msg, ctx))
                    }
                    Delivery::ToClient {
                        client,
                        reply_to,
                        msg,
                    } => {
                        if let Some((_, request)) = self.requests.remove(&reply_to) {
                            self.client_call(client, |p, ctx| p.on_reply(request, msg, ctx));
                        }
                    }
                }
            } else if let Some((_, id)) = server_timer.filter(|t| t.0 == at) {
                self.server_timers.remove(&id);
                self.server_call(|s, ctx| s.on_timer(id, ctx));
            } else if let Some((_, c, id)) = client_timer {
                self.client_timers[c].remove(&id);
                self.client_call(c, |p, ctx| p.on_timer(id, ctx));
            }
        }
    }
}

fn acquire(d: &mut Driver, client: usize) {
    d.client_call(client, |p, ctx| p.begin(LockOp::Acquire, ctx));
}

#[test]
fn a_grant_a_refusal_and_an_expiry_in_order() {
    let mut d = Driver::new(Durability::Synced, &["c1", "c2"]);
    acquire(&mut d, 0);
    d.run_until(20);
    acquire(&mut d, 1);
    d.run_until(200);
    assert_eq!(
        d.seen,
        vec![
            Seen::Event(5, ServiceEventKind::Grant, "c1".into(), 1),
            Seen::Completed(10, "c1".into(), OpResult::Ok { token: Some(1) }),
            Seen::Believed("c1".into(), 1, 100),
            Seen::Completed(
                30,
                "c2".into(),
                OpResult::Fail {
                    error: "held by c1".into()
                }
            ),
            Seen::Event(105, ServiceEventKind::Expire, "c1".into(), 1),
        ]
    );
    assert!(
        d.client_timers.iter().all(BTreeMap::is_empty),
        "replies cancel the deadlines"
    );
}

#[test]
fn a_lost_request_completes_as_unknown_at_the_clients_deadline() {
    let mut d = Driver::new(Durability::Synced, &["c1"]);
    d.server = None;
    acquire(&mut d, 0);
    d.run_until(1_000);
    let unknown = OpResult::Unknown {
        error: "no reply within 50 ms".into(),
    };
    assert_eq!(d.seen, vec![Seen::Completed(50, "c1".into(), unknown)]);
}

#[test]
fn synced_tokens_survive_a_crash_and_unsynced_ones_do_not() {
    for (durability, second_token) in [(Durability::Synced, 2), (Durability::Unsynced, 1)] {
        let mut d = Driver::new(durability, &["c1", "c2"]);
        acquire(&mut d, 0);
        d.run_until(20);
        d.crash_and_restart();
        acquire(&mut d, 1);
        d.run_until(40);
        let grants: Vec<u64> = d
            .seen
            .iter()
            .filter_map(|s| match s {
                Seen::Event(_, ServiceEventKind::Grant, _, token) => Some(*token),
                _ => None,
            })
            .collect();
        // Unsynced, the restarted server counts from 0 again and hands out token 1 twice: the
        // crash-amnesia defect the fsync knob models.
        assert_eq!(grants, vec![1, second_token], "{durability:?}");
    }
}

#[test]
fn request_ids_count_per_client_and_kinds_name_the_operation() {
    let mut effects = Vec::new();
    let mut last = 0;
    let mut env = Env {
        now: Now::default(),
        draws: 0,
    };
    let mut push = |e: ClientEffect<ToyMsg>| effects.push(e);
    let mut ctx = ClientCtx::<ToyMsg>::new(&mut push, &mut last, &mut env);
    let msg = ToyMsg::Acquire {
        holder: "c".into(),
        ttl_ms: 1,
    };
    assert_eq!(ctx.request(0, msg.clone()), RequestId(1));
    assert_eq!(ctx.request(0, msg.clone()), RequestId(2));
    assert_eq!(ctx.random_range(10, 13), 11);
    assert_eq!(last, 2);
    assert_eq!(msg.kind().as_str(), "acquire");
    assert_eq!(
        ToyMsg::Granted { token: 1 }.kind().as_str(),
        "acquire-reply"
    );
}
