//! One live trial: fresh tables, a process per client, the scenario's pauses applied with
//! SIGSTOP and SIGCONT, and the history assembled from what everyone recorded.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use fencesim_history::{Event, EventKind, History, Name, Phase};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::assemble::{assemble, ClientRecord, LogRow};
use crate::clock::{mono_ns, Origin};
use crate::form::{Endpoints, LiveForms, RedisPersistence, LOG_SCHEMA};
use crate::plan::{FaultAt, LiveAction, LiveFault, LivePlan, Target};
use crate::proxy::Proxy;
use crate::redis_server::RedisNode;
use crate::wire::{ClientConfig, ClientLine};
use crate::LiveError;
use fencesim_scenario::{Cut, LinkSel};

/// The schema a run's tables live in, `fencesim_live_<pid>`: created for each trial and
/// dropped after it, so that a server the user already runs keeps everything else it has, and
/// two runs against one server do not touch each other's tables.
pub fn schema() -> String {
    format!("fencesim_live_{}", std::process::id())
}

/// How long after every client is ready the trial's clock starts (time for the origin's line
/// to reach them).
const START_MARGIN_NS: u64 = 50_000_000;

/// What a trial needs besides its plan.
pub struct TrialSetup<'a> {
    /// The binary to run as `PROGRAM live-client` (the running `fencesim`, or a user's own).
    pub program: &'a Path,
    /// The forms of the binary's designs.
    pub forms: &'a LiveForms,
    /// libpq connection string of the database.
    pub conninfo: &'a str,
    /// Written in the history's header.
    pub tool_version: &'a str,
    /// Asked between steps: stop the trial early (Ctrl-C), keeping what was recorded.
    pub interrupted: &'a (dyn Fn() -> bool + Sync),
    /// The PostgreSQL server fencesim started (`None`: the user's own, which live mode does
    /// not pause or crash).
    pub postgres: Option<&'a std::sync::Mutex<crate::pg_server::PgServer>>,
    /// Its port (`None`: the user's own, which live mode puts no proxy before).
    pub postgres_port: Option<u16>,
    /// Redis servers of the user's (`--redis`), one per node, instead of nodes fencesim
    /// starts (no Redis faults then).
    pub redis_urls: Option<&'a [String]>,
}

/// A finished trial.
#[derive(Clone, Debug)]
pub struct TrialRecord {
    /// The history.
    pub history: History,
    /// How long it ran, real ms.
    pub real_ms: u64,
    /// Whether it stopped early (interrupted, or past the scenario's `duration_ms`).
    pub cut_short: Option<String>,
}

/// The connection string with the run's schema first on the search path: a libpq
/// `key=value` string gets an `options` pair, a `postgres://` or `postgresql://` URL an
/// `options` query parameter.
pub fn with_schema(conninfo: &str) -> String {
    let schema = schema();
    if conninfo.starts_with("postgres://") || conninfo.starts_with("postgresql://") {
        let glue = if conninfo.contains('?') { '&' } else { '?' };
        return format!("{conninfo}{glue}options=-c%20search_path%3D{schema}");
    }
    format!("{conninfo} options='-c search_path={schema}'")
}

/// Run trial `trial` of `plan`.
///
/// # Errors
/// The database could not be prepared or read, or a client process could not start.
pub fn run_trial(
    plan: &LivePlan,
    setup: &TrialSetup<'_>,
    trial: u64,
) -> Result<TrialRecord, LiveError> {
    let scenario = &plan.scenario;
    let conninfo = with_schema(setup.conninfo);
    let mut admin = postgres::Client::connect(setup.conninfo, postgres::NoTls).map_err(db)?;
    prepare(&mut admin, plan, setup.forms)?;
    drop(admin);
    let redis = match setup.redis_urls {
        Some(_) => Vec::new(),
        None => start_redis(plan)?,
    };
    let proxies = start_proxies(plan, &redis, setup.postgres_port, trial)?;
    let token_order = setup
        .forms
        .lock_service(&scenario.lock_service.kind, &scenario.lock_service.knobs)
        .map_err(LiveError::Server)?
        .token_order();

    let (tx, rx) = mpsc::channel();
    let mut processes = Processes::default();
    for (i, client) in scenario.clients.iter().enumerate() {
        let config = ClientConfig {
            client: client.clone(),
            lock_kind: scenario.lock_service.kind.clone(),
            lock_knobs: scenario.lock_service.knobs.clone(),
            resource_mode: scenario.resource.mode.clone(),
            resource_knobs: scenario.resource.knobs.clone(),
            endpoints: match setup.redis_urls {
                Some(urls) => Endpoints {
                    postgres: conninfo.clone(),
                    resource: conninfo.clone(),
                    redis: urls.to_vec(),
                    // A trial's keys must not meet the last trial's (still within their TTL).
                    redis_prefix: format!("fencesim-live-{}-{trial}:", std::process::id()),
                    timeout_ms: client.timeout_ms,
                },
                None => endpoints(
                    plan,
                    &client.name,
                    &conninfo,
                    &redis,
                    &proxies,
                    client.timeout_ms,
                ),
            },
            origin: Origin::now(),
            process: i as u64,
            process_stride: scenario.clients.len() as u64,
            armed: plan.armed(i),
            // Live runs are not reproducible from a seed anyway: the values (Redlock's lock
            // values, the backoffs) differ from run to run, as a real client's would.
            rng_seed: (Origin::now().wall_us as u64) ^ (trial << 20) ^ i as u64,
        };
        processes.spawn(setup.program, &config, i, tx.clone())?;
    }
    drop(tx);
    let origin = processes.start_together(&rx)?;

    let mut run = Running::new(plan, origin, processes, redis, setup.postgres);
    run.proxies = proxies;
    let cut_short = run.drive(&rx, setup.interrupted);
    let end_ns = origin.since_ns(mono_ns());
    let Running {
        records,
        nemesis,
        failure,
        ..
    } = run;
    if let Some(failure) = failure {
        return Err(failure);
    }
    // A fresh connection: one opened before the trial would have died with a crashed server.
    let mut admin = postgres::Client::connect(&conninfo, postgres::NoTls).map_err(db)?;
    let log = read_log(&mut admin)?;
    // The history has what the tables said; they go.
    let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", schema()));
    let mut history = assemble(
        &scenario.name,
        setup.tool_version,
        &origin,
        records,
        log,
        nemesis,
        end_ns,
    )
    .map_err(LiveError::Server)?;
    history.header.token_order = token_order;
    Ok(TrialRecord {
        history,
        real_ms: end_ns / 1_000_000,
        cut_short,
    })
}

/// A proxy on every link from a client to a server, if the plan has network faults.
fn start_proxies(
    plan: &LivePlan,
    redis: &[RedisNode],
    postgres_port: Option<u16>,
    trial: u64,
) -> Result<Vec<Proxy>, LiveError> {
    if !plan.uses_network() {
        return Ok(Vec::new());
    }
    let postgres_port = postgres_port.ok_or_else(|| {
        LiveError::Server(
            "network faults need the PostgreSQL server fencesim starts, not --postgres".to_owned(),
        )
    })?;
    let mut proxies = Vec::new();
    for (c, client) in plan.scenario.clients.iter().enumerate() {
        for (s, server) in plan.servers().iter().enumerate() {
            let target = match plan.redis_nodes().iter().position(|r| r == server) {
                Some(i) => redis[i].port(),
                None => postgres_port,
            };
            let seed = trial << 32 | (c as u64) << 16 | s as u64;
            let proxy = Proxy::start(&client.name, server, target, seed)?;
            // PostgreSQL's client library cannot time a call out: a cut link resets.
            proxy.set(|l| l.reset_when_stopped = redis.iter().all(|r| r.name != *server));
            proxies.push(proxy);
        }
    }
    Ok(proxies)
}

/// Where client `client`'s sessions connect: straight to the servers, or through its links'
/// proxies.
fn endpoints(
    plan: &LivePlan,
    client: &str,
    conninfo: &str,
    redis: &[RedisNode],
    proxies: &[Proxy],
    timeout_ms: u64,
) -> Endpoints {
    let via = |server: &str| {
        proxies
            .iter()
            .find(|p| p.client == client && p.server == server)
            .map(|p| p.port)
    };
    let postgres = |server: &str| match via(server) {
        Some(port) => with_schema(&crate::pg_server::conninfo(port)),
        None => conninfo.to_owned(),
    };
    Endpoints {
        postgres: postgres("lease-service"),
        resource: postgres("resource"),
        redis: plan
            .redis_nodes()
            .iter()
            .zip(redis)
            .map(|(name, node)| match via(name) {
                Some(port) => format!("redis://127.0.0.1:{port}/"),
                None => node.url(),
            })
            .collect(),
        redis_prefix: String::new(),
        timeout_ms,
    }
}

/// The design's Redis nodes, fresh for the trial (those whose clocks a fault steps under
/// libfaketime).
fn start_redis(plan: &LivePlan) -> Result<Vec<RedisNode>, LiveError> {
    let Some(needs) = &plan.needs.redis else {
        return Ok(Vec::new());
    };
    needs
        .nodes
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let persistence: RedisPersistence = needs.persistence;
            RedisNode::start(name, persistence, plan.faked_clocks.contains(&i))
        })
        .collect()
}

fn db(e: postgres::Error) -> LiveError {
    LiveError::Server(format!("database: {}", crate::describe(&e)))
}

/// Drop and create the trial's schema, the log, the forms' tables and the resource's keys.
fn prepare(
    admin: &mut postgres::Client,
    plan: &LivePlan,
    forms: &LiveForms,
) -> Result<(), LiveError> {
    let scenario = &plan.scenario;
    admin
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}; SET search_path = {schema};",
            schema = schema()
        ))
        .map_err(db)?;
    let lock = forms
        .lock_service(&scenario.lock_service.kind, &scenario.lock_service.knobs)
        .map_err(LiveError::Server)?;
    let resource = forms
        .resource(&scenario.resource.mode, &scenario.resource.knobs)
        .map_err(LiveError::Server)?;
    admin.batch_execute(LOG_SCHEMA).map_err(db)?;
    if let Some(schema) = lock.needs().postgres_schema {
        admin.batch_execute(schema).map_err(db)?;
    }
    admin.batch_execute(resource.schema()).map_err(db)?;
    let mut keys: Vec<&str> = scenario.resource.keys.iter().map(String::as_str).collect();
    keys.extend(scenario.clients.iter().map(|c| c.key.as_str()));
    keys.sort_unstable();
    keys.dedup();
    for key in keys {
        resource.add_key(admin, key).map_err(db)?;
    }
    Ok(())
}

fn read_log(admin: &mut postgres::Client) -> Result<Vec<LogRow>, LiveError> {
    let rows = admin
        .query(
            "SELECT seq, at_us, node, event, lock, key, holder, token, highest, expires_at_us, op \
             FROM fencesim_log ORDER BY seq",
            &[],
        )
        .map_err(db)?;
    Ok(rows
        .iter()
        .map(|r| LogRow {
            seq: r.get(0),
            at_us: r.get(1),
            node: r.get(2),
            event: r.get(3),
            lock: r.get(4),
            key: r.get(5),
            holder: r.get(6),
            token: r.get(7),
            highest: r.get(8),
            expires_at_us: r.get(9),
            op: r.get(10),
        })
        .collect())
}

/// What a client's reader thread passes on: a line, or `None` at the end of its output.
type FromClient = (usize, Option<ClientLine>);

/// The client processes, killed (after a SIGCONT, in case they are paused) on drop.
#[derive(Default)]
struct Processes {
    children: Vec<Child>,
    stdins: Vec<Option<ChildStdin>>,
    /// Their entries in [`crate::reaper`]'s list.
    owned: Vec<u64>,
}

impl Processes {
    fn spawn(
        &mut self,
        program: &Path,
        config: &ClientConfig,
        index: usize,
        tx: mpsc::Sender<FromClient>,
    ) -> Result<(), LiveError> {
        let mut command = Command::new(program);
        command.arg("live-client");
        // Their own process group: a Ctrl-C in the terminal reaches the harness, which ends
        // the trial and keeps its history, not the clients directly.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        crate::reaper::die_with_parent(&mut command);
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| LiveError::Server(format!("{}: {e}", program.display())))?;
        let mut stdin = child.stdin.take();
        let line = serde_json::to_string(config).map_err(|e| LiveError::Server(e.to_string()))?;
        if let Some(s) = stdin.as_mut() {
            let _ = writeln!(s, "{line}");
        }
        let stdout = child.stdout.take();
        std::thread::spawn(move || {
            if let Some(out) = stdout {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    match serde_json::from_str::<ClientLine>(&line) {
                        Ok(parsed) => {
                            if tx.send((index, Some(parsed))).is_err() {
                                return;
                            }
                        }
                        Err(e) => {
                            let message = format!("unreadable line from the client: {e}: {line}");
                            let _ = tx.send((index, Some(ClientLine::Error { message })));
                        }
                    }
                }
            }
            let _ = tx.send((index, None));
        });
        self.owned
            .push(crate::reaper::own(crate::reaper::Owned::Group(
                child.id() as i32
            )));
        self.children.push(child);
        self.stdins.push(stdin);
        Ok(())
    }

    /// Wait until every client has connected to its servers, then give them all one origin,
    /// a moment from now: the trial's clock starts when everyone is ready, so that a slow
    /// process start does not shift the clients against the faults' `at_ms`.
    fn start_together(&mut self, rx: &mpsc::Receiver<FromClient>) -> Result<Origin, LiveError> {
        let mut ready = 0;
        while ready < self.children.len() {
            match rx.recv_timeout(Duration::from_secs(30)) {
                Ok((_, Some(ClientLine::Ready))) => ready += 1,
                Ok((i, Some(ClientLine::Error { message }))) => {
                    return Err(LiveError::Server(format!("client {}: {message}", i + 1)));
                }
                Ok((i, None)) => {
                    return Err(LiveError::Server(format!(
                        "client {} exited before the trial started",
                        i + 1
                    )))
                }
                Ok(_) => {}
                Err(_) => {
                    return Err(LiveError::Server(
                        "the client processes were not ready within 30 s".to_owned(),
                    ))
                }
            }
        }
        let mut origin = Origin::now();
        origin.mono_ns += START_MARGIN_NS;
        origin.wall_us += (START_MARGIN_NS / 1000) as i64;
        let line = serde_json::to_string(&origin).map_err(|e| LiveError::Server(e.to_string()))?;
        for stdin in self.stdins.iter_mut().flatten() {
            let _ = writeln!(stdin, "{line}");
            let _ = stdin.flush();
        }
        Ok(origin)
    }

    fn pid(&self, index: usize) -> Pid {
        Pid::from_raw(self.children[index].id() as i32)
    }

    fn go(&mut self, index: usize) {
        if let Some(stdin) = self.stdins[index].as_mut() {
            let _ = writeln!(stdin, "go");
            let _ = stdin.flush();
        }
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        for child in &mut self.children {
            let pid = Pid::from_raw(child.id() as i32);
            let _ = kill(pid, Signal::SIGCONT);
            let _ = child.kill();
            let _ = child.wait();
        }
        for id in self.owned.drain(..) {
            crate::reaper::forget(id);
        }
    }
}

/// A scheduled action of the harness.
#[derive(Clone, Copy, Debug)]
enum Due {
    /// Apply fault `0` of the plan.
    Fire(usize),
    /// Continue a paused target.
    Resume(Target),
    /// Start crashed Redis node `0` again.
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
struct Running<'p> {
    plan: &'p LivePlan,
    origin: Origin,
    processes: Processes,
    redis: Vec<RedisNode>,
    postgres: Option<&'p std::sync::Mutex<crate::pg_server::PgServer>>,
    /// Scheduled actions by (monotonic deadline, order).
    due: BTreeMap<(u64, u64), Due>,
    next: u64,
    records: Vec<ClientRecord>,
    nemesis: Vec<(u64, Event)>,
    open: usize,
    /// A fault that could not be applied: the trial fails with it.
    failure: Option<LiveError>,
    /// The proxy on each link, if the trial has network faults.
    proxies: Vec<Proxy>,
    /// The network faults in force, by id.
    windows: BTreeMap<u64, Window>,
}

impl<'p> Running<'p> {
    fn new(
        plan: &'p LivePlan,
        origin: Origin,
        processes: Processes,
        redis: Vec<RedisNode>,
        postgres: Option<&'p std::sync::Mutex<crate::pg_server::PgServer>>,
    ) -> Self {
        let mut run = Running {
            plan,
            origin,
            open: processes.children.len(),
            processes,
            redis,
            postgres,
            due: BTreeMap::new(),
            next: 0,
            records: Vec::new(),
            nemesis: Vec::new(),
            failure: None,
            proxies: Vec::new(),
            windows: BTreeMap::new(),
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
    fn drive(
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
                self.undo_now();
                return None;
            }
            if interrupted() {
                return Some("interrupted".to_owned());
            }
            let now = mono_ns();
            if now >= deadline {
                return Some(format!(
                    "the clients had not finished after duration_ms = {}",
                    self.plan.scenario.duration_ms
                ));
            }
            let next_due = self.due.keys().next().map_or(deadline, |(t, _)| *t);
            let wait = next_due.min(deadline).saturating_sub(now).min(100_000_000);
            match rx.recv_timeout(Duration::from_nanos(wait.max(1))) {
                Ok((i, Some(line))) => self.on_line(i, line),
                Ok((_, None)) => self.open -= 1,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
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
            match what {
                Due::Fire(n) => self.fire(self.plan.faults[n].clone()),
                Due::Resume(target) => self.resume(target),
                Due::Restart(i) => self.restart(i),
                Due::RestartPostgres => self.restart_postgres(),
                Due::EndWindow(id) => self.end_window(id),
            }
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
            ClientLine::Safepoint { at, .. } => {
                let armed = self
                    .plan
                    .faults
                    .iter()
                    .find(|f| f.target == Target::Client(i) && f.at == FaultAt::Safepoint(at))
                    .cloned();
                if let Some(fault) = armed {
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
        let target = fault.target;
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
                let Target::Redis(i) = target else { return };
                self.redis[i].crash();
                let detail = match restart_after_ms {
                    Some(ms) => {
                        self.schedule(now + ms * 1_000_000, Due::Restart(i));
                        format!("SIGKILL, restarted after {ms} ms ({})", self.lost())
                    }
                    None => format!("SIGKILL, down until a restart ({})", self.lost()),
                };
                self.nemesis_event(now, EventKind::Crash, Phase::Start, &name, detail);
            }
            LiveAction::Restart => match target {
                Target::Redis(i) => self.restart(i),
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
                let Target::Redis(i) = target else { return };
                if let Err(e) = self.redis[i].jump_clock(delta_ms) {
                    self.failure = Some(e);
                    return;
                }
                let detail = format!(
                    "wall clock {delta_ms:+} ms ({})",
                    self.redis[i].clock_library()
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

    /// What a crash of a Redis node loses, as the nodes' persistence decides.
    fn lost(&self) -> &'static str {
        match self.plan.needs.redis.as_ref().map(|r| r.persistence) {
            Some(RedisPersistence::Always) => "appendfsync always: every acknowledged key kept",
            _ => "no persistence: every key lost, as unsynced writes are in a power loss",
        }
    }

    fn restart(&mut self, i: usize) {
        if let Err(e) = self.redis[i].restart() {
            self.failure = Some(e);
            return;
        }
        let name = self.plan.name(Target::Redis(i));
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
        self.signal(target, Signal::SIGCONT);
        let name = self.plan.name(target);
        let detail = format!("{name} resumed (SIGCONT)");
        self.nemesis_event(now, EventKind::Pause, Phase::End, &name, detail);
    }

    /// Send `signal` to `target`; false (and the trial fails) if it cannot be reached.
    fn signal(&mut self, target: Target, signal: Signal) -> bool {
        match target {
            Target::Client(i) => {
                let _ = kill(self.processes.pid(i), signal);
            }
            Target::Redis(i) => match signal {
                Signal::SIGSTOP => self.redis[i].pause(),
                _ => self.redis[i].resume(),
            },
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_goes_on_the_search_path_in_both_connection_string_forms() {
        let schema = schema();
        assert_eq!(
            with_schema("host=h dbname=d"),
            format!("host=h dbname=d options='-c search_path={schema}'")
        );
        assert_eq!(
            with_schema("postgresql://u@h:5432/d"),
            format!("postgresql://u@h:5432/d?options=-c%20search_path%3D{schema}")
        );
        assert_eq!(
            with_schema("postgres://u@h/d?sslmode=disable"),
            format!("postgres://u@h/d?sslmode=disable&options=-c%20search_path%3D{schema}")
        );
        for form in [
            with_schema("host=h dbname=d"),
            with_schema("postgresql://u@h/d"),
        ] {
            let config: postgres::Config = form.parse().expect("parses");
            assert_eq!(
                config.get_options(),
                Some(format!("-c search_path={schema}").as_str())
            );
        }
    }
}
