//! The random nemesis: a schedule of faults drawn from the seed before the run starts, in the
//! manner of Jepsen's combined nemeses, and swarm testing (Groce et al., "Swarm Testing", 2012):
//! in swarm mode each seed switches on only a random subset of the fault kinds and narrows the
//! timing ranges, so that rare combinations get whole runs to themselves.
//!
//! The drawn faults are ordinary scripted faults (at a time, with a duration ending before the
//! final heal), so they go through the same mechanics, and the plan is part of the report.

use fencesim_scenario::{
    Action, Cut, Fault, LatencyRange, LinkSel, MessageKind, NemesisSpec, Range64, Scenario, Trigger,
};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

use crate::seeds::{self, Stream};

/// What the random nemesis drew for one seed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NemesisPlan {
    /// Whether swarm mode chose the kinds and ranges below.
    pub swarm: bool,
    /// The fault kinds switched on for this seed.
    pub kinds: Vec<String>,
    /// Gap between fault starts for this seed, ms.
    pub interval_ms: LatencyRange,
    /// Fault durations for this seed, ms.
    pub duration_ms: LatencyRange,
    /// The drawn schedule, ending with the final heal.
    pub faults: Vec<Fault>,
}

const MESSAGE_KINDS: [MessageKind; 10] = [
    MessageKind::Acquire,
    MessageKind::AcquireReply,
    MessageKind::Renew,
    MessageKind::RenewReply,
    MessageKind::Release,
    MessageKind::ReleaseReply,
    MessageKind::Read,
    MessageKind::ReadReply,
    MessageKind::Write,
    MessageKind::WriteReply,
];

/// Draw the plan for `seed`.
pub fn plan(spec: &NemesisSpec, scenario: &Scenario, seed: u64) -> NemesisPlan {
    let (kinds, interval_ms, duration_ms) = if spec.swarm {
        swarm(spec, &mut seeds::rng(seed, Stream::Swarm))
    } else {
        (spec.kinds.clone(), spec.interval_ms, spec.duration_ms)
    };
    let mut rng = seeds::rng(seed, Stream::Nemesis);
    let nodes = scenario.node_names();
    let mut faults = Vec::new();
    let mut t = spec.start_ms + draw(&mut rng, interval_ms);
    while t < spec.heal_at_ms {
        // Every fault ends strictly before the final heal, which undoes whatever remains.
        let room = spec.heal_at_ms - t - 1;
        let length = draw(&mut rng, duration_ms).min(room);
        let kind = kinds.choose(&mut rng).expect("at least one kind").clone();
        if length > 0 {
            faults.push(fault(&kind, t, length, spec, &nodes, &mut rng));
        }
        t += draw(&mut rng, interval_ms);
    }
    let window_ms = spec.recovery_periods * scenario.lock_service.max_ttl_ms;
    faults.push(Fault {
        action: Action::FinalHeal { window_ms },
        trigger: Trigger::At {
            at_ms: spec.heal_at_ms,
        },
        duration_ms: None,
    });
    NemesisPlan {
        swarm: spec.swarm,
        kinds,
        interval_ms,
        duration_ms,
        faults,
    }
}

/// A random non-empty subset of the kinds, and sub-ranges of the timing ranges.
fn swarm(
    spec: &NemesisSpec,
    rng: &mut Xoshiro256PlusPlus,
) -> (Vec<String>, LatencyRange, LatencyRange) {
    let mut kinds: Vec<String> = spec
        .kinds
        .iter()
        .filter(|_| rng.gen_bool(0.5))
        .cloned()
        .collect();
    if kinds.is_empty() {
        kinds.push(spec.kinds.choose(rng).expect("validated non-empty").clone());
    }
    let mut narrow = |r: LatencyRange| {
        let min_ms = rng.gen_range(r.min_ms..=r.max_ms);
        LatencyRange {
            min_ms,
            max_ms: rng.gen_range(min_ms..=r.max_ms),
        }
    };
    let interval = narrow(spec.interval_ms);
    let duration = narrow(spec.duration_ms);
    (kinds, interval, duration)
}

fn draw(rng: &mut Xoshiro256PlusPlus, r: LatencyRange) -> u64 {
    rng.gen_range(r.min_ms..=r.max_ms)
}

fn signed(rng: &mut Xoshiro256PlusPlus, r: Range64) -> i64 {
    rng.gen_range(r.min..=r.max)
}

/// One fault of `kind` at `at_ms` lasting `duration_ms`.
fn fault(
    kind: &str,
    at_ms: u64,
    duration_ms: u64,
    spec: &NemesisSpec,
    nodes: &[String],
    rng: &mut Xoshiro256PlusPlus,
) -> Fault {
    let node = spec
        .targets
        .choose(rng)
        .expect("validated non-empty")
        .clone();
    let rate = rng.gen_range(spec.rate[0]..=spec.rate[1]);
    let mut duration = Some(duration_ms);
    let action = match kind {
        "pause" => Action::Pause { node },
        "crash" => Action::Crash { node },
        "partition" => Action::Partition {
            cut: partition(nodes, &node, rng),
        },
        "clock-jump" => {
            duration = None;
            Action::ClockJump {
                node,
                delta_ms: signed(rng, spec.clock_jump_ms),
            }
        }
        "clock-skew" => Action::ClockSkew {
            node,
            offset_ms: signed(rng, spec.clock_offset_ms),
        },
        "clock-drift" => Action::ClockDrift {
            node,
            ppm: signed(rng, spec.drift_ppm),
        },
        "clock-strobe" => {
            let period_ms = (duration_ms / rng.gen_range(2..=10)).max(1);
            Action::ClockStrobe {
                node,
                offset_ms: signed(rng, spec.clock_offset_ms),
                period_ms,
            }
        }
        "loss" => Action::Loss {
            link: LinkSel::default(),
            rate,
        },
        "duplicate" => Action::Duplicate {
            link: LinkSel::default(),
            rate,
        },
        "reorder" => Action::Reorder {
            window_ms: draw(rng, spec.reorder_window_ms),
        },
        "latency" => {
            let min_ms = draw(rng, spec.latency_ms);
            let max_ms = rng.gen_range(min_ms..=spec.latency_ms.max_ms.max(min_ms));
            Action::Latency {
                link: LinkSel::default(),
                latency_ms: LatencyRange { min_ms, max_ms },
            }
        }
        "hold-all" => Action::HoldAll {
            message: *MESSAGE_KINDS.choose(rng).expect("non-empty"),
            from: None,
        },
        other => unreachable!("validation admits no fault kind {other:?} for the random nemesis"),
    };
    Fault {
        action,
        trigger: Trigger::At { at_ms },
        duration_ms: duration,
    }
}

/// Isolate `node`, or split every node into a majority and a minority (Jepsen's
/// partition-random-halves), each half the time.
fn partition(nodes: &[String], node: &str, rng: &mut Xoshiro256PlusPlus) -> Cut {
    if nodes.len() < 3 || rng.gen_bool(0.5) {
        return Cut::Isolate(node.to_owned());
    }
    let mut shuffled = nodes.to_vec();
    shuffled.shuffle(rng);
    let minority = shuffled.split_off(nodes.len() / 2 + 1);
    Cut::Groups(vec![shuffled, minority])
}
