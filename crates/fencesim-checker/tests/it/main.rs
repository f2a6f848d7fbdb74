//! The checker's integration tests, one binary with a module per area (as the root
//! package's tests/it is laid out), so that the crate's tests link once.

mod checks;
mod clocks;
mod deletes;
mod edn_values;
mod knossos_suite;
mod models;
mod quorum;
mod table;
