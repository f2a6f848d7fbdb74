//! `kind = "final-heal"` in `[[faults]]`: a scripted final heal, so that a random nemesis's drawn
//! schedule can be written out and rerun. Each error names the field and its line.

use crate::support;

use fencesim_scenario::{parse, Action, Fault, Trigger};

/// Lines 1 to 7; the faults under test start on line 8.
const BASE: &str = "name = \"fh\"\nduration_ms = 200000\n[[clients]]\ncount = 2\nttl_ms = 1000\n\
                    [expect]\nverdict = \"valid\"\n";

/// The error line for `BASE` followed by `tail`.
fn error(tail: &str) -> String {
    parse(
        &format!("{BASE}{tail}"),
        "fh.toml",
        None,
        &support::designs(),
    )
    .expect_err("the scenario is refused")
    .to_string()
}

#[test]
fn a_final_heal_resolves_to_the_nemesis_action() {
    let tail = "[[faults]]\nkind = \"final-heal\"\nat_ms = 40000\nwindow_ms = 15000\n";
    let scenario = parse(
        &format!("{BASE}{tail}"),
        "fh.toml",
        None,
        &support::designs(),
    )
    .unwrap();
    assert_eq!(
        scenario.faults,
        vec![Fault {
            action: Action::FinalHeal { window_ms: 15000 },
            trigger: Trigger::At { at_ms: 40000 },
            duration_ms: None,
        }]
    );
}

#[test]
fn a_final_heal_needs_a_window() {
    assert_eq!(
        error("[[faults]]\nkind = \"final-heal\"\nat_ms = 5000\n"),
        "fh.toml:9:8: field `faults.window_ms`: a final-heal fault needs `window_ms`"
    );
}

#[test]
fn a_final_heal_needs_at_ms() {
    assert_eq!(
        error("[[faults]]\nkind = \"final-heal\"\nwindow_ms = 5000\n"),
        "fh.toml:9:8: field `faults.at_ms`: a final-heal fault needs `at_ms`"
    );
}

#[test]
fn a_zero_window_is_refused() {
    assert_eq!(
        error("[[faults]]\nkind = \"final-heal\"\nat_ms = 5000\nwindow_ms = 0\n"),
        "fh.toml:11:13: field `faults.window_ms`: expected a positive integer of at most \
         1000000000000, found 0"
    );
}

#[test]
fn a_window_past_the_end_of_the_run_is_refused() {
    assert_eq!(
        error("[[faults]]\nkind = \"final-heal\"\nat_ms = 150000\nwindow_ms = 50001\n"),
        "fh.toml:11:13: field `faults.window_ms`: the run ends at duration_ms = 200000, before \
         the recovery window ends at 150000 + 50001 = 200001 ms"
    );
}

#[test]
fn a_second_final_heal_is_refused() {
    let heal = "[[faults]]\nkind = \"final-heal\"\nat_ms = 5000\nwindow_ms = 100\n";
    assert_eq!(
        error(&format!("{heal}{heal}")),
        "fh.toml:13:8: field `faults.kind`: a scenario has at most one final-heal fault"
    );
}

#[test]
fn a_final_heal_beside_a_nemesis_is_refused() {
    let tail = "[[faults]]\nkind = \"final-heal\"\nat_ms = 5000\nwindow_ms = 100\n\
                [nemesis]\nkinds = [\"pause\"]\nheal_at_ms = 1000\n";
    assert_eq!(
        error(tail),
        "fh.toml:9:8: field `faults.kind`: a [nemesis] draws its own final heal at heal_at_ms; \
         keep either this fault or the [nemesis] table"
    );
}

#[test]
fn a_final_heal_takes_no_node() {
    let tail = "[[faults]]\nkind = \"final-heal\"\nnode = \"client-1\"\nat_ms = 5000\n\
                window_ms = 100\n";
    assert_eq!(
        error(tail),
        "fh.toml:10:8: field `faults.node`: a final-heal fault does not take `node`"
    );
}

#[test]
fn a_final_heal_takes_no_event_trigger_or_duration() {
    let after = "[[faults]]\nkind = \"final-heal\"\nafter = \"grant\"\nwindow_ms = 100\n";
    assert_eq!(
        error(after),
        "fh.toml:10:9: field `faults.after`: a final-heal fault does not take `after`"
    );
    let duration =
        "[[faults]]\nkind = \"final-heal\"\nat_ms = 5\nwindow_ms = 100\nduration_ms = 10\n";
    assert_eq!(
        error(duration),
        "fh.toml:12:15: field `faults.duration_ms`: a final-heal fault does not take \
         `duration_ms`"
    );
}

/// The nemesis draws its own final heal; it is not a kind it can be asked to draw.
#[test]
fn a_nemesis_does_not_draw_final_heals() {
    let tail = "[nemesis]\nkinds = [\"final-heal\"]\nheal_at_ms = 1000\n";
    let err = error(tail);
    assert!(
        err.starts_with("fh.toml:9:10: field `nemesis.kinds`: a random nemesis draws only"),
        "{err}"
    );
}
