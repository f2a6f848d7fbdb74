//! The harness's side of a running trial: the scenario's faults applied when they are due
//! (signals to processes, crashes and restarts of servers, clock steps, network windows on the
//! proxies), the clients' lines collected, and what the faults would still undo undone at the
//! end.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

use fencesim_history::{Event, EventKind, Name, Phase};
use fencesim_scenario::{Cut, LinkSel};
use nix::sys::signal::{kill, Signal};

use crate::assemble::ClientRecord;
use crate::clock::{mono_ns, Origin};
use crate::plan::{FaultAt, LiveAction, LiveFault, LivePlan, Target};
use crate::processes::{FromClient, Processes};
use crate::proxy::Proxy;
use crate::server_node::ServerProcess;
use crate::wire::ClientLine;
use crate::LiveError;

/// A scheduled action of the harness.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Due {
    /// Apply fault `0` of the plan.
    Fire(usize),
    /// Continue a paused target.
    Resume(Target),
    /// Start crashed server node `0` again.
    Restart(usize),
    /// Start the crashed PostgreSQL server again.
    RestartPostgres,
    /// End network window `0` (a partition, latency or loss).
    EndWindow(u64),
}

/// A network fault in force.
#[derive(Clone, Debug)]
enum Window {
    Partition(Cut),
    Latency(LinkSel, u64),
    Loss(LinkSel, f64),
}

impl Window {
    /// Whom the history's event names: an isolated node, as the simulator records it, or the
    /// network.
    fn target(&self) -> String {
        match self {
            Window::Partition(Cut::Isolate(node)) => node.clone(),
            _ => "network".to_owned(),
        }
    }
}

/// The harness's side of a running trial.
pub(crate) struct Running<'p> {
    plan: &'p LivePlan,
    origin: Origin,
    processes: Processes,
    servers: Vec<Box<dyn ServerProcess>>,
    postgres: Option<&'p std::sync::Mutex<crate::pg_server::PgServer>>,
    /// Scheduled actions by (monotonic deadline, order).
    due: BTreeMap<(u64, u64), Due>,
    next: u64,
    pub(crate) records: Vec<ClientRecord>,
    pub(crate) nemesis: Vec<(u64, Event)>,
    open: usize,
    /// A fault that could not be applied: the trial fails with it.
    pub(crate) failure: Option<LiveError>,
    /// The proxy on each link, if the trial has network faults.
    pub(crate) proxies: Vec<Proxy>,
    /// The network faults in force, by id.
    windows: BTreeMap<u64, Window>,
    /// What real time disturbed: each scheduled action that took effect later than
    /// [`LATE_MS`] after its time, in words.
    pub(crate) disturbed: Vec<String>,
}

/// How late a scheduled action (a fault, a resume, a restart, a window's end) may take effect
/// before the trial counts as disturbed by real time: a busy machine's scheduling and a
/// server's start take tens of milliseconds; the bundled live scenarios leave margins of
/// several hundred.
pub const LATE_MS: u64 = 200;

impl<'p> Running<'p> {
    pub(crate) fn new(
        plan: &'p LivePlan,
        origin: Origin,
        processes: Processes,
        servers: Vec<Box<dyn ServerProcess>>,
        postgres: Option<&'p std::sync::Mutex<crate::pg_server::PgServer>>,
    ) -> Self {
        let mut run = Running {
            plan,
            origin,
            open: processes.children.len(),
            processes,
            servers,
            postgres,
            due: BTreeMap::new(),
            next: 0,
            records: Vec::new(),
            nemesis: Vec::new(),
            failure: None,
            proxies: Vec::new(),
            windows: BTreeMap::new(),
            disturbed: Vec::new(),
        };
        for (n, fault) in plan.faults.iter().enumerate() {
            if let FaultAt::Ms(ms) = fault.at {
                run.schedule(origin.mono_ns + ms * 1_000_000, Due::Fire(n));
            }
        }
        run
    }

    fn schedule(&mut self, at: u64, what: Due) {
        self.next += 1;
        self.due.insert((at, self.next), what);
    }

    /// Run until every client has finished, the scenario's `duration_ms` has passed, or the
    /// user interrupts; `Some(reason)` if the trial was cut short.
    pub(crate) fn drive(
        &mut self,
        rx: &mpsc::Receiver<FromClient>,
        interrupted: &(dyn Fn() -> bool + Sync),
    ) -> Option<String> {
        let deadline = self.origin.mono_ns + self.plan.scenario.duration_ms * 1_000_000;
        loop {
            self.run_due();
            if self.failure.is_some() {
                return None;
            }
            if self.open == 0 {
                self.check_servers();
                self.undo_now();
                return None;
            }
            // Cut short: continue what is paused and restart what crashed first, or the
            // harness would wait on a stopped server for the log it reads next.
            if interrupted() {
                self.undo_now();
                return Some("interrupted".to_owned());
            }
            let now = mono_ns();
            if now >= deadline {
                self.undo_now();
                return Some(format!(
                    "the clients had not finished after duration_ms = {}",
                    self.plan.scenario.duration_ms
                ));
            }
            let next_due = self.due.keys().next().map_or(deadline, |(t, _)| *t);
            let wait = next_due.min(deadline).saturating_sub(now).min(100_000_000);
            match rx.recv_timeout(Duration::from_nanos(wait.max(1))) {
                Ok((i, Some(line))) => self.on_line(i, line),
                Ok((i, None)) => {
                    self.open -= 1;
                    self.check_exit(i);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// Client `i` closed its output: it must have finished its workload and exited 0. One
    /// killed from outside (a user's `kill`, the OOM killer) fails the trial: its history
    /// would end its lease at the end of the history, a false violation.
    fn check_exit(&mut self, i: usize) {
        let name = self.plan.scenario.clients[i].name.clone();
        match self.processes.wait(i) {
            Some(status) if status.success() => {}
            Some(status) => {
                self.failure.get_or_insert(LiveError::Server(format!(
                    "{name}'s process ended outside the scenario ({status}): the trial is not \
                     judged"
                )));
            }
            None => {}
        }
    }

    /// Every server node that no fault has down must still run at the trial's end: one that
    /// died outside the scenario fails the trial (its keys went with it, unrecorded).
    pub(crate) fn check_servers(&mut self) {
        let down: Vec<usize> = self
            .due
            .values()
            .filter_map(|d| match d {
                Due::Restart(i) => Some(*i),
                _ => None,
            })
            .collect();
        for (i, node) in self.servers.iter_mut().enumerate() {
            if down.contains(&i) {
                continue;
            }
            if let Some(status) = node.exited() {
                let name = self.plan.name(Target::Server(i));
                self.failure.get_or_insert(LiveError::Server(format!(
                    "{name} ended outside the scenario ({status}): the trial is not judged"
                )));
            }
        }
    }

    /// The clients are done: undo, now, what the faults would still undo (continue what is
    /// paused, restart what crashed, end the network windows), so that the servers answer
    /// the harness and the history's faults all end. Faults yet to start are dropped.
    fn undo_now(&mut self) {
        let due: Vec<Due> = std::mem::take(&mut self.due).into_values().collect();
        for what in due {
            match what {
                Due::Fire(_) => {}
                Due::Resume(target) => self.resume(target),
                Due::Restart(i) => self.restart(i),
                Due::RestartPostgres => self.restart_postgres(),
                Due::EndWindow(id) => self.end_window(id),
            }
        }
    }

    fn run_due(&mut self) {
        let now = mono_ns();
        while let Some((&key, &what)) = self.due.iter().next() {
            if key.0 > now {
                return;
            }
            self.due.remove(&key);
            let what_words = self.describe(what);
            match what {
                Due::Fire(n) => self.fire(self.plan.faults[n].clone()),
                Due::Resume(target) => self.resume(target),
                Due::Restart(i) => self.restart(i),
                Due::RestartPostgres => self.restart_postgres(),
                Due::EndWindow(id) => self.end_window(id),
            }
            // Measured once the action is done: a restart counts until the server answers.
            let late_ms = mono_ns().saturating_sub(key.0) / 1_000_000;
            if late_ms > LATE_MS {
                self.disturbed.push(format!(
                    "{what_words} took effect {late_ms} ms late (due at {} ms)",
                    self.origin.since_ns(key.0) / 1_000_000
                ));
            }
        }
    }

    /// A scheduled action in words, for [`Running::disturbed`].
    fn describe(&self, what: Due) -> String {
        match what {
            Due::Fire(n) => {
                let fault = &self.plan.faults[n];
                format!("the fault on {}", self.plan.name(fault.target))
            }
            Due::Resume(target) => format!("the resume of {}", self.plan.name(target)),
            Due::Restart(i) => format!("the restart of {}", self.plan.name(Target::Server(i))),
            Due::RestartPostgres => "the restart of PostgreSQL".to_owned(),
            Due::EndWindow(_) => "the end of a network fault".to_owned(),
        }
    }

    fn on_line(&mut self, i: usize, line: ClientLine) {
        let name = &self.plan.scenario.clients[i].name;
        match line {
            ClientLine::Record {
                mono_ns,
                seq,
                entry,
            } => self.records.push(ClientRecord {
                t_ns: self.origin.since_ns(mono_ns),
                client: name.clone(),
                seq,
                entry: *entry,
            }),
            ClientLine::Safepoint { reached, .. } => {
                // Every fault armed there, in the plan's order (two may share a trigger).
                let armed: Vec<LiveFault> = self
                    .plan
                    .faults
                    .iter()
                    .filter(|f| {
                        f.target == Target::Client(i)
                            && reached.iter().any(|at| f.at == FaultAt::Safepoint(*at))
                    })
                    .cloned()
                    .collect();
                for fault in armed {
                    self.fire(fault);
                }
                // Buffered in the pipe: a paused client reads it once continued.
                self.processes.go(i);
            }
            ClientLine::Error { message } => {
                eprintln!("warning: {name}: {message}");
            }
            ClientLine::Ready => {}
        }
    }

    /// Apply `fault` now.
    fn fire(&mut self, fault: LiveFault) {
        let now = mono_ns();
        let Some(target) = self.resolve(fault.target) else {
            return;
        };
        let name = self.plan.name(target);
        match fault.action {
            LiveAction::Pause { duration_ms } => {
                let how = match target {
                    Target::Postgres => "SIGSTOP of every PostgreSQL process",
                    _ => "SIGSTOP",
                };
                if !self.signal(target, Signal::SIGSTOP) {
                    return;
                }
                self.schedule(now + duration_ms * 1_000_000, Due::Resume(target));
                let detail = format!("{how} for {duration_ms} ms");
                self.nemesis_event(now, EventKind::Pause, Phase::Start, &name, detail);
            }
            LiveAction::Crash { restart_after_ms } if target == Target::Postgres => {
                let Some(server) = self.postgres else {
                    self.failure = Some(LiveError::Server(
                        "a crash of PostgreSQL needs the server fencesim starts".to_owned(),
                    ));
                    return;
                };
                if let Ok(mut server) = server.lock() {
                    server.crash();
                }
                let detail = match restart_after_ms {
                    Some(ms) => {
                        self.schedule(now + ms * 1_000_000, Due::RestartPostgres);
                        format!("SIGKILL of PostgreSQL's process group, restarted after {ms} ms (fsync=on: every acknowledged commit kept)")
                    }
                    None => {
                        "SIGKILL of PostgreSQL's process group, down until a restart".to_owned()
                    }
                };
                self.nemesis_event(now, EventKind::Crash, Phase::Start, &name, detail);
            }
            LiveAction::Crash { restart_after_ms } => {
                let Target::Server(i) = target else { return };
                self.servers[i].crash();
                let loses = self.servers[i].crash_loses();
                let detail = match restart_after_ms {
                    Some(ms) => {
                        self.schedule(now + ms * 1_000_000, Due::Restart(i));
                        format!("SIGKILL, restarted after {ms} ms ({loses})")
                    }
                    None => format!("SIGKILL, down until a restart ({loses})"),
                };
                self.nemesis_event(now, EventKind::Crash, Phase::Start, &name, detail);
            }
            LiveAction::Restart => match target {
                Target::Server(i) => self.restart(i),
                Target::Postgres => self.restart_postgres(),
                _ => {}
            },
            LiveAction::Partition { cut, duration_ms } => {
                let detail = describe(&cut, duration_ms);
                self.open_window(
                    now,
                    Window::Partition(cut),
                    duration_ms,
                    EventKind::Partition,
                    detail,
                );
            }
            LiveAction::Heal => {
                // As the simulator records a heal: each open partition ends, then the heal.
                let open: Vec<u64> = self
                    .windows
                    .iter()
                    .filter(|(_, w)| matches!(w, Window::Partition(_)))
                    .map(|(id, _)| *id)
                    .collect();
                for id in open {
                    if let Some(window) = self.windows.remove(&id) {
                        let detail = "healed".to_owned();
                        let target = window.target();
                        self.nemesis_event(now, EventKind::Partition, Phase::End, &target, detail);
                    }
                }
                self.apply_windows();
                for phase in [Phase::Start, Phase::End] {
                    let detail = "every partition healed".to_owned();
                    self.nemesis_event(now, EventKind::Heal, phase, "network", detail);
                }
            }
            LiveAction::Latency {
                link,
                delay_ms,
                duration_ms,
            } => {
                let detail = format!("{delay_ms} ms more on {}", links(&link));
                let window = Window::Latency(link, delay_ms);
                self.open_window(now, window, duration_ms, EventKind::Latency, detail);
            }
            LiveAction::Loss {
                link,
                rate,
                duration_ms,
            } => {
                let detail = format!("connection resets at rate {rate} on {}", links(&link));
                self.open_window(
                    now,
                    Window::Loss(link, rate),
                    duration_ms,
                    EventKind::Loss,
                    detail,
                );
            }
            LiveAction::ClockJump { delta_ms } => {
                let Target::Server(i) = target else { return };
                if let Err(e) = self.servers[i].jump_clock(delta_ms) {
                    self.failure = Some(e);
                    return;
                }
                let detail = format!(
                    "wall clock {delta_ms:+} ms ({})",
                    self.servers[i].clock_library()
                );
                self.nemesis_event(now, EventKind::ClockJump, Phase::Start, &name, detail);
                let end = "instantaneous".to_owned();
                self.nemesis_event(now, EventKind::ClockJump, Phase::End, &name, end);
            }
        }
    }

    /// Put network fault `window` in force, until `duration_ms` from now if given.
    fn open_window(
        &mut self,
        now: u64,
        window: Window,
        duration_ms: Option<u64>,
        kind: EventKind,
        detail: String,
    ) {
        self.next += 1;
        let id = self.next;
        let target = window.target();
        self.windows.insert(id, window);
        self.apply_windows();
        if let Some(ms) = duration_ms {
            self.schedule(now + ms * 1_000_000, Due::EndWindow(id));
        }
        self.nemesis_event(now, kind, Phase::Start, &target, detail);
    }

    fn end_window(&mut self, id: u64) {
        let Some(window) = self.windows.remove(&id) else {
            return; // healed already
        };
        self.apply_windows();
        let target = window.target();
        let kind = match window {
            Window::Partition(_) => EventKind::Partition,
            Window::Latency(..) => EventKind::Latency,
            Window::Loss(..) => EventKind::Loss,
        };
        self.nemesis_event(
            mono_ns(),
            kind,
            Phase::End,
            &target,
            "window over".to_owned(),
        );
    }

    /// Set every proxy's directions from the network faults in force.
    fn apply_windows(&self) {
        for proxy in &self.proxies {
            let (c, s) = (proxy.client.as_str(), proxy.server.as_str());
            let direction = |from: &str, to: &str| {
                let mut d = crate::proxy::Direction::default();
                for window in self.windows.values() {
                    match window {
                        Window::Partition(cut) => d.stopped |= cut.blocks(from, to),
                        Window::Latency(link, ms) if link.matches(from, to) => {
                            d.delay_ms = d.delay_ms.max(*ms)
                        }
                        Window::Loss(link, rate) if link.matches(from, to) => {
                            d.loss = d.loss.max(*rate)
                        }
                        _ => {}
                    }
                }
                d
            };
            let (up, down) = (direction(c, s), direction(s, c));
            proxy.set(|l| {
                l.up = up;
                l.down = down;
            });
        }
    }

    /// The node a fault on `target` strikes now: `leader` is whichever etcd member the
    /// cluster says leads (the trial fails if none answers).
    fn resolve(&mut self, target: Target) -> Option<Target> {
        if target != Target::Leader {
            return Some(target);
        }
        let urls: Vec<String> = self.servers.iter().map(|s| s.url_at(s.port())).collect();
        let leader = crate::etcd_gateway::leader(&urls)
            .and_then(|name| self.plan.server_nodes().iter().position(|n| *n == name));
        if leader.is_none() {
            self.failure.get_or_insert(LiveError::Server(
                "a fault on the leader: no etcd member said which member leads".to_owned(),
            ));
        }
        leader.map(Target::Server)
    }

    fn restart(&mut self, i: usize) {
        if let Err(e) = self.servers[i].restart() {
            self.failure = Some(e);
            return;
        }
        let name = self.plan.name(Target::Server(i));
        let detail = format!("{name} restarted");
        self.nemesis_event(mono_ns(), EventKind::Crash, Phase::End, &name, detail);
    }

    fn restart_postgres(&mut self) {
        let Some(server) = self.postgres else { return };
        let restarted = server.lock().map(|mut s| s.restart());
        if let Ok(Err(e)) = restarted {
            self.failure = Some(e);
            return;
        }
        let name = self.plan.name(Target::Postgres);
        let detail = "postgresql restarted (after crash recovery)".to_owned();
        self.nemesis_event(mono_ns(), EventKind::Crash, Phase::End, &name, detail);
    }

    fn resume(&mut self, target: Target) {
        // Stamped before the signal (a pause's start after it): the target cannot record
        // anything between the pause's start and its end.
        let now = mono_ns();
        let name = self.plan.name(target);
        // Overlapping pauses: continue only when the last one ends, as the simulation thaws.
        let still_paused = self
            .due
            .values()
            .any(|due| matches!(due, Due::Resume(t) if *t == target));
        let detail = if still_paused {
            format!("{name}'s pause ended; another pause keeps it stopped")
        } else {
            self.signal(target, Signal::SIGCONT);
            format!("{name} resumed (SIGCONT)")
        };
        self.nemesis_event(now, EventKind::Pause, Phase::End, &name, detail);
    }

    /// Send `signal` to `target`; false (and the trial fails) if it cannot be reached.
    fn signal(&mut self, target: Target, signal: Signal) -> bool {
        match target {
            Target::Client(i) => {
                let _ = kill(self.processes.pid(i), signal);
            }
            Target::Server(i) => match signal {
                Signal::SIGSTOP => self.servers[i].pause(),
                _ => self.servers[i].resume(),
            },
            // Resolved when the fault fires.
            Target::Leader => {}
            Target::Network => {}
            Target::Postgres => match self.postgres.and_then(|s| s.lock().ok()) {
                Some(server) => server.signal_all(signal),
                None => {
                    self.failure = Some(LiveError::Server(
                        "a pause of PostgreSQL needs the server fencesim starts, not --postgres"
                            .to_owned(),
                    ));
                    return false;
                }
            },
        }
        true
    }

    fn nemesis_event(
        &mut self,
        mono: u64,
        kind: EventKind,
        phase: Phase,
        target: &str,
        detail: String,
    ) {
        let mut e = Event::new(kind);
        e.node = Name::from("nemesis");
        e.phase = Some(phase);
        e.target = Some(Name::from(target));
        e.detail = Some(detail);
        self.nemesis.push((self.origin.since_ns(mono), e));
    }
}

/// Selected links, `links from client-1 to any`.
fn links(link: &LinkSel) -> String {
    let end = |n: &Option<String>| n.clone().unwrap_or_else(|| "any".to_owned());
    format!("links from {} to {}", end(&link.from), end(&link.to))
}

/// A partition as the simulator's nemesis describes one.
fn describe(cut: &Cut, duration_ms: Option<u64>) -> String {
    let what = match cut {
        Cut::Isolate(node) => format!("isolate {node}"),
        Cut::Groups(groups) => format!("groups {groups:?}"),
        Cut::OneWay { from, to } => format!("one way {from} -> {to}"),
    };
    match duration_ms {
        Some(ms) => format!("{what} for {ms} ms"),
        None => what,
    }
}
