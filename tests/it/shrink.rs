//! `shrink` and `explore --shrink`: a counterexample found by the random nemesis comes out as a
//! scenario file of fewer faults that `fencesim run` reproduces, from which no single fault can
//! be removed without losing the violation (delta debugging's 1-minimality).

use crate::support;

use crate::support::{fencesim, out_dir, text};

/// Explore the unfenced random-nemesis fixture, shrink its first counterexample, and return
/// the explore output and the shrunk file's path.
fn explore_and_shrink(test: &str) -> (String, std::path::PathBuf) {
    let out = out_dir(test);
    let o = fencesim(&[
        "explore",
        "tests/fixtures/explore/random-nemesis-unfenced.toml",
        "--seeds",
        "0..100",
        "--sweep",
        "--quiet",
        "--shrink",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    let file = out.join("shrunk/random-nemesis-unfenced-seed-19-min.toml");
    assert!(file.is_file(), "{stdout}");
    (stdout, file)
}

#[test]
fn a_random_nemesis_counterexample_shrinks_to_a_file_run_reproduces() {
    let (stdout, file) = explore_and_shrink("shrink-explore");
    let shrunk = crate::support::engine()
        .load_scenario(&file)
        .expect("the shrunk file is a valid scenario");
    assert!(
        stdout.contains(&format!(
            "shrunk seed 19 of random-nemesis-unfenced keeping stale-write-accepted: faults 18 -> {}, clients 3 -> {}",
            shrunk.faults.len(),
            shrunk.clients.len()
        )),
        "{stdout}"
    );
    assert!(shrunk.faults.len() < 18, "{:?}", shrunk.faults);
    assert_one_minimal(&shrunk, 19, fencesim::ViolationKind::StaleWriteAccepted);
    assert!(shrunk.nemesis.is_none(), "the drawn schedule is scripted");
    assert_eq!((shrunk.seeds.start, shrunk.seeds.end), (19, 20));
    let path = file.to_str().unwrap();
    let o = fencesim(&[
        "run",
        path,
        "--out",
        out_dir("shrink-rerun").to_str().unwrap(),
    ]);
    let (stdout, _) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("seed 19: INVALID (1 violation: stale-write-accepted)"),
        "{stdout}"
    );
    // Its expectation is the violation, so --expect passes.
    let o = fencesim(&[
        "run",
        path,
        "--expect",
        "--out",
        out_dir("shrink-expect").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).0);
}

/// Removing any one fault (but the final heal, which shrinking keeps) from `scenario` loses
/// its `kind` violation on `seed`.
fn assert_one_minimal(scenario: &fencesim::Scenario, seed: u64, kind: fencesim::ViolationKind) {
    let opts = fencesim::run::RunOptions::in_memory();
    let shows = |s: &fencesim::Scenario| {
        let done = fencesim::run::judge(crate::support::engine(), s, seed, &opts);
        done.report.violations.iter().any(|v| v.kind == kind)
    };
    assert!(shows(scenario), "the shrunk scenario keeps the violation");
    for (i, fault) in scenario.faults.iter().enumerate() {
        if fault.action.kind() == fencesim_scenario::FaultKind::FinalHeal {
            continue;
        }
        let mut fewer = scenario.clone();
        fewer.faults.remove(i);
        assert!(!shows(&fewer), "fault {i} ({fault:?}) was not needed");
    }
}

#[test]
fn shrinking_is_deterministic() {
    let (_, a) = explore_and_shrink("shrink-det-a");
    let (_, b) = explore_and_shrink("shrink-det-b");
    assert_eq!(std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
}

#[test]
fn shrink_refuses_what_it_cannot_shrink() {
    let out = out_dir("shrink-bad");
    let valid = out_dir("shrink-valid-run");
    let o = fencesim(&["run", "pause-fenced", "--out", valid.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let report = valid.join("pause-fenced/0/report.json");
    let o = fencesim(&[
        "shrink",
        report.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).1.contains("has no violation to shrink"),
        "{}",
        text(&o).1
    );

    let example = "reports/examples/pause-unfenced/0/report.json";
    let o = fencesim(&[
        "shrink",
        example,
        "--kind",
        "stale",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o)
            .1
            .contains("--kind: expected one of stale-write-accepted"),
        "{}",
        text(&o).1
    );
    let o = fencesim(&[
        "shrink",
        example,
        "--kind",
        "token-reused",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o)
            .1
            .contains("seed 0 of pause-unfenced has no token-reused violation to shrink"),
        "{}",
        text(&o).1
    );
    let o = fencesim(&[
        "shrink",
        "tests/fixtures/explore/pause-unfenced-uniform.toml",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o)
            .1
            .contains("pause-unfenced-uniform.toml:1:2: not a fencesim report: expected ident"),
        "{}",
        text(&o).1
    );
}

#[test]
fn a_scripted_example_shrinks_to_its_one_pause() {
    let out = out_dir("shrink-example");
    let o = fencesim(&[
        "shrink",
        "reports/examples/pause-unfenced/0/report.json",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("faults 1 -> 1, clients 2 -> 2"), "{stdout}");
    let shrunk = crate::support::engine()
        .load_scenario(&out.join("pause-unfenced-seed-0-min.toml"))
        .unwrap();
    assert_eq!(shrunk.faults.len(), 1);
    assert!(shrunk.duration_ms < 60_000, "{}", shrunk.duration_ms);
}

#[test]
fn the_largest_seed_and_a_hand_edited_report_are_refused_plainly() {
    let out = out_dir("shrink-edge");
    let o = fencesim(&[
        "run",
        "pause-unfenced",
        "--seed",
        "18446744073709551615",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o).0);
    let report = out.join("pause-unfenced/18446744073709551615/report.json");
    let o = fencesim(&[
        "shrink",
        report.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o).1);
    assert!(
        text(&o)
            .1
            .contains("seed 18446744073709551615 is the largest possible"),
        "{}",
        text(&o).1
    );

    let mut edited = support::json(&report);
    edited["scenario"]["duration_ms"] = serde_json::json!(0);
    let bad = out.join("edited.json");
    std::fs::write(&bad, serde_json::to_vec(&edited).unwrap()).unwrap();
    for command in ["shrink", "replay"] {
        let o = fencesim(&[
            command,
            bad.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{command}: {}", text(&o).1);
        assert!(
            text(&o)
                .1
                .contains("edited.json: its scenario is not valid:"),
            "{}",
            text(&o).1
        );
        assert!(text(&o).1.contains("duration_ms"), "{}", text(&o).1);
    }
}
