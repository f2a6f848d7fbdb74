//! The bundled scenarios meet their expectations on every seed of their range, through the
//! built binary, and their reports name the right tokens.

use crate::support;

use crate::support::{fencesim, json, out_dir, text};

fn expect_met_on_range(file: &str) {
    let out = out_dir(&format!("expect-{file}"));
    let o = fencesim(&[
        "run",
        &format!("scenarios/incidents/{file}"),
        "--expect",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    let name = file.trim_end_matches(".toml");
    assert!(
        stdout.contains(&format!(
            "{name}: expectation met on 10/10 seeds (0..10); files written for 0 seeds"
        )),
        "{stdout}"
    );
    // Only the seeds that miss are written: none here.
    assert!(
        !out.join(name).join("0").exists(),
        "seed 0's folder was written"
    );
}

/// `--write-all` writes every seed's folder, as a user asks for when they want them all.
#[test]
fn write_all_writes_every_seed_of_the_range() {
    let out = out_dir("expect-write-all");
    let o = fencesim(&[
        "run",
        "scenarios/incidents/pause-fenced.toml",
        "--expect",
        "--write-all",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("files written for 10 seeds under"),
        "{stdout}"
    );
    for seed in 0..10 {
        let report = out
            .join("pause-fenced")
            .join(seed.to_string())
            .join("report.json");
        assert!(report.exists(), "{}", report.display());
    }
    assert!(stderr.is_empty(), "--quiet shows no progress: {stderr}");
}

/// A seed that misses the expectation is written and printed with its reproduce line; the
/// others are not written.
#[test]
fn a_range_writes_only_the_seeds_that_miss() {
    let dir = out_dir("expect-misses");
    let claim = dir.join("claim.toml");
    let text_of =
        std::fs::read_to_string(support::root().join("scenarios/incidents/pause-fenced.toml"))
            .unwrap();
    // Claim the fenced design unsafe: every seed misses.
    let wrong = text_of.replace(
        "verdict = \"valid\"",
        "verdict = \"invalid\"\nviolations = [\"stale-write-accepted\"]",
    );
    assert_ne!(wrong, text_of);
    std::fs::write(
        &claim,
        wrong.replace("seeds = \"0..10\"", "seeds = \"0..3\""),
    )
    .unwrap();
    let out = dir.join("out");
    let o = fencesim(&[
        "run",
        claim.to_str().unwrap(),
        "--expect",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    assert_eq!(stdout.matches("reproduce: ").count(), 3, "{stdout}");
    assert!(
        stdout.contains("expectation met on 0/3 seeds (0..3); files written for 3 seeds"),
        "{stdout}"
    );
    assert!(out
        .join("pause-fenced")
        .join("2")
        .join("report.json")
        .exists());
}

#[test]
fn pause_unfenced_is_invalid_on_every_seed() {
    expect_met_on_range("pause-unfenced.toml");
}

#[test]
fn pause_fenced_is_valid_on_every_seed() {
    expect_met_on_range("pause-fenced.toml");
}

#[test]
fn delayed_write_unfenced_is_invalid_on_every_seed() {
    expect_met_on_range("delayed-write-unfenced.toml");
}

#[test]
fn delayed_write_fenced_is_valid_on_every_seed() {
    expect_met_on_range("delayed-write-fenced.toml");
}

/// The stale write of the unfenced scenarios carries token 1 and lands after token 2.
fn assert_stale_write_report(file: &str, seed: &str) {
    let out = out_dir(&format!("report-{file}-{seed}"));
    let o = fencesim(&[
        "run",
        &format!("scenarios/incidents/{file}"),
        "--seed",
        seed,
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, _) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("INVALID (1 violation: stale-write-accepted)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "reproduce: fencesim run scenarios/incidents/{file} --seed {seed}"
        )),
        "{stdout}"
    );
    let name = file.trim_end_matches(".toml");
    let dir = out.join(name).join(seed);
    let report = json(&dir.join("report.json"));
    assert_eq!(report["schema_version"], 2);
    assert_eq!(report["verdict"], "invalid");
    assert_eq!(report["seed"].as_u64(), Some(seed.parse().unwrap()));
    assert_eq!(report["expectation"]["met"], true);
    assert_eq!(report["unsafe_exposure"]["accepted"], 1);
    let violations = report["violations"].as_array().unwrap();
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0]["kind"], "stale-write-accepted");
    // The witnesses point at the stale accept (token 1) and the earlier accept of token 2.
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = history
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let w: Vec<usize> = violations[0]["witnesses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(
        (
            lines[w[0]]["event"].as_str(),
            lines[w[0]]["token"].as_u64(),
            lines[w[0]]["holder"].as_str()
        ),
        (Some("accept"), Some(1), Some("client-1"))
    );
    assert_eq!(
        (
            lines[w[1]]["event"].as_str(),
            lines[w[1]]["token"].as_u64(),
            lines[w[1]]["holder"].as_str()
        ),
        (Some("accept"), Some(2), Some("client-2"))
    );
    assert!(w[1] < w[0]);
    let sha = support::text(
        &std::process::Command::new("sha256sum")
            .arg(dir.join("history.jsonl"))
            .output()
            .unwrap(),
    )
    .0;
    assert_eq!(
        report["history"]["sha256"].as_str().unwrap(),
        sha.split_whitespace().next().unwrap()
    );
}

#[test]
fn unfenced_reports_name_the_old_and_the_newer_token() {
    assert_stale_write_report("pause-unfenced.toml", "0");
    assert_stale_write_report("delayed-write-unfenced.toml", "7");
}

/// In the fenced variants the stale write is visible as a reject event and nothing else fails.
#[test]
fn fenced_variants_show_the_stale_write_as_a_reject() {
    for file in ["pause-fenced.toml", "delayed-write-fenced.toml"] {
        let out = out_dir(&format!("reject-{file}"));
        let o = fencesim(&[
            "run",
            &format!("scenarios/incidents/{file}"),
            "--seed",
            "4",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o).0);
        let dir = out.join(file.trim_end_matches(".toml")).join("4");
        let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
        let rejects: Vec<serde_json::Value> = history
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|v| v["event"] == "reject")
            .collect();
        assert_eq!(rejects.len(), 1, "{file}");
        assert_eq!(
            (rejects[0]["token"].as_u64(), rejects[0]["highest"].as_u64()),
            (Some(1), Some(2))
        );
        let report = json(&dir.join("report.json"));
        assert_eq!(report["verdict"], "valid");
        assert_eq!(report["unsafe_exposure"]["rejected"], 1);
        assert_eq!(report["counts"]["events"]["reject"], 1);
    }
}
