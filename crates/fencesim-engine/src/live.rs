//! `fencesim live`: trials of a scenario against real servers (docs/live.md). The harness
//! itself is `fencesim-live`; this module runs its trials one after another, judges each
//! trial's history with the same checkers as a simulation, writes the files of the trials that
//! show a violation, and sets the live tally beside what the simulation predicts for the same
//! file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fencesim_checker::CheckResult;

use fencesim_live::pg_server::PgServer;
use fencesim_live::plan::LivePlan;
use fencesim_live::secret::Endpoint;
use fencesim_live::trial::{run_trial, TrialRecord, TrialSetup};
use fencesim_live::LiveError;
use fencesim_scenario::Scenario;

use crate::report::{self, LiveRun, Report};
use crate::run::RunOptions;
use crate::Engine;

/// What the caller asked for.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    /// How many trials.
    pub trials: u64,
    /// Output root: a trial's files go to `out/<scenario name>/live-T/`.
    pub out: PathBuf,
    /// Write every trial's files, not only those that show a violation.
    pub write_all: bool,
    /// A PostgreSQL server the user runs (a libpq connection string or URL, its password
    /// masked wherever it is shown: [`fencesim_live::secret`]); without it a throwaway server
    /// is started. Only the schema `fencesim_live` is touched.
    pub postgres: Option<Endpoint>,
    /// Redis servers of the user's, one per node of the design, instead of nodes fencesim
    /// starts; keys go under `fencesim-live-<pid>-<trial>:`.
    pub redis: Vec<Endpoint>,
    /// An etcd cluster of the user's, its members' client URLs, instead of members fencesim
    /// starts; lock names go under `fencesim-live-<pid>-<trial>/`.
    pub etcd: Vec<Endpoint>,
    /// How the user named the scenario, for the reproduce line.
    pub scenario_arg: String,
    /// Stop early when cancelled (Ctrl-C): the trial in progress continues what it paused,
    /// ends, and is written, marked `cut_short: interrupted`.
    pub cancel: crate::cancel::Cancel,
    /// The binary to run the client processes with (the running one).
    pub program: PathBuf,
    /// `--expect`: a trial that misses the scenario's expectation is written too.
    pub expect: bool,
}

/// One finished trial.
#[derive(Clone, Debug)]
pub struct LiveTrial {
    /// Its report (`report.live` is set).
    pub report: Report,
    /// Where its files are, if they were written.
    pub dir: Option<PathBuf>,
}

/// The servers of a live run, kept for all its trials and stopped at the end.
pub struct Servers {
    /// The throwaway server, if one was started (dropped: stopped and deleted). A trial's
    /// faults pause, crash and restart it.
    postgres: Option<std::sync::Mutex<PgServer>>,
    /// What the clients connect to PostgreSQL with (a password included: never shown).
    conninfo: String,
    /// The URLs of the user's Redis servers or etcd members to connect with (passwords
    /// included: never shown).
    own: Vec<String>,
    /// How the reports name them.
    pub names: Vec<String>,
}

impl Servers {
    /// Start what `plan` needs (a PostgreSQL server), or connect to the user's: `postgres`,
    /// and `redis` or `etcd` for the design's own nodes.
    ///
    /// # Errors
    /// A server binary is missing, or the server would not start or answer; a server of the
    /// user's does not suit the plan ([`LiveError::Unsupported`]).
    pub fn start(
        plan: &LivePlan,
        postgres: Option<&Endpoint>,
        redis: &[Endpoint],
        etcd: &[Endpoint],
    ) -> Result<Servers, LiveError> {
        check_setup(plan, postgres, redis)?;
        let etcd_cluster = check_etcd(plan, etcd)?;
        let (server, conninfo) = match postgres {
            Some(endpoint) => (None, endpoint.connect().to_owned()),
            None => {
                let server = PgServer::start()?;
                let conninfo = server.conninfo.clone();
                (Some(server), conninfo)
            }
        };
        let mut db =
            fencesim_live::postgres::Client::connect(&conninfo, fencesim_live::postgres::NoTls)
                .map_err(|e| {
                    let why = fencesim_live::describe(&e);
                    match postgres {
                        // The user's option is wrong (host, port, password): bad input, named.
                        Some(endpoint) => LiveError::Unsupported(format!(
                            "--postgres {:?}: cannot connect: {why}",
                            fencesim_live::secret::shown_capped(&endpoint.shown)
                        )),
                        None => LiveError::Server(format!("cannot connect to PostgreSQL: {why}")),
                    }
                })?;
        let version: String = db
            .query_one("SHOW server_version", &[])
            .map(|r| r.get(0))
            .unwrap_or_else(|_| "?".to_owned());
        let place = server.as_ref().map_or_else(
            || "a server of the user's".to_owned(),
            |s| format!("127.0.0.1:{}", s.port()),
        );
        let mut names = vec![format!("PostgreSQL {version} on {place}")];
        match (&plan.needs.redis, redis) {
            (Some(needs), []) => names.push(format!(
                "{} {} nodes on 127.0.0.1, started afresh for each trial",
                redis_version(),
                needs.nodes.len()
            )),
            (Some(_), urls) => {
                let shown: Vec<&str> = urls.iter().map(|u| u.shown.as_str()).collect();
                names.push(format!("Redis servers of the user's: {}", shown.join(", ")))
            }
            (None, _) => {}
        }
        match (&plan.needs.etcd, etcd) {
            (Some(needs), []) => names.push(format!(
                "{} {} member{} on 127.0.0.1, started afresh for each trial",
                etcd_version(),
                needs.nodes.len(),
                if needs.nodes.len() == 1 { "" } else { "s" }
            )),
            (Some(_), urls) => {
                let shown: Vec<&str> = urls.iter().map(|u| u.shown.as_str()).collect();
                names.push(format!(
                    "etcd cluster {} of the user's: {}",
                    etcd_cluster.unwrap_or_default(),
                    shown.join(", ")
                ))
            }
            (None, _) => {}
        }
        Ok(Servers {
            postgres: server.map(std::sync::Mutex::new),
            conninfo,
            own: redis
                .iter()
                .chain(etcd)
                .map(|e| e.connect().to_owned())
                .collect(),
            names,
        })
    }
}

/// What can be known to fail before anything starts: faults that need the servers fencesim
/// starts (refused before a server of the user's is asked anything), a server of the user's
/// that does not answer, clock faults on a `redis-server` that cannot run under libfaketime.
fn check_setup(
    plan: &LivePlan,
    postgres: Option<&Endpoint>,
    redis: &[Endpoint],
) -> Result<(), LiveError> {
    if !redis.is_empty() {
        let nodes = plan.redis_nodes();
        if nodes.is_empty() {
            return Err(LiveError::Unsupported(
                "--redis: this scenario's design runs on no Redis nodes".to_owned(),
            ));
        }
        if redis.len() != nodes.len() {
            return Err(LiveError::Unsupported(format!(
                "--redis: the design has {} nodes ({}); give one URL for each, in that order",
                nodes.len(),
                nodes.join(", ")
            )));
        }
        // What cannot work on servers of the user's is refused before any is asked.
        let touches_nodes = plan
            .faults
            .iter()
            .any(|f| matches!(f.target, fencesim_live::plan::Target::Server(_)));
        if touches_nodes || plan.uses_network() {
            return Err(LiveError::Unsupported(
                "faults on Redis nodes and network faults need the nodes fencesim starts; \
                 leave out --redis"
                    .to_owned(),
            ));
        }
        for (i, url) in redis.iter().enumerate() {
            let shown = &fencesim_live::secret::shown_capped(&url.shown);
            if redis[..i].contains(url) {
                return Err(LiveError::Unsupported(format!(
                    "--redis {shown:?} is given twice: each node is a server of its own"
                )));
            }
            let client = fencesim_live::redis::Client::open(url.connect()).map_err(|e| {
                LiveError::Unsupported(format!("--redis {shown:?}: not a Redis URL: {e}"))
            })?;
            client
                .get_connection_with_timeout(std::time::Duration::from_secs(2))
                .and_then(|mut c| fencesim_live::redis::cmd("PING").query::<String>(&mut c))
                .map_err(|e| {
                    LiveError::Unsupported(format!("--redis {shown:?}: no answer to PING: {e}"))
                })?;
        }
    }
    // `--postgres` parsed when its password was looked up (fencesim_live::secret::postgres).
    if postgres.is_some() {
        // Name the scenario's own faults that need fencesim's server, each kind once, in the
        // scenario's order: "a crash of PostgreSQL" is the fault the user wrote.
        let mut needing: Vec<String> = Vec::new();
        for fault in &plan.faults {
            let what = match fault.target {
                fencesim_live::plan::Target::Postgres => {
                    format!("the {} of PostgreSQL", fault.action.kind().as_str())
                }
                fencesim_live::plan::Target::Network => {
                    format!("the {}", fault.action.kind().as_str())
                }
                fencesim_live::plan::Target::Client(_)
                | fencesim_live::plan::Target::Server(_)
                | fencesim_live::plan::Target::Leader => continue,
            };
            if !needing.contains(&what) {
                needing.push(what);
            }
        }
        if !needing.is_empty() {
            return Err(LiveError::Unsupported(format!(
                "{} in the scenario need{} the server fencesim starts; leave out --postgres",
                needing.join(", "),
                if needing.len() == 1 { "s" } else { "" }
            )));
        }
    }
    if !plan.faked_clocks.is_empty() {
        fencesim_live::redis_server::probe_faketime()?;
    }
    Ok(())
}

/// An etcd cluster of the user's (`--etcd`), checked before anything starts: the design
/// runs on etcd, the scenario strikes neither a member nor the network, no URL is given
/// twice, and every member answers, lets the user read under the run's prefix, and belongs to
/// one cluster. Its cluster id (hex), if URLs were given.
fn check_etcd(plan: &LivePlan, etcd: &[Endpoint]) -> Result<Option<String>, LiveError> {
    if etcd.is_empty() {
        return Ok(None);
    }
    let unsupported = |why: String| Err(LiveError::Unsupported(why));
    if plan.needs.etcd.is_none() {
        return unsupported(format!(
            "--etcd: this scenario's design (kind = {:?}) does not run on etcd",
            plan.scenario.lock_service.kind
        ));
    }
    let needing = plan.faults.iter().position(|f| {
        use fencesim_live::plan::Target;
        matches!(
            f.target,
            Target::Server(_) | Target::Leader | Target::Network
        )
    });
    if let Some(n) = needing {
        return unsupported(format!(
            "[[faults]] #{}, kind = \"{}\": faults on etcd members and network faults need the \
             members fencesim starts; leave out --etcd",
            n + 1,
            plan.faults[n].action.kind().as_str()
        ));
    }
    let mut cluster: Option<String> = None;
    let mut members: Vec<String> = Vec::new();
    for (i, url) in etcd.iter().enumerate() {
        let shown = fencesim_live::secret::shown_capped(&url.shown);
        if etcd[..i].contains(url) {
            return unsupported(format!("--etcd {shown:?} is given twice"));
        }
        let prefix = fencesim_live::trial::own_prefix();
        let (id, member) = fencesim_live::etcd_gateway::cluster_of(url.connect(), &prefix)
            .map_err(|e| LiveError::Unsupported(format!("--etcd {shown:?}: {}", url.scrub(&e))))?;
        // Two URLs of one member (127.0.0.1 and localhost) are one member given twice.
        if let Some(first) = members.iter().position(|m| *m == member) {
            return unsupported(format!(
                "--etcd {shown:?} is the same member as {:?}: give each member once",
                fencesim_live::secret::shown_capped(&etcd[first].shown)
            ));
        }
        members.push(member);
        let id = id.parse::<u64>().map_or(id, |n| format!("{n:x}"));
        match &cluster {
            Some(first) if *first != id => {
                return unsupported(format!(
                    "--etcd {shown:?} is a member of cluster {id}, not of cluster {first} as \
                     {:?}: give the members of one cluster",
                    fencesim_live::secret::shown_capped(&etcd[0].shown)
                ))
            }
            _ => cluster = Some(id),
        }
    }
    Ok(cluster)
}

/// `etcd --version`'s `etcd Version: 3.4.23`, as `etcd 3.4.23`.
fn etcd_version() -> String {
    let out = std::process::Command::new("etcd")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let version = out
        .lines()
        .find_map(|l| l.strip_prefix("etcd Version: "))
        .unwrap_or("?");
    format!("etcd {}", version.trim())
}

/// `redis-server v=7.0.15`'s version, as `redis-server 7.0.15`.
fn redis_version() -> String {
    let out = std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let version = out
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .unwrap_or("?");
    format!("redis-server {version}")
}

/// Run trial `trial` of `plan` against `servers`, judge it and write its files if it shows a
/// violation (or `write_all`).
///
/// # Errors
/// The trial could not run (a server failed), or its files could not be written.
pub fn trial(
    engine: &Engine,
    plan: &LivePlan,
    servers: &Servers,
    opts: &LiveOptions,
    trial: u64,
) -> Result<LiveTrial, LiveError> {
    let setup = TrialSetup {
        program: &opts.program,
        forms: engine.registry().live(),
        conninfo: &servers.conninfo,
        tool_version: env!("CARGO_PKG_VERSION"),
        interrupted: &|| opts.cancel.is_cancelled(),
        postgres: servers.postgres.as_ref(),
        postgres_port: servers
            .postgres
            .as_ref()
            .and_then(|s| s.lock().ok().map(|s| s.port())),
        own_servers: (!servers.own.is_empty()).then_some(servers.own.as_slice()),
    };
    let record = run_trial(plan, &setup, trial)?;
    let result = fencesim_checker::check(&record.history);
    let report = live_report(engine, plan, servers, opts, trial, &record, result);
    // A trial cut short (Ctrl-C, past duration_ms) is kept too: nothing recorded is lost.
    // A trial cut short (Ctrl-C, past duration_ms) is kept too: nothing recorded is lost; and
    // under --expect, one that misses the expectation.
    let keep = opts.write_all
        || report.verdict != report::RunVerdict::Valid
        || record.cut_short.is_some()
        || (opts.expect && !report.expectation.met);
    let dir = if keep {
        let dir = trial_dir(&opts.out, &plan.scenario, trial);
        crate::readable::write_unseeded(engine, &dir, &report, &record.history).map_err(|e| {
            LiveError::Server(format!("{}: {e}", fencesim_history::display_path(&dir)))
        })?;
        Some(dir)
    } else {
        None
    };
    Ok(LiveTrial { report, dir })
}

/// `out/<scenario name>/live-T/`.
pub fn trial_dir(out: &Path, scenario: &Scenario, trial: u64) -> PathBuf {
    out.join(&scenario.name).join(format!("live-{trial}"))
}

fn live_report(
    engine: &Engine,
    plan: &LivePlan,
    servers: &Servers,
    opts: &LiveOptions,
    trial: u64,
    record: &TrialRecord,
    result: CheckResult,
) -> Report {
    let mut report = Report {
        reproduce: reproduce(engine, opts),
        live: Some(LiveRun {
            trial,
            servers: servers.names.clone(),
            real_ms: record.real_ms,
            cut_short: record.cut_short.clone(),
            disturbed: record.disturbed.clone(),
            notes: plan.notes.clone(),
        }),
        ..Report::judged(&plan.scenario, 0, &record.history, result, None)
    };
    // An interrupted trial did not run its course and cannot meet an expectation; one that
    // reached duration_ms is judged as it stands, as a simulated run is.
    report.expectation.met &= record.cut_short.as_deref() != Some("interrupted");
    report
}

/// The command that runs a trial of the same kind again: the scenario and the servers, with
/// their passwords left out (the rerun takes them from the environment: docs/live.md), each
/// word quoted for a shell.
fn reproduce(engine: &Engine, opts: &LiveOptions) -> String {
    use fencesim_history::shell_word;
    let mut line = format!(
        "{} live {} --trials 1",
        shell_word(engine.program()),
        crate::run::argument_word(&opts.scenario_arg)
    );
    if let Some(url) = &opts.postgres {
        line.push_str(&format!(" --postgres {}", shell_word(&url.rerun)));
    }
    for url in &opts.redis {
        line.push_str(&format!(" --redis {}", shell_word(&url.rerun)));
    }
    for url in &opts.etcd {
        line.push_str(&format!(" --etcd {}", shell_word(&url.rerun)));
    }
    line
}

/// How many runs showed each violation kind (a run counts once per kind).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KindTally {
    /// Runs counted.
    pub runs: u64,
    /// Runs that met the scenario's expectation.
    pub met: u64,
    /// Runs with no violation.
    pub valid: u64,
    /// Per kind, runs that showed it.
    pub kinds: BTreeMap<String, u64>,
}

impl KindTally {
    /// Count one run's report.
    pub fn add(&mut self, report: &Report) {
        self.runs += 1;
        self.met += u64::from(report.expectation.met);
        self.valid += u64::from(report.violations.is_empty());
        let mut kinds: Vec<&str> = report.violations.iter().map(|v| v.kind.as_str()).collect();
        kinds.sort_unstable();
        kinds.dedup();
        for kind in kinds {
            *self.kinds.entry(kind.to_owned()).or_default() += 1;
        }
    }
}

/// What the simulation predicts for the same file: its first `seeds` seeds, simulated and
/// tallied as the live trials are.
pub fn predicted(engine: &Engine, scenario: &Scenario, seeds: u64) -> KindTally {
    let mut tally = KindTally::default();
    let range = &scenario.seeds;
    let end = range.end.min(range.start.saturating_add(seeds));
    for seed in range.start..end {
        tally.add(&crate::run::judge(engine, scenario, seed, &RunOptions::in_memory()).report);
    }
    tally
}
