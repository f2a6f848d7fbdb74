//! ZooKeeper's lock recipe as a fencesim design, written as a user of fencesim writes one:
//! against its public API only (`fencesim::design`, `fencesim::registry`), in a crate of its
//! own.
//!
//! - [`server`]: a standalone ZooKeeper server reduced to sessions, ephemeral sequential
//!   children, watches and the zxid;
//! - [`client`]: the recipe (lowest child holds the lock, each waiter watches its
//!   predecessor, the holder's token is its child's `czxid`), with the defect knob
//!   `predecessor_gone = "take"`;
//! - [`spec`]: the design as one value: the kind (`zookeeper`), the knobs, the service's shape,
//!   the server and the client;
//! - `main.rs`: fencesim's whole command line with this design added.
//!
//! Run it: `cargo run -p zookeeper-lock -- run examples/zookeeper-lock/scenarios/zk-random-nemesis.toml`.
#![deny(missing_docs)]

pub mod client;
pub mod messages;
pub mod server;
pub mod spec;

use fencesim::registry::Registry;

/// The built-in designs and this one.
pub fn registry() -> Registry {
    Registry::built_in().with_design(&spec::ZookeeperDesign)
}

/// Make [`registry`] the one every fencesim entry point of this process uses (the first
/// call wins; later calls change nothing).
pub fn install() {
    let _ = fencesim::registry::install(registry());
}
