//! Sans-IO lease (lock) services that issue fencing tokens.
//!
//! A lease is a lock with an expiry time: the service grants it to one holder for a TTL, the
//! holder renews it (keepalive) or releases it, and when it is neither renewed nor released the
//! service expires it. Each grant carries a fencing token that strictly increases per lock, so a
//! fenced resource can reject writes from a holder whose lease has since passed to someone else
//! (Kleppmann 2016, "How to do distributed locking"; Chubby's sequencers; etcd's revisions).
//!
//! Everything here is a pure state machine: the caller passes `now_ms`, a reading of the
//! service node's *local* clock in milliseconds, and gets an outcome back. There is no I/O, no
//! clock and no randomness inside; the simulation shell decides when to call
//! [`LeaseService::expire_due`] by asking [`LeaseService::next_expiry`].
#![deny(missing_docs)]

mod client;
#[cfg(feature = "live")]
pub mod live;
mod message;
mod node;
pub mod primary_backup;
mod primary_backup_node;
mod raft_node;
pub mod raft_replica;
pub mod replicated;
mod serve;
mod service;
mod spec;
pub mod wait_queue;

pub use client::{LeaseClient, LeaseClientConfig};
pub use message::{Attempt, LeaseMessage};
pub use node::{AcquireMode, LeaseDisk, LeaseNode, LeaseNodeConfig, Reaper, TokenCounter};
pub use primary_backup_node::{PrimaryBackupNode, PrimaryBackupNodeConfig};
pub use raft_node::{RaftLog, RaftNode, RaftNodeConfig};
pub use serve::{expire_due, held_leases, serve, ReleaseMode, Served};
pub use service::{
    AcquireOutcome, Expired, Lease, LeaseConfig, LeaseService, LeaseTable, LockRecord,
    ReleaseOutcome, RenewOutcome,
};
pub use spec::{
    lease_client_settings, PrimaryBackupDesign, RaftDesign, SingleDesign, LEASE_CLIENT_KNOBS,
    LEASE_SERVICE_NODE, RAFT_ELECTION_TICKS, RAFT_HEARTBEAT_TICKS, RAFT_LESSOR_CHECK_TICKS,
    RAFT_TICK_MS,
};
