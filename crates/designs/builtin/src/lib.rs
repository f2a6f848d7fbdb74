//! fencesim's built-in lock designs and resources, as one list: [`register`] adds them to
//! whatever registers designs ([`Register`]). The engine's registry (`fencesim_engine::registry`) is built from it,
//! and so are the catalogs that parse without simulating (the scenario crate's tests, the fuzz
//! targets), so a new built-in design is one line here and a crate of its own.
//!
//! With feature `live`, [`live_forms`] gives the live forms of those that have one, filed by the
//! same kinds and modes.
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
        .with_design(&fencesim_etcd::EtcdDesign)
        .with_resource(&fencesim_resource::FENCED)
        .with_resource(&fencesim_resource::UNFENCED)
        .with_resource(&fencesim_resource::EQUALITY)
}

/// The live forms of the built-in designs and resources that have one (feature `live`): the
/// single lease service's, Redlock's and etcd's, the fenced and unfenced resources', each filed under
/// its design's own kind or its resource's own mode (live mode, docs/live.md).
#[cfg(feature = "live")]
pub fn live_forms() -> fencesim_live::form::LiveForms {
    use fencesim_design::{Design, ResourceDesign};
    fencesim_live::form::LiveForms {
        lock_services: vec![
            (
                Design::kind(&fencesim_single::SingleDesign),
                fencesim_single::live::SINGLE_LIVE,
            ),
            (
                Design::kind(&fencesim_redlock::RedlockDesign),
                fencesim_redlock::live::REDLOCK_LIVE,
            ),
            (
                Design::kind(&fencesim_etcd::EtcdDesign),
                fencesim_etcd::live::ETCD_LIVE,
            ),
        ],
        resources: vec![
            (
                ResourceDesign::mode(&fencesim_resource::FENCED),
                fencesim_resource::live::FENCED_LIVE,
            ),
            (
                ResourceDesign::mode(&fencesim_resource::UNFENCED),
                fencesim_resource::live::UNFENCED_LIVE,
            ),
        ],
    }
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
                "lease-record",
                "etcd"
            ]
        );
        let modes: Vec<&str> = catalog.all_resources().iter().map(|r| r.mode()).collect();
        assert_eq!(modes, ["fenced", "unfenced", "equality"]);
    }
}
