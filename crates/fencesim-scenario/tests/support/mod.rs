//! The built-in designs and resources, as the `fencesim` crate's registry lists them, for
//! parsing.

use fencesim_scenario::Catalog;

/// Every built-in design and resource.
pub static DESIGNS: Catalog<'static> = Catalog {
    designs: &[
        &fencesim_lease::SingleDesign,
        &fencesim_lease::RaftDesign,
        &fencesim_redlock::RedlockDesign,
        &fencesim_lease::PrimaryBackupDesign,
        &fencesim_lease_record::LeaseRecordDesign,
    ],
    resources: &[
        &fencesim_resource::FENCED,
        &fencesim_resource::UNFENCED,
        &fencesim_resource::EQUALITY,
    ],
};
