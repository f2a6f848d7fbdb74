//! The lease service's simulated disk: what survives a crash, and what a restore brings back.
//!
//! Writes go to the store's page cache (`pending`) and reach the disk (`synced`) according to
//! the `fsync` knob; a crash loses whatever was not synced. Every synced state is kept with its
//! true time, so a restore can bring back "the backup as of T". The durable token record (the
//! `durable` token-counter design) is separate: synced on every grant and never rewound.

use std::collections::BTreeMap;

use fencesim_lease::LeaseTable;
use fencesim_scenario::{Fsync, TokenCounter};

/// One node's disk.
#[derive(Debug)]
pub(crate) struct Store {
    synced: LeaseTable,
    pending: Option<LeaseTable>,
    /// Whether to keep `backups`: only a run with a `restore` fault reads them, and keeping a
    /// copy of the table per sync costs memory and time in proportion to the run's length.
    keep_backups: bool,
    /// Every synced table, with the true time (ns) it reached the disk.
    backups: Vec<(u64, LeaseTable)>,
    /// Highest token per lock, synced on every grant, never restored to an older value.
    durable_tokens: BTreeMap<String, u64>,
}

impl Store {
    /// An empty disk; `keep_backups` if the run can restore from backup.
    pub fn new(keep_backups: bool) -> Self {
        Store {
            synced: LeaseTable::default(),
            pending: None,
            keep_backups,
            backups: Vec::new(),
            durable_tokens: BTreeMap::new(),
        }
    }

    /// Write the current table; sync at once if `fsync` is `always`.
    pub fn write(&mut self, table: &LeaseTable, fsync: Fsync, now_ns: u64) {
        self.pending = Some(table.clone());
        if fsync == Fsync::Always {
            self.sync(now_ns);
        }
        for (lock, record) in table {
            // Looked up by `&str` first: a lock's name is allocated once, not per write.
            match self.durable_tokens.get_mut(lock) {
                Some(durable) => *durable = (*durable).max(record.last_token),
                None => {
                    self.durable_tokens.insert(lock.clone(), record.last_token);
                }
            }
        }
    }

    /// Make pending writes durable.
    pub fn sync(&mut self, now_ns: u64) {
        if let Some(table) = self.pending.take() {
            if self.keep_backups {
                self.backups.push((now_ns, table.clone()));
            }
            self.synced = table;
        }
    }

    /// A crash: unsynced writes are gone.
    pub fn crash(&mut self) {
        self.pending = None;
    }

    /// Bring back the last table synced at or before `at_ns` (empty if none was), as a restore
    /// from backup does. The durable token record is not part of the backup. Only a store made
    /// with `keep_backups` has any.
    pub fn restore(&mut self, at_ns: u64) {
        debug_assert!(
            self.keep_backups,
            "a restore from a store that keeps no backups"
        );
        self.pending = None;
        self.synced = self
            .backups
            .iter()
            .rev()
            .find(|(t, _)| *t <= at_ns)
            .map(|(_, table)| table.clone())
            .unwrap_or_default();
    }

    /// The table a restarting service starts from, with its token counters as `counter` says.
    pub fn recover(&self, counter: TokenCounter) -> LeaseTable {
        let mut table = self.synced.clone();
        match counter {
            TokenCounter::Store => {}
            TokenCounter::Memory => {
                for record in table.values_mut() {
                    record.last_token = 0;
                }
            }
            TokenCounter::Durable => {
                for (lock, token) in &self.durable_tokens {
                    let record = table.entry(lock.clone()).or_default();
                    record.last_token = record.last_token.max(*token);
                }
            }
        }
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencesim_lease::{LeaseConfig, LeaseService};

    fn granted(n: i64) -> LeaseTable {
        let mut s = LeaseService::new(LeaseConfig { max_ttl_ms: 100 });
        for i in 0..n {
            s.acquire("l", "a", 10, i * 1_000);
        }
        s.table().clone()
    }

    #[test]
    fn a_crash_loses_exactly_the_unsynced_writes() {
        let mut store = Store::new(true);
        store.write(&granted(1), Fsync::Periodic, 1);
        store.sync(2);
        store.write(&granted(2), Fsync::Periodic, 3);
        store.crash();
        assert_eq!(store.recover(TokenCounter::Store)["l"].last_token, 1);
        // The durable record was synced on the grant itself.
        assert_eq!(store.recover(TokenCounter::Durable)["l"].last_token, 2);
        assert_eq!(store.recover(TokenCounter::Memory)["l"].last_token, 0);
    }

    #[test]
    fn fsync_never_loses_everything_and_always_loses_nothing() {
        let mut never = Store::new(true);
        never.write(&granted(3), Fsync::Never, 1);
        never.crash();
        assert!(never.recover(TokenCounter::Store).is_empty());
        let mut always = Store::new(true);
        always.write(&granted(3), Fsync::Always, 1);
        always.crash();
        assert_eq!(always.recover(TokenCounter::Store)["l"].last_token, 3);
    }

    #[test]
    fn a_restore_rewinds_the_store_but_not_the_durable_tokens() {
        let mut store = Store::new(true);
        store.write(&granted(1), Fsync::Always, 10);
        store.write(&granted(4), Fsync::Always, 20);
        store.restore(15);
        assert_eq!(store.recover(TokenCounter::Store)["l"].last_token, 1);
        assert_eq!(store.recover(TokenCounter::Durable)["l"].last_token, 4);
        store.restore(5);
        assert!(store.recover(TokenCounter::Store).is_empty());
    }
}
