//! The etcd design (`kind = "etcd"`): members `etcd-1` .. `etcd-N`, each a raft-rs replica
//! (fencesim-raft's [`RaftCore`](fencesim_raft::RaftCore)) applying etcd's data model: an MVCC
//! key space under one global revision, leases that keys are attached to, and the v3 lock
//! recipe on them (`concurrency.Mutex`, which etcd's lock API runs). A lock is a key
//! `<lock>/<lease id>` under the caller's lease; it is held once every key under the prefix
//! created before it is gone; the fencing token is the key's create revision, as etcd's docs
//! advise ("Notes on the usage of lock and lease", etcd.io/docs/v3.5/learning/why/).
//!
//! Jepsen's etcd 3.4.3 analysis (2020) found its locks unsafe without fencing: a paused holder
//! whose lease expired still acted, and a blocked lock call could return after the caller's
//! lease had expired. The first is any lease lock's, and the resource's `mode` chooses whether
//! the revision fences it; the second is this design's knob `lock_checks_own_key = false`.
//!
//! - [`mvcc`]: the key space and the leases.
//! - [`store`]: the state every member applies, with the lock recipe.
//! - [`EtcdNode`]: a member; [`EtcdDesign`]: the design.
//! - `live` (feature `live`): the live form against a real etcd cluster.
#![deny(missing_docs)]

#[cfg(feature = "live")]
pub mod live;
pub mod mvcc;
mod node;
mod spec;
pub mod store;

pub use node::{EtcdMessage, EtcdNode, EtcdNodeConfig};
pub use spec::{EtcdDesign, LOCK_BLOCKED};
