//! What a search concluded.

use fencesim_checker::Violation;
use fencesim_history::History;
use serde::Serialize;

use crate::concretise::Timing;
use crate::world::Choice;

/// How a search ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ending {
    /// Every schedule within the bounds was explored, and none violates a checked property.
    Verified,
    /// A schedule violates a checked property: the counterexample is one of the shortest.
    Violation,
    /// The depth or state bound was reached first: what was explored holds no violation.
    BoundsReached,
    /// Stopped (Ctrl-C) first: what was explored holds no violation.
    Interrupted,
}

impl Ending {
    /// In words, as `verify.json` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Ending::Verified => "verified",
            Ending::Violation => "violation",
            Ending::BoundsReached => "bounds-reached",
            Ending::Interrupted => "interrupted",
        }
    }
}

/// A shortest schedule that violates a checked property.
#[derive(Clone, Debug)]
pub struct Counterexample {
    /// Each step, in words.
    pub steps: Vec<String>,
    /// Each step, as the search took it.
    pub schedule: Vec<Choice>,
    /// The violation, as the checker reports it.
    pub violation: Violation,
    /// The schedule's history.
    pub history: History,
    /// What each step sent and left pending, for writing it as a scenario
    /// ([`crate::concretise`]).
    pub timing: Timing,
}

/// What a search found and how much it explored.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// How it ended.
    pub ending: Ending,
    /// Distinct states explored (every state, for a design re-executed without merging).
    pub states: u64,
    /// Steps taken (each choice from each state explored).
    pub transitions: u64,
    /// The depth reached, in steps.
    pub depth: u32,
    /// Whether some schedule was cut short by a bound.
    pub cut: bool,
    /// The counterexample, if one was found.
    pub counterexample: Option<Counterexample>,
}
