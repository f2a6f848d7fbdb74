//! `explore --guided`: the search is the same whatever `--jobs` is, its counterexample is a
//! scripted scenario file that `run` reproduces, and the simulations it needs on rows of the
//! mutation table do not grow (counts, not times: deterministic).

use crate::support;

use crate::support::{fencesim, out_dir, text};
use fencesim::guided::search;
use fencesim::mutation_table::CAUGHT;
use fencesim::run::RunOptions;
use fencesim_scenario::Placement;

fn row(name: &str) -> &'static fencesim::mutation_table::Defect {
    CAUGHT
        .iter()
        .find(|d| d.name == name)
        .expect("a row of the table")
}

#[test]
fn the_same_root_seed_gives_the_same_search_whatever_the_jobs() {
    let scenario = row("reclaim = by-name").mutant(Placement::Uniform);
    let opts = RunOptions::in_memory();
    let one = search(crate::support::engine(), &scenario, 0, 100, 1, &opts).unwrap();
    let three = search(crate::support::engine(), &scenario, 0, 100, 3, &opts).unwrap();
    assert_eq!(
        (one.simulations, one.corpus, one.features),
        (three.simulations, three.corpus, three.features)
    );
    let (a, b) = (one.found.expect("found"), three.found.expect("found"));
    assert_eq!((a.seed, &a.scenario.faults), (b.seed, &b.scenario.faults));
    assert_eq!(a.judged.report.violations, b.judged.report.violations);
}

/// Simulations guided exploration needs on rows of the mutation table, from a few root seeds:
/// pinned so that a change to the search that makes it slower to find them shows here (`bench
/// --only search` has the whole table). The rows are the ones uniform or targeted placement
/// finds slowest (K04, K12, K14) and a few the hazard probes find at once.
#[test]
fn guided_search_finds_table_defects_within_its_pinned_counts() {
    // u64::MAX: not found within the budget of 100 simulations.
    const NOT_FOUND: u64 = u64::MAX;
    let pinned: &[(&str, [u64; 5])] = &[
        ("fsync = never", [1, 1, 5, 1, 2]),
        ("deadline_from = notice", [9, 9, 11, 14, 3]),
        ("on_lost_lease = keep-role", [NOT_FOUND, 45, 4, 7, 7]),
        ("reclaim = by-name", [6, 1, 3, 5, 4]),
        ("validity_check = false", [2, 7, 4, 7, 3]),
    ];
    let mut found = Vec::new();
    for (name, _) in pinned {
        let counts = first_found(&row(name).mutant(Placement::Uniform));
        found.push((*name, counts.map(|c| c.unwrap_or(NOT_FOUND))));
    }
    // Not worse than pinned: a change that finds them sooner passes (and should re-pin).
    let worse = found
        .iter()
        .zip(pinned)
        .any(|((_, counts), (_, pins))| counts.iter().zip(pins).any(|(count, pin)| count > pin));
    assert!(!worse, "found {found:?}\npinned {pinned:?}");
}

/// From root seeds 0 to 4, the simulations a guided search of `scenario` runs up to its first
/// counterexample (`None`: none within 100).
fn first_found(scenario: &fencesim_scenario::Scenario) -> [Option<u64>; 5] {
    let opts = RunOptions::in_memory();
    [0, 1, 2, 3, 4].map(|root| {
        let o = search(crate::support::engine(), scenario, root, 100, 2, &opts).unwrap();
        o.found.map(|_| o.simulations)
    })
}

/// A client stalled holding its lease while another is granted and writes, when each client
/// writes once: a probe struck on every client at once stalls them all and hides it, so each
/// pair on a client is also tried on one client alone (a helper's case: striking every client
/// only, roots 0 to 4 took 96, >100, >100, 72 and >100 simulations).
#[test]
fn guided_search_finds_a_stale_write_when_each_client_writes_once() {
    let file = "tests/fixtures/explore/random-nemesis-unfenced-one-write.toml";
    let counts = first_found(
        &crate::support::engine()
            .load_scenario(std::path::Path::new(file))
            .unwrap(),
    );
    let pinned = [2, 16, 2, 17, 15];
    let worse = counts
        .iter()
        .zip(pinned)
        .any(|(count, pin)| count.is_none_or(|c| c > pin));
    assert!(!worse, "found {counts:?}, pinned {pinned:?}");
}

/// `explore SCENARIO --guided --seeds 0..200` into `out`, which must find a counterexample
/// (exit 1): its stdout and the file and seed of its reproduce line.
fn counterexample(
    scenario: &str,
    out: &std::path::Path,
    extra: &[&str],
) -> (String, (String, String)) {
    let mut args = vec![
        "explore", scenario, "--guided", "--seeds", "0..200", "--quiet",
    ];
    args.extend_from_slice(extra);
    args.extend(["--out", out.to_str().unwrap()]);
    let o = fencesim(&args);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    let reproduce = support::reproduce_line(&stdout);
    (stdout, reproduce)
}

#[test]
fn a_guided_counterexample_is_a_file_that_run_reproduces() {
    let out = out_dir("guided-cli");
    let (stdout, (file, seed)) = counterexample(
        "tests/fixtures/explore/random-nemesis-unfenced.toml",
        &out,
        &[],
    );
    let (file, seed) = (file.as_str(), seed.as_str());
    assert!(
        file.contains("/guided/random-nemesis-unfenced-guided-"),
        "{file}"
    );
    let written = crate::support::engine()
        .load_scenario(std::path::Path::new(file))
        .unwrap();
    assert!(written.nemesis.is_none(), "the schedule is scripted");
    assert!(
        stdout.contains("random-nemesis-unfenced: guided from root seed 0: "),
        "{stdout}"
    );
    let summary = support::json(&out.join("random-nemesis-unfenced/guided-summary.json"));
    assert_eq!(summary["root_seed"], 0);
    assert_eq!(summary["counterexample"]["file"], file);
    assert_eq!(
        summary["counterexample"]["violations"][0],
        "stale-write-accepted"
    );
    let rerun = out_dir("guided-cli-rerun");
    let o = fencesim(&[
        "run",
        file,
        "--seed",
        seed,
        "--out",
        rerun.to_str().unwrap(),
    ]);
    let (stdout, _) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("stale-write-accepted"), "{stdout}");

    let o = fencesim(&["explore", "pause-fenced", "--guided", "--seeds", "0..10"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).1.contains("has no [nemesis] section"),
        "{}",
        text(&o).1
    );
}

/// `explore` searches by default where there is a nemesis to search, says so, and sweeps
/// where there is not, or when a sweep is asked for.
#[test]
fn explore_searches_a_scenario_with_a_nemesis_unless_told_to_sweep() {
    let scenario = "tests/fixtures/explore/random-nemesis-unfenced.toml";
    let run = |name: &str, extra: &[&str]| {
        let out = out_dir(name);
        let mut args = vec!["explore", scenario, "--seeds", "0..200"];
        args.extend_from_slice(extra);
        args.extend(["--out", out.to_str().unwrap()]);
        let o = fencesim(&args);
        let (stdout, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
        let dir = out.join("random-nemesis-unfenced");
        let kinds = ["guided-summary.json", "explore-summary.json"];
        let written: Vec<&str> = kinds
            .into_iter()
            .filter(|k| dir.join(k).is_file())
            .collect();
        (stdout, stderr, written)
    };
    let (stdout, stderr, written) = run("explore-default", &[]);
    assert!(
        stdout.contains("random-nemesis-unfenced: guided from root seed 0: "),
        "{stdout}"
    );
    assert!(
        stderr.contains("a guided search from root seed 0, at most 200 simulations (the default"),
        "{stderr}"
    );
    assert_eq!(written, ["guided-summary.json"]);
    for (name, flag) in [
        ("explore-sweep", "--sweep"),
        ("explore-all", "--keep-going"),
    ] {
        let (stdout, _, written) = run(name, &[flag, "--quiet"]);
        assert!(!stdout.contains("guided"), "{flag}: {stdout}");
        assert_eq!(written, ["explore-summary.json"], "{flag}");
    }
    let o = fencesim(&[
        "explore", scenario, "--guided", "--sweep", "--seeds", "0..9",
    ]);
    assert_eq!(o.status.code(), Some(2), "--guided and --sweep conflict");
    // Without a [nemesis] there is nothing to search: a sweep.
    let out = out_dir("explore-default-scripted");
    let o = fencesim(&[
        "explore",
        "pause-unfenced",
        "--seeds",
        "0..2",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    assert!(out.join("pause-unfenced/explore-summary.json").is_file());
    assert!(!out.join("pause-unfenced/guided-summary.json").exists());
}

/// `--swarm` acts on the nemesis's draws; the counterexample's file has none, so its
/// reproduce line must not carry the flag (it would be refused). And a file where the
/// counterexample's folder goes is refused before the search, not after it.
#[test]
fn a_swarm_search_reproduces_without_swarm_and_a_blocked_folder_is_refused_first() {
    let scenario = "tests/fixtures/explore/random-nemesis-unfenced.toml";
    let out = out_dir("guided-swarm");
    let (stdout, (file, seed)) = counterexample(scenario, &out, &["--swarm"]);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("reproduce: "))
        .unwrap();
    assert!(!line.contains("--swarm"), "{line}");
    let o = fencesim(&[
        "run",
        &file,
        "--seed",
        &seed,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o).1);

    // The default search into `out` with a file at `out/in_the_way`: its stdout and stderr,
    // after checking it exits 2.
    let blocked_at = |test: &str, in_the_way: &str| {
        let out = out_dir(test);
        let file = out.join(in_the_way);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "").unwrap();
        let args = ["explore", scenario, "--seeds", "0..200", "--quiet", "--out"];
        let o = fencesim(&[&args[..], &[out.to_str().unwrap()]].concat());
        let (stdout, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{stdout}{stderr}");
        (out, stdout, stderr)
    };
    let (_, stdout, stderr) = blocked_at("guided-blocked", "random-nemesis-unfenced/guided");
    assert!(
        stderr.contains("guided is in the way of a folder"),
        "{stderr}"
    );
    assert!(stdout.is_empty(), "no simulation ran: {stdout}");

    // Where the counterexample's report goes cannot be known before the search: the error
    // names the path, and the search's summary is written all the same.
    let (late, _, stderr) = blocked_at("guided-blocked-late", "random-nemesis-unfenced-guided-2");
    assert!(
        stderr.contains("random-nemesis-unfenced-guided-2: Not a directory"),
        "{stderr}"
    );
    let summary = support::json(&late.join("random-nemesis-unfenced/guided-summary.json"));
    assert_eq!(summary["simulations"], 2);
}

/// Ctrl-C during a guided search: it stops between generations, says it was interrupted,
/// writes its summary marked so, and exits 130.
#[test]
fn an_interrupted_guided_search_writes_its_partial_summary() {
    let out = out_dir("guided-interrupted");
    let o = support::interrupted_after(
        &[
            "explore",
            "random-nemesis-fenced",
            "--guided",
            "--seeds",
            "0..100000000",
            "--out",
            out.to_str().unwrap(),
        ],
        std::time::Duration::from_secs(3),
    );
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(130), "{stdout}{stderr}");
    assert!(
        stdout.contains("simulations: no counterexample so far (the summary is partial)"),
        "{stdout}"
    );
    let summary = support::json(&out.join("random-nemesis-fenced/guided-summary.json"));
    assert_eq!(summary["interrupted"], true);
    let run = summary["simulations"].as_u64().unwrap();
    assert!(run > 0 && run < 100_000_000, "{run} simulations");
}

/// A counterexample's file is named after its scenario, cut short so that the name stays a
/// valid one (at most 64 characters) and the reproduce line runs.
#[test]
fn a_long_scenario_name_still_gives_a_counterexample_file_that_runs() {
    let out = out_dir("guided-long-name");
    let long = "a".repeat(64);
    let text_in = std::fs::read_to_string(
        support::root().join("tests/fixtures/explore/random-nemesis-unfenced.toml"),
    )
    .unwrap();
    let renamed = text_in.replacen(
        "name = \"random-nemesis-unfenced\"",
        &format!("name = \"{long}\""),
        1,
    );
    assert_ne!(renamed, text_in);
    let file = out.join("long.toml");
    std::fs::write(&file, renamed).unwrap();
    let (_, (written, seed)) = counterexample(file.to_str().unwrap(), &out, &[]);
    let scenario = crate::support::engine()
        .load_scenario(std::path::Path::new(&written))
        .unwrap();
    assert_eq!(scenario.name.len(), 64, "{}", scenario.name);
    assert!(scenario.name.contains("-guided-"), "{}", scenario.name);
    let o = fencesim(&[
        "run",
        &written,
        "--seed",
        &seed,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o).0);
}

/// A guided counterexample found late in its run (K12's, by a probe that strikes at 26 s of
/// 80) shrinks to a run of a few seconds: shrink moves the schedule sooner before it cuts the
/// run (without that step this one stopped at 33 s with 3 clients).
#[test]
fn a_guided_counterexample_shrinks_to_a_short_run() {
    let scenario = row("deadline_from = notice").mutant(Placement::Uniform);
    let o = search(
        crate::support::engine(),
        &scenario,
        0,
        100,
        2,
        &RunOptions::in_memory(),
    )
    .unwrap();
    let found = o.found.expect("K12 from root seed 0");
    let kind = found.judged.report.violations[0].kind;
    let seed = found.seed;
    let mut fails = |c: &fencesim_scenario::Scenario| {
        fencesim::shrink::file_shows(crate::support::engine(), c, seed, kind)
    };
    let shrunk = fencesim::shrink::shrink(&found.scenario, seed, kind, &[], &mut fails).unwrap();
    assert_eq!(scenario.duration_ms, 80_000);
    assert!(
        shrunk.scenario.duration_ms <= 10_000,
        "{}",
        fencesim_scenario::to_toml(&shrunk.scenario)
    );
    assert!(
        shrunk.scenario.faults.len() <= 2,
        "{:?}",
        shrunk.scenario.faults
    );
}
