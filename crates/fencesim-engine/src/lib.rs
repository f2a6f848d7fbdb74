//! fencesim's engine: what runs a scenario and judges it, as a library. A [`Scenario`] and a
//! seed go to the simulator (`fencesim-sim`, on madsim), the recorded history to the checker
//! (`fencesim-checker`), and the result into a report on disk ([`report`]); around that one
//! seed, sweeps ([`run`], [`explore`]), guided search ([`guided`]), shrinking ([`shrink`]),
//! live trials against real servers ([`live`]) and the measurements of `fencesim bench`
//! ([`bench`]).
//!
//! Every entry point is given an [`Engine`] (the designs it knows, [`registry::Registry`], and
//! the name of the command that runs it) and, where it can run long, a cancellation token
//! ([`cancel::Cancel`]): nothing is process-wide. The `fencesim` crate re-exports all of it
//! and adds the command line.
#![deny(missing_docs)]

pub mod bench;
pub mod bundled;
pub mod cancel;
pub mod engine;
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
pub mod verify;

/// The design API a lock design of your own implements (`fencesim-design`).
pub use fencesim_design as design;
/// The scenario format (`fencesim-scenario`).
pub use fencesim_scenario as scenario;
/// How the simulator runs a design or a resource: every [`design::Design`] is a
/// [`SimDesign`] and every [`design::ResourceDesign`] a [`SimResource`]; register yours with
/// [`registry::Registry::with_design`] or [`registry::Registry::with_resource`].
pub use fencesim_sim::{SimDesign, SimResource};

pub use engine::Engine;
pub use fencesim_checker::{check, CheckResult, Verdict, Violation};
pub use fencesim_history::{History, ViolationKind};
pub use fencesim_scenario::{Scenario, ScenarioError};
pub use fencesim_sim::{FailureKind, RunOutcome, SimFailure};

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

/// What [`Engine::check_scenario`] ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    /// The scenario's name.
    pub scenario: String,
    /// Seeds run, every one meeting the expectation.
    pub seeds_run: u64,
}

/// Why [`Engine::check_scenario`] failed. Its `Debug` form is its message, so that a test's
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
    /// The sweep was cancelled ([`Engine::check_scenario_until`]) before every seed ran, and no
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

/// [`Engine::check_scenario`] with the built-in designs: for a test suite whose scenarios
/// name only those, `fencesim::check_scenario("tests/my-lock.toml", 0..200).unwrap()`. A suite
/// with designs of its own makes an [`Engine`] of its registry and calls its method.
///
/// # Errors
/// As [`Engine::check_scenario`].
pub fn check_scenario(
    scenario: &str,
    seeds: std::ops::Range<u64>,
) -> Result<Checked, ScenarioCheckError> {
    Engine::built_in().check_scenario(scenario, seeds)
}
