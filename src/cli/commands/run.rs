//! `fencesim run`: one seed, or with `--expect` every seed of the scenario's range.

use fencesim::cancel::Cancel;
use fencesim::run::{default_jobs, sweep_fold, Judged, RunOptions, SeedRun};
use fencesim::{exit, Engine, Scenario};

use super::{
    ensure_writable, prepare, print_seed, print_seed_line, seed_exit_code, unwritable, worse,
    Determinism, Target,
};
use crate::cli::progress;

/// `fencesim run`'s arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
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
    /// With --expect over the range: no progress on stderr, and for each seed that missed
    /// its expectation one line (its verdict and report) instead of its whole explanation.
    #[arg(long)]
    quiet: bool,
}

/// `fencesim run`: one seed (the range's first, or `--seed`), or with `--expect` every seed of
/// the range.
pub(crate) fn exec(engine: &Engine, args: &Args, cancel: &Cancel) -> u8 {
    let (target, seed, expect) = (&args.target, args.seed, args.expect);
    let sweep = &RangeArgs {
        write_all: args.write_all,
        quiet: args.quiet,
    };
    let (scenario, opts) = match prepare(engine, target, cancel) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let range = &scenario.seeds;
    if seed.is_none() && expect && range.end - range.start > fencesim::run::MAX_SWEEP_SEEDS {
        complain!(
            "error: {}: seeds {}..{} are {} seeds; run --expect takes at most {} (use explore \
             with --shard to split a larger sweep)",
            target.scenario,
            range.start,
            range.end,
            range.end - range.start,
            fencesim::run::MAX_SWEEP_SEEDS
        );
        return exit::BAD_INPUT;
    }
    let seeds: Vec<u64> = match (seed, expect) {
        (Some(s), _) => vec![s],
        (None, false) => vec![range.start],
        (None, true) => (range.start..range.end).collect(),
    };
    if let [seed] = seeds[..] {
        return run_one(engine, &scenario, seed, expect, &opts);
    }
    run_range(engine, &scenario, &seeds, sweep, &opts)
}

/// How `run --expect` sweeps a scenario's whole range.
pub(crate) struct RangeArgs {
    /// Write every seed's files, not only those of the seeds that miss the expectation.
    pub(crate) write_all: bool,
    /// No progress on stderr.
    pub(crate) quiet: bool,
}

/// One seed: always written and printed.
pub(crate) fn run_one(
    engine: &Engine,
    scenario: &Scenario,
    seed: u64,
    expect: bool,
    opts: &RunOptions,
) -> u8 {
    let done = match fencesim::run::run_seed(engine, scenario, seed, opts) {
        Ok(done) => done,
        Err(e) => return unwritable(&opts.out, &e),
    };
    print_seed(&done, expect);
    if opts.check_determinism {
        // A failed rerun is the seed's verdict (simulation failed); a passed one says so here.
        let mut determinism = Determinism::default();
        determinism.add(&done.report);
        say!("{}", determinism.line());
    }
    seed_exit_code(&done.report, expect)
}

/// What a `run --expect` sweep keeps: counts, and the seeds that missed, written.
#[derive(Default)]
pub(crate) struct RangeTally {
    run: u64,
    met: u64,
    /// What the determinism reruns found (counted whether or not they were asked for).
    determinism: Determinism,
    written: u64,
    missed: Vec<SeedRun>,
}

/// Every seed of the scenario's range under `--expect`, in parallel, with progress as
/// `explore` shows it. Files are written for the seeds that miss the expectation (all seeds
/// with `--write-all`): a range of a thousand seeds would otherwise write a thousand folders.
pub(crate) fn run_range(
    engine: &Engine,
    scenario: &Scenario,
    seeds: &[u64],
    range: &RangeArgs,
    opts: &RunOptions,
) -> u8 {
    if let Err(e) = ensure_writable(&opts.out, &scenario.name) {
        return unwritable(&opts.out, &e);
    }
    let progress = progress::Progress::new(seeds.len() as u64, range.quiet);
    let handle = |done: Judged| -> std::io::Result<(bool, Determinism, Option<SeedRun>)> {
        let met = done.report.expectation.met;
        let mut determinism = Determinism::default();
        determinism.add(&done.report);
        progress.seed_done(!met);
        let kept = if met && !range.write_all {
            None
        } else {
            Some(done.write(engine, &opts.out)?)
        };
        Ok((met, determinism, kept))
    };
    let fold = |mut t: RangeTally, (met, seed, kept): (bool, Determinism, Option<SeedRun>)| {
        t.run += 1;
        t.met += u64::from(met);
        t.determinism.merge(seed);
        if let Some(done) = kept {
            t.written += 1;
            if !met {
                t.missed.push(done);
            }
        }
        t
    };
    let result = sweep_fold(
        engine,
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
        if range.quiet {
            print_seed_line(done);
        } else {
            print_seed(done, true);
        }
        worst = worse(worst, seed_exit_code(&done.report, true));
    }
    if opts.check_determinism {
        say!("{}", tally.determinism.line());
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
        fencesim_history::display_path(&opts.out.join(&scenario.name)),
        if range.write_all {
            ""
        } else {
            " (those that missed; --write-all writes every seed's)"
        }
    );
    if opts.cancel.is_cancelled() {
        say!(
            "interrupted after {} of {} seeds: the counts above are partial",
            tally.run,
            seeds.len()
        );
        return exit::INTERRUPTED;
    }
    worst
}
