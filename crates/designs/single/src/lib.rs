//! The single lease service (`kind = "single"`, the default design): one `lease-service` node
//! with a lease table on its own disk, as etcd's lessor without replication or a lock table on
//! one database. Its defect knobs are the lock servers of cases K04, K06, K10, K17 and K19 (a
//! restarted server that forgot a lease or reissued a token; a reaper that ignores leases; a
//! release that does not check its holder). The lease table, its client and the wait queue are
//! `fencesim-lease`'s, shared with the Raft and primary-backup services.
//!
//! [`SingleDesign`] is the design; [`live`] (feature `live`) is its live form on PostgreSQL.
#![deny(missing_docs)]

#[cfg(feature = "live")]
pub mod live;
mod node;
mod spec;

pub use node::{AcquireMode, LeaseDisk, LeaseNode, LeaseNodeConfig, Reaper, TokenCounter};
pub use spec::{SingleDesign, LEASE_SERVICE_NODE};
