//! Live mode (`fencesim live`): a scenario run against real servers, with clients as real OS
//! processes, real clocks and real faults, recorded in the same history format and judged by
//! the same checkers as a simulation (docs/live.md).
//!
//! The simulation predicts; a live trial confirms on the real thing. This crate is the one
//! place in fencesim with real clocks, threads and processes, and it never runs on a
//! simulation's thread (its own clippy.toml lifts the determinism lints for it alone).
//!
//! - [`pg_server::PgServer`]: a throwaway PostgreSQL server on loopback;
//! - [`form`]: what a design's live form is (its tables and operations on the server) and
//!   the registry of forms a binary knows;
//! - [`plan`]: which parts of a scenario have a live form, and refusals for the rest;
//! - [`trial`]: one trial; its client processes (`processes.rs`) and the faults applied while
//!   it runs (`nemesis.rs`: signals, crashes, clock steps, the network through [`proxy`]);
//! - [`client`]: the client process, a driver of `fencesim-workload`'s machine;
//! - [`assemble`]: one history from the clients' records, the database's log and the
//!   nemesis's events.
#![deny(missing_docs)]

pub mod assemble;
pub mod client;
pub mod clock;
pub mod etcd_gateway;
pub mod etcd_server;
pub mod form;
mod nemesis;
pub use nemesis::LATE_MS;
pub mod pg_server;
pub mod plan;
mod processes;
pub mod proxy;
pub mod reaper;
pub mod redis_server;
pub mod secret;
pub mod server_node;
pub mod trial;
pub mod wire;

/// An error with every cause it carries, `outer: inner: ...` (the PostgreSQL client's own
/// Display is only `db error` or `error connecting to server`).
pub fn describe(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let more = e.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = e.source();
    }
    text
}

/// Why a live run could not go on.
#[derive(Debug)]
pub enum LiveError {
    /// A server binary or user is not installed.
    Missing {
        /// What is missing.
        what: &'static str,
        /// The Debian package that provides it.
        package: &'static str,
    },
    /// A server or the database failed (one line, with what it said).
    Server(String),
    /// The scenario or an option asks for something this machine or setup cannot do, found
    /// before any trial ran (bad input: exit 2).
    Unsupported(String),
}

impl std::fmt::Display for LiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LiveError::Missing { what, package } => write!(
                f,
                "{what} is not installed: install the Debian package `{package}` (apt-get install {package})"
            ),
            LiveError::Server(message) | LiveError::Unsupported(message) => write!(f, "{message}"),
        }
    }
}

impl std::error::Error for LiveError {}

/// The history's records, re-exported so that a live form builds the events it observes
/// ([`form::LockCall::observe`]) of the same version.
pub use fencesim_history as history;
/// The PostgreSQL client library the live forms speak through (the blocking face of
/// `tokio-postgres`), re-exported so that a design's live form uses the same version.
pub use postgres;
/// The Redis client library the live forms speak through, re-exported for the same reason.
pub use redis;
/// The JSON the etcd gateway speaks, for live forms on etcd.
pub use serde_json;
/// The knob tables' type, re-exported for the forms' constructors.
pub use toml;
