//! How the harness runs a design it does not know: a [`SimDesign`] starts the lock-service
//! nodes and the clients of one run. The sim depends on no design; whoever maps a scenario's
//! `kind` to a design (the `fencesim` crate's registry) hands [`crate::run`] one.
//!
//! Every [`Design`] is a `SimDesign`, and every [`ResourceDesign`] a [`SimResource`]: the
//! nodes and clients are built from the typed settings the scenario parser kept
//! ([`fencesim_design::Settings`]), and the node type and client protocol are monomorphised
//! into the node loop and the client, so a message costs no dynamic dispatch; only starting a
//! node goes through the trait.

use std::sync::Arc;

use std::sync::Mutex;

use fencesim_design::{Design, FencedResource, ResourceDesign};
use fencesim_scenario::{Scenario, RESOURCE_NODE};

use crate::world::World;
use crate::{client, design_node, resource_node, runner};

/// The cluster a design's nodes and clients join (the run's shared state, opaque outside the
/// sim).
pub struct Cluster<'a> {
    world: &'a Arc<World>,
}

impl<'a> Cluster<'a> {
    pub(crate) fn new(world: &'a Arc<World>) -> Self {
        Cluster { world }
    }

    /// The scenario being run.
    pub fn scenario(&self) -> &Scenario {
        &self.world.scenario
    }
}

/// A design as the harness runs it.
pub trait SimDesign: Send + Sync {
    /// Start every lock-service node of the scenario (`[lock_service]`'s node names, in
    /// order), each as a madsim node that restarts from its disk after a crash.
    fn start_service(&self, cluster: &Cluster<'_>);
    /// Start client `index` of the scenario's clients, named `name`.
    fn start_client(&self, cluster: &Cluster<'_>, name: &str, index: usize);
}

/// The typed settings `T` the parser kept in `settings` for `what`.
///
/// # Panics
/// The scenario was not parsed (built by hand or read back from JSON): it has no settings,
/// which only parsing makes.
pub(crate) fn parsed<'a, T: 'static>(settings: &'a fencesim_design::Settings, what: &str) -> &'a T {
    settings.get::<T>().unwrap_or_else(|| {
        panic!("{what} has no settings of its design: the scenario was not parsed")
    })
}

impl<D: Design> SimDesign for D {
    fn start_service(&self, cluster: &Cluster<'_>) {
        let world = cluster.world;
        let settings =
            parsed::<D::Settings>(&world.scenario.lock_service.settings, "[lock_service]");
        let config = D::node_config(settings);
        for (index, name) in world.lease_nodes().into_iter().enumerate() {
            let (w, n, config) = (Arc::clone(world), name.clone(), config.clone());
            runner::start_node(&name, move || {
                design_node::run::<D::Node>(Arc::clone(&w), n.clone(), index, config.clone())
            });
        }
    }

    fn start_client(&self, cluster: &Cluster<'_>, name: &str, index: usize) {
        let w = Arc::clone(cluster.world);
        runner::start_node(name, move || client::run::<D>(Arc::clone(&w), index));
    }
}

/// A resource as the harness runs it (`[resource] mode`).
pub trait SimResource: Send + Sync {
    /// Start the `resource` node, which restarts after a crash with its state intact.
    fn start(&self, cluster: &Cluster<'_>);
}

impl<R: ResourceDesign> SimResource for R {
    fn start(&self, cluster: &Cluster<'_>) {
        let world = Arc::clone(cluster.world);
        let config = parsed::<<R::State as FencedResource>::Config>(
            &world.scenario.resource.settings,
            "[resource]",
        );
        // One instance for the whole run: a crash of the node loses nothing of it.
        let store = Arc::new(Mutex::new(R::State::new(config)));
        runner::start_node(RESOURCE_NODE, move || {
            resource_node::run(Arc::clone(&world), Arc::clone(&store))
        });
    }
}
