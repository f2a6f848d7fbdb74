//! The nemesis: when scripted faults fire, what they do, and how they are undone.
//!
//! A fault fires at a true time (`at_ms`, from a task on the `nemesis` node, which no fault
//! touches) or at an event of its node (`after = "grant"`, `before = "write"`, with `nth`).
//! madsim's pause only takes effect when the paused node's task next yields, so
//! event-triggered faults land at explicit safepoints: [`Nemesis::safepoint`] is called by the
//! nodes' loops at each event, and yields once when a fault struck the caller's own node.
//! Every action is recorded as an event with `phase` start and end (both at once for
//! instantaneous ones such as a clock jump).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencesim_history::{Event, EventKind, Phase};
use fencesim_scenario::{Action, Cut, Fault, LatencyRange, NodeEvent, Trigger, LEADER};

use crate::message::Message;
use crate::recorder::true_ns;
use crate::transport::{Rule, NEMESIS_NODE};
use crate::world::World;

/// Whether a safepoint is just before or just after its event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum When {
    Before,
    After,
}

/// A fault waiting for the `nth` occurrence of an event of its node, counted from true time
/// `count_from_ms`.
#[derive(Clone, Debug)]
struct EventTrigger {
    fault: usize,
    node: String,
    when: When,
    event: NodeEvent,
    nth: u64,
    count_from_ms: u64,
}

pub(crate) struct Nemesis {
    triggers: Vec<EventTrigger>,
    /// Per trigger (same index), the occurrences of its event it has counted so far.
    seen: Mutex<Vec<u64>>,
    /// Pause faults in force per node (madsim's pause is a flag; overlapping pauses nest).
    pauses: Mutex<BTreeMap<String, BTreeSet<u64>>>,
    /// Keepalive stalls in force per client (K18), nesting as pauses do.
    stalls: Mutex<BTreeMap<String, BTreeSet<u64>>>,
    /// Faults in force, by activation number, until their timer, a heal, a restart or the
    /// final heal ends them.
    active: Mutex<BTreeMap<u64, Action>>,
    next_activation: Mutex<u64>,
    /// Strobes whose flip is on (their wall-clock step is in force).
    strobes_on: Mutex<BTreeSet<u64>>,
    /// Set by the final heal: no fault starts after it (an event-triggered fault whose
    /// occurrence comes late would otherwise break the recovery window).
    healed: AtomicBool,
    carrier: madsim::runtime::NodeHandle,
}

impl Nemesis {
    /// Collect the event-triggered faults; creates the `nemesis` node (call inside the runtime).
    pub fn new(faults: &[Fault]) -> Self {
        let triggers: Vec<EventTrigger> = faults
            .iter()
            .enumerate()
            .filter_map(|(fault, f)| {
                let (when, event, nth, count_from_ms) = match f.trigger {
                    Trigger::At { .. } => return None,
                    Trigger::Before {
                        event,
                        nth,
                        count_from_ms,
                    } => (When::Before, event, nth, count_from_ms),
                    Trigger::After {
                        event,
                        nth,
                        count_from_ms,
                    } => (When::After, event, nth, count_from_ms),
                };
                let node = f.action.node()?.to_owned();
                Some(EventTrigger {
                    fault,
                    node,
                    when,
                    event,
                    nth,
                    count_from_ms,
                })
            })
            .collect();
        let carrier = madsim::runtime::Handle::current()
            .create_node()
            .name(NEMESIS_NODE)
            .build();
        Nemesis {
            seen: Mutex::new(vec![0; triggers.len()]),
            triggers,
            pauses: Mutex::new(BTreeMap::new()),
            stalls: Mutex::new(BTreeMap::new()),
            active: Mutex::new(BTreeMap::new()),
            next_activation: Mutex::new(0),
            strobes_on: Mutex::new(BTreeSet::new()),
            healed: AtomicBool::new(false),
            carrier,
        }
    }

    /// Run `task` on the nemesis node, which no fault pauses or kills.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.carrier.spawn(crate::guard::guarded(task));
    }

    /// Arm the time-triggered faults. One due at time 0 starts now, before any client has run,
    /// so it covers the whole run; later ones start from a task on the nemesis node.
    pub fn schedule(world: &Arc<World>) {
        // Faults due at the same instant start in file order, from one task: separate tasks
        // would start in an order the scheduler draws from the seed.
        let mut by_time: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for (id, fault) in world.scenario.faults.iter().enumerate() {
            match (&fault.action, fault.trigger) {
                (Action::Hold { .. }, _) => {} // a network rule, armed at start
                (_, Trigger::At { at_ms }) => by_time.entry(at_ms).or_default().push(id),
                _ => {}
            }
        }
        for (at_ms, ids) in by_time {
            if at_ms == 0 {
                ids.iter().for_each(|id| start(world, *id));
                continue;
            }
            let w = Arc::clone(world);
            world.nemesis.spawn(async move {
                sleep_until_ms(at_ms).await;
                ids.iter().for_each(|id| start(&w, *id));
            });
        }
    }

    /// Whether an event-triggered fault waits for an event of `node` (if not, its safepoints
    /// do nothing).
    pub fn watches(&self, node: &str) -> bool {
        self.triggers.iter().any(|t| t.node == node)
    }

    /// Called by `node` at an event; fires the faults waiting for this occurrence.
    pub async fn safepoint(world: &Arc<World>, node: &str, when: When, event: NodeEvent) {
        let nemesis = &world.nemesis;
        if !nemesis.watches(node) {
            return;
        }
        let now_ms = true_ns() / 1_000_000;
        // Each trigger waiting for this event counts it once it has started counting.
        let due: Vec<usize> = {
            let mut seen = nemesis.seen.lock().expect("nemesis counts");
            nemesis
                .triggers
                .iter()
                .zip(seen.iter_mut())
                .filter(|(t, _)| t.node == node && t.when == when && t.event == event)
                .filter(|(t, _)| t.count_from_ms <= now_ms)
                .filter_map(|(t, counted)| {
                    *counted += 1;
                    (*counted == t.nth).then_some(t.fault)
                })
                .collect()
        };
        for id in &due {
            start(world, *id);
        }
        if !due.is_empty() {
            // A pause or crash of this very node takes hold the next time this task is polled.
            madsim::task::yield_now().await;
        }
    }

    /// A fresh number for one start of a fault.
    fn next_activation(&self) -> u64 {
        let mut next = self.next_activation.lock().expect("activations");
        *next += 1;
        *next
    }

    /// Record whether strobe `activation` has its flip on; returns whether it was on.
    fn strobe_flip(&self, activation: u64, on: bool) -> bool {
        let mut flipped = self.strobes_on.lock().expect("strobes");
        let was = flipped.contains(&activation);
        if on {
            flipped.insert(activation);
        } else {
            flipped.remove(&activation);
        }
        was
    }

    /// Whether the fault started as `activation` is still in force.
    fn is_active(&self, activation: u64) -> bool {
        self.active
            .lock()
            .expect("active faults")
            .contains_key(&activation)
    }

    /// Pause fault `id` is now in force on `node`.
    fn pause_started(&self, node: &str, id: u64) {
        self.pauses
            .lock()
            .expect("pauses")
            .entry(node.to_owned())
            .or_default()
            .insert(id);
    }

    /// Pause fault `id` on `node` is over; true if it was still in force and was the last
    /// one, so the node may run again. A crash forgets a node's pauses (madsim's restart
    /// clears its pause flag), so a pause that outlives a crash ends without effect.
    fn pause_ended(&self, node: &str, id: u64) -> bool {
        let mut pauses = self.pauses.lock().expect("pauses");
        let Some(ids) = pauses.get_mut(node) else {
            return false;
        };
        ids.remove(&id) && ids.is_empty()
    }

    /// Whether `client`'s keepalive is stalled now: it must not send renewals.
    pub fn keepalive_stalled(&self, client: &str) -> bool {
        self.stalls
            .lock()
            .expect("stalls")
            .get(client)
            .is_some_and(|ids| !ids.is_empty())
    }

    /// Stall fault `id` on `client` starts (`true`) or ends.
    fn set_stall(&self, client: &str, id: u64, on: bool) {
        let mut stalls = self.stalls.lock().expect("stalls");
        let ids = stalls.entry(client.to_owned()).or_default();
        if on {
            ids.insert(id);
        } else {
            ids.remove(&id);
        }
    }

    /// A crashed node is no longer paused (madsim's restart clears the flag too).
    pub fn forget_pauses(&self, node: &str) {
        self.pauses.lock().expect("pauses").remove(node);
        // A restarted client is a new process: a keepalive stall of the old one ends with it.
        self.stalls.lock().expect("stalls").remove(node);
    }
}

/// Begin fault `id`; if it lasts, schedule its undoing.
fn start(world: &Arc<World>, id: usize) {
    if world.nemesis.healed.load(Ordering::Relaxed) {
        return;
    }
    let mut fault = world.scenario.faults[id].clone();
    if fault.action.node() == Some(LEADER) {
        // Resolved now: the replica that leads at this moment (the first one if none does yet).
        let leader = world
            .leader()
            .unwrap_or_else(|| world.lease_nodes()[0].clone());
        fault.action = fault.action.retarget(&leader);
    }
    let kind = event_kind(&fault.action);
    let target = fault.action.node().map(str::to_owned);
    let activation = world.nemesis.next_activation();
    let undo = apply(world, id as u64, &fault, activation);
    let window_ms = match fault.action {
        Action::FinalHeal { window_ms } => Some(window_ms),
        _ => None,
    };
    world.event(Event {
        node: NEMESIS_NODE.into(),
        phase: Some(Phase::Start),
        target: target.clone().map(Into::into),
        detail: Some(describe(&fault)),
        window_ms,
        ..Event::new(kind)
    });
    let Some(undo) = undo else {
        record(
            world,
            kind,
            Phase::End,
            target.as_deref(),
            "instantaneous".into(),
        );
        return;
    };
    // Lasting: ended by its own timer, or earlier by a heal, a restart or the final heal.
    world
        .nemesis
        .active
        .lock()
        .expect("active faults")
        .insert(activation, fault.action.clone());
    if let Some(ms) = fault.duration_ms {
        let w = Arc::clone(world);
        world.nemesis.spawn(async move {
            crate::timer::sleep(Duration::from_millis(ms)).await;
            if w.nemesis
                .active
                .lock()
                .expect("active faults")
                .remove(&activation)
                .is_some()
            {
                let detail = undo.run(&w);
                record(&w, kind, Phase::End, target.as_deref(), detail);
            }
        });
    }
}

/// Record the end of every fault in force that `undone` says is over, and forget it (its own
/// timer, if any, then does nothing).
fn close(world: &World, undone: impl Fn(&Action) -> bool, detail: &str) {
    let closing: Vec<Action> = {
        let mut active = world.nemesis.active.lock().expect("active faults");
        let ids: Vec<u64> = active
            .iter()
            .filter(|(_, a)| undone(a))
            .map(|(id, _)| *id)
            .collect();
        ids.iter().filter_map(|id| active.remove(id)).collect()
    };
    for action in closing {
        record(
            world,
            event_kind(&action),
            Phase::End,
            action.node(),
            detail.to_owned(),
        );
    }
}

/// How to undo a fault that lasts.
enum Undo {
    Resume(String, u64),
    RemoveRules(u64),
    /// Take back a wall-clock step and a drift this fault added.
    Clock {
        node: String,
        wall_step_ms: i64,
        drift_ppm: i64,
    },
    /// End a strobe, taking back its flip if it is on.
    Strobe {
        node: String,
        offset_ms: i64,
        activation: u64,
    },
    Restart(String),
    /// End a keepalive stall.
    Unstall(String, u64),
}

impl Undo {
    /// Undo; returns a description for the end event.
    fn run(self, world: &Arc<World>) -> String {
        match self {
            Undo::Resume(node, id) => {
                // Overlapping pauses: thaw only when the last one ends.
                if world.nemesis.pause_ended(&node, id) && !world.net.is_down(&node) {
                    madsim::runtime::Handle::current().resume(node.as_str());
                }
                format!("{node} resumed")
            }
            Undo::RemoveRules(id) => {
                world.net.remove_rules(id);
                "ended".into()
            }
            Undo::Clock {
                node,
                wall_step_ms,
                drift_ppm,
            } => {
                // Take back only this fault's own change, so overlapping clock faults (and
                // jumps made meanwhile) compose.
                shift_clock(world, &node, -wall_step_ms, -drift_ppm);
                format!("{node} clock restored")
            }
            Undo::Strobe {
                node,
                offset_ms,
                activation,
            } => {
                if world.nemesis.strobe_flip(activation, false) {
                    shift_clock(world, &node, -offset_ms, 0);
                }
                format!("{node} clock restored")
            }
            Undo::Unstall(node, id) => {
                world.nemesis.set_stall(&node, id, false);
                format!("{node}'s keepalive runs again")
            }
            Undo::Restart(node) => {
                // Overlapping crashes: the first to end restarts the node; later ends find it
                // running and leave it be.
                if world.net.is_down(&node) {
                    world.restart(&node);
                    format!("{node} restarted")
                } else {
                    format!("{node} already running")
                }
            }
        }
    }
}

/// Do what the fault says, now; returns how to undo it if it lasts.
fn apply(world: &Arc<World>, id: u64, fault: &Fault, activation: u64) -> Option<Undo> {
    let now = true_ns();
    let net = &world.net;
    match &fault.action {
        Action::Pause { node } => {
            world.nemesis.pause_started(node, id);
            madsim::runtime::Handle::current().pause(node.as_str());
            Some(Undo::Resume(node.clone(), id))
        }
        Action::Hold { .. } => None,
        Action::HoldAll { message, from } => {
            let until_ns = now + fault.duration_ms.unwrap_or(0) * 1_000_000;
            net.add_rule(
                id,
                Rule::HoldAll {
                    kind: *message,
                    from: from.clone(),
                    until_ns,
                },
            );
            Some(Undo::RemoveRules(id))
        }
        Action::Latency { link, latency_ms } => {
            rule(world, id, Rule::Latency(link.clone(), *latency_ms))
        }
        Action::Loss { link, rate } => rule(world, id, Rule::Loss(link.clone(), *rate)),
        Action::Duplicate { link, rate } => rule(world, id, Rule::Duplicate(link.clone(), *rate)),
        Action::Reorder { window_ms } => rule(world, id, Rule::Reorder(*window_ms)),
        Action::Partition { cut } => rule(world, id, Rule::Cut(cut.clone())),
        Action::Heal => {
            net.heal_all();
            close(world, |a| matches!(a, Action::Partition { .. }), "healed");
            None
        }
        Action::ClockJump { node, delta_ms } => {
            world.clocks.update(node, |c| c.wall.step(now, *delta_ms));
            net.signal(node, Message::ClockChanged);
            None
        }
        Action::ClockSkew { node, offset_ms } => {
            let step = offset_ms - world.clocks.get(node).wall.offset_ms(now);
            shift_clock(world, node, step, 0);
            Some(Undo::Clock {
                node: node.clone(),
                wall_step_ms: step,
                drift_ppm: 0,
            })
        }
        Action::ClockDrift { node, ppm } => {
            shift_clock(world, node, 0, *ppm);
            Some(Undo::Clock {
                node: node.clone(),
                wall_step_ms: 0,
                drift_ppm: *ppm,
            })
        }
        Action::ClockStrobe {
            node,
            offset_ms,
            period_ms,
        } => {
            strobe(world, node, *offset_ms, *period_ms, activation);
            Some(Undo::Strobe {
                node: node.clone(),
                offset_ms: *offset_ms,
                activation,
            })
        }
        Action::Crash { node } => {
            world.crash(node);
            Some(Undo::Restart(node.clone()))
        }
        Action::StallRenewals { node } => {
            world.nemesis.set_stall(node, id, true);
            Some(Undo::Unstall(node.clone(), id))
        }
        Action::Deregister { node } => {
            // The maintenance job's request travels the network like any other, to each node
            // of the service (a design that reaps has one: the parser refuses `deregister`
            // without `ServiceShape::reaps`).
            for service_node in world.lease_nodes() {
                let holder = node.clone();
                net.send(
                    NEMESIS_NODE,
                    &service_node,
                    None,
                    None,
                    Message::Deregister { holder },
                );
            }
            None
        }
        Action::Restart { node } => {
            if !world.net.is_down(node) {
                // Restarting a running process loses its memory just as a crash does.
                world.crash(node);
            }
            world.restart(node);
            close(
                world,
                |a| matches!(a, Action::Crash { node: n } if n == node),
                "restarted",
            );
            None
        }
        Action::FinalHeal { .. } => {
            final_heal(world);
            None
        }
        Action::Restore {
            node,
            snapshot_at_ms,
        } => {
            world.crash(node);
            world.restore(node, snapshot_at_ms * 1_000_000);
            close(
                world,
                |a| matches!(a, Action::Crash { node: n } if n == node),
                "restored",
            );
            world.restart(node);
            None
        }
    }
}

/// End every fault: network rules, pauses, crashes, clock offsets and drift.
fn final_heal(world: &Arc<World>) {
    world.nemesis.healed.store(true, Ordering::Relaxed);
    let now = true_ns();
    world.net.clear_rules();
    world.net.disarm_holds();
    world.nemesis.pauses.lock().expect("pauses").clear();
    world.nemesis.stalls.lock().expect("stalls").clear();
    for node in world.scenario.node_names() {
        madsim::runtime::Handle::current().resume(node.as_str());
    }
    for node in world.net.down_nodes() {
        world.restart(&node);
    }
    for node in &world.scenario.node_names() {
        world.clocks.update(node, |c| {
            c.mono.set_drift(now, 0);
            c.wall.set_drift(now, 0);
            c.wall.set_offset(now, 0);
        });
        world.net.signal(node, Message::ClockChanged);
    }
    close(world, |_| true, "final heal");
}

fn rule(world: &World, id: u64, rule: Rule) -> Option<Undo> {
    world.net.add_rule(id, rule);
    Some(Undo::RemoveRules(id))
}

/// Flip `node`'s wall clock between `base` and `base + offset_ms` every `period_ms` until the
/// window ends; the fault's end puts it back at `base`.
/// Flip `node`'s wall clock by `offset_ms` and back every `period_ms` while the fault is in
/// force; the fault's end takes the flip back if it is on.
fn strobe(world: &Arc<World>, node: &str, offset_ms: i64, period_ms: u64, activation: u64) {
    let (w, node) = (Arc::clone(world), node.to_owned());
    world.nemesis.spawn(async move {
        // The first pass runs before the fault is marked active, so always flip once.
        for i in 0.. {
            if i > 0 && !w.nemesis.is_active(activation) {
                break;
            }
            let on = i % 2 == 0;
            w.nemesis.strobe_flip(activation, on);
            shift_clock(&w, &node, if on { offset_ms } else { -offset_ms }, 0);
            crate::timer::sleep(Duration::from_millis(period_ms)).await;
        }
    });
}

/// Step `node`'s wall clock by `step_ms` and add `drift_ppm` to both its clocks' drift, now.
fn shift_clock(world: &World, node: &str, step_ms: i64, drift_ppm: i64) {
    let now = true_ns();
    world.clocks.update(node, |c| {
        if step_ms != 0 {
            c.wall.step(now, step_ms);
        }
        if drift_ppm != 0 {
            c.mono.set_drift(now, c.mono.drift_ppm() + drift_ppm);
            c.wall.set_drift(now, c.wall.drift_ppm() + drift_ppm);
        }
    });
    world.net.signal(node, Message::ClockChanged);
}

fn event_kind(action: &Action) -> EventKind {
    match action {
        Action::Pause { .. } => EventKind::Pause,
        Action::Hold { .. } | Action::HoldAll { .. } => EventKind::Hold,
        Action::Latency { .. } => EventKind::Latency,
        Action::Loss { .. } => EventKind::Loss,
        Action::Duplicate { .. } => EventKind::Duplicate,
        Action::Reorder { .. } => EventKind::Reorder,
        Action::Partition { .. } => EventKind::Partition,
        Action::Heal => EventKind::Heal,
        Action::ClockJump { .. } => EventKind::ClockJump,
        Action::ClockSkew { .. } => EventKind::ClockSkew,
        Action::ClockDrift { .. } => EventKind::ClockDrift,
        Action::ClockStrobe { .. } => EventKind::ClockStrobe,
        Action::Crash { .. } => EventKind::Crash,
        Action::Restart { .. } => EventKind::Restart,
        Action::StallRenewals { .. } => EventKind::Stall,
        Action::Deregister { .. } => EventKind::Deregister,
        Action::Restore { .. } => EventKind::Restore,
        Action::FinalHeal { .. } => EventKind::FinalHeal,
    }
}

fn describe(fault: &Fault) -> String {
    let range = |l: &LatencyRange| format!("{}..={} ms", l.min_ms, l.max_ms);
    let link = |l: &fencesim_scenario::LinkSel| {
        format!(
            "{} -> {}",
            l.from.as_deref().unwrap_or("*"),
            l.to.as_deref().unwrap_or("*")
        )
    };
    let what = match &fault.action {
        Action::Pause { .. } => "frozen".to_owned(),
        Action::Hold {
            from,
            message,
            nth,
            copy_ms,
        } => {
            let copy = copy_ms.map_or(String::new(), |ms| format!(", a copy after {ms} ms"));
            format!("{} #{nth} from {from}{copy}", message.as_str())
        }
        Action::HoldAll { message, from } => format!(
            "every {} from {}",
            message.as_str(),
            from.as_deref().unwrap_or("anyone")
        ),
        Action::Latency {
            link: l,
            latency_ms,
        } => format!("latency {} on {}", range(latency_ms), link(l)),
        Action::Loss { link: l, rate } => format!("loss {rate} on {}", link(l)),
        Action::Duplicate { link: l, rate } => format!("duplication {rate} on {}", link(l)),
        Action::Reorder { window_ms } => format!("extra delay up to {window_ms} ms"),
        Action::Partition { cut } => match cut {
            Cut::Isolate(n) => format!("{n} isolated"),
            Cut::Groups(g) => format!("groups {g:?}"),
            Cut::OneWay { from, to } => format!("{from} -> {to} lost"),
        },
        Action::Heal => "all partitions healed".to_owned(),
        Action::ClockJump { delta_ms, .. } => format!("wall clock {delta_ms:+} ms"),
        Action::ClockSkew { offset_ms, .. } => format!("wall clock at true {offset_ms:+} ms"),
        Action::ClockDrift { ppm, .. } => format!("clocks drift {ppm:+} ppm"),
        Action::ClockStrobe {
            offset_ms,
            period_ms,
            ..
        } => format!("wall clock flips by {offset_ms:+} ms every {period_ms} ms"),
        Action::Crash { .. } => "killed".to_owned(),
        Action::Restart { .. } => "restarted".to_owned(),
        Action::StallRenewals { .. } => "keepalive stalled".to_owned(),
        Action::Deregister { .. } => "deregistered by a maintenance job".to_owned(),
        Action::Restore { snapshot_at_ms, .. } => {
            format!("restored from the backup as of {snapshot_at_ms} ms")
        }
        Action::FinalHeal { window_ms } => {
            format!("everything healed; a fenced write is due within {window_ms} ms")
        }
    };
    let what = match fault.duration_ms {
        Some(ms) => format!("{what} for {ms} ms"),
        None => what,
    };
    // A design's own safepoint is named, so that a chain says where in its code the fault
    // struck (the harness's events are told by the records around it).
    match fault.trigger {
        Trigger::Before {
            event: NodeEvent::Design(point),
            ..
        }
        | Trigger::After {
            event: NodeEvent::Design(point),
            ..
        } => format!("{what} at {point}"),
        _ => what,
    }
}

fn record(world: &World, kind: EventKind, phase: Phase, target: Option<&str>, detail: String) {
    world.event(Event {
        node: NEMESIS_NODE.into(),
        phase: Some(phase),
        target: target.map(str::to_owned).map(Into::into),
        detail: Some(detail),
        ..Event::new(kind)
    });
}

/// Sleep until true time reaches `at_ms`.
pub(crate) async fn sleep_until_ms(at_ms: u64) {
    let wait_ns = (at_ms * 1_000_000).saturating_sub(true_ns());
    if wait_ns > 0 {
        crate::timer::sleep(Duration::from_nanos(wait_ns)).await;
    }
}
