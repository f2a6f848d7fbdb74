//! fencesim: deterministic simulation and verification of lease-based locks with fencing tokens.
//!
//! This facade wires the crates together: a [`Scenario`] and a seed go to the simulator
//! (`fencesim-sim`, on madsim), the recorded history to the checker (`fencesim-checker`), and
//! the result into a report on disk ([`report`]). The `fencesim` binary is a thin CLI over it.
#![deny(missing_docs)]

// `fencesim::...` paths inside the crate too: the CLI's commands are written as the binary's were.
extern crate self as fencesim;

pub mod bench;
pub mod bundled;
pub mod cancel;
pub mod cli;
pub mod expectation;
pub mod explore;
pub mod guided;
pub mod live;
pub mod mutation_table;
pub mod readable;
pub mod registry;
pub mod report;
pub mod run;
pub mod safe_knobs;
pub mod shard_env;
pub mod shrink;

/// The design API a lock design of your own implements (`fencesim-design`).
pub use fencesim_design as design;
/// The scenario format (`fencesim-scenario`).
pub use fencesim_scenario as scenario;
/// How the simulator runs a design or a resource: every [`design::Design`] is a
/// [`SimDesign`] and every [`design::ResourceDesign`] a [`SimResource`]; register yours with
/// [`registry::Registry::with_design`] or [`registry::Registry::with_resource`].
pub use fencesim_sim::{SimDesign, SimResource};

pub use fencesim_checker::{check, CheckResult, Verdict, Violation};
pub use fencesim_history::{History, ViolationKind};
pub use fencesim_scenario::{Scenario, ScenarioError};
pub use fencesim_sim::{FailureKind, RunOutcome, SimFailure};

/// Read and validate a scenario file, refusing expectations this checker cannot decide.
pub fn load_scenario(path: &std::path::Path) -> Result<Scenario, ScenarioError> {
    fencesim_scenario::load(
        path,
        Some(fencesim_checker::CHECKED_KINDS),
        registry::active(),
    )
}

/// The command a user types to run fencesim: `fencesim`, or the name of a user's own binary
/// that runs [`cli::main`] with its designs installed (`zookeeper-lock`), so that the
/// `reproduce:` lines and reports name a command that knows the scenario's design.
pub fn program() -> &'static str {
    PROGRAM.get().map_or("fencesim", String::as_str)
}

/// Set once by [`cli::main`] from the command line's first argument.
static PROGRAM: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Name the running command after `argv0`'s file name (without an extension), for
/// [`program`]. The first call wins.
pub(crate) fn set_program(argv0: &str) {
    let name = std::path::Path::new(argv0)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned());
    if let Some(name) = name.filter(|n| !n.is_empty()) {
        let _ = PROGRAM.set(name);
    }
}

/// A scenario given as a file path, or else as the name of a bundled scenario (`pause-fenced`),
/// as the CLI and [`check_scenario`] take it. A path that is a file wins over a bundled name.
pub fn load_named(arg: &str) -> Result<Scenario, ScenarioError> {
    let path = std::path::Path::new(arg);
    match (path.is_file(), bundled::find(arg)) {
        (false, Some((file, text))) => parse_scenario(text, &format!("bundled:{file}")),
        (false, None) if !path.exists() => Err(ScenarioError::Io {
            file: arg.to_owned(),
            message: match bundled::nearest(arg) {
                Some(near) => format!(
                    "no such file, and no bundled scenario of that name (did you mean \
                     {near}? `{} list` shows them all)",
                    program()
                ),
                None => format!(
                    "no such file, and no bundled scenario of that name (`{} list` shows them \
                     all)",
                    program()
                ),
            },
        }),
        _ => load_scenario(path),
    }
}

/// Validate scenario TOML `text` (`file` names it in errors), as [`load_scenario`] does.
pub fn parse_scenario(text: &str, file: &str) -> Result<Scenario, ScenarioError> {
    fencesim_scenario::parse(
        text,
        file,
        Some(fencesim_checker::CHECKED_KINDS),
        registry::active(),
    )
}

/// `scenario` validated again, as the file `to_toml` writes of it: for tests and tools that
/// edit a parsed scenario (a resource's `mode`, a knob), so that the edit is checked and the
/// design's shape follows it.
///
/// # Errors
/// The edited scenario is not valid (a located error in the scenario as `to_toml` writes it).
pub fn revalidate(scenario: &Scenario) -> Result<Scenario, ScenarioError> {
    let file = format!("{} (edited)", scenario.name);
    parse_scenario(&fencesim_scenario::to_toml(scenario), &file)
}

/// `scenario` with its design's knob `name` (`[lock_service]`) set to `value`, validated again
/// as if the file had said so: the knob must be one the design takes, and the design's shape
/// (its nodes, its token order) follows the new value. For tests and tools that vary one knob
/// of a bundled scenario.
///
/// # Errors
/// The design has no such knob, or refuses the value (a located error in the scenario as
/// `to_toml` writes it).
pub fn with_knob(
    scenario: &Scenario,
    name: &str,
    value: toml::Value,
) -> Result<Scenario, ScenarioError> {
    let mut edited = scenario.clone();
    edited.lock_service.knobs.insert(name.to_owned(), value);
    revalidate(&edited)
}

/// `scenario` with its design's client knob `name` (`[[clients]]`, such as `reclaim`) set to
/// `value` on every client, validated again as [`with_knob`] does.
///
/// # Errors
/// The design's clients have no such knob, or refuse the value for some client.
pub fn with_client_knob(
    scenario: &Scenario,
    name: &str,
    value: toml::Value,
) -> Result<Scenario, ScenarioError> {
    let mut edited = scenario.clone();
    for client in &mut edited.clients {
        client.knobs.insert(name.to_owned(), value.clone());
    }
    revalidate(&edited)
}

/// Exit codes of the CLI, fixed by the design (DESIGN.md, "CLI contract").
pub mod exit {
    /// Valid (under `--expect`: the expectation was met).
    pub const VALID: u8 = 0;
    /// A violation (under `--expect`: the expectation was not met).
    pub const VIOLATION: u8 = 1;
    /// Bad input or usage.
    pub const BAD_INPUT: u8 = 2;
    /// A checker gave up within its budget.
    pub const UNKNOWN: u8 = 3;
    /// The simulation itself failed (panic, time limit, deadlock, nondeterminism).
    pub const SIM_FAILED: u8 = 4;
    /// The user interrupted a sweep (Ctrl-C, 128 + SIGINT as shells report it): what it
    /// found so far was printed and written, marked partial.
    pub const INTERRUPTED: u8 = 130;
}

/// What [`check_scenario`] ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    /// The scenario's name.
    pub scenario: String,
    /// Seeds run, every one meeting the expectation.
    pub seeds_run: u64,
}

/// Why [`check_scenario`] failed. Its `Debug` form is its message, so that a test's
/// `.unwrap()` prints the explanation as lines of text, not as one escaped string.
#[derive(thiserror::Error)]
pub enum ScenarioCheckError {
    /// The scenario could not be read or is invalid (the message names file, line and field).
    #[error("{0}")]
    BadScenario(String),
    /// The seed range holds more than [`run::MAX_SWEEP_SEEDS`] seeds.
    #[error(
        "check_scenario: {count} seeds; at most {} per call",
        run::MAX_SWEEP_SEEDS
    )]
    TooManySeeds {
        /// Seeds in the range.
        count: u64,
    },
    /// The seed range is empty.
    #[error("check_scenario: the seed range {start}..{end} is empty")]
    NoSeeds {
        /// First seed.
        start: u64,
        /// End of the range (exclusive).
        end: u64,
    },
    /// A seed missed the scenario's expectation; its files were written.
    #[error("{summary}\nreport: {report}\nreproduce: {reproduce}")]
    Counterexample {
        /// The seed.
        seed: u64,
        /// The verdict line, each violation's explanation and causal chain, and the
        /// expectation missed.
        summary: String,
        /// Where its report.json was written.
        report: String,
        /// The command that reproduces it.
        reproduce: String,
    },
    /// The sweep was cancelled ([`check_scenario_until`]) before every seed ran, and no
    /// seed run so far missed the expectation: the range was not checked.
    #[error(
        "check_scenario: interrupted after {seeds_run} of {count} seeds; the range was not checked"
    )]
    Interrupted {
        /// Seeds run, each meeting the expectation.
        seeds_run: u64,
        /// Seeds in the range.
        count: u64,
    },
    /// The counterexample's files could not be written.
    #[error("cannot write the run's output: {0}")]
    Io(#[from] std::io::Error),
}

impl std::fmt::Debug for ScenarioCheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// Run a scenario over `seeds` and require its `[expect]` on every one: for a user's own test
/// suite, where `fencesim::check_scenario("tests/my-lock.toml", 0..200).unwrap()` fails the
/// test with the first counterexample's explanation and the command that reproduces it.
///
/// `scenario` is a file path or the name of a bundled scenario. Seeds run in parallel, one
/// simulation thread each, and stop at the first that misses the expectation (the lowest,
/// whatever the parallelism); that seed's files go to `reports/runs/<name>/<seed>/` under the
/// current directory, as `fencesim run` writes them.
pub fn check_scenario(
    scenario: &str,
    seeds: std::ops::Range<u64>,
) -> Result<Checked, ScenarioCheckError> {
    check_scenario_until(scenario, seeds, &cancel::Cancel::new())
}

/// [`check_scenario`], stopping early once `cancel` is cancelled (from a Ctrl-C handler of
/// the caller's, say): the seeds in progress finish, and a range not checked to its end is
/// [`ScenarioCheckError::Interrupted`], never a pass.
pub fn check_scenario_until(
    scenario: &str,
    seeds: std::ops::Range<u64>,
    cancel: &cancel::Cancel,
) -> Result<Checked, ScenarioCheckError> {
    let parsed =
        load_named(scenario).map_err(|e| ScenarioCheckError::BadScenario(e.to_string()))?;
    if seeds.is_empty() {
        return Err(ScenarioCheckError::NoSeeds {
            start: seeds.start,
            end: seeds.end,
        });
    }
    let count = seeds.end - seeds.start;
    if count > run::MAX_SWEEP_SEEDS {
        return Err(ScenarioCheckError::TooManySeeds { count });
    }
    let list: Vec<u64> = seeds.collect();
    let opts = run::RunOptions {
        out: std::path::PathBuf::from("reports/runs"),
        scenario_arg: scenario.to_owned(),
        check_determinism: false,
        swarm: false,
        cancel: cancel.clone(),
    };
    let results = run::sweep_until(
        &parsed,
        &list,
        run::default_jobs(),
        &opts,
        |done| {
            Ok(if done.report.expectation.met {
                None
            } else {
                Some(done)
            })
        },
        Option::is_some,
    )?;
    let seeds_run = results.len() as u64;
    match results.into_iter().flatten().next() {
        None if seeds_run < count => Err(ScenarioCheckError::Interrupted { seeds_run, count }),
        None => Ok(Checked {
            scenario: parsed.name,
            seeds_run,
        }),
        Some(done) => {
            let written = done.write(&opts.out)?;
            Err(ScenarioCheckError::Counterexample {
                seed: written.report.seed,
                summary: written.explain(true),
                report: fencesim_history::display_path(&written.report_path),
                reproduce: written.report.reproduce.clone(),
            })
        }
    }
}
