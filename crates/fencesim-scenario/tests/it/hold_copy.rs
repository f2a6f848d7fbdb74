//! `copy_ms` on a `hold`: the network also delivers a copy of the one message it names (a
//! verify counterexample's duplication, written as a scenario).

use crate::support;

use fencesim_scenario::{parse, Action, MessageKind, ScenarioError};

/// Lines 1 to 7; the fault under test starts on line 8.
const BASE: &str = "name = \"hc\"\nduration_ms = 20000\n[[clients]]\ncount = 2\nttl_ms = 1000\n\
                    [expect]\nverdict = \"valid\"\n";

fn parsed(tail: &str) -> Result<fencesim_scenario::Scenario, ScenarioError> {
    parse(
        &format!("{BASE}{tail}"),
        "hc.toml",
        None,
        &support::designs(),
    )
}

#[test]
fn a_hold_takes_a_copy_and_writes_it_back() {
    let tail = "[[faults]]\nkind = \"hold\"\nfrom = \"client-1\"\nmessage = \"write\"\n\
                nth = 2\nduration_ms = 300\ncopy_ms = 100\n";
    let scenario = parsed(tail).expect("a valid hold");
    assert_eq!(
        scenario.faults[0].action,
        Action::Hold {
            from: "client-1".into(),
            message: MessageKind::Write,
            nth: 2,
            copy_ms: Some(100),
        }
    );
    let text = fencesim_scenario::to_toml(&scenario);
    assert!(
        text.contains("nth = 2\ncopy_ms = 100\nduration_ms = 300\n"),
        "{text}"
    );
}

#[test]
fn a_copy_of_zero_ms_and_a_copy_on_another_kind_are_refused() {
    let zero = "[[faults]]\nkind = \"hold\"\nfrom = \"client-1\"\nmessage = \"write\"\n\
                duration_ms = 300\ncopy_ms = 0\n";
    assert_eq!(
        parsed(zero).expect_err("refused").to_string(),
        "hc.toml:13:11: field `faults.copy_ms`: expected a positive integer of at most \
         1000000000000, found 0"
    );
    let hold_all = "[[faults]]\nkind = \"hold-all\"\nmessage = \"write\"\nat_ms = 5\n\
                    duration_ms = 300\ncopy_ms = 10\n";
    assert_eq!(
        parsed(hold_all).expect_err("refused").to_string(),
        "hc.toml:13:11: field `faults.copy_ms`: a hold-all fault does not take `copy_ms`"
    );
}
