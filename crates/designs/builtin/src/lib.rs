//! fencesim's built-in lock designs and resources, as one list: [`register`] adds them to
//! whatever registers designs ([`Register`]). The engine's registry (`fencesim_engine::registry`) is built from it,
//! and so are the catalogs that parse without simulating (the scenario crate's tests, the fuzz
//! targets), so a new built-in design is one line here and a crate of its own.
//!
//! The order is the listing order: the first design (`single`) is the one a `[lock_service]`
//! without `kind` means, and the first resource (`fenced`) the one a `[resource]` without
//! `mode` means.
#![deny(missing_docs)]

use fencesim_design::{Catalog, Register};

/// Add every built-in design and resource to `registry`, in listing order.
pub fn register<R: Register>(registry: R) -> R {
    registry
        .with_design(&fencesim_single::SingleDesign)
        .with_design(&fencesim_raft::RaftDesign)
        .with_design(&fencesim_redlock::RedlockDesign)
        .with_design(&fencesim_primary_backup::PrimaryBackupDesign)
        .with_design(&fencesim_lease_record::LeaseRecordDesign)
        .with_resource(&fencesim_resource::FENCED)
        .with_resource(&fencesim_resource::UNFENCED)
        .with_resource(&fencesim_resource::EQUALITY)
}

/// The built-in designs and resources as a parser's catalog.
pub fn catalog() -> Catalog {
    register(Catalog::default())
}

#[cfg(test)]
mod tests {
    use fencesim_design::Designs;

    #[test]
    fn the_defaults_come_first() {
        let catalog = super::catalog();
        let kinds: Vec<&str> = catalog.all().iter().map(|d| d.kind()).collect();
        assert_eq!(
            kinds,
            [
                "single",
                "raft",
                "redlock",
                "primary-backup",
                "lease-record"
            ]
        );
        let modes: Vec<&str> = catalog.all_resources().iter().map(|r| r.mode()).collect();
        assert_eq!(modes, ["fenced", "unfenced", "equality"]);
    }
}
