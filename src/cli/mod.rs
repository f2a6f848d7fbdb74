//! The `fencesim` command line (DESIGN.md, "CLI contract"): the arguments of every command and
//! the process-wide setup (panic hook, Ctrl-C, tracing). Each command's work is in a file of its
//! own under `commands/`, as cargo's own commands are. It is in the library so that a user's
//! own binary runs the whole CLI with designs of their own ([`main`]); the `fencesim` binary
//! (`src/main.rs`) is that call with the built-in designs.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::cancel::Cancel;
use crate::exit;
use crate::registry::Registry;
use crate::run::default_jobs;
use crate::Engine;

use commands::bench::{BenchPart, BenchSeeds};
use commands::check::{FailedCasArg, HistoryFormat, LockModelArg};
use commands::explore::ExploreArgs;
use commands::export::ExportFormat;
use commands::run::RangeArgs;
use commands::Target;

/// Print a line to stdout, ignoring a closed pipe (`fencesim run ... | head -1`): the exit
/// code still carries the verdict.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), "{}", $crate::cli::terminal_safe(&format!($($arg)*)));
    }};
}

/// `eprintln!` for fencesim's messages on stderr, escaped as [`say!`]'s lines are: an error
/// quotes a path or a value of the user's, which may hold an escape sequence.
macro_rules! complain {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "{}", $crate::cli::terminal_safe(&format!($($arg)*)));
    }};
}

/// A line for stdout or stderr with every control and invisible formatting character but the
/// line breaks escaped ([`fencesim_history::escape_controls`]): what fencesim prints quotes
/// its inputs (a path, a name from a history), and none of it may reach the terminal as an
/// escape sequence or reorder what is shown. The checkers escape what they quote, line breaks
/// included; this is the last guard for everything else.
pub(crate) fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    let lines: Vec<_> = text
        .split('\n')
        .map(fencesim_history::escape_controls)
        .collect();
    if lines
        .iter()
        .all(|l| matches!(l, std::borrow::Cow::Borrowed(_)))
    {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(lines.join("\n"))
}

// After `say!`, so that the commands can use it.
mod commands;
mod progress;

#[derive(Parser)]
#[command(
    name = "fencesim",
    version,
    about = "Deterministic simulation and checking of lease-based locks with fencing tokens"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate a scenario, check the history, write report.json and history.jsonl.
    Run {
        #[command(flatten)]
        target: Target,
        /// Root seed. Without it: the first seed of the scenario's range, or with --expect
        /// every seed of the range.
        #[arg(long)]
        seed: Option<u64>,
        /// Exit 0 only if the scenario's [expect] is met (on every seed of its range unless
        /// --seed is given).
        #[arg(long)]
        expect: bool,
        /// With --expect over the range: write every seed's files, not only those of the
        /// seeds that miss the expectation.
        #[arg(long)]
        write_all: bool,
        /// With --expect over the range: no progress on stderr.
        #[arg(long)]
        quiet: bool,
    },
    /// Look for a counterexample (a run that misses the scenario's expectation): for a
    /// scenario with a [nemesis], a guided search of its fault schedules; otherwise, or with
    /// --sweep, --keep-going, --shard or --check-determinism, a sweep of the seeds in
    /// parallel. Writes files only for counterexamples, and a summary.
    Explore {
        /// A scenario file, or the name of a bundled scenario (see `fencesim list`).
        #[arg(required_unless_present = "merge")]
        scenario: Option<String>,
        /// The seeds, `A..B` (half-open).
        #[arg(long, required_unless_present = "merge")]
        seeds: Option<String>,
        /// Output root; counterexamples go to DIR/<scenario name>/<seed>/, the summary to
        /// DIR/<scenario name>/explore-summary.json (with `--merge`: the merged summary).
        #[arg(long, value_name = "DIR", default_value = "reports/runs")]
        out: PathBuf,
        /// Worker threads (default: one per core).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=256))]
        jobs: Option<u64>,
        /// Only seeds with (seed - A) % N == I, given as `I/N`, to split a sweep across machines;
        /// `env` (or `env/N`) takes I and N from the CI engine or Kubernetes Indexed Job that
        /// runs this job (docs/scale.md).
        #[arg(long)]
        shard: Option<String>,
        /// Run every seed instead of stopping at the first counterexample.
        #[arg(long)]
        keep_going: bool,
        /// No progress on stderr.
        #[arg(long)]
        quiet: bool,
        /// Shrink the first counterexample (as `fencesim shrink` does) into DIR/shrunk/.
        #[arg(long)]
        shrink: bool,
        /// Run each seed twice and fail (exit 4) unless the histories are byte-identical.
        #[arg(long)]
        check_determinism: bool,
        /// Force swarm mode on the scenario's random nemesis.
        #[arg(long)]
        swarm: bool,
        /// Guided exploration (the default for a scenario with a [nemesis]): keep the fault
        /// schedules that reached new behaviour and mutate them, from root seed A, for at most
        /// B - A simulations (docs/guided.md). Refused for a scenario without a [nemesis].
        #[arg(long, conflicts_with_all = ["shard", "keep_going", "check_determinism"])]
        guided: bool,
        /// Sweep the seeds A..B, each with its own draw of the nemesis, even for a scenario
        /// with a [nemesis] (whose default is a guided search): every seed of the range is run
        /// up to the first counterexample, as CI guards a range.
        #[arg(long, conflicts_with = "guided")]
        sweep: bool,
        /// Join the explore-summary files of a sweep's shards and print the whole sweep's
        /// summary instead of running anything.
        #[arg(long, num_args = 1.., value_name = "SUMMARY",
              conflicts_with_all = ["scenario", "seeds", "shard", "keep_going", "jobs", "swarm", "check_determinism", "shrink", "guided", "sweep"])]
        merge: Vec<PathBuf>,
    },
    /// Check a history: a history.jsonl (recorded by fencesim or converted from a real system),
    /// or a Jepsen history.edn with --format jepsen-edn.
    Check {
        /// The history file.
        history: PathBuf,
        /// Print the whole result as one JSON object (verdict, violations, unknown reasons,
        /// unsafe exposure) instead of lines of text.
        #[arg(long)]
        json: bool,
        /// The history's format: fencesim's JSON Lines, or Jepsen's EDN (operation maps, loose
        /// or in one whole-file vector, as history.edn).
        #[arg(long, value_enum, default_value_t = HistoryFormat::Jsonl)]
        format: HistoryFormat,
        /// Search steps the linearizability check may take per key; past them the verdict is
        /// unknown (exit 3). At least 1.
        #[arg(long, value_name = "N", default_value_t = fencesim_checker::CheckOptions::default().linearizability_steps,
              value_parser = clap::value_parser!(u64).range(1..))]
        linearizability_steps: u64,
        /// Search steps the linearizability check may take over all keys together; keys whose
        /// turn comes after they are spent are unknown. At least 1.
        #[arg(long, value_name = "N", default_value_t = fencesim_checker::CheckOptions::default().linearizability_total_steps,
              value_parser = clap::value_parser!(u64).range(1..))]
        linearizability_total_steps: u64,
        /// The value every key's register holds before any operation (Knossos's test suite
        /// uses 0). Without it a register starts never written.
        #[arg(long, value_name = "VALUE")]
        initial_value: Option<String>,
        /// How a compare-and-set that completed fail is read: Knossos's (it never happened)
        /// or Porcupine's (it happened, and found another value than it expected).
        #[arg(long, value_enum, default_value_t = FailedCasArg::Knossos)]
        failed_cas: FailedCasArg,
        /// Judge acquire and release operations, per lock, as a mutex or a fenced mutex (ok
        /// acquires return growing fences). Only for locks without expiry: a lease that
        /// expires is taken again without a release. Without it they are not judged so.
        #[arg(long, value_enum)]
        model: Option<LockModelArg>,
    },
    /// Write a history.jsonl in another format, for other tools (Jepsen's Knossos and Elle).
    Export {
        /// The history file (JSON Lines).
        history: PathBuf,
        /// The format to write.
        #[arg(long, value_enum, default_value_t = ExportFormat::JepsenEdn)]
        format: ExportFormat,
        /// Where to write (default: standard output).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Re-run the scenario and seed a report.json records (its resolved scenario is inside) and
    /// check that the history comes out byte-identical (exit 0) or not (exit 4).
    Replay {
        /// A report.json written by `run` or `explore`.
        report: PathBuf,
        /// Output root for the replayed run.
        #[arg(long, value_name = "DIR", default_value = "reports/replays")]
        out: PathBuf,
    },
    /// Reduce a failing run (its report.json) to a minimal scenario that still shows the same
    /// violation kind, and write it as a scenario file that `fencesim run` reproduces.
    Shrink {
        /// A report.json written by `run` or `explore`.
        report: PathBuf,
        /// Where the minimal scenario (NAME-seed-N-min.toml) and its run's files go (the same
        /// folder `explore --shrink` uses with the default --out, git-ignored).
        #[arg(long, value_name = "DIR", default_value = "reports/runs/shrunk")]
        out: PathBuf,
        /// The violation kind to keep (default: the report's first violation's).
        #[arg(long)]
        kind: Option<String>,
    },
    /// List the bundled scenarios with their expectations (or, with --designs, the lock designs
    /// and resources a scenario may name, with their knobs).
    List {
        /// The designs (`[lock_service] kind`) and resources (`[resource] mode`) instead.
        #[arg(long)]
        designs: bool,
    },
    /// Run a scenario against real servers (PostgreSQL, redis-server for Redlock) with clients
    /// as OS processes and real faults (SIGSTOP pauses, SIGKILL crashes, a TCP proxy for the
    /// network), record the same history and judge it with the same checks (docs/live.md).
    /// Exit 0 if every trial is valid (with --expect: meets the scenario's expectation), 1 if
    /// one is not, 3 if a verdict is unknown, 2 if the scenario has parts with no live form or
    /// a server is not installed, 4 if a server failed, 130 if interrupted.
    Live(commands::live::LiveArgs),
    /// A live trial's client process (started by `fencesim live`, not by hand).
    #[command(hide = true)]
    LiveClient,
    /// Measure fencesim itself: seeds per second, records per seed and simulated latencies of
    /// every bundled scenario (release builds give the meaningful figures).
    Bench {
        /// Seeds per scenario (default 20; 1 with --quick).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        seeds: Option<u64>,
        /// Worker threads (default: 1, so that seeds/s is per core).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=256))]
        jobs: u64,
        /// A run of seconds that proves the measurements work: one seed per scenario, one
        /// round of the ratio, small synthetic histories.
        #[arg(long)]
        quick: bool,
        /// Run only this part (default: every part, in this order).
        #[arg(long, value_enum)]
        only: Option<BenchPart>,
        /// Seeds per scenario for the `expectations` part, from each scenario's first seed
        /// (default 1000; 20 with --quick).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        expectation_seeds: Option<u64>,
        /// Seeds per design for the `safe-knobs` part, each its own drawn safe configuration
        /// (default 10,000; 10 with --quick).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
        safe_knob_seeds: Option<u64>,
        /// With the `checker` part: also judge Knossos's test histories in DIR (its `data`
        /// folder: cas-register/good, cas-register/bad) and compare with Knossos's verdicts.
        #[arg(long, value_name = "DIR")]
        peers: Option<PathBuf>,
        /// With the `search` part: only the mutation-table rows whose defect or case contains
        /// TEXT, ignoring case (`K04`, `fsync`); refused with another `--only` part.
        #[arg(long, value_name = "TEXT")]
        defect: Option<String>,
    },
}

/// Run the `fencesim` command line on this process's arguments with the designs of
/// `registry`, and return its exit code (README's table). The engine is named after the
/// binary (`argv[0]`'s file name), so that the `reproduce:` lines a user's own binary prints
/// name that binary, which knows its designs.
pub fn main(registry: Registry) -> ExitCode {
    let engine = match std::env::args_os().next().as_deref().and_then(program_name) {
        Some(name) => Engine::new(registry).named(name),
        None => Engine::new(registry),
    };
    init_tracing();
    quiet_simulation_panics();
    // The one token of this process's commands; the Ctrl-C handler holds a clone.
    let cancel = Cancel::new();
    stop_sweeps_on_ctrl_c(cancel.clone());
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Run {
            target,
            seed,
            expect,
            write_all,
            quiet,
        } => commands::run::run(
            &engine,
            &target,
            seed,
            expect,
            &RangeArgs { write_all, quiet },
            &cancel,
        ),
        Command::Explore {
            scenario,
            seeds,
            out,
            jobs,
            shard,
            keep_going,
            quiet,
            shrink,
            check_determinism,
            swarm,
            guided,
            sweep,
            merge,
        } => {
            if !merge.is_empty() {
                commands::explore::merge_summaries(&merge, &out)
            } else {
                let target = Target {
                    scenario: scenario.unwrap_or_default(),
                    out,
                    check_determinism,
                    swarm,
                };
                let sweep_args = ExploreArgs {
                    seeds: seeds.unwrap_or_default(),
                    jobs: jobs.map_or_else(default_jobs, |j| j as usize),
                    shard,
                    keep_going,
                    quiet,
                    shrink,
                };
                // Only a search can be guided; a sweep is asked for by name or by what only
                // a sweep does (every seed, shards, running each seed twice).
                let sweep_only = keep_going || sweep_args.shard.is_some() || check_determinism;
                if guided {
                    commands::guided::guided(&engine, &target, &sweep_args, &cancel)
                } else if sweep || sweep_only {
                    commands::explore::explore(&engine, &target, &sweep_args, &cancel)
                } else {
                    commands::guided::guided_or_sweep(&engine, &target, &sweep_args, &cancel)
                }
            }
        }
        Command::Check {
            history,
            json,
            format,
            linearizability_steps,
            linearizability_total_steps,
            initial_value,
            failed_cas,
            model,
        } => {
            // An EDN history's values are compared by their canonical text (Clojure's `=`):
            // the initial value is read as EDN and written the same way.
            let initial_value = match (format, initial_value) {
                (HistoryFormat::JepsenEdn, Some(v)) => match commands::check::edn_value(&v) {
                    Ok(canonical) => Some(canonical),
                    Err(why) => {
                        complain!("error: --initial-value {v:?}: {why}");
                        return ExitCode::from(fencesim::exit::BAD_INPUT);
                    }
                },
                (_, v) => v,
            };
            let options = fencesim_checker::CheckOptions {
                linearizability_steps,
                linearizability_total_steps,
                initial_value,
                failed_cas: failed_cas.into(),
                lock_model: model.map(Into::into),
            };
            commands::check::check(&history, format, json, &options)
        }
        Command::Export {
            history,
            format: ExportFormat::JepsenEdn,
            out,
        } => commands::export::export(&history, out.as_deref()),
        Command::List { designs: false } => commands::list::list(&engine),
        Command::List { designs: true } => commands::list::designs(&engine),
        Command::Shrink { report, out, kind } => {
            commands::shrink::shrink(&engine, &report, &out, kind.as_deref())
        }
        Command::Replay { report, out } => commands::replay::replay(&engine, &report, out),
        Command::Live(args) => commands::live::live(&engine, &args, &cancel),
        Command::LiveClient => commands::live::live_client(&engine),
        Command::Bench {
            seeds,
            jobs,
            quick,
            only,
            expectation_seeds,
            safe_knob_seeds,
            peers,
            defect,
        } => {
            // A count given on the command line holds with --quick too.
            let or_default = |given: Option<u64>, full: u64, quick_count: u64| {
                given.unwrap_or(if quick { quick_count } else { full })
            };
            let counts = BenchSeeds {
                scenarios: or_default(seeds, 20, 1),
                expectations: or_default(expectation_seeds, 1000, 20),
                safe_knobs: or_default(safe_knob_seeds, 10_000, 10),
            };
            if defect.is_some() && only.is_some_and(|o| o != BenchPart::Search) {
                complain!(
                    "error: --defect narrows the `search` part; give --only search (or no --only)"
                );
                return ExitCode::from(fencesim::exit::BAD_INPUT);
            }
            let filters = commands::bench::BenchFilters {
                peers: peers.as_deref(),
                defect: defect.as_deref(),
            };
            commands::bench::bench(
                &engine,
                &counts,
                jobs as usize,
                quick,
                only,
                &filters,
                &cancel,
            )
        }
    };
    ExitCode::from(code)
}

/// The command's name from `argv0`: its file name without an extension (`fencesim`,
/// `zookeeper-lock`), if it has one.
fn program_name(argv0: &std::ffi::OsStr) -> Option<String> {
    let stem = std::path::Path::new(argv0).file_stem()?;
    Some(stem.to_string_lossy().into_owned()).filter(|n| !n.is_empty())
}

/// A panic inside a simulation is caught and reported (verdict line, report.json, exit 4), so
/// the default hook's message and backtrace would only repeat it; other panics keep the hook.
fn quiet_simulation_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_simulation = std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("fencesim-seed-"));
        // RUST_BACKTRACE is often set for other work; it must not turn every failed seed of
        // a sweep into a page of backtrace. FENCESIM_DEBUG_PANICS asks for them on purpose.
        if !in_simulation || std::env::var_os("FENCESIM_DEBUG_PANICS").is_some() {
            default(info);
        }
    }));
}

/// The first Ctrl-C cancels `cancel`: a sweep finishes the seeds in progress and writes what it
/// found so far (a partial summary, exit 130); a second one quits at once.
fn stop_sweeps_on_ctrl_c(cancel: Cancel) {
    let result = ctrlc::set_handler(move || {
        // Only a sweep has seeds in progress to finish; anything else stops at once.
        if cancel.is_cancelled() || !cancel.is_running() {
            // Quitting at once runs no destructor: stop and remove what a live run started.
            fencesim_live::reaper::reap_all();
            std::process::exit(i32::from(exit::INTERRUPTED));
        }
        cancel.cancel();
        complain!(
            "\ninterrupted: finishing the work in progress (the seeds or simulations, or the live trial), then \
             writing what was found so far (Ctrl-C again to quit at once)"
        );
    });
    // Without the handler (another one was installed first, as in a test harness) Ctrl-C
    // still stops the process, only without a summary: nothing to report.
    drop(result);
}

/// Diagnostics only when RUST_LOG asks for them: the hot loop stays quiet by default.
fn init_tracing() {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
}
