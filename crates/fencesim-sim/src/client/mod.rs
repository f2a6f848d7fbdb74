//! A client node: `cycles` times acquire (retrying with seeded backoff while the lock is held),
//! read, work for `work_ms` (renewing every `renew_ms`), write with the token, release.
//!
//! Each step is a Jepsen operation: invoke, then ok, fail, or info when no reply came within
//! `timeout_ms` (the outcome is unknown, so the process is retired and the client continues
//! under a new process id). The loop has safepoints around each step where event-triggered
//! faults land.
//!
//! The client keeps its own view of its lease: valid until (acquire or renew sent, on its
//! monotonic clock) + ttl - safety margin, the conservative reckoning Redlock's validity time
//! uses. With `validity_check` it refuses to write once that has run out; without it, it acts
//! as holder until the service says otherwise (case K15). The view is recorded as `belief`
//! events for the client-view mutual-exclusion check.

use std::sync::Arc;
use std::time::Duration;

use fencesim_history::{Op, OpFn, OpType};
use fencesim_lease::{AcquireOutcome, ReleaseOutcome, RenewOutcome};
use fencesim_resource::WriteOutcome;
use fencesim_scenario::{ClientSpec, NodeEvent, RESOURCE_NODE};
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::mailbox::Inbox;
use crate::message::Message;
use crate::nemesis::{sleep_until_ms, Nemesis, When};
use crate::recorder::true_ns;
use crate::seeds::{self, Stream};
use crate::timer::Alarm;
use crate::transport::Envelope;
use crate::world::{OpTemplate, World};

mod protocol;

pub(crate) use protocol::Protocol;

/// Client `index`'s main task; madsim runs it again (from cycle 1, as a new process) on every
/// restart.
pub(crate) async fn run(world: Arc<World>, index: usize) {
    let spec = world.scenario.clients[index].clone();
    let incarnation = world.start(&spec.name);
    let rng = seeds::rng(
        world.seed,
        Stream::Client {
            index: index as u32,
            incarnation,
        },
    );
    let inbox = world.inbox(&spec.name);
    sleep_until_ms(spec.start_ms).await;
    let process = world.new_process();
    let lease_nodes = world.lease_nodes();
    let protocol =
        crate::designs::client_protocol(&world.scenario, &spec, incarnation, &lease_nodes)
            .map(protocol::ProtocolState::new);
    let mut client = Client {
        world,
        spec,
        inbox,
        rng,
        process,
        lease_nodes,
        lease_target: 0,
        incarnation,
        protocol,
        keepalive_stopped: false,
        granted_from_queue: false,
        last_invoke: 0,
        alarm: Alarm::default(),
    };
    for cycle in 1..=client.spec.cycles {
        client.cycle(cycle).await;
    }
    client.world.client_done(&client.spec.name);
}

struct Client {
    world: Arc<World>,
    spec: ClientSpec,
    inbox: Inbox<Box<Envelope>>,
    rng: Xoshiro256PlusPlus,
    process: u64,
    /// The lock service's nodes (one, or the Raft replicas) and which one to ask.
    lease_nodes: Vec<String>,
    lease_target: usize,
    /// Which start of the client this is (1, then one more after each restart).
    incarnation: u64,
    /// The design's client protocol, for a design on the design API.
    protocol: Option<protocol::ProtocolState>,
    /// The keepalive stream ended silently at a failure this cycle (`renew_after_failure =
    /// "stop"`, K09).
    keepalive_stopped: bool,
    /// This cycle's lock came from the lock's queue (`acquire = "queue"`).
    granted_from_queue: bool,
    /// History index of the last operation's invoke (a queued acquire's answer names it).
    last_invoke: u64,
    /// The timeouts of its requests (one madsim timer serves many short exchanges).
    alarm: Alarm,
}

/// Where a request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dst {
    /// The lock service (its leader, for Raft).
    Lease,
    /// The resource.
    Resource,
}

/// How long a client waits after a redirect that names no leader before trying the next
/// replica, simulated ms.
const REDIRECT_PAUSE_MS: u64 = 50;

/// The service's answer to queue entry `entry` of the acquire invoked at history index
/// `invoke`: its grant or its refusal. Matching the operation as well as the token keeps an
/// answer meant for an earlier entry with the same token (a service that lost its counter)
/// from being taken for this one.
async fn queue_answer(
    inbox: Inbox<Box<Envelope>>,
    entry: u64,
    invoke: u64,
) -> Option<AcquireOutcome> {
    loop {
        let env = inbox.recv().await.ok()?;
        if let Message::QueueAnswer { entry: e, outcome } = env.body {
            if e == entry && env.op == Some(invoke) {
                return Some(outcome);
            }
        }
    }
}

/// The reply to request `id`, skipping anything else that arrives first.
async fn reply_to(inbox: Inbox<Box<Envelope>>, id: u64) -> Option<Message> {
    loop {
        match inbox.recv().await {
            Ok(env) if env.reply_to == Some(id) => return Some(env.body),
            Ok(_stale_or_signal) => continue,
            Err(_) => return None,
        }
    }
}

impl Client {
    async fn cycle(&mut self, cycle: u64) {
        self.keepalive_stopped = false;
        self.granted_from_queue = false;
        let token = self.acquire().await;
        if self.granted_from_queue && self.spec.renew_ms.is_some() && !self.renew(token).await {
            // A client that keeps its lease alive renews as soon as a queued grant reaches it:
            // its deadline counted from its acquire request, possibly long ago, and now counts
            // from this renewal. Told the lease is lost, it gives up the cycle.
            return;
        }
        self.read().await;
        if !self.work(token).await {
            // The service said the lease is gone: abandon this cycle's write.
            return;
        }
        if self.spec.validity_check && !self.world.belief_valid(&self.spec.name) {
            // By its own clock the lease has run out: do not write; nothing to release either.
            self.world
                .end_belief(&self.spec.name, "validity elapsed before the write");
            return;
        }
        self.write(token, cycle).await;
        self.release(token).await;
    }

    async fn acquire(&mut self) -> u64 {
        if self.protocol.is_some() {
            return self.protocol_acquire().await;
        }
        loop {
            self.safepoint(When::Before, NodeEvent::Acquire).await;
            let op = self.template(OpFn::Acquire, None, None);
            let body = Message::Acquire {
                lock: self.spec.lock.clone(),
                ttl_ms: self.spec.ttl_ms,
            };
            let sent_ms = self.world.mono_ms(&self.spec.name);
            match self.call(Dst::Lease, &op, body).await {
                Some(Message::AcquireReply(AcquireOutcome::Granted { token, .. })) => {
                    self.complete(&op, OpType::Ok, |o| o.token = Some(token));
                    self.believe(token, sent_ms);
                    self.safepoint(When::After, NodeEvent::Grant).await;
                    return token;
                }
                Some(Message::AcquireReply(AcquireOutcome::Held {
                    holder,
                    token,
                    expires_at_ms,
                })) => {
                    let reclaims = self.spec.reclaim == fencesim_scenario::Reclaim::ByName;
                    if reclaims && holder == self.spec.name && self.incarnation > 1 {
                        // K13: back under a new session, it finds the entry its old session
                        // left and takes the lock for its own.
                        self.complete(&op, OpType::Ok, |o| o.token = Some(token));
                        self.believe(token, sent_ms);
                        self.safepoint(When::After, NodeEvent::Grant).await;
                        return token;
                    }
                    let error = format!("held by {holder} until {expires_at_ms} ms");
                    self.complete(&op, OpType::Fail, |o| o.error = Some(error));
                }
                Some(Message::AcquireReply(AcquireOutcome::Recovering { until_ms })) => {
                    let error = format!("service recovering until {until_ms} ms");
                    self.complete(&op, OpType::Fail, |o| o.error = Some(error));
                }
                Some(Message::AcquireReply(AcquireOutcome::Queued { token: entry })) => {
                    if let Some(token) = self.wait_in_queue(&op, entry, sent_ms).await {
                        self.safepoint(When::After, NodeEvent::Grant).await;
                        return token;
                    }
                }
                Some(other) => unreachable!("acquire answered with {other:?}"),
                None => {}
            }
            self.backoff().await;
        }
    }

    /// Blocked in the lock's queue with entry `entry` (`acquire = "queue"`, K07): no keepalive;
    /// the service answers when the client's turn comes, or the client gives up after twice
    /// the maximum TTL and its timeout.
    /// Returns the token if granted; a refusal or silence completes `op` as fail or info.
    async fn wait_in_queue(&mut self, op: &OpTemplate, entry: u64, sent_ms: i64) -> Option<u64> {
        // Long enough to outlive its own lease in the queue (a blocking acquire has no deadline
        // of its own: K07), short enough not to wait out a recovery window on a service whose
        // crash forgot the queue.
        let limit_ms = 2 * self.world.scenario.lock_service.max_ttl_ms + self.spec.timeout_ms;
        let answer = crate::timer::timeout(
            Duration::from_millis(limit_ms),
            queue_answer(self.inbox.clone(), entry, self.last_invoke),
        )
        .await;
        match answer {
            Ok(Some(AcquireOutcome::Granted { token, .. })) => {
                self.granted_from_queue = true;
                self.complete(op, OpType::Ok, |o| o.token = Some(token));
                // The conservative deadline counts from the request, not the grant.
                self.believe(token, sent_ms);
                Some(token)
            }
            Ok(Some(_waiter_expired)) => {
                let error = format!("waited with token {entry} until its own lease expired");
                self.complete(op, OpType::Fail, |o| o.error = Some(error));
                None
            }
            _ => {
                let error = format!("no answer within {limit_ms} ms in the queue");
                self.complete(op, OpType::Info, |o| o.error = Some(error));
                self.process = self.world.new_process();
                None
            }
        }
    }

    async fn read(&mut self) {
        self.safepoint(When::Before, NodeEvent::Read).await;
        let op = self.template(OpFn::Read, None, None);
        let body = Message::Read {
            key: self.spec.key.clone(),
        };
        match self.call(Dst::Resource, &op, body).await {
            Some(Message::ReadReply(read)) => self.complete(&op, OpType::Ok, |o| {
                o.value = read.value;
                o.token = read.token;
            }),
            Some(other) => unreachable!("read answered with {other:?}"),
            None => {}
        }
        self.safepoint(When::After, NodeEvent::Read).await;
    }

    /// Work for `work_ms`, renewing every `renew_ms`; false if a renewal said the lease is lost.
    async fn work(&mut self, token: u64) -> bool {
        let end_ns = true_ns() + self.spec.work_ms * 1_000_000;
        loop {
            let left_ns = end_ns.saturating_sub(true_ns());
            if left_ns == 0 {
                return true;
            }
            let Some(renew_ms) = self.spec.renew_ms.filter(|_| !self.keepalive_stopped) else {
                crate::timer::sleep(Duration::from_nanos(left_ns)).await;
                return true;
            };
            crate::timer::sleep(Duration::from_nanos(left_ns.min(renew_ms * 1_000_000))).await;
            // A stalled keepalive (K18) sends nothing; the work goes on regardless.
            let stalled = self.world.nemesis.keepalive_stalled(&self.spec.name);
            if true_ns() < end_ns && !stalled && !self.renew(token).await {
                return false;
            }
        }
    }

    /// One keepalive; false only if the service answered that the lease is lost.
    async fn renew(&mut self, token: u64) -> bool {
        if self.protocol.is_some() {
            return self.protocol_renew(token).await;
        }
        self.safepoint(When::Before, NodeEvent::Renew).await;
        let op = self.template(OpFn::Renew, Some(token), None);
        let body = Message::Renew {
            lock: self.spec.lock.clone(),
            token,
        };
        let sent_ms = self.world.mono_ms(&self.spec.name);
        let kept = match self.call(Dst::Lease, &op, body).await {
            Some(Message::RenewReply(RenewOutcome::Renewed { .. })) => {
                self.complete(&op, OpType::Ok, |_| {});
                self.believe(token, sent_ms);
                true
            }
            Some(Message::RenewReply(RenewOutcome::Lost)) => {
                self.complete(&op, OpType::Fail, |o| o.error = Some("lease lost".into()));
                if self.spec.on_lost_lease == fencesim_scenario::OnLostLease::KeepRole {
                    // K14: told its lease is gone, it keeps its role as if renewed.
                    self.believe(token, sent_ms);
                    true
                } else {
                    self.world
                        .end_belief(&self.spec.name, "told the lease is lost");
                    false
                }
            }
            Some(other) => unreachable!("renew answered with {other:?}"),
            None => {
                self.renewal_unanswered(token);
                true
            }
        };
        self.safepoint(When::After, NodeEvent::Renew).await;
        kept
    }

    /// A renewal got no answer: normally nothing changes (the deadline still counts from the
    /// last answered request, and the next renewal tries again). The defect knobs model two
    /// real client bugs here.
    fn renewal_unanswered(&mut self, token: u64) {
        use fencesim_scenario::{DeadlineFrom, RenewAfterFailure};
        if self.spec.deadline_from == DeadlineFrom::Notice {
            // K12: the countdown restarts when the silence is noticed.
            let now_ms = self.world.mono_ms(&self.spec.name);
            self.believe(token, now_ms);
        }
        if self.spec.renew_after_failure == RenewAfterFailure::Stop {
            // K09: the keepalive stream is gone, and nobody says so.
            self.keepalive_stopped = true;
        }
    }

    async fn write(&mut self, token: u64, cycle: u64) {
        self.safepoint(When::Before, NodeEvent::Write).await;
        // The value names the unit of work, unique per client run: a restarted client starts
        // its cycles again, as new work (`duplicate-execution` relies on this).
        let value = match self.incarnation {
            1 => format!("{}/{cycle}", self.spec.name),
            n => format!("{}@{n}/{cycle}", self.spec.name),
        };
        let op = self.template(OpFn::Write, Some(token), Some(value.clone()));
        let body = Message::Write {
            key: self.spec.key.clone(),
            token,
            value,
        };
        match self.call(Dst::Resource, &op, body).await {
            Some(Message::WriteReply(WriteOutcome::Accepted { .. })) => {
                self.complete(&op, OpType::Ok, |_| {})
            }
            Some(Message::WriteReply(WriteOutcome::Rejected { presented, highest })) => {
                let error = format!("stale token {presented}: highest accepted is {highest}");
                self.complete(&op, OpType::Fail, |o| o.error = Some(error));
                self.world
                    .end_belief(&self.spec.name, "write rejected as stale");
            }
            Some(other) => unreachable!("write answered with {other:?}"),
            None => {}
        }
        self.safepoint(When::After, NodeEvent::Write).await;
    }

    async fn release(&mut self, token: u64) {
        if self.protocol.is_some() {
            return self.protocol_release(token).await;
        }
        self.safepoint(When::Before, NodeEvent::Release).await;
        self.world.end_belief(&self.spec.name, "released");
        let op = self.template(OpFn::Release, Some(token), None);
        let body = Message::Release {
            lock: self.spec.lock.clone(),
            token,
        };
        match self.call(Dst::Lease, &op, body).await {
            Some(Message::ReleaseReply(ReleaseOutcome::Released)) => {
                self.complete(&op, OpType::Ok, |_| {})
            }
            Some(Message::ReleaseReply(ReleaseOutcome::NotHolder)) => {
                self.complete(&op, OpType::Fail, |o| {
                    o.error = Some("not the holder".into())
                });
            }
            Some(other) => unreachable!("release answered with {other:?}"),
            None => {}
        }
        self.safepoint(When::After, NodeEvent::Release).await;
    }

    /// Record the invoke, send the request and wait for its reply. A Raft follower's redirect
    /// sends the request on to the leader it names (or the next replica) within the same
    /// operation and time budget. On timeout, record `info`, retire the process, try another
    /// replica next time and return `None`. Late replies to earlier requests are skipped.
    async fn call(&mut self, dst: Dst, op: &OpTemplate, body: Message) -> Option<Message> {
        let invoke = self.world.op(op.record(OpType::Invoke));
        self.last_invoke = invoke;
        self.exchange(dst, op, invoke, body).await
    }

    /// One request and its reply within operation `op`, invoked at history index `invoke`
    /// (an operation may need several: the lease-record design reads, then swaps). Redirects,
    /// timeouts and `info` as in [`Client::call`].
    async fn exchange(
        &mut self,
        dst: Dst,
        op: &OpTemplate,
        invoke: u64,
        body: Message,
    ) -> Option<Message> {
        let deadline_ns = true_ns() + self.spec.timeout_ms * 1_000_000;
        loop {
            let to = match dst {
                Dst::Lease => &self.lease_nodes[self.lease_target],
                Dst::Resource => RESOURCE_NODE,
            };
            let id = self
                .world
                .net
                .send(&self.spec.name, to, None, Some(invoke), body.clone());
            let left = Duration::from_nanos(deadline_ns.saturating_sub(true_ns()));
            match self
                .alarm
                .timeout(left, reply_to(self.inbox.clone(), id))
                .await
            {
                Ok(Some(Message::Redirect { leader })) => {
                    let hinted = leader
                        .as_ref()
                        .and_then(|l| self.lease_nodes.iter().position(|n| n == l));
                    if hinted.is_none() {
                        // No leader known yet (an election is on): give it a moment, within budget.
                        let left = Duration::from_nanos(deadline_ns.saturating_sub(true_ns()));
                        crate::timer::sleep(left.min(Duration::from_millis(REDIRECT_PAUSE_MS)))
                            .await;
                    }
                    self.lease_target =
                        hinted.unwrap_or((self.lease_target + 1) % self.lease_nodes.len());
                }
                Ok(Some(reply)) => return Some(reply),
                _ => {
                    let error = format!("no reply within {} ms", self.spec.timeout_ms);
                    self.complete(op, OpType::Info, |o| o.error = Some(error));
                    self.process = self.world.new_process();
                    if dst == Dst::Lease {
                        self.lease_target = (self.lease_target + 1) % self.lease_nodes.len();
                    }
                    return None;
                }
            }
        }
    }

    fn template(&self, f: OpFn, token: Option<u64>, value: Option<String>) -> OpTemplate {
        let (lock, key) = match f {
            OpFn::Acquire | OpFn::Renew | OpFn::Release => {
                (Some(self.spec.lock.as_str().into()), None)
            }
            OpFn::Read | OpFn::Write => (None, Some(self.spec.key.as_str().into())),
        };
        OpTemplate {
            process: self.process,
            node: self.spec.name.as_str().into(),
            f,
            lock,
            key,
            token,
            value,
        }
    }

    fn complete(&self, op: &OpTemplate, op_type: OpType, fill: impl FnOnce(&mut Op)) {
        let mut record = op.record(op_type);
        fill(&mut record);
        self.world.op(record);
    }

    /// Believe the lease with `token` valid until `sent_ms` + ttl - margin (monotonic clock),
    /// or until told otherwise when the client does not check validity.
    fn believe(&self, token: u64, sent_ms: i64) {
        let until =
            (sent_ms + self.spec.ttl_ms as i64).saturating_sub(self.spec.safety_margin_ms as i64);
        self.believe_until(token, until);
    }

    /// Believe the lease with `token` valid until `until_ms` on the monotonic clock (or until
    /// told otherwise when the client does not check validity).
    fn believe_until(&self, token: u64, until_ms: i64) {
        let until = self.spec.validity_check.then_some(until_ms);
        self.world
            .believe(&self.spec.name, &self.spec.lock, token, until);
    }

    async fn backoff(&mut self) {
        let b = self.spec.backoff_ms;
        let ms = self.rng.gen_range(b.min_ms..=b.max_ms);
        crate::timer::sleep(Duration::from_millis(ms)).await;
    }

    async fn safepoint(&self, when: When, event: NodeEvent) {
        Nemesis::safepoint(&self.world, &self.spec.name, when, event).await;
    }
}
