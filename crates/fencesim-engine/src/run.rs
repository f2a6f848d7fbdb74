//! One seed end to end: simulate, check, write history.jsonl and report.json.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use fencesim_history::write_jsonl;
use fencesim_scenario::Scenario;
use fencesim_sim::{FailureKind, SimFailure};

use crate::readable;
use crate::report::{self, Report, RunVerdict};
use crate::Engine;

/// What the caller asked for.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Output root: files go to `out/<scenario name>/<seed>/`.
    pub out: PathBuf,
    /// How the user named the scenario (a path, or a bundled name), for the reproduce line.
    pub scenario_arg: String,
    /// Simulate twice and require byte-identical histories.
    pub check_determinism: bool,
    /// Swarm mode was forced on (so the reproduce line says `--swarm`).
    pub swarm: bool,
    /// Stop early when cancelled (Ctrl-C): a sweep finishes the seeds in progress and claims
    /// no more.
    pub cancel: crate::cancel::Cancel,
}

impl RunOptions {
    /// Options for seeds whose files are not written (sweeps that only count, benchmarks,
    /// tests): no output root, no reproduce argument, no determinism rerun, no forced swarm.
    pub fn in_memory() -> Self {
        RunOptions {
            out: PathBuf::new(),
            scenario_arg: String::new(),
            check_determinism: false,
            swarm: false,
            cancel: crate::cancel::Cancel::new(),
        }
    }
}

/// The result of one seed.
#[derive(Clone, Debug)]
pub struct SeedRun {
    /// The report, as written.
    pub report: Report,
    /// Where report.json is.
    pub report_path: PathBuf,
}

impl SeedRun {
    /// The one-line verdict printed by the CLI.
    pub fn verdict_line(&self) -> String {
        let r = &self.report;
        let what = match r.verdict {
            RunVerdict::Valid => "valid".to_owned(),
            RunVerdict::Unknown if r.violations.is_empty() => {
                format!("UNKNOWN ({})", r.unknown.join("; "))
            }
            RunVerdict::Invalid | RunVerdict::Unknown => {
                let mut kinds: Vec<_> = r.violations.iter().map(|v| v.kind.as_str()).collect();
                kinds.dedup();
                format!(
                    "{} ({} violation{}: {})",
                    verdict_word(r.verdict),
                    r.violations.len(),
                    plural(r.violations.len()),
                    kinds.join(", ")
                )
            }
            RunVerdict::SimFailed => {
                let f = r
                    .failure
                    .as_ref()
                    .map_or(String::new(), |f| f.message.clone());
                format!("simulation failed: {f}")
            }
        };
        let exposure = &r.unsafe_exposure;
        if exposure.unmeasured {
            return format!(
                "{} seed {}: {what}; no lease events, so writes after lease end are not measured",
                r.scenario.name, r.seed
            );
        }
        format!(
            "{} seed {}: {what}; {} write{} after lease end ({} accepted, {} rejected)",
            r.scenario.name,
            r.seed,
            exposure.writes_after_lease_end,
            plural(exposure.writes_after_lease_end as usize),
            exposure.accepted,
            exposure.rejected
        )
    }
}

impl SeedRun {
    /// The verdict line, then each violation's explanation and causal chain, each unknown
    /// reason, and (if `with_expectation`) the expectation, one per line: what a failing test
    /// should print.
    pub fn explain(&self, with_expectation: bool) -> String {
        let r = &self.report;
        let mut lines = vec![self.verdict_line()];
        for v in &r.violations {
            lines.push(format!(
                "  {}: {} [witnesses {:?}]",
                v.kind, v.explanation, v.witnesses
            ));
            if !v.chain.is_empty() {
                lines.push(format!("    chain: {}", v.chain.join(" -> ")));
            }
        }
        lines.extend(r.unknown.iter().map(|u| format!("  unknown: {u}")));
        if !with_expectation {
            return lines.join("\n");
        }
        let mut wanted: Vec<&str> = r
            .expectation
            .expected
            .violations
            .iter()
            .map(|k| k.as_str())
            .collect();
        if wanted.is_empty() {
            wanted.push("no violation");
        }
        let verdict = match r.expectation.expected.verdict {
            fencesim_scenario::ExpectedVerdict::Valid => "valid",
            fencesim_scenario::ExpectedVerdict::Invalid => "invalid",
        };
        lines.push(format!(
            "expectation {}: {verdict}, with {}",
            if r.expectation.met { "met" } else { "NOT met" },
            wanted.join(", ")
        ));
        lines.join("\n")
    }
}

fn verdict_word(v: RunVerdict) -> &'static str {
    match v {
        RunVerdict::Valid => "valid",
        RunVerdict::Invalid => "INVALID",
        RunVerdict::Unknown => "UNKNOWN",
        RunVerdict::SimFailed => "SIMULATION FAILED",
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// One seed simulated and checked, its history not yet serialized: what a sweep makes of
/// every seed. Most seeds of a sweep are only counted, so their histories are never turned
/// into bytes; [`Judged::serialize`] does that for the ones that are kept or written.
#[derive(Clone, Debug)]
pub struct Judged {
    /// The report, except `history.sha256`, which is empty until [`Judged::serialize`].
    pub report: Report,
    /// The history.
    pub records: fencesim_history::History,
}

impl Judged {
    /// Serialize the history as JSON Lines and put its SHA-256 in the report: what writing,
    /// replaying and comparing need. Errors: only serializing can fail.
    pub fn serialize(self) -> std::io::Result<Evaluated> {
        let mut bytes = Vec::new();
        write_jsonl(&self.records, &mut bytes)?;
        let mut report = self.report;
        report.history.sha256 = report::sha256_hex(&bytes);
        Ok(Evaluated {
            report,
            history: bytes,
            records: self.records,
        })
    }
}

impl Judged {
    /// Write the seed's files as [`write`] does, serializing history.jsonl straight into its
    /// file and hashing it on the way: the history is never held as bytes as well as records
    /// (a run at its `max_records` would need a gigabyte more for them). Only a history small
    /// enough for timeline.html is serialized to memory again, for the page.
    ///
    /// # Errors
    /// The folder or a file cannot be written.
    pub fn write(self, engine: &Engine, out: &Path) -> std::io::Result<SeedRun> {
        let dir = seed_dir(out, &self.report.scenario, self.report.seed);
        fs::create_dir_all(&dir)?;
        let file = fs::File::create(dir.join("history.jsonl"))?;
        let mut hashing = report::HashingWriter::new(std::io::BufWriter::new(file));
        write_jsonl(&self.records, &mut hashing)?;
        let (sha256, _) = hashing.finish()?;
        let mut report = self.report;
        report.history.sha256 = sha256;
        let timeline_bytes = if self.records.entries.len() <= readable::TIMELINE_MAX_RECORDS {
            let mut bytes = Vec::new();
            write_jsonl(&self.records, &mut bytes)?;
            Some(bytes)
        } else {
            None
        };
        write_after_history(
            engine,
            &dir,
            report,
            &self.records,
            timeline_bytes.as_deref(),
        )
    }
}

/// One seed simulated, checked and serialized, not yet written.
#[derive(Clone, Debug)]
pub struct Evaluated {
    /// The report (its paths are relative to the seed's directory).
    pub report: Report,
    /// history.jsonl's bytes.
    pub history: Vec<u8>,
    /// The same history, parsed (for history.txt).
    pub records: fencesim_history::History,
}

/// Simulate `scenario` with `seed` and check it, serializing the history. Everything,
/// including a failed simulation, ends up in the report; only serializing can fail.
pub fn evaluate(
    engine: &Engine,
    scenario: &Scenario,
    seed: u64,
    opts: &RunOptions,
) -> std::io::Result<Evaluated> {
    judge(engine, scenario, seed, opts).serialize()
}

/// Simulate `scenario` with `seed` and check it; the history stays as records. Everything,
/// including a failed simulation, ends up in the report.
pub fn judge(engine: &Engine, scenario: &Scenario, seed: u64, opts: &RunOptions) -> Judged {
    let outcome = engine.simulate(scenario, seed);
    let mut failure = outcome.failure;
    if opts.check_determinism && failure.is_none() {
        failure = determinism_failure(engine, scenario, seed, &outcome.history);
    }
    let result = fencesim_checker::check(&outcome.history);
    let report = Report {
        network: outcome.net_stats,
        nemesis: outcome.nemesis,
        simulated_ms: outcome
            .history
            .entries
            .last()
            .map_or(0, |e| e.at().time_ns / 1_000_000),
        reproduce: reproduce_command(engine, opts, seed),
        ..Report::judged(scenario, seed, &outcome.history, result, failure)
    };
    Judged {
        report,
        records: outcome.history,
    }
}

/// The command that runs `seed` of the scenario `opts` names again, with its `--swarm` and
/// `--check-determinism`: the `reproduce:` line of a run, a shrink and report.json. Each word
/// that came from the user is quoted for a shell ([`fencesim_history::shell_word`]): a path
/// with a space, a `$(...)` or a newline in it is one word of the line, run as it was.
pub fn reproduce_command(engine: &Engine, opts: &RunOptions, seed: u64) -> String {
    format!(
        "{} run {} --seed {seed}{}{}",
        fencesim_history::shell_word(engine.program()),
        argument_word(&opts.scenario_arg),
        if opts.swarm { " --swarm" } else { "" },
        if opts.check_determinism {
            " --check-determinism"
        } else {
            ""
        }
    )
}

/// `arg`, a path or a name the user gave, as one word of a command fencesim prints to be run
/// again: quoted for a shell ([`fencesim_history::shell_word`]), and, when it begins with `-`,
/// written `./-...` (the same file) so that the command's own parser cannot take it for an
/// option.
pub fn argument_word(arg: &str) -> String {
    match arg.starts_with('-') {
        true => fencesim_history::shell_word(&format!("./{arg}")).into_owned(),
        false => fencesim_history::shell_word(arg).into_owned(),
    }
}

/// Write history.jsonl, report.json and the readable files (history.txt, summary.md,
/// timeline.html) under `out/<name>/<seed>/`.
pub fn write(engine: &Engine, out: &Path, done: Evaluated) -> std::io::Result<SeedRun> {
    let dir = seed_dir(out, &done.report.scenario, done.report.seed);
    fs::create_dir_all(&dir)?;
    // The history and the report first: they are what replay, shrink and check need, so they
    // are on disk whatever happens to the readable files after them.
    fs::write(dir.join("history.jsonl"), &done.history)?;
    let small = done.records.entries.len() <= readable::TIMELINE_MAX_RECORDS;
    let bytes = small.then_some(done.history.as_slice());
    write_after_history(engine, &dir, done.report, &done.records, bytes)
}

/// The files after history.jsonl: report.json, then history.txt (line by line), summary.md and,
/// given the history's bytes (a history small enough for the page), timeline.html.
fn write_after_history(
    engine: &Engine,
    dir: &Path,
    report: Report,
    records: &fencesim_history::History,
    timeline_bytes: Option<&[u8]>,
) -> std::io::Result<SeedRun> {
    let report_path = dir.join("report.json");
    let json = serde_json::to_vec_pretty(&report).map_err(std::io::Error::other)?;
    fs::write(&report_path, json)?;
    let mut txt = std::io::BufWriter::new(fs::File::create(dir.join("history.txt"))?);
    readable::write_history_txt(&mut txt, records, &report)?;
    drop(txt);
    fs::write(
        dir.join("summary.md"),
        readable::summary_md(engine, &report, dir),
    )?;
    if let Some(bytes) = timeline_bytes {
        fs::write(
            dir.join("timeline.html"),
            readable::timeline_html(&report, bytes)?,
        )?;
    }
    Ok(SeedRun {
        report,
        report_path,
    })
}

/// Simulate, check and write one seed. I/O errors (an unwritable output directory) are
/// returned; everything else is in the report.
pub fn run_seed(
    engine: &Engine,
    scenario: &Scenario,
    seed: u64,
    opts: &RunOptions,
) -> std::io::Result<SeedRun> {
    judge(engine, scenario, seed, opts).write(engine, &opts.out)
}

/// Simulate and check every seed of `seeds` on `jobs` threads (each seed still gets its own
/// simulation thread) and pass each result to `handle` on the worker that made it (so
/// histories need not pile up in memory; `handle` serializes the ones it keeps). Returns `handle`'s results in seed order, or the first error.
pub fn sweep<T: Send>(
    engine: &Engine,
    scenario: &Scenario,
    seeds: &[u64],
    jobs: usize,
    opts: &RunOptions,
    handle: impl Fn(Judged) -> std::io::Result<T> + Sync,
) -> std::io::Result<Vec<T>> {
    sweep_until(engine, scenario, seeds, jobs, opts, handle, |_| false)
}

/// [`sweep`], stopping at the first seed (in `seeds` order) whose result `stop` accepts.
///
/// Workers claim seeds in order, so when one finds a stopping seed every earlier seed has been
/// claimed; they finish, no new seed is claimed, and the results are cut after the first
/// stopping seed. The returned list is therefore the same whatever `jobs` is: every seed up
/// to and including the first stopping one, or all of them.
pub fn sweep_until<T: Send>(
    engine: &Engine,
    scenario: &Scenario,
    seeds: &[u64],
    jobs: usize,
    opts: &RunOptions,
    handle: impl Fn(Judged) -> std::io::Result<T> + Sync,
    stop: impl Fn(&T) -> bool + Sync,
) -> std::io::Result<Vec<T>> {
    let fold = |mut all: Vec<T>, t| {
        all.push(t);
        all
    };
    sweep_fold(
        engine,
        scenario,
        seeds,
        jobs,
        opts,
        handle,
        stop,
        Vec::new(),
        fold,
    )
}

/// [`sweep_until`], folding each result into `acc` in seed order as it comes instead of
/// keeping them all: a sweep's memory then stays flat however many seeds it runs (only
/// results that finished ahead of an earlier seed wait, a few per worker). `fold` sees the
/// same results, in the same order, whatever `jobs` is. Returns the accumulator, or the first
/// error in seed order.
#[allow(clippy::too_many_arguments)]
pub fn sweep_fold<T: Send, A>(
    engine: &Engine,
    scenario: &Scenario,
    seeds: &[u64],
    jobs: usize,
    opts: &RunOptions,
    handle: impl Fn(Judged) -> std::io::Result<T> + Sync,
    stop: impl Fn(&T) -> bool + Sync,
    init: A,
    fold: impl FnMut(A, T) -> A,
) -> std::io::Result<A> {
    let run = |i: usize| handle(judge(engine, scenario, seeds[i], opts));
    fold_in_order(seeds.len(), jobs, &opts.cancel, run, stop, init, fold)
}

/// Simulate and check each of `runs` (a scenario and a seed each: the candidates of one
/// generation of guided exploration) on `jobs` threads, handling each result on its worker,
/// and return `handle`'s results in `runs` order up to and including the first that `stop`
/// accepts: the same list whatever `jobs` is, as [`sweep_until`]'s.
pub fn sweep_runs<T: Send>(
    engine: &Engine,
    runs: &[(&Scenario, u64)],
    jobs: usize,
    opts: &RunOptions,
    handle: impl Fn(Judged) -> std::io::Result<T> + Sync,
    stop: impl Fn(&T) -> bool + Sync,
) -> std::io::Result<Vec<T>> {
    let run = |i: usize| handle(judge(engine, runs[i].0, runs[i].1, opts));
    let fold = |mut all: Vec<T>, t| {
        all.push(t);
        all
    };
    fold_in_order(runs.len(), jobs, &opts.cancel, run, stop, Vec::new(), fold)
}

/// Run items `0..count` on `jobs` worker threads (`run(i)` on whichever claims `i`), folding
/// the results into `init` in item order, up to and including the first that `stop` accepts
/// or the first error.
#[allow(clippy::too_many_arguments)]
fn fold_in_order<T: Send, A>(
    count: usize,
    jobs: usize,
    cancel: &crate::cancel::Cancel,
    run: impl Fn(usize) -> std::io::Result<T> + Sync,
    stop: impl Fn(&T) -> bool + Sync,
    init: A,
    mut fold: impl FnMut(A, T) -> A,
) -> std::io::Result<A> {
    // A Ctrl-C now lets the workers finish the items in progress.
    let _running = cancel.running();
    // Taken out for each fold and put back: `fold` owns the accumulator while it runs.
    let mut acc = Some(init);
    let next = AtomicUsize::new(0);
    let stopped = AtomicBool::new(false);
    let (sender, finished) = std::sync::mpsc::channel::<(usize, std::io::Result<T>)>();
    let mut outcome: std::io::Result<()> = Ok(());
    // Worker threads sit outside any simulation; each only calls into `judge`.
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            let sender = sender.clone();
            let (next, stopped, run, stop) = (&next, &stopped, &run, &stop);
            scope.spawn(move || loop {
                if stopped.load(Ordering::Relaxed) || cancel.is_cancelled() {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    break;
                }
                let result = run(i);
                if result.as_ref().map_or(true, stop) {
                    stopped.store(true, Ordering::Relaxed);
                }
                if sender.send((i, result)).is_err() {
                    break;
                }
            });
        }
        drop(sender);
        // Results that finished ahead of an earlier seed wait here for their turn.
        let mut waiting: BTreeMap<usize, std::io::Result<T>> = BTreeMap::new();
        let mut turn = 0;
        let mut done = false;
        for (i, result) in finished {
            if done {
                continue;
            }
            waiting.insert(i, result);
            while let Some(result) = waiting.remove(&turn) {
                turn += 1;
                match result {
                    Ok(t) => {
                        let last = stop(&t);
                        acc = acc.take().map(|a| fold(a, t));
                        done = last;
                    }
                    Err(e) => {
                        outcome = Err(e);
                        done = true;
                    }
                }
                if done {
                    break;
                }
            }
        }
    });
    outcome.map(|()| acc.expect("the accumulator is put back after every fold"))
}

/// The most seeds one sweep takes (`explore`, `check_scenario`); split larger ones into
/// shards. Each seed's outcome is kept until the sweep ends.
pub const MAX_SWEEP_SEEDS: u64 = 100_000_000;

/// Worker threads to use by default: one per core.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Run the seed a second time in this process and compare the histories record by record.
fn determinism_failure(
    engine: &Engine,
    scenario: &Scenario,
    seed: u64,
    first: &fencesim_history::History,
) -> Option<SimFailure> {
    let again = engine.simulate(scenario, seed);
    let line = first_different_line(first, &again.history)?;
    Some(SimFailure {
        kind: FailureKind::Nondeterministic,
        message: format!(
            "nondeterminism: two runs of seed {seed} differ first at history line {line}"
        ),
    })
}

/// The first line of history.jsonl at which `a` and `b` would differ (the header is line 1,
/// record `i` is line `i + 2`), or `None` if they are the same.
fn first_different_line(
    a: &fencesim_history::History,
    b: &fencesim_history::History,
) -> Option<usize> {
    if a == b {
        return None;
    }
    if a.header != b.header {
        return Some(1);
    }
    let (a, b) = (&a.entries, &b.entries);
    let common = a.iter().zip(b).position(|(x, y)| x != y);
    Some(common.unwrap_or(a.len().min(b.len())) + 2)
}

/// `out/<name>/<seed>` for a scenario and seed.
pub fn seed_dir(out: &Path, scenario: &Scenario, seed: u64) -> PathBuf {
    out.join(&scenario.name).join(seed.to_string())
}

#[cfg(test)]
mod tests {
    use super::first_different_line;
    use crate::bench::synthetic::sequential_history;

    #[test]
    fn a_fold_sees_the_seeds_in_order_up_to_the_first_stop_whatever_the_jobs() {
        let engine = crate::Engine::built_in();
        let scenario = engine.load_named("pause-fenced").expect("bundled");
        let seeds: Vec<u64> = (0..12).collect();
        let folded = |jobs| {
            let handle = |done: super::Judged| Ok(done.report.seed);
            let push = |mut all: Vec<u64>, seed| {
                all.push(seed);
                all
            };
            let opts = super::RunOptions::in_memory();
            super::sweep_fold(
                &engine,
                &scenario,
                &seeds,
                jobs,
                &opts,
                handle,
                |s| *s == 7,
                Vec::new(),
                push,
            )
            .expect("no error")
        };
        assert_eq!(folded(1), (0..=7).collect::<Vec<u64>>());
        assert_eq!(folded(3), (0..=7).collect::<Vec<u64>>());
    }

    #[test]
    fn the_first_different_line_counts_the_header_as_line_one() {
        let a = sequential_history(3);
        assert_eq!(first_different_line(&a, &a.clone()), None);
        let mut b = a.clone();
        b.header.seed = 9;
        assert_eq!(first_different_line(&a, &b), Some(1));
        let mut c = a.clone();
        c.entries[4] = c.entries[5].clone();
        assert_eq!(first_different_line(&a, &c), Some(6));
        let mut shorter = a.clone();
        shorter.entries.truncate(30);
        assert_eq!(first_different_line(&a, &shorter), Some(32));
    }
}
