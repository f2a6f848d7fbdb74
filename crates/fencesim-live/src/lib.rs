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
//! - [`trial`]: one trial (client processes, pauses by SIGSTOP/SIGCONT);
//! - [`client`]: the client process's workload loop;
//! - [`assemble`]: one history from the clients' records, the database's log and the
//!   nemesis's events.
#![deny(missing_docs)]

pub mod assemble;
pub mod client;
pub mod clock;
pub mod form;
pub mod pg_server;
pub mod plan;
pub mod proxy;
pub mod redis_server;
pub mod trial;
pub mod wire;

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
}

impl std::fmt::Display for LiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LiveError::Missing { what, package } => write!(
                f,
                "{what} is not installed: install the Debian package `{package}` (apt-get install {package})"
            ),
            LiveError::Server(message) => write!(f, "{message}"),
        }
    }
}

impl std::error::Error for LiveError {}

/// The PostgreSQL client library the live forms speak through (the blocking face of
/// `tokio-postgres`), re-exported so that a design's live form uses the same version.
pub use postgres;
/// The Redis client library the live forms speak through, re-exported for the same reason.
pub use redis;
/// The knob tables' type, re-exported for the forms' constructors.
pub use toml;
