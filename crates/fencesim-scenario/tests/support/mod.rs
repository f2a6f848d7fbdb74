//! The built-in designs, as the `fencesim` crate's registry lists them, for parsing.

use fencesim_scenario::DesignSpec;

/// Every built-in design.
pub const DESIGNS: &[&dyn DesignSpec] = &[
    &fencesim_lease::SingleDesign,
    &fencesim_lease::RaftDesign,
    &fencesim_redlock::RedlockDesign,
    &fencesim_lease::PrimaryBackupDesign,
    &fencesim_lease_record::LeaseRecordDesign,
];
