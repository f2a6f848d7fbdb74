//! `explore`: stopping at the first counterexample, the summary, shards and `--merge`, and
//! how many seeds targeted fault placement saves (counts, not timings).

use crate::support;

use std::path::PathBuf;

use crate::support::{fencesim, json, out_dir, text};
use fencesim::run::{default_jobs, sweep, RunOptions};

fn fixture(name: &str) -> String {
    format!("tests/fixtures/explore/{name}.toml")
}

/// The seeds among `0..end` of a fixture that miss its expectation (it claims an unsafe design
/// is safe, so these are the refutations).
fn counterexamples(name: &str, end: u64) -> Vec<u64> {
    let path = support::root().join(fixture(name));
    let scenario = crate::support::engine()
        .load_scenario(&path)
        .expect("fixture parses");
    let opts = RunOptions::in_memory();
    let seeds: Vec<u64> = (0..end).collect();
    let found = sweep(
        crate::support::engine(),
        &scenario,
        &seeds,
        default_jobs(),
        &opts,
        |done| Ok((!done.report.expectation.met).then_some(done.report.seed)),
    )
    .expect("sweep");
    found.into_iter().flatten().collect()
}

/// For each starting seed in `0..20`, how many seeds `explore` runs up to and including the
/// first counterexample (`None`: none before `end`).
fn seeds_to_first(counterexamples: &[u64], end: u64) -> Vec<Option<u64>> {
    (0..20)
        .map(|start| {
            (start..end)
                .find(|s| counterexamples.contains(s))
                .map(|s| s - start + 1)
        })
        .collect()
}

fn median(counts: &[Option<u64>]) -> f64 {
    let mut v: Vec<u64> = counts.iter().map(|c| c.expect("found")).collect();
    v.sort_unstable();
    (v[v.len() / 2 - 1] + v[v.len() / 2]) as f64 / 2.0
}

#[test]
fn targeted_placement_finds_the_pause_counterexample_in_fewer_seeds() {
    // A client that checks its lease and then writes: the gap has no width in simulated time,
    // so a pause at a uniformly drawn time never lands in it; a pause aimed at "just before
    // the write" does whenever it outlasts the lease.
    assert_eq!(
        counterexamples("pause-unfenced-uniform", 40),
        Vec::<u64>::new()
    );
    let targeted = seeds_to_first(&counterexamples("pause-unfenced-targeted", 30), 30);
    assert_eq!(median(&targeted), 1.0, "{targeted:?}");

    // A careless client (no check of its own lease): a uniform pause while it holds the lock
    // is enough, so both find it, targeted sooner.
    let uniform = seeds_to_first(&counterexamples("pause-unfenced-careless-uniform", 40), 40);
    let targeted = seeds_to_first(&counterexamples("pause-unfenced-careless-targeted", 30), 30);
    assert_eq!(median(&uniform), 2.0, "{uniform:?}");
    assert_eq!(median(&targeted), 1.0, "{targeted:?}");
}

#[test]
fn explore_stops_at_the_first_counterexample_whatever_the_jobs() {
    for jobs in ["1", "2"] {
        let out = out_dir(&format!("explore-stop-{jobs}"));
        let o = fencesim(&[
            "explore",
            &fixture("pause-unfenced-targeted"),
            "--seeds",
            "8..20",
            "--sweep",
            "--jobs",
            jobs,
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ]);
        let (stdout, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
        assert!(stderr.is_empty(), "--quiet prints no progress: {stderr}");
        // Seeds 8 and 9 meet the (false) claim, seed 10 refutes it.
        assert!(
            stdout.contains("pause-unfenced-targeted seed 10: INVALID"),
            "{stdout}"
        );
        assert!(
            stdout.contains("reproduce: fencesim run tests/fixtures/explore/pause-unfenced-targeted.toml --seed 10"),
            "{stdout}"
        );
        let dir = out.join("pause-unfenced-targeted");
        let summary = json(&dir.join("explore-summary.json"));
        assert_eq!(summary["seeds_run"], 3);
        assert_eq!(summary["stopped_early"], true);
        assert_eq!(summary["counterexamples"], serde_json::json!([10]));
        assert_eq!(summary["invalid_by_kind"]["stale-write-accepted"], 1);
        assert!(dir.join("10/report.json").is_file());
        assert!(
            !dir.join("8").exists() && !dir.join("9").exists(),
            "a seed that met the expectation has no files"
        );
    }
}

#[test]
fn keep_going_runs_every_seed_and_shards_merge_into_the_whole_sweep() {
    let out = out_dir("explore-shards");
    let whole = out_dir("explore-whole");
    let run = |out: &PathBuf, extra: &[&str]| {
        let mut args = vec![
            "explore",
            "pause-unfenced",
            "--seeds",
            "0..6",
            "--keep-going",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        fencesim(&args)
    };
    // pause-unfenced expects its violation, so every seed meets the expectation.
    let o = run(&whole, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).0);
    let whole = json(&whole.join("pause-unfenced/explore-summary.json"));
    assert_eq!(whole["seeds_run"], 6);
    assert_eq!(whole["invalid"], 6);
    for shard in ["0/3", "1/3", "2/3"] {
        let o = run(&out, &["--shard", shard]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o).0);
    }
    let dir = out.join("pause-unfenced");
    let part = |i: u64| dir.join(format!("explore-summary-shard-{i}-of-3.json"));
    assert_eq!(json(&part(1))["seeds_run"], 2);
    let (a, b, c) = (part(0), part(1), part(2));
    let merged = out.join("merged");
    let o = fencesim(&[
        "explore",
        "--merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        c.to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    let (stdout, _) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.starts_with("pause-unfenced: 6 seeds run of 0..6 (shards 0/3, 1/3, 2/3): 0 valid, 6 invalid, 0 unknown, 0 failed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("stale-write-accepted 6 (first at seed 0)"),
        "{stdout}"
    );
    let summary = json(&merged.join("pause-unfenced/explore-summary.json"));
    assert_eq!(summary["shards"], serde_json::json!(["0/3", "1/3", "2/3"]));
    assert_eq!(summary["invalid"], 6);
    assert!(
        text(&o).1.is_empty(),
        "a complete merge has no error: {}",
        text(&o).1
    );

    let o = fencesim(&[
        "explore",
        "--merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "a lost shard must not pass");
    assert!(
        text(&o)
            .1
            .contains("error: the merge lacks shards 2/3 of the sweep"),
        "{}",
        text(&o).1
    );
    assert_eq!(
        text(&o).0,
        "",
        "no summary that looks like a success before the error"
    );
    let o = fencesim(&[
        "explore",
        "--merge",
        a.to_str().unwrap(),
        a.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).1.contains("shard 0/3 is already in the merge"),
        "{}",
        text(&o).1
    );
}

#[test]
fn merge_refuses_a_file_that_is_not_a_summary() {
    let out = out_dir("explore-merge-bad");
    let bad = out.join("bad.json");
    std::fs::write(&bad, "{\"schema_version\": 1,\n \"scenario\": 3}\n").unwrap();
    let o = fencesim(&["explore", "--merge", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let (_, stderr) = text(&o);
    assert!(stderr.contains("bad.json: line 2 column"), "{stderr}");
    assert!(stderr.contains("not an explore summary"), "{stderr}");
    let o = fencesim(&["explore", "--merge", "/nonexistent/summary.json"]);
    assert_eq!(o.status.code(), Some(2));
    let o = fencesim(&["explore", "pause-fenced"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "--seeds is required without --merge"
    );
    // A shard with no seed of a small range still writes its (empty) summary, so that a
    // merge of every shard is complete.
    let out = out_dir("explore-empty-shard");
    let o = fencesim(&[
        "explore",
        "pause-fenced",
        "--seeds",
        "0..3",
        "--shard",
        "5/10",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).1);
    let empty = json(&out.join("pause-fenced/explore-summary-shard-5-of-10.json"));
    assert_eq!(empty["seeds_run"], 0);
}

/// Ctrl-C during a sweep: the seeds in progress finish, the partial summary is printed and
/// written marked `interrupted`, the exit code is 130, and `--merge` refuses it as a shard.
#[test]
fn an_interrupted_sweep_writes_its_partial_summary() {
    let out = out_dir("explore-interrupted");
    // Some seeds must be done before the signal, so that the summary has something in it.
    let o = support::interrupted_after(
        &[
            "explore",
            "random-nemesis-fenced",
            "--seeds",
            "0..1000000",
            "--keep-going",
            "--shard",
            "0/2",
            "--out",
            out.to_str().unwrap(),
        ],
        std::time::Duration::from_secs(3),
    );
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(130), "{stdout}{stderr}");
    assert!(
        stderr.contains("interrupted: finishing the work in progress"),
        "{stderr}"
    );
    assert!(
        stdout.contains("(INTERRUPTED: a partial summary)"),
        "{stdout}"
    );
    assert!(stdout.contains("interrupted after "), "{stdout}");
    let path = out.join("random-nemesis-fenced/explore-summary-shard-0-of-2.json");
    let summary = json(&path);
    assert_eq!(summary["interrupted"], true);
    let run = summary["seeds_run"].as_u64().unwrap();
    assert!(run > 0 && run < 500_000, "{run} seeds run");
    assert_eq!(summary["stopped_early"], false);
    let o = fencesim(&["explore", "--merge", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o)
            .1
            .contains("the partial summary of an interrupted sweep"),
        "{}",
        text(&o).1
    );
}

/// An output folder that cannot be written is refused before the sweep, not after it.
#[test]
fn an_unwritable_out_folder_is_refused_before_the_sweep() {
    let out = out_dir("explore-unwritable");
    let blocker = out.join("file");
    std::fs::write(&blocker, "not a folder").unwrap();
    let o = fencesim(&[
        "explore",
        "random-nemesis-fenced",
        "--seeds",
        "0..1000000",
        "--keep-going",
        "--out",
        blocker.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stdout}{stderr}");
    assert!(
        stderr.starts_with("error: cannot write the run's output under"),
        "{stderr}"
    );
    assert_eq!(stdout, "", "no seed was run");
}

/// `--shard env`: each job of a CI matrix or a Kubernetes Indexed Job takes its shard from its
/// engine's variables; the merged shards are the unsharded sweep, field for field (but time).
#[test]
fn shards_from_job_engines_merge_into_the_unsharded_sweep() {
    const SCENARIO: &str = "tests/fixtures/explore/random-nemesis-unfenced.toml";
    let engine_vars = fencesim::shard_env::ENGINES
        .iter()
        .flat_map(|e| [Some(e.index), e.total])
        .flatten();
    let sweep = |out: &PathBuf, shard: Option<&str>, vars: &[(&str, String)]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"));
        command.current_dir(support::root());
        for name in engine_vars.clone() {
            command.env_remove(name);
        }
        let out_arg = out.to_str().unwrap();
        let mut args = vec![
            "explore",
            SCENARIO,
            "--seeds",
            "0..60",
            "--keep-going",
            "--quiet",
        ];
        args.extend(["--out", out_arg]);
        args.extend(shard.map(|s| ["--shard", s]).into_iter().flatten());
        let o = command
            .args(args)
            .envs(vars.iter().cloned())
            .output()
            .unwrap();
        // 1 when the seeds it ran hold a counterexample, 0 when they do not.
        let code = o.status.code();
        assert!(matches!(code, Some(0 | 1)), "{}{}", text(&o).0, text(&o).1);
        text(&o).1
    };
    let whole_dir = out_dir("explore-env-whole");
    sweep(&whole_dir, None, &[]);
    let whole = json(&whole_dir.join("random-nemesis-unfenced/explore-summary.json"));

    // GitLab counts jobs from 1; a Kubernetes Indexed Job from 0, with the count given.
    let gitlab = out_dir("explore-env-gitlab");
    let k8s = out_dir("explore-env-k8s");
    for job in 0..3u64 {
        let stderr = sweep(
            &gitlab,
            Some("env"),
            &[
                ("CI_NODE_INDEX", (job + 1).to_string()),
                ("CI_NODE_TOTAL", "3".into()),
            ],
        );
        assert!(
            stderr.contains(&format!(
                "shard {job}/3 from GitLab CI (CI_NODE_INDEX={}, CI_NODE_TOTAL=3)",
                job + 1
            )),
            "{stderr}"
        );
        sweep(
            &k8s,
            Some("env/3"),
            &[("JOB_COMPLETION_INDEX", job.to_string())],
        );
    }
    for dir in [gitlab, k8s] {
        let parts: Vec<String> = (0..3)
            .map(|i| {
                dir.join(format!(
                    "random-nemesis-unfenced/explore-summary-shard-{i}-of-3.json"
                ))
                .display()
                .to_string()
            })
            .collect();
        let merged_dir = dir.join("merged");
        let mut args = vec!["explore", "--out", merged_dir.to_str().unwrap(), "--merge"];
        args.extend(parts.iter().map(String::as_str));
        let o = fencesim(&args);
        let (stdout, stderr) = text(&o);
        assert_eq!(
            o.status.code(),
            Some(1),
            "a counterexample fails the merge job: {stderr}"
        );
        let merged = json(&merged_dir.join("random-nemesis-unfenced/explore-summary.json"));
        let strip = |mut v: serde_json::Value| {
            for field in ["seconds", "seeds_per_second", "shards"] {
                v.as_object_mut().unwrap().remove(field);
            }
            v
        };
        assert_eq!(strip(merged), strip(whole.clone()), "{stdout}{stderr}");
    }
    assert_eq!(whole["first_seed_by_kind"]["stale-write-accepted"], 19);
    assert!(whole["invalid"].as_u64().unwrap() > 1, "{whole}");
}
