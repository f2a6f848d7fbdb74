//! A counterexample as a scripted scenario that `fencesim run` reproduces: the untimed
//! schedule given true times, and each time enforced with the simulator's own faults.
//!
//! The search knows no time: any message may arrive next and any timer may fire next. The
//! simulator has one true time, a network with latency, and timers that fire when their
//! deadlines pass. The concretiser bridges them:
//! - Every step gets a moment of true time (a slot), in the schedule's order.
//! - Every message is held (`hold`, by sender, kind and count) from its send until the moment
//!   of its delivery; a message the schedule loses, or never delivers, is held past the run's
//!   end, which within the run is the same thing.
//! - A timer that fires at step `k` fires late on purpose: its agent is paused from just after
//!   its previous step until `k`, so the timer, due by then, fires as the pause ends (a process
//!   pause, as a GC pause is: Kleppmann 2016). A timer that does not fire at a step of its agent
//!   must not be due yet: its deadline must lie after that step.
//! - A crash and a restart are `crash` and `restart` faults at their steps' moments.
//!
//! The moments are the least solution of a system of difference constraints (each step at
//! least [`SLOT_MS`] after the one before; each firing timer due by its step; each pending
//! timer not due before a step of its agent), solved as longest paths (Bellman-Ford). A
//! schedule whose constraints contradict each other (a timer that must fire before another
//! that is due earlier) has no such timing, and the concretiser says so.
//!
//! Deadlines in the search are on each agent's clock, which moves only when its own timers
//! fire; a deadline's delay (deadline minus the agent's clock when it was set) is what the
//! simulator's timer waits in true time, from the step that set it. A timer whose deadline did
//! not change may have been set again at a later step of its agent (the search's clock did
//! not move, so the deadline looks the same); each bound takes the step that makes it safe
//! either way, and a margin of [`MARGIN_MS`] absorbs the simulator's rounding to whole ms.

use fencesim_design::MessageKind;
use fencesim_scenario::{
    Action, Expectation, ExpectedVerdict, Fault, LatencyRange, NetworkSpec, Scenario, SeedRange,
    Trigger, WorkClock,
};

use fencesim_design::Design;

use crate::net::Agent;
use crate::node::Deadlined;
use crate::world::{Choice, Model, Sent, Setup, World};

/// What a counterexample's scenario adds to its scenario's name.
const SUFFIX: &str = "-counterexample";

/// True ms between consecutive steps, at least: room for a step's messages to be sent before
/// the next step.
pub const SLOT_MS: i64 = 10;

/// Slack on each timer's delay, ms, for the simulator's rounding to whole ms.
pub const MARGIN_MS: i64 = 2;

/// What one step of a schedule did, as the concretiser needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Act {
    /// The message with this id was delivered.
    Deliver(u64),
    /// It was lost.
    Lose(u64),
    /// It was duplicated.
    Duplicate(u64),
    /// The agent's earliest timer fired.
    Fire(Agent),
    /// Node `i` crashed.
    Crash(usize),
    /// Node `i` restarted.
    Restart(usize),
}

/// The state of the world after the start or a step: what was sent, and every agent's clock
/// and pending deadlines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Moment {
    /// The step (`None`: the start).
    pub act: Option<Act>,
    /// The agent the step acted on: a delivery's receiver, the firing agent, the crashed or
    /// restarted node (none for a loss or duplication).
    pub actor: Option<Agent>,
    /// The messages it sent.
    pub sent: Vec<Sent>,
    /// Whether it skipped a keepalive of the actor's (a client past the renewals bound), as
    /// a stalled keepalive stream does (case K18).
    pub stalled: bool,
    /// Per agent (in [`Timing::agents`]' order): its clock (ns) and its pending timers.
    pub timers: Vec<(u64, Vec<Deadlined>)>,
}

/// A schedule as the concretiser reads it: the start, then each step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timing {
    /// Every agent and its name.
    pub agents: Vec<(Agent, String)>,
    /// The start, then one per step.
    pub moments: Vec<Moment>,
}

impl Timing {
    /// The start of a schedule in `world` (its initial state).
    pub fn start<D: Design>(world: &mut World<D>, setup: &Setup) -> Self {
        let agents: Vec<(Agent, String)> = world
            .agents()
            .into_iter()
            .map(|a| (a, setup.name_of(a).to_owned()))
            .collect();
        let sent = world.sent_since(&[]);
        let timers = agents.iter().map(|(a, _)| world.deadlines(*a)).collect();
        Timing {
            agents,
            moments: vec![Moment {
                act: None,
                actor: None,
                sent,
                stalled: false,
                timers,
            }],
        }
    }

    /// Take `choice` in `world`, noting what it did.
    pub fn step<D: Design>(&mut self, world: &mut World<D>, model: &Model<D>, choice: Choice) {
        let message = |i: u32| world.shared.net[i as usize].clone();
        let (act, actor) = match choice {
            Choice::Deliver(i) => {
                let m = message(i);
                (Act::Deliver(m.id), Some(m.to))
            }
            Choice::Drop(i) => (Act::Lose(message(i).id), None),
            Choice::Duplicate(i) => (Act::Duplicate(message(i).id), None),
            Choice::Fire(a) => (Act::Fire(a), Some(a)),
            Choice::Crash(n) => (Act::Crash(n as usize), Some(Agent::Node(n as usize))),
            Choice::Restart(n) => (Act::Restart(n as usize), Some(Agent::Node(n as usize))),
        };
        let skips = |world: &World<D>| match actor {
            Some(Agent::Client(c)) => {
                let client = &world.clients[c];
                (client.workload.cycle(), client.skipped)
            }
            _ => (0, 0),
        };
        let before = skips(world);
        let sent = world.apply_observed(model, choice);
        let after = skips(world);
        // A new cycle starts its count again.
        let stalled = after.1 > 0 && (after.0 != before.0 || after.1 > before.1);
        let timers = self
            .agents
            .iter()
            .map(|(a, _)| world.deadlines(*a))
            .collect();
        self.moments.push(Moment {
            act: Some(act),
            actor,
            sent,
            stalled,
            timers,
        });
    }
}

/// Why a schedule could not be written as a scenario.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unwritable {
    /// A message duplicated twice: a `hold` makes one copy.
    #[error("it duplicates one message twice, and a hold makes one copy")]
    Duplicate,
    /// A timer too short to hold in place: its agent's pause begins 1 ms after the step that
    /// set it, and the simulator's rounding takes [`MARGIN_MS`] more.
    #[error(
        "{agent}'s timer set at step {step} (0: the start) waits {at_most_ms} ms or less, too \
         short to keep in place: the scenario needs timers of at least {} ms",
        MARGIN_MS + 2
    )]
    ShortTimer {
        /// Whose timer.
        agent: String,
        /// The step that set it.
        step: usize,
        /// Its delay, at most, ms.
        at_most_ms: i64,
    },
    /// The timers' constraints contradict each other.
    #[error(
        "no timing satisfies it: between steps {first} and {last} (0: the start), the timers \
         of {agents} would have to fall due in an order their delays in true time forbid"
    )]
    NoTiming {
        /// The agents whose timers conflict.
        agents: String,
        /// The first step the conflict spans (0: the start).
        first: usize,
        /// The last.
        last: usize,
    },
}

/// A pending timer: its key, its deadline on its agent's clock, the moment it was (first)
/// seen set, and the agent's clock then.
#[derive(Clone, Copy, Debug)]
struct Pending {
    key: u64,
    on_clock: bool,
    may_repeat: bool,
    deadline_ns: u64,
    first: usize,
    clock_ns: u64,
}

impl Pending {
    /// Its delay from the moment it was set, ms, rounded up.
    fn delay_ms(&self) -> i64 {
        (self.deadline_ns.saturating_sub(self.clock_ns)).div_ceil(1_000_000) as i64
    }

    /// The least delay the simulator's timer may have waited: it is not due sooner.
    fn lo(&self) -> i64 {
        (self.delay_ms() - MARGIN_MS).max(1)
    }

    /// The most: it is due by then.
    fn hi(&self) -> i64 {
        self.delay_ms() + MARGIN_MS
    }
}

/// `t[to] >= t[from] + weight`.
#[derive(Clone, Copy, Debug)]
struct Edge {
    from: usize,
    to: usize,
    weight: i64,
}

/// A pause of an agent between two of its steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pause {
    /// The agent's index in [`Timing::agents`].
    pub agent: usize,
    /// Its step before the pause: the pause begins 1 ms after it.
    pub from: usize,
    /// Its step the pause ends at (one past the last step: the run's end).
    pub to: usize,
    /// Why.
    pub why: PauseWhy,
}

/// Why an agent is paused before one of its steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PauseWhy {
    /// The step fires its timer: due during the pause, it fires as the pause ends. The
    /// agent's clocks, which otherwise stand still, run for `advance_ms` from the pause's
    /// start: what the search's clock of the agent moved at the step.
    Fire {
        /// How far its clocks run, ms.
        advance_ms: i64,
    },
    /// The step delivers a message, which arrives during the pause and is read first as the
    /// pause ends, before timers that fell due meanwhile (which it cancels): a reply that came
    /// in time although the process saw its deadline pass.
    Deliver,
    /// The step crashes the node: the pause outlasts the crash by 1 ms, so that no timer due
    /// meanwhile fires first.
    Crash,
    /// The agent has no step left: it rests until the run's end (`to` is one past the last
    /// step), so that no timer of its fires after the schedule has left it.
    Rest,
}

/// The moments chosen, and the pauses that keep each agent's timers in the schedule's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// True ms of the start (0) and of each step.
    pub at_ms: Vec<i64>,
    /// The pauses, by agent.
    pub pauses: Vec<Pause>,
}

impl Layout {
    /// The moment the message delivered at step `i` arrives: 1 ms early into a paused
    /// receiver, so that it waits there when the pause ends.
    fn arrival_ms(&self, i: usize) -> i64 {
        let paused = self
            .pauses
            .iter()
            .any(|p| p.to == i && p.why == PauseWhy::Deliver);
        self.at_ms[i] - i64::from(paused)
    }
}

/// The moments of `timing`'s steps.
///
/// # Errors
/// [`Unwritable::ShortTimer`] for a timer too short to hold in place,
/// [`Unwritable::NoTiming`] when the timers' constraints contradict each other.
pub fn layout(timing: &Timing) -> Result<Layout, Unwritable> {
    let n = timing.moments.len();
    let mut edges: Vec<Edge> = (1..n)
        .map(|i| Edge {
            from: i - 1,
            to: i,
            weight: SLOT_MS,
        })
        .collect();
    // Whose constraint each edge is, to name the agent if they contradict.
    let mut owner: Vec<Option<usize>> = vec![None; edges.len()];
    let mut candidates = Vec::new();
    for a in 0..timing.agents.len() {
        candidates.extend(agent_constraints(timing, a, &mut edges));
        owner.resize(edges.len(), Some(a));
    }
    // A timer set at a step that must not fall due within 2 ms of it: too short to keep.
    if let Some((k, e)) = edges
        .iter()
        .enumerate()
        .find(|(_, e)| e.from == e.to && e.weight > 0)
    {
        let agent = owner[k].map_or("an agent", |a| timing.agents[a].1.as_str());
        return Err(Unwritable::ShortTimer {
            agent: agent.to_owned(),
            step: e.from,
            at_most_ms: 2 - e.weight + MARGIN_MS,
        });
    }
    let at_ms = longest_paths(n, &edges).map_err(|cycle| {
        let mut who: Vec<&str> = Vec::new();
        for a in cycle.iter().filter_map(|&k| owner[k]) {
            let name = timing.agents[a].1.as_str();
            if !who.contains(&name) {
                who.push(name);
            }
        }
        let moments = cycle.iter().flat_map(|&k| [edges[k].from, edges[k].to]);
        let (first, last) = moments.fold((n, 0), |(lo, hi), m| (lo.min(m), hi.max(m)));
        Unwritable::NoTiming {
            agents: who.join(" and "),
            first,
            last,
        }
    })?;
    // A delivery needs its receiver paused only if one of its timers may fall due first.
    let pauses = candidates
        .into_iter()
        .filter(|(pause, due)| match due {
            Some(due) => soonest(due, &at_ms) <= at_end(&at_ms, pause.to) + 1,
            None => true,
        })
        .map(|(pause, _)| pause)
        .collect();
    Ok(Layout { at_ms, pauses })
}

/// When the run ends, given the moments: a slot after the last step.
fn end_ms(at_ms: &[i64]) -> i64 {
    at_ms.last().copied().unwrap_or(0) + SLOT_MS
}

/// The moment of step `i`, or the run's end for one past the last.
fn at_end(at_ms: &[i64], i: usize) -> i64 {
    at_ms.get(i).copied().unwrap_or_else(|| end_ms(at_ms))
}

/// Timers in true time, each as (the moment it was first seen set, its least delay in ms).
type Due = Vec<(usize, i64)>;

/// The timers of `pending` that wait in true time, as [`Due`].
fn in_true_time(pending: &[Pending]) -> Due {
    let waiting = pending.iter().filter(|p| !p.on_clock);
    waiting.map(|p| (p.first, p.lo())).collect()
}

/// When the soonest of `due` may fall due, given the moments `t`.
fn soonest(due: &Due, t: &[i64]) -> i64 {
    due.iter()
        .map(|(first, lo)| t[*first] + lo)
        .min()
        .unwrap_or(0)
}

/// Agent `a`'s constraints, added to `edges`, and its pauses, each with (for a delivery or a
/// rest) the timers in true time that may make it needed:
/// - after each of its steps, no timer of its in true time is due until 2 ms later (its
///   pause, if any, begins 1 ms after the step), nor before the schedule's end after its last
///   step (a timer on its clock cannot fall due while the clock stands still);
/// - a timer it fires is due by its step, however late it was set, and its clock has run
///   forward by what the search's clock moved, 1 ms before the step at the latest.
fn agent_constraints(
    timing: &Timing,
    a: usize,
    edges: &mut Vec<Edge>,
) -> Vec<(Pause, Option<Due>)> {
    let agent = timing.agents[a].0;
    let mut pending = carry(&[], &timing.moments[0].timers[a], 0);
    let mut clock_ns = timing.moments[0].timers[a].0;
    let mut pauses = Vec::new();
    let mut previous = 0;
    for (i, moment) in timing.moments.iter().enumerate().skip(1) {
        if moment.actor != Some(agent) {
            continue;
        }
        let pause = |why| Pause {
            agent: a,
            from: previous,
            to: i,
            why,
        };
        let due = in_true_time(&pending);
        match moment.act {
            Some(Act::Fire(_)) => {
                let advance_ms = match agent {
                    // The resource reads no clock: its timers are delays in true time, and
                    // its records take true time.
                    Agent::Resource => 0,
                    _ => moment.timers[a]
                        .0
                        .saturating_sub(clock_ns)
                        .div_ceil(1_000_000) as i64,
                };
                // Its clocks run from 1 ms after its previous step, and stop 1 ms before.
                edges.push(Edge {
                    from: previous,
                    to: i,
                    weight: advance_ms + 2,
                });
                let fired = pending.iter().min_by_key(|p| p.deadline_ns);
                if let Some(p) = fired.filter(|p| !p.on_clock) {
                    // Due in true time by step i, counted from its last setting.
                    let set = if p.may_repeat { previous } else { p.first };
                    edges.push(Edge {
                        from: set,
                        to: i,
                        weight: p.hi(),
                    });
                }
                pauses.push((pause(PauseWhy::Fire { advance_ms }), None));
            }
            Some(Act::Deliver(_)) if !due.is_empty() => {
                pauses.push((pause(PauseWhy::Deliver), Some(due)));
            }
            Some(Act::Crash(_)) if !due.is_empty() => {
                pauses.push((pause(PauseWhy::Crash), None));
            }
            _ => {}
        }
        pending = carry(&pending, &moment.timers[a], i);
        clock_ns = moment.timers[a].0;
        for p in pending.iter().filter(|p| !p.on_clock) {
            // t[first] + lo >= t[i] + 2
            edges.push(Edge {
                from: i,
                to: p.first,
                weight: 2 - p.lo(),
            });
        }
        previous = i;
    }
    // After its last step, it rests until the run ends, if a timer of its may fall due.
    let due = in_true_time(&pending);
    if !due.is_empty() {
        let rest = Pause {
            agent: a,
            from: previous,
            to: timing.moments.len(),
            why: PauseWhy::Rest,
        };
        pauses.push((rest, Some(due)));
    }
    pauses
}

/// The timers pending after moment `i`: those pending before with the same key and deadline
/// keep the moment they were first seen; the rest were set at `i`.
fn carry(old: &[Pending], (clock_ns, deadlines): &(u64, Vec<Deadlined>), i: usize) -> Vec<Pending> {
    deadlines
        .iter()
        .map(|d| {
            match old
                .iter()
                .find(|p| (p.key, p.deadline_ns) == (d.key, d.at_ns))
            {
                Some(p) => *p,
                None => Pending {
                    key: d.key,
                    on_clock: d.on_clock,
                    may_repeat: d.may_repeat,
                    deadline_ns: d.at_ns,
                    first: i,
                    clock_ns: *clock_ns,
                },
            }
        })
        .collect()
}

/// The least `t` with `t[0] = 0` satisfying every edge, by Bellman-Ford on longest paths;
/// `Err(cycle)`: the edges of a positive cycle, which no `t` satisfies.
fn longest_paths(n: usize, edges: &[Edge]) -> Result<Vec<i64>, Vec<usize>> {
    let mut t = vec![i64::MIN; n];
    // The edge that last raised each moment: walked back, it finds a cycle.
    let mut raised_by: Vec<Option<usize>> = vec![None; n];
    t[0] = 0;
    let mut last_raised = None;
    for _ in 0..=n {
        last_raised = None;
        for (k, e) in edges.iter().enumerate() {
            if t[e.from] != i64::MIN && t[e.from] + e.weight > t[e.to] {
                t[e.to] = t[e.from] + e.weight;
                raised_by[e.to] = Some(k);
                last_raised = Some(e.to);
            }
        }
        if last_raised.is_none() {
            break;
        }
    }
    // Still rising after n + 1 rounds, or the start itself pushed later: a positive cycle.
    let Some(mut v) = last_raised.or((t[0] != 0).then_some(0)) else {
        return Ok(t);
    };
    // n steps back along the edges that raised it land on the cycle.
    for _ in 0..n {
        v = raised_by[v].map_or(v, |k| edges[k].from);
    }
    let mut cycle = Vec::new();
    let mut u = v;
    while let Some(k) = raised_by[u] {
        if cycle.contains(&k) {
            break;
        }
        cycle.push(k);
        u = edges[k].from;
        if u == v {
            break;
        }
    }
    Err(cycle)
}

/// `original` with `timing`'s schedule as its faults: its design, resource and clients kept
/// (every client starting at 0, as the search's do, and backing off for the least of its
/// range, as the search's clients do), its network without random loss, duplication or
/// reordering, its faults and nemesis replaced, and `[expect]` the violation `kind` (its
/// seed range, seed 0, is the caller's to choose).
///
/// # Errors
/// See [`Unwritable`].
pub fn scenario(
    original: &Scenario,
    timing: &Timing,
    kind: fencesim_history::ViolationKind,
    steps: usize,
) -> Result<Scenario, Unwritable> {
    let layout = layout(timing)?;
    let end_ms = end_ms(&layout.at_ms);
    let mut faults = holds(timing, &layout, end_ms)?;
    faults.extend(pauses(timing, &layout));
    faults.extend(clocks(timing, &layout));
    faults.extend(crashes(timing, &layout));
    faults.extend(stalls(timing, &layout));
    faults.sort_by_key(|f| match f.trigger {
        Trigger::At { at_ms } => at_ms,
        _ => 0,
    });
    let mut s = original.clone();
    // A scenario name has at most 64 characters.
    let stem: String = original.name.chars().take(64 - SUFFIX.len()).collect();
    s.name = format!("{stem}{SUFFIX}");
    s.description = format!(
        "`fencesim verify {}`'s shortest counterexample ({steps} steps, {}) written as \
         scripted faults: every message held until its step's moment, every agent's clocks \
         stopped but at its own timers, every timer fired late by a pause of its agent, every \
         keepalive the search skipped stalled. \
         `fencesim verify` ran its seed when it wrote this, and its verify.json says whether \
         the violation came back (as_scenario.reproduced).",
        original.name,
        kind.as_str()
    );
    s.seeds = SeedRange { start: 0, end: 1 };
    s.duration_ms = end_ms as u64;
    s.network = NetworkSpec {
        latency_ms: original.network.latency_ms,
        loss: 0.0,
        duplicate: 0.0,
        reorder_window_ms: 0,
        links: Vec::new(),
    };
    for c in &mut s.clients {
        c.start_ms = 0;
        // The search's workload counts by the client's clock, which here stands still
        // between its steps as the search's does.
        c.work_clock = WorkClock::Monotonic;
        c.backoff_ms = LatencyRange {
            min_ms: c.backoff_ms.min_ms,
            max_ms: c.backoff_ms.min_ms,
        };
    }
    s.faults = faults;
    s.nemesis = None;
    s.expect = Expectation {
        verdict: ExpectedVerdict::Invalid,
        violations: vec![kind],
        absent: Vec::new(),
    };
    Ok(s)
}

fn at(at_ms: i64) -> Trigger {
    Trigger::At {
        at_ms: at_ms.max(0) as u64,
    }
}

/// One `hold` per message sent, counted per sender and kind as the simulator counts them,
/// until its delivery's moment; with a `copy_ms` for a message the schedule duplicated, until
/// its second delivery's. A copy never delivered (lost, or still in flight at the end) is held
/// past the run's end.
///
/// # Errors
/// [`Unwritable::Duplicate`]: a message duplicated twice.
fn holds(timing: &Timing, layout: &Layout, end_ms: i64) -> Result<Vec<Fault>, Unwritable> {
    let mut counts: Vec<((Agent, MessageKind), u64)> = Vec::new();
    let mut faults = Vec::new();
    for (s, moment) in timing.moments.iter().enumerate() {
        for m in &moment.sent {
            let nth = match counts.iter_mut().find(|(k, _)| *k == (m.from, m.kind)) {
                Some((_, n)) => {
                    *n += 1;
                    *n
                }
                None => {
                    counts.push(((m.from, m.kind), 1));
                    1
                }
            };
            let later = || timing.moments.iter().enumerate().skip(s + 1);
            let duplicated = later()
                .filter(|(_, d)| d.act == Some(Act::Duplicate(m.id)))
                .count();
            if duplicated > 1 {
                return Err(Unwritable::Duplicate);
            }
            let mut arrivals = later()
                .filter(|(_, d)| d.act == Some(Act::Deliver(m.id)))
                .map(|(d, _)| layout.arrival_ms(d) - layout.at_ms[s]);
            let past_end = end_ms + SLOT_MS - layout.at_ms[s];
            let mut held_ms = || arrivals.next().unwrap_or(past_end).max(1) as u64;
            let duration_ms = held_ms();
            let copy_ms = (duplicated == 1).then(&mut held_ms);
            faults.push(Fault {
                action: Action::Hold {
                    from: name(timing, m.from),
                    message: m.kind,
                    nth,
                    copy_ms,
                },
                trigger: at(layout.at_ms[s]),
                duration_ms: Some(duration_ms),
            });
        }
    }
    Ok(faults)
}

fn pauses<'a>(timing: &'a Timing, layout: &'a Layout) -> impl Iterator<Item = Fault> + 'a {
    layout.pauses.iter().map(|p| {
        let start = layout.at_ms[p.from] + 1;
        let end = at_end(&layout.at_ms, p.to) + i64::from(p.why == PauseWhy::Crash);
        Fault {
            action: Action::Pause {
                node: timing.agents[p.agent].1.clone(),
            },
            trigger: at(start),
            duration_ms: Some((end - start).max(1) as u64),
        }
    })
}

/// The rate that stops a clock, near enough: -999,999 ppm, the slowest a drift may be (a clock
/// stopped outright would be a zero rate the simulator refuses). Over the 100 s a schedule
/// rarely exceeds, such a clock moves 0.1 ms.
pub const STOPPED_PPM: i64 = -999_999;

/// Every agent's clocks (the resource reads none) stopped from the start, as the search's
/// stand still; at each fire,
/// run forward at true rate (a drift that cancels the stop, for as long as it lasts: drifts
/// add up, and one with a duration takes back only its own) by what the search's moved.
fn clocks<'a>(timing: &'a Timing, layout: &'a Layout) -> impl Iterator<Item = Fault> + 'a {
    let drift = |node: &str, at_ms: i64, ppm: i64, duration_ms: Option<u64>| Fault {
        action: Action::ClockDrift {
            node: node.to_owned(),
            ppm,
        },
        trigger: at(at_ms),
        duration_ms,
    };
    let stopped = timing
        .agents
        .iter()
        .filter(|(agent, _)| *agent != Agent::Resource)
        .map(move |(_, name)| drift(name, 0, STOPPED_PPM, None));
    let runs = layout.pauses.iter().filter_map(move |p| match p.why {
        PauseWhy::Fire { advance_ms } if advance_ms > 0 => {
            let name = &timing.agents[p.agent].1;
            let start = layout.at_ms[p.from] + 1;
            Some(drift(name, start, -STOPPED_PPM, Some(advance_ms as u64)))
        }
        _ => None,
    });
    stopped.chain(runs)
}

fn crashes<'a>(timing: &'a Timing, layout: &'a Layout) -> impl Iterator<Item = Fault> + 'a {
    timing.moments.iter().enumerate().filter_map(|(i, m)| {
        let (node, crash) = match m.act {
            Some(Act::Crash(n)) => (n, true),
            Some(Act::Restart(n)) => (n, false),
            _ => return None,
        };
        let node = name(timing, Agent::Node(node));
        Some(Fault {
            action: if crash {
                Action::Crash { node }
            } else {
                Action::Restart { node }
            },
            trigger: at(layout.at_ms[i]),
            duration_ms: None,
        })
    })
}

/// A `stall-renewals` fault over each step at which a client skipped a keepalive (the
/// search's renewals bound, as a stalled keepalive stream is: case K18), so that the client
/// in `run` sends none there either: from the start of the client's pause before the step
/// (or 1 ms before the step) to 1 ms after it.
fn stalls<'a>(timing: &'a Timing, layout: &'a Layout) -> impl Iterator<Item = Fault> + 'a {
    timing.moments.iter().enumerate().filter_map(|(i, m)| {
        let client = m.actor.filter(|_| m.stalled)?;
        let paused = layout
            .pauses
            .iter()
            .find(|p| p.to == i && timing.agents[p.agent].0 == client);
        let start = paused.map_or(layout.at_ms[i] - 1, |p| layout.at_ms[p.from] + 1);
        Some(Fault {
            action: Action::StallRenewals {
                node: name(timing, client),
            },
            trigger: at(start),
            duration_ms: Some((layout.at_ms[i] + 1 - start).max(1) as u64),
        })
    })
}

fn name(timing: &Timing, agent: Agent) -> String {
    timing
        .agents
        .iter()
        .find(|(a, _)| *a == agent)
        .map(|(_, n)| n.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(from: usize, to: usize, weight: i64) -> Edge {
        Edge { from, to, weight }
    }

    #[test]
    fn the_least_moments_meet_lower_and_upper_bounds() {
        // t1 >= t0 + 10, t2 >= t1 + 10, t2 >= t0 + 500, and t2 <= t1 + 400: t1 rises to 100.
        let edges = [
            edge(0, 1, 10),
            edge(1, 2, 10),
            edge(0, 2, 500),
            edge(2, 1, -400),
        ];
        assert_eq!(longest_paths(3, &edges), Ok(vec![0, 100, 500]));
        // t2 <= t0 + 400 against t2 >= t0 + 500: the start cannot move, so no timing; the
        // cycle reported is the two bounds'.
        let edges = [
            edge(0, 1, 10),
            edge(1, 2, 10),
            edge(0, 2, 500),
            edge(2, 0, -400),
        ];
        let mut cycle = longest_paths(3, &edges).expect_err("no timing");
        cycle.sort_unstable();
        assert_eq!(cycle, vec![2, 3]);
    }

    fn timer(key: u64, at_ms: u64) -> Deadlined {
        Deadlined {
            key,
            at_ns: at_ms * 1_000_000,
            on_clock: false,
            may_repeat: false,
        }
    }

    /// A client that works 1000 ms (its only timer), then its work ends: the work is due by
    /// the step, the client paused from just after its previous step, its clock run 1000 ms.
    #[test]
    fn a_firing_timer_is_due_by_its_step_and_its_agent_paused_until_then() {
        let client = Agent::Client(0);
        let moment = |act, actor, clock_ms: u64, deadlines: Vec<Deadlined>| Moment {
            act,
            actor,
            sent: Vec::new(),
            stalled: false,
            timers: vec![(clock_ms * 1_000_000, deadlines)],
        };
        let timing = Timing {
            agents: vec![(client, "client-1".into())],
            moments: vec![
                moment(None, None, 0, vec![]),
                moment(Some(Act::Deliver(7)), Some(client), 0, vec![timer(1, 1000)]),
                moment(Some(Act::Fire(client)), Some(client), 1000, vec![]),
            ],
        };
        let layout = layout(&timing).expect("a timing");
        // Set at 10 ms, due by 1010 + the margin; the clock runs 1000 ms from 11 ms.
        assert_eq!(layout.at_ms, vec![0, SLOT_MS, SLOT_MS + 1000 + MARGIN_MS]);
        assert_eq!(
            layout.pauses,
            vec![Pause {
                agent: 0,
                from: 1,
                to: 2,
                why: PauseWhy::Fire { advance_ms: 1000 },
            }]
        );
    }

    /// A write that the schedule duplicates and delivers twice becomes one `hold` with a
    /// copy: the first copy held until the first delivery, the second until the second.
    #[test]
    fn a_duplicated_message_is_held_with_a_copy() {
        let (client, resource) = (Agent::Client(0), Agent::Resource);
        let write = Sent {
            id: 9,
            from: client,
            to: resource,
            kind: MessageKind::Write,
        };
        let moment = |act, actor, sent: Vec<Sent>| Moment {
            act,
            actor,
            sent,
            stalled: false,
            timers: vec![(0, vec![]), (0, vec![])],
        };
        let timing = Timing {
            agents: vec![(client, "client-1".into()), (resource, "resource".into())],
            moments: vec![
                moment(None, None, vec![write]),
                moment(Some(Act::Duplicate(9)), None, vec![]),
                moment(Some(Act::Deliver(9)), Some(resource), vec![]),
                moment(Some(Act::Deliver(9)), Some(resource), vec![]),
            ],
        };
        let layout = layout(&timing).expect("a timing");
        let end = end_ms(&layout.at_ms);
        let faults = holds(&timing, &layout, end).expect("one duplication");
        assert_eq!(
            faults,
            vec![Fault {
                action: Action::Hold {
                    from: "client-1".into(),
                    message: MessageKind::Write,
                    nth: 1,
                    copy_ms: Some(3 * SLOT_MS as u64),
                },
                trigger: at(0),
                duration_ms: Some(2 * SLOT_MS as u64),
            }]
        );
        // Duplicated twice: no hold makes two copies.
        let mut twice = timing.clone();
        twice
            .moments
            .insert(2, moment(Some(Act::Duplicate(9)), None, vec![]));
        let twice_layout = super::layout(&twice).expect("a timing");
        assert_eq!(
            holds(&twice, &twice_layout, end_ms(&twice_layout.at_ms)),
            Err(Unwritable::Duplicate)
        );
    }
}
