//! Scripted faults: when they fire and how.
//!
//! A fault fires at a true time (`at_ms`, from a task on the `nemesis` node) or at an event of
//! its node (`after = "grant"`, `before = "write"`, with `nth`). madsim's pause only takes
//! effect when the paused node's task next yields, so event-triggered faults land at explicit
//! safepoints: [`Nemesis::safepoint`] is called by the nodes' loops at each event, and yields
//! once when it paused the caller's own node.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencesim_history::{Event, EventKind, Phase};
use fencesim_scenario::{Fault, LatencyRange, NodeEvent, Trigger};

use crate::recorder::true_ns;
use crate::transport::NEMESIS_NODE;
use crate::world::World;

/// Whether a safepoint is just before or just after its event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum When {
    Before,
    After,
}

/// A pause waiting for the `nth` occurrence of an event of its node.
#[derive(Clone, Debug)]
struct EventPause {
    node: String,
    when: When,
    event: NodeEvent,
    nth: u64,
    duration_ms: u64,
}

pub(crate) struct Nemesis {
    event_pauses: Vec<EventPause>,
    seen: Mutex<BTreeMap<(String, When, NodeEvent), u64>>,
    /// Pauses in force per node.
    pause_depth: Mutex<BTreeMap<String, i64>>,
    carrier: madsim::runtime::NodeHandle,
}

impl Nemesis {
    /// Collect the event-triggered faults; creates the `nemesis` node (call inside the runtime).
    pub fn new(faults: &[Fault]) -> Self {
        let event_pauses = faults
            .iter()
            .filter_map(|f| match f {
                Fault::Pause {
                    node,
                    trigger,
                    duration_ms,
                } => {
                    let (when, event, nth) = match *trigger {
                        Trigger::At { .. } => return None,
                        Trigger::Before { event, nth } => (When::Before, event, nth),
                        Trigger::After { event, nth } => (When::After, event, nth),
                    };
                    Some(EventPause {
                        node: node.clone(),
                        when,
                        event,
                        nth,
                        duration_ms: *duration_ms,
                    })
                }
                _ => None,
            })
            .collect();
        let carrier = madsim::runtime::Handle::current()
            .create_node()
            .name(NEMESIS_NODE)
            .build();
        Nemesis {
            event_pauses,
            seen: Mutex::new(BTreeMap::new()),
            pause_depth: Mutex::new(BTreeMap::new()),
            carrier,
        }
    }

    /// Arm the time-triggered faults. One due at time 0 starts now, before any client has run,
    /// so it covers the whole run; later ones start from a task on the nemesis node.
    pub fn schedule(world: &Arc<World>) {
        for fault in &world.scenario.faults {
            let start_ms = match fault {
                Fault::Pause {
                    trigger: Trigger::At { at_ms },
                    ..
                } => *at_ms,
                Fault::Latency { at_ms, .. } => *at_ms,
                _ => continue,
            };
            if start_ms == 0 {
                start(world, fault);
                continue;
            }
            let (w, fault) = (Arc::clone(world), fault.clone());
            world.nemesis.carrier.spawn(async move {
                sleep_until_ms(start_ms).await;
                start(&w, &fault);
            });
        }
    }

    /// Add `delta` to the pauses in force on `node`; returns the new count.
    fn paused(&self, node: &str, delta: i64) -> i64 {
        let mut depth = self.pause_depth.lock().expect("pause depth");
        let d = depth.entry(node.to_owned()).or_insert(0);
        *d += delta;
        *d
    }

    /// Called by `node` at an event; fires the faults waiting for this occurrence.
    pub async fn safepoint(world: &Arc<World>, node: &str, when: When, event: NodeEvent) {
        let nemesis = &world.nemesis;
        if !nemesis.event_pauses.iter().any(|p| p.node == node) {
            return;
        }
        let nth = {
            let mut seen = nemesis.seen.lock().expect("nemesis counts");
            let n = seen.entry((node.to_owned(), when, event)).or_insert(0);
            *n += 1;
            *n
        };
        let due: Vec<u64> = nemesis
            .event_pauses
            .iter()
            .filter(|p| p.node == node && p.when == when && p.event == event && p.nth == nth)
            .map(|p| p.duration_ms)
            .collect();
        for duration_ms in &due {
            pause(world, node, *duration_ms);
        }
        if !due.is_empty() {
            // The pause takes hold the next time this task is scheduled.
            madsim::task::yield_now().await;
        }
    }
}

/// Freeze `node` now and thaw it `duration_ms` later (from the nemesis node, which never pauses).
fn pause(world: &Arc<World>, node: &str, duration_ms: u64) {
    record(
        world,
        EventKind::Pause,
        Phase::Start,
        Some(node),
        format!("{duration_ms} ms"),
    );
    world.nemesis.paused(node, 1);
    madsim::runtime::Handle::current().pause(node);
    let (w, node) = (Arc::clone(world), node.to_owned());
    world.nemesis.carrier.spawn(async move {
        madsim::time::sleep(Duration::from_millis(duration_ms)).await;
        // Overlapping pauses: madsim's pause is a flag, so thaw only when the last one ends.
        if w.nemesis.paused(&node, -1) == 0 {
            madsim::runtime::Handle::current().resume(node.as_str());
        }
        record(
            &w,
            EventKind::Pause,
            Phase::End,
            Some(&node),
            format!("{duration_ms} ms"),
        );
    });
}

/// Begin a time-triggered fault; its end is scheduled on the nemesis node.
fn start(world: &Arc<World>, fault: &Fault) {
    match fault {
        Fault::Pause {
            node, duration_ms, ..
        } => pause(world, node, *duration_ms),
        Fault::Latency {
            duration_ms,
            latency_ms,
            ..
        } => latency_window(world, *duration_ms, *latency_ms),
        Fault::Hold { .. } => unreachable!("holds are network rules, not timed faults"),
    }
}

/// Change the network's latency now and restore the previous range `duration_ms` later.
fn latency_window(world: &Arc<World>, duration_ms: u64, latency: LatencyRange) {
    let describe = |l: LatencyRange| format!("latency {}..={} ms", l.min_ms, l.max_ms);
    let before = world.net.latency();
    world.net.set_latency(latency);
    record(
        world,
        EventKind::Latency,
        Phase::Start,
        None,
        describe(latency),
    );
    let w = Arc::clone(world);
    world.nemesis.carrier.spawn(async move {
        madsim::time::sleep(Duration::from_millis(duration_ms)).await;
        w.net.set_latency(before);
        record(&w, EventKind::Latency, Phase::End, None, describe(before));
    });
}

fn record(world: &World, kind: EventKind, phase: Phase, target: Option<&str>, detail: String) {
    world.event(Event {
        node: NEMESIS_NODE.to_owned(),
        phase: Some(phase),
        target: target.map(str::to_owned),
        detail: Some(detail),
        ..Event::new(kind)
    });
}

/// Sleep until true time reaches `at_ms`.
pub(crate) async fn sleep_until_ms(at_ms: u64) {
    let wait_ns = (at_ms * 1_000_000).saturating_sub(true_ns());
    if wait_ns > 0 {
        madsim::time::sleep(Duration::from_nanos(wait_ns)).await;
    }
}
