//! A client process of a live trial: the scenario's workload loop (acquire, read, work with
//! keepalives, write, release, for `cycles` cycles), run against the design's live forms with
//! real sleeps, as its own OS process so that a pause fault can really stop it (SIGSTOP).
//!
//! It drives the same workload machine as the simulated client (`fencesim-workload`), with the
//! same records: operations, and `belief` events for its own view of its lease, deadline
//! counted from its acquire request. Its one channel to the harness is [`crate::wire`].

use std::io::{BufRead, Write};
use std::time::Duration;

use fencesim_history::{Entry, Event, EventKind, Name, Op, OpFn, OpType, Phase, Stamp};
use fencesim_scenario::NodeEvent;
use fencesim_workload::{Outcome, Step, Workload, WorkloadSpec};
use rand::{Rng, SeedableRng};

use crate::clock::{mono_ms, mono_ns, Origin};
use crate::form::{
    Grant, LiveForms, LockCall, LockSession, ResourceSession, Unknown, WriteAnswer, WriteCall,
};
use crate::wire::{op_ref, ClientConfig, ClientLine};

/// Run a client process: read its [`ClientConfig`] from the first line of stdin, run its
/// workload, and exit. Returns the process's exit code (0: done; 2: bad configuration; 1: the
/// database could not be reached).
pub fn main(forms: &LiveForms) -> u8 {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut first = String::new();
    if input.read_line(&mut first).is_err() {
        return 2;
    }
    let config: ClientConfig = match serde_json::from_str(&first) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fencesim live-client: bad configuration line: {e}");
            return 2;
        }
    };
    let sessions = forms
        .lock_service(&config.lock_kind, &config.lock_knobs)
        .and_then(|form| form.session(&config.endpoints))
        .and_then(|lock| {
            let resource = forms
                .resource(&config.resource_mode, &config.resource_knobs)
                .and_then(|form| form.session(&config.endpoints))?;
            Ok((lock, resource))
        });
    let (lock, resource) = match sessions {
        Ok(pair) => pair,
        Err(message) => {
            send(&ClientLine::Error { message });
            return 1;
        }
    };
    // Connected: say so, and start the clock when the harness says every client is ready.
    send(&ClientLine::Ready);
    let mut start = String::new();
    let origin = match input
        .read_line(&mut start)
        .map(|_| serde_json::from_str(&start))
    {
        Ok(Ok(origin)) => origin,
        _ => return 2,
    };
    let armed = config.armed.len();
    let mut client = LiveClient {
        rng: rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(config.rng_seed),
        process: config.process,
        name: Name::from(config.client.name.as_str()),
        config,
        origin,
        lock,
        resource,
        input,
        seq: 0,
        occurrences: vec![0; armed],
        belief: None,
        last_invoke_ns: 0,
    };
    client.run();
    0
}

fn send(line: &ClientLine) {
    let mut out = std::io::stdout().lock();
    // A closed stdout means the harness is gone; the process will be killed anyway.
    let _ = serde_json::to_writer(&mut out, line);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

/// The lease the client believes it holds: its token, and until when by its monotonic clock.
#[derive(Clone, Copy, Debug)]
struct Belief {
    token: u64,
    until_mono_ns: u64,
}

struct LiveClient<'a> {
    config: ClientConfig,
    /// The trial's time origin, from the harness once every client was ready; the client
    /// starts at `origin + start_ms`.
    origin: Origin,
    name: Name,
    lock: Box<dyn LockSession>,
    resource: Box<dyn ResourceSession>,
    input: std::io::StdinLock<'a>,
    rng: rand_xoshiro::Xoshiro256PlusPlus,
    process: u64,
    /// Operations invoked so far (the `seq` of the next one).
    seq: u64,
    /// Per armed safepoint, how many times its event has been reached since it counts
    /// (`count_from_ms`), for its `nth`.
    occurrences: Vec<u64>,
    belief: Option<Belief>,
    /// When the last operation was invoked, `CLOCK_MONOTONIC` ns (a belief counts from it).
    last_invoke_ns: u64,
}

/// An operation between its invoke and its completion.
struct Pending {
    seq: u64,
    op: Op,
    /// Its reference in the database's log.
    reference: String,
}

impl LiveClient<'_> {
    fn run(&mut self) {
        let start_ns = self.origin.mono_ns + self.config.client.start_ms * 1_000_000;
        sleep_until(start_ns);
        let client = &self.config.client;
        // A client process starts once: its first start is its only one.
        let mut workload = Workload::new(WorkloadSpec::from(client), &client.name, 1);
        let mut outcome = Outcome::Begin;
        loop {
            let now = mono_ns();
            outcome = match workload.step(now, outcome) {
                Step::Acquire => Outcome::Granted {
                    token: self.acquire(),
                },
                Step::Renew { token } | Step::Keepalive { token } => Outcome::Renewed {
                    kept: self.renew(token),
                },
                Step::Read => {
                    self.read();
                    Outcome::Finished
                }
                Step::Work { for_ns } => {
                    sleep_until(now.saturating_add(for_ns));
                    Outcome::Finished
                }
                Step::CheckValidity => {
                    // By its own clock the lease may have run out: then no write, and
                    // nothing to release.
                    self.end_belief_if_elapsed();
                    Outcome::Validity {
                        valid: self.belief.is_some(),
                    }
                }
                Step::Write { token, value } => {
                    self.write(token, value);
                    Outcome::Finished
                }
                Step::Delete { .. } => {
                    unreachable!("live mode refuses a cleanup before it starts (plan.rs)")
                }
                Step::Release { token } => {
                    self.release(token);
                    Outcome::Finished
                }
                Step::Done => break,
            };
        }
        self.end_belief_if_elapsed();
    }

    /// Acquire until granted, backing off after a refusal or an unknown outcome, as the
    /// simulated client does.
    fn acquire(&mut self) -> u64 {
        loop {
            self.safepoint(false, NodeEvent::Acquire);
            let pending = self.invoke(OpFn::Acquire, None, None);
            let random = self.rng.gen_range(1..1u64 << 53);
            let call = lock_call(&self.config, 0, &pending.reference, random);
            let answer = self.lock.acquire(&call);
            match answer {
                Ok(Ok(Grant {
                    token,
                    valid_until_ms,
                })) => {
                    self.complete(pending, OpType::Ok, |o| o.token = Some(token));
                    self.start_belief(token, valid_until_ms);
                    self.safepoint(true, NodeEvent::Grant);
                    return token;
                }
                Ok(Err(reason)) => {
                    self.complete(pending, OpType::Fail, |o| o.error = Some(reason));
                }
                // Unknown (the server down, a cut link): retried like a refusal, as the
                // simulated client does.
                Err(e) => self.unknown(pending, &e),
            }
            self.backoff();
        }
    }

    fn read(&mut self) {
        self.safepoint(false, NodeEvent::Read);
        let pending = self.invoke(OpFn::Read, None, None);
        let key = self.config.client.key.clone();
        match self.resource.read(&key) {
            Ok(read) => self.complete(pending, OpType::Ok, |o| {
                o.value = read.value;
                o.token = read.token;
            }),
            Err(e) => self.unknown(pending, &e),
        }
        self.safepoint(true, NodeEvent::Read);
    }

    fn renew(&mut self, token: u64) -> bool {
        self.safepoint(false, NodeEvent::Renew);
        let pending = self.invoke(OpFn::Renew, Some(token), None);
        let call = lock_call(&self.config, token, &pending.reference, 0);
        let kept = match self.lock.renew(&call) {
            Ok(Ok(valid_until_ms)) => {
                self.complete(pending, OpType::Ok, |_| {});
                self.start_belief(token, valid_until_ms);
                true
            }
            Ok(Err(reason)) => {
                self.complete(pending, OpType::Fail, |o| o.error = Some(reason));
                self.end_belief("renewal refused");
                false
            }
            Err(e) => {
                // No answer: keep working and renew again at the next period
                // (`renew_after_failure = "retry"`).
                self.unknown(pending, &e);
                true
            }
        };
        self.safepoint(true, NodeEvent::Renew);
        kept
    }

    fn write(&mut self, token: u64, value: String) {
        self.safepoint(false, NodeEvent::Write);
        let pending = self.invoke(OpFn::Write, Some(token), Some(value.clone()));
        let key = self.config.client.key.clone();
        let call = WriteCall {
            key: &key,
            token,
            value: &value,
            holder: &self.name,
            op: &pending.reference,
        };
        match self.resource.write(&call) {
            Ok(WriteAnswer::Accepted { .. }) => self.complete(pending, OpType::Ok, |_| {}),
            Ok(WriteAnswer::Rejected { highest }) => {
                let error = format!("stale token {token}: highest accepted is {highest}");
                self.complete(pending, OpType::Fail, |o| o.error = Some(error));
                self.end_belief("write rejected as stale");
            }
            Err(e) => self.unknown(pending, &e),
        }
        self.safepoint(true, NodeEvent::Write);
    }

    fn release(&mut self, token: u64) {
        self.end_belief("released");
        self.safepoint(false, NodeEvent::Release);
        let pending = self.invoke(OpFn::Release, Some(token), None);
        let call = lock_call(&self.config, token, &pending.reference, 0);
        match self.lock.release(&call) {
            Ok(Ok(())) => self.complete(pending, OpType::Ok, |_| {}),
            Ok(Err(reason)) => self.complete(pending, OpType::Fail, |o| o.error = Some(reason)),
            Err(e) => self.unknown(pending, &e),
        }
        self.safepoint(true, NodeEvent::Release);
    }

    /// Record an invoke (now) and return it, with its reference for the log.
    fn invoke(&mut self, f: OpFn, token: Option<u64>, value: Option<String>) -> Pending {
        self.seq += 1;
        let (lock, key) = match f {
            OpFn::Acquire | OpFn::Renew | OpFn::Release => {
                (Some(Name::from(self.config.client.lock.as_str())), None)
            }
            _ => (None, Some(Name::from(self.config.client.key.as_str()))),
        };
        let op = Op {
            at: Stamp::default(),
            process: self.process,
            node: self.name.clone(),
            op_type: OpType::Invoke,
            f,
            lock,
            key,
            token,
            value,
            expected: None,
            value_unknown: false,
            ttl_ms: None,
            error: None,
        };
        self.emit(Some(self.seq), Entry::Op(op.clone()));
        Pending {
            seq: self.seq,
            op,
            reference: op_ref(&self.name, self.seq),
        }
    }

    fn complete(&mut self, pending: Pending, op_type: OpType, fill: impl FnOnce(&mut Op)) {
        let mut op = pending.op;
        op.op_type = op_type;
        fill(&mut op);
        self.emit(Some(pending.seq), Entry::Op(op));
    }

    /// The call's outcome is unknown: record `info` and retire the process id (the session
    /// connects again at its next call if its connection broke).
    fn unknown(&mut self, pending: Pending, error: &Unknown) {
        let message = error.clone();
        self.complete(pending, OpType::Info, |o| o.error = Some(message));
        self.process += self.config.process_stride;
    }

    /// Believe the lease held until `valid_until_ms` (the form's rule, on the monotonic clock),
    /// or by default until the request's time plus the TTL less the safety margin
    /// (`deadline_from = "request"`: counted from the invoke just recorded).
    fn start_belief(&mut self, token: u64, valid_until_ms: Option<i64>) {
        let until = match valid_until_ms {
            Some(ms) => ms.max(0) as u64 * 1_000_000,
            None => {
                let c = &self.config.client;
                self.last_invoke_ns + c.ttl_ms.saturating_sub(c.safety_margin_ms) * 1_000_000
            }
        };
        // Without `validity_check` the client acts as holder until told otherwise (K15): its
        // belief has no end of its own, as the simulated client's has none.
        let until = if self.config.client.validity_check {
            until
        } else {
            u64::MAX
        };
        self.belief = Some(Belief {
            token,
            until_mono_ns: until,
        });
        let mut event = self.belief_event(Phase::Start, token, None);
        event.expires_at_ms = (until != u64::MAX).then(|| self.trial_ms(until));
        self.emit(None, Entry::Event(event));
    }

    fn end_belief(&mut self, why: &str) {
        self.end_belief_if_elapsed();
        if let Some(b) = self.belief.take() {
            let event = self.belief_event(Phase::End, b.token, Some(why));
            self.emit(None, Entry::Event(event));
        }
    }

    /// A belief whose time has run out ends at that moment (the simulated client's timer;
    /// here noticed at the next step, and stamped when it happened).
    fn end_belief_if_elapsed(&mut self) {
        let Some(b) = self.belief else {
            return;
        };
        if mono_ns() < b.until_mono_ns {
            return;
        }
        self.belief = None;
        let event = self.belief_event(Phase::End, b.token, Some("validity elapsed"));
        self.emit_at(b.until_mono_ns, None, Entry::Event(event));
    }

    fn belief_event(&self, phase: Phase, token: u64, detail: Option<&str>) -> Event {
        let mut e = Event::new(EventKind::Belief);
        e.node = self.name.clone();
        e.phase = Some(phase);
        e.lock = Some(Name::from(self.config.client.lock.as_str()));
        e.holder = Some(self.name.clone());
        e.token = Some(token);
        e.detail = detail.map(str::to_owned);
        e
    }

    fn trial_ms(&self, mono: u64) -> i64 {
        (self.origin.since_ns(mono) / 1_000_000) as i64
    }

    /// Record `entry` now; first the end of a belief whose time ran out meanwhile (while the
    /// process was stopped, say), stamped when it ran out.
    fn emit(&mut self, seq: Option<u64>, entry: Entry) {
        self.end_belief_if_elapsed();
        let now = mono_ns();
        if matches!(&entry, Entry::Op(op) if op.op_type == OpType::Invoke) {
            self.last_invoke_ns = now;
        }
        self.emit_at(now, seq, entry);
    }

    fn emit_at(&self, mono_ns: u64, seq: Option<u64>, entry: Entry) {
        send(&ClientLine::Record {
            mono_ns,
            seq,
            entry: Box::new(entry),
        });
    }

    fn backoff(&mut self) {
        let b = self.config.client.backoff_ms;
        let ms = self.rng.gen_range(b.min_ms..=b.max_ms);
        std::thread::sleep(Duration::from_millis(ms));
    }

    /// Stop at an armed safepoint until the harness says `go` (it pauses this process there).
    fn safepoint(&mut self, after: bool, event: NodeEvent) {
        let now = mono_ns();
        let at_ms = self.origin.since_ns(now) / 1_000_000;
        // Each armed safepoint counts its own occurrences, from its own time.
        let mut reached = Vec::new();
        for (armed, count) in self.config.armed.iter().zip(&mut self.occurrences) {
            if armed.after != after || armed.event != event || at_ms < armed.count_from_ms {
                continue;
            }
            *count += 1;
            if *count == armed.nth && !reached.contains(armed) {
                reached.push(*armed);
            }
        }
        if reached.is_empty() {
            return;
        }
        send(&ClientLine::Safepoint {
            mono_ns: now,
            reached,
        });
        let mut go = String::new();
        // End of input: the harness is gone; carry on and be killed.
        let _ = self.input.read_line(&mut go);
    }
}

fn lock_call<'p>(
    config: &'p ClientConfig,
    token: u64,
    reference: &'p str,
    random: u64,
) -> LockCall<'p> {
    LockCall {
        lock: &config.client.lock,
        holder: &config.client.name,
        ttl_ms: config.client.ttl_ms,
        safety_margin_ms: config.client.safety_margin_ms,
        token,
        op: reference,
        now_ms: mono_ms,
        random,
        observe,
    }
}

/// Record `event`, which a lock form observed in a server's reply, now.
fn observe(event: Event) {
    send(&ClientLine::Record {
        mono_ns: mono_ns(),
        seq: None,
        entry: Box::new(Entry::Event(event)),
    });
}

fn sleep_until(mono: u64) {
    let now = mono_ns();
    if mono > now {
        std::thread::sleep(Duration::from_nanos(mono - now));
    }
}
