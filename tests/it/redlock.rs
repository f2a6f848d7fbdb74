//! Issue 5's Redlock scenarios: each unsafe variant fails with its violation on every seed of
//! its range and its corrected counterpart stays valid, for the reasons the cases give.

use crate::support;

use fencesim::run::{evaluate, RunOptions};
use fencesim::Scenario;
use fencesim_history::{Entry, History, OpFn, OpType, TokenOrder};

fn load(name: &str) -> Scenario {
    let path = support::root().join(format!("scenarios/incidents/{name}.toml"));
    crate::support::engine()
        .load_scenario(&path)
        .expect("bundled scenario loads")
}

fn opts() -> RunOptions {
    RunOptions {
        out: support::unwritten_dir("redlock"),
        scenario_arg: "redlock".into(),
        check_determinism: false,
        swarm: false,
        cancel: Default::default(),
    }
}

fn history(name: &str, seed: u64) -> History {
    let bytes = evaluate(crate::support::engine(), &load(name), seed, &opts())
        .expect("runs")
        .history;
    fencesim_history::read_jsonl(&bytes[..]).expect("our own history parses")
}

/// `(true ms, node, type, error)` of every completed acquire.
fn acquires(h: &History) -> Vec<(u64, String, OpType, Option<String>)> {
    h.ops()
        .filter(|o| o.f == OpFn::Acquire && o.op_type != OpType::Invoke)
        .map(|o| {
            (
                o.at.time_ns / 1_000_000,
                o.node.to_string(),
                o.op_type,
                o.error.clone(),
            )
        })
        .collect()
}

// Every Redlock scenario meets its expectation over its seed range: tests/it/incidents.rs.

#[test]
fn k05_the_recheck_refuses_the_late_majority_and_its_absence_accepts_it() {
    let all = acquires(&history("redlock-reply-delay-recheck", 0));
    let (at_ms, _, op_type, error) = all.iter().find(|a| a.1 == "client-1").unwrap();
    assert_eq!((*at_ms, *op_type), (16_002, OpType::Fail));
    assert!(
        error.as_deref().unwrap().contains("validity had run out"),
        "{error:?}"
    );
    let accepted = acquires(&history("redlock-reply-delay-no-recheck", 0));
    assert_eq!(
        accepted
            .iter()
            .find(|a| a.1 == "client-1")
            .map(|a| (a.0, a.2)),
        Some((16_002, OpType::Ok)),
        "{accepted:?}"
    );
}

#[test]
fn k03_client_2_fails_with_a_minority_until_client_1_releases_under_monotonic_expiry() {
    let h = history("redlock-clock-jump-monotonic", 0);
    let all = acquires(&h);
    let client_2: Vec<_> = all.iter().filter(|a| a.1 == "client-2").collect();
    assert!(client_2.len() > 2, "{all:?}");
    assert!(client_2[..client_2.len() - 1]
        .iter()
        .all(|a| a.3.as_deref() == Some("only 2 of 5 nodes granted")));
    let released_ms = h
        .ops()
        .find(|o| o.node == "client-1" && o.f == OpFn::Release && o.op_type == OpType::Ok)
        .map(|o| o.at.time_ns / 1_000_000)
        .expect("client-1 released");
    assert!(client_2.last().unwrap().0 > released_ms);
}

#[test]
fn random_values_are_opaque_in_the_header_and_counter_tokens_are_not() {
    let random = history("redlock-pause-unfenced", 0);
    assert_eq!(random.header.token_order, TokenOrder::Acquisition);
    let counter = history("redlock-pause-counter-fenced", 0);
    assert_eq!(counter.header.token_order, TokenOrder::Value);
    let tokens: Vec<u64> = counter
        .ops()
        .filter(|o| o.f == OpFn::Acquire && o.op_type == OpType::Ok)
        .filter_map(|o| o.token)
        .collect();
    assert_eq!(tokens, [1, 2]);
    // Random values stay below 2^53, so JSON tools that read doubles keep them exact.
    assert!(random
        .ops()
        .filter_map(|o| o.token)
        .all(|t| t > 0 && t < 1 << 53));
}

#[test]
fn the_counter_crash_hands_out_token_1_twice() {
    let h = history("redlock-counter-token-crash", 0);
    let tokens: Vec<(String, u64)> = h
        .entries
        .iter()
        .filter_map(|e| match e {
            Entry::Op(o) if o.f == OpFn::Acquire && o.op_type == OpType::Ok => {
                Some((o.node.to_string(), o.token?))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        tokens,
        [("client-1".to_owned(), 1), ("client-2".to_owned(), 1)]
    );
}

#[test]
fn a_redlock_run_is_byte_identical_when_repeated() {
    let scenario = load("redlock-crash-no-fsync");
    let a = evaluate(crate::support::engine(), &scenario, 5, &opts()).unwrap();
    let b = evaluate(crate::support::engine(), &scenario, 5, &opts()).unwrap();
    assert_eq!(a.history, b.history);
    assert_ne!(
        a.history,
        evaluate(crate::support::engine(), &scenario, 6, &opts())
            .unwrap()
            .history
    );
}

/// Found by a review: counter tokens on the K05 schedule. client-1 invoked first but took its
/// token from the counter after client-2 did; overlapping acquisitions are not ordered, so the
/// only violation is the overlap of beliefs, not a token going backwards.
#[test]
fn k05_with_counter_tokens_is_an_overlap_not_a_token_going_back() {
    let (_, text) = fencesim::bundled::find("redlock-reply-delay-no-recheck").unwrap();
    let text = text
        .replace(
            "recheck_elapsed = false",
            "recheck_elapsed = false\ntoken_source = \"counter\"",
        )
        .replace("mode = \"unfenced\"", "mode = \"fenced\"");
    let scenario = crate::support::engine()
        .parse_scenario(&text, "k05-counter.toml")
        .unwrap();
    let report = evaluate(crate::support::engine(), &scenario, 0, &opts())
        .unwrap()
        .report;
    let kinds: Vec<_> = report.violations.iter().map(|v| v.kind).collect();
    assert_eq!(kinds, [fencesim::ViolationKind::MutualExclusionClient]);
}

#[test]
fn the_random_nemesis_finds_nothing_on_any_seed_of_its_range() {
    let path = support::root().join("scenarios/redlock-random-nemesis.toml");
    let scenario = crate::support::engine()
        .load_scenario(&path)
        .expect("bundled scenario loads");
    assert_eq!((scenario.seeds.start, scenario.seeds.end), (0, 100));
    support::assert_met_on_whole_range(&scenario, &opts());
}
