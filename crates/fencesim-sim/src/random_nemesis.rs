//! The random nemesis: a schedule of faults drawn from the seed before the run starts, in the
//! manner of Jepsen's combined nemeses, and swarm testing (Groce et al., "Swarm Testing", 2012):
//! in swarm mode each seed switches on only a random subset of the fault kinds and narrows the
//! timing ranges, so that rare combinations get whole runs to themselves.
//!
//! The drawn faults are ordinary scripted faults (at a time, with a duration ending before the
//! final heal), so they go through the same mechanics, and the plan is part of the report.

use fencesim_scenario::{
    Action, Cut, Fault, FaultKind, LatencyRange, LinkSel, MessageKind, NemesisSpec, NodeEvent,
    NodeRole, Placement, Range64, Scenario, Trigger, LEADER,
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
    pub kinds: Vec<FaultKind>,
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

/// Draw the plan for `seed`. `has_leader`: the design has one leading node among its lease
/// nodes (Raft's leader, the primary of primary-backup), which `leader` names
/// (its shape's `has_leader`, [`fencesim_design::ServiceShape`]).
pub fn plan(spec: &NemesisSpec, scenario: &Scenario, seed: u64, has_leader: bool) -> NemesisPlan {
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
        let kind = *kinds.choose(&mut rng).expect("at least one kind");
        if length > 0 {
            let drawn = fault(kind, t, length, spec, &nodes, &mut rng);
            faults.push(match spec.placement {
                Placement::Uniform => drawn,
                Placement::Targeted => aim(drawn, scenario, has_leader, &mut rng),
            });
        }
        t += draw(&mut rng, interval_ms);
    }
    faults.push(final_heal(spec, scenario));
    NemesisPlan {
        swarm: spec.swarm,
        kinds,
        interval_ms,
        duration_ms,
        faults,
    }
}

/// The final heal every plan ends with: at `heal_at_ms`, with its recovery window of
/// `recovery_periods` maximum lease periods.
pub fn final_heal(spec: &NemesisSpec, scenario: &Scenario) -> Fault {
    let window_ms = spec.recovery_periods * scenario.lock_service.max_ttl_ms;
    Fault {
        action: Action::FinalHeal { window_ms },
        trigger: Trigger::At {
            at_ms: spec.heal_at_ms,
        },
        duration_ms: None,
    }
}

/// A random non-empty subset of the kinds, and sub-ranges of the timing ranges.
fn swarm(
    spec: &NemesisSpec,
    rng: &mut Xoshiro256PlusPlus,
) -> (Vec<FaultKind>, LatencyRange, LatencyRange) {
    let mut kinds: Vec<FaultKind> = spec
        .kinds
        .iter()
        .filter(|_| rng.gen_bool(0.5))
        .copied()
        .collect();
    if kinds.is_empty() {
        kinds.push(*spec.kinds.choose(rng).expect("validated non-empty"));
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
    kind: FaultKind,
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
        FaultKind::Pause => Action::Pause { node },
        FaultKind::Crash => Action::Crash { node },
        FaultKind::Partition => Action::Partition {
            cut: partition(nodes, &node, rng),
        },
        FaultKind::ClockJump => {
            duration = None;
            Action::ClockJump {
                node,
                delta_ms: signed(rng, spec.clock_jump_ms),
            }
        }
        FaultKind::ClockSkew => Action::ClockSkew {
            node,
            offset_ms: signed(rng, spec.clock_offset_ms),
        },
        FaultKind::ClockDrift => Action::ClockDrift {
            node,
            ppm: signed(rng, spec.drift_ppm),
        },
        FaultKind::ClockStrobe => {
            let period_ms = (duration_ms / rng.gen_range(2..=10)).max(1);
            Action::ClockStrobe {
                node,
                offset_ms: signed(rng, spec.clock_offset_ms),
                period_ms,
            }
        }
        FaultKind::Loss => Action::Loss {
            link: LinkSel::default(),
            rate,
        },
        FaultKind::Duplicate => Action::Duplicate {
            link: LinkSel::default(),
            rate,
        },
        FaultKind::Reorder => Action::Reorder {
            window_ms: draw(rng, spec.reorder_window_ms),
        },
        FaultKind::Latency => {
            let min_ms = draw(rng, spec.latency_ms);
            let max_ms = rng.gen_range(min_ms..=spec.latency_ms.max_ms.max(min_ms));
            Action::Latency {
                link: LinkSel::default(),
                latency_ms: LatencyRange { min_ms, max_ms },
            }
        }
        FaultKind::HoldAll => Action::HoldAll {
            message: *MESSAGE_KINDS.choose(rng).expect("non-empty"),
            from: None,
        },
        // `[nemesis] kinds` holds drawable kinds only (FaultKind::is_drawable, checked when
        // the scenario is validated).
        FaultKind::Hold
        | FaultKind::Heal
        | FaultKind::Restart
        | FaultKind::StallRenewals
        | FaultKind::Deregister
        | FaultKind::Restore
        | FaultKind::FinalHeal => unreachable!("a random nemesis does not draw {kind}"),
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

/// Move a uniformly drawn fault into a hazard window ([`Placement::Targeted`]): a trigger on
/// the target's own events replaces the drawn time, and a hold of every message of a kind
/// becomes a hold of one write or reply. The occurrence aimed at is the one due about when
/// the uniform draw would have struck, so targeted faults still spread over the run. Faults
/// with no node to aim at keep their time.
fn aim(drawn: Fault, scenario: &Scenario, has_leader: bool, rng: &mut Xoshiro256PlusPlus) -> Fault {
    let Trigger::At { at_ms } = drawn.trigger else {
        return drawn;
    };
    if let Action::HoldAll { .. } = drawn.action {
        return hold_one(drawn, scenario, has_leader, at_ms, rng);
    }
    let Some(node) = drawn.action.node().filter(|n| *n != LEADER) else {
        return drawn;
    };
    let role = scenario.role(node);
    if role == NodeRole::LeaseService && has_leader {
        // Only the leader (Raft) or primary grants: a follower or backup never reaches "after
        // a grant", so aim at whichever node leads when the fault starts, at the drawn time.
        let action = drawn.action.retarget(LEADER);
        return Fault { action, ..drawn };
    }
    let event = match (&drawn.action, role) {
        // Between the grant and the write: the lease is held but not used yet.
        // Or at a point the design names in its own code (a claim computed, not yet sent),
        // each as likely as a renewal.
        (Action::Pause { .. } | Action::Crash { .. }, NodeRole::Client) => {
            let mut aims = vec![NodeEvent::Write, NodeEvent::Write, NodeEvent::Renew];
            aims.extend(NodeEvent::of_design(&scenario.lock_service.shape, role));
            *aims.choose(rng).expect("non-empty")
        }
        (_, NodeRole::Resource) => NodeEvent::Accept,
        // A client's clock or links right after a grant; a lease node right after it grants,
        // so the lease's expiry is judged across the fault.
        _ => NodeEvent::Grant,
    };
    let before = matches!(event, NodeEvent::Write | NodeEvent::Renew);
    let nth = occurrence(scenario, role, at_ms);
    Fault {
        trigger: if before {
            Trigger::Before {
                event,
                nth,
                count_from_ms: 0,
            }
        } else {
            Trigger::After {
                event,
                nth,
                count_from_ms: 0,
            }
        },
        ..drawn
    }
}

/// A hold of one message in flight instead of every message of a kind: a client's write (a
/// delayed packet, K02) or a lease node's acquire or renew reply (K05), from a random target.
fn hold_one(
    drawn: Fault,
    scenario: &Scenario,
    has_leader: bool,
    at_ms: u64,
    rng: &mut Xoshiro256PlusPlus,
) -> Fault {
    // A lease node's replies come from the leader or primary in a replicated design, which
    // no fixed sender names: there, hold a client's write.
    let senders: Vec<String> = scenario
        .node_names()
        .into_iter()
        .filter(|n| match scenario.role(n) {
            NodeRole::Client => true,
            NodeRole::LeaseService => !has_leader,
            NodeRole::Resource => false,
        })
        .collect();
    let from = senders.choose(rng).expect("a scenario has clients").clone();
    let role = scenario.role(&from);
    let message = match role {
        NodeRole::Client => MessageKind::Write,
        _ => *[MessageKind::AcquireReply, MessageKind::RenewReply]
            .choose(rng)
            .expect("non-empty"),
    };
    Fault {
        action: Action::Hold {
            from,
            message,
            nth: occurrence(scenario, role, at_ms),
            copy_ms: None,
        },
        ..drawn
    }
}

/// Which occurrence of a node's event falls near `at_ms`, estimated from the workload: the
/// lock passes from client to client about once per `work_ms` plus a round trip, so a lease
/// node sees an event that often and each client that often times the number of clients.
pub fn occurrence(scenario: &Scenario, role: NodeRole, at_ms: u64) -> u64 {
    let clients = scenario.clients.len().max(1) as u64;
    let work_ms = scenario.clients.iter().map(|c| c.work_ms).sum::<u64>() / clients;
    let round_trip_ms = 2 * scenario.network.latency_ms.max_ms;
    let period_ms = (work_ms + round_trip_ms).max(1);
    let per_node_ms = match role {
        NodeRole::Client => period_ms * clients,
        _ => period_ms,
    };
    1 + at_ms / per_node_ms
}
