//! The Redlock client (antirez's algorithm, as Kleppmann 2016 examines it): the client itself
//! locks N independent Redis nodes and decides, by [`Redlock`], whether it holds the lock. Each
//! step is one Jepsen operation (acquire, renew, release); the per-node requests it fans out
//! are not operations of their own.

use fencesim_design::{
    ClientCtx, ClientInfo, ClientProtocol, LockOp, OpResult, RequestId, TimerId,
};

use crate::decision::{Decision, Redlock, RedlockConfig};
use crate::message::RedlockMessage;

/// The token a Redlock client presents to the resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenSource {
    /// The acquisition's random value: unordered, so a resource can only compare it for
    /// equality (case K23).
    Random,
    /// `INCR` on the first node after a successful acquisition: ordered, but one node's
    /// counter, which a crash without fsync can send back (case K17 on Redlock).
    Counter,
}

/// A Redlock client's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedlockClientConfig {
    /// The clock-drift allowance, ppm of the TTL.
    pub drift_ppm: u64,
    /// Whether the validity is computed from the time the acquisition started (correct) or
    /// from when the replies were in (case K05: a client paused mid-acquisition believes it
    /// has the whole TTL).
    pub recheck_elapsed: bool,
    /// How long it waits for the nodes' replies, ms.
    pub node_timeout_ms: u64,
    /// The token it presents.
    pub token_source: TokenSource,
}

/// The wait for the fan-out's replies.
const FAN_OUT: TimerId = TimerId(1);

/// One request to each of some nodes, and their replies.
#[derive(Clone, Debug)]
struct FanOut {
    requests: Vec<Option<RequestId>>,
    replies: Vec<Option<RedlockMessage>>,
    waiting: usize,
}

/// Where the current operation is.
#[derive(Clone, Debug)]
enum Step {
    Idle,
    /// Acquire: SET NX PX to every node with `value`.
    Locking {
        value: u64,
        redlock: Redlock,
    },
    /// Acquire: a majority is held until `valid_until_ms`; INCR on the first node for a token.
    Counting {
        value: u64,
        valid_until_ms: i64,
    },
    /// Renew of the lease with `token`: compare-and-extend everywhere.
    Extending {
        token: u64,
        redlock: Redlock,
    },
    /// Release: compare-and-delete everywhere.
    Releasing,
}

/// A Redlock client.
#[derive(Clone, Debug)]
pub struct RedlockClient {
    info: ClientInfo,
    config: RedlockClientConfig,
    /// The random value of the lock held now (release and extend compare it).
    lock_value: Option<u64>,
    step: Step,
    fan_out: Option<FanOut>,
}

type Ctx<'a> = ClientCtx<'a, RedlockMessage>;

impl RedlockClient {
    /// A client `info` with `config`.
    pub fn new(info: ClientInfo, config: RedlockClientConfig) -> Self {
        RedlockClient {
            info,
            config,
            lock_value: None,
            step: Step::Idle,
            fan_out: None,
        }
    }

    fn redlock(&self, started_ms: i64) -> Redlock {
        let config = RedlockConfig {
            nodes: self.info.service_nodes.len(),
            ttl_ms: self.info.ttl_ms,
            drift_ppm: self.config.drift_ppm,
            recheck_elapsed: self.config.recheck_elapsed,
        };
        Redlock::begin(config, started_ms)
    }

    /// Send `requests[i]` (if any) to node `i` at once, and wait up to the node timeout.
    fn fan_out(&mut self, requests: Vec<Option<RedlockMessage>>, ctx: &mut Ctx<'_>) {
        let requests: Vec<Option<RequestId>> = requests
            .into_iter()
            .enumerate()
            .map(|(node, msg)| msg.map(|m| ctx.request(node, m)))
            .collect();
        let waiting = requests.iter().flatten().count();
        ctx.set_timer(FAN_OUT, self.config.node_timeout_ms);
        self.fan_out = Some(FanOut {
            replies: vec![None; requests.len()],
            requests,
            waiting,
        });
    }

    /// The same request to every node.
    fn ask_every_node(&mut self, msg: RedlockMessage, ctx: &mut Ctx<'_>) {
        let requests = vec![Some(msg); self.info.service_nodes.len()];
        self.fan_out(requests, ctx);
    }

    /// The validity a client believes in: until the decision's end, less its safety margin.
    fn believe(&self, token: u64, valid_until_ms: i64, ctx: &mut Ctx<'_>) {
        ctx.believe(token, valid_until_ms - self.info.safety_margin_ms as i64);
    }

    fn complete(&mut self, result: OpResult, ctx: &mut Ctx<'_>) {
        self.step = Step::Idle;
        ctx.complete(result);
    }

    fn fail(&mut self, error: String, ctx: &mut Ctx<'_>) {
        self.complete(OpResult::Fail { error }, ctx);
    }

    /// Undo a partial acquisition everywhere, without waiting: the keys expire anyway.
    fn unlock_everywhere(&self, value: u64, ctx: &mut Ctx<'_>) {
        for node in 0..self.info.service_nodes.len() {
            let key = self.info.lock.clone();
            ctx.send(node, RedlockMessage::Delete { key, value });
        }
    }

    /// Every node has answered, or the wait is over: decide.
    fn fan_out_done(&mut self, ctx: &mut Ctx<'_>) {
        let Some(fan_out) = self.fan_out.take() else {
            return;
        };
        let now_ms = ctx.now().mono_ms;
        let replies = fan_out.replies;
        match std::mem::replace(&mut self.step, Step::Idle) {
            Step::Idle => {}
            Step::Locking { value, mut redlock } => {
                for (node, reply) in replies.iter().enumerate() {
                    redlock.on_reply(node, matches!(reply, Some(RedlockMessage::SetReply(true))));
                }
                self.locked(value, redlock.decide(now_ms), ctx);
            }
            Step::Counting {
                value,
                valid_until_ms,
            } => match replies[0] {
                Some(RedlockMessage::IncrReply(token)) => {
                    self.lock_value = Some(value);
                    self.complete(OpResult::Ok { token: Some(token) }, ctx);
                    self.believe(token, valid_until_ms, ctx);
                }
                _ => {
                    self.fail("no token from the counter node".into(), ctx);
                    self.unlock_everywhere(value, ctx);
                }
            },
            Step::Extending { token, mut redlock } => {
                for (node, reply) in replies.iter().enumerate() {
                    let extended = matches!(reply, Some(RedlockMessage::ExtendReply(true)));
                    redlock.on_reply(node, extended);
                }
                match redlock.decide(now_ms) {
                    Decision::Acquired { valid_until_ms, .. } => {
                        self.complete(OpResult::Ok { token: None }, ctx);
                        self.believe(token, valid_until_ms, ctx);
                    }
                    _ => {
                        self.fail("lock lost".into(), ctx);
                        ctx.lost("extension failed");
                    }
                }
            }
            Step::Releasing => {
                let deleted = replies
                    .iter()
                    .filter(|r| matches!(r, Some(RedlockMessage::DeleteReply(true))))
                    .count();
                if deleted > self.info.service_nodes.len() / 2 {
                    self.complete(OpResult::Ok { token: None }, ctx);
                } else {
                    self.fail(format!("our value was on only {deleted} nodes"), ctx);
                }
            }
        }
    }

    /// The acquisition with `value` was decided.
    fn locked(&mut self, value: u64, decision: Decision, ctx: &mut Ctx<'_>) {
        let error = match decision {
            Decision::Acquired { valid_until_ms, .. } => match self.config.token_source {
                TokenSource::Random => {
                    self.lock_value = Some(value);
                    self.complete(OpResult::Ok { token: Some(value) }, ctx);
                    self.believe(value, valid_until_ms, ctx);
                    return;
                }
                TokenSource::Counter => {
                    let incr = RedlockMessage::Incr {
                        counter: format!("{}:token", self.info.lock),
                    };
                    let mut requests = vec![None; self.info.service_nodes.len()];
                    requests[0] = Some(incr);
                    self.fan_out(requests, ctx);
                    self.step = Step::Counting {
                        value,
                        valid_until_ms,
                    };
                    return;
                }
            },
            Decision::NoMajority { granted } => {
                let nodes = self.info.service_nodes.len();
                format!("only {granted} of {nodes} nodes granted")
            }
            Decision::Expired { validity_ms } => {
                format!("a majority granted, but the validity had run out ({validity_ms} ms)")
            }
        };
        self.fail(error, ctx);
        self.unlock_everywhere(value, ctx);
    }
}

impl ClientProtocol for RedlockClient {
    type Msg = RedlockMessage;

    fn begin(&mut self, op: LockOp, ctx: &mut Ctx<'_>) {
        let key = self.info.lock.clone();
        let ttl_ms = self.info.ttl_ms;
        match op {
            LockOp::Acquire => {
                // 53 bits, so the value survives JSON tools that read numbers as doubles.
                let value = ctx.random_range(1, 1 << 53);
                let redlock = self.redlock(ctx.now().mono_ms);
                self.ask_every_node(RedlockMessage::Set { key, value, ttl_ms }, ctx);
                self.step = Step::Locking { value, redlock };
            }
            LockOp::Renew { token } => {
                let value = self.lock_value.unwrap_or(token);
                let redlock = self.redlock(ctx.now().mono_ms);
                self.ask_every_node(RedlockMessage::Extend { key, value, ttl_ms }, ctx);
                self.step = Step::Extending { token, redlock };
            }
            LockOp::Release { token } => {
                let value = self.lock_value.take().unwrap_or(token);
                self.ask_every_node(RedlockMessage::Delete { key, value }, ctx);
                self.step = Step::Releasing;
            }
        }
    }

    fn on_reply(&mut self, request: RequestId, msg: RedlockMessage, ctx: &mut Ctx<'_>) {
        let Some(fan_out) = self.fan_out.as_mut() else {
            return;
        };
        let slot = fan_out.requests.iter().position(|r| *r == Some(request));
        let Some(node) = slot.filter(|n| fan_out.replies[*n].is_none()) else {
            return;
        };
        fan_out.replies[node] = Some(msg);
        fan_out.waiting -= 1;
        if fan_out.waiting == 0 {
            ctx.cancel_timer(FAN_OUT);
            self.fan_out_done(ctx);
        }
    }

    fn on_timer(&mut self, id: TimerId, ctx: &mut Ctx<'_>) {
        if id == FAN_OUT {
            self.fan_out_done(ctx);
        }
    }
}
