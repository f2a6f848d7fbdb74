//! Running one seed: a fresh madsim runtime on a fresh thread, the cluster built from the
//! scenario, and the history kept even when the simulation panics.

use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencesim_design::TokenKind;
use fencesim_history::{Header, History, TokenOrder, FORMAT_VERSION};
use fencesim_scenario::{Action, Scenario};
use serde::{Deserialize, Serialize};

use crate::clock::Clocks;
use crate::design::{Cluster, SimDesign, SimResource};
use crate::guard::{guarded, panic_text, stop_on_failure};
use crate::nemesis::{sleep_until_ms, Nemesis};
use crate::random_nemesis::{self, NemesisPlan};
use crate::recorder::{true_ns, Recorder};
use crate::seeds::{self, Stream};
use crate::transport::{HoldRule, NetStats, Network};
use crate::world::World;

/// How a simulation failed (as opposed to finding a violation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// Code inside the simulation panicked (a broken invariant).
    Panic,
    /// Simulated time ran past the run's limit.
    TimeLimit,
    /// Every task was blocked with no timer pending.
    Deadlock,
    /// Two runs of the same scenario and seed recorded different histories.
    Nondeterministic,
    /// The run recorded more than the scenario's `max_records` records, or its history
    /// could not grow in the memory there is.
    HistoryLimit,
}

/// The simulation itself failed; the history up to that point is still returned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimFailure {
    /// What kind of failure.
    pub kind: FailureKind,
    /// The panic message.
    pub message: String,
}

/// The result of simulating one seed.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// Everything recorded (up to the failure, if there was one).
    pub history: History,
    /// `Some` if the simulation panicked, deadlocked or ran out of time.
    pub failure: Option<SimFailure>,
    /// What happened to messages (zero if the run failed before the end).
    pub net_stats: NetStats,
    /// What the random nemesis drew, if the scenario has one.
    pub nemesis: Option<NemesisPlan>,
}

/// The history header's `token_order` for a design's tokens: fencing tokens compare by value,
/// opaque values only by when they were acquired.
fn token_order(tokens: TokenKind) -> TokenOrder {
    match tokens {
        TokenKind::Fencing => TokenOrder::Value,
        TokenKind::Opaque => TokenOrder::Acquisition,
    }
}

/// Simulate `scenario` under root seed `seed`, its lock service and clients run by `design`
/// and its `resource` node by `resource` (the registry picks both by the scenario's `kind` and
/// `mode`). Deterministic: the same scenario, seed and binary give the same history, byte for
/// byte once serialized.
pub fn run(
    scenario: &Scenario,
    seed: u64,
    design: &'static dyn SimDesign,
    resource: &'static dyn SimResource,
) -> RunOutcome {
    let nemesis = scenario.nemesis.as_ref().map(|spec| {
        random_nemesis::plan(spec, scenario, seed, scenario.lock_service.shape.has_leader)
    });
    let mut scenario_with_plan = scenario.clone();
    if let Some(plan) = &nemesis {
        scenario_with_plan
            .faults
            .extend(plan.faults.iter().cloned());
    }
    let scenario = &scenario_with_plan;
    let recorder = Arc::new(Recorder::new(scenario.max_records));
    let stats = Arc::new(Mutex::new(NetStats::default()));
    let (sc, rec, st) = (scenario.clone(), Arc::clone(&recorder), Arc::clone(&stats));
    // One fresh thread per seed: madsim's runtime is per thread, and a panic inside it must
    // not take the caller down. The thread is outside the simulation; nothing inside spawns one.
    #[allow(clippy::disallowed_methods)]
    let joined = std::thread::Builder::new()
        .name(format!("fencesim-seed-{seed}"))
        .spawn(move || {
            let config = madsim::Config::default();
            let mut rt = madsim::runtime::Runtime::with_seed_and_config(
                seeds::sub_seed(seed, Stream::Runtime),
                config,
            );
            rt.set_time_limit(time_limit(&sc));
            // The main future itself is not guarded: were it to panic, the run must end at
            // once rather than wait for the nodes' tasks to run down to the time limit.
            let ran = std::panic::catch_unwind(AssertUnwindSafe(|| {
                rt.block_on(simulate(sc, seed, design, resource, rec, st))
            }));
            // A task's panic, caught before madsim saw it, is the cause even if the runtime
            // then failed too (a deadlock of the tasks left waiting on the one that died).
            match (crate::guard::take_failure(), ran) {
                (Some(message), _) => Err(message),
                (None, Err(payload)) => Err(panic_text(&*payload)),
                (None, Ok(())) => Ok(()),
            }
        })
        .map_err(|e| e.to_string())
        .and_then(|t| {
            t.join()
                .unwrap_or_else(|payload| Err(panic_text(&*payload)))
        });
    let failure = joined.err().map(classify);
    let history = History {
        header: Header {
            format_version: FORMAT_VERSION,
            scenario: scenario.name.clone(),
            seed,
            tool_version: env!("CARGO_PKG_VERSION").to_owned(),
            token_order: token_order(scenario.lock_service.shape.tokens),
            untimed: false,
        },
        entries: recorder.take(),
    };
    let net_stats = *stats.lock().unwrap_or_else(|e| e.into_inner());
    RunOutcome {
        history,
        failure,
        net_stats,
        nemesis,
    }
}

/// The run ends by itself at `duration_ms`; the limit only catches a runaway simulation.
fn time_limit(scenario: &Scenario) -> Duration {
    Duration::from_millis(
        scenario
            .duration_ms
            .saturating_mul(2)
            .saturating_add(10_000),
    )
}

fn classify(message: String) -> SimFailure {
    let kind = if message.contains("time limit exceeded") {
        FailureKind::TimeLimit
    } else if message.contains("all tasks will block forever") {
        FailureKind::Deadlock
    } else if message.contains("history limit exceeded") || message.starts_with("out of memory") {
        FailureKind::HistoryLimit
    } else {
        FailureKind::Panic
    };
    SimFailure { kind, message }
}

/// The whole run, inside the runtime: build the nodes, start the clients and faults, and stop
/// when the clients are done and the network is empty, or at `duration_ms`.
async fn simulate(
    scenario: Scenario,
    seed: u64,
    design: &dyn SimDesign,
    resource: &dyn SimResource,
    recorder: Arc<Recorder>,
    stats: Arc<Mutex<NetStats>>,
) {
    let clocks = Arc::new(Clocks::default());
    let holds = scenario
        .faults
        .iter()
        .filter_map(|f| match &f.action {
            Action::Hold {
                from,
                message,
                nth,
                copy_ms,
            } => Some(HoldRule {
                from: from.clone(),
                kind: *message,
                nth: *nth,
                duration_ms: f.duration_ms.unwrap_or(0),
                copy_ms: *copy_ms,
            }),
            _ => None,
        })
        .collect();
    let owned_names = scenario.node_names();
    let names: Vec<&str> = owned_names.iter().map(String::as_str).collect();
    let net_rng = seeds::rng(seed, Stream::Network);
    let (net, inboxes) = Network::new(
        &names,
        scenario.network.clone(),
        net_rng,
        holds,
        Arc::clone(&recorder),
        Arc::clone(&clocks),
    );
    let nemesis = Nemesis::new(&scenario.faults);
    let world = Arc::new(World::new(
        scenario, seed, recorder, clocks, net, nemesis, inboxes,
    ));

    // Every node's main task is its `init`, so that madsim's restart runs it afresh.
    let cluster = Cluster::new(&world);
    design.start_service(&cluster);
    resource.start(&cluster);
    for (index, spec) in world.scenario.clients.iter().enumerate() {
        design.start_client(&cluster, &spec.name, index);
    }
    Nemesis::schedule(&world);

    // A task that panics (a design's bug, the history limit) ends the run here, at once.
    stop_on_failure(run_to_end(&world, &stats)).await;
    // End every node's tasks before the runtime goes: madsim does not free tasks still pending
    // when it is dropped (servers waiting for requests, timers), so without this each seed would
    // leak them and a long sweep's memory would grow with the number of seeds.
    let handle = madsim::runtime::Handle::current();
    for node in world.scenario.node_names() {
        handle.kill(node.as_str());
    }
    handle.kill(crate::transport::NEMESIS_NODE);
}

/// Wait for the clients, the random nemesis's recovery window and the messages in flight,
/// within `duration_ms`; then keep the network's counts.
async fn run_to_end(world: &World, stats: &Mutex<NetStats>) {
    let deadline_ns = world.scenario.duration_ms * 1_000_000;
    let clients = world.scenario.clients.len();
    let all_done = async {
        let mut done = BTreeSet::new();
        while done.len() < clients {
            match world.next_done().await {
                Some(name) => done.insert(name),
                None => break,
            };
        }
    };
    let _ = crate::timer::timeout(Duration::from_nanos(deadline_ns), all_done).await;
    // A random nemesis's run lasts at least through the final heal and its recovery window,
    // even if the clients stopped early: the progress check must see that window.
    if let Some(n) = &world.scenario.nemesis {
        let window_ms = n.recovery_periods * world.scenario.lock_service.max_ttl_ms;
        sleep_until_ms((n.heal_at_ms + window_ms).min(world.scenario.duration_ms)).await;
    }
    // Let messages still in the network land (a held write may arrive after its sender quit).
    while world.net.in_flight() > 0 && true_ns() < deadline_ns {
        crate::timer::sleep(Duration::from_millis(10)).await;
    }
    *stats.lock().expect("stats") = world.net.stats();
}

/// Create node `name` whose main task is `init()`, run again by madsim on every restart.
pub(crate) fn start_node<F: std::future::Future + 'static>(
    name: &str,
    init: impl Fn() -> F + Send + Sync + 'static,
) {
    madsim::runtime::Handle::current()
        .create_node()
        .name(name)
        .init(move || guarded(init()))
        .build();
}
