//! `fencesim bench`: fencesim measured, in parts (docs/performance.md).

use std::path::PathBuf;

use fencesim::cancel::Cancel;
use fencesim::run::{default_jobs, sweep, sweep_fold, Judged, RunOptions};
use fencesim::{bundled, exit, Engine};

/// `fencesim bench`'s arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
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
}

/// `fencesim bench`: the seed counts (a count given holds with `--quick` too) and filters,
/// then every part or `--only` one.
pub(crate) fn exec(engine: &Engine, args: &Args, cancel: &Cancel) -> u8 {
    let or_default = |given: Option<u64>, full: u64, quick_count: u64| {
        given.unwrap_or(if args.quick { quick_count } else { full })
    };
    let counts = BenchSeeds {
        scenarios: or_default(args.seeds, 20, 1),
        expectations: or_default(args.expectation_seeds, 1000, 20),
        safe_knobs: or_default(args.safe_knob_seeds, 10_000, 10),
    };
    if args.defect.is_some() && args.only.is_some_and(|o| o != BenchPart::Search) {
        complain!("error: --defect narrows the `search` part; give --only search (or no --only)");
        return exit::BAD_INPUT;
    }
    let filters = BenchFilters {
        peers: args.peers.as_deref(),
        defect: args.defect.as_deref(),
    };
    let jobs = args.jobs as usize;
    bench(
        engine, &counts, jobs, args.quick, args.only, &filters, cancel,
    )
}

/// The parts of `fencesim bench`, in the order a full run takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum BenchPart {
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
    /// Simulations to the first counterexample of each mutation-table defect with uniform,
    /// targeted and guided exploration, median over 20 starting seeds.
    Search,
    /// Each design's random nemesis with a safe configuration drawn per seed (the knob values
    /// its design claims safe, and the workload's): exits 1 if any seed shows a safety
    /// violation.
    SafeKnobs,
    /// `fencesim verify` on small configurations: states, transitions, depth, seconds and
    /// states/s of each; exits 1 if one ends otherwise than it should.
    Verify,
}

/// Seeds per scenario of the bench parts that sweep every bundled scenario.
pub(crate) struct BenchSeeds {
    pub(crate) scenarios: u64,
    pub(crate) expectations: u64,
    pub(crate) safe_knobs: u64,
}

/// What some parts of `bench` are narrowed to.
pub(crate) struct BenchFilters<'a> {
    /// Knossos's `data` folder, for the `checker` part.
    pub(crate) peers: Option<&'a std::path::Path>,
    /// Text a `search` row's defect or case must contain.
    pub(crate) defect: Option<&'a str>,
}

/// `bench`: every part, or only `only`; nothing is written. Stops at the first part that fails.
fn bench(
    engine: &Engine,
    seeds: &BenchSeeds,
    jobs: usize,
    quick: bool,
    only: Option<BenchPart>,
    filters: &BenchFilters<'_>,
    cancel: &Cancel,
) -> u8 {
    use clap::ValueEnum;
    for part in BenchPart::value_variants() {
        if only.is_some_and(|o| o != *part) {
            continue;
        }
        let code = match part {
            BenchPart::Scenarios => bench_scenarios(engine, seeds.scenarios, jobs, cancel),
            BenchPart::Ratio => {
                let (rounds, seeds) = if quick { (1, 1) } else { (7, 10) };
                bench_ratio(engine, rounds, seeds, cancel)
            }
            BenchPart::Explore => bench_explore(engine, quick, cancel),
            BenchPart::Memory => bench_memory(engine, quick, cancel),
            BenchPart::Checker => match bench_checker(quick) {
                exit::VALID => filters.peers.map_or(exit::VALID, bench_peers),
                failed => failed,
            },
            BenchPart::Expectations => bench_expectations(engine, seeds.expectations, cancel),
            BenchPart::Search => bench_search(engine, quick, jobs, filters.defect, cancel),
            BenchPart::SafeKnobs => bench_safe_knobs(engine, seeds.safe_knobs, cancel),
            BenchPart::Verify => bench_verify(engine, quick, cancel),
        };
        if cancel.is_cancelled() {
            // A part cut short measured fewer seeds than it says; stop rather than report it.
            complain!("interrupted: the figures of the part in progress are partial");
            return exit::INTERRUPTED;
        }
        if code != exit::VALID {
            return code;
        }
    }
    exit::VALID
}

/// Options for seeds whose files are not written, stopping early once `cancel` is cancelled.
fn in_memory(cancel: &Cancel) -> RunOptions {
    RunOptions {
        cancel: cancel.clone(),
        ..RunOptions::in_memory()
    }
}

/// Every bundled scenario over `seeds` seeds on `jobs` threads.
pub(crate) fn bench_scenarios(engine: &Engine, seeds: u64, jobs: usize, cancel: &Cancel) -> u8 {
    use fencesim_checker::latency::{acquire_latencies, election_latencies, Summary};
    let opts = in_memory(cancel);
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
        let Some(scenario) = parse_bundled(engine, file, text) else {
            return exit::SIM_FAILED;
        };
        let list: Vec<u64> =
            (scenario.seeds.start..scenario.seeds.start.saturating_add(seeds)).collect();
        let clock = fencesim::bench::Stopwatch::start();
        let measured = sweep(engine, &scenario, &list, jobs, &opts, |done| {
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
            complain!("error: {file}: a seed could not be measured");
            return exit::SIM_FAILED;
        };
        if cancel.is_cancelled() {
            return exit::INTERRUPTED;
        }
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

/// Every bundled scenario over `seeds` seeds from its first, on every core: each must meet
/// its `[expect]` on every seed, not only over the short range its file runs (a race that a
/// scenario claims to show can be lost on a few seeds in a thousand). Exits 1 if any misses.
/// The `safe-knobs` part: each design's random-nemesis scenario, `seeds` seeds from 0, each
/// with its own safe configuration drawn ([`fencesim::safe_knobs`]), on every core.
pub(crate) fn bench_safe_knobs(engine: &Engine, seeds: u64, cancel: &Cancel) -> u8 {
    say!(
        "{:<44} {:>8} {:>8} {:>12} {:>7} {:>8}",
        "design (base)",
        "seeds",
        "unsafe",
        "no-progress",
        "failed",
        "seeds/s"
    );
    let mut broken = false;
    let mut total = 0;
    for name in fencesim::safe_knobs::SAFE_BASES {
        let Some((file, text)) = bundled::find(name) else {
            complain!("error: {name} is not bundled");
            return exit::SIM_FAILED;
        };
        let Some(base) = parse_bundled(engine, file, text) else {
            return exit::SIM_FAILED;
        };
        let clock = fencesim::bench::Stopwatch::start();
        let sweep =
            match fencesim::safe_knobs::sweep(engine, &base, 0..seeds, default_jobs(), cancel) {
                Ok(s) => s,
                Err(e) => {
                    complain!("error: {name}: a drawn configuration does not validate: {e}");
                    return exit::SIM_FAILED;
                }
            };
        if cancel.is_cancelled() {
            return exit::INTERRUPTED;
        }
        say!(
            "{:<44} {:>8} {:>8} {:>12} {:>7} {:>8.0}",
            format!("{} ({name})", base.lock_service.kind),
            sweep.seeds,
            sweep.unsafe_seeds.len(),
            sweep.no_progress,
            sweep.failed.len(),
            sweep.seeds as f64 / clock.seconds().max(1e-9)
        );
        for (seed, kinds, draw) in sweep.unsafe_seeds.iter().take(5) {
            say!("  seed {seed}: {}; drawn: {draw}", kinds.join(", "));
        }
        // The first unsafe seed's scenario, whole: `fencesim run` it to see the violation.
        if let Some((seed, _, _)) = sweep.unsafe_seeds.first() {
            if let Ok(drawn) = fencesim::safe_knobs::draw(engine, &base, *seed) {
                complain!(
                    "# {name}, seed {seed}, as a scenario file (save it and `fencesim run` it):\n{}",
                    fencesim_scenario::to_toml(&drawn.scenario)
                );
            }
        }
        for (seed, why) in sweep.failed.iter().take(5) {
            say!("  seed {seed} failed: {why}");
        }
        broken |= !sweep.unsafe_seeds.is_empty() || !sweep.failed.is_empty();
        total += sweep.seeds;
    }
    say!(
        "unsafe: seeds with a safety violation; no-progress: seeds whose only violation is \
         no-progress-after-heal (liveness; a workload may end before the heal)"
    );
    if broken {
        complain!(
            "error: a safe configuration showed a safety violation or failed (above): a false \
             positive of a check, or a design's safety claim broken"
        );
        return exit::VIOLATION;
    }
    say!(
        "safe-knobs: no safety violation in {total} seeds over {} designs",
        fencesim::safe_knobs::SAFE_BASES.len()
    );
    exit::VALID
}

pub(crate) fn bench_expectations(engine: &Engine, seeds: u64, cancel: &Cancel) -> u8 {
    say!(
        "{:<40} {:>12} {:>8}  missed seeds",
        "scenario",
        "met",
        "seeds/s"
    );
    let mut missed_any = false;
    for (file, text) in bundled::SCENARIOS {
        let Some(scenario) = parse_bundled(engine, file, text) else {
            return exit::SIM_FAILED;
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
        let opts = in_memory(cancel);
        let Ok(missed) = sweep_fold(
            engine,
            &scenario,
            &list,
            default_jobs(),
            &opts,
            handle,
            |_| false,
            Vec::new(),
            fold,
        ) else {
            complain!("error: {file}: a seed could not be judged");
            return exit::SIM_FAILED;
        };
        if cancel.is_cancelled() {
            return exit::INTERRUPTED;
        }
        missed_any |= !missed.is_empty();
        let shown: Vec<String> = missed.iter().take(10).map(u64::to_string).collect();
        say!(
            "{:<40} {:>12} {:>8.0}  {}{}",
            scenario.name,
            format!("{}/{}", list.len() - missed.len(), list.len()),
            list.len() as f64 / clock.seconds().max(1e-9),
            if missed.is_empty() {
                "-".to_owned()
            } else {
                shown.join(" ")
            },
            if missed.len() > 10 {
                format!(" ... ({} in all)", missed.len())
            } else {
                String::new()
            }
        );
    }
    if missed_any {
        complain!("error: a bundled scenario misses its expectation on some seeds (above)");
        return exit::VIOLATION;
    }
    exit::VALID
}

/// A bundled scenario's text parsed, or `None` after saying why (bundled files are valid:
/// tests parse every one, so this is a broken build).
fn parse_bundled(engine: &Engine, file: &str, text: &str) -> Option<fencesim::Scenario> {
    engine
        .parse_scenario(text, file)
        .map_err(|e| complain!("error: bundled scenario is invalid: {e}"))
        .ok()
}

/// A bundled scenario by name, parsed (bundled files are valid: tests parse every one).
pub(crate) fn bundled_scenario(engine: &Engine, name: &str) -> Option<fencesim::Scenario> {
    bundled::find(name).and_then(|(file, text)| parse_bundled(engine, file, text))
}

/// The median of `values` (the upper one of an even count); 0 for none.
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// Explore throughput on the random nemesis with 1 and 2 jobs, taken in turns (1, 2, 1, 2...)
/// so that warm-up and the machine's changing load fall on both alike; the speedup is the
/// ratio of the medians.
pub(crate) fn bench_explore(engine: &Engine, quick: bool, cancel: &Cancel) -> u8 {
    let opts = in_memory(cancel);
    let Some(nemesis) = bundled_scenario(engine, "random-nemesis-fenced") else {
        return exit::SIM_FAILED;
    };
    let (seeds, rounds) = if quick { (4u64, 1) } else { (100, 5) };
    let seeds: Vec<u64> = (0..seeds).collect();
    let mut rates = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        for jobs in [1, 2] {
            let clock = fencesim::bench::Stopwatch::start();
            if sweep(engine, &nemesis, &seeds, jobs, &opts, |_| Ok(())).is_err() {
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
pub(crate) fn bench_memory(engine: &Engine, quick: bool, cancel: &Cancel) -> u8 {
    let opts = in_memory(cancel);
    let Some(cheap) = bundled_scenario(engine, "pause-fenced") else {
        return exit::SIM_FAILED;
    };
    let (total, step) = if quick {
        (200u64, 100u64)
    } else {
        (100_000, 20_000)
    };
    for start in (0..total).step_by(step as usize) {
        let chunk: Vec<u64> = (start..start + step).collect();
        if sweep(engine, &cheap, &chunk, 2, &opts, |_| Ok(())).is_err() {
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
pub(crate) fn bench_ratio(
    engine: &Engine,
    rounds: u64,
    seeds_per_round: u64,
    cancel: &Cancel,
) -> u8 {
    let Some(scenario) = bundled_scenario(engine, "bench-reference") else {
        return exit::SIM_FAILED;
    };
    let opts = in_memory(cancel);
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
                let done = fencesim::run::judge(engine, &scenario, seed, &opts);
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
                complain!(
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
        match fencesim::bench::phases(engine, &scenario, seeds) {
            Ok(p) => phases.push(p),
            Err(e) => {
                complain!("error: bench-reference: {e}");
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
pub(crate) fn bench_checker(quick: bool) -> u8 {
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
        complain!(
            "error: a synthetic history that is correct by construction was judged {:?}",
            result.verdict
        );
        exit::VIOLATION
    }
}

/// `bench --only search`: for each row of the mutation table, the simulations uniform,
/// targeted and guided exploration need to its first counterexample, median over 20 starting
/// seeds (2 with `--quick`, on the first chosen row), with the wall time of each column;
/// only the rows whose defect or case contains `defect` (ignoring case), if given. A `defect`
/// that is blank or matches no row is refused (exit 2), naming the rows.
pub(crate) fn bench_search(
    engine: &Engine,
    quick: bool,
    jobs: usize,
    defect: Option<&str>,
    cancel: &Cancel,
) -> u8 {
    use fencesim::bench::{explore_counts, guided_counts, median_count, Stopwatch};
    use fencesim::mutation_table::{Defect, CAUGHT, MASKED};
    use fencesim_scenario::Placement;
    let (starts, cap) = if quick { (2, 30) } else { (20, 300) };
    let text = defect.map(|t| t.trim().to_lowercase());
    let chosen = |d: &&Defect| {
        text.as_deref()
            .is_none_or(|t| d.name.to_lowercase().contains(t) || d.case.to_lowercase().contains(t))
    };
    // Each row alone; a masked defect beside its base alone (`true`).
    let mut rows: Vec<(&Defect, bool)> = CAUGHT.iter().filter(chosen).map(|d| (d, false)).collect();
    rows.extend(
        MASKED
            .iter()
            .filter(chosen)
            .flat_map(|d| [(d, true), (d, false)]),
    );
    if text.as_deref() == Some("") {
        complain!("error: --defect is blank: give part of a defect or case (`K04`, `fsync`)");
        return exit::BAD_INPUT;
    }
    if rows.is_empty() {
        let names: Vec<String> = CAUGHT
            .iter()
            .chain(MASKED)
            .map(|d| format!("{} ({})", d.name, d.case))
            .collect();
        complain!(
            "error: --defect {:?} matches no row of the mutation table; its rows: {}",
            defect.unwrap_or_default(),
            names.join(", ")
        );
        return exit::BAD_INPUT;
    }
    if quick && rows.len() > 1 {
        // Seconds, not minutes: one row proves the part runs.
        say!(
            "search (--quick): the first of {} matching rows only",
            rows.len()
        );
        rows.truncate(1);
    }
    say!("search: simulations to the first counterexample, median over {starts} starting seeds (>{cap}: not within {cap}); wall seconds for all starts");
    say!("| defect | case | uniform | targeted | guided | s uniform | s targeted | s guided |");
    say!("|---|---|---|---|---|---|---|---|");
    for (defect, alone) in rows {
        let scenario = |p| {
            if alone {
                defect.safe(p)
            } else {
                defect.mutant(p)
            }
        };
        let clock = Stopwatch::start();
        let uniform = explore_counts(engine, &scenario(Placement::Uniform), starts, cap, jobs);
        let uniform_s = clock.seconds();
        let clock = Stopwatch::start();
        let targeted = explore_counts(engine, &scenario(Placement::Targeted), starts, cap, jobs);
        let targeted_s = clock.seconds();
        let clock = Stopwatch::start();
        let guided = guided_counts(engine, &scenario(Placement::Uniform), starts, cap, jobs);
        let guided_s = clock.seconds();
        let (Ok(uniform), Ok(targeted), Ok(guided)) = (uniform, targeted, guided) else {
            complain!("error: a sweep of {} failed", defect.name);
            return exit::SIM_FAILED;
        };
        let name = if alone {
            "its base alone (validity_check = false)".to_owned()
        } else {
            format!("`{}`", defect.name)
        };
        let line = format!(
            "| {name} | {} | {} | {} | {} | {uniform_s:.1} | {targeted_s:.1} | {guided_s:.1} |",
            defect.case,
            median_count(&uniform, cap),
            median_count(&targeted, cap),
            median_count(&guided, cap),
        );
        say!("{line}");
        if cancel.is_cancelled() {
            break;
        }
    }
    exit::VALID
}

/// Knossos's own test histories in `dir` (its `data/` folder), judged with Knossos's models:
/// per folder the files, how many got Knossos's verdict, how many fencesim refused to read,
/// the time, and the slowest file; then each file that did not agree. Skipped, saying so,
/// when `dir` is not there.
pub(crate) fn bench_peers(dir: &std::path::Path) -> u8 {
    let Some(folders) = fencesim::bench::knossos_peers(dir) else {
        say!(
            "peers: {} has no cas-register/ folder (Knossos's data/ folder has): skipped",
            fencesim_history::display_path(dir)
        );
        return exit::VALID;
    };
    say!(
        "{:<22} {:>8} {:>7} {:>7} {:>9}  slowest file",
        "peers (knossos)",
        "files",
        "agreed",
        "refused",
        "time s"
    );
    for f in &folders {
        let agreed = match f.expected {
            Some(_) => f.agreed.to_string(),
            None => "-".to_owned(),
        };
        let slowest = f
            .slowest
            .as_ref()
            .map_or_else(|| "-".to_owned(), |(name, s)| format!("{name} {s:.3} s"));
        say!(
            "{:<22} {:>8} {:>7} {:>7} {:>9.3}  {slowest}",
            f.folder,
            f.files,
            agreed,
            f.refused,
            f.seconds
        );
    }
    for f in &folders {
        let expected = f.expected.map_or("no verdict asserted".to_owned(), |v| {
            format!("expected {}", format!("{v:?}").to_lowercase())
        });
        for note in &f.notes {
            say!("  {}/{note} [{expected}]", f.folder);
        }
    }
    exit::VALID
}

/// One configuration `bench --only verify` searches, and how its search must end.
struct VerifyRow {
    /// A bundled scenario.
    scenario: &'static str,
    /// The configuration, in words.
    what: &'static str,
    bounds: fencesim::verify::Bounds,
    expect: fencesim::verify::Ending,
    /// Lock cycles per client, if not the scenario's.
    cycles: Option<u64>,
}

/// The rows of `bench --only verify`: the fenced single design explored completely without
/// faults but time and with one service crash, the unfenced one's and the memory counter's
/// shortest counterexamples, primary-backup's split brain, and each other design's safe
/// scenario to a depth; with
/// `quick`, the counterexamples and two capped searches, seconds in a debug build.
fn verify_rows(quick: bool) -> Vec<VerifyRow> {
    use fencesim::verify::{Bounds, Ending};
    // Only the faults of time: timers fire in any order, nothing is lost, duplicated or
    // crashed, no call times out.
    let timers_only = Bounds {
        drops: 0,
        duplicates: 0,
        crashes: 0,
        timeouts: 0,
        max_states: 20_000_000,
        ..Bounds::default()
    };
    let row = |scenario, what, bounds, expect| VerifyRow {
        scenario,
        what,
        bounds,
        expect,
        cycles: None,
    };
    let counterexamples = [
        row(
            "single-unfenced",
            "2 clients x 1 cycle, timers only (K01)",
            timers_only.clone(),
            Ending::Violation,
        ),
        row(
            "crash-memory-counter",
            "default bounds (K06/K17)",
            Bounds::default(),
            Ending::Violation,
        ),
    ];
    if quick {
        let mut rows = Vec::from(counterexamples);
        rows.push(row(
            "single-fenced",
            "timers only, first 2,000 states",
            Bounds {
                max_states: 2_000,
                ..timers_only.clone()
            },
            Ending::BoundsReached,
        ));
        rows.push(row(
            "raft-leader-crash",
            "default faults, depth 3",
            Bounds {
                depth: 3,
                ..Bounds::default()
            },
            Ending::BoundsReached,
        ));
        return rows;
    }
    let mut rows = vec![
        row(
            "single-fenced",
            "2 clients x 1 cycle, timers only",
            timers_only.clone(),
            Ending::Verified,
        ),
        row(
            "single-fenced",
            "2 clients x 1 cycle, timers and 1 service crash",
            Bounds {
                crashes: 1,
                ..timers_only.clone()
            },
            Ending::Verified,
        ),
        // The target: two lock-write-release cycles each, with a loss and a crash.
        VerifyRow {
            cycles: Some(2),
            ..row(
                "single-fenced",
                "2 clients x 2 cycles, 1 attempt, no renewal, 1 loss and 1 service crash",
                Bounds {
                    drops: 1,
                    crashes: 1,
                    attempts: 1,
                    renewals: 0,
                    max_states: 60_000_000,
                    ..timers_only.clone()
                },
                Ending::Verified,
            )
        },
        // A duplicated write: the resource rejects the second copy after another client's
        // write, and the writer takes that as its write's outcome (tests/it/regressions.rs).
        row(
            "single-fenced",
            "2 clients x 1 cycle, timers and 1 duplicate",
            Bounds {
                duplicates: 1,
                ..timers_only.clone()
            },
            Ending::Violation,
        ),
    ];
    rows.extend(counterexamples);
    // A primary paused past the failover timeout: the split brain the scenario admits,
    // found once state hashing reaches its sixth step.
    rows.push(row(
        "primary-backup-sync-failover",
        "default faults",
        Bounds::default(),
        Ending::Violation,
    ));
    // Re-executed (Raft and etcd's replicas cannot be copied): every schedule to depth 5.
    // State hashing: lease-record to depth 12, Redlock's five instances to depth 5.
    for (scenario, what, depth) in [
        ("raft-leader-crash", "default faults, depth 5", 5),
        ("etcd-leader-crash", "default faults, depth 5", 5),
        (
            "lease-record-recorded-duration",
            "default faults, depth 12",
            12,
        ),
        ("redlock-pause-counter-fenced", "default faults, depth 5", 5),
    ] {
        rows.push(row(
            scenario,
            what,
            Bounds {
                depth,
                ..Bounds::default()
            },
            Ending::BoundsReached,
        ));
    }
    rows
}

/// `bench --only verify`: each of [`verify_rows`] searched, with its states, transitions,
/// depth, seconds and states/s, and stateright's and TLC's published figures for scale.
/// Exits 1 if a search ends otherwise than its row says it must.
pub(crate) fn bench_verify(engine: &Engine, quick: bool, cancel: &Cancel) -> u8 {
    use fencesim::verify::verify;
    say!("verify: breadth-first search of small configurations (docs/verify.md), 1 core");
    say!("| scenario | configuration | strategy | ending | states | transitions | depth | s | states/s | counterexample |");
    say!("|---|---|---|---|---|---|---|---|---|---|");
    let mut missed = Vec::new();
    for row in verify_rows(quick) {
        let Some(mut scenario) = bundled_scenario(engine, row.scenario) else {
            return exit::SIM_FAILED;
        };
        if let Some(cycles) = row.cycles {
            scenario.clients.iter_mut().for_each(|c| c.cycles = cycles);
        }
        let verified = match verify(engine, &scenario, &row.bounds, 1, cancel) {
            Ok(v) => v,
            Err(e) => {
                complain!("error: {}: {e}", row.scenario);
                return exit::SIM_FAILED;
            }
        };
        if cancel.is_cancelled() {
            return exit::INTERRUPTED;
        }
        let o = &verified.outcome;
        let found = o.counterexample.as_ref().map_or("-".to_owned(), |cx| {
            format!(
                "{} in {} steps; {}",
                cx.violation.kind.as_str(),
                cx.steps.len(),
                as_scenario(&verified)
            )
        });
        if o.counterexample.is_some() && !reproduced(&verified) {
            missed.push(format!(
                "{} ({}): its counterexample as a scenario: {}",
                row.scenario,
                row.what,
                as_scenario(&verified)
            ));
        }
        say!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.1} | {:.0} | {found} |",
            row.scenario,
            row.what,
            verified.strategy.as_str(),
            o.ending.as_str(),
            o.states,
            o.transitions,
            o.depth,
            verified.seconds,
            verified.states_per_second()
        );
        if o.ending != row.expect {
            missed.push(format!(
                "{} ({}): {}, expected {}",
                row.scenario,
                row.what,
                o.ending.as_str(),
                row.expect.as_str()
            ));
        }
    }
    if !quick {
        let code = bench_verify_mutations(engine, cancel);
        if code != exit::VALID {
            return code;
        }
    }
    say!("for scale, stateright's published models: two-phase commit with 3 resource managers 288 states; Paxos with 2 clients and 3 servers 16,668 states; TLC about 110,000 states/s");
    if !missed.is_empty() {
        complain!("error: verify: {}", missed.join("; "));
        return exit::VIOLATION;
    }
    exit::VALID
}

/// Whether a search's counterexample, written as a scenario, made `fencesim run` show it.
fn reproduced(verified: &fencesim::verify::Verified) -> bool {
    matches!(
        verified.concrete,
        Some(fencesim::verify::Concrete::Written {
            reproduced: true,
            ..
        })
    )
}

/// What became of a counterexample written as a scenario, in a few words.
fn as_scenario(verified: &fencesim::verify::Verified) -> String {
    use fencesim::verify::Concrete;
    match &verified.concrete {
        Some(Concrete::Written {
            reproduced: true, ..
        }) => "`run` reproduces it".to_owned(),
        Some(Concrete::Written { found, .. }) => {
            let found: Vec<&str> = found.iter().map(|k| k.as_str()).collect();
            format!("`run` does not reproduce it (shows: {})", found.join(", "))
        }
        Some(Concrete::Unwritable(why)) => format!("not written as a scenario: {why}"),
        None => "-".to_owned(),
    }
}

/// Each row of the mutation table searched by `verify` on the first two of its clients, one
/// cycle each, at most 200,000 states, once with the faults of time only and once with the
/// default fault bounds: found (the violation and its steps) or not, and the states explored.
/// Informational: the timing defects are expected not to be found (docs/verify.md).
fn bench_verify_mutations(engine: &Engine, cancel: &Cancel) -> u8 {
    use fencesim::mutation_table::{CAUGHT, MASKED};
    use fencesim::verify::{verify, Bounds};
    use fencesim_scenario::Placement;
    say!("verify: each mutation-table row, its first 2 clients x 1 cycle, at most 200,000 states");
    say!("| defect | case | shows | strategy | timers only | default faults | s |");
    say!("|---|---|---|---|---|---|---|");
    let default_faults = Bounds {
        max_states: 200_000,
        ..Bounds::default()
    };
    let timers_only = Bounds {
        drops: 0,
        duplicates: 0,
        crashes: 0,
        timeouts: 0,
        ..default_faults.clone()
    };
    for defect in CAUGHT.iter().chain(MASKED) {
        let mut scenario = defect.mutant(Placement::Uniform);
        scenario.clients.truncate(2);
        scenario.clients.iter_mut().for_each(|c| c.cycles = 1);
        let clock = fencesim::bench::Stopwatch::start();
        let mut cells = Vec::new();
        let mut strategy = "";
        for bounds in [&timers_only, &default_faults] {
            let Ok(verified) = verify(engine, &scenario, bounds, 1, cancel) else {
                complain!("error: {}: the design is not registered", defect.name);
                return exit::SIM_FAILED;
            };
            if cancel.is_cancelled() {
                return exit::INTERRUPTED;
            }
            strategy = verified.strategy.as_str();
            let o = &verified.outcome;
            cells.push(match &o.counterexample {
                Some(cx) => format!(
                    "{} in {} steps ({} states; {})",
                    cx.violation.kind.as_str(),
                    cx.steps.len(),
                    o.states,
                    as_scenario(&verified)
                ),
                None => format!(
                    "{}, depth {}, {} states",
                    o.ending.as_str(),
                    o.depth,
                    o.states
                ),
            });
        }
        say!(
            "| `{}` | {} | {} | {strategy} | {} | {} | {:.1} |",
            defect.name,
            defect.case,
            defect.shows,
            cells[0],
            cells[1],
            clock.seconds(),
        );
    }
    exit::VALID
}
