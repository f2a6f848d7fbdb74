//! The fencesim scenario: a TOML file that says which cluster to build, which faults to inject
//! and what verdict to expect, over a range of seeds (docs/scenario-format.md).
//!
//! Parsing is two steps: serde reads a raw form that keeps every field's position
//! (`deny_unknown_fields`, so a typo is an error, not a silent default), then validation turns
//! it into the resolved [`Scenario`] or a [`ScenarioError`] naming file, line, column and field.
#![deny(missing_docs)]

mod error;
mod fault;
mod model;
mod raw;
mod validate;
mod validate_fault;
mod validate_nemesis;

use std::path::Path;

use fencesim_history::ViolationKind;

pub use error::ScenarioError;
pub use fault::{Action, Cut, Fault, LinkSel, Trigger};
pub use model::{
    ClientSpec, Expectation, ExpectedVerdict, ExpiryClock, ExpiryJudgedBy, Fsync, LatencyRange,
    LeaderChangeMode, LinkLatency, LockServiceKind, LockServiceSpec, MessageKind, NemesisSpec,
    NetworkSpec, NodeEvent, NodeRole, PrimaryBackupSpec, Range64, RedlockSpec, Replication,
    ResourceMode, ResourceSpec, Scenario, SeedRange, TokenCounter, TokenSource, LEADER,
    LEASE_SERVICE_NODE, RESERVED_NODE_NAMES, RESOURCE_NODE,
};

/// Read and validate the scenario file at `path`. `checked`, if given, lists the violation
/// kinds the checker in use can find; an expectation naming another is refused.
pub fn load(path: &Path, checked: Option<&[ViolationKind]>) -> Result<Scenario, ScenarioError> {
    let file = path.display().to_string();
    let source = std::fs::read_to_string(path).map_err(|e| ScenarioError::Io {
        file: file.clone(),
        message: e.to_string(),
    })?;
    parse(&source, &file, checked)
}

/// Validate scenario TOML `source`; `file` is only used in error messages. `checked` as for
/// [`load`].
pub fn parse(
    source: &str,
    file: &str,
    checked: Option<&[ViolationKind]>,
) -> Result<Scenario, ScenarioError> {
    let raw: raw::RawScenario =
        toml::from_str(source).map_err(|e| ScenarioError::from_toml(&e, source, file))?;
    validate::resolve(raw, source, file, checked)
}
