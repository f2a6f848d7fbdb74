//! The scenario crate's integration tests, one binary with a module per area (as the root
//! package's tests/it is laid out), so that the crate's tests link once.

mod support;

mod final_heal;
mod hold_copy;
mod to_toml;
