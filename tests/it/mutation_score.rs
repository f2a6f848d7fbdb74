//! Mutation score of the checker against the incident library's defects: each defect alone,
//! switched on in an otherwise safe design under the random nemesis (targeted placement, swarm
//! mode), must be caught within its seed budget; and a defect that the safe design masks
//! (K09's silent keepalive, while clients check their own lease) must not be reported.
//!
//! Prints the table (defect, case, seeds to the first that shows the defect's kind, the kinds on
//! that seed) with `cargo test --test mutation_score -- --nocapture`. Counts, not timings:
//! deterministic.

use fencesim::mutation_table::{client_knob, knob, CAUGHT};
use fencesim::run::{default_jobs, sweep_until, RunOptions};
use fencesim::Scenario;
use fencesim_history::{EventKind, OpFn, OpType};
use fencesim_scenario::Placement;

/// Seeds each caught defect may take.
const BUDGET: u64 = 150;
/// Seeds a masked defect must stay valid over.
const MASKED_SEEDS: u64 = 40;

fn base(name: &str) -> Scenario {
    let (file, text) = fencesim::bundled::find(name).expect("bundled");
    let mut s = crate::support::engine()
        .parse_scenario(text, file)
        .expect("valid");
    let nemesis = s.nemesis.as_mut().expect("a random nemesis");
    nemesis.placement = Placement::Targeted;
    s
}

/// Whether a seed with violations `kinds` is the one sought: any violation, or one of `wanted`.
fn shows(kinds: &[String], wanted: Option<&str>) -> bool {
    match wanted {
        Some(kind) => kinds.iter().any(|k| k == kind),
        None => !kinds.is_empty(),
    }
}

fn opts() -> RunOptions {
    RunOptions::in_memory()
}

/// Seeds run up to and including the first with a violation of kind `wanted` (any kind if
/// `None`; `None` returned: none in `budget`), and the kinds that seed showed.
fn first_violation(
    scenario: &Scenario,
    budget: u64,
    wanted: Option<&str>,
) -> (Option<u64>, Vec<String>) {
    let seeds: Vec<u64> = (0..budget).collect();
    let outcomes = sweep_until(
        crate::support::engine(),
        scenario,
        &seeds,
        default_jobs(),
        &opts(),
        |done| {
            assert!(done.report.failure.is_none(), "{:?}", done.report.failure);
            let mut kinds: Vec<String> = done
                .report
                .violations
                .iter()
                .map(|v| v.kind.to_string())
                .collect();
            kinds.dedup();
            Ok(kinds)
        },
        |kinds| shows(kinds, wanted),
    )
    .expect("sweep");
    let found = outcomes.last().filter(|k| shows(k, wanted)).cloned();
    match found {
        Some(kinds) => (Some(outcomes.len() as u64), kinds),
        None => (None, Vec::new()),
    }
}

#[test]
fn every_defect_alone_is_caught_within_its_budget() {
    println!("| defect | case | seeds to the first showing its kind | kinds on that seed |");
    println!("|---|---|---|---|");
    let mut missed = Vec::new();
    for d in CAUGHT {
        let safe = d.safe(Placement::Targeted);
        let mutant = d.mutant(Placement::Targeted);
        let (seeds, kinds) = first_violation(&mutant, BUDGET, Some(d.shows));
        let shown = seeds.map_or(format!("none in {BUDGET}"), |n| n.to_string());
        println!(
            "| `{}` | {} | {shown} | {} |",
            d.name,
            d.case,
            kinds.join(", ")
        );
        let Some(seeds) = seeds else {
            missed.push(d.name);
            continue;
        };
        // The defect, not the workload or the nemesis, made the difference: without it the
        // same seeds are valid.
        let (base_seeds, base_kinds) = first_violation(&safe, seeds, None);
        assert_eq!(
            base_seeds, None,
            "{}: the safe base fails too: {base_kinds:?}",
            d.name
        );
    }
    assert!(
        missed.is_empty(),
        "not caught within {BUDGET} seeds: {missed:?}"
    );
}

#[test]
fn a_defect_the_safe_design_masks_is_not_reported() {
    // K09: the keepalive stops silently, but clients still check their own lease before
    // writing and the resource is fenced, so nothing unsafe happens.
    let mut s = base("random-nemesis-fenced");
    client_knob(&mut s, "renew_after_failure", "stop");
    let (seeds, kinds) = first_violation(&s, MASKED_SEEDS, None);
    assert_eq!(seeds, None, "{kinds:?}");
    // The defect did happen: renewals went unanswered, so keepalives stopped.
    let unanswered = count(&s, MASKED_SEEDS, |h| {
        h.ops()
            .filter(|o| o.f == OpFn::Renew && o.op_type == OpType::Info)
            .count()
    });
    assert!(
        unanswered > 0,
        "no renewal went unanswered: the defect never struck"
    );
}

#[test]
fn k07s_defect_is_masked_by_clients_that_check_their_own_lease() {
    // A lapsed waiter granted the lock believes nothing past its own deadline, which counts
    // from its request, so it does not write; the fence stands behind it anyway.
    let mut s = base("random-nemesis-fenced");
    knob(&mut s, "acquire", "queue-grant-to-expired-waiter");
    // Waiters lapse when a holder keeps the lock long: uniform pauses and partitions of the
    // holder do that more often than targeted ones.
    s.nemesis.as_mut().expect("nemesis").placement = Placement::Uniform;
    let (seeds, kinds) = first_violation(&s, MASKED_SEEDS, None);
    assert_eq!(seeds, None, "{kinds:?}");
    // The defect did happen: lapsed waiters were granted (a grant already expired when made;
    // the base service judges expiry by its monotonic clock).
    let lapsed = count(&s, MASKED_SEEDS, |h| {
        h.events()
            .filter(|e| e.event == EventKind::Grant)
            .filter(|e| e.expires_at_ms.is_some_and(|x| x <= e.at.mono_ms))
            .count()
    });
    assert!(
        lapsed > 0,
        "no lapsed waiter was granted: the defect never struck"
    );
}

/// The sum of `f` over the histories of seeds `0..seeds`.
fn count(scenario: &Scenario, seeds: u64, f: fn(&fencesim_history::History) -> usize) -> usize {
    let list: Vec<u64> = (0..seeds).collect();
    let counts = fencesim::run::sweep(
        crate::support::engine(),
        scenario,
        &list,
        default_jobs(),
        &opts(),
        |done| Ok(f(&done.records)),
    )
    .expect("sweep");
    counts.into_iter().sum()
}
