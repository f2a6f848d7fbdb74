//! Sans-IO lease (lock) services that issue fencing tokens: the lease table, its wait queue,
//! the requests and answers, the client, and the replicated table, which the three lease-table
//! designs share (`fencesim-single`, `fencesim-raft`, `fencesim-primary-backup`, each a crate
//! of its own under crates/designs/).
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
mod client_knobs;
mod message;
pub mod replicated;
mod serve;
mod service;
pub mod wait_queue;

pub use client::{LeaseClient, LeaseClientConfig};
pub use client_knobs::{lease_client_settings, LEASE_CLIENT_KNOBS, LEASE_CLIENT_SAFE};
pub use message::{Attempt, LeaseMessage, NoPeers, PeerMessage};
pub use serve::{expire_due, held_leases, serve, ReleaseMode, Served};
pub use service::{
    AcquireOutcome, Expired, Lease, LeaseConfig, LeaseService, LeaseTable, LockRecord,
    ReleaseOutcome, RenewOutcome,
};
