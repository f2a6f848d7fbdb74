//! proptest strategies for fault schedules (feature `proptest`), for property tests in a
//! user's own test suite: "whatever these faults do, my design stays safe".
//!
//! The faults are the scripted faults of `[[faults]]`, aimed at the scenario's own nodes, at
//! times inside its run and with lengths on the scale of its leases, so that they matter. When
//! a property fails, proptest shrinks the schedule (fewer faults, earlier, shorter), and
//! [`crate::to_toml`] turns the failing scenario into a file `fencesim run` reproduces.
//!
//! ```ignore
//! use fencesim_scenario::strategies::with_fault_schedule;
//! proptest! {
//!     #[test]
//!     fn fenced_design_is_safe(s in with_fault_schedule(&base(), 6)) {
//!         let outcome = fencesim_sim::run(&s, 0);
//!         let result = fencesim_checker::check(&outcome.history);
//!         prop_assert!(result.violations.is_empty(), "{}", fencesim_scenario::to_toml(&s));
//!     }
//! }
//! ```

use proptest::prelude::*;

use crate::fault::{Action, Cut, Fault, LinkSel, Trigger};
use crate::model::{LatencyRange, MessageKind, NodeEvent, Scenario};

/// One fault for `scenario`: a pause, crash, isolation, majority/minority partition, clock
/// jump, skew or drift of one of its nodes, a hold of one message, or loss, duplication,
/// extra latency or reordering on every link. It starts in the first three quarters of the
/// run (simulated ms), at a time or (for a pause, a crash or a hold) at one of the node's
/// events, and lasts from 1 ms to twice the longest TTL.
pub fn fault(scenario: &Scenario) -> BoxedStrategy<Fault> {
    let nodes = scenario.node_names();
    let clients: Vec<String> = scenario.clients.iter().map(|c| c.name.clone()).collect();
    let last_start_ms = (scenario.duration_ms * 3 / 4).max(1);
    let ttl_ms = scenario
        .clients
        .iter()
        .map(|c| c.ttl_ms)
        .max()
        .unwrap_or(1000)
        .max(scenario.lock_service.max_ttl_ms.min(60_000));
    let at = move || (0..last_start_ms).prop_map(|at_ms| Trigger::At { at_ms });
    let length = move || 1..=2 * ttl_ms;
    let node = || prop::sample::select(nodes.clone());
    let timed = |action: BoxedStrategy<Action>| {
        (action, at(), length())
            .prop_map(|(action, trigger, ms)| lasting(action, trigger, ms))
            .boxed()
    };
    let client_event = (prop::sample::select(clients.clone()), event_trigger());
    let paused_client = client_event
        .clone()
        .prop_flat_map(move |(node, trigger)| {
            (1..=2 * ttl_ms)
                .prop_map(move |ms| lasting(Action::Pause { node: node.clone() }, trigger, ms))
        })
        .boxed();
    let held_write = (prop::sample::select(clients), 1..=20u64, length())
        .prop_map(|(from, nth, ms)| Fault {
            action: Action::Hold {
                from,
                message: MessageKind::Write,
                nth,
                copy_ms: None,
            },
            trigger: Trigger::At { at_ms: 0 },
            duration_ms: Some(ms),
        })
        .boxed();
    let halves = partition_halves(scenario.node_names());
    prop_oneof![
        timed(node().prop_map(|node| Action::Pause { node }).boxed()),
        paused_client,
        timed(node().prop_map(|node| Action::Crash { node }).boxed()),
        timed(
            node()
                .prop_map(|n| Action::Partition {
                    cut: Cut::Isolate(n)
                })
                .boxed()
        ),
        timed(halves),
        (node(), -2 * ttl_ms as i64..=2 * ttl_ms as i64, at()).prop_map(
            |(node, delta_ms, trigger)| {
                Fault {
                    action: Action::ClockJump { node, delta_ms },
                    trigger,
                    duration_ms: None,
                }
            }
        ),
        timed(
            (node(), -2 * ttl_ms as i64..=2 * ttl_ms as i64)
                .prop_map(|(node, offset_ms)| Action::ClockSkew { node, offset_ms })
                .boxed()
        ),
        timed(
            (node(), -50_000i64..=50_000)
                .prop_map(|(node, ppm)| Action::ClockDrift { node, ppm })
                .boxed()
        ),
        held_write,
        timed(
            (0.05..=0.9f64)
                .prop_map(|rate| Action::Loss {
                    link: LinkSel::default(),
                    rate
                })
                .boxed()
        ),
        timed(
            (0.05..=0.9f64)
                .prop_map(|rate| Action::Duplicate {
                    link: LinkSel::default(),
                    rate
                })
                .boxed()
        ),
        timed(
            (1..=500u64)
                .prop_map(|max_ms| Action::Latency {
                    link: LinkSel::default(),
                    latency_ms: LatencyRange { min_ms: 1, max_ms },
                })
                .boxed()
        ),
        timed(
            (1..=200u64)
                .prop_map(|window_ms| Action::Reorder { window_ms })
                .boxed()
        ),
    ]
    .boxed()
}

/// Up to `max_faults` faults for `scenario` ([`fault`]); shrinks toward fewer.
pub fn fault_schedule(scenario: &Scenario, max_faults: usize) -> BoxedStrategy<Vec<Fault>> {
    prop::collection::vec(fault(scenario), 0..=max_faults).boxed()
}

/// `scenario` with its `[[faults]]` replaced by a generated schedule and no `[nemesis]`.
pub fn with_fault_schedule(scenario: &Scenario, max_faults: usize) -> BoxedStrategy<Scenario> {
    let base = scenario.clone();
    fault_schedule(scenario, max_faults)
        .prop_map(move |faults| {
            let mut s = base.clone();
            s.faults = faults;
            s.nemesis = None;
            s
        })
        .boxed()
}

/// Before a client's write or renew, or after its grant: where a pause does the most harm.
fn event_trigger() -> impl Strategy<Value = Trigger> + Clone {
    let nth = 1..=20u64;
    prop_oneof![
        nth.clone().prop_map(|nth| Trigger::Before {
            event: NodeEvent::Write,
            nth,
            count_from_ms: 0,
        }),
        nth.clone().prop_map(|nth| Trigger::Before {
            event: NodeEvent::Renew,
            nth,
            count_from_ms: 0,
        }),
        nth.prop_map(|nth| Trigger::After {
            event: NodeEvent::Grant,
            nth,
            count_from_ms: 0,
        }),
    ]
}

/// Split every node into a majority and the rest (Jepsen's partition-random-halves).
fn partition_halves(nodes: Vec<String>) -> BoxedStrategy<Action> {
    let majority = nodes.len() / 2 + 1;
    Just(nodes)
        .prop_shuffle()
        .prop_map(move |mut shuffled| {
            let minority = shuffled.split_off(majority.min(shuffled.len()));
            Action::Partition {
                cut: Cut::Groups(vec![shuffled, minority]),
            }
        })
        .boxed()
}

fn lasting(action: Action, trigger: Trigger, ms: u64) -> Fault {
    Fault {
        action,
        trigger,
        duration_ms: Some(ms),
    }
}
