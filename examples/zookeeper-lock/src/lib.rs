//! ZooKeeper's lock recipe as a fencesim design, written as a user of fencesim writes one:
//! against its public API only (`fencesim::design`, `fencesim::registry`, `fencesim::Engine`), in a crate of its
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
use fencesim::Engine;

/// The built-in designs and this one: what `main.rs` runs the command line with.
pub fn registry() -> Registry {
    Registry::built_in().with_design(&spec::ZookeeperDesign)
}

/// A fencesim engine that knows this design, named after this example's binary so that the
/// `reproduce:` lines it prints run that binary: what the tests check scenarios with.
pub fn engine() -> Engine {
    Engine::new(registry()).named("zookeeper-lock")
}
