//! How the harness runs a design it does not know: a [`SimDesign`] starts the lock-service
//! nodes and the clients of one run. The sim depends on no design; whoever maps a scenario's
//! `kind` to a design (the `fencesim` crate's registry) hands [`crate::run`] one.
//!
//! [`NodeDesign`] is the one implementation a design on the design API needs: its node type
//! (a [`LockNode`]), its client protocol (a [`ClientProtocol`]), and two functions that make
//! their settings from the scenario. Both are monomorphised into the node loop and the client,
//! so a message costs no dynamic dispatch; only starting a node goes through the trait.

use std::sync::Arc;

use std::sync::Mutex;

use fencesim_design::{ClientInfo, ClientProtocol, FencedResource, LockNode};
use fencesim_scenario::{ClientSpec, Scenario, RESOURCE_NODE};

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

/// A design on the design API: node type `N`, client protocol `P`, and how their settings
/// come from the scenario.
pub struct NodeDesign<N: LockNode, P: ClientProtocol> {
    /// The nodes' settings (the same for every node and every start).
    pub node_config: fn(&Scenario) -> N::Config,
    /// A client's protocol, made at each start of the client.
    pub client: fn(&Scenario, &ClientSpec, ClientInfo) -> P,
}

impl<N, P> SimDesign for NodeDesign<N, P>
where
    N: LockNode,
    P: ClientProtocol + 'static,
{
    fn start_service(&self, cluster: &Cluster<'_>) {
        let world = cluster.world;
        let config = (self.node_config)(&world.scenario);
        for (index, name) in world.lease_nodes().into_iter().enumerate() {
            let (w, n, config) = (Arc::clone(world), name.clone(), config.clone());
            runner::start_node(&name, move || {
                design_node::run::<N>(Arc::clone(&w), n.clone(), index, config.clone())
            });
        }
    }

    fn start_client(&self, cluster: &Cluster<'_>, name: &str, index: usize) {
        let (w, make) = (Arc::clone(cluster.world), self.client);
        runner::start_node(name, move || client::run(Arc::clone(&w), index, make));
    }
}

/// A resource as the harness runs it (`[resource] mode`).
pub trait SimResource: Send + Sync {
    /// Start the `resource` node, which restarts after a crash with its state intact.
    fn start(&self, cluster: &Cluster<'_>);
}

/// A resource on the design API: its state machine `R` and how its settings come from the
/// scenario.
pub struct ResourceDesign<R: FencedResource> {
    /// The resource's settings.
    pub config: fn(&Scenario) -> R::Config,
}

impl<R: FencedResource> SimResource for ResourceDesign<R> {
    fn start(&self, cluster: &Cluster<'_>) {
        let world = Arc::clone(cluster.world);
        // One instance for the whole run: a crash of the node loses nothing of it.
        let store = Arc::new(Mutex::new(R::new(&(self.config)(&world.scenario))));
        runner::start_node(RESOURCE_NODE, move || {
            resource_node::run(Arc::clone(&world), Arc::clone(&store))
        });
    }
}
