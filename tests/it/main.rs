//! fencesim's integration tests, one binary: a module per area (as rust-analyzer's and
//! turmoil's tests are laid out), so that the simulator is linked once rather than once per
//! file. tests/live.rs stays a binary of its own: real servers must not share the machine's
//! cores with this binary's simulation-heavy tests.

#[path = "../support/mod.rs"]
mod support;

mod bad_input;
mod cleanup;
mod cli;
mod determinism;
mod etcd;
mod examples;
mod explore;
mod fault_mechanics;
mod fuzz_corpus;
mod guided;
mod history_hashes;
mod incidents;
mod lease_record;
mod library;
mod mutation_score;
mod out_of_tree;
mod primary_backup;
mod raft;
mod random_nemesis;
mod redlock;
mod regressions;
mod scenarios;
mod shrink;
mod timeline;
mod user_design;
mod verify;
