//! The simulation shell: the one crate that knows madsim.
//!
//! It builds a cluster from a [`Scenario`] on madsim's deterministic runtime: the lock
//! service's nodes of whichever design it is given ([`SimDesign`]: each a `LockNode` under
//! fencesim-design's `NodeHost`), a `resource` node ([`SimResource`]), one node per client
//! driving the workload machine of `fencesim-workload`, and a `nemesis` node, never paused,
//! which fires the faults. Messages spend their delay in the transport's own queue, delivered
//! by timers rather than by any node's task, so pausing a sender does not delay a message it
//! already sent. Every decision is recorded into a [`fencesim_history::History`]. Everything random comes from
//! the root seed (see [`seeds`]), so a scenario and seed always give the same history.
#![deny(missing_docs)]

#[cfg(not(madsim))]
compile_error!(
    "fencesim-sim only builds under `--cfg madsim` (madsim's simulated runtime). The repository's \
     .cargo/config.toml sets it; if you set RUSTFLAGS yourself it replaces that setting, so \
     include it: RUSTFLAGS=\"--cfg madsim\""
);

mod client;
pub mod clock;
pub mod design;
pub mod design_body;
mod design_node;
mod design_timers;
mod disk;
mod guard;
pub mod mailbox;
pub mod message;
mod nemesis;
pub mod random_nemesis;
pub mod raw_rpc;
pub mod recorder;
mod resource_node;
mod runner;
pub mod seeds;
mod timer;
pub mod transport;
mod world;

pub use design::{Cluster, SimDesign, SimResource};
pub use fencesim_scenario::Scenario;
pub use message::Message;
pub use runner::{run, FailureKind, RunOutcome, SimFailure};
pub use transport::NetStats;
