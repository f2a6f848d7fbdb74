//! The library entry points for users' own test suites: `check_scenario`, and the proptest
//! strategies for fault schedules (`fencesim::strategies`, feature `proptest`).

use fencesim::{check_scenario, ScenarioCheckError};
use fencesim_scenario::strategies::{fault_schedule, with_fault_schedule};
use proptest::prelude::*;

#[test]
fn check_scenario_passes_a_scenario_that_meets_its_expectation() {
    let checked = check_scenario("pause-fenced", 0..5).expect("pause-fenced is valid");
    assert_eq!(checked.scenario, "pause-fenced");
    assert_eq!(checked.seeds_run, 5);
}

#[test]
fn check_scenario_fails_with_the_explanation_and_the_reproduction() {
    // The targeted fixture claims an unfenced design is safe; seeds 8 and 9 agree, seed 10
    // refutes it.
    let path = "tests/fixtures/explore/pause-unfenced-targeted.toml";
    let err = check_scenario(path, 8..20).expect_err("the claim is false");
    let ScenarioCheckError::Counterexample {
        seed,
        report,
        reproduce,
        ..
    } = &err
    else {
        panic!("expected a counterexample, got {err}");
    };
    assert_eq!(*seed, 10);
    assert_eq!(
        reproduce,
        "fencesim run tests/fixtures/explore/pause-unfenced-targeted.toml --seed 10"
    );
    assert!(std::path::Path::new(report).is_file(), "{report}");
    let message = err.to_string();
    assert!(
        message.starts_with("pause-unfenced-targeted seed 10: INVALID"),
        "{message}"
    );
    assert!(
        message.contains("  stale-write-accepted: key \"register\""),
        "{message}"
    );
    assert!(message.contains("    chain: "), "{message}");
    assert!(
        message.contains("expectation NOT met: valid, with no violation"),
        "{message}"
    );
    assert!(
        message.ends_with(&format!("reproduce: {reproduce}")),
        "{message}"
    );
    // `.unwrap()` prints the Debug form: it is the same readable text, lines and all, not
    // one escaped line.
    assert_eq!(format!("{err:?}"), message);
}

#[test]
fn check_scenario_refuses_bad_input_without_panicking() {
    let err = check_scenario("no-such-scenario.toml", 0..3).expect_err("missing");
    assert!(matches!(err, ScenarioCheckError::BadScenario(_)), "{err}");
    assert!(err.to_string().contains("no-such-scenario.toml"), "{err}");
    let err = check_scenario("pause-fenced", 4..4).expect_err("empty");
    assert_eq!(
        err.to_string(),
        "check_scenario: the seed range 4..4 is empty"
    );
}

/// random-nemesis-fenced's safe design without its nemesis, over a shorter run.
fn safe_design() -> fencesim::Scenario {
    let (file, text) = fencesim::bundled::find("random-nemesis-fenced").expect("bundled");
    let mut s = crate::support::engine()
        .parse_scenario(text, file)
        .expect("valid");
    s.nemesis = None;
    s.duration_ms = 20_000;
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Every generated schedule is a scenario the validation accepts, written and read back
    /// unchanged: a failing case can always be saved as a file.
    #[test]
    fn generated_schedules_are_valid_scenario_files(s in with_fault_schedule(&safe_design(), 8)) {
        let text = fencesim_scenario::to_toml(&s);
        let parsed = crate::support::engine().parse_scenario(&text, "generated.toml");
        prop_assert!(parsed.is_ok(), "{:?}\n{text}", parsed.err());
        prop_assert_eq!(parsed.unwrap(), s);
    }

    /// Faults are aimed at the scenario's own nodes.
    #[test]
    fn generated_faults_target_the_scenarios_nodes(faults in fault_schedule(&safe_design(), 8)) {
        let nodes = safe_design().node_names();
        for f in &faults {
            if let Some(node) = f.action.node() {
                prop_assert!(nodes.iter().any(|n| n == node), "{node}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// The safe design (monotonic expiry, durable synced token counter, renewing clients with
    /// a safety margin, fenced resource) stays valid under any schedule of up to six faults.
    /// A failure prints the scenario file that reproduces it, seed 0.
    #[test]
    fn the_safe_design_survives_any_generated_schedule(s in with_fault_schedule(&safe_design(), 6)) {
        let outcome = crate::support::engine().simulate(&s, 0);
        prop_assert!(outcome.failure.is_none(), "{:?}", outcome.failure);
        let result = fencesim::check(&outcome.history);
        prop_assert!(
            result.violations.is_empty(),
            "{:?}\n{}",
            result.violations.iter().map(|v| &v.explanation).collect::<Vec<_>>(),
            fencesim_scenario::to_toml(&s)
        );
    }
}

/// A sweep cancelled in a library user's process (`check_scenario_until` with a token its own
/// Ctrl-C handler cancels) is never taken for a checked range. A token is the caller's own:
/// another sweep of the same process, under another token, runs to its end.
#[test]
fn a_cancelled_check_scenario_is_an_error_not_a_pass() {
    let cancel = fencesim::cancel::Cancel::new();
    cancel.cancel();
    let err = crate::support::engine()
        .check_scenario_until("pause-fenced", 0..5, &cancel)
        .expect_err("nothing was checked");
    match err {
        fencesim::ScenarioCheckError::Interrupted { seeds_run, count } => {
            assert_eq!((seeds_run, count), (0, 5));
        }
        other => panic!("expected Interrupted, got {other}"),
    }
    assert_eq!(
        crate::support::engine()
            .check_scenario_until("pause-fenced", 0..5, &cancel)
            .unwrap_err()
            .to_string(),
        "check_scenario: interrupted after 0 of 5 seeds; the range was not checked"
    );
    let checked = crate::support::engine()
        .check_scenario("pause-fenced", 0..5)
        .expect("another token");
    assert_eq!(checked.seeds_run, 5);
}
