//! The client side of ZooKeeper's lock recipe ("Locks" in ZooKeeper's recipes; Curator's
//! `InterProcessMutex` follows it):
//!
//! 1. open a session (one per holding: it is the lease, kept alive by heartbeats);
//! 2. create an ephemeral sequential child under the lock's path;
//! 3. list the children: if ours is the lowest, we hold the lock, and its `czxid` is our
//!    fencing token;
//! 4. otherwise watch the child just below ours (not the lowest, which would wake every
//!    waiter at once: the herd effect), and when it is deleted go back to step 3.
//!
//! Step 4's "go back to step 3" is the point of the defect knob: a waiter that takes the lock
//! as soon as its predecessor goes, without listing again, holds it alongside the real holder
//! whenever the predecessor was itself a waiter that gave up or whose session expired.
//!
//! The client believes it holds the lock until the send time of the last request the server
//! answered, plus the session timeout, less its safety margin: the server cannot have
//! expired the session before then (it heard that request later), whatever the clocks' drift
//! within the margin.

use fencesim::design::{
    ClientCtx, ClientInfo, ClientProtocol, LockOp, OpResult, RequestId, TimerId,
};

use crate::messages::{SessionId, ZkMsg};

/// What a waiter does when the child it watches is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnPredecessorGone {
    /// List the children again, and hold the lock only if its child is now the lowest (the
    /// recipe).
    Recheck,
    /// Take the lock at once (the defect).
    Take,
}

/// A client's settings, from its `[[clients]]` knobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// `predecessor_gone`: what a waiter does when its watch fires.
    pub on_predecessor_gone: OnPredecessorGone,
    /// `acquire_wait_ms`: how long an acquire waits for the lock before it gives up, closing
    /// its session (Curator's `acquire(time, unit)`).
    pub acquire_wait_ms: u64,
}

/// The session this client holds or waits with.
#[derive(Clone, Copy, Debug)]
struct Session {
    id: SessionId,
    /// When the latest request the server answered on it was sent, ms of the client's
    /// monotonic clock: the server heard from the session no earlier.
    answered_sent_ms: i64,
}

/// Where the client is in the current operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// No operation, or the lock is held between operations.
    Idle,
    /// Acquire: waiting for the session.
    Connecting,
    /// Acquire: waiting for its child to be created.
    Creating,
    /// Acquire: waiting for the children's list.
    Listing,
    /// Acquire: watching child `pred`, the one just below its own.
    Watching { pred: u64 },
    /// Renew: waiting for the heartbeat's answer.
    Renewing,
    /// Release: waiting for the session's close.
    Releasing,
}

/// The answer to one request: no answer arrived within `timeout_ms`.
const REPLY: TimerId = TimerId(1);
/// While watching: list the children again (also the session's heartbeat while it waits).
const RECHECK: TimerId = TimerId(2);
/// The acquire has waited `acquire_wait_ms`.
const GIVE_UP: TimerId = TimerId(3);

/// One client of the recipe.
#[derive(Debug)]
pub struct ZkClient {
    config: ClientConfig,
    info: ClientInfo,
    session: Option<Session>,
    /// Its child of the lock's path: (sequence number, czxid).
    child: Option<(u64, u64)>,
    step: Step,
    /// The request awaited, the message it carried (to resend it) and when it was sent.
    waiting: Option<(RequestId, ZkMsg, i64)>,
}

impl ZkClient {
    /// A client of `info` with `config`, with no session yet.
    pub fn new(config: ClientConfig, info: ClientInfo) -> Self {
        ZkClient {
            config,
            info,
            session: None,
            child: None,
            step: Step::Idle,
            waiting: None,
        }
    }

    /// Send `msg` to the server and wait for its answer.
    fn ask(&mut self, step: Step, msg: ZkMsg, ctx: &mut ClientCtx<'_, ZkMsg>) {
        let sent_ms = ctx.now().mono_ms;
        let id = ctx.request(0, msg.clone());
        self.step = step;
        self.waiting = Some((id, msg, sent_ms));
        ctx.set_timer(REPLY, self.info.timeout_ms);
    }

    fn session_id(&self) -> SessionId {
        self.session.map_or(0, |s| s.id)
    }

    /// Step 3: list the lock's children.
    fn list(&mut self, ctx: &mut ClientCtx<'_, ZkMsg>) {
        let msg = ZkMsg::GetChildren {
            session: self.session_id(),
            lock: self.info.lock.clone(),
        };
        self.ask(Step::Listing, msg, ctx);
    }

    /// End the operation: no timer of it may fire in the next one.
    fn finish(&mut self, result: OpResult, ctx: &mut ClientCtx<'_, ZkMsg>) {
        for timer in [REPLY, RECHECK, GIVE_UP] {
            ctx.cancel_timer(timer);
        }
        self.step = Step::Idle;
        self.waiting = None;
        ctx.complete(result);
    }

    /// The lock is ours: complete the acquire with the child's czxid as the token.
    fn hold(&mut self, ctx: &mut ClientCtx<'_, ZkMsg>) {
        let (Some((_, czxid)), Some(session)) = (self.child, self.session) else {
            return;
        };
        self.finish(OpResult::Ok { token: Some(czxid) }, ctx);
        ctx.believe(czxid, self.info.valid_until_ms(session.answered_sent_ms));
    }

    /// Stop waiting for the lock: close the session (without waiting for the answer: if the
    /// close is lost, the session expires) and end the acquire. Its outcome is unknown once a
    /// child may exist: the server may have made it the holder meanwhile.
    fn give_up(&mut self, why: String, ctx: &mut ClientCtx<'_, ZkMsg>) {
        if let Some(session) = self.session.take() {
            ctx.send(
                0,
                ZkMsg::CloseSession {
                    session: session.id,
                },
            );
        }
        let result = match self.step {
            Step::Connecting => OpResult::Fail { error: why },
            _ => OpResult::Unknown { error: why },
        };
        self.child = None;
        self.finish(result, ctx);
    }

    /// Whether the session may still be alive by the client's own reckoning.
    fn session_alive(&self, ctx: &ClientCtx<'_, ZkMsg>) -> bool {
        self.session
            .is_some_and(|s| ctx.now().mono_ms < self.info.valid_until_ms(s.answered_sent_ms))
    }

    /// The answer to the awaited request, sent at `sent_ms`.
    fn answered(&mut self, msg: ZkMsg, sent_ms: i64, ctx: &mut ClientCtx<'_, ZkMsg>) {
        if let Some(session) = self.session.as_mut() {
            session.answered_sent_ms = session.answered_sent_ms.max(sent_ms);
        }
        match (self.step, msg) {
            (_, ZkMsg::NoSession { .. }) => self.session_gone(ctx),
            (Step::Connecting, ZkMsg::SessionCreated { session }) => {
                self.session = Some(Session {
                    id: session,
                    answered_sent_ms: sent_ms,
                });
                let create = ZkMsg::Create {
                    session,
                    lock: self.info.lock.clone(),
                };
                self.ask(Step::Creating, create, ctx);
            }
            (Step::Creating, ZkMsg::Created { seq, czxid }) => {
                self.child = Some((seq, czxid));
                self.list(ctx);
            }
            (Step::Listing, ZkMsg::Children { seqs }) => self.listed(&seqs, ctx),
            (Step::Watching { .. }, ZkMsg::Stat { exists: false }) => self.list(ctx),
            (Step::Watching { .. }, ZkMsg::Stat { exists: true }) => {
                // Wait for the watch, listing again now and then: a watch is lost with the
                // server's memory when it restarts, and the listing keeps the session alive.
                ctx.set_timer(RECHECK, (self.info.ttl_ms / 3).max(1));
            }
            (Step::Renewing, ZkMsg::Pong) => {
                self.finish(OpResult::Ok { token: None }, ctx);
                if let Some((_, czxid)) = self.child {
                    ctx.believe(czxid, self.info.valid_until_ms(sent_ms));
                }
            }
            (Step::Releasing, ZkMsg::Closed) => self.finish(OpResult::Ok { token: None }, ctx),
            (step, other) => unreachable!("{other:?} answers no request of step {step:?}"),
        }
    }

    /// Step 3's answer: hold the lock, or watch the child just below ours.
    fn listed(&mut self, seqs: &[u64], ctx: &mut ClientCtx<'_, ZkMsg>) {
        let Some((own, _)) = self.child else { return };
        if !seqs.contains(&own) {
            // Only the end of its session deletes a child, and the server answered on it.
            return self.give_up("its child vanished while its session lived".into(), ctx);
        }
        match seqs.iter().copied().filter(|s| *s < own).max() {
            None => self.hold(ctx),
            Some(pred) => {
                let exists = ZkMsg::Exists {
                    session: self.session_id(),
                    lock: self.info.lock.clone(),
                    seq: pred,
                };
                self.ask(Step::Watching { pred }, exists, ctx);
            }
        }
    }

    /// The server no longer knows the session: it expired, or a close went through.
    fn session_gone(&mut self, ctx: &mut ClientCtx<'_, ZkMsg>) {
        self.session = None;
        match self.step {
            Step::Renewing => {
                self.child = None;
                ctx.lost("its ZooKeeper session expired");
                self.finish(
                    OpResult::Fail {
                        error: "session expired".into(),
                    },
                    ctx,
                );
            }
            Step::Releasing => {
                self.child = None;
                self.finish(OpResult::Ok { token: None }, ctx);
            }
            _ => self.give_up("its session expired while it waited".into(), ctx),
        }
    }
}

impl ClientProtocol for ZkClient {
    type Msg = ZkMsg;

    fn begin(&mut self, op: LockOp, ctx: &mut ClientCtx<'_, ZkMsg>) {
        match op {
            LockOp::Acquire => {
                // A session left from an abandoned holding is closed: its child would block
                // everyone behind it until the session expired.
                if let Some(old) = self.session.take() {
                    ctx.send(0, ZkMsg::CloseSession { session: old.id });
                }
                self.child = None;
                ctx.set_timer(GIVE_UP, self.config.acquire_wait_ms);
                let open = ZkMsg::CreateSession {
                    owner: self.info.name.clone(),
                    timeout_ms: self.info.ttl_ms,
                };
                self.ask(Step::Connecting, open, ctx);
            }
            LockOp::Renew { .. } => match self.session {
                Some(s) => self.ask(Step::Renewing, ZkMsg::Ping { session: s.id }, ctx),
                None => {
                    ctx.lost("no ZooKeeper session");
                    let error = "no session".to_owned();
                    self.finish(OpResult::Fail { error }, ctx);
                }
            },
            LockOp::Release { .. } => match self.session {
                Some(s) => self.ask(Step::Releasing, ZkMsg::CloseSession { session: s.id }, ctx),
                None => self.finish(OpResult::Ok { token: None }, ctx),
            },
        }
    }

    fn on_reply(&mut self, request: RequestId, msg: ZkMsg, ctx: &mut ClientCtx<'_, ZkMsg>) {
        match &self.waiting {
            Some((id, _, sent_ms)) if *id == request => {
                let sent_ms = *sent_ms;
                self.waiting = None;
                ctx.cancel_timer(REPLY);
                self.answered(msg, sent_ms, ctx);
            }
            // The answer to a request it resent, or gave up on.
            _ => {}
        }
    }

    fn on_message(&mut self, _from: &str, msg: ZkMsg, ctx: &mut ClientCtx<'_, ZkMsg>) {
        let ZkMsg::WatchFired { lock, seq } = msg else {
            return;
        };
        // A watch of an earlier wait, or of another lock, says nothing about this one.
        if self.step != (Step::Watching { pred: seq }) || lock != self.info.lock {
            return;
        }
        ctx.cancel_timer(RECHECK);
        match self.config.on_predecessor_gone {
            OnPredecessorGone::Recheck => self.list(ctx),
            OnPredecessorGone::Take => self.hold(ctx),
        }
    }

    fn on_timer(&mut self, id: TimerId, ctx: &mut ClientCtx<'_, ZkMsg>) {
        match id {
            REPLY => self.timed_out(ctx),
            RECHECK if self.waiting.is_none() => self.list(ctx),
            GIVE_UP => {
                let why = format!("no lock within {} ms", self.config.acquire_wait_ms);
                self.give_up(why, ctx);
            }
            _ => {}
        }
    }
}

impl ZkClient {
    /// The awaited request got no answer in time. An acquire resends it while its session may
    /// live (every request the recipe makes can be repeated: a second `create` on the session
    /// gets the child the first made); a renewal or release ends with its outcome unknown.
    fn timed_out(&mut self, ctx: &mut ClientCtx<'_, ZkMsg>) {
        let Some((_, msg, _)) = self.waiting.take() else {
            return;
        };
        let why = format!("no answer within {} ms", self.info.timeout_ms);
        match self.step {
            Step::Connecting => self.give_up(why, ctx),
            Step::Creating | Step::Listing | Step::Watching { .. } if self.session_alive(ctx) => {
                self.ask(self.step, msg, ctx)
            }
            Step::Creating | Step::Listing | Step::Watching { .. } => {
                self.give_up(format!("{why}, and its session may have expired"), ctx)
            }
            Step::Renewing | Step::Releasing => {
                if self.step == Step::Releasing {
                    self.session = None;
                    self.child = None;
                }
                self.finish(OpResult::Unknown { error: why }, ctx)
            }
            Step::Idle => {}
        }
    }
}
