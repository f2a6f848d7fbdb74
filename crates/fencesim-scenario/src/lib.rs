//! The fencesim scenario: a TOML file that says which cluster to build, which faults to inject
//! and what verdict to expect, over a range of seeds (docs/scenario-format.md).
//!
//! Parsing is two steps: serde reads a raw form that keeps every field's position
//! (`deny_unknown_fields`, so a typo is an error, not a silent default), then validation turns
//! it into the resolved [`Scenario`] or a [`ScenarioError`] naming file, line, column and field.
//! [`to_toml`] goes the other way, writing a `Scenario` back as a file `parse` accepts.
#![deny(missing_docs)]

mod error;
mod fault;
mod model;
mod raw;
mod validate;
mod validate_fault;
mod validate_nemesis;
mod write;

use std::path::Path;

use fencesim_history::ViolationKind;

#[cfg(feature = "proptest")]
pub mod strategies;

pub use error::ScenarioError;
pub use fault::{Action, Cut, Fault, FaultKind, LinkSel, Trigger};
pub use fencesim_design::{
    Catalog, ClientWorkload, DesignSpec, Designs, Register, ResourceModeSpec, ServiceShape,
};
pub use model::{
    Cleanup, ClientSpec, Expectation, ExpectedVerdict, LatencyRange, LinkLatency, LockServiceSpec,
    MessageKind, NemesisSpec, NetworkSpec, NodeEvent, NodeRole, Placement, Range64, ResourceSpec,
    Scenario, SeedRange, WorkClock, LEADER, RESERVED_NODE_NAMES, RESOURCE_NODE,
};
pub use validate::derived_name;
pub use write::to_toml;

/// Read and validate the scenario file at `path`. `checked`, if given, lists the violation
/// kinds the checker in use can find; an expectation naming another is refused. `designs` are
/// the lock designs `[lock_service] kind` may name (the `fencesim` crate's registry has the
/// built-in ones).
pub fn load(
    path: &Path,
    checked: Option<&[ViolationKind]>,
    designs: &dyn Designs,
) -> Result<Scenario, ScenarioError> {
    // Errors name the file as fencesim prints any path: a newline or an ESC in its name must
    // not add a line to the message or reach the terminal.
    let file = fencesim_history::display_path(path);
    let source = std::fs::read_to_string(path).map_err(|e| ScenarioError::Io {
        file: file.clone(),
        message: e.to_string(),
    })?;
    parse(&source, &file, checked, designs)
}

/// Validate scenario TOML `source`; `file` is only used in error messages. `checked` and
/// `designs` as for [`load`].
pub fn parse(
    source: &str,
    file: &str,
    checked: Option<&[ViolationKind]>,
    designs: &dyn Designs,
) -> Result<Scenario, ScenarioError> {
    let located = |e: toml::de::Error| ScenarioError::from_toml(&e, source, file);
    // The `[[clients]]` tables field by field, for the fields that are the design's knobs. A
    // field no design's client takes is refused first, as serde refuses an unknown field
    // before it finds one missing (a misspelt `ttl` is reported as such, not as a missing
    // `ttl_ms`). If this lenient reading fails, the strict one below says why.
    let client_knobs: Option<raw::RawKnobTables> = toml::from_str(source).ok();
    if let Some(knobs) = &client_knobs {
        validate::refuse_unknown_client_fields(knobs, source, file, designs)?;
    }
    let raw: raw::RawScenario = toml::from_str(source).map_err(located)?;
    let client_knobs = match client_knobs {
        Some(knobs) => knobs,
        None => toml::from_str(source).map_err(located)?,
    };
    validate::resolve(raw, client_knobs, source, file, checked, designs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checker that lacks a kind makes an expectation of it undecidable: refused, located.
    #[test]
    fn an_expectation_no_checker_can_meet_is_refused() {
        let source = "name = \"s\"\nduration_ms = 1000\n[[clients]]\nname = \"c\"\nttl_ms = 100\n\
                      [expect]\nverdict = \"invalid\"\nviolations = [\"not-linearizable\"]\n";
        let only = [ViolationKind::StaleWriteAccepted];
        let designs = Catalog::default()
            .with_design(&fencesim_single::SingleDesign)
            .with_resource(&fencesim_resource::FENCED);
        let err = parse(source, "s.toml", Some(&only), &designs)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "s.toml:8:15: field `expect.violations`: not-linearizable is not checked by this \
             version of fencesim, so this expectation could never be decided"
        );
        assert!(parse(source, "s.toml", None, &designs).is_ok());
    }

    /// A design whose shape names a node the harness owns is refused at `[lock_service]`.
    #[test]
    fn a_design_may_not_name_a_node_the_harness_owns() {
        /// A design of no node type of its own: only its shape is parsed.
        struct Clash;
        impl fencesim_design::Design for Clash {
            type Node = fencesim_single::LeaseNode;
            type Client = fencesim_lease::LeaseClient;
            type Settings = ();
            type ClientSettings = ();
            fn kind(&self) -> &'static str {
                "clash"
            }
            fn about(&self) -> &'static str {
                "names its node resource"
            }
            fn knob_names(&self) -> &'static [&'static str] {
                &[]
            }
            fn settings(
                &self,
                _: &mut fencesim_design::Knobs,
                _: u64,
            ) -> Result<((), ServiceShape), fencesim_design::KnobError> {
                Ok(((), ServiceShape::single(RESOURCE_NODE)))
            }
            fn client_settings(
                &self,
                _: &mut fencesim_design::Knobs,
                _: &fencesim_design::ClientWorkload,
                _: u64,
            ) -> Result<(), fencesim_design::KnobError> {
                Ok(())
            }
            fn node_config(_: &()) -> fencesim_single::LeaseNodeConfig {
                unreachable!("never run: the scenario is refused")
            }
            fn client(
                _: &(),
                _: &(),
                _: fencesim_design::ClientInfo,
            ) -> fencesim_lease::LeaseClient {
                unreachable!("never run: the scenario is refused")
            }
        }
        let designs = Catalog::default()
            .with_design(&Clash)
            .with_resource(&fencesim_resource::FENCED);
        let source = "name = \"s\"\nduration_ms = 1000\n[lock_service]\nkind = \"clash\"\n\
                      [[clients]]\nttl_ms = 100\n";
        let err = parse(source, "s.toml", None, &designs)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "s.toml:3:1: field `lock_service.kind`: the design \"clash\" names a node \
             \"resource\", which is not a valid node name or is reserved or taken twice"
        );
    }
}
