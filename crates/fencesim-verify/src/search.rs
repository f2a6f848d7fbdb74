//! Breadth-first search of every schedule within the bounds, so that the first violation
//! found is one of the shortest (in steps) there is. A design that opts in
//! ([`fencesim_design::Explorable`]) has each state copied to make its successors and each
//! distinct state (by fingerprint) explored once; any other design has every state rebuilt
//! by re-executing its schedule from the initial state, and no two schedules merged.
//!
//! The checks run along each schedule: the token checks after every step that recorded a
//! decision of the service's or the resource's, every check (with `not-linearizable`) at each
//! schedule's end. Their view (the decisions and completed operations so far, in order) is
//! part of a state's fingerprint, so merging two schedules never hides a violation.

use fencesim_checker::{check_path, check_with, CheckOptions, Violation};
use fencesim_design::{Design, TokenKind};
use fencesim_history::{Header, History, TokenOrder, ViolationKind};

use crate::concretise::Timing;
use crate::record::{Entries, Records};
use crate::report::{Counterexample, Ending, Outcome};
use crate::seen::Seen;
use crate::world::{Choice, Interned, Model, World};

/// The properties the search checks: the ones that must hold under any timing. Together with
/// [`NOT_CHECKED`] they are every property the checker has (a test keeps it so).
pub const CHECKED: [ViolationKind; 8] = [
    ViolationKind::StaleWriteAccepted,
    ViolationKind::TokenNotMonotonic,
    ViolationKind::TokenReused,
    ViolationKind::TokenNotGranted,
    ViolationKind::ReleaseByNonHolder,
    ViolationKind::UnfencedMutation,
    ViolationKind::DuplicateExecution,
    ViolationKind::NotLinearizable,
];

/// The properties it does not check, and why.
pub const NOT_CHECKED: [(ViolationKind, &str); 4] = [
    (
        ViolationKind::MutualExclusionService,
        "a timing property: with no time, every lease may expire at any moment",
    ),
    (
        ViolationKind::MutualExclusionClient,
        "a timing property: a client's validity depends on how fast its clock runs",
    ),
    (
        ViolationKind::LeaseEndedEarly,
        "a timing property: it compares a lease's end with true time",
    ),
    (
        ViolationKind::NoProgressAfterHeal,
        "a liveness property over time: the simulator's job",
    ),
];

/// One explored state, as the search keeps it: how it was reached.
#[derive(Clone, Copy)]
struct Reached {
    parent: u32,
    choice: Choice,
}

/// The root's parent.
const ROOT: u32 = u32::MAX;

/// A search of `model`'s configuration.
pub struct Search<'m, D: Design> {
    model: &'m Model<D>,
    /// Every state kept, by how it was reached (index 0: the initial state).
    reached: Vec<Reached>,
    seen: Seen,
    /// One copy of each agent state the kept states hold.
    interned: Interned<D>,
    /// One copy of each entry the kept states recorded.
    entries: Entries,
    states: u64,
    transitions: u64,
    header: Header,
}

/// States expanded per worker thread between two merges: large enough that starting the
/// threads costs nothing beside the work, small enough that the children held until the
/// merge stay a few megabytes.
const BATCH_PER_JOB: usize = 64;

/// States per thread in a batch for `model`: [`BATCH_PER_JOB`] for a configuration of a few
/// agents, fewer as it has more, since a state of many clients has as many more successors,
/// each a copy of it as large, all held until the merge (with 300 clients, 64 states per
/// thread held 5.7 GB).
fn batch_per_job<D: Design>(model: &Model<D>) -> usize {
    let agents = model.setup.node_names.len() + model.setup.scenario.clients.len() + 1;
    (BATCH_PER_JOB * 4 / agents.max(1)).clamp(1, BATCH_PER_JOB)
}

/// One state of the frontier: its index in `reached`, and its copy if the design opts in
/// (otherwise it is rebuilt from the initial state when expanded).
type Frontier<D> = Vec<(u32, Option<World<D>>)>;

/// What expanding one state gave, for the merge to take in order.
struct Expanded<D: Design> {
    index: u32,
    /// A schedule that ends here (no choice is left) and violates a checked property.
    leaf_violation: Option<Violation>,
    children: Vec<Child<D>>,
}

/// One successor, as a worker left it.
struct Child<D: Design> {
    choice: Choice,
    fingerprint: Option<u64>,
    /// `None`: its fingerprint was seen before the batch began, so the merge only counts
    /// the transition. Otherwise its copy (if the design gives copies) and its checks.
    fresh: Option<(Option<World<D>>, Checked)>,
}

/// Where a successor's checks stand when its worker hands it over.
enum Checked {
    /// Nothing was recorded that the checks judge, or they ran and found nothing.
    Clean,
    /// They ran and found this.
    Violated(Violation),
    /// They are due, and left to the merge: with copies, most successors of a batch turn
    /// out to be states met earlier in the same batch, and only the new ones are checked.
    Due,
}

/// A new state of a batch whose checks are due, and the search's counts when it was taken:
/// if it is the first of the batch to violate a property, the search ends with these counts,
/// as a one-thread search that checks each new state at once would.
struct Pending {
    index: u32,
    states: u64,
    transitions: u64,
    /// Its place in the next frontier, which holds its copy.
    at: usize,
}

/// How a batch's merge stopped before its end.
enum Stop {
    /// A schedule that ends at this state violates a property.
    Leaf(u32, Violation),
    /// This new state (the worker checked it) violates a property.
    Violated(u32, Violation),
    /// The state bound was met.
    Full,
}

/// What a worker reads while the merge waits: nothing it reads changes during a batch.
struct Expander<'a, D: Design> {
    model: &'a Model<D>,
    reached: &'a [Reached],
    seen: &'a Seen,
    header: &'a Header,
    bounds: &'a crate::Bounds,
}

impl<D: Design> Expander<'_, D> {
    /// Every successor of `index`'s state (`world`, or rebuilt), with its fingerprint and,
    /// for one not seen before the batch, its copy and checks (run here when the design gives
    /// no copies, so there is nothing to merge and no copy to keep).
    fn expand(&self, index: u32, world: Option<World<D>>) -> Expanded<D> {
        let mut world = world.unwrap_or_else(|| rebuild(self.model, self.reached, index));
        let choices = world.choices(self.bounds);
        if choices.is_empty() {
            return Expanded {
                index,
                leaf_violation: first_violation(self.header, &world.shared.records, true),
                children: Vec::new(),
            };
        }
        let copies = self.model.explorable.is_some();
        let children = choices
            .into_iter()
            .map(|choice| {
                let mut child = match world.copy(self.model) {
                    Some(copy) => copy,
                    None => rebuild(self.model, self.reached, index),
                };
                child.apply(self.model, choice);
                let fingerprint = child.fingerprint(self.model);
                if fingerprint.is_some_and(|fp| self.seen.contains(fp)) {
                    return Child {
                        choice,
                        fingerprint,
                        fresh: None,
                    };
                }
                let checked = if !child.shared.checks_due {
                    Checked::Clean
                } else if copies {
                    Checked::Due
                } else {
                    match first_violation(self.header, &child.shared.records, false) {
                        Some(v) => Checked::Violated(v),
                        None => Checked::Clean,
                    }
                };
                Child {
                    choice,
                    fingerprint,
                    fresh: Some((copies.then_some(child), checked)),
                }
            })
            .collect();
        Expanded {
            index,
            leaf_violation: None,
            children,
        }
    }
}

/// `work` applied to each of `items` in order, on up to `jobs` threads (each taking a
/// contiguous part), so that the results are what one thread would have produced.
fn in_parallel<T: Send, R: Send>(
    items: Vec<T>,
    jobs: usize,
    work: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    if jobs <= 1 || items.len() < 2 {
        return items.into_iter().map(work).collect();
    }
    let per_job = items.len().div_ceil(jobs);
    let mut parts: Vec<Vec<T>> = Vec::with_capacity(jobs);
    let mut rest = items.into_iter();
    loop {
        let part: Vec<T> = rest.by_ref().take(per_job).collect();
        if part.is_empty() {
            break;
        }
        parts.push(part);
    }
    let work = &work;
    std::thread::scope(|scope| {
        let handles: Vec<_> = parts
            .into_iter()
            .map(|part| scope.spawn(move || part.into_iter().map(work).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a search worker panicked"))
            .collect()
    })
}

impl<'m, D: Design> Search<'m, D> {
    /// A search of `model`.
    pub fn new(model: &'m Model<D>) -> Self {
        let scenario = &model.setup.scenario;
        let header = Header {
            scenario: scenario.name.clone(),
            token_order: match scenario.lock_service.shape.tokens {
                TokenKind::Fencing => TokenOrder::Value,
                TokenKind::Opaque => TokenOrder::Acquisition,
            },
            // Its records' times are their indexes: the search has no true time.
            untimed: true,
            tool_version: env!("CARGO_PKG_VERSION").to_owned(),
            ..Header::unnamed()
        };
        Search {
            model,
            reached: Vec::new(),
            seen: Seen::default(),
            interned: Interned::default(),
            entries: Entries::default(),
            states: 0,
            transitions: 0,
            header,
        }
    }

    /// Explore breadth-first on `jobs` threads until a violation, the bounds, the end of the
    /// space, or `stop` answering true (asked between batches of states). Each batch of the
    /// frontier is expanded in parallel, merged in the order one thread would take it, and
    /// its new states' checks run in parallel, so the states, transitions and counterexample
    /// are the same for any `jobs`.
    pub fn run(mut self, jobs: usize, stop: &dyn Fn() -> bool) -> Outcome {
        let bounds = self.model.setup.bounds.clone();
        let mut root = World::new(self.model);
        self.reached.push(Reached {
            parent: ROOT,
            choice: Choice::Crash(0),
        });
        self.states = 1;
        if let Some(fp) = root.fingerprint(self.model) {
            self.seen.insert(fp);
            root.intern(&mut self.interned);
        }
        if self.states >= bounds.max_states {
            // The initial state alone meets the bound: nothing was expanded.
            return self.outcome(Ending::BoundsReached, 0, None, true);
        }
        let jobs = jobs.max(1);
        // One thread takes one state at a time: each successor met before is dropped at
        // once, while its memory is still in cache.
        let batch_size = if jobs == 1 {
            1
        } else {
            batch_per_job(self.model) * jobs
        };
        let mut frontier: Frontier<D> = vec![(0, Some(root))];
        // The level before the frontier's, emptied: its room takes the next level. A frontier
        // grown afresh each level was most of the search's page faults (each growth a larger
        // block of fresh pages for the kernel to zero, the old block given back).
        let mut spare: Frontier<D> = Vec::new();
        let mut depth = 0;
        loop {
            if depth >= bounds.depth {
                return self.last_level(frontier, depth, &bounds);
            }
            let level = (&mut frontier, spare);
            let next = match self.expand_level(level, depth, &bounds, jobs, batch_size, stop) {
                Ok(next) => next,
                Err(ended) => return *ended,
            };
            if next.is_empty() {
                // This level's states were the ends of their schedules: the longest has
                // `depth` steps.
                return self.outcome(Ending::Verified, depth, None, false);
            }
            spare = std::mem::replace(&mut frontier, next);
            depth += 1;
        }
    }

    /// Every state of one level (`frontier`, emptied) expanded, `batch_size` at a time on
    /// `jobs` threads: the next level, in `next` (empty, and kept for its room), or the
    /// outcome if a violation, the state bound or `stop` ended the search.
    fn expand_level(
        &mut self,
        (frontier, mut next): (&mut Frontier<D>, Frontier<D>),
        depth: u32,
        bounds: &crate::Bounds,
        jobs: usize,
        batch_size: usize,
        stop: &dyn Fn() -> bool,
    ) -> Result<Frontier<D>, Box<Outcome>> {
        next.clear();
        let mut rest = frontier.drain(..);
        loop {
            if stop() {
                return Err(Box::new(self.outcome(
                    Ending::Interrupted,
                    depth,
                    None,
                    true,
                )));
            }
            let batch: Frontier<D> = rest.by_ref().take(batch_size).collect();
            if batch.is_empty() {
                return Ok(next);
            }
            let expander = Expander {
                model: self.model,
                reached: &self.reached,
                seen: &self.seen,
                header: &self.header,
                bounds,
            };
            let expanded = in_parallel(batch, jobs, |(i, w)| expander.expand(i, w));
            if let Some(ended) = self.take_batch(expanded, depth, bounds, jobs, &mut next) {
                return Err(Box::new(ended));
            }
        }
    }

    /// The states at the depth bound: each that has no choice left ends its schedule and is
    /// judged as any schedule's end; if any has a choice, the bound cut its schedules short.
    /// So a depth bound equal to the longest schedule still verifies.
    fn last_level(&mut self, frontier: Frontier<D>, depth: u32, bounds: &crate::Bounds) -> Outcome {
        let mut cut = false;
        for (index, world) in frontier {
            let mut world = world.unwrap_or_else(|| rebuild(self.model, &self.reached, index));
            if !world.choices(bounds).is_empty() {
                cut = true;
            } else if let Some(v) = first_violation(&self.header, &world.shared.records, true) {
                return self.found(index, v, depth);
            }
        }
        match cut {
            true => self.outcome(Ending::BoundsReached, depth, None, true),
            false => self.outcome(Ending::Verified, depth, None, false),
        }
    }

    /// Merge one expanded batch into the search, then check its new states whose checks are
    /// due; the outcome if a violation or the state bound ends the search, as a one-thread
    /// search would have ended it.
    fn take_batch(
        &mut self,
        expanded: Vec<Expanded<D>>,
        depth: u32,
        bounds: &crate::Bounds,
        jobs: usize,
        next: &mut Frontier<D>,
    ) -> Option<Outcome> {
        let mut pending = Vec::new();
        let stopped = self.merge(expanded, bounds, next, &mut pending);
        let records: Vec<&Records> = pending
            .iter()
            .map(|p| {
                let world = next[p.at]
                    .1
                    .as_ref()
                    .expect("a state with checks due is a copy");
                &world.shared.records
            })
            .collect();
        let header = &self.header;
        let verdicts = in_parallel(records, jobs, |r| first_violation(header, r, false));
        if let Some((p, v)) = pending
            .iter()
            .zip(verdicts)
            .find_map(|(p, v)| v.map(|v| (p, v)))
        {
            // The first new state of the batch to violate a property: the search ends there.
            self.states = p.states;
            self.transitions = p.transitions;
            return Some(self.found(p.index, v, depth + 1));
        }
        Some(match stopped? {
            Stop::Leaf(index, v) => self.found(index, v, depth),
            Stop::Violated(index, v) => self.found(index, v, depth + 1),
            Stop::Full => self.outcome(Ending::BoundsReached, depth + 1, None, true),
        })
    }

    /// Take the batch's successors in order: each new one kept and queued (and listed in
    /// `pending` if its checks are due); stops at a schedule's violating end, at a new state
    /// its worker found violating, or at the state bound.
    fn merge(
        &mut self,
        expanded: Vec<Expanded<D>>,
        bounds: &crate::Bounds,
        next: &mut Frontier<D>,
        pending: &mut Vec<Pending>,
    ) -> Option<Stop> {
        for e in expanded {
            if let Some(v) = e.leaf_violation {
                return Some(Stop::Leaf(e.index, v));
            }
            for child in e.children {
                self.transitions += 1;
                let Some((mut world, checked)) = child.fresh else {
                    continue;
                };
                if child.fingerprint.is_some_and(|fp| !self.seen.insert(fp)) {
                    continue; // met earlier in the same batch
                }
                if let Some(world) = &mut world {
                    world.intern(&mut self.interned);
                    world.shared.records.intern(&mut self.entries);
                }
                self.states += 1;
                let index = self.reached.len() as u32;
                self.reached.push(Reached {
                    parent: e.index,
                    choice: child.choice,
                });
                match checked {
                    Checked::Clean => {}
                    Checked::Violated(v) => return Some(Stop::Violated(index, v)),
                    Checked::Due => pending.push(Pending {
                        index,
                        states: self.states,
                        transitions: self.transitions,
                        at: next.len(),
                    }),
                }
                next.push((index, world));
                if self.states >= bounds.max_states {
                    return Some(Stop::Full);
                }
            }
        }
        None
    }

    /// The counterexample ending at `index`'s state.
    fn found(&self, index: u32, violation: Violation, depth: u32) -> Outcome {
        let schedule = schedule(&self.reached, index);
        let mut world = World::new(self.model);
        let mut steps = Vec::with_capacity(schedule.len());
        let mut timing = Timing::start(&mut world, &self.model.setup);
        for choice in &schedule {
            steps.push(world.describe(&self.model.setup, *choice));
            timing.step(&mut world, self.model, *choice);
        }
        let history: History = world.shared.records.history(self.header.clone());
        let counterexample = Counterexample {
            steps,
            schedule,
            violation,
            history,
            timing,
        };
        self.outcome(Ending::Violation, depth, Some(counterexample), false)
    }

    fn outcome(
        &self,
        ending: Ending,
        depth: u32,
        counterexample: Option<Counterexample>,
        cut: bool,
    ) -> Outcome {
        Outcome {
            ending,
            states: self.states,
            transitions: self.transitions,
            depth,
            cut,
            counterexample,
        }
    }
}

/// The state reached by `index`'s schedule, rebuilt from the initial state.
fn rebuild<D: Design>(model: &Model<D>, reached: &[Reached], index: u32) -> World<D> {
    let mut world = World::new(model);
    for choice in schedule(reached, index) {
        world.apply(model, choice);
    }
    world
}

/// The choices from the initial state to `index`'s state.
fn schedule(reached: &[Reached], mut index: u32) -> Vec<Choice> {
    let mut path = Vec::new();
    while index != 0 && index != ROOT {
        let r = reached[index as usize];
        path.push(r.choice);
        index = r.parent;
    }
    path.reverse();
    path
}

/// The first violation of a checked property in the history `records` hold
/// (`not-linearizable` only at a schedule's end, `at_end`).
/// Along a schedule only the properties a prefix can show are asked ([`check_path`]); the
/// whole check, linearizability with it, at its end.
fn first_violation(header: &Header, records: &Records, at_end: bool) -> Option<Violation> {
    let history = records.history(header.clone());
    let violations = if at_end {
        check_with(&history, &CheckOptions::default()).violations
    } else {
        check_path(&history)
    };
    violations.into_iter().find(|v| CHECKED.contains(&v.kind))
}

#[cfg(test)]
mod tests {
    use super::{CHECKED, NOT_CHECKED};
    use fencesim_history::ViolationKind;

    /// Every property the checker has is either checked or listed as not checked with why:
    /// a new property must be placed.
    #[test]
    fn every_property_is_checked_or_said_not_to_be() {
        for kind in ViolationKind::ALL {
            let checked = CHECKED.contains(&kind);
            let not = NOT_CHECKED.iter().any(|(k, _)| *k == kind);
            assert!(
                checked != not,
                "{}: checked {checked}, not checked {not}",
                kind.as_str()
            );
        }
    }
}
