//! A client node: `cycles` times acquire (retrying with seeded backoff while the lock is held),
//! read, work for `work_ms` (renewing every `renew_ms`), write with the token, release. How it
//! acquires, renews and releases is its design's client protocol (`protocol.rs`); the reads
//! and writes of the resource are the harness's own.
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

use fencesim_design::WriteOutcome;
use fencesim_design::{ClientInfo, ClientProtocol, Design};
use fencesim_history::{Name, Op, OpFn, OpType};
use fencesim_scenario::{Cleanup, ClientSpec, NodeEvent, RESOURCE_NODE};
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::clock::ClockCache;
use crate::mailbox::Inbox;
use crate::message::Message;
use crate::nemesis::{sleep_until_ms, Nemesis, When};
use crate::recorder::true_ns;
use crate::seeds::{self, Stream};
use crate::timer::Alarm;
use crate::transport::Envelope;
use crate::world::{OpTemplate, World};

mod protocol;

/// Client `index`'s main task; madsim runs it again (from cycle 1, as a new process) on every
/// restart. Its protocol is design `D`'s, made from the settings the parser kept
/// (monomorphised: the client loop pays no dynamic dispatch for its protocol).
pub(crate) async fn run<D: Design>(world: Arc<World>, index: usize) {
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
    let service_nodes = world.lease_nodes();
    let info = client_info(&spec, incarnation, &service_nodes);
    let protocol = D::client(
        crate::design::parsed::<D::Settings>(
            &world.scenario.lock_service.settings,
            "[lock_service]",
        ),
        crate::design::parsed::<D::ClientSettings>(&spec.settings, &spec.name),
        info,
    );
    let names = Names {
        node: spec.name.as_str().into(),
        lock: spec.lock.as_str().into(),
        key: spec.key.as_str().into(),
    };
    let mut client = Client {
        world,
        spec,
        inbox,
        rng,
        process,
        incarnation,
        protocol: protocol::ProtocolState::new(protocol, service_nodes),
        keepalive_stopped: false,
        granted_from_queue: false,
        alarm: Alarm::default(),
        clock: ClockCache::default(),
        names,
    };
    for cycle in 1..=client.spec.cycles {
        client.cycle(cycle).await;
    }
    client.world.client_done(&client.spec.name);
}

/// What a client protocol is told about its client.
fn client_info(spec: &ClientSpec, incarnation: u64, service_nodes: &[String]) -> ClientInfo {
    ClientInfo {
        name: spec.name.clone(),
        lock: spec.lock.clone(),
        ttl_ms: spec.ttl_ms,
        safety_margin_ms: spec.safety_margin_ms,
        timeout_ms: spec.timeout_ms,
        incarnation,
        service_nodes: service_nodes.to_vec(),
    }
}

struct Client<P: ClientProtocol> {
    world: Arc<World>,
    spec: ClientSpec,
    inbox: Inbox<Box<Envelope>>,
    rng: Xoshiro256PlusPlus,
    process: u64,
    /// Which start of the client this is (1, then one more after each restart).
    incarnation: u64,
    /// The design's client protocol.
    protocol: protocol::ProtocolState<P>,
    /// The protocol's keepalive stream ended silently this cycle (K09).
    keepalive_stopped: bool,
    /// This cycle's lease came from a queue, so the client renews at once (K07).
    granted_from_queue: bool,
    /// The timeouts of its requests (one madsim timer serves many short exchanges).
    alarm: Alarm,
    /// Its clocks as last read, for its readings and records.
    clock: ClockCache,
    /// Its name, lock and key as its records name them (made once, cloned per record).
    names: Names,
}

/// A client's names in its records.
struct Names {
    node: Name,
    lock: Name,
    key: Name,
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

impl<P: ClientProtocol> Client<P> {
    async fn cycle(&mut self, cycle: u64) {
        self.keepalive_stopped = false;
        self.granted_from_queue = false;
        let token = self.protocol_acquire().await;
        if self.granted_from_queue
            && self.spec.renew_ms.is_some()
            && !self.protocol_renew(token).await
        {
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
        if !self.spec.cleanup.is_none() {
            self.cleanup(token).await;
        }
        self.protocol_release(token).await;
    }

    async fn read(&mut self) {
        self.safepoint(When::Before, NodeEvent::Read).await;
        let op = self.template(OpFn::Read, None, None);
        let body = Message::Read {
            key: self.spec.key.clone(),
        };
        match self.call(&op, body).await {
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
            if true_ns() < end_ns && !stalled && !self.protocol_renew(token).await {
                return false;
            }
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
        match self.call(&op, body).await {
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

    /// A job's cleanup after its write: delete the key, with the lease's token if the cleanup
    /// is fenced, without one if it goes around the fence. Whatever the write's outcome, as a
    /// `finally` block runs.
    async fn cleanup(&mut self, token: u64) {
        let token = (self.spec.cleanup == Cleanup::Fenced).then_some(token);
        let op = self.template(OpFn::Delete, token, None);
        let body = Message::Delete {
            key: self.spec.key.clone(),
            token,
        };
        match self.call(&op, body).await {
            Some(Message::WriteReply(WriteOutcome::Accepted { .. })) => {
                self.complete(&op, OpType::Ok, |_| {})
            }
            Some(Message::WriteReply(WriteOutcome::Rejected { presented, highest })) => {
                let error = match presented {
                    0 => format!("a delete without a token: highest accepted is {highest}"),
                    _ => format!("stale token {presented}: highest accepted is {highest}"),
                };
                self.complete(&op, OpType::Fail, |o| o.error = Some(error));
            }
            Some(other) => unreachable!("delete answered with {other:?}"),
            None => {}
        }
    }

    /// Record the invoke, send the request to the resource and wait for its reply. On timeout,
    /// record `info`, retire the process and return `None`. Late replies to earlier requests
    /// are skipped.
    async fn call(&mut self, op: &OpTemplate, body: Message) -> Option<Message> {
        let invoke = self.world.op_cached(op.record(OpType::Invoke), &self.clock);
        let deadline_ns = true_ns() + self.spec.timeout_ms * 1_000_000;
        let id = self
            .world
            .net
            .send(&self.spec.name, RESOURCE_NODE, None, Some(invoke), body);
        let left = Duration::from_nanos(deadline_ns.saturating_sub(true_ns()));
        match self
            .alarm
            .timeout(left, reply_to(self.inbox.clone(), id))
            .await
        {
            Ok(Some(reply)) => Some(reply),
            _ => {
                let error = format!("no reply within {} ms", self.spec.timeout_ms);
                self.complete(op, OpType::Info, |o| o.error = Some(error));
                self.process = self.world.new_process();
                None
            }
        }
    }

    fn template(&self, f: OpFn, token: Option<u64>, value: Option<String>) -> OpTemplate {
        let names = &self.names;
        let (lock, key) = match f {
            OpFn::Acquire | OpFn::Renew | OpFn::Release => (Some(names.lock.clone()), None),
            // The simulated clients never compare-and-set; a cas would be on the key too.
            OpFn::Read | OpFn::Write | OpFn::Cas | OpFn::Delete => (None, Some(names.key.clone())),
        };
        OpTemplate {
            process: self.process,
            node: names.node.clone(),
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
        self.world.op_cached(record, &self.clock);
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
