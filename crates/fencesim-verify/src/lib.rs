//! `fencesim verify`: every schedule of a small configuration of a design's own code, under an
//! asynchronous fault model, explored breadth-first, with the shortest counterexample.
//!
//! Simulation samples schedules; this enumerates them. The nodes and clients it runs are the
//! design's own state machines behind the same sans-IO driver the simulator uses
//! (`fencesim-driver`), the clients' workload is the simulator's ([`fencesim_workload`]), and
//! the histories it judges are read by the same checker, so it checks the code `fencesim run`
//! simulates and not a model of it. What it adds is the scheduler: instead of madsim's seeded
//! clock and network, a search that tries every order of deliveries, losses, duplications,
//! timers and crashes ([`world`] gives the fault model; [`search`] the search). Time is
//! unknown to it: each agent's clock moves only when its own timer fires, so only the order
//! of each agent's own deadlines is kept. Kleppmann (2016)'s point is that fencing makes
//! safety independent of timing; this checks that claim for every order of events within
//! the bounds, as TLC and stateright check a model's.
#![deny(missing_docs)]

pub mod bounds;
pub mod client;
pub mod concretise;
pub mod fingerprint;
pub mod kept;
pub mod linear;
pub mod net;
pub mod node;
pub mod record;
pub mod report;
pub mod resource;
pub mod search;
mod seen;
pub mod trace;
pub mod world;

pub use bounds::Bounds;
pub use report::{Counterexample, Ending, Outcome};
pub use resource::VerifyResource;
pub use search::{CHECKED, NOT_CHECKED};

use std::sync::Arc;

use fencesim_design::Design;
use fencesim_scenario::Scenario;

use world::{Model, Setup};

/// How a design's states are explored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Each state copied to make its successors, each distinct state explored once.
    StateHashing,
    /// Each state rebuilt from the initial state; no two schedules merged.
    ReExecution,
}

impl Strategy {
    /// In words.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::StateHashing => "state hashing",
            Strategy::ReExecution => "re-execution from the initial state",
        }
    }
}

/// A design as the search runs it: every [`Design`] is one.
pub trait VerifyDesign: Send + Sync {
    /// How its states are explored.
    fn strategy(&self) -> Strategy;
    /// Explore every schedule of `scenario` (parsed, so its settings are typed) within
    /// `bounds`, its resource made by `resource`, on `jobs` threads (the outcome is the same
    /// for any number); `stop` is asked between batches of states.
    fn verify(
        &self,
        scenario: &Scenario,
        resource: &'static dyn VerifyResource,
        bounds: &Bounds,
        jobs: usize,
        stop: &dyn Fn() -> bool,
    ) -> Outcome;
}

impl<D: Design> VerifyDesign for D {
    fn strategy(&self) -> Strategy {
        match self.explorable() {
            Some(_) => Strategy::StateHashing,
            None => Strategy::ReExecution,
        }
    }

    fn verify(
        &self,
        scenario: &Scenario,
        resource: &'static dyn VerifyResource,
        bounds: &Bounds,
        jobs: usize,
        stop: &dyn Fn() -> bool,
    ) -> Outcome {
        let settings = scenario
            .lock_service
            .settings
            .get::<D::Settings>()
            .expect("[lock_service] has no settings of its design: the scenario was not parsed")
            .clone();
        let client_settings = scenario
            .clients
            .iter()
            .map(|c| {
                c.settings
                    .get::<D::ClientSettings>()
                    .expect("a client has no settings of its design: the scenario was not parsed")
                    .clone()
            })
            .collect();
        let resource_settings = scenario.resource.settings.clone();
        let resource: Arc<dyn Fn() -> Box<dyn resource::DynResource> + Send + Sync> =
            Arc::new(move || resource.make(&resource_settings));
        let model = Model::<D> {
            setup: Setup::new(scenario.clone(), bounds.clone()),
            config: D::node_config(&settings),
            settings,
            client_settings,
            explorable: self.explorable(),
            make_resource: resource,
        };
        search::Search::new(&model).run(jobs, stop)
    }
}
