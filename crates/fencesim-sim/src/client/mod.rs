//! A client node: the simulator's driver of the client workload (`fencesim-workload`: `cycles`
//! times acquire, read, work for `work_ms` renewing every `renew_ms`, write with the token,
//! clean up, release; live mode's client process drives the same machine). How it acquires,
//! renews and releases is its design's client protocol (`protocol.rs`, retrying with seeded
//! backoff while the lock is held); the reads and writes of the resource are the harness's own.
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
use fencesim_scenario::{ClientSpec, NodeEvent, WorkClock, RESOURCE_NODE};
use fencesim_workload::{Outcome, Step, Workload, WorkloadSpec};
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
use fencesim_driver::op::{mutation_completion, timed_out};

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
    let workload = Workload::new(WorkloadSpec::from(&spec), &spec.name, incarnation);
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
        protocol: protocol::ProtocolState::new(protocol, service_nodes),
        workload,
        alarm: Alarm::default(),
        clock: ClockCache::default(),
        names,
    };
    client.drive().await;
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
    /// The design's client protocol.
    protocol: protocol::ProtocolState<P>,
    /// What to do next: the workload's state machine.
    workload: Workload,
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
    /// Run the workload to its end: each step as the machine says, with the true time and
    /// the step's outcome fed back.
    async fn drive(&mut self) {
        let mut outcome = Outcome::Begin;
        loop {
            outcome = match self.workload.step(self.work_now_ns(), outcome) {
                Step::Acquire => Outcome::Granted {
                    token: self.protocol_acquire().await,
                },
                Step::Renew { token } => Outcome::Renewed {
                    kept: self.protocol_renew(token).await,
                },
                Step::Read => {
                    self.read().await;
                    Outcome::Finished
                }
                Step::Work { for_ns } => {
                    crate::timer::sleep(Duration::from_nanos(for_ns)).await;
                    Outcome::Finished
                }
                // A stalled keepalive (K18) sends nothing; the work goes on regardless.
                Step::Keepalive { token } => Outcome::Renewed {
                    kept: self.world.nemesis.keepalive_stalled(&self.spec.name)
                        || self.protocol_renew(token).await,
                },
                Step::CheckValidity => Outcome::Validity {
                    valid: self.still_valid(),
                },
                Step::Write { token, value } => {
                    self.write(token, value).await;
                    Outcome::Finished
                }
                Step::Delete { token } => {
                    self.cleanup(token).await;
                    Outcome::Finished
                }
                Step::Release { token } => {
                    self.protocol_release(token).await;
                    Outcome::Finished
                }
                Step::Done => return,
            };
        }
    }

    /// Whether the lease is still valid by the client's own clock; if not, its belief ends:
    /// it will not write, and has nothing to release either.
    /// What the workload counts its work and keepalives by, ns: true time, or with
    /// `work_clock = "monotonic"` its own monotonic clock.
    fn work_now_ns(&self) -> u64 {
        match self.spec.work_clock {
            WorkClock::TrueTime => true_ns(),
            WorkClock::Monotonic => {
                let clocks = self.world.clocks.get_cached(&self.spec.name, &self.clock);
                clocks.mono.read_ns(true_ns()).max(0) as u64
            }
        }
    }

    fn still_valid(&self) -> bool {
        let valid = self.world.belief_valid(&self.spec.name);
        if !valid {
            self.world
                .end_belief(&self.spec.name, "validity elapsed before the write");
        }
        valid
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

    async fn write(&mut self, token: u64, value: String) {
        self.safepoint(When::Before, NodeEvent::Write).await;
        let op = self.template(OpFn::Write, Some(token), Some(value.clone()));
        let body = Message::Write {
            key: self.spec.key.clone(),
            token,
            value,
        };
        match self.call(&op, body).await {
            Some(Message::WriteReply(outcome)) => {
                self.world
                    .op_cached(mutation_completion(&op, &outcome), &self.clock);
                if matches!(outcome, WriteOutcome::Rejected { .. }) {
                    self.world
                        .end_belief(&self.spec.name, "write rejected as stale");
                }
            }
            Some(other) => unreachable!("write answered with {other:?}"),
            None => {}
        }
        self.safepoint(When::After, NodeEvent::Write).await;
    }

    /// A job's cleanup after its write: delete the key, with the lease's token if the cleanup
    /// is fenced (`token`), without one if it goes around the fence.
    async fn cleanup(&mut self, token: Option<u64>) {
        let op = self.template(OpFn::Delete, token, None);
        let body = Message::Delete {
            key: self.spec.key.clone(),
            token,
        };
        match self.call(&op, body).await {
            Some(Message::WriteReply(outcome)) => {
                self.world
                    .op_cached(mutation_completion(&op, &outcome), &self.clock);
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
                self.world
                    .op_cached(timed_out(op, self.spec.timeout_ms), &self.clock);
                self.process = self.world.new_process();
                None
            }
        }
    }

    fn template(&self, f: OpFn, token: Option<u64>, value: Option<String>) -> OpTemplate {
        let names = &self.names;
        let place = [&names.lock, &names.key];
        OpTemplate::new(self.process, &names.node, place, f, token, value)
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
