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

use fencesim_checker::{check_with, CheckOptions};
use fencesim_design::{Design, TokenKind};
use fencesim_history::{Header, History, TokenOrder, ViolationKind};

use crate::report::{Counterexample, Ending, Outcome};
use crate::seen::Seen;
use crate::world::{Choice, Model, World};

/// The properties the search checks: the ones that must hold under any timing.
pub const CHECKED: [ViolationKind; 6] = [
    ViolationKind::StaleWriteAccepted,
    ViolationKind::TokenNotMonotonic,
    ViolationKind::TokenReused,
    ViolationKind::ReleaseByNonHolder,
    ViolationKind::UnfencedMutation,
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
    states: u64,
    transitions: u64,
    header: Header,
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
            ..Header::unnamed()
        };
        Search {
            model,
            reached: Vec::new(),
            seen: Seen::default(),
            states: 0,
            transitions: 0,
            header,
        }
    }

    /// Explore breadth-first until a violation, the bounds, the end of the space, or `stop`
    /// answering true (checked between states).
    pub fn run(mut self, stop: &dyn Fn() -> bool) -> Outcome {
        let bounds = self.model.setup.bounds.clone();
        let mut root = World::new(self.model);
        self.reached.push(Reached {
            parent: ROOT,
            choice: Choice::Crash(0),
        });
        self.states = 1;
        if let Some(fp) = root.fingerprint(self.model) {
            self.seen.insert(fp);
        }
        let copies = self.model.explorable.is_some();
        let mut frontier: Vec<(u32, Option<World<D>>)> = vec![(0, Some(root))];
        let mut depth = 0;
        while !frontier.is_empty() {
            if depth >= bounds.depth {
                return self.outcome(Ending::BoundsReached, depth, None, true);
            }
            let mut next = Vec::new();
            for (index, world) in frontier {
                if stop() {
                    return self.outcome(Ending::Interrupted, depth, None, true);
                }
                let mut world = world.unwrap_or_else(|| self.rebuild(index));
                let choices = world.choices(&bounds);
                if choices.is_empty() {
                    if let Some(found) = self.check(&world, true) {
                        return self.found(index, found, depth);
                    }
                    continue;
                }
                for choice in choices {
                    let mut child = match world.copy(self.model) {
                        Some(copy) => copy,
                        None => self.rebuild(index),
                    };
                    child.apply(self.model, choice);
                    self.transitions += 1;
                    if let Some(fp) = child.fingerprint(self.model) {
                        if !self.seen.insert(fp) {
                            continue;
                        }
                    }
                    self.states += 1;
                    let child_index = self.reached.len() as u32;
                    self.reached.push(Reached {
                        parent: index,
                        choice,
                    });
                    if child.shared.checks_due {
                        if let Some(found) = self.check(&child, false) {
                            return self.found(child_index, found, depth + 1);
                        }
                    }
                    next.push((child_index, copies.then_some(child)));
                    if self.states >= bounds.max_states {
                        return self.outcome(Ending::BoundsReached, depth + 1, None, true);
                    }
                }
                // Without copies, the world was rebuilt for this state alone.
                drop(world);
            }
            frontier = next;
            depth += 1;
        }
        self.outcome(Ending::Verified, depth, None, false)
    }

    /// The state reached by `index`'s schedule, rebuilt from the initial state.
    fn rebuild(&self, index: u32) -> World<D> {
        let mut world = World::new(self.model);
        for choice in self.schedule(index) {
            world.apply(self.model, choice);
        }
        world
    }

    /// The choices from the initial state to `index`'s state.
    fn schedule(&self, mut index: u32) -> Vec<Choice> {
        let mut path = Vec::new();
        while index != 0 && index != ROOT {
            let r = self.reached[index as usize];
            path.push(r.choice);
            index = r.parent;
        }
        path.reverse();
        path
    }

    /// The first violation of a checked property in `world`'s history (`not-linearizable`
    /// only at a schedule's end, `at_end`).
    fn check(&self, world: &World<D>, at_end: bool) -> Option<fencesim_checker::Violation> {
        let history = world.shared.records.history(self.header.clone());
        let options = CheckOptions::default();
        let result = check_with(&history, &options);
        result.violations.into_iter().find(|v| {
            CHECKED.contains(&v.kind) && (at_end || v.kind != ViolationKind::NotLinearizable)
        })
    }

    /// The counterexample ending at `index`'s state.
    fn found(&self, index: u32, violation: fencesim_checker::Violation, depth: u32) -> Outcome {
        let schedule = self.schedule(index);
        let mut world = World::new(self.model);
        let mut steps = Vec::with_capacity(schedule.len());
        for choice in &schedule {
            steps.push(world.describe(&self.model.setup, *choice));
            world.apply(self.model, *choice);
        }
        let history: History = world.shared.records.history(self.header.clone());
        let counterexample = Counterexample {
            steps,
            schedule,
            violation,
            history,
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
