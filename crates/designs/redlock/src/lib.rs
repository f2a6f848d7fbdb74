//! Redlock on fencesim's design API: Redis-like lock nodes and the Redlock client algorithm,
//! the designs of Kleppmann 2016's critique ("How to do distributed locking") and antirez's
//! reply.
//!
//! A [`RedisNode`] holds keys with a value and an expiry judged by the node's own clock, as
//! Redis does: `SET key value NX PX ttl` to lock, compare-and-delete to release,
//! compare-and-extend to renew ([`store`]). A [`Redlock`] acquisition asks N independent nodes,
//! succeeds with a majority if `validity = ttl - elapsed - drift allowance` is still positive,
//! and releases everywhere otherwise ([`decision`]). Its values are random, so no resource can
//! order them: that is the point the fencesim scenarios make. Both are pure state machines fed
//! `now_ms`.
//!
//! On the design API, each `redis-N` node is a [`RedisServer`]
//! ([`LockNode`](fencesim_design::LockNode)) and each client a [`RedlockClient`]
//! ([`ClientProtocol`](fencesim_design::ClientProtocol)); they speak [`RedlockMessage`].
#![deny(missing_docs)]

mod client;
pub mod decision;
#[cfg(feature = "live")]
pub mod live;
mod message;
mod node;
mod spec;
pub mod store;

pub use client::{RedlockClient, RedlockClientConfig, TokenSource};
pub use decision::{Decision, Redlock, RedlockConfig};
pub use message::RedlockMessage;
pub use node::{RedisConfig, RedisServer};
pub use spec::{RedlockDesign, RedlockSettings};
pub use store::{Entry, RedisNode};
