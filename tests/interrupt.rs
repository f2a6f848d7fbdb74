//! A sweep interrupted in a library user's process (`fencesim::run::interrupt`, what the
//! binary's Ctrl-C handler calls) is never taken for a checked range. Its own test binary: the
//! flag is process-wide and stays set.

use fencesim::{check_scenario, ScenarioCheckError};

#[test]
fn an_interrupted_check_scenario_is_an_error_not_a_pass() {
    fencesim::run::interrupt();
    let err = check_scenario("pause-fenced", 0..5).expect_err("nothing was checked");
    match err {
        ScenarioCheckError::Interrupted { seeds_run, count } => {
            assert_eq!((seeds_run, count), (0, 5));
        }
        other => panic!("expected Interrupted, got {other}"),
    }
    assert_eq!(
        check_scenario("pause-fenced", 0..5)
            .unwrap_err()
            .to_string(),
        "check_scenario: interrupted after 0 of 5 seeds; the range was not checked"
    );
}
