//! The `fencesim` command line (DESIGN.md, "CLI contract").

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc instead of the system allocator. A simulation allocates and frees small objects
/// (messages, records, tasks) all the time, on a fresh thread per seed; glibc's allocator gave
/// each seed about 350 page faults and cost fencesim a quarter of its time per message
/// (docs/performance.md). The library crates leave the choice to their users.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use fencesim::explore::{ExploreSummary, SeedOutcome};
use fencesim::run::{default_jobs, sweep, sweep_fold, write, Judged, RunOptions, SeedRun};

mod progress;
use fencesim::{bundled, exit, report::RunVerdict, Scenario};

/// Print a line to stdout, ignoring a closed pipe (`fencesim run ... | head -1`): the exit
/// code still carries the verdict.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

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

/// What `run` and `explore` share: the scenario and how to run it.
#[derive(clap::Args)]
struct Target {
    /// A scenario file, or the name of a bundled scenario (see `fencesim list`).
    scenario: String,
    /// Output root; files go to DIR/<scenario name>/<seed>/.
    #[arg(long, value_name = "DIR", default_value = "reports/runs")]
    out: PathBuf,
    /// Run each seed twice and fail (exit 4) unless the histories are byte-identical.
    #[arg(long)]
    check_determinism: bool,
    /// Force swarm mode on the scenario's random nemesis.
    #[arg(long)]
    swarm: bool,
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
    /// Run many seeds in parallel until the first counterexample (a seed that misses the
    /// scenario's expectation); write files only for counterexamples and a summary.
    Explore {
        /// A scenario file, or the name of a bundled scenario (see `fencesim list`).
        #[arg(required_unless_present = "merge")]
        scenario: Option<String>,
        /// The seeds, `A..B` (half-open).
        #[arg(long, required_unless_present = "merge")]
        seeds: Option<String>,
        /// Output root; counterexamples go to DIR/<scenario name>/<seed>/, the summary to
        /// DIR/<scenario name>/explore-summary.json.
        #[arg(long, value_name = "DIR", default_value = "reports/runs")]
        out: PathBuf,
        /// Worker threads (default: one per core).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=256))]
        jobs: Option<u64>,
        /// Only seeds with (seed - A) % N == I, given as `I/N`, to split a sweep across machines.
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
        /// Join the explore-summary files of a sweep's shards and print the whole sweep's
        /// summary instead of running anything.
        #[arg(long, num_args = 1.., value_name = "SUMMARY",
              conflicts_with_all = ["scenario", "seeds", "shard", "keep_going", "jobs", "swarm", "check_determinism", "shrink"])]
        merge: Vec<PathBuf>,
    },
    /// Check a history.jsonl file (recorded by fencesim or converted from a real system).
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
    /// List the bundled scenarios with their expectations.
    List,
    /// Measure fencesim itself: seeds per second, records per seed and simulated latencies of
    /// every bundled scenario (release builds give the meaningful figures).
    Bench {
        /// Seeds per scenario.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        seeds: u64,
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
        /// Seeds per scenario for the `expectations` part (from each scenario's first seed;
        /// --quick makes it 20).
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        expectation_seeds: u64,
    },
}

fn main() -> ExitCode {
    init_tracing();
    quiet_simulation_panics();
    stop_sweeps_on_ctrl_c();
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Run {
            target,
            seed,
            expect,
            write_all,
            quiet,
        } => run(&target, seed, expect, &RangeArgs { write_all, quiet }),
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
            merge,
        } => {
            if !merge.is_empty() {
                merge_summaries(&merge)
            } else {
                let target = Target {
                    scenario: scenario.unwrap_or_default(),
                    out,
                    check_determinism,
                    swarm,
                };
                let sweep = ExploreArgs {
                    seeds: seeds.unwrap_or_default(),
                    jobs: jobs.map_or_else(default_jobs, |j| j as usize),
                    shard,
                    keep_going,
                    quiet,
                    shrink,
                };
                explore(&target, &sweep)
            }
        }
        Command::Check {
            history,
            json,
            format,
            linearizability_steps,
            linearizability_total_steps,
        } => {
            let options = fencesim_checker::CheckOptions {
                linearizability_steps,
                linearizability_total_steps,
            };
            check(&history, format, json, &options)
        }
        Command::Export {
            history,
            format: ExportFormat::JepsenEdn,
            out,
        } => export(&history, out.as_deref()),
        Command::List => list(),
        Command::Shrink { report, out, kind } => shrink(&report, &out, kind.as_deref()),
        Command::Replay { report, out } => replay(&report, out),
        Command::Bench {
            seeds,
            jobs,
            quick,
            only,
            expectation_seeds,
        } => {
            let counts = BenchSeeds {
                scenarios: if quick { 1 } else { seeds },
                expectations: if quick { 20 } else { expectation_seeds },
            };
            bench(&counts, jobs as usize, quick, only)
        }
    };
    ExitCode::from(code)
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

/// The first Ctrl-C lets a sweep finish the seeds in progress and write what it found so far
/// (a partial summary, exit 130); a second one quits at once.
fn stop_sweeps_on_ctrl_c() {
    let result = ctrlc::set_handler(|| {
        if fencesim::run::interrupted() {
            std::process::exit(i32::from(exit::INTERRUPTED));
        }
        fencesim::run::interrupt();
        eprintln!(
            "\ninterrupted: finishing the seeds in progress, then writing what was found so far \
             (Ctrl-C again to quit at once)"
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

/// Load a scenario from a path, or else from the bundled set by name.
fn load(arg: &str) -> Result<Scenario, String> {
    fencesim::load_named(arg).map_err(|e| e.to_string())
}

/// Load the target's scenario (a file, else a bundled name), apply `--swarm`, and build the
/// run options; on bad input, the exit code.
fn prepare(t: &Target) -> Result<(Scenario, RunOptions), u8> {
    let mut scenario = load(&t.scenario).map_err(|e| {
        eprintln!("error: {e}");
        exit::BAD_INPUT
    })?;
    if t.swarm {
        let Some(nemesis) = scenario.nemesis.as_mut() else {
            eprintln!(
                "error: {}: --swarm needs a scenario with a [nemesis] section",
                t.scenario
            );
            return Err(exit::BAD_INPUT);
        };
        nemesis.swarm = true;
    }
    let opts = RunOptions {
        out: t.out.clone(),
        scenario_arg: t.scenario.clone(),
        check_determinism: t.check_determinism,
        swarm: t.swarm,
    };
    Ok((scenario, opts))
}

fn run(target: &Target, seed: Option<u64>, expect: bool, range: &RangeArgs) -> u8 {
    let (scenario, opts) = match prepare(target) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let seeds: Vec<u64> = match (seed, expect) {
        (Some(s), _) => vec![s],
        (None, false) => vec![scenario.seeds.start],
        (None, true) => (scenario.seeds.start..scenario.seeds.end).collect(),
    };
    if let [seed] = seeds[..] {
        return run_one(&scenario, seed, expect, &opts);
    }
    run_range(&scenario, &seeds, range, &opts)
}

/// How `run --expect` sweeps a scenario's whole range.
struct RangeArgs {
    /// Write every seed's files, not only those of the seeds that miss the expectation.
    write_all: bool,
    /// No progress on stderr.
    quiet: bool,
}

/// One seed: always written and printed.
fn run_one(scenario: &Scenario, seed: u64, expect: bool, opts: &RunOptions) -> u8 {
    let done = match fencesim::run::run_seed(scenario, seed, opts) {
        Ok(done) => done,
        Err(e) => return unwritable(&opts.out, &e),
    };
    print_seed(&done, expect);
    if opts.check_determinism {
        // A failed rerun is the seed's verdict (simulation failed); a passed one says so here.
        let same = u8::from(done.report.failure.is_none());
        say!("determinism: {same} of 1 seed ran twice with the same history");
    }
    seed_exit_code(&done.report, expect)
}

/// What a `run --expect` sweep keeps: counts, and the seeds that missed, written.
#[derive(Default)]
struct RangeTally {
    run: u64,
    met: u64,
    /// Seeds whose simulation did not fail (their determinism rerun, if asked, matched).
    same: u64,
    written: u64,
    missed: Vec<SeedRun>,
}

/// Every seed of the scenario's range under `--expect`, in parallel, with progress as
/// `explore` shows it. Files are written for the seeds that miss the expectation (all seeds
/// with `--write-all`): a range of a thousand seeds would otherwise write a thousand folders.
fn run_range(scenario: &Scenario, seeds: &[u64], range: &RangeArgs, opts: &RunOptions) -> u8 {
    if let Err(e) = ensure_writable(&opts.out, &scenario.name) {
        return unwritable(&opts.out, &e);
    }
    let progress = progress::Progress::new(seeds.len() as u64, range.quiet);
    let handle = |done: Judged| -> std::io::Result<(bool, bool, Option<SeedRun>)> {
        let met = done.report.expectation.met;
        let same = done.report.failure.is_none();
        progress.seed_done(!met);
        let kept = if met && !range.write_all {
            None
        } else {
            Some(write(&opts.out, done.serialize()?)?)
        };
        Ok((met, same, kept))
    };
    let fold = |mut t: RangeTally, (met, same, kept): (bool, bool, Option<SeedRun>)| {
        t.run += 1;
        t.met += u64::from(met);
        t.same += u64::from(same);
        if let Some(done) = kept {
            t.written += 1;
            if !met {
                t.missed.push(done);
            }
        }
        t
    };
    let result = sweep_fold(
        scenario,
        seeds,
        default_jobs(),
        opts,
        handle,
        |_| false,
        RangeTally::default(),
        fold,
    );
    progress.finish();
    let tally = match result {
        Ok(t) => t,
        Err(e) => return unwritable(&opts.out, &e),
    };
    let mut worst = exit::VALID;
    for done in &tally.missed {
        print_seed(done, true);
        worst = worse(worst, seed_exit_code(&done.report, true));
    }
    if opts.check_determinism {
        say!(
            "determinism: {} of {} seeds ran twice with the same history",
            tally.same,
            tally.run
        );
    }
    let (first, last) = (seeds[0], seeds[seeds.len() - 1]);
    say!(
        "{}: expectation met on {}/{} seeds ({first}..{}); files written for {} seed{} under {}{}",
        scenario.name,
        tally.met,
        tally.run,
        last + 1,
        tally.written,
        if tally.written == 1 { "" } else { "s" },
        opts.out.join(&scenario.name).display(),
        if range.write_all {
            ""
        } else {
            " (those that missed; --write-all writes every seed's)"
        }
    );
    if fencesim::run::interrupted() {
        say!(
            "interrupted after {} of {} seeds: the counts above are partial",
            tally.run,
            seeds.len()
        );
        return exit::INTERRUPTED;
    }
    worst
}

struct ExploreArgs {
    seeds: String,
    jobs: usize,
    shard: Option<String>,
    keep_going: bool,
    quiet: bool,
    shrink: bool,
}

/// `explore`: many seeds in parallel until the first counterexample (or all of them with
/// `--keep-going`); files only for counterexamples, and a summary.
fn explore(target: &Target, args: &ExploreArgs) -> u8 {
    let (scenario, opts) = match prepare(target) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let seeds = match select_seeds(&args.seeds, args.shard.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::BAD_INPUT;
        }
    };
    if let Err(e) = ensure_writable(&opts.out, &scenario.name) {
        return unwritable(&opts.out, &e);
    }
    let progress = progress::Progress::new(seeds.len() as u64, args.quiet);
    let clock = fencesim::bench::Stopwatch::start();
    // With --keep-going every counterexample is written as it is found, so histories do not
    // pile up in memory; otherwise the few found are written after the sweep, once it is known
    // which of them come before the first (workers may finish later seeds first).
    let handle = |done: Judged| -> std::io::Result<(SeedOutcome, Option<Written>)> {
        let outcome = SeedOutcome::of(&done.report);
        progress.seed_done(!outcome.met);
        let kept = match (outcome.met, args.keep_going) {
            (true, _) => None,
            (false, true) => Some(Written::Done(Box::new(write(
                &opts.out,
                done.serialize()?,
            )?))),
            (false, false) => Some(Written::Pending(Box::new(done))),
        };
        Ok((outcome, kept))
    };
    let stop = |(outcome, _): &(SeedOutcome, Option<Written>)| !args.keep_going && !outcome.met;
    // Each seed is counted as its turn comes and forgotten, so a long sweep's memory stays
    // flat; only the counterexamples are kept, to print and write below.
    let start = (
        ExploreSummary::start(&scenario, &args.seeds, args.shard.as_deref()),
        Vec::new(),
    );
    let fold = |(mut summary, mut kept): (ExploreSummary, Vec<Written>), (outcome, written)| {
        summary.add(&outcome);
        kept.extend(written);
        (summary, kept)
    };
    let results = sweep_fold(
        &scenario, &seeds, args.jobs, &opts, handle, stop, start, fold,
    );
    progress.finish();
    let seconds = clock.seconds();
    let (summary, kept) = match results {
        Ok(r) => r,
        Err(e) => return unwritable(&opts.out, &e),
    };
    let interrupted = fencesim::run::interrupted();
    let stopped_early = summary.seeds_run < seeds.len() as u64 && !interrupted;
    let mut summary = summary.finish(stopped_early, seconds);
    summary.interrupted = interrupted;
    let mut worst = exit::VALID;
    let mut first_report = None;
    for written in kept {
        let done = match written {
            Written::Done(run) => *run,
            Written::Pending(done) => match done.serialize().and_then(|e| write(&opts.out, e)) {
                Ok(run) => run,
                Err(e) => return unwritable(&opts.out, &e),
            },
        };
        print_seed(&done, true);
        worst = worse(worst, seed_exit_code(&done.report, true));
        first_report.get_or_insert(done.report_path);
    }
    for line in summary.lines() {
        say!("{line}");
    }
    let path = opts
        .out
        .join(&scenario.name)
        .join(ExploreSummary::file_name(args.shard.as_deref()));
    if let Err(e) = summary.write(&path) {
        return unwritable(&opts.out, &e);
    }
    say!("summary: {}", path.display());
    if interrupted {
        say!(
            "interrupted after {} of {} seeds: the summary is partial (explore --merge refuses it)",
            summary.seeds_run,
            seeds.len()
        );
        return exit::INTERRUPTED;
    }
    if let (true, Some(report)) = (args.shrink, first_report) {
        // A counterexample that only misses the expectation (no violation) has nothing to
        // shrink; `shrink` says so, and the sweep's exit code stands.
        shrink(&report, &opts.out.join("shrunk"), None);
    }
    worst
}

/// A counterexample's files: written during the sweep, or still to write.
enum Written {
    Done(Box<SeedRun>),
    Pending(Box<Judged>),
}

/// Make `out/<name>/` and write a probe file in it, so that an output folder that cannot be
/// written is refused before a sweep, not after it.
fn ensure_writable(out: &Path, name: &str) -> std::io::Result<()> {
    let dir = out.join(name);
    std::fs::create_dir_all(&dir)?;
    let probe = dir.join(".fencesim-write-probe");
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}

fn unwritable(out: &Path, e: &std::io::Error) -> u8 {
    eprintln!(
        "error: cannot write the run's output under {}: {e}",
        out.display()
    );
    exit::BAD_INPUT
}

/// `explore --merge`: join shard summaries and print the whole sweep's. Exits as `explore`
/// would have on the whole sweep: 4 if a simulation failed, else 1 if a seed missed the
/// expectation, else 0.
fn merge_summaries(paths: &[PathBuf]) -> u8 {
    let mut parts = Vec::new();
    for path in paths {
        match ExploreSummary::read(path) {
            Ok(s) => parts.push((path.display().to_string(), s)),
            Err(e) => {
                eprintln!("error: {e}");
                return exit::BAD_INPUT;
            }
        }
    }
    let merged = match ExploreSummary::merge(&parts) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::BAD_INPUT;
        }
    };
    let missing = merged.missing_shards();
    if !missing.is_empty() {
        // A lost shard must not pass for a whole sweep in CI, nor look like one: no summary.
        eprintln!(
            "error: the merge lacks shards {} of the sweep",
            missing.join(", ")
        );
        return exit::BAD_INPUT;
    }
    for line in merged.lines() {
        say!("{line}");
    }
    if merged.failed > 0 {
        exit::SIM_FAILED
    } else if merged.counterexample_count > 0 {
        exit::VIOLATION
    } else {
        exit::VALID
    }
}

/// The most seeds one `explore` takes (split larger sweeps across shards).
use fencesim::run::MAX_SWEEP_SEEDS;

/// Parse `A..B` and an optional `I/N` shard (every N-th seed from the I-th).
fn select_seeds(range: &str, shard: Option<&str>) -> Result<Vec<u64>, String> {
    let bad = || format!("--seeds: expected A..B with A < B, found {range:?}");
    let (a, b) = range.split_once("..").ok_or_else(bad)?;
    // B may be one past the last seed, 2^64, so that seed 18446744073709551615 can be swept too.
    let (a, b): (u64, u128) = (
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    );
    if b > 1 << 64 {
        return Err(format!(
            "--seeds: {range:?} ends past the last seed: B is at most 18446744073709551616 (one past {})",
            u64::MAX
        ));
    }
    if u128::from(a) >= b {
        return Err(bad());
    }
    let (index, count) = match shard {
        None => (0, 1),
        Some(s) => {
            let bad = || format!("--shard: expected I/N with I < N, found {s:?}");
            let (i, n) = s.split_once('/').ok_or_else(bad)?;
            let (i, n): (u64, u64) = (i.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
            if n == 0 || i >= n {
                return Err(bad());
            }
            (i, n)
        }
    };
    // Every `count`-th seed from `a + index`, without walking the whole range.
    let first = u128::from(a) + u128::from(index);
    let n = if first >= b {
        0
    } else {
        (b - first - 1) / u128::from(count) + 1
    };
    if n > u128::from(MAX_SWEEP_SEEDS) {
        return Err(format!("--seeds: {n} seeds selected; at most {MAX_SWEEP_SEEDS} per sweep (split it with --shard)"));
    }
    // Every seed selected is below b <= 2^64, so each fits a u64.
    Ok((0..n)
        .map(|i| (first + i * u128::from(count)) as u64)
        .collect())
}

fn print_seed(done: &SeedRun, expect: bool) {
    // The expectation line only where it is judged: --expect and explore.
    say!("{}", done.explain(expect));
    say!("report: {}", done.report_path.display());
    if seed_exit_code(&done.report, expect) != exit::VALID {
        say!("reproduce: {}", done.report.reproduce);
    }
}

fn seed_exit_code(r: &fencesim::report::Report, expect: bool) -> u8 {
    match r.verdict {
        RunVerdict::SimFailed => exit::SIM_FAILED,
        _ if expect => {
            if r.expectation.met {
                exit::VALID
            } else {
                exit::VIOLATION
            }
        }
        RunVerdict::Valid => exit::VALID,
        RunVerdict::Invalid => exit::VIOLATION,
        RunVerdict::Unknown => exit::UNKNOWN,
    }
}

/// The more serious of two exit codes: a failed simulation over unknown over a violation.
fn worse(a: u8, b: u8) -> u8 {
    let rank = |c: u8| match c {
        exit::SIM_FAILED => 3,
        exit::UNKNOWN => 2,
        exit::VIOLATION => 1,
        _ => 0,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

/// History file formats `check` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum HistoryFormat {
    /// fencesim's JSON Lines (docs/history-format.md).
    Jsonl,
    /// Jepsen's EDN operations, one map per line.
    JepsenEdn,
}

/// Formats `export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ExportFormat {
    /// Jepsen's EDN operations, one map per line.
    JepsenEdn,
}

/// Read a history in `format`, or print why not (file and line) and return `None`.
fn load_history(path: &Path, format: HistoryFormat) -> Option<fencesim::History> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {}: cannot open history: {e}", path.display());
            return None;
        }
    };
    let read = match format {
        HistoryFormat::Jsonl => fencesim_history::read_jsonl(text.as_bytes()),
        HistoryFormat::JepsenEdn => {
            let name = path
                .file_stem()
                .map_or("jepsen".into(), |s| s.to_string_lossy());
            fencesim_history::read_jepsen_edn(&text, &name)
        }
    };
    read.map_err(|e| eprintln!("error: {}: {e}", path.display()))
        .ok()
}

fn export(path: &Path, out: Option<&Path>) -> u8 {
    let Some(history) = load_history(path, HistoryFormat::Jsonl) else {
        return exit::BAD_INPUT;
    };
    let written = match out {
        Some(file) => std::fs::File::create(file)
            .and_then(|f| fencesim_history::write_jepsen_edn(&history, std::io::BufWriter::new(f))),
        None => fencesim_history::write_jepsen_edn(&history, std::io::stdout().lock()),
    };
    match written {
        Ok(export) => {
            warn_of_lost_checks(&history, &export);
            exit::VALID
        }
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => exit::VALID,
        Err(e) => {
            eprintln!("error: cannot write the export: {e}");
            exit::BAD_INPUT
        }
    }
}

/// Jepsen's form keeps operations only: say on stderr which checks the history could support
/// and the export cannot, so that a `check` of the file calling it valid is not taken for the
/// run's verdict.
fn warn_of_lost_checks(history: &fencesim::History, export: &fencesim_history::EdnExport) {
    if export.dropped_events == 0 {
        return;
    }
    let ops_only = fencesim::History {
        header: history.header.clone(),
        entries: history
            .entries
            .iter()
            .filter(|e| match e {
                fencesim_history::Entry::Op(_) => true,
                fencesim_history::Entry::Event(e) => e.event.is_nemesis(),
            })
            .cloned()
            .collect(),
    };
    let before = fencesim_checker::not_checked(history);
    let lost: Vec<String> = fencesim_checker::not_checked(&ops_only)
        .into_iter()
        .filter(|kind| !before.contains(kind))
        .collect();
    eprintln!(
        "note: the EDN keeps {} operations and leaves out {} service and resource events \
         (grants, expiries, accepts, rejects, beliefs)",
        export.written, export.dropped_events
    );
    if !lost.is_empty() {
        eprintln!(
            "note: checks the history supports and the EDN cannot (check the history.jsonl for \
             the run's verdict):"
        );
        for kind in lost {
            eprintln!("  {kind}");
        }
    }
}

fn check(
    path: &Path,
    format: HistoryFormat,
    json: bool,
    options: &fencesim_checker::CheckOptions,
) -> u8 {
    let Some(history) = load_history(path, format) else {
        return exit::BAD_INPUT;
    };
    let result = fencesim_checker::check_with(&history, options);
    let verdict = fencesim::report::verdict(&result, None);
    if json {
        let out = serde_json::json!({
            "history": path.display().to_string(),
            "verdict": verdict,
            "violations": result.violations,
            "unknown": result.unknown,
            "not_checked": result.not_checked,
            "unsafe_exposure": result.unsafe_exposure,
        });
        say!("{out}");
    } else {
        print_check(path, verdict, &result);
    }
    match verdict {
        RunVerdict::Valid => exit::VALID,
        RunVerdict::Unknown => exit::UNKNOWN,
        _ => exit::VIOLATION,
    }
}

fn print_check(path: &Path, verdict: RunVerdict, result: &fencesim_checker::CheckResult) {
    let n = result.violations.len();
    let skipped = match result.not_checked.len() {
        0 => String::new(),
        k => format!("; {k} check{} had nothing to judge", if k == 1 { "" } else { "s" }),
    };
    say!(
        "{}: {:?} ({n} violation{}{skipped})",
        path.display(),
        verdict,
        if n == 1 { "" } else { "s" }
    );
    for v in &result.violations {
        say!(
            "  {}: {} [witnesses {:?}]",
            v.kind,
            v.explanation,
            v.witnesses
        );
        if !v.chain.is_empty() {
            say!("    chain: {}", v.chain.join(" -> "));
        }
    }
    for reason in &result.unknown {
        say!("  unknown: {reason}");
    }
    for lacked in &result.not_checked {
        say!("  not checked: {lacked}");
    }
}

fn list() -> u8 {
    for (file, text) in bundled::SCENARIOS {
        match fencesim::parse_scenario(text, file) {
            Ok(s) => {
                let mut expect = format!("{:?}", s.expect.verdict).to_lowercase();
                if !s.expect.violations.is_empty() {
                    let kinds: Vec<_> = s.expect.violations.iter().map(|k| k.as_str()).collect();
                    expect = format!("{expect} ({})", kinds.join(", "));
                }
                let flat = s.description.replace('\n', " ");
                let summary = flat.split(". ").next().unwrap_or("");
                say!(
                    "{:<32} seeds {}..{:<5} expect {expect}\n    scenarios/{file}: {summary}.",
                    s.name,
                    s.seeds.start,
                    s.seeds.end
                );
            }
            Err(e) => {
                eprintln!("error: bundled scenario is invalid: {e}");
                return exit::SIM_FAILED;
            }
        }
    }
    exit::VALID
}

/// The parts of `fencesim bench`, in the order a full run takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum BenchPart {
    /// Seeds/s, records and simulated latencies of every bundled scenario.
    Scenarios,
    /// Cost per message of the reference scenario against raw madsim (`ratio X`).
    Ratio,
    /// Explore throughput with 1 and 2 jobs.
    Explore,
    /// Peak resident memory along a long sweep.
    Memory,
    /// The checker alone on synthetic histories.
    Checker,
    /// Every bundled scenario's expectation over many seeds (not only its own short range):
    /// exits 1 naming the scenarios and seeds that miss.
    Expectations,
}

/// `bench`: every part, or only `only`; nothing is written. Stops at the first part that fails.
/// Seeds per scenario of the bench parts that sweep every bundled scenario.
struct BenchSeeds {
    scenarios: u64,
    expectations: u64,
}

fn bench(seeds: &BenchSeeds, jobs: usize, quick: bool, only: Option<BenchPart>) -> u8 {
    use clap::ValueEnum;
    for part in BenchPart::value_variants() {
        if only.is_some_and(|o| o != *part) {
            continue;
        }
        let code = match part {
            BenchPart::Scenarios => bench_scenarios(seeds.scenarios, jobs),
            BenchPart::Ratio => {
                let (rounds, seeds) = if quick { (1, 1) } else { (7, 10) };
                bench_ratio(rounds, seeds)
            }
            BenchPart::Explore => bench_explore(quick),
            BenchPart::Memory => bench_memory(quick),
            BenchPart::Checker => bench_checker(quick),
            BenchPart::Expectations => bench_expectations(seeds.expectations),
        };
        if code != exit::VALID {
            return code;
        }
    }
    exit::VALID
}

/// Every bundled scenario over `seeds` seeds on `jobs` threads.
fn bench_scenarios(seeds: u64, jobs: usize) -> u8 {
    use fencesim_checker::latency::{acquire_latencies, election_latencies, Summary};
    let opts = RunOptions::in_memory();
    say!(
        "{:<40} {:>8} {:>10} {:>12} {:>16} {:>16}",
        "scenario",
        "seeds/s",
        "records",
        "sim s/real s",
        "acquire ms p50/p99",
        "election ms p50/p99"
    );
    for (file, text) in bundled::SCENARIOS {
        let scenario = match fencesim::parse_scenario(text, file) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: bundled scenario is invalid: {e}");
                return exit::SIM_FAILED;
            }
        };
        let list: Vec<u64> =
            (scenario.seeds.start..scenario.seeds.start.saturating_add(seeds)).collect();
        let clock = fencesim::bench::Stopwatch::start();
        let measured = sweep(&scenario, &list, jobs, &opts, |done| {
            let history = done.records;
            Ok((
                done.report.history.entries,
                done.report.simulated_ms,
                acquire_latencies(&history),
                election_latencies(&history),
            ))
        });
        let seconds = clock.seconds();
        let Ok(measured) = measured else {
            eprintln!("error: {file}: a seed could not be measured");
            return exit::SIM_FAILED;
        };
        let records: u64 = measured.iter().map(|m| m.0).sum();
        let simulated_s: f64 = measured.iter().map(|m| m.1 as f64 / 1000.0).sum();
        let acquire = Summary::of(measured.iter().flat_map(|m| m.2.clone()).collect());
        let election = Summary::of(measured.iter().flat_map(|m| m.3.clone()).collect());
        let pair = |s: Summary| {
            if s.count == 0 {
                "-".to_owned()
            } else {
                format!("{:.0}/{:.0}", s.median_ms, s.p99_ms)
            }
        };
        say!(
            "{:<40} {:>8.1} {:>10} {:>12.0} {:>16} {:>16}",
            scenario.name,
            list.len() as f64 / seconds.max(1e-9),
            records / list.len().max(1) as u64,
            simulated_s / seconds.max(1e-9),
            pair(acquire),
            pair(election)
        );
    }
    exit::VALID
}

/// A bundled scenario by name, parsed (bundled files are valid: tests parse every one).
/// Every bundled scenario over `seeds` seeds from its first, on every core: each must meet
/// its `[expect]` on every seed, not only over the short range its file runs (a race that a
/// scenario claims to show can be lost on a few seeds in a thousand). Exits 1 if any misses.
fn bench_expectations(seeds: u64) -> u8 {
    say!("{:<40} {:>12} {:>8}  missed seeds", "scenario", "met", "seeds/s");
    let mut missed_any = false;
    for (file, text) in bundled::SCENARIOS {
        let scenario = match fencesim::parse_scenario(text, file) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: bundled scenario is invalid: {e}");
                return exit::SIM_FAILED;
            }
        };
        let first = scenario.seeds.start;
        let list: Vec<u64> = (first..first.saturating_add(seeds)).collect();
        let clock = fencesim::bench::Stopwatch::start();
        let handle = |done: Judged| Ok((done.report.seed, done.report.expectation.met));
        let fold = |mut missed: Vec<u64>, (seed, met): (u64, bool)| {
            if !met {
                missed.push(seed);
            }
            missed
        };
        let opts = RunOptions::in_memory();
        let Ok(missed) = sweep_fold(
            &scenario,
            &list,
            default_jobs(),
            &opts,
            handle,
            |_| false,
            Vec::new(),
            fold,
        ) else {
            eprintln!("error: {file}: a seed could not be judged");
            return exit::SIM_FAILED;
        };
        missed_any |= !missed.is_empty();
        let shown: Vec<String> = missed.iter().take(10).map(u64::to_string).collect();
        say!(
            "{:<40} {:>12} {:>8.0}  {}{}",
            scenario.name,
            format!("{}/{}", list.len() - missed.len(), list.len()),
            list.len() as f64 / clock.seconds().max(1e-9),
            if missed.is_empty() { "-".to_owned() } else { shown.join(" ") },
            if missed.len() > 10 { format!(" ... ({} in all)", missed.len()) } else { String::new() }
        );
    }
    if missed_any {
        eprintln!("error: a bundled scenario misses its expectation on some seeds (above)");
        return exit::VIOLATION;
    }
    exit::VALID
}

fn bundled_scenario(name: &str) -> Option<fencesim::Scenario> {
    bundled::find(name).and_then(|(file, text)| fencesim::parse_scenario(text, file).ok())
}

/// The median of `values` (the upper one of an even count); 0 for none.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// Explore throughput on the random nemesis with 1 and 2 jobs, taken in turns (1, 2, 1, 2...)
/// so that warm-up and the machine's changing load fall on both alike; the speedup is the
/// ratio of the medians.
fn bench_explore(quick: bool) -> u8 {
    let opts = RunOptions::in_memory();
    let Some(nemesis) = bundled_scenario("random-nemesis-fenced") else {
        return exit::SIM_FAILED;
    };
    let (seeds, rounds) = if quick { (4u64, 1) } else { (100, 5) };
    let seeds: Vec<u64> = (0..seeds).collect();
    let mut rates = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        for jobs in [1, 2] {
            let clock = fencesim::bench::Stopwatch::start();
            if sweep(&nemesis, &seeds, jobs, &opts, |_| Ok(())).is_err() {
                return exit::SIM_FAILED;
            }
            let rate = seeds.len() as f64 / clock.seconds().max(1e-9);
            say!(
                "explore round {round}: random-nemesis-fenced, {} seeds, {jobs} job(s): {rate:.1} seeds/s",
                seeds.len()
            );
            rates[jobs - 1].push(rate);
        }
    }
    let [one, two] = rates.map(median);
    say!("explore 1 job {one:.1} seeds/s, 2 jobs {two:.1} seeds/s (medians)");
    say!("explore speedup with 2 jobs: {:.2}", two / one.max(1e-9));
    exit::VALID
}

/// Peak resident memory along a long sweep of a cheap scenario on 2 threads: it must not grow
/// with the number of seeds.
fn bench_memory(quick: bool) -> u8 {
    let opts = RunOptions::in_memory();
    let Some(cheap) = bundled_scenario("pause-fenced") else {
        return exit::SIM_FAILED;
    };
    let (total, step) = if quick {
        (200u64, 100u64)
    } else {
        (100_000, 20_000)
    };
    for start in (0..total).step_by(step as usize) {
        let chunk: Vec<u64> = (start..start + step).collect();
        if sweep(&cheap, &chunk, 2, &opts, |_| Ok(())).is_err() {
            return exit::SIM_FAILED;
        }
        say!(
            "peak RSS after {} seeds of pause-fenced: {}",
            start + step,
            fencesim::bench::peak_rss()
                .map_or("unavailable".to_owned(), |kb| format!("{} MiB", kb / 1024))
        );
    }
    exit::VALID
}

/// Cost per simulated message of the reference scenario (simulated, recorded and checked, as a
/// sweep does each seed) against raw madsim carrying as many plain requests and replies
/// between as many nodes. Each of `rounds` rounds times `seeds_per_round` seeds of each, seed
/// by seed in turns, then the same seeds phase by phase (simulate; serialize, hash and check
/// the history) to show where the time goes.
/// Prints each round and the line `ratio X`, the median fencesim/raw ratio.
fn bench_ratio(rounds: u64, seeds_per_round: u64) -> u8 {
    let Some(scenario) = bundled_scenario("bench-reference") else {
        return exit::SIM_FAILED;
    };
    let opts = RunOptions::in_memory();
    let (mut ratios, mut phases) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let seeds = round * seeds_per_round..(round + 1) * seeds_per_round;
        // Seed by seed, fencesim then raw madsim, so that both see the machine in the same
        // state: its speed drifts by tens of percent within a second.
        let (mut fencesim_s, mut raw_s) = (0.0, 0.0);
        let (mut messages, mut raw_messages) = (0, 0);
        for seed in seeds.clone() {
            let clock = fencesim::bench::Stopwatch::start();
            // What a sweep does with each seed, dropping the history included; one that is
            // written also pays for serializing and hashing its history (the phase line below).
            let sent = {
                let done = fencesim::run::judge(&scenario, seed, &opts);
                if done.report.failure.is_some() {
                    return exit::SIM_FAILED;
                }
                done.report.network.sent
            };
            fencesim_s += clock.seconds();
            messages += sent;
            // Two servers (lease service, resource) and three clients, as in the reference;
            // each raw client makes as many round trips as fencesim's clients sent messages
            // on average.
            let clock = fencesim::bench::Stopwatch::start();
            let raw_sent = fencesim_sim::raw_rpc::run(seed, 2, 3, sent / 6);
            raw_s += clock.seconds();
            // A raw run that stopped part way would still count its time, and make madsim
            // look slower than it is.
            if raw_sent != sent / 6 * 6 {
                eprintln!(
                    "error: raw madsim seed {seed} carried {raw_sent} messages, not {}",
                    sent / 6 * 6
                );
                return exit::SIM_FAILED;
            }
            raw_messages += raw_sent;
        }
        let fencesim_us = fencesim_s * 1e6 / messages.max(1) as f64;
        let raw_us = raw_s * 1e6 / raw_messages.max(1) as f64;
        say!(
            "ratio round {round}: fencesim {fencesim_us:.2} us/message ({messages} messages), raw madsim {raw_us:.2} us/message ({raw_messages} messages)",
        );
        ratios.push(fencesim_us / raw_us.max(1e-9));
        match fencesim::bench::phases(&scenario, seeds) {
            Ok(p) => phases.push(p),
            Err(e) => {
                eprintln!("error: bench-reference: {e}");
                return exit::SIM_FAILED;
            }
        }
    }
    let phase =
        |pick: fn(&fencesim::bench::Phases) -> f64| median(phases.iter().map(pick).collect());
    say!(
        "fencesim us/message by phase (medians): simulate {:.2}, serialize {:.2}, hash {:.2}, check {:.2}",
        phase(|p| p.simulate_us),
        phase(|p| p.serialize_us),
        phase(|p| p.hash_us),
        phase(|p| p.check_us)
    );
    say!("ratio {:.2}", median(ratios));
    exit::VALID
}

/// The checker alone, on synthetic histories of the sizes issue 6 names: every check on a
/// 1,000,000-record history, and linearizability on 10,000 operations from 10 processes.
fn bench_checker(quick: bool) -> u8 {
    use fencesim::bench::synthetic::{concurrent_register_history, sequential_history};
    let (records, ops) = if quick {
        (100_000, 1_000)
    } else {
        (1_000_000, 10_000)
    };
    let timed = |history: &fencesim::History| {
        let clock = fencesim::bench::Stopwatch::start();
        let result = fencesim::check(history);
        (clock.seconds(), result)
    };
    let long = sequential_history(records / 12);
    let (seconds, result) = timed(&long);
    say!(
        "checker: every check on {} records: {seconds:.2} s ({:.0} records/s), {:?}",
        long.entries.len(),
        long.entries.len() as f64 / seconds.max(1e-9),
        result.verdict
    );
    let concurrent = concurrent_register_history(ops, 10, 10, 1);
    let (seconds, result) = timed(&concurrent);
    say!(
        "checker: linearizability of {ops} operations from 10 processes (1% of writes info): {seconds:.2} s, {:?}",
        result.verdict
    );
    if result.verdict == fencesim::Verdict::Valid {
        exit::VALID
    } else {
        eprintln!(
            "error: a synthetic history that is correct by construction was judged {:?}",
            result.verdict
        );
        exit::VIOLATION
    }
}

/// `replay`: the run a report describes, again, compared byte for byte.
fn replay(path: &Path, out: PathBuf) -> u8 {
    let stored = match read_report(path) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let opts = RunOptions {
        out,
        scenario_arg: path.display().to_string(),
        check_determinism: false,
        swarm: false,
    };
    let done = match fencesim::run::evaluate(&stored.scenario, stored.seed, &opts)
        .and_then(|e| write(&opts.out, e))
    {
        Ok(done) => done,
        Err(e) => {
            eprintln!(
                "error: cannot write the replay under {}: {e}",
                opts.out.display()
            );
            return exit::BAD_INPUT;
        }
    };
    say!("{}", done.verdict_line());
    say!("report: {}", done.report_path.display());
    if done.report.history.sha256 == stored.history.sha256 {
        say!("replay identical: history sha256 {}", stored.history.sha256);
        exit::VALID
    } else {
        say!(
            "replay DIFFERS: history sha256 {} (recorded {}); tool {} (recorded {})",
            done.report.history.sha256,
            stored.history.sha256,
            done.report.tool.version,
            stored.tool.version
        );
        exit::SIM_FAILED
    }
}

/// Read a report.json, or print why not and return the exit code.
fn read_report(path: &Path) -> Result<fencesim::report::Report, u8> {
    let bytes = std::fs::read(path).map_err(|e| {
        eprintln!("error: {}: cannot read: {e}", path.display());
        exit::BAD_INPUT
    })?;
    let report: fencesim::report::Report = serde_json::from_slice(&bytes).map_err(|e| {
        // serde's message ends with its own "at line L column C": say it once.
        let message = e.to_string();
        let what = message.split(" at line ").next().unwrap_or(&message);
        eprintln!(
            "error: {}:{}:{}: not a fencesim report: {what}",
            path.display(),
            e.line(),
            e.column()
        );
        exit::BAD_INPUT
    })?;
    // A hand-edited report could hold a scenario that validation would refuse.
    let text = fencesim_scenario::to_toml(&report.scenario);
    if let Err(e) = fencesim::parse_scenario(&text, "report.json") {
        eprintln!("error: {}: its scenario is not valid: {e}", path.display());
        return Err(exit::BAD_INPUT);
    }
    Ok(report)
}

/// `shrink`: reduce a failing run to a minimal scenario, write it as TOML, run it once to
/// write its report, and print how to rerun it.
fn shrink(path: &Path, out: &Path, kind: Option<&str>) -> u8 {
    let stored = match read_report(path) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let kind = match kind {
        Some(k) => match fencesim::ViolationKind::ALL
            .into_iter()
            .find(|v| v.as_str() == k)
        {
            Some(k) => k,
            None => {
                let all: Vec<&str> = fencesim::ViolationKind::ALL
                    .iter()
                    .map(|k| k.as_str())
                    .collect();
                eprintln!(
                    "error: --kind: expected one of {}, found {k:?}",
                    all.join(", ")
                );
                return exit::BAD_INPUT;
            }
        },
        None => match stored.violations.first() {
            Some(v) => v.kind,
            None => {
                eprintln!(
                    "error: {}: seed {} of {} has no violation to shrink (verdict {})",
                    path.display(),
                    stored.seed,
                    stored.scenario.name,
                    serde_json::to_value(stored.verdict)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default()
                );
                return exit::BAD_INPUT;
            }
        },
    };
    let clock = fencesim::bench::Stopwatch::start();
    let shrunk = match fencesim::shrink::shrink_report(&stored, kind) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {}: {e}", path.display());
            return exit::BAD_INPUT;
        }
    };
    let seconds = clock.seconds();
    let file = out.join(format!("{}.toml", shrunk.scenario.name));
    let written = std::fs::create_dir_all(out)
        .and_then(|()| std::fs::write(&file, fencesim_scenario::to_toml(&shrunk.scenario)));
    if let Err(e) = written {
        return unwritable(out, &e);
    }
    let (b, a) = (shrunk.before, shrunk.after);
    say!(
        "shrunk seed {} of {} keeping {}: faults {} -> {}, clients {} -> {}, run {} ms -> {} ms ({} runs, {seconds:.1} s)",
        shrunk.seed,
        stored.scenario.name,
        kind.as_str(),
        b.faults,
        a.faults,
        b.clients,
        a.clients,
        b.duration_ms,
        a.duration_ms,
        shrunk.runs
    );
    say!("minimal scenario: {}", file.display());
    let file_arg = file.display().to_string();
    let opts = RunOptions {
        out: out.to_path_buf(),
        scenario_arg: file_arg.clone(),
        check_determinism: false,
        swarm: false,
    };
    match fencesim::run::run_seed(&shrunk.scenario, shrunk.seed, &opts) {
        Ok(done) => {
            say!("{}", done.verdict_line());
            say!("report: {}", done.report_path.display());
        }
        Err(e) => return unwritable(out, &e),
    }
    say!("reproduce: fencesim run {file_arg} --seed {}", shrunk.seed);
    exit::VALID
}
