//! `fencesim explore --guided`: guided exploration from a root seed ([`fencesim::guided`]); its
//! counterexample is written as a scripted scenario file, run once from that file to write
//! its report, and named in the reproduce line.

use fencesim::cancel::Cancel;
use fencesim::run::RunOptions;
use fencesim::{exit, Engine};
use std::path::{Path, PathBuf};

use fencesim_scenario::{Scenario, SeedRange};

use super::explore::{parse_range, ExploreArgs};
use super::shrink::shrink;
use super::{at_path, ensure_writable, prepare, print_seed, seed_exit_code, unwritable, Target};

/// `explore` without `--guided` or a sweep's flags: a guided search for a scenario with a
/// `[nemesis]` (its schedules are what the search mutates), a sweep of the seeds otherwise.
pub(crate) fn guided_or_sweep(
    engine: &Engine,
    target: &Target,
    args: &ExploreArgs,
    cancel: &Cancel,
) -> u8 {
    match prepare(engine, target, cancel) {
        Ok((scenario, opts)) if scenario.nemesis.is_some() => {
            search(engine, target, scenario, &opts, args, true)
        }
        Ok((scenario, opts)) => super::explore::sweep(engine, &scenario, &opts, args),
        Err(code) => code,
    }
}

/// `explore --guided`: search from root seed A for at most B - A simulations.
pub(crate) fn guided(engine: &Engine, target: &Target, args: &ExploreArgs, cancel: &Cancel) -> u8 {
    match prepare(engine, target, cancel) {
        Ok((scenario, opts)) => search(engine, target, scenario, &opts, args, false),
        Err(code) => code,
    }
}

/// The search of a prepared scenario. `by_default`: chosen without `--guided` (the progress
/// line says so, and how to sweep instead).
fn search(
    engine: &Engine,
    target: &Target,
    scenario: Scenario,
    opts: &RunOptions,
    args: &ExploreArgs,
    by_default: bool,
) -> u8 {
    if scenario.nemesis.is_none() {
        complain!(
            "error: {}: --guided mutates the random nemesis's schedules, and this scenario has \
             no [nemesis] section",
            target.scenario
        );
        return exit::BAD_INPUT;
    }
    let (root, end) = match parse_range(&args.seeds) {
        Ok(r) => r,
        Err(e) => {
            complain!("error: {e}");
            return exit::BAD_INPUT;
        }
    };
    let budget = u64::try_from(end - u128::from(root)).unwrap_or(u64::MAX);
    if budget > fencesim::run::MAX_SWEEP_SEEDS {
        complain!(
            "error: --seeds: a guided search of {budget} simulations; at most {} per search",
            fencesim::run::MAX_SWEEP_SEEDS
        );
        return exit::BAD_INPUT;
    }
    if let Err(e) = ensure_writable(&opts.out, &scenario.name) {
        return unwritable(&opts.out, &e);
    }
    // Where a counterexample's file goes: something else in its place would otherwise only
    // be found after the search.
    let guided_dir = opts.out.join(&scenario.name).join("guided");
    if guided_dir.exists() && !guided_dir.is_dir() {
        let e = std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!(
                "{} is in the way of a folder",
                fencesim_history::display_path(&guided_dir)
            ),
        );
        return unwritable(&opts.out, &e);
    }
    if by_default && !args.quiet {
        complain!(
            "{}: a guided search from root seed {root}, at most {budget} simulation{} (the \
             default for a scenario with a [nemesis]; --sweep runs each seed's own draw instead)",
            scenario.name,
            if budget == 1 { "" } else { "s" }
        );
    }
    let clock = fencesim::bench::Stopwatch::start();
    let search_opts = RunOptions {
        cancel: opts.cancel.clone(),
        ..RunOptions::in_memory()
    };
    let searched =
        fencesim::guided::search(engine, &scenario, root, budget, args.jobs, &search_opts);
    let outcome = match searched {
        Ok(o) => o,
        Err(e) => return unwritable(&opts.out, &e),
    };
    let seconds = clock.seconds();
    // Ctrl-C ends a search between generations: what it did so far is still written.
    let interrupted = opts.cancel.is_cancelled() && outcome.found.is_none();
    let mut code = if interrupted {
        exit::INTERRUPTED
    } else {
        exit::VALID
    };
    let mut report = None;
    let mut written_file = None;
    // A counterexample whose files cannot be written still gets its summary written (and
    // printed) before the error: what the search found is not lost.
    let mut failed: Option<std::io::Error> = None;
    if let Some(found) = &outcome.found {
        let suffix = format!("-guided-{}", outcome.simulations);
        let name = fencesim_scenario::derived_name(&scenario.name, &suffix);
        let file = guided_dir.join(format!("{name}.toml"));
        let mut written = found.scenario.clone();
        written.name = name;
        written.description = format!(
            "A counterexample found by `{} explore --guided` from root seed {root} of {}, at \
             simulation {}: {}, as scripted faults.\nThe scenario it was found in:\n{}",
            engine.program(),
            scenario.name,
            outcome.simulations,
            found.origin,
            scenario.description.trim_end()
        );
        written.seeds = SeedRange {
            start: found.seed,
            end: found.seed.saturating_add(1),
        };
        written_file = Some(fencesim_history::display_path(&file));
        match write_and_run(engine, &written, &file, found.seed, opts) {
            Ok((c, path)) => (code, report) = (c, path),
            Err(e) => failed = Some(e),
        }
    }
    say!(
        "{}: guided from root seed {root}: {} simulation{} in {} generation{}, {} schedule{} kept, {} features; {}",
        scenario.name,
        outcome.simulations,
        if outcome.simulations == 1 { "" } else { "s" },
        outcome.generations,
        if outcome.generations == 1 { "" } else { "s" },
        outcome.corpus,
        if outcome.corpus == 1 { "" } else { "s" },
        outcome.features,
        match &outcome.found {
            Some(found) => format!(
                "counterexample at simulation {} (seed {}, {})",
                outcome.simulations, found.seed, found.origin
            ),
            None if interrupted => format!(
                "interrupted after {} of {budget} simulations: no counterexample so far (the summary is partial)",
                outcome.simulations
            ),
            None if budget == 1 => "no counterexample in its 1 simulation".to_owned(),
            None => format!("no counterexample within {budget} simulations"),
        }
    );
    say!(
        "  {seconds:.1} s, {:.0} simulations/s",
        outcome.simulations as f64 / seconds.max(1e-9)
    );
    // What the search did, for a CI job to keep beside the counterexample's files.
    let summary = serde_json::json!({
        "scenario": scenario.name,
        "root_seed": root,
        "budget": budget,
        "simulations": outcome.simulations,
        "generations": outcome.generations,
        "corpus": outcome.corpus,
        "features": outcome.features,
        "counterexample": outcome.found.as_ref().map(|f| serde_json::json!({
            "file": written_file,
            "seed": f.seed,
            "origin": f.origin,
            // Each kind once, in the report's order.
            "violations": f.judged.report.violations.iter().fold(Vec::new(), |mut kinds, v| {
                if !kinds.contains(&v.kind.as_str()) {
                    kinds.push(v.kind.as_str());
                }
                kinds
            }),
        })),
        "seconds": seconds,
        "interrupted": interrupted,
    });
    let path = opts.out.join(&scenario.name).join("guided-summary.json");
    let json = serde_json::to_vec_pretty(&summary).unwrap_or_default();
    if let Err(e) = std::fs::write(&path, json) {
        return unwritable(&opts.out, &at_path(&path, &e));
    }
    say!("summary: {}", fencesim_history::display_path(&path));
    if let Some(e) = failed {
        return unwritable(&opts.out, &e);
    }
    if let (true, Some(report)) = (args.shrink, report) {
        shrink(engine, &report, &opts.out.join("shrunk"), None);
    }
    code
}

/// Write a counterexample as the scenario file `file` and run `seed` of it from the file, so
/// that its report and reproduce line are the file's: the run's exit code and report, or
/// `SIM_FAILED` without a report if the file does not parse back or does not reproduce.
///
/// # Errors
/// Writing the file or the run's report, with the path in the error.
fn write_and_run(
    engine: &Engine,
    written: &Scenario,
    file: &Path,
    seed: u64,
    opts: &RunOptions,
) -> std::io::Result<(u8, Option<PathBuf>)> {
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(file, fencesim_scenario::to_toml(written)))
        .map_err(|e| at_path(file, &e))?;
    let parsed = match engine.load_scenario(file) {
        Ok(s) => s,
        Err(e) => {
            complain!("error: the counterexample's file does not parse back: {e}");
            return Ok((exit::SIM_FAILED, None));
        }
    };
    // The file scripts the schedule and has no [nemesis]: `--swarm` has nothing to act on
    // there, and in the reproduce line it would be refused.
    let run_opts = RunOptions {
        scenario_arg: file.to_string_lossy().into_owned(),
        swarm: false,
        ..opts.clone()
    };
    let done = fencesim::run::run_seed(engine, &parsed, seed, &run_opts)
        .map_err(|e| at_path(&opts.out.join(&parsed.name), &e))?;
    print_seed(&done, true);
    let code = seed_exit_code(&done.report, true);
    if code == exit::VALID {
        complain!(
            "error: {} met its expectation when run from its file: the search's run did not \
             reproduce",
            fencesim_history::display_path(file)
        );
        return Ok((exit::SIM_FAILED, Some(done.report_path)));
    }
    Ok((code, Some(done.report_path)))
}
