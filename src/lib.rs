//! fencesim: deterministic simulation and verification of lease-based locks with fencing tokens.
//!
//! This facade wires the crates together: a [`Scenario`] and a seed go to the simulator
//! (`fencesim-sim`, on madsim), the recorded history to the checker (`fencesim-checker`), and
//! the result into a report on disk ([`report`]). The `fencesim` binary is a thin CLI over it.
#![deny(missing_docs)]

pub mod bench;
pub mod bundled;
pub mod expectation;
pub mod explore;
pub mod readable;
pub mod report;
pub mod run;
pub mod shrink;

pub use fencesim_checker::{check, CheckResult, Verdict, Violation};
pub use fencesim_history::{History, ViolationKind};
pub use fencesim_scenario::{Scenario, ScenarioError};
pub use fencesim_sim::{FailureKind, RunOutcome, SimFailure};

/// Read and validate a scenario file, refusing expectations this checker cannot decide.
pub fn load_scenario(path: &std::path::Path) -> Result<Scenario, ScenarioError> {
    fencesim_scenario::load(path, Some(fencesim_checker::CHECKED_KINDS))
}

/// Validate scenario TOML `text` (`file` names it in errors), as [`load_scenario`] does.
pub fn parse_scenario(text: &str, file: &str) -> Result<Scenario, ScenarioError> {
    fencesim_scenario::parse(text, file, Some(fencesim_checker::CHECKED_KINDS))
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
}
