//! Sans-IO Redis-like lock nodes and the Redlock client algorithm, the designs of Kleppmann
//! 2016's critique ("How to do distributed locking") and antirez's reply.
//!
//! A [`RedisNode`] holds keys with a value and an expiry judged by the node's own wall clock,
//! as Redis does: `SET key value NX PX ttl` to lock, compare-and-delete to release,
//! compare-and-extend to renew. A [`Redlock`] acquisition asks N independent nodes, succeeds
//! with a majority if `validity = ttl - elapsed - drift allowance` is still positive, and
//! releases everywhere otherwise. Its values are random, so no resource can order them: that is
//! the point the fencesim scenarios make. Everything is a pure state machine fed `now_ms`.
#![deny(missing_docs)]

mod client;
mod node;

pub use client::{Decision, Redlock, RedlockConfig};
pub use node::{Entry, RedisNode};
