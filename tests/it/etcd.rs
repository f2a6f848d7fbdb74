//! The etcd design beyond its incident scenarios: etcd 3.4.3's lock-after-expiry defect is
//! masked by clients that keep their own deadline, and the search finds it against a waiter
//! that trusts its lock call, and shrinks it.

use fencesim::mutation_table::knob;
use fencesim::run::{default_jobs, evaluate, sweep, RunOptions};
use fencesim::Scenario;
use fencesim_history::{EventKind, OpFn, OpType};

/// The detail of the `expire` that follows a lapsed waiter's grant.
const LAPSED: &str = "its session lease had expired while it waited";

fn bundled(name: &str) -> Scenario {
    let (file, text) = fencesim::bundled::find(name).expect("bundled");
    crate::support::engine()
        .parse_scenario(text, file)
        .expect("valid")
}

#[test]
fn lock_after_expiry_strikes_but_harms_no_client_that_keeps_its_own_deadline() {
    let mut s = bundled("etcd-random-nemesis");
    knob(&mut s, "lock_checks_own_key", false);
    let seeds: Vec<u64> = (0..60).collect();
    let outcomes = sweep(
        crate::support::engine(),
        &s,
        &seeds,
        default_jobs(),
        &RunOptions::in_memory(),
        |done| {
            let violations: Vec<String> = done
                .report
                .violations
                .iter()
                .map(|v| v.kind.to_string())
                .collect();
            // A lapsed grant: the service's grant and, at once, the expiry of the session lease
            // that had run out while the call waited.
            let lapsed = done
                .records
                .events()
                .filter(|e| e.event == EventKind::Expire)
                .filter(|e| e.detail.as_deref() == Some(LAPSED))
                .count();
            Ok((done.records.header.seed, violations, lapsed))
        },
    )
    .expect("sweep");
    let struck: usize = outcomes.iter().map(|(_, _, lapsed)| *lapsed).sum();
    assert!(
        struck > 0,
        "no lapsed waiter was granted: the defect never struck"
    );
    for (seed, violations, _) in &outcomes {
        assert!(violations.is_empty(), "seed {seed}: {violations:?}");
    }
}

#[test]
fn the_search_finds_lock_after_expiry_and_shrinks_it_to_the_waiters_pause() {
    let dir = crate::support::out_dir("etcd-search");
    let mut mutant = bundled("etcd-waiter-pauses");
    knob(&mut mutant, "lock_checks_own_key", false);
    let file = dir.join("mutant.toml");
    std::fs::write(&file, fencesim_scenario::to_toml(&mutant)).unwrap();
    let (file, out_root) = (file.to_string_lossy(), dir.join("out"));
    let out_root = out_root.to_string_lossy();
    let args = [
        "explore", "--seeds", "0..40", "--shrink", "--quiet", "--out", &out_root, &file,
    ];
    let out = crate::support::fencesim(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("mutual-exclusion-client"), "{stdout}");
    // Shrunk to a few pauses of client-2 (the only node the nemesis strikes), while it waits.
    let shrunk = std::fs::read_dir(dir.join("out/shrunk"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "toml"))
        .expect("a minimal scenario");
    let minimal = crate::support::engine().load_scenario(&shrunk).unwrap();
    assert!(
        !minimal.faults.is_empty() && minimal.faults.len() <= 3,
        "{:?}",
        minimal.faults
    );
    let seed = minimal.seeds.start;
    let done = evaluate(
        crate::support::engine(),
        &minimal,
        seed,
        &RunOptions::in_memory(),
    )
    .unwrap();
    assert!(
        !done.report.violations.is_empty(),
        "the minimal scenario reproduces"
    );
}

/// A scenario text with `kind = "etcd"`, parsed.
fn parsed(name: &str, text: &str) -> Scenario {
    crate::support::engine()
        .parse_scenario(text, name)
        .expect("valid")
}

/// The acquires that waited out their whole queue wait without an answer.
fn unanswered_waits(scenario: &Scenario, seed: u64) -> usize {
    let done = evaluate(
        crate::support::engine(),
        scenario,
        seed,
        &RunOptions::in_memory(),
    )
    .expect("runs");
    done.records
        .ops()
        .filter(|o| {
            o.error
                .as_deref()
                .is_some_and(|e| e.contains("in the queue"))
        })
        .count()
}

/// From a review: a waiter on lock `a` was never told its turn when the key it waited on was
/// `a/b`'s (under `a/` too, as etcd's prefix watch sees it), and its call timed out.
#[test]
fn a_waiter_on_a_lock_whose_prefix_holds_another_locks_key_gets_its_turn() {
    let text = "name = \"prefix\"\nseeds = \"0..1\"\nduration_ms = 30000\n\
        [lock_service]\nkind = \"etcd\"\nmax_ttl_ms = 5000\n\
        [resource]\nmode = \"fenced\"\nkeys = [\"k1\", \"k2\"]\n\
        [[clients]]\nname = \"holder-ab\"\nlock = \"a/b\"\nkey = \"k2\"\nttl_ms = 2000\nrenew_ms = 500\nwork_ms = 2000\nstart_ms = 1000\n\
        [[clients]]\nname = \"waiter-a\"\nlock = \"a\"\nkey = \"k1\"\nttl_ms = 2000\nrenew_ms = 500\nwork_ms = 100\nstart_ms = 1100\n\
        [expect]\nverdict = \"valid\"\n";
    assert_eq!(unanswered_waits(&parsed("prefix.toml", text), 0), 0);
}

/// From a review (seed 26): with one member, the turn's answer could overtake the reply that
/// queued the call; the client dropped it, held the lock without knowing, and every other
/// client waited out its queue wait.
#[test]
fn a_turn_answer_that_overtakes_the_queued_reply_is_kept() {
    let text = "name = \"m1race\"\nseeds = \"26..27\"\nduration_ms = 30000\n\
        [lock_service]\nkind = \"etcd\"\nmax_ttl_ms = 5000\nmembers = 1\n\
        [resource]\nmode = \"fenced\"\n\
        [[clients]]\ncount = 4\nttl_ms = 2000\nrenew_ms = 500\nwork_ms = 5\ncycles = 30\nstart_ms = 1000\n\
        [expect]\nverdict = \"valid\"\n";
    assert_eq!(unanswered_waits(&parsed("m1race.toml", text), 26), 0);
}

/// From a review (seed 5): a duplicated lock call was a second call with a lease of its own,
/// granted to nobody who asked; applied again it is the same call, as etcd's `Lock` with the
/// same lease finds the same key.
#[test]
fn a_duplicated_lock_call_is_the_same_call() {
    let text = "name = \"dup\"\nseeds = \"5..6\"\nduration_ms = 30000\n\
        [network]\nlatency_ms = [1, 10]\nduplicate = 0.3\n\
        [lock_service]\nkind = \"etcd\"\nmax_ttl_ms = 5000\n\
        [resource]\nmode = \"fenced\"\n\
        [[clients]]\ncount = 3\nttl_ms = 2000\nrenew_ms = 500\nwork_ms = 300\ncycles = 5\nstart_ms = 1000\n\
        [expect]\nverdict = \"valid\"\n";
    let scenario = parsed("dup.toml", text);
    let done = evaluate(
        crate::support::engine(),
        &scenario,
        5,
        &RunOptions::in_memory(),
    )
    .unwrap();
    // Every grant reached its holder: an ok acquire with the grant's token.
    let acquired: Vec<(String, u64)> = done
        .records
        .ops()
        .filter(|o| o.f == OpFn::Acquire && o.op_type == OpType::Ok)
        .filter_map(|o| Some((o.node.to_string(), o.token?)))
        .collect();
    let orphans: Vec<(String, u64)> = done
        .records
        .events()
        .filter(|e| e.event == EventKind::Grant)
        .map(|e| {
            (
                e.holder.clone().unwrap_or_default().to_string(),
                e.token.unwrap_or(0),
            )
        })
        .filter(|grant| !acquired.contains(grant))
        .collect();
    assert!(orphans.is_empty(), "{orphans:?}");
    assert!(done.report.violations.is_empty());
}
