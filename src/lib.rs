//! fencesim: deterministic simulation and verification of lease-based locks with fencing tokens.
//!
//! This crate is the public facade and the command line: it re-exports the engine
//! (`fencesim-engine`: [`Engine`], [`run`], [`explore`], [`guided`], [`shrink`], [`live`],
//! [`bench`], [`report`]) and the design API ([`design`]), and holds [`cli`], the whole
//! `fencesim` command line, which a user's own binary runs with a registry of its own
//! ([`cli::main`]). The `fencesim` binary is that call with the built-in designs.
#![deny(missing_docs)]

// `fencesim::...` paths inside the crate too: the CLI's commands are written as a user's are.
extern crate self as fencesim;

pub use fencesim_engine::*;

pub mod cli;
