//! The sans-IO driver of a design: what happens to a node's or a client's state machine
//! between the moments the outside world hands it something, written once for the two that
//! run designs. The simulator (`fencesim-sim`) feeds it madsim's time and messages; the
//! exhaustive explorer of the coming `fencesim verify` is to feed it every order of the same
//! events, so that it checks exactly the code that
//! `fencesim run` simulates and never a second model of it.
//!
//! Nothing here reads a clock, sleeps, spawns or sends: every function takes `now` and
//! answers with what to do. What has moved here so far:
//!
//! - [`timers::Timers`]: a node's or client's timers by id, on true time or on one of its own
//!   clocks, and which is due;
//! - [`node::NodeDriver`]: one start of a lock-service node, drained of every handler call it
//!   owes, answering with the safepoints to pass before it goes on;
//! - [`node::NodeEffects`]: a lock-service node's effects applied in order through
//!   [`node::NodeIo`] (what they reach outside the node), and the safepoints of its decisions;
//! - [`ledger::Ledger`]: what a run knows across its lock-service nodes (log entries recorded,
//!   the leases each node honours, the leader);
//! - [`beliefs::Beliefs`]: the clients' own views of their leases, and their history events;
//! - [`op`]: a client's operations as history records (template, completion, timeout);
//! - [`resource::mutation_event`]: the resource's decision on a write or delete as the
//!   history's `accept` or `reject` event, and the safepoint after it.
#![deny(missing_docs)]

pub mod beliefs;
pub mod ledger;
pub mod node;
pub mod op;
pub mod resource;
pub mod timers;

#[cfg(test)]
mod single_node_tests;
