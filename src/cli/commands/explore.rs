//! `fencesim explore`: a sweep of seeds until the first counterexample, its summary, and
//! `--merge` of the summaries of a sweep's shards.

use std::path::PathBuf;

use fencesim::cancel::Cancel;
use fencesim::explore::{ExploreSummary, SeedOutcome};
use fencesim::run::{default_jobs, sweep_fold, write, Judged, RunOptions, SeedRun};
use fencesim::{exit, Engine};
use fencesim_scenario::Scenario;

use super::shrink::shrink;
use super::{
    at_path, ensure_writable, prepare, print_seed, seed_exit_code, unwritable, worse, Determinism,
    Target,
};
use crate::cli::progress;

/// `fencesim explore`'s arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
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
    /// `env` (or `env/N`) takes I and N from the CI engine, Kubernetes Indexed Job or Slurm
    /// job array that runs this job (docs/scale.md).
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
}

/// `fencesim explore`: `--merge` of shard summaries; else a guided search (asked for, or the
/// default for a scenario with a `[nemesis]`) or a sweep of the seeds.
pub(crate) fn exec(engine: &Engine, args: &Args, cancel: &Cancel) -> u8 {
    if !args.merge.is_empty() {
        return merge_summaries(&args.merge, &args.out);
    }
    let target = Target {
        scenario: args.scenario.clone().unwrap_or_default(),
        out: args.out.clone(),
        check_determinism: args.check_determinism,
        swarm: args.swarm,
    };
    let sweep_args = ExploreArgs {
        seeds: args.seeds.clone().unwrap_or_default(),
        jobs: args.jobs.map_or_else(default_jobs, |j| j as usize),
        shard: args.shard.clone(),
        keep_going: args.keep_going,
        quiet: args.quiet,
        shrink: args.shrink,
    };
    // Only a search can be guided; a sweep is asked for by name or by what only a sweep does
    // (every seed, shards, running each seed twice).
    let sweep_only = args.keep_going || args.shard.is_some() || args.check_determinism;
    if args.guided {
        super::guided::guided(engine, &target, &sweep_args, cancel)
    } else if args.sweep || sweep_only {
        explore(engine, &target, &sweep_args, cancel)
    } else {
        super::guided::guided_or_sweep(engine, &target, &sweep_args, cancel)
    }
}

/// What a sweep or a search of `explore` runs with, once `Args` are read.
#[derive(Clone)]
pub(crate) struct ExploreArgs {
    pub(crate) seeds: String,
    pub(crate) jobs: usize,
    pub(crate) shard: Option<String>,
    pub(crate) keep_going: bool,
    pub(crate) quiet: bool,
    pub(crate) shrink: bool,
}

/// `explore`: many seeds in parallel until the first counterexample (or all of them with
/// `--keep-going`); files only for counterexamples, and a summary.
fn explore(engine: &Engine, target: &Target, args: &ExploreArgs, cancel: &Cancel) -> u8 {
    // `--shard env`: the shard the job engine says this job is, as an ordinary `I/N`.
    let shard = match args.shard.as_deref().map(env_shard).transpose() {
        Ok(shard) => shard,
        Err(e) => {
            complain!("error: {e}");
            return exit::BAD_INPUT;
        }
    };
    let args = &ExploreArgs {
        shard,
        ..args.clone()
    };
    match prepare(engine, target, cancel) {
        Ok((scenario, opts)) => sweep(engine, &scenario, &opts, args),
        Err(code) => code,
    }
}

/// The sweep of a prepared scenario, with `args.shard` already an `I/N` (not `env`).
pub(crate) fn sweep(
    engine: &Engine,
    scenario: &Scenario,
    opts: &RunOptions,
    args: &ExploreArgs,
) -> u8 {
    let seeds = match select_seeds(&args.seeds, args.shard.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            complain!("error: {e}");
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
    let handle = |done: Judged| -> std::io::Result<(SeedOutcome, Determinism, Option<Written>)> {
        let outcome = SeedOutcome::of(&done.report);
        let mut determinism = Determinism::default();
        determinism.add(&done.report);
        progress.seed_done(!outcome.met);
        let kept = match (outcome.met, args.keep_going) {
            (true, _) => None,
            (false, true) => Some(Written::Done(Box::new(write(
                engine,
                &opts.out,
                done.serialize()?,
            )?))),
            (false, false) => Some(Written::Pending(Box::new(done))),
        };
        Ok((outcome, determinism, kept))
    };
    let stop = |(outcome, _, _): &(SeedOutcome, Determinism, Option<Written>)| {
        !args.keep_going && !outcome.met
    };
    // Each seed is counted as its turn comes and forgotten, so a long sweep's memory stays
    // flat; only the counterexamples are kept, to print and write below.
    let start = (
        ExploreSummary::start(scenario, &args.seeds, args.shard.as_deref()),
        Vec::new(),
    );
    let mut determinism = Determinism::default();
    let fold = |(mut summary, mut kept): (ExploreSummary, Vec<Written>),
                (outcome, seed, written)| {
        summary.add(&outcome);
        determinism.merge(seed);
        kept.extend(written);
        (summary, kept)
    };
    let results = sweep_fold(
        engine, scenario, &seeds, args.jobs, opts, handle, stop, start, fold,
    );
    progress.finish();
    let seconds = clock.seconds();
    let (summary, kept) = match results {
        Ok(r) => r,
        Err(e) => return unwritable(&opts.out, &e),
    };
    // A Ctrl-C that came as the last seeds finished cut nothing: the sweep is whole.
    let interrupted = opts.cancel.is_cancelled() && summary.seeds_run < seeds.len() as u64;
    let stopped_early = summary.seeds_run < seeds.len() as u64 && !interrupted;
    let mut summary = summary.finish(stopped_early, seconds);
    summary.interrupted = interrupted;
    let mut worst = exit::VALID;
    let mut first_report = None;
    for written in kept {
        let done = match written {
            Written::Done(run) => *run,
            Written::Pending(done) => match done.write(engine, &opts.out) {
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
    if opts.check_determinism {
        say!("{}", determinism.line());
    }
    let path = opts
        .out
        .join(&scenario.name)
        .join(ExploreSummary::file_name(args.shard.as_deref()));
    if let Err(e) = summary.write(&path) {
        return unwritable(&opts.out, &at_path(&path, &e));
    }
    say!("summary: {}", fencesim_history::display_path(&path));
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
        shrink(engine, &report, &opts.out.join("shrunk"), None);
    }
    worst
}

/// A counterexample's files: written during the sweep, or still to write.
pub(crate) enum Written {
    Done(Box<SeedRun>),
    Pending(Box<Judged>),
}

/// `explore --merge`: join shard summaries and print the whole sweep's. Exits as `explore`
/// would have on the whole sweep: 4 if a simulation failed, else 1 if a seed missed the
/// expectation, else 0.
fn merge_summaries(paths: &[PathBuf], out: &std::path::Path) -> u8 {
    let mut parts = Vec::new();
    for path in paths {
        match ExploreSummary::read(path) {
            Ok(s) => parts.push((fencesim_history::display_path(path), s)),
            Err(e) => {
                complain!("error: {e}");
                return exit::BAD_INPUT;
            }
        }
    }
    let merged = match ExploreSummary::merge(&parts) {
        Ok(m) => m,
        Err(e) => {
            complain!("error: {e}");
            return exit::BAD_INPUT;
        }
    };
    let (missing, first_missing) = merged.missing_shards();
    if missing > 0 {
        // A lost shard must not pass for a whole sweep in CI, nor look like one: no summary.
        let more = missing - first_missing.len() as u64;
        complain!(
            "error: the merge lacks shards {}{} of the sweep",
            first_missing.join(", "),
            if more > 0 {
                format!(" and {more} more ({missing} in all)")
            } else {
                String::new()
            }
        );
        return exit::BAD_INPUT;
    }
    for line in merged.lines() {
        say!("{line}");
    }
    // The whole sweep's summary, where an unsharded sweep writes its own: a CI merge job
    // keeps it with the counterexamples' reports.
    let path = out
        .join(&merged.scenario)
        .join(ExploreSummary::file_name(None));
    if let Err(e) = merged.write(&path) {
        return unwritable(out, &e);
    }
    say!("summary: {}", fencesim_history::display_path(&path));
    if merged.failed > 0 {
        exit::SIM_FAILED
    } else if merged.counterexample_count > 0 {
        exit::VIOLATION
    } else {
        exit::VALID
    }
}

/// `--shard ARG` as `I/N`: ARG itself, or with `env` / `env/N` the shard of this job as its
/// engine's variables say (said on stderr, so a CI log shows which seeds a job ran).
fn env_shard(arg: &str) -> Result<String, String> {
    let var = |name: &str| std::env::var(name).ok();
    match fencesim::shard_env::resolve(arg, &var)? {
        Some(found) => {
            complain!("shard {} from {}", found.label, found.source);
            Ok(found.label)
        }
        None => Ok(arg.to_owned()),
    }
}

/// The most seeds one `explore` takes (split larger sweeps across shards).
use fencesim::run::MAX_SWEEP_SEEDS;

/// Parse `A..B` and an optional `I/N` shard (every N-th seed from the I-th).
pub(crate) fn select_seeds(range: &str, shard: Option<&str>) -> Result<Vec<u64>, String> {
    let (a, b) = parse_range(range)?;
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
    let n = fencesim::explore::seeds_in_shard(a, b, index, count);
    if n > u128::from(MAX_SWEEP_SEEDS) {
        return Err(format!("--seeds: {n} seeds selected; at most {MAX_SWEEP_SEEDS} per sweep (split it with --shard)"));
    }
    // Every seed selected is below b <= 2^64, so each fits a u64.
    Ok((0..n)
        .map(|i| (first + i * u128::from(count)) as u64)
        .collect())
}

pub(crate) use fencesim::explore::parse_seed_range as parse_range;
