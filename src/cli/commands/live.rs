//! `fencesim live`: trials of a scenario against real servers; and `fencesim live-client`, the
//! client process a trial starts (not for users).

use std::path::PathBuf;

use fencesim::cancel::Cancel;
use fencesim::live::{predicted, KindTally, LiveOptions, Servers};
use fencesim::report::RunVerdict;
use fencesim::{exit, Engine, Scenario};
use fencesim_live::secret::{self, Endpoint, PasswordSources};
use fencesim_live::LiveError;

use super::load;

/// What `fencesim live` was given (its command-line arguments).
#[derive(clap::Args)]
pub(crate) struct Args {
    /// A scenario file, or the name of a bundled scenario.
    pub(crate) scenario: String,
    /// How many trials.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub(crate) trials: u64,
    /// Output root: the files of trials that show a violation go to
    /// DIR/<scenario name>/live-T/.
    #[arg(long, value_name = "DIR", default_value = "reports/live")]
    pub(crate) out: PathBuf,
    /// Write every trial's files, not only those that show a violation.
    #[arg(long)]
    pub(crate) write_all: bool,
    /// Exit 0 only if every trial meets the scenario's [expect].
    #[arg(long)]
    pub(crate) expect: bool,
    /// A PostgreSQL server of your own (libpq connection string or URL) instead of a
    /// throwaway one; the run's tables go in a schema of its own, `fencesim_live_<pid>`,
    /// created for each trial and dropped after it. A password missing from it is taken
    /// from PGPASSWORD or the password file (PGPASSFILE, ~/.pgpass); it is shown as ***.
    #[arg(long, value_name = "URL")]
    pub(crate) postgres: Option<String>,
    /// Redis servers of your own (`redis://HOST:PORT/`), one per node of the design, in
    /// order (repeat the option), instead of nodes fencesim starts; its keys go under
    /// `fencesim-live-<pid>-<trial>:`. A password missing from the URL is taken from
    /// REDISCLI_AUTH; it is shown as ***.
    #[arg(long, value_name = "URL")]
    pub(crate) redis: Vec<String>,
    /// An etcd cluster of your own: a member's client URL (`http://HOST:2379`; repeat the
    /// option for each member, as etcdctl's --endpoints), instead of members fencesim starts;
    /// its lock names go under `fencesim-live-<pid>-<trial>/`. `http://USER@HOST:2379`
    /// authenticates as USER, the password from the URL or ETCDCTL_PASSWORD; it is shown
    /// as ***.
    #[arg(long, value_name = "URL")]
    pub(crate) etcd: Vec<String>,
}

pub(crate) fn exec(engine: &Engine, args: &Args, cancel: &Cancel) -> u8 {
    let scenario = match load(engine, &args.scenario) {
        Ok(s) => s,
        Err(e) => {
            complain!("error: {e}");
            return exit::BAD_INPUT;
        }
    };
    let plan = match fencesim_live::plan::plan(&scenario, engine.registry().live()) {
        Ok(plan) => plan,
        Err(why) => {
            complain!("error: {}: {why}", args.scenario);
            return exit::BAD_INPUT;
        }
    };
    let program = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            complain!("error: cannot find the running binary to start client processes: {e}");
            return exit::SIM_FAILED;
        }
    };
    let (postgres, redis, etcd) = match endpoints(args) {
        Ok(found) => found,
        Err(e) => {
            complain!("error: {e}");
            return exit::BAD_INPUT;
        }
    };
    let opts = LiveOptions {
        trials: args.trials,
        out: args.out.clone(),
        write_all: args.write_all,
        postgres,
        redis,
        etcd,
        scenario_arg: args.scenario.clone(),
        cancel: cancel.clone(),
        program,
        expect: args.expect,
    };
    if let Err(e) = super::ensure_writable(&opts.out, &scenario.name) {
        return super::unwritable(&opts.out, &e);
    }
    // What an earlier run killed with SIGKILL left behind (its servers died with it).
    let leftovers = fencesim_live::reaper::remove_leftovers(&std::env::temp_dir());
    if !leftovers.is_empty() {
        let names: Vec<String> = leftovers
            .iter()
            .map(|p| fencesim_history::display_path(p))
            .collect();
        complain!(
            "note: removed {} folder{} left by live runs that were killed: {}",
            names.len(),
            if names.len() == 1 { "" } else { "s" },
            names.join(", ")
        );
    }
    // Ctrl-C ends the trial in progress, keeps its history and stops the servers.
    let _running = opts.cancel.running();
    let servers = match Servers::start(&plan, opts.postgres.as_ref(), &opts.redis, &opts.etcd) {
        Ok(s) => s,
        Err(e) => return live_error(&e, &opts),
    };
    say!(
        "live {}: {} trial{} against {}",
        scenario.name,
        opts.trials,
        if opts.trials == 1 { "" } else { "s" },
        servers.names.join(", ")
    );
    for note in &plan.notes {
        say!("note: {note}");
    }
    let mut tally = KindTally::default();
    let mut worst = exit::VALID;
    for t in 1..=opts.trials {
        if opts.cancel.is_cancelled() {
            // Interrupted before the trial began: nothing to run or write.
            say!("interrupted before trial {t}");
            worst = exit::INTERRUPTED;
            break;
        }
        let done = match fencesim::live::trial(engine, &plan, &servers, &opts, t) {
            Ok(done) => done,
            Err(e) => return live_error(&e, &opts),
        };
        // A trial cut short is printed and written, not counted: it did not run its course.
        if done
            .report
            .live
            .as_ref()
            .is_none_or(|l| l.cut_short.is_none())
        {
            tally.add(&done.report);
        }
        say!("{}", trial_line(&done));
        // A trial's code as a seed's: its verdict, or with --expect whether it met it.
        worst = super::worse(worst, super::seed_exit_code(&done.report, args.expect));
        if opts.cancel.is_cancelled() {
            say!("interrupted after trial {t}");
            worst = exit::INTERRUPTED;
            break;
        }
    }
    print_tally(engine, &scenario, &tally);
    worst
}

fn trial_line(done: &fencesim::live::LiveTrial) -> String {
    let r = &done.report;
    let live = r.live.as_ref().expect("a live trial's report");
    let what = match r.verdict {
        RunVerdict::Valid => "valid".to_owned(),
        _ if r.violations.is_empty() => format!("UNKNOWN ({})", r.unknown.join("; ")),
        _ => {
            let mut kinds: Vec<&str> = r.violations.iter().map(|v| v.kind.as_str()).collect();
            kinds.dedup();
            format!("INVALID ({})", kinds.join(", "))
        }
    };
    let mut line = format!(
        "trial {}: {what}; {:.1} s",
        live.trial,
        live.real_ms as f64 / 1000.0
    );
    if let Some(why) = &live.cut_short {
        line.push_str(&format!("; cut short: {why} (not counted in the tally)"));
    }
    if !live.disturbed.is_empty() {
        line.push_str(&format!(
            "; disturbed by real time: {}",
            live.disturbed.join("; ")
        ));
    }
    if let Some(dir) = &done.dir {
        line.push_str(&format!(
            "; {}",
            fencesim_history::display_path(&dir.join("report.json"))
        ));
    }
    line
}

/// The live tally beside the simulation's prediction for the same file (as many seeds as
/// trials, at least 10, from the scenario's first seed).
fn print_tally(engine: &Engine, scenario: &Scenario, live: &KindTally) {
    let sim = predicted(engine, scenario, live.runs.max(10));
    let mut kinds: Vec<&String> = live.kinds.keys().chain(sim.kinds.keys()).collect();
    kinds.sort();
    kinds.dedup();
    say!(
        "live: {} of {} trials valid, expectation met in {}; simulation: {} of {} seeds valid, \
         expectation met in {}",
        live.valid,
        live.runs,
        live.met,
        sim.valid,
        sim.runs,
        sim.met
    );
    for kind in kinds {
        say!(
            "  {kind}: live {} of {} trials, simulation {} of {} seeds",
            live.kinds.get(kind).copied().unwrap_or(0),
            live.runs,
            sim.kinds.get(kind).copied().unwrap_or(0),
            sim.runs
        );
    }
}

/// The servers of the user's, `--postgres`, `--redis` and `--etcd`: each with its password
/// (from the option or the environment) ready to connect with and masked for showing.
type OwnServers = (Option<Endpoint>, Vec<Endpoint>, Vec<Endpoint>);

/// [`OwnServers`] from the options; the password file's warnings on stderr.
fn endpoints(args: &Args) -> Result<OwnServers, String> {
    let sources = PasswordSources::from_env();
    let postgres = match &args.postgres {
        Some(given) => {
            let (endpoint, warnings) = secret::postgres(given, &sources)?;
            for warning in warnings {
                complain!("warning: {warning}");
            }
            Some(endpoint)
        }
        None => None,
    };
    let redis = args
        .redis
        .iter()
        .map(|given| secret::redis(given, &sources))
        .collect::<Result<_, _>>()?;
    let etcd = args
        .etcd
        .iter()
        .map(|given| secret::etcd(given, &sources))
        .collect::<Result<_, _>>()?;
    Ok((postgres, redis, etcd))
}

fn live_error(e: &LiveError, opts: &LiveOptions) -> u8 {
    // What a server or library said might quote a connection string: mask the passwords in
    // it too, whatever form they took.
    let mut message = e.to_string();
    for endpoint in opts.postgres.iter().chain(&opts.redis).chain(&opts.etcd) {
        message = endpoint.scrub(&message);
    }
    // Some servers end what they say with a line break (Redis's NOAUTH): the error is one line.
    complain!("error: {}", message.trim_end());
    // A server that fails while the user quits was stopped by the quitting.
    if opts.cancel.is_cancelled() {
        return exit::INTERRUPTED;
    }
    match e {
        LiveError::Missing { .. } | LiveError::Unsupported(_) => exit::BAD_INPUT,
        LiveError::Server(_) => exit::SIM_FAILED,
    }
}

/// `fencesim live-client`: the client process of a live trial.
pub(crate) fn live_client(engine: &Engine) -> u8 {
    fencesim_live::client::main(engine.registry().live())
}
