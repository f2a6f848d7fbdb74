//! The mutation table: each defect of the incident library switched on alone in an otherwise
//! safe built-in design under the random nemesis. `tests/it/mutation_score.rs` requires every
//! row to be caught within a budget, and `fencesim bench --only search` counts how many
//! simulations uniform, targeted and guided exploration take to catch each.
//!
//! Defects are switched on by their knob names, as a scenario file would, through
//! [`crate::Engine::with_knob`] and [`crate::Engine::with_client_knob`]. Every row is a
//! defect of a built-in design, so the table validates with the built-in designs alone.

use fencesim_scenario::{Action, Fault, Placement, Scenario, Trigger};

use crate::Engine;

/// One row: a defect and the safe base it is switched on in.
#[derive(Clone, Copy)]
pub struct Defect {
    /// The knob and value (`"fsync = never"`).
    pub name: &'static str,
    /// The incident cases it reproduces.
    pub case: &'static str,
    /// The bundled scenario it starts from.
    pub base: &'static str,
    /// Shapes the base's workload for this defect, keeping it safe.
    pub workload: fn(&mut Scenario),
    /// Switches the defect on.
    pub apply: fn(&mut Scenario),
    /// The violation kind the defect must show (its case's property).
    pub shows: &'static str,
}

impl Defect {
    /// The safe base of this row: its bundled scenario, with the row's workload, the random
    /// nemesis placed as `placement`.
    pub fn safe(&self, placement: Placement) -> Scenario {
        let (file, text) = crate::bundled::find(self.base).expect("a bundled base");
        let mut s = Engine::built_in()
            .parse_scenario(text, file)
            .expect("a valid base");
        s.nemesis.as_mut().expect("a random nemesis").placement = placement;
        (self.workload)(&mut s);
        s
    }

    /// The base with the defect switched on.
    pub fn mutant(&self, placement: Placement) -> Scenario {
        let mut s = self.safe(placement);
        (self.apply)(&mut s);
        s
    }
}

/// Set the design's knob `name` of `s` to `value`, as a scenario file would, validated again.
///
/// # Panics
/// The built-in design refuses the knob or the value (a row of this table is wrong).
pub fn knob(s: &mut Scenario, name: &str, value: impl Into<toml::Value>) {
    *s = Engine::built_in()
        .with_knob(s, name, value.into())
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Set the design's client knob `name` of `s` to `value` on every client, validated again.
///
/// # Panics
/// As [`knob`].
pub fn client_knob(s: &mut Scenario, name: &str, value: impl Into<toml::Value>) {
    *s = Engine::built_in()
        .with_client_knob(s, name, value.into())
        .unwrap_or_else(|e| panic!("{e}"));
}

fn as_bundled(_: &mut Scenario) {}

/// K16's defect acts only when a maintenance job deregisters a client: one does, every 7 s,
/// by turns, on top of the random nemesis.
fn deregistrations(s: &mut Scenario) {
    let clients: Vec<String> = s.clients.iter().map(|c| c.name.clone()).collect();
    for (i, at_ms) in (3_000..55_000).step_by(7_000).enumerate() {
        s.faults.push(Fault {
            action: Action::Deregister {
                node: clients[i % clients.len()].clone(),
            },
            trigger: Trigger::At { at_ms },
            duration_ms: None,
        });
    }
}

/// K08 needs a holder whose lease spans a pause of the leader: long work, renewed, and the
/// leader aimed at by name; the recovery window grows with the work.
fn long_holds_and_the_leader(s: &mut Scenario) {
    s.clients.iter_mut().for_each(|c| c.work_ms = 12_000);
    s.duration_ms = 90_000;
    let nemesis = s.nemesis.as_mut().expect("nemesis");
    nemesis.recovery_periods = 8;
    nemesis
        .targets
        .extend(["leader".to_owned(), "leader".to_owned()]);
}

/// Clients that write without checking their own lease (the K15 defect), the base on which
/// the defects a checking client masks (K07, K09) show.
fn unchecked_writes(s: &mut Scenario) {
    s.clients.iter_mut().for_each(|c| c.validity_check = false);
}

/// Clients whose jobs clean up after their write by deleting their key without a token: safe
/// as long as the resource refuses token-less mutations (its default).
fn tokenless_cleanups(s: &mut Scenario) {
    s.clients
        .iter_mut()
        .for_each(|c| c.cleanup = fencesim_scenario::Cleanup::Unfenced);
}

/// Pauses only: the nemesis a user narrowed to pauses to find a stall at a design's own step
/// (issue 35), which only a pause at the design's safepoint reaches.
fn pauses_only(s: &mut Scenario) {
    let nemesis = s.nemesis.as_mut().expect("a random nemesis");
    nemesis.kinds = vec![fencesim_scenario::FaultKind::Pause];
}

/// Every defect the safe bases catch.
pub const CAUGHT: &[Defect] = &[
    Defect {
        name: "resource mode = unfenced",
        case: "K01, K02",
        base: "random-nemesis-fenced",
        workload: as_bundled,
        apply: |s| {
            s.resource.mode = "unfenced".into();
            // An unfenced resource takes no `tokenless` (it accepts every mutation); the
            // resolved fenced one carries its default.
            s.resource.knobs.remove("tokenless");
            *s = Engine::built_in().revalidate(s).expect("a valid mode");
        },
        shows: "stale-write-accepted",
    },
    Defect {
        name: "expiry_clock = wall",
        case: "K03",
        base: "random-nemesis-fenced",
        workload: as_bundled,
        apply: |s| knob(s, "expiry_clock", "wall"),
        shows: "mutual-exclusion-client",
    },
    Defect {
        name: "fsync = never",
        case: "K04",
        base: "random-nemesis-fenced",
        workload: as_bundled,
        apply: |s| knob(s, "fsync", "never"),
        shows: "mutual-exclusion-client",
    },
    Defect {
        name: "revoke_term_check = false",
        case: "K08",
        base: "raft-random-nemesis",
        workload: long_holds_and_the_leader,
        apply: |s| knob(s, "revoke_term_check", false),
        shows: "mutual-exclusion-client",
    },
    Defect {
        name: "deadline_from = notice",
        case: "K12",
        base: "random-nemesis-fenced",
        workload: as_bundled,
        apply: |s| client_knob(s, "deadline_from", "notice"),
        shows: "mutual-exclusion-client",
    },
    Defect {
        name: "reclaim = by-name",
        case: "K13",
        base: "random-nemesis-fenced",
        workload: as_bundled,
        apply: |s| client_knob(s, "reclaim", "by-name"),
        shows: "mutual-exclusion-client",
    },
    Defect {
        name: "on_lost_lease = keep-role",
        case: "K14",
        base: "random-nemesis-fenced",
        workload: as_bundled,
        apply: |s| client_knob(s, "on_lost_lease", "keep-role"),
        shows: "mutual-exclusion-client",
    },
    Defect {
        name: "validity_check = false",
        case: "K15",
        base: "random-nemesis-fenced",
        workload: as_bundled,
        apply: unchecked_writes,
        shows: "mutual-exclusion-client",
    },
    Defect {
        name: "reaper = ignores-leases",
        case: "K16",
        base: "random-nemesis-fenced",
        workload: deregistrations,
        apply: |s| knob(s, "reaper", "ignores-leases"),
        shows: "mutual-exclusion-client",
    },
    Defect {
        name: "token_counter = memory",
        case: "K17",
        base: "random-nemesis-fenced",
        workload: as_bundled,
        apply: |s| knob(s, "token_counter", "memory"),
        shows: "token-reused",
    },
    Defect {
        name: "release = unconditional",
        case: "K19",
        base: "random-nemesis-fenced",
        workload: as_bundled,
        apply: |s| knob(s, "release", "unconditional"),
        shows: "release-by-non-holder",
    },
    Defect {
        name: "check = check-then-apply",
        case: "K20",
        base: "random-nemesis-fenced",
        workload: as_bundled,
        apply: |s| {
            s.resource
                .knobs
                .insert("check".into(), "check-then-apply".into());
            s.resource.knobs.insert("apply_delay_ms".into(), 500.into());
            *s = Engine::built_in().revalidate(s).expect("valid knobs");
        },
        shows: "stale-write-accepted",
    },
    Defect {
        name: "expiry_judged_by = claimant-deadline",
        case: "claimant-computed expiry",
        base: "lease-record-random-nemesis",
        workload: pauses_only,
        apply: |s| knob(s, "expiry_judged_by", "claimant-deadline"),
        shows: "mutual-exclusion-client",
    },
    Defect {
        name: "lock_checks_own_key = false",
        case: "K07 (etcd 3.4.3)",
        base: "etcd-waiter-pauses",
        workload: as_bundled,
        apply: |s| knob(s, "lock_checks_own_key", false),
        shows: "mutual-exclusion-client",
    },
    Defect {
        name: "tokenless = accept",
        case: "cleanup",
        base: "random-nemesis-fenced",
        workload: tokenless_cleanups,
        apply: |s| {
            s.resource.knobs.insert("tokenless".into(), "accept".into());
            *s = Engine::built_in().revalidate(s).expect("valid knobs");
        },
        shows: "unfenced-mutation",
    },
];

/// The defects the safe base masks (a client that checks its own lease before writing never
/// acts on them), each on the base whose clients do not check: measured against that base
/// alone, since it is itself unsafe (K15).
pub const MASKED: &[Defect] = &[
    Defect {
        name: "acquire = queue-grant-to-expired-waiter",
        case: "K07",
        base: "random-nemesis-fenced",
        workload: unchecked_writes,
        apply: |s| knob(s, "acquire", "queue-grant-to-expired-waiter"),
        shows: "mutual-exclusion-client",
    },
    Defect {
        name: "renew_after_failure = stop",
        case: "K09",
        base: "random-nemesis-fenced",
        workload: unchecked_writes,
        apply: |s| client_knob(s, "renew_after_failure", "stop"),
        shows: "mutual-exclusion-client",
    },
];
