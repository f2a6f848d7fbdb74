//! Mutations of a fault schedule, as a coverage-guided fuzzer mutates an input: shift a fault
//! in time (or to a neighbouring occurrence of its trigger event), stretch or shorten it, aim
//! it at another target, add one the random nemesis would draw, remove one, or take one from
//! another schedule of the corpus. The final heal stays where the scenario puts it, and every
//! fault keeps to the random nemesis's window, so a mutant stays a schedule the nemesis could
//! have drawn.

use fencesim_scenario::{Action, Fault, NemesisSpec, Scenario, Trigger};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// The largest shift of a fault in time, ms.
const MAX_SHIFT_MS: i64 = 3_000;

/// What a mutant is made from: the nemesis's settings and the scenario they apply to.
pub struct Mutator<'a> {
    /// The scenario's random nemesis.
    pub spec: &'a NemesisSpec,
    /// The scenario (for drawing new faults as the nemesis does).
    pub scenario: &'a Scenario,
}

impl Mutator<'_> {
    /// `faults` (the final heal last) with one to four mutations stacked; `donor` is another
    /// schedule of the corpus to take a fault from.
    pub fn mutate(
        &self,
        faults: &[Fault],
        donor: &[Fault],
        rng: &mut Xoshiro256PlusPlus,
    ) -> Vec<Fault> {
        let (mut body, heal) = split_heal(faults);
        let mut stacked = 1;
        while stacked < 4 && rng.gen_bool(0.5) {
            stacked += 1;
        }
        for _ in 0..stacked {
            self.mutate_once(&mut body, donor, rng);
        }
        body.extend(heal);
        body
    }

    fn mutate_once(&self, body: &mut Vec<Fault>, donor: &[Fault], rng: &mut Xoshiro256PlusPlus) {
        let choice = if body.is_empty() {
            4
        } else {
            rng.gen_range(0..7)
        };
        match choice {
            0 | 1 => {
                let i = rng.gen_range(0..body.len());
                self.shift(&mut body[i], rng);
            }
            2 => {
                let i = rng.gen_range(0..body.len());
                self.stretch(&mut body[i], rng);
            }
            3 => {
                let i = rng.gen_range(0..body.len());
                self.retarget(&mut body[i], rng);
            }
            4 => {
                if let Some(fault) = self.draw(rng) {
                    body.push(fault);
                }
            }
            5 => {
                body.remove(rng.gen_range(0..body.len()));
            }
            _ => {
                let (donated, _) = split_heal(donor);
                if let Some(fault) = donated.choose(rng) {
                    body.push(fault.clone());
                }
            }
        }
    }

    /// Move a fault by up to [`MAX_SHIFT_MS`], within the nemesis's window; an event-triggered
    /// fault counted from the start moves to the previous or next occurrence of its event, one
    /// counted from a time moves that time.
    fn shift(&self, fault: &mut Fault, rng: &mut Xoshiro256PlusPlus) {
        match &mut fault.trigger {
            Trigger::At { at_ms } => {
                *at_ms = self.shifted(*at_ms, rng);
                self.fit(fault);
            }
            Trigger::After { count_from_ms, .. } | Trigger::Before { count_from_ms, .. }
                if *count_from_ms > 0 =>
            {
                *count_from_ms = self.shifted(*count_from_ms, rng);
            }
            Trigger::After { nth, .. } | Trigger::Before { nth, .. } => {
                *nth = if rng.gen_bool(0.5) {
                    nth.saturating_sub(1).max(1)
                } else {
                    *nth + 1
                };
            }
        }
    }

    /// `at_ms` moved by up to [`MAX_SHIFT_MS`], mostly a nudge, sometimes a jump (a hazard
    /// window is often a few hundred ms), kept within the nemesis's window.
    fn shifted(&self, at_ms: u64, rng: &mut Xoshiro256PlusPlus) -> u64 {
        let reach = if rng.gen_bool(0.5) {
            MAX_SHIFT_MS / 6
        } else {
            MAX_SHIFT_MS
        };
        let shifted = at_ms as i64 + rng.gen_range(-reach..=reach);
        shifted.clamp(self.spec.start_ms as i64, self.last_start_ms() as i64) as u64
    }

    /// Scale a fault's length by a factor from 1/4 to 4, within the nemesis's window.
    fn stretch(&self, fault: &mut Fault, rng: &mut Xoshiro256PlusPlus) {
        if let Some(ms) = fault.duration_ms.as_mut() {
            let factor = if rng.gen_bool(0.5) {
                rng.gen_range(0.7..1.5)
            } else {
                rng.gen_range(0.25..4.0)
            };
            *ms = ((*ms as f64 * factor) as u64).max(1);
            self.fit(fault);
        }
    }

    /// Aim a node's fault at another of the nemesis's targets.
    fn retarget(&self, fault: &mut Fault, rng: &mut Xoshiro256PlusPlus) {
        if fault.action.node().is_some() {
            if let Some(target) = self.spec.targets.choose(rng) {
                fault.action = fault.action.retarget(target);
            }
        }
    }

    /// A fault the random nemesis would draw, placed uniformly or targeted: one of the
    /// schedule it draws for a fresh seed.
    fn draw(&self, rng: &mut Xoshiro256PlusPlus) -> Option<Fault> {
        let has_leader = self.scenario.lock_service.shape.has_leader;
        let mut spec = self.spec.clone();
        spec.placement = *super::PLACEMENTS.choose(rng).expect("two placements");
        let plan = fencesim_sim::random_nemesis::plan(&spec, self.scenario, rng.gen(), has_leader);
        let (drawn, _) = split_heal(&plan.faults);
        drawn.choose(rng).cloned()
    }

    /// The last time a fault may start: a millisecond before the final heal.
    fn last_start_ms(&self) -> u64 {
        self.spec
            .heal_at_ms
            .saturating_sub(2)
            .max(self.spec.start_ms)
    }

    /// Keep a timed fault's end strictly before the final heal, as the nemesis does.
    fn fit(&self, fault: &mut Fault) {
        if let (Trigger::At { at_ms }, Some(ms)) = (fault.trigger, fault.duration_ms.as_mut()) {
            let room = self.spec.heal_at_ms.saturating_sub(at_ms + 1).max(1);
            *ms = (*ms).min(room);
        }
    }
}

/// The faults before the final heal, and the final heal (if the schedule has one).
fn split_heal(faults: &[Fault]) -> (Vec<Fault>, Option<Fault>) {
    let mut body = faults.to_vec();
    let heal = match body.last() {
        Some(Fault {
            action: Action::FinalHeal { .. },
            ..
        }) => body.pop(),
        _ => None,
    };
    (body, heal)
}
