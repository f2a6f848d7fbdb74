//! A lock-service node's simulated disk: what survives a crash, and what a restore brings back.
//!
//! A node's writes go to the page cache (`pending`) unless synced, and reach the disk
//! (`synced`) with the next synced write or sync; a crash loses what was not synced. In a run
//! with a `restore` fault every synced state is also kept with its true time, so a restore can
//! bring back "the backup as of T". How a design's durable parts combine after a crash or a
//! restore (a token record written through, kept off the backed-up volume) is the design's
//! rule ([`LockNode::after_crash`], [`LockNode::after_restore`]).

use std::any::Any;
use std::sync::{Arc, Mutex};

use fencesim_design::{Durability, HeldLease, LockNode};

/// One node's disk.
#[derive(Debug)]
pub(crate) struct Disk<D> {
    synced: Option<D>,
    pending: Option<D>,
    /// Whether to keep `backups`: only a run with a `restore` fault reads them, and a copy of
    /// the state per sync costs memory and time in proportion to the run's length.
    keep_backups: bool,
    /// Every synced state, with the true time (ns) it reached the disk.
    backups: Vec<(u64, D)>,
}

impl<D: Clone> Disk<D> {
    /// An empty disk; `keep_backups` if the run can restore from backup.
    pub fn new(keep_backups: bool) -> Self {
        Disk {
            synced: None,
            pending: None,
            keep_backups,
            backups: Vec::new(),
        }
    }

    /// Write `state` at true time `now_ns`; a synced write makes it (and everything before it)
    /// durable.
    pub fn write(&mut self, state: D, durability: Durability, now_ns: u64) {
        self.pending = Some(state);
        if durability == Durability::Synced {
            self.sync(now_ns);
        }
    }

    /// Make pending writes durable (an `fsync`) at true time `now_ns`.
    pub fn sync(&mut self, now_ns: u64) {
        if let Some(state) = self.pending.take() {
            if self.keep_backups {
                self.backups.push((now_ns, state.clone()));
            }
            self.synced = Some(state);
        }
    }

    /// What a node starting now finds.
    pub fn durable(&self) -> Option<D> {
        self.synced.clone()
    }

    /// The node crashed: unsynced writes are gone, as `after_crash` combines them.
    fn crash(&mut self, after_crash: fn(Option<D>, Option<D>) -> Option<D>) {
        self.synced = after_crash(self.synced.take(), self.pending.take());
    }

    /// Bring back the last state synced at or before `at_ns` (nothing if none was), combined
    /// with the state it replaces by `after_restore`. Only a disk made with `keep_backups` has
    /// any backups.
    fn restore(&mut self, at_ns: u64, after_restore: fn(Option<D>, Option<D>) -> Option<D>) {
        debug_assert!(
            self.keep_backups,
            "a restore from a disk that keeps no backups"
        );
        self.pending = None;
        let backup = self
            .backups
            .iter()
            .rev()
            .find(|(t, _)| *t <= at_ns)
            .map(|(_, state)| state.clone());
        self.synced = after_restore(backup, self.synced.take());
    }
}

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
        N::durable_leases(self.lock().synced.as_ref())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn synced_only(synced: Option<u32>, _lost: Option<u32>) -> Option<u32> {
        synced
    }

    fn backup_only(backup: Option<u32>, _latest: Option<u32>) -> Option<u32> {
        backup
    }

    #[test]
    fn a_crash_loses_the_writes_since_the_last_synced_one() {
        let mut disk = Disk::<u32>::new(false);
        assert_eq!(disk.durable(), None);
        disk.write(1, Durability::Synced, 0);
        disk.write(2, Durability::Unsynced, 0);
        assert_eq!(
            disk.durable(),
            Some(1),
            "an unsynced write is not on disk yet"
        );
        disk.crash(synced_only);
        disk.write(3, Durability::Unsynced, 0);
        disk.write(4, Durability::Synced, 0);
        disk.crash(synced_only);
        assert_eq!(
            disk.durable(),
            Some(4),
            "a synced write carries the ones before it"
        );
        disk.write(5, Durability::Unsynced, 0);
        disk.sync(0);
        disk.crash(synced_only);
        assert_eq!(
            disk.durable(),
            Some(5),
            "a sync makes the pending write durable"
        );
    }

    #[test]
    fn a_restore_brings_back_the_last_state_synced_by_then() {
        let mut disk = Disk::<u32>::new(true);
        disk.write(1, Durability::Synced, 10);
        disk.write(2, Durability::Unsynced, 15);
        disk.sync(20);
        disk.write(3, Durability::Synced, 30);
        disk.restore(25, backup_only);
        assert_eq!(disk.durable(), Some(2), "synced at 20");
        disk.restore(5, backup_only);
        assert_eq!(disk.durable(), None, "nothing was synced by 5");
        let latest_wins = |_backup: Option<u32>, latest: Option<u32>| latest.map(|l| l + 100);
        disk.write(7, Durability::Synced, 40);
        disk.restore(10, latest_wins);
        assert_eq!(
            disk.durable(),
            Some(107),
            "the design combines backup and latest"
        );
    }
}
