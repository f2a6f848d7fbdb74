//! A lock-service node's simulated disk, shared by the world (which crashes and restores it) and
//! the node loop (which writes it). What survives a crash and what a restore brings back is
//! [`Disk`]'s rule (fencesim-design's host module, which any driver of a design shares); in a
//! run with a `restore` fault every synced state is kept with its true time.

use std::any::Any;
use std::sync::{Arc, Mutex};

use fencesim_design::{Disk, HeldLease, LockNode};

/// The disk of node design `N`, shared by the world (which crashes and restores it) and the
/// node loop (which writes it).
pub(crate) struct NodeDisk<N: LockNode> {
    disk: Mutex<Disk<N::Durable>>,
}

impl<N: LockNode> NodeDisk<N> {
    /// An empty disk; `keep_backups` if the run can restore from backup.
    pub fn new(keep_backups: bool) -> Self {
        NodeDisk {
            disk: Mutex::new(Disk::new(keep_backups)),
        }
    }

    /// The disk itself.
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Disk<N::Durable>> {
        self.disk.lock().expect("disk")
    }

    /// The leases a node starting from the disk now would honour, if the harness follows
    /// `N`'s leases and a crash by itself can end some.
    fn kept_leases(&self) -> Option<Vec<HeldLease>> {
        if !N::FOLLOWS_LEASES {
            return None;
        }
        N::durable_leases(self.lock().synced())
    }
}

/// A disk of any design's node, as the world keeps it across the node's crashes.
pub(crate) trait AnyDisk: Send + Sync {
    /// The node crashed: unsynced writes are gone. Returns the leases the node still honours
    /// if the harness follows its leases ([`LockNode::FOLLOWS_LEASES`]) and its disk decides
    /// them ([`LockNode::durable_leases`]).
    fn crash(&self) -> Option<Vec<HeldLease>>;
    /// Restore the backup as of true time `at_ns`; returns what [`AnyDisk::crash`] does.
    fn restore(&self, at_ns: u64) -> Option<Vec<HeldLease>>;
    /// For the node loop, which knows the design.
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

impl<N: LockNode> AnyDisk for NodeDisk<N> {
    fn crash(&self) -> Option<Vec<HeldLease>> {
        self.lock().crash(N::after_crash);
        self.kept_leases()
    }

    fn restore(&self, at_ns: u64) -> Option<Vec<HeldLease>> {
        self.lock().restore(at_ns, N::after_restore);
        self.kept_leases()
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}
