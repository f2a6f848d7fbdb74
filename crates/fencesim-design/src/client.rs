//! Client protocols: how a client acquires, renews and releases a lease.

use crate::message::{DesignMessage, RequestId};
use crate::time::{Now, TimerId};

/// The lock operation the harness's workload loop begins; each is one Jepsen operation
/// (invoke, then ok, fail or info), however many requests the protocol makes for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockOp {
    /// Take the lease (a failed attempt is retried by the workload after a seeded backoff).
    Acquire,
    /// Keep the lease with `token` alive (a keepalive).
    Renew {
        /// The token the acquire completed with.
        token: u64,
    },
    /// Give the lease with `token` back.
    Release {
        /// The token the acquire completed with.
        token: u64,
    },
}

/// How an operation ended, as Jepsen's completions say it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpResult {
    /// It took effect. An acquire names the fencing token the client will present (or, for a
    /// design without fencing tokens, the opaque value it presents instead).
    Ok {
        /// The token (acquire), or `None` (renew, release).
        token: Option<u64>,
    },
    /// It did not take effect, for the reason given (`"held by c2"`).
    Fail {
        /// Why, for the history and reports.
        error: String,
    },
    /// Nobody knows (no reply in time): Jepsen's `info`. The harness retires the client's
    /// process and continues under a new one, as Jepsen does.
    Unknown {
        /// Why, for the history and reports (`"no reply within 500 ms"`).
        error: String,
    },
}

/// One effect of a client protocol, applied by the harness in the order pushed.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientEffect<M> {
    /// Send request `msg` to the lock service's node `node`; its reply comes back as `id`.
    Request {
        /// The id [`ClientCtx::request`] returned.
        id: RequestId,
        /// The receiving node: its index in [`ClientInfo::service_nodes`].
        node: usize,
        /// The request.
        msg: M,
    },
    /// Send `msg` to the lock service's node `node`, expecting no reply (any that comes is
    /// dropped).
    Send {
        /// The receiving node: its index in [`ClientInfo::service_nodes`].
        node: usize,
        /// The message.
        msg: M,
    },
    /// Call [`ClientProtocol::on_timer`] with `id` after `after_ms` of simulated time.
    SetTimer {
        /// The timer.
        id: TimerId,
        /// How long from now, ms (at least 1).
        after_ms: u64,
    },
    /// Forget timer `id` if it is set.
    CancelTimer(TimerId),
    /// The current operation ended.
    Complete(OpResult),
    /// The client now believes it holds the lease with `token` until `until_ms` on its
    /// monotonic clock (a second call for the same token extends it).
    Believe {
        /// The lease's token.
        token: u64,
        /// Until when, ms of the client's monotonic clock.
        until_ms: i64,
    },
    /// The client knows its lease is gone (told so, or its extension failed): it stops
    /// believing it holds it, and the workload abandons the rest of its cycle.
    Lost {
        /// Why, for the history (`"told the lease is lost"`).
        reason: String,
    },
    /// Ask the workload to renew at once, before its first read, if it renews at all: a lease
    /// granted from a queue counted its deadline from a request long ago.
    RenewNow,
    /// The client's keepalive stream ended silently (case K09): the workload sends no more
    /// renewals this cycle, but goes on working and writes.
    StopRenewing,
    /// The client passes the design's safepoint of this name ([`crate::Safepoint`]): a fault
    /// triggered on it strikes here, before the effects pushed after it are applied (a pause
    /// here delays them: a claim computed before it is sent after it).
    Safepoint(&'static str),
}

/// What the harness lends a client protocol for one call: the client's clocks, and seeded
/// randomness from the client's own stream of the root seed.
pub trait ClientEnv {
    /// The client's clocks now (the same instant throughout one call).
    fn now(&self) -> Now;
    /// A uniform draw from `low..high` (`low < high`).
    fn range_u64(&mut self, low: u64, high: u64) -> u64;
}

/// What a client protocol's handler is given: the client's clocks, its randomness, and where
/// its effects go.
pub struct ClientCtx<'a, M> {
    effects: &'a mut dyn FnMut(ClientEffect<M>),
    last_request: &'a mut u64,
    env: &'a mut dyn ClientEnv,
}

impl<M> std::fmt::Debug for ClientCtx<'_, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCtx")
            .field("now", &self.env.now())
            .field("last_request", &self.last_request)
            .finish()
    }
}

impl<'a, M: DesignMessage> ClientCtx<'a, M> {
    /// A context whose effects go to `effects` in the order pushed (the harness applies them;
    /// a test driver may collect them: `&mut |e| seen.push(e)`), whose request ids count on from
    /// `last_request`, and whose clocks and draws come from `env`.
    pub fn new(
        effects: &'a mut dyn FnMut(ClientEffect<M>),
        last_request: &'a mut u64,
        env: &'a mut dyn ClientEnv,
    ) -> Self {
        ClientCtx {
            effects,
            last_request,
            env,
        }
    }

    /// The client's clocks now. Every reading within one call is the same instant (read when
    /// asked: a call that needs no clock costs no reading).
    pub fn now(&self) -> Now {
        self.env.now()
    }

    /// Send request `msg` to the lock service's node `node` (its index in
    /// [`ClientInfo::service_nodes`]); returns the id its reply will come back under.
    pub fn request(&mut self, node: usize, msg: M) -> RequestId {
        *self.last_request += 1;
        let id = RequestId(*self.last_request);
        (self.effects)(ClientEffect::Request { id, node, msg });
        id
    }

    /// Send `msg` to the lock service's node `node` without waiting for an answer.
    pub fn send(&mut self, node: usize, msg: M) {
        (self.effects)(ClientEffect::Send { node, msg });
    }

    /// Set timer `id` to fire after `after_ms` ms (replacing it if set).
    pub fn set_timer(&mut self, id: TimerId, after_ms: u64) {
        (self.effects)(ClientEffect::SetTimer { id, after_ms });
    }

    /// Cancel timer `id`.
    pub fn cancel_timer(&mut self, id: TimerId) {
        (self.effects)(ClientEffect::CancelTimer(id));
    }

    /// End the current operation with `result`.
    pub fn complete(&mut self, result: OpResult) {
        (self.effects)(ClientEffect::Complete(result));
    }

    /// Believe the lease with `token` held until `until_ms` (monotonic clock).
    pub fn believe(&mut self, token: u64, until_ms: i64) {
        (self.effects)(ClientEffect::Believe { token, until_ms });
    }

    /// The lease is known lost, for `reason`.
    pub fn lost(&mut self, reason: impl Into<String>) {
        (self.effects)(ClientEffect::Lost {
            reason: reason.into(),
        });
    }

    /// Renew at once (see [`ClientEffect::RenewNow`]).
    pub fn renew_now(&mut self) {
        (self.effects)(ClientEffect::RenewNow);
    }

    /// Stop renewing this cycle (see [`ClientEffect::StopRenewing`]).
    pub fn stop_renewing(&mut self) {
        (self.effects)(ClientEffect::StopRenewing);
    }

    /// Pass the design's safepoint `name`, one of the [`crate::Safepoint`]s its
    /// [`ServiceShape::safepoints`](crate::ServiceShape::safepoints) declares for the client
    /// side (see [`ClientEffect::Safepoint`]). Effects pushed after it wait for it. The harness
    /// panics on a name the design did not declare: a design bug, which a test finds at once.
    pub fn safepoint(&mut self, name: &'static str) {
        (self.effects)(ClientEffect::Safepoint(name));
    }

    /// A seeded uniform draw from `low..high`.
    pub fn random_range(&mut self, low: u64, high: u64) -> u64 {
        self.env.range_u64(low, high)
    }
}

/// What a client protocol knows about the client it runs in, from the scenario's `[[clients]]`
/// entry and the harness.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientInfo {
    /// The client's node name.
    pub name: String,
    /// The lock it takes.
    pub lock: String,
    /// The TTL it asks for, ms.
    pub ttl_ms: u64,
    /// How much earlier than the TTL it stops trusting its lease, ms (its clock-drift margin).
    pub safety_margin_ms: u64,
    /// How long it waits for a reply before the operation's outcome is unknown, ms.
    pub timeout_ms: u64,
    /// Which start of the client this is: 1, then one more after each crash and restart.
    pub incarnation: u64,
    /// The lock service's node names, in the scenario's order.
    pub service_nodes: Vec<String>,
}

impl ClientInfo {
    /// The conservative end of a lease whose request was sent at `sent_ms` (monotonic clock):
    /// `sent_ms` + TTL - safety margin. Counting from the request rather than the reply allows
    /// for however long the request and its answer took (Redlock's validity reckoning).
    pub fn valid_until_ms(&self, sent_ms: i64) -> i64 {
        (sent_ms + self.ttl_ms as i64).saturating_sub(self.safety_margin_ms as i64)
    }
}

/// The client side of a lock protocol: an event-driven state machine with its own timers.
///
/// The workload loop (acquire, read, work while renewing, write with the token, release) is
/// the harness's (`fencesim-workload`). For each lock operation it records the invoke, calls
/// [`begin`](ClientProtocol::begin), and then feeds the protocol replies, other messages and
/// timers until the protocol pushes [`ClientEffect::Complete`] (exactly once per operation).
/// Replies to requests of an earlier operation are dropped, as a client's connection layer
/// drops answers nobody waits for. A protocol must set a timer for every wait, or its client
/// waits forever.
///
/// Messages the protocol did not ask for (a queued grant, a watch, a revocation) arrive
/// through [`on_message`](ClientProtocol::on_message) while an operation is in progress.
///
/// `Send + Sync`: `fencesim verify` shares one copy of a state among the search states that
/// hold it alike, across its worker threads (plain data is both; a `RefCell` or `Rc` is not).
pub trait ClientProtocol: Send + Sync + 'static {
    /// The design's message type.
    type Msg: DesignMessage;

    /// Begin `op`.
    fn begin(&mut self, op: LockOp, ctx: &mut ClientCtx<'_, Self::Msg>);

    /// The reply to `request` arrived.
    fn on_reply(&mut self, request: RequestId, msg: Self::Msg, ctx: &mut ClientCtx<'_, Self::Msg>);

    /// A message that answers no request of this operation arrived from `from`. The default
    /// ignores it.
    fn on_message(&mut self, from: &str, msg: Self::Msg, ctx: &mut ClientCtx<'_, Self::Msg>) {
        let _ = (from, msg, ctx);
    }

    /// Timer `id` fired. The default ignores it.
    fn on_timer(&mut self, id: TimerId, ctx: &mut ClientCtx<'_, Self::Msg>) {
        let _ = (id, ctx);
    }
}
