//! Shrinking a failing run to a minimal scenario that still fails the same way.
//!
//! The failing run's whole fault schedule, its `[[faults]]` and whatever the random nemesis
//! drew for the seed, becomes a scripted schedule on the same seed. Delta debugging (Zeller and
//! Hildebrandt, "Simplifying and Isolating Failure-Inducing Input", 2002) then removes faults
//! while the violation kind is still found, then clients, then moves the remaining schedule
//! sooner, then cuts the run's length, then each remaining fault's length. Every candidate is simulated and checked from scratch on the
//! same seed, so the result is a scenario that `fencesim run` reproduces as it is.

use fencesim_history::ViolationKind;
use fencesim_scenario::{Action, Cut, ExpectedVerdict, Fault, Scenario, SeedRange, Trigger};

use crate::report::Report;
use crate::Engine;

/// How a shrink went.
#[derive(Clone, Debug)]
pub struct Shrunk {
    /// The minimal scenario: scripted faults, no `[nemesis]`, its seed range the one seed, and
    /// an expectation of the violation kind.
    pub scenario: Scenario,
    /// The seed.
    pub seed: u64,
    /// The violation kind kept.
    pub kind: ViolationKind,
    /// Faults, clients and run length before shrinking (nemesis-drawn faults included).
    pub before: Size,
    /// The same after.
    pub after: Size,
    /// Simulations run.
    pub runs: u64,
    /// How far the schedule was moved sooner in all, ms (0: not moved).
    pub sooner_ms: u64,
}

/// What a shrink reduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    /// Fault events in the schedule.
    pub faults: usize,
    /// Clients.
    pub clients: usize,
    /// Run length, simulated ms.
    pub duration_ms: u64,
}

impl Size {
    fn of(s: &Scenario) -> Self {
        Size {
            faults: s.faults.len(),
            clients: s.clients.len(),
            duration_ms: s.duration_ms,
        }
    }
}

/// Why a run cannot be shrunk.
#[derive(Debug, thiserror::Error)]
pub enum ShrinkError {
    /// The run found no violation of the kind.
    #[error("seed {seed} of {scenario} has no {kind} violation to shrink")]
    NotFailing {
        /// Scenario name.
        scenario: String,
        /// Seed.
        seed: u64,
        /// The kind asked for.
        kind: String,
    },
    /// The seed is the largest u64: a scenario's half-open range `seed..seed + 1` cannot hold it.
    #[error("seed {seed} is the largest possible; a scenario's seed range A..B cannot name it, so the minimal scenario could not be written")]
    SeedTooLarge {
        /// Seed.
        seed: u64,
    },
    /// The schedule written out as scripted faults no longer fails (it should: the nemesis's
    /// faults are ordinary scripted faults).
    #[error("the fault schedule of seed {seed}, written as scripted faults, no longer shows {kind}; cannot shrink it")]
    NotReproduced {
        /// Seed.
        seed: u64,
        /// The kind.
        kind: String,
    },
}

/// Shrink `scenario` on `seed` to a minimal scenario that still shows `kind`.
///
/// `drawn` is the random nemesis's schedule for the seed (report.json's `nemesis.faults`), if
/// the scenario has a `[nemesis]`. `fails(candidate)` simulates and checks a candidate on the
/// seed and says whether `kind` was found; [`shows`] is the usual one. Candidates that the
/// scenario validation would refuse are skipped by `fails` returning false.
pub fn shrink(
    scenario: &Scenario,
    seed: u64,
    kind: ViolationKind,
    drawn: &[Fault],
    fails: &mut dyn FnMut(&Scenario) -> bool,
) -> Result<Shrunk, ShrinkError> {
    let Some(seed_end) = seed.checked_add(1) else {
        return Err(ShrinkError::SeedTooLarge { seed });
    };
    let mut runs = 0u64;
    let mut test = |s: &Scenario| {
        runs += 1;
        fails(s)
    };
    let mut current = scripted(scenario, drawn);
    let mut sooner_ms = 0;
    let before = Size::of(&current);
    if !test(scenario) {
        return Err(ShrinkError::NotFailing {
            scenario: scenario.name.clone(),
            seed,
            kind: kind.as_str().into(),
        });
    }
    if !test(&current) {
        return Err(ShrinkError::NotReproduced {
            seed,
            kind: kind.as_str().into(),
        });
    }
    // Each pass can make another possible (with one client fewer, a fault may no longer be
    // needed), so they repeat until a round changes nothing: then no single fault, client or
    // shortening can go, and the result is 1-minimal. Every round that changes something makes
    // the scenario strictly smaller, so this ends.
    loop {
        let before_round = (
            current.faults.clone(),
            current.clients.len(),
            current.duration_ms,
        );
        current.faults = ddmin(&current, &mut test);
        current = fewer_clients(current, &mut test);
        let (moved, by_ms) = sooner(current, &mut test);
        current = moved;
        sooner_ms += by_ms;
        current = shorter_run(current, &mut test);
        current = shorter_faults(current, &mut test);
        if (
            current.faults.clone(),
            current.clients.len(),
            current.duration_ms,
        ) == before_round
        {
            break;
        }
    }
    current.name = fencesim_scenario::derived_name(&scenario.name, &format!("-seed-{seed}-min"));
    current.description = format!(
        "The smallest failing run found by `fencesim shrink` from seed {seed} of {}: it still shows {}.\nThe scenario it was shrunk from:\n{}",
        scenario.name,
        kind.as_str(),
        scenario.description.trim_end()
    );
    current.seeds = SeedRange {
        start: seed,
        end: seed_end,
    };
    current.expect.verdict = ExpectedVerdict::Invalid;
    current.expect.violations = vec![kind];
    current.expect.absent.retain(|k| *k != kind);
    let after = Size::of(&current);
    Ok(Shrunk {
        scenario: current,
        seed,
        kind,
        before,
        after,
        runs,
        sooner_ms,
    })
}

/// The scenario with its nemesis's schedule for the seed as scripted faults, final heal
/// included (it is what stopped later event-triggered faults in the failing run; delta
/// debugging removes it like any other fault if the failure does not need it), and no
/// `[nemesis]`.
fn scripted(scenario: &Scenario, drawn: &[Fault]) -> Scenario {
    let mut s = scenario.clone();
    s.nemesis = None;
    s.faults.extend(drawn.iter().cloned());
    s
}

/// Delta debugging over the fault list: remove chunks while the run still fails, halving the
/// chunks when none can go, and end with single faults (1-minimal: no one fault can go).
fn ddmin(base: &Scenario, test: &mut dyn FnMut(&Scenario) -> bool) -> Vec<Fault> {
    let mut faults = base.faults.clone();
    let mut chunks = 2usize;
    while !faults.is_empty() {
        let size = faults.len().div_ceil(chunks);
        let mut removed_one = false;
        let mut start = 0;
        while start < faults.len() {
            let end = (start + size).min(faults.len());
            let mut candidate = faults.clone();
            candidate.drain(start..end);
            if test(&with_faults(base, &candidate)) {
                faults = candidate;
                removed_one = true;
                chunks = chunks.saturating_sub(1).max(2);
                break;
            }
            start = end;
        }
        if removed_one {
            continue;
        }
        if size == 1 {
            break;
        }
        chunks = (chunks * 2).min(faults.len());
    }
    faults
}

fn with_faults(base: &Scenario, faults: &[Fault]) -> Scenario {
    let mut s = base.clone();
    s.faults = faults.to_vec();
    s
}

/// Drop clients, last first, with the faults aimed at them, while the run still fails.
fn fewer_clients(mut current: Scenario, test: &mut dyn FnMut(&Scenario) -> bool) -> Scenario {
    let mut i = current.clients.len();
    while i > 0 && current.clients.len() > 1 {
        i -= 1;
        let mut candidate = current.clone();
        let gone = candidate.clients.remove(i).name;
        candidate.faults.retain(|f| !involves(f, &gone));
        if test(&candidate) {
            current = candidate;
        }
    }
    current
}

/// Whether a fault names `node` anywhere: as its target, a message's sender, a link's end or
/// a partition's member. A fault naming a client that is gone would be refused.
fn involves(fault: &Fault, node: &str) -> bool {
    let is = |n: &Option<String>| n.as_deref() == Some(node);
    match &fault.action {
        Action::Hold { from, .. } => from == node,
        Action::HoldAll { from, .. } => is(from),
        Action::Latency { link, .. }
        | Action::Loss { link, .. }
        | Action::Duplicate { link, .. } => is(&link.from) || is(&link.to),
        Action::Partition {
            cut: Cut::Groups(groups),
        } => groups.iter().flatten().any(|n| n == node),
        Action::Partition {
            cut: Cut::OneWay { from, to },
        } => from == node || to == node,
        Action::Pause { .. }
        | Action::ClockJump { .. }
        | Action::ClockSkew { .. }
        | Action::ClockDrift { .. }
        | Action::ClockStrobe { .. }
        | Action::Crash { .. }
        | Action::Restart { .. }
        | Action::StallRenewals { .. }
        | Action::Deregister { .. }
        | Action::Restore { .. }
        | Action::Partition {
            cut: Cut::Isolate(_),
        }
        | Action::Reorder { .. }
        | Action::Heal
        | Action::FinalHeal { .. } => fault.action.node() == Some(node),
    }
}

/// Start the schedule sooner: shift every fault that starts at a time (its `at_ms`, or the
/// `count_from_ms` an event trigger counts from), and every client that starts no sooner than
/// the first of them (it joins the schedule, as a client that comes after a restore does),
/// earlier by whole seconds, all by the same amount so that they keep their order and
/// spacing: as far as the earliest fault allows if that still fails, else by the shift a
/// binary search finds. Returns the scenario and the shift, ms. Whether a shift still fails is
/// not monotone in it (the system's own round moves under the faults), so the search finds a
/// shift that fails, not always the largest. A failure found late in a run (guided
/// exploration's probes strike up to a minute in) then lets [`shorter_run`] cut the run to the
/// seconds the failure needs.
fn sooner(current: Scenario, test: &mut dyn FnMut(&Scenario) -> bool) -> (Scenario, u64) {
    let Some(earliest_ms) = current.faults.iter().filter_map(start_ms).min() else {
        return (current, 0);
    };
    let shifted = |by_ms| shifted(&current, by_ms, earliest_ms);
    let most = earliest_ms / 1000;
    if most > 0 {
        let farthest = shifted(most * 1000);
        if test(&farthest) {
            return (farthest, most * 1000);
        }
    }
    // `lo` seconds is a shift known to fail (none at first), `hi` the most left to try.
    let (mut lo, mut hi) = (0, most.saturating_sub(1));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if test(&shifted(mid * 1000)) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    if lo == 0 {
        return (current, 0);
    }
    (shifted(lo * 1000), lo * 1000)
}

/// When `fault` starts, if it starts at a time: its `at_ms`, or the time from which an event
/// trigger counts (an event trigger counting from the run's start has no time of its own).
pub(crate) fn start_ms(fault: &Fault) -> Option<u64> {
    match fault.trigger {
        Trigger::At { at_ms } => Some(at_ms),
        Trigger::After { count_from_ms, .. } | Trigger::Before { count_from_ms, .. }
            if count_from_ms > 0 =>
        {
            Some(count_from_ms)
        }
        _ => None,
    }
}

/// `scenario` with every fault that starts at a time, and every client that starts at or
/// after `from_ms` (the first fault's start), starting `by_ms` sooner (none before the run's
/// start: [`sooner`] shifts by at most the first fault's start).
fn shifted(scenario: &Scenario, by_ms: u64, from_ms: u64) -> Scenario {
    let mut s = scenario.clone();
    for client in s.clients.iter_mut().filter(|c| c.start_ms >= from_ms) {
        client.start_ms = client.start_ms.saturating_sub(by_ms);
    }
    for fault in &mut s.faults {
        match &mut fault.trigger {
            Trigger::At { at_ms } => *at_ms = at_ms.saturating_sub(by_ms),
            Trigger::After { count_from_ms, .. } | Trigger::Before { count_from_ms, .. } => {
                *count_from_ms = count_from_ms.saturating_sub(by_ms);
            }
        }
    }
    s
}

/// Shorten the run: binary search for the shortest length (in whole seconds) that still fails.
fn shorter_run(mut current: Scenario, test: &mut dyn FnMut(&Scenario) -> bool) -> Scenario {
    // A fault that starts at a time (an event trigger cannot strike before it starts
    // counting) needs the run to last until it has ended.
    let floor_s = current
        .faults
        .iter()
        .filter_map(|f| start_ms(f).map(|ms| ms + f.duration_ms.unwrap_or(0)))
        .max()
        .unwrap_or(0)
        .div_ceil(1000);
    let (mut lo, mut hi) = (floor_s.max(1), current.duration_ms.div_ceil(1000));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let mut candidate = current.clone();
        candidate.duration_ms = mid * 1000;
        if test(&candidate) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    if hi * 1000 < current.duration_ms {
        current.duration_ms = hi * 1000;
    }
    current
}

/// Shorten each remaining fault to the shortest whole second (or the original length, if
/// shorter) that still fails.
fn shorter_faults(mut current: Scenario, test: &mut dyn FnMut(&Scenario) -> bool) -> Scenario {
    for i in 0..current.faults.len() {
        let Some(ms) = current.faults[i].duration_ms else {
            continue;
        };
        let (mut lo, mut hi) = (1u64, ms.div_ceil(1000));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let mut candidate = current.clone();
            candidate.faults[i].duration_ms = Some(mid * 1000);
            if test(&candidate) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        if hi * 1000 < ms {
            current.faults[i].duration_ms = Some(hi * 1000);
        }
    }
    current
}

/// Simulate `scenario` on `seed`, check it, and say whether `kind` was found in a run that
/// did not itself fail (a candidate that times out or panics is not a reproduction).
pub fn shows(engine: &Engine, scenario: &Scenario, seed: u64, kind: ViolationKind) -> bool {
    let outcome = engine.simulate(scenario, seed);
    outcome.failure.is_none()
        && fencesim_checker::check(&outcome.history)
            .violations
            .iter()
            .any(|v| v.kind == kind)
}

/// Whether `candidate`, written as TOML and read back (so what is run is exactly what the
/// minimal file will say, and validation would accept it), shows `kind` on `seed`.
pub fn file_shows(engine: &Engine, candidate: &Scenario, seed: u64, kind: ViolationKind) -> bool {
    let text = fencesim_scenario::to_toml(candidate);
    match engine.parse_scenario(&text, "candidate.toml") {
        Ok(parsed) => shows(engine, &parsed, seed, kind),
        Err(_) => false,
    }
}

/// Shrink the run a report describes, keeping `kind`.
pub fn shrink_report(
    engine: &Engine,
    report: &Report,
    kind: ViolationKind,
) -> Result<Shrunk, ShrinkError> {
    let drawn = report.nemesis.as_ref().map_or(&[][..], |p| &p.faults[..]);
    let seed = report.seed;
    shrink(&report.scenario, seed, kind, drawn, &mut |c| {
        file_shows(engine, c, seed, kind)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scenario with `n` pauses, fault `i` at `i` seconds, so a fault is known by its time.
    fn with_pauses(n: u64) -> Scenario {
        let (file, text) = crate::bundled::find("pause-fenced").expect("bundled");
        let mut s = crate::Engine::built_in()
            .parse_scenario(text, file)
            .expect("valid");
        s.faults = (0..n)
            .map(|i| Fault {
                action: Action::Pause {
                    node: "client-1".into(),
                },
                trigger: Trigger::At { at_ms: i * 1000 },
                duration_ms: Some(4000),
            })
            .collect();
        s
    }

    fn times(s: &Scenario) -> Vec<u64> {
        s.faults
            .iter()
            .map(|f| match f.trigger {
                Trigger::At { at_ms } => at_ms / 1000,
                _ => u64::MAX,
            })
            .collect()
    }

    #[test]
    fn ddmin_keeps_exactly_the_faults_the_failure_needs() {
        // "Fails" while faults 3 and 11 are both present, whatever else is.
        let mut needs = |s: &Scenario| {
            let t = times(s);
            t.contains(&3) && t.contains(&11)
        };
        let kept = ddmin(&with_pauses(20), &mut needs);
        assert_eq!(times(&with_faults(&with_pauses(0), &kept)), vec![3, 11]);
    }

    #[test]
    fn shrink_reduces_faults_clients_run_and_fault_lengths() {
        let base = with_pauses(8);
        let mut runs_seen = 0;
        // Fails while fault 5 is present, client-1 exists, the run lasts at least 20 s and
        // fault 5 lasts at least 2 s.
        let mut fails = |s: &Scenario| {
            runs_seen += 1;
            let five = s
                .faults
                .iter()
                .find(|f| f.trigger == Trigger::At { at_ms: 5000 });
            five.is_some_and(|f| f.duration_ms >= Some(2000))
                && s.clients.iter().any(|c| c.name == "client-1")
                && s.duration_ms >= 20_000
        };
        let shrunk =
            shrink(&base, 7, ViolationKind::StaleWriteAccepted, &[], &mut fails).expect("shrinks");
        assert_eq!(times(&shrunk.scenario), vec![5]);
        assert_eq!(shrunk.scenario.faults[0].duration_ms, Some(2000));
        let names: Vec<&str> = shrunk
            .scenario
            .clients
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, vec!["client-1"]);
        assert_eq!(shrunk.scenario.duration_ms, 20_000);
        assert_eq!(shrunk.before.faults, 8);
        assert_eq!(shrunk.after.faults, 1);
        assert_eq!(shrunk.scenario.seeds, SeedRange { start: 7, end: 8 });
        assert_eq!(
            shrunk.scenario.expect.violations,
            vec![ViolationKind::StaleWriteAccepted]
        );
        assert_eq!(shrunk.runs, runs_seen);
    }

    #[test]
    fn shrink_moves_a_late_schedule_sooner_and_then_cuts_the_run() {
        // Two faults 3 s apart, late in the run: the first at 40 s, the second counted from
        // 43 s. "Fails" while they stay 3 s apart and the run lasts until 10 s after the
        // second starts.
        let mut base = with_pauses(0);
        base.duration_ms = 60_000;
        let pause = |trigger| Fault {
            action: Action::Pause {
                node: "client-1".into(),
            },
            trigger,
            duration_ms: Some(1000),
        };
        base.faults = vec![
            pause(Trigger::At { at_ms: 40_000 }),
            pause(Trigger::Before {
                event: fencesim_scenario::NodeEvent::Write,
                nth: 1,
                count_from_ms: 43_000,
            }),
        ];
        let mut fails = |s: &Scenario| {
            let starts: Vec<u64> = s.faults.iter().filter_map(start_ms).collect();
            s.faults.len() == 2
                && starts.len() == 2
                && starts[1] == starts[0] + 3000
                && s.duration_ms >= starts[1] + 10_000
        };
        let shrunk =
            shrink(&base, 1, ViolationKind::StaleWriteAccepted, &[], &mut fails).expect("shrinks");
        // Both 40 s sooner, still 3 s apart; the run cut to 10 s after the second.
        assert_eq!(shrunk.scenario.faults[0].trigger, Trigger::At { at_ms: 0 });
        assert_eq!(
            shrunk.scenario.faults[1].trigger,
            Trigger::Before {
                event: fencesim_scenario::NodeEvent::Write,
                nth: 1,
                count_from_ms: 3000,
            }
        );
        assert_eq!(shrunk.scenario.duration_ms, 13_000);
        assert_eq!(shrunk.sooner_ms, 40_000);
    }

    #[test]
    fn a_client_that_starts_with_the_schedule_moves_with_it() {
        let mut s = with_pauses(0);
        s.faults = with_pauses(31).faults.split_off(30); // one pause, at 30 s
        s.clients.truncate(1);
        s.clients[0].start_ms = 100;
        let mut late = s.clients[0].clone();
        late.name = "client-late".into();
        late.start_ms = 31_000;
        s.clients.push(late);
        let moved = shifted(&s, 29_000, 30_000);
        assert_eq!(moved.faults[0].trigger, Trigger::At { at_ms: 1_000 });
        let starts: Vec<u64> = moved.clients.iter().map(|c| c.start_ms).collect();
        // The client that starts before the schedule stays; the one after it moves with it.
        assert_eq!(starts, vec![100, 2_000]);
    }

    #[test]
    fn a_run_without_the_violation_is_refused() {
        let err = shrink(
            &with_pauses(2),
            0,
            ViolationKind::TokenReused,
            &[],
            &mut |_| false,
        )
        .expect_err("nothing to shrink");
        assert_eq!(
            err.to_string(),
            "seed 0 of pause-fenced has no token-reused violation to shrink"
        );
    }
}
