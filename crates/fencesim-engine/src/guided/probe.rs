//! Hazard probes: the schedules a guided search runs before it mutates anything.
//!
//! A random nemesis draws many faults per run, and most of them get in each other's way: a
//! loss window starves the client a pause was meant to strand, a crash restarts the node a
//! clock jump was aimed at. A probe is one fault, alone, aimed at one hazard window of one kind
//! of node: a client paused, crashed or cut off between its grant and its write or renewal
//! (Kleppmann 2016's stalled holder), a lease node crashed, paused, cut off or with its clock
//! moved just after it grants (the lease's expiry is judged across the fault, as in the
//! Chubby and ZooKeeper session-loss cases), an acquire or renew reply or a write held in
//! flight longer than a lease (Kleppmann's delayed packet), and each network fault at its
//! strongest. Its length is measured in leases: a short one (a tenth of the scenario's longest
//! TTL) that a node can come back from before anyone notices, or a long one (one and a quarter
//! TTLs) that outlasts a lease.
//!
//! Then pairs: two kinds of fault on one node struck together (a holder cut off right after
//! its grant and then stalled before its write), which no single fault shows.
//!
//! Each pair on a client is tried twice. First on every client, each at its own events: the
//! lock goes to whoever asks first, so a client chosen in advance may not be granted in a
//! slot at all (with `random-nemesis-fenced`'s three clients, one often re-acquires slot after
//! slot), and a pair aimed at its grant would strike only past its slot. Then on the chosen
//! client alone, since striking every client stalls them all: a stale write needs another
//! client to be granted and write while the first is stalled. Single probes stay on one
//! client, for the same reason.
//!
//! A probe run packs several probes, one after another, each followed by a lease period of
//! quiet so that the system settles before the next: every probe is then tried alone, as
//! Jepsen's targeted nemeses try one fault at a time, and the first generations try every
//! kind of fault the nemesis may draw on every kind of node it may aim at. An event-triggered
//! probe strikes at its node's first such event from its slot's start (`count_from_ms`),
//! whatever the probes before it did to the lock's round (or later, past its slot, when the
//! node has no such event in it). What a probe run shows feeds the corpus like any
//! other run, so a probe that came close is mutated next.
//!
//! Probes are built from the scenario's nemesis settings (its kinds, targets, window and
//! ranges), the roles of its nodes and its longest TTL: never from its defect knobs or
//! expected violations, and the same for every design. Every probe stays within the nemesis's
//! ranges, so a probe run is a schedule the nemesis could have drawn.

use fencesim_scenario::{
    Action, Cut, Fault, FaultKind, LatencyRange, LinkSel, MessageKind, NemesisSpec, NodeEvent,
    NodeRole, Scenario, Trigger, LEADER,
};
use rand::seq::SliceRandom;
use rand_xoshiro::Xoshiro256PlusPlus;

/// One probe before it is placed in a run: the fault and where to aim it.
#[derive(Clone, Debug)]
struct Probe {
    action: Action,
    /// `Some((event, after))`: triggered by the target's event occurring near the probe's
    /// slot (after it, or just before it); `None`: at the slot's time.
    aim: Option<(NodeEvent, bool)>,
    /// The role whose events the trigger counts.
    role: NodeRole,
    duration_ms: Option<u64>,
}

impl Probe {
    /// This probe struck on each of `clients` if it is aimed at one of them (a fault on the
    /// client, or a hold of its messages), else the probe alone. The lock service grants
    /// whichever client asks first, and a client that has just released often asks first
    /// again, so one client may be kept from the lock for a whole slot: a probe aimed at the
    /// grant or write of a client chosen in advance then never strikes in its slot. Struck
    /// on every client, it strikes the ones the lock reaches, as a holder-aimed nemesis
    /// would (but stalls every client: see the module's doc).
    fn on_every(self, clients: &[String]) -> Vec<Probe> {
        if !self.aims_at_one_of(clients) {
            return vec![self];
        }
        clients
            .iter()
            .map(|client| Probe {
                action: aimed_on(&self.action, client),
                ..self.clone()
            })
            .collect()
    }

    /// Whether the probe strikes one of `clients` (its fault's node, or its hold's sender).
    fn aims_at_one_of(&self, clients: &[String]) -> bool {
        aimed_at(&self.action).is_some_and(|node| clients.iter().any(|c| c == node))
    }
}

/// The node a probe's action strikes: the node of a node fault, the sender of a hold.
fn aimed_at(action: &Action) -> Option<&str> {
    match action {
        Action::Hold { from, .. } => Some(from),
        action => action.node(),
    }
}

/// `action` aimed at `node` instead ([`aimed_at`]).
fn aimed_on(action: &Action, node: &str) -> Action {
    match action {
        Action::Hold {
            message,
            nth,
            copy_ms,
            ..
        } => Action::Hold {
            from: node.to_owned(),
            message: *message,
            nth: *nth,
            copy_ms: *copy_ms,
        },
        action => action.retarget(node),
    }
}

/// How long a probe's fault lasts, relative to a lease.
#[derive(Clone, Copy)]
enum Length {
    /// A tenth of the longest TTL: back before a lease could expire.
    Short,
    /// Three quarters of the longest TTL: back while a lease taken before it may still
    /// be live.
    Medium,
    /// One and a quarter TTLs: outlasts a lease.
    Long,
}

/// Builds a scenario's probes.
pub struct Prober<'a> {
    /// The scenario's random nemesis.
    pub spec: &'a NemesisSpec,
    /// The scenario.
    pub scenario: &'a Scenario,
}

impl Prober<'_> {
    /// Every probe the nemesis settings allow, then every pair of probes of two kinds on one
    /// node, each group in an order shuffled by `rng`, packed into runs: each run's faults
    /// (scripted) followed by the scenario's final heal `heal`. Every single probe and pair
    /// is in exactly one run.
    pub fn runs(&self, heal: &Fault, rng: &mut Xoshiro256PlusPlus) -> Vec<Vec<Fault>> {
        let targets = self.targets(rng);
        let mut singles: Vec<Vec<Probe>> = Vec::new();
        let mut by_node: Vec<Vec<Vec<Probe>>> = vec![Vec::new(); targets.len()];
        for &kind in &self.spec.kinds {
            for ((node, role), kinds) in targets.iter().zip(&mut by_node) {
                let probes = self.node_probes(kind, node, *role);
                singles.extend(probes.iter().map(|p| vec![p.clone()]));
                if !probes.is_empty() {
                    kinds.push(probes);
                }
            }
            singles.extend(
                self.network_probes(kind, &targets)
                    .into_iter()
                    .map(|p| vec![p]),
            );
        }
        singles.shuffle(rng);
        let mut pairs = pairs(&by_node, rng);
        pairs.shuffle(rng);
        // Each pair on a client twice: first on every client (whichever the lock reaches in
        // the slot), then on the chosen client alone (the others keep the lock going round).
        let clients = self.clients();
        let alone: Vec<Vec<Probe>> = pairs
            .iter()
            .filter(|pair| pair.iter().any(|p| p.aims_at_one_of(&clients)))
            .cloned()
            .collect();
        let on_every = pairs.into_iter().map(|pair| {
            pair.into_iter()
                .flat_map(|p| p.on_every(&clients))
                .collect()
        });
        let mut runs = self.pack(singles.into_iter().chain(on_every).chain(alone));
        for run in &mut runs {
            run.push(heal.clone());
        }
        runs
    }

    /// Lay `slots` (each one probe or a pair struck together) out one after another in runs,
    /// each followed by a lease period of quiet so that its effects play out alone. A slot
    /// that does not fit between the nemesis's start and its final heal is left out.
    fn pack(&self, slots: impl Iterator<Item = Vec<Probe>>) -> Vec<Vec<Fault>> {
        let mut runs = Vec::new();
        let mut run: Vec<Fault> = Vec::new();
        let mut at_ms = self.spec.start_ms;
        for slot in slots {
            let length = slot
                .iter()
                .map(|p| p.duration_ms.unwrap_or(1))
                .max()
                .unwrap_or(1);
            let fits = |at_ms: u64| at_ms + length < self.spec.heal_at_ms;
            if !fits(at_ms) && !run.is_empty() {
                runs.push(std::mem::take(&mut run));
                at_ms = self.spec.start_ms;
            }
            if !fits(at_ms) {
                // Longer than the whole window before the final heal: such a probe could
                // only be cut short, so it is left out.
                continue;
            }
            run.extend(slot.into_iter().map(|p| self.place(p, at_ms)));
            at_ms += length + self.ttl_ms();
        }
        if !run.is_empty() {
            runs.push(run);
        }
        runs
    }

    /// Aim `probe` at the slot starting at `at_ms`.
    fn place(&self, probe: Probe, at_ms: u64) -> Fault {
        let trigger = match probe.aim {
            None => Trigger::At { at_ms },
            // The target's first such event in its slot, whatever the probes before it did
            // to the lock's round.
            Some((event, after)) => {
                let (nth, count_from_ms) = (1, at_ms);
                if after {
                    Trigger::After {
                        event,
                        nth,
                        count_from_ms,
                    }
                } else {
                    Trigger::Before {
                        event,
                        nth,
                        count_from_ms,
                    }
                }
            }
        };
        let mut action = probe.action;
        if let Action::Hold { nth, .. } = &mut action {
            // The message of the kind that the sender sends about when the slot starts.
            *nth = self.occurrence(probe.role, at_ms);
        }
        // `pack` put the slot where the whole probe ends before the final heal.
        Fault {
            action,
            trigger,
            duration_ms: probe.duration_ms,
        }
    }

    /// Which message of a `role` node's to hold for a slot at `at_ms` (a hold counts a
    /// sender's messages from the start): the one due then in a run without faults, counted
    /// as if the lock went round a quarter less often. Every probe before it in its run slows
    /// the lock's round (a stalled holder keeps it for a lease), so an estimate at full speed
    /// would strike later and later in the run; one that comes early strikes in the quiet
    /// before its slot.
    fn occurrence(&self, role: NodeRole, at_ms: u64) -> u64 {
        fencesim_sim::random_nemesis::occurrence(self.scenario, role, at_ms * 3 / 4)
    }

    fn ttl_ms(&self) -> u64 {
        self.scenario.lock_service.max_ttl_ms.max(1)
    }

    fn length(&self, length: Length) -> u64 {
        let ms = match length {
            Length::Short => self.ttl_ms() / 10,
            Length::Medium => self.ttl_ms() * 3 / 4,
            Length::Long => self.ttl_ms() + self.ttl_ms() / 4,
        };
        let range = self.spec.duration_ms;
        ms.clamp(range.min_ms.max(1), range.max_ms.max(1))
    }

    /// The nemesis's targets that are clients.
    fn clients(&self) -> Vec<String> {
        self.spec
            .targets
            .iter()
            .filter(|t| *t != LEADER && self.scenario.role(t) == NodeRole::Client)
            .cloned()
            .collect()
    }

    /// One target of each role among the nemesis's targets, chosen by `rng`: nodes of a role
    /// are alike, so one stands for all (a pair on the chosen client is also struck on every
    /// client, [`Probe::on_every`]). A design with a leader is aimed at through `leader`, the
    /// node that grants when the fault starts.
    fn targets(&self, rng: &mut Xoshiro256PlusPlus) -> Vec<(String, NodeRole)> {
        let has_leader = self.scenario.lock_service.shape.has_leader;
        let mut by_role: Vec<(NodeRole, Vec<String>)> = Vec::new();
        for target in &self.spec.targets {
            let role = if target == LEADER {
                NodeRole::LeaseService
            } else {
                self.scenario.role(target)
            };
            // Only the leader grants: a follower never reaches "after a grant".
            let name = if has_leader && role == NodeRole::LeaseService {
                LEADER.to_owned()
            } else {
                target.clone()
            };
            match by_role.iter_mut().find(|(r, _)| *r == role) {
                Some((_, names)) => names.push(name),
                None => by_role.push((role, vec![name])),
            }
        }
        by_role
            .into_iter()
            .filter_map(|(role, names)| names.choose(rng).map(|n| (n.clone(), role)))
            .collect()
    }

    /// The probes of a node-bound `kind` on `node`, a node of `role`.
    fn node_probes(&self, kind: FaultKind, node: &str, role: NodeRole) -> Vec<Probe> {
        use Length::{Long, Medium, Short};
        use NodeEvent::{Accept, Grant, Renew, Write};
        let spec = self.spec;
        let node = node.to_owned();
        // The event a fault on this role is aimed at, and whether it strikes after it, as
        // targeted placement aims ([`fencesim_scenario::Placement::Targeted`]): a client
        // stalls or dies holding a lease it has not used yet, just before its write or
        // renewal, and is cut off or has its clock moved just after its grant; a lease node
        // has just granted; the resource has just accepted. The leader is whichever node leads
        // when the fault starts, which no event count names: it is struck at a time.
        // The points a design names in its own code are hazard windows it knows of (a claim
        // computed and not yet sent): a stall there is a probe of its own.
        let stalls = matches!(kind, FaultKind::Pause | FaultKind::Crash);
        let own = NodeEvent::of_design(&self.scenario.lock_service.shape, role);
        let aims: Vec<(NodeEvent, bool)> = match role {
            _ if node == LEADER => Vec::new(),
            NodeRole::Client if stalls => [(Write, false), (Renew, false)]
                .into_iter()
                .chain(own.map(|e| (e, true)))
                .collect(),
            NodeRole::Client => vec![(Grant, true)],
            NodeRole::LeaseService if stalls => [(Grant, true)]
                .into_iter()
                .chain(own.map(|e| (e, true)))
                .collect(),
            NodeRole::LeaseService => vec![(Grant, true)],
            NodeRole::Resource => vec![(Accept, true)],
        };
        let aimed = |action: Action, length: Option<Length>| -> Vec<Probe> {
            let duration_ms = length.map(|l| self.length(l));
            let one = |aim| Probe {
                action: action.clone(),
                aim,
                role,
                duration_ms,
            };
            if aims.is_empty() {
                vec![one(None)]
            } else {
                aims.iter().map(|a| one(Some(*a))).collect()
            }
        };
        let far = |r: fencesim_scenario::Range64| [r.max, r.min].into_iter().filter(|v| *v != 0);
        let lease_holder_side = role != NodeRole::Resource;
        match kind {
            // A pause at a design's own step is also tried short of a lease (as a crash is):
            // a claimant that stalls there but still wins its swap, a renewal that lands late
            // yet before the others judge the lease over, is the hazard such a step names.
            FaultKind::Pause => {
                let mut probes = aimed(Action::Pause { node: node.clone() }, Some(Long));
                for length in [Short, Medium] {
                    probes.extend(
                        aimed(Action::Pause { node: node.clone() }, Some(length))
                            .into_iter()
                            .filter(|p| matches!(p.aim, Some((NodeEvent::Design(_), _)))),
                    );
                }
                probes
            }
            // Back at once, back while its lease could still be live, and back after it.
            FaultKind::Crash => [Short, Medium, Long]
                .into_iter()
                .flat_map(|l| aimed(Action::Crash { node: node.clone() }, Some(l)))
                .collect(),
            FaultKind::Partition => aimed(
                Action::Partition {
                    cut: Cut::Isolate(node),
                },
                Some(Long),
            ),
            FaultKind::ClockJump if lease_holder_side => far(spec.clock_jump_ms)
                .flat_map(|delta_ms| {
                    let node = node.clone();
                    aimed(Action::ClockJump { node, delta_ms }, None)
                })
                .collect(),
            FaultKind::ClockSkew if lease_holder_side => far(spec.clock_offset_ms)
                .flat_map(|offset_ms| {
                    let node = node.clone();
                    aimed(Action::ClockSkew { node, offset_ms }, Some(Long))
                })
                .collect(),
            FaultKind::ClockDrift if lease_holder_side => far(spec.drift_ppm)
                .flat_map(|ppm| {
                    let node = node.clone();
                    aimed(Action::ClockDrift { node, ppm }, Some(Long))
                })
                .collect(),
            FaultKind::ClockStrobe if lease_holder_side => far(spec.clock_offset_ms)
                .flat_map(|offset_ms| {
                    let node = node.clone();
                    let period_ms = (self.length(Long) / 4).max(1);
                    let strobe = Action::ClockStrobe {
                        node,
                        offset_ms,
                        period_ms,
                    };
                    aimed(strobe, Some(Long))
                })
                .collect(),
            // A clock fault on the resource: it keeps no lease, so its clock decides
            // nothing a probe could aim at.
            FaultKind::ClockJump
            | FaultKind::ClockSkew
            | FaultKind::ClockDrift
            | FaultKind::ClockStrobe => Vec::new(),
            // Network-wide kinds: [`Prober::network_probes`].
            FaultKind::Loss
            | FaultKind::Duplicate
            | FaultKind::Reorder
            | FaultKind::Latency
            | FaultKind::HoldAll => Vec::new(),
            // Never in `[nemesis] kinds` ([`FaultKind::is_drawable`]).
            FaultKind::Hold
            | FaultKind::Heal
            | FaultKind::Restart
            | FaultKind::StallRenewals
            | FaultKind::Deregister
            | FaultKind::Restore
            | FaultKind::FinalHeal => Vec::new(),
        }
    }

    /// The probes of a network-wide `kind`, at its strongest for a long window; a `hold-all`
    /// becomes a hold of one message of each kind that carries a lease (a grant or renewal
    /// reply from a lease node, a client's write), as targeted placement's holds do.
    fn network_probes(&self, kind: FaultKind, targets: &[(String, NodeRole)]) -> Vec<Probe> {
        let spec = self.spec;
        let long = Some(self.length(Length::Long));
        let timed = |action| Probe {
            action,
            aim: None,
            role: NodeRole::Client,
            duration_ms: long,
        };
        let rate = spec.rate[1];
        match kind {
            FaultKind::Loss => vec![timed(Action::Loss {
                link: LinkSel::default(),
                rate,
            })],
            FaultKind::Duplicate => vec![timed(Action::Duplicate {
                link: LinkSel::default(),
                rate,
            })],
            FaultKind::Reorder => vec![timed(Action::Reorder {
                window_ms: spec.reorder_window_ms.max_ms,
            })],
            FaultKind::Latency => vec![timed(Action::Latency {
                link: LinkSel::default(),
                latency_ms: LatencyRange {
                    min_ms: spec.latency_ms.max_ms,
                    max_ms: spec.latency_ms.max_ms,
                },
            })],
            FaultKind::HoldAll => targets
                .iter()
                .flat_map(|(node, role)| self.holds(node, *role))
                .collect(),
            // Node-bound kinds: [`Prober::node_probes`].
            FaultKind::Pause
            | FaultKind::Crash
            | FaultKind::Partition
            | FaultKind::ClockJump
            | FaultKind::ClockSkew
            | FaultKind::ClockDrift
            | FaultKind::ClockStrobe => Vec::new(),
            // Never in `[nemesis] kinds` ([`FaultKind::is_drawable`]).
            FaultKind::Hold
            | FaultKind::Heal
            | FaultKind::Restart
            | FaultKind::StallRenewals
            | FaultKind::Deregister
            | FaultKind::Restore
            | FaultKind::FinalHeal => Vec::new(),
        }
    }

    /// Holds of one lease-carrying message sent by `node`, for longer than a lease.
    fn holds(&self, node: &str, role: NodeRole) -> Vec<Probe> {
        let messages: &[MessageKind] = match role {
            NodeRole::Client => &[MessageKind::Write],
            NodeRole::LeaseService => &[MessageKind::AcquireReply, MessageKind::RenewReply],
            NodeRole::Resource => &[],
        };
        let duration_ms = Some(self.length(Length::Long));
        messages
            .iter()
            .map(|&message| {
                let action = if node == LEADER {
                    // Which node leads is not known before the run: hold every message of
                    // the kind, from any sender, for the window.
                    Action::HoldAll {
                        message,
                        from: None,
                    }
                } else {
                    Action::Hold {
                        from: node.to_owned(),
                        message,
                        nth: 0,
                        copy_ms: None,
                    }
                };
                Probe {
                    action,
                    aim: None,
                    role,
                    duration_ms,
                }
            })
            .collect()
    }
}

/// Every pair of two kinds of fault on one node, struck in the same slot, but for two clock
/// faults: one variant of each kind aimed at its main hazard window, chosen by `rng`.
/// `by_node[i]` holds node i's probes grouped by kind. A holder that is both cut off and
/// stalled, or whose clock moves while it is paused, is a hazard that no single fault shows.
fn pairs(by_node: &[Vec<Vec<Probe>>], rng: &mut Xoshiro256PlusPlus) -> Vec<Vec<Probe>> {
    let mut out = Vec::new();
    for kinds in by_node {
        // A kind's first aim is its main hazard window (a client's stall just before its
        // write); its lengths vary.
        let chosen: Vec<&Probe> = kinds
            .iter()
            .filter_map(|variants| {
                let main: Vec<&Probe> = variants
                    .iter()
                    .filter(|p| p.aim == variants[0].aim)
                    .collect();
                main.choose(rng).copied()
            })
            .collect();
        for (i, first) in chosen.iter().enumerate() {
            for second in &chosen[i + 1..] {
                // Two clock faults on one node are one bigger clock fault.
                if !(is_clock(&first.action) && is_clock(&second.action)) {
                    out.push(vec![(*first).clone(), (*second).clone()]);
                }
            }
        }
    }
    out
}

fn is_clock(action: &Action) -> bool {
    action.kind().is_clock()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use std::collections::{BTreeMap, BTreeSet};

    fn scenario(name: &str) -> Scenario {
        let (file, text) = crate::bundled::find(name).expect("bundled");
        crate::Engine::built_in()
            .parse_scenario(text, file)
            .expect("valid")
    }

    fn runs(s: &Scenario, seed: u64) -> Vec<Vec<Fault>> {
        let spec = s.nemesis.as_ref().expect("a nemesis");
        let heal = fencesim_sim::random_nemesis::final_heal(spec, s);
        let prober = Prober { spec, scenario: s };
        prober.runs(&heal, &mut Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    #[test]
    fn every_probe_run_stays_in_the_nemesis_window_and_ends_with_its_heal() {
        let s = scenario("random-nemesis-fenced");
        let spec = s.nemesis.as_ref().unwrap();
        let runs = runs(&s, 7);
        // 12 kinds on three roles: 42 single probes and 33 pairs (15 on a client, 15 on the
        // lease service, 3 on the resource: no pair of two clock faults), each pair on a
        // client once on all three clients and once alone.
        let faults: usize = runs.iter().map(|r| r.len() - 1).sum();
        assert_eq!(faults, 42 + 2 * (33 - 15) + 3 * 2 * 15 + 2 * 15);
        assert_eq!(runs.len(), 17, "{runs:#?}");
        for run in &runs {
            let (heal, probes) = run.split_last().unwrap();
            assert!(matches!(heal.action, Action::FinalHeal { .. }));
            assert!(!probes.is_empty());
            for p in probes {
                if let Trigger::At { at_ms } = p.trigger {
                    assert!(at_ms >= spec.start_ms, "{p:?}");
                    let end = at_ms + p.duration_ms.unwrap_or(0);
                    assert!(end < spec.heal_at_ms, "{p:?}");
                }
                if let Some(ms) = p.duration_ms {
                    assert!((spec.duration_ms.min_ms..=spec.duration_ms.max_ms).contains(&ms));
                }
            }
        }
    }

    /// A design's own safepoints are hazard windows of their own: the lease-record design's
    /// claim and renewal steps are each probed with a pause of every length, on a client.
    #[test]
    fn a_designs_own_safepoints_are_probed_with_pauses_of_every_length() {
        let mut s = scenario("lease-record-random-nemesis");
        s.nemesis.as_mut().unwrap().kinds = vec![FaultKind::Pause];
        let all: Vec<Fault> = runs(&s, 3).into_iter().flatten().collect();
        let mut at_own: BTreeSet<(&str, u64)> = BTreeSet::new();
        for f in &all {
            if let (
                Action::Pause { node },
                Trigger::After {
                    event: NodeEvent::Design(point),
                    ..
                },
                Some(ms),
            ) = (&f.action, f.trigger, f.duration_ms)
            {
                assert!(node.starts_with("client"), "{f:?}");
                at_own.insert((point, ms));
            }
        }
        let ttl = s.lock_service.max_ttl_ms;
        let lengths = [ttl / 10, ttl * 3 / 4, ttl + ttl / 4];
        let expected: BTreeSet<(&str, u64)> = ["claim-sent", "renewal-sent"]
            .into_iter()
            .flat_map(|p| lengths.map(|ms| (p, ms)))
            .collect();
        assert_eq!(at_own, expected, "{all:#?}");
    }

    #[test]
    fn the_probes_cover_every_kind_and_the_classic_stalled_holder() {
        let s = scenario("random-nemesis-fenced");
        let all: Vec<Fault> = runs(&s, 1).into_iter().flatten().collect();
        let kind = |f: &Fault| f.action.kind();
        for &k in &s.nemesis.as_ref().unwrap().kinds {
            // A hold-all is probed as holds of single messages.
            let k = if k == FaultKind::HoldAll {
                FaultKind::Hold
            } else {
                k
            };
            assert!(all.iter().any(|f| kind(f) == k), "no {k} probe");
        }
        // A client paused for longer than a lease just before its write (Kleppmann 2016).
        assert!(all.iter().any(|f| matches!(
            (&f.action, f.trigger, f.duration_ms),
            (Action::Pause { node }, Trigger::Before { event: NodeEvent::Write, .. }, Some(ms))
                if node.starts_with("client") && ms > 5_000
        )));
        // The lease service crashed right after a grant and back within a tenth of a lease.
        assert!(all.iter().any(|f| matches!(
            (&f.action, f.trigger, f.duration_ms),
            (Action::Crash { node }, Trigger::After { event: NodeEvent::Grant, .. }, Some(500))
                if node == "lease-service"
        )));
    }

    #[test]
    fn a_pair_on_a_client_is_struck_on_every_client_and_again_alone() {
        let s = scenario("random-nemesis-fenced");
        // Per slot (run, start), the faults aimed at clients.
        let mut slots: BTreeMap<(usize, u64), Vec<Fault>> = BTreeMap::new();
        let mut losses = 0;
        for (i, run) in runs(&s, 2).iter().enumerate() {
            for f in run {
                let start = crate::shrink::start_ms(f).expect("a probe starts in its slot");
                if aimed_at(&f.action).is_some_and(|t| t.starts_with("client")) {
                    slots.entry((i, start)).or_default().push(f.clone());
                }
                losses += usize::from(f.action.kind() == FaultKind::Loss);
            }
        }
        // (faults, clients struck) of each slot.
        let shapes: Vec<(usize, usize)> = slots
            .values()
            .map(|faults| {
                let nodes: BTreeSet<&str> =
                    faults.iter().filter_map(|f| aimed_at(&f.action)).collect();
                (faults.len(), nodes.len())
            })
            .collect();
        let count = |shape: (usize, usize)| shapes.iter().filter(|s| **s == shape).count();
        assert_eq!(
            count((1, 1)),
            18,
            "single probes, on one client: {shapes:?}"
        );
        assert_eq!(count((2, 1)), 15, "pairs on one client alone: {shapes:?}");
        assert_eq!(count((6, 3)), 15, "pairs on every client: {shapes:?}");
        assert_eq!(shapes.len(), 18 + 15 + 15);
        // On every client: the same two faults, with the same triggers and lengths, on each.
        let on = |f: &Fault, node: &str| Fault {
            action: aimed_on(&f.action, node),
            ..f.clone()
        };
        for faults in slots.values().filter(|f| f.len() == 6) {
            for f in faults {
                for c in ["client-1", "client-2", "client-3"] {
                    assert!(faults.contains(&on(f, c)), "{f:?} not on {c}");
                }
            }
        }
        // Network-wide faults are not repeated: one loss window.
        assert_eq!(losses, 1);
    }

    #[test]
    fn a_design_with_a_leader_is_probed_through_the_leader() {
        let s = scenario("raft-random-nemesis");
        let all: Vec<Fault> = runs(&s, 3).into_iter().flatten().collect();
        let lease_nodes = s.lock_service.nodes();
        for f in &all {
            if let Some(node) = f.action.node() {
                assert!(!lease_nodes.iter().any(|n| n == node), "{f:?}");
                if node == LEADER {
                    assert!(matches!(f.trigger, Trigger::At { .. }), "{f:?}");
                }
            }
        }
        assert!(all.iter().any(|f| f.action.node() == Some(LEADER)));
    }

    #[test]
    fn probes_longer_than_the_window_are_left_out() {
        let mut s = scenario("random-nemesis-fenced");
        let spec = s.nemesis.as_mut().unwrap();
        // 1 s before the final heal: room for a tenth of a lease and clock jumps, not for
        // anything that outlasts a lease.
        spec.heal_at_ms = spec.start_ms + 1_000;
        for run in runs(&s, 5) {
            let (_, probes) = run.split_last().unwrap();
            for p in probes {
                let length = p.duration_ms.unwrap_or(0);
                assert!(length < 1_000, "{p:?}");
            }
        }
        // Nothing fits before a heal at 1 ms: no probe runs at all.
        s.nemesis.as_mut().unwrap().start_ms = 0;
        s.nemesis.as_mut().unwrap().heal_at_ms = 1;
        assert!(runs(&s, 5).is_empty());
    }

    #[test]
    fn the_same_seed_gives_the_same_probes() {
        let s = scenario("random-nemesis-fenced");
        assert_eq!(runs(&s, 11), runs(&s, 11));
        assert_ne!(runs(&s, 11), runs(&s, 12));
    }
}
