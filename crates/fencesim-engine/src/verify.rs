//! `fencesim verify`: a scenario's bounded configuration searched breadth-first by the
//! `fencesim-verify` crate, with the design and resource the registry names, and its result
//! written where `fencesim run` writes a run's: a summary (`verify.json`) and, for a
//! counterexample, its history and steps.

use std::path::{Path, PathBuf};

use fencesim_history::ViolationKind;
use fencesim_scenario::Scenario;
pub use fencesim_verify::{Bounds, Counterexample, Ending, Outcome, Strategy};
use serde::Serialize;

use crate::bench::Stopwatch;
use crate::cancel::Cancel;
use crate::report::{Report, VerifyRun};
use crate::Engine;

/// A search and how long it took.
pub struct Verified {
    /// What it found.
    pub outcome: Outcome,
    /// How the design's states were explored.
    pub strategy: Strategy,
    /// Real time, s.
    pub seconds: f64,
    /// Worker threads it ran on.
    pub jobs: usize,
    /// A counterexample written as a scripted scenario, and what `fencesim run` makes of it.
    pub concrete: Option<Concrete>,
}

/// A counterexample as a scripted scenario ([`fencesim_verify::concretise`]), and whether
/// simulating it reproduces the violation.
#[derive(Clone, Debug)]
pub enum Concrete {
    /// Written, and simulated.
    Written {
        /// The scenario.
        scenario: Box<Scenario>,
        /// The violations its seed shows, in the checker's order.
        found: Vec<ViolationKind>,
        /// Whether they include the counterexample's.
        reproduced: bool,
        /// Its seed (the scenario's range is this one seed): the first of the
        /// [`SEEDS_TRIED`] that reproduced it, or 0.
        seed: u64,
    },
    /// Not written, and why.
    Unwritable(String),
}

impl Concrete {
    /// `cx` written as a scenario from `original`, and simulated.
    pub fn of(engine: &Engine, original: &Scenario, cx: &Counterexample) -> Self {
        let kind = cx.violation.kind;
        let written =
            fencesim_verify::concretise::scenario(original, &cx.timing, kind, cx.steps.len())
                .map_err(|e| e.to_string())
                .and_then(|s| engine.revalidate(&s).map_err(|e| e.to_string()));
        let mut scenario = match written {
            Ok(s) => s,
            Err(why) => return Concrete::Unwritable(why),
        };
        // Every moment is fixed; only what happens at one instant (two clients starting at 0)
        // is ordered by the seed, and the checker ranks Redlock's values by when their
        // acquires were invoked. The first seed that shows the violation is the scenario's.
        let (seed, found) = (0..SEEDS_TRIED)
            .map(|seed| (seed, violations(engine, &scenario, seed)))
            .find(|(_, found)| found.contains(&kind))
            .unwrap_or_else(|| (0, violations(engine, &scenario, 0)));
        scenario.seeds = fencesim_scenario::SeedRange {
            start: seed,
            end: seed + 1,
        };
        Concrete::Written {
            reproduced: found.contains(&kind),
            scenario: Box::new(scenario),
            found,
            seed,
        }
    }
}

/// Seeds the scenario writer tries before it says a counterexample is not reproduced.
pub const SEEDS_TRIED: u64 = 8;

/// The violation kinds `scenario` shows on `seed`, in the checker's order, once each.
fn violations(engine: &Engine, scenario: &Scenario, seed: u64) -> Vec<ViolationKind> {
    let outcome = engine.simulate(scenario, seed);
    let mut found: Vec<ViolationKind> = Vec::new();
    for v in fencesim_checker::check(&outcome.history).violations {
        if !found.contains(&v.kind) {
            found.push(v.kind);
        }
    }
    found
}

impl Verified {
    /// States explored per second of real time.
    pub fn states_per_second(&self) -> f64 {
        self.outcome.states as f64 / self.seconds.max(1e-9)
    }
}

/// Search `scenario` within `bounds` on `jobs` threads (the outcome is the same for any
/// number: only the time differs), stopping early once `cancel` is cancelled.
///
/// # Errors
/// The scenario's design or resource is not registered.
pub fn verify(
    engine: &Engine,
    scenario: &Scenario,
    bounds: &Bounds,
    jobs: usize,
    cancel: &Cancel,
) -> Result<Verified, String> {
    let kind = &scenario.lock_service.kind;
    let mode = &scenario.resource.mode;
    let Some((design, resource)) = engine.registry().verify(kind, mode) else {
        return Err(format!(
            "no design {kind:?} with resource {mode:?} is registered"
        ));
    };
    let _running = cancel.running();
    let clock = Stopwatch::start();
    let stop = || cancel.is_cancelled();
    let outcome = design.verify(scenario, resource, bounds, jobs, &stop);
    let seconds = clock.seconds();
    let concrete = outcome
        .counterexample
        .as_ref()
        .map(|cx| Concrete::of(engine, scenario, cx));
    Ok(Verified {
        outcome,
        strategy: design.strategy(),
        seconds,
        jobs: jobs.max(1),
        concrete,
    })
}

/// `verify.json`: what a search found, for CI and scripts.
#[derive(Serialize)]
struct Summary<'a> {
    scenario: &'a str,
    design: &'a str,
    strategy: Strategy,
    ending: Ending,
    states: u64,
    transitions: u64,
    depth: u32,
    seconds: f64,
    states_per_second: f64,
    jobs: usize,
    bounds: &'a Bounds,
    checked: Vec<&'static str>,
    not_checked: Vec<(&'static str, &'static str)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    violation: Option<&'a fencesim_checker::Violation>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    steps: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    as_scenario: Option<AsScenario>,
}

/// `verify.json`'s account of the counterexample written as a scenario.
#[derive(Serialize)]
struct AsScenario {
    /// `scenario.toml`, beside verify.json; absent when it could not be written.
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<&'static str>,
    /// Whether `fencesim run` on it shows the counterexample's violation on its seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    reproduced: Option<bool>,
    /// Its seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    /// What its seed showed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    found: Vec<&'static str>,
    /// Why it was not written.
    #[serde(skip_serializing_if = "Option::is_none")]
    unwritable: Option<String>,
}

impl AsScenario {
    fn of(concrete: &Concrete) -> Self {
        match concrete {
            Concrete::Written {
                found,
                reproduced,
                seed,
                ..
            } => AsScenario {
                file: Some(SCENARIO_FILE),
                reproduced: Some(*reproduced),
                seed: Some(*seed),
                found: found.iter().map(|k| k.as_str()).collect(),
                unwritable: None,
            },
            Concrete::Unwritable(why) => AsScenario {
                file: None,
                reproduced: None,
                seed: None,
                found: Vec::new(),
                unwritable: Some(why.clone()),
            },
        }
    }
}

/// The counterexample as a scripted scenario, beside verify.json.
pub const SCENARIO_FILE: &str = "scenario.toml";

/// Write `verified`'s summary to `dir/verify.json` and, for a counterexample, its steps
/// (`dir/steps.txt`) and, as any run's, its history, report, readable history, summary and
/// timeline (`history.jsonl`, `report.json` with `mode: "verify"`, `history.txt`,
/// `summary.md`, `timeline.html`); `reproduce` is the command that searches again. The files
/// written.
///
/// # Errors
/// A file could not be written.
pub fn write(
    engine: &Engine,
    dir: &Path,
    scenario: &Scenario,
    bounds: &Bounds,
    verified: &Verified,
    reproduce: &str,
) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    // A counterexample of an earlier search in the same folder must not stand beside this
    // one's summary.
    for file in COUNTEREXAMPLE_FILES {
        match std::fs::remove_file(dir.join(file)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(std::io::Error::new(e.kind(), format!("{file}: {e}")));
            }
            _ => {}
        }
    }
    let outcome = &verified.outcome;
    let cx = outcome.counterexample.as_ref();
    let summary = Summary {
        scenario: &scenario.name,
        design: &scenario.lock_service.kind,
        strategy: verified.strategy,
        ending: outcome.ending,
        states: outcome.states,
        transitions: outcome.transitions,
        depth: outcome.depth,
        seconds: verified.seconds,
        states_per_second: verified.states_per_second(),
        jobs: verified.jobs,
        bounds,
        checked: fencesim_verify::CHECKED
            .iter()
            .map(|k| k.as_str())
            .collect(),
        not_checked: fencesim_verify::NOT_CHECKED
            .iter()
            .map(|(k, why)| (k.as_str(), *why))
            .collect(),
        violation: cx.map(|c| &c.violation),
        steps: cx
            .map(|c| c.steps.iter().map(String::as_str).collect())
            .unwrap_or_default(),
        as_scenario: verified.concrete.as_ref().map(AsScenario::of),
    };
    let mut written = Vec::new();
    let path = dir.join("verify.json");
    let json = serde_json::to_string_pretty(&summary).map_err(std::io::Error::other)?;
    write_named(&path, json + "\n")?;
    written.push(path);
    if let Some(cx) = cx {
        let path = dir.join("steps.txt");
        let steps: String = cx
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{:>3}. {s}\n", i + 1))
            .collect();
        write_named(&path, steps)?;
        written.push(path);
        if let Some(Concrete::Written { scenario, .. }) = &verified.concrete {
            let path = dir.join(SCENARIO_FILE);
            write_named(&path, fencesim_scenario::to_toml(scenario))?;
            written.push(path);
        }
        let report = counterexample_report(scenario, verified.strategy, cx, reproduce);
        crate::readable::write_unseeded(engine, dir, &report, &cx.history)?;
        written.extend(
            [
                "history.jsonl",
                "report.json",
                "history.txt",
                "summary.md",
                "timeline.html",
            ]
            .iter()
            .map(|f| dir.join(f))
            .filter(|p| p.exists()),
        );
    }
    Ok(written)
}

/// Write `text` to `path`; an error names the file (`std::fs`'s leave it out).
fn write_named(path: &Path, text: String) -> std::io::Result<()> {
    std::fs::write(path, text).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("{}: {e}", fencesim_history::display_path(path)),
        )
    })
}

/// The files a counterexample adds beside verify.json.
const COUNTEREXAMPLE_FILES: [&str; 7] = [
    "steps.txt",
    SCENARIO_FILE,
    "history.jsonl",
    "report.json",
    "history.txt",
    "summary.md",
    "timeline.html",
];

/// A counterexample's report, as a run's: its history judged by the checker, as `fencesim
/// check` judges history.jsonl. The history's header says it is untimed (each record's time
/// is its index), so the checker leaves out the timing properties and says why.
fn counterexample_report(
    scenario: &Scenario,
    strategy: Strategy,
    cx: &Counterexample,
    reproduce: &str,
) -> Report {
    let result = fencesim_checker::check(&cx.history);
    // The scenario's expectation as far as the search judges it: a timing property it lists
    // (mutual-exclusion-client, say) is not checked in an untimed schedule, so not expected.
    let mut judged = scenario.clone();
    let checked = |k: &ViolationKind| fencesim_verify::CHECKED.contains(k);
    judged.expect.violations.retain(checked);
    judged.expect.absent.retain(checked);
    // The description tells the scenario's own timed story, not the schedule found.
    judged.description = format!(
        "The scenario, as written for the simulator (the schedule found is in the steps, and \
         has no true time): {}",
        scenario.description.trim()
    );
    let scenario = &judged;
    Report {
        reproduce: reproduce.to_owned(),
        verify: Some(VerifyRun {
            strategy,
            steps: cx.steps.clone(),
        }),
        ..Report::judged(scenario, 0, &cx.history, result, None)
    }
}

/// The command that searches `scenario_arg` (the path or name the user gave) again within
/// `bounds`: a counterexample's `reproduce` line (breadth-first and deterministic, it finds
/// the same schedule).
pub fn reproduce_command(engine: &Engine, scenario_arg: &str, bounds: &Bounds) -> String {
    let flags: String = bounds
        .flags()
        .iter()
        .map(|(flag, value)| format!(" --{flag} {value}"))
        .collect();
    format!(
        "{} verify {}{flags}",
        fencesim_history::shell_word(engine.program()),
        crate::run::argument_word(scenario_arg),
    )
}
