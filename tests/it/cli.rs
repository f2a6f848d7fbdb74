//! The rest of the CLI contract: bundled scenarios, list, check.

use crate::support;

use crate::support::{fencesim, out_dir, text};

#[test]
fn every_scenario_file_is_bundled_and_parses() {
    let root = support::root().join("scenarios");
    let mut on_disk: Vec<String> = Vec::new();
    for dir in ["", "incidents", "live", "verify"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            if name.ends_with(".toml") {
                on_disk.push(if dir.is_empty() {
                    name
                } else {
                    format!("{dir}/{name}")
                });
            }
        }
    }
    on_disk.sort();
    let mut bundled: Vec<String> = fencesim::bundled::SCENARIOS
        .iter()
        .map(|(f, _)| f.to_string())
        .collect();
    bundled.sort();
    assert_eq!(on_disk, bundled);
    for (path, text) in fencesim::bundled::SCENARIOS {
        let disk = std::fs::read_to_string(root.join(path)).unwrap();
        assert_eq!(&disk, text);
        let s = crate::support::engine().parse_scenario(text, path).unwrap();
        let file = path.rsplit('/').next().unwrap();
        assert_eq!(
            format!("{}.toml", s.name),
            file,
            "a scenario's name is its file name"
        );
        assert!(
            fencesim::bundled::find(&s.name).is_some_and(|(p, _)| p == *path),
            "{} is found by name",
            s.name
        );
    }
}

#[test]
fn list_shows_each_bundled_scenario_with_its_expectation() {
    let o = fencesim(&["list"]);
    let (stdout, _) = text(&o);
    assert_eq!(o.status.code(), Some(0));
    for (path, _) in fencesim::bundled::SCENARIOS {
        assert!(
            stdout.contains(&format!("    scenarios/{path}: ")),
            "{stdout}"
        );
    }
    assert!(
        stdout.contains("expect invalid (stale-write-accepted)"),
        "{stdout}"
    );
    assert!(stdout.contains("expect valid"), "{stdout}");
}

#[test]
fn a_bundled_scenario_runs_by_name_and_check_agrees_with_run() {
    let out = out_dir("by-name");
    let o = fencesim(&[
        "run",
        "pause-unfenced",
        "--seed",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o).0);
    let history = out.join("pause-unfenced/3/history.jsonl");
    let o = fencesim(&["check", history.to_str().unwrap()]);
    let (stdout, _) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("Invalid (1 violation)"), "{stdout}");
    assert!(stdout.contains("stale-write-accepted"), "{stdout}");
}

/// pause-fenced (valid on every seed) over `seeds`, wrongly claiming a stale write, in `dir`.
fn wrong_expectation(dir: &std::path::Path, seeds: &str) -> std::path::PathBuf {
    let text_in =
        std::fs::read_to_string(support::root().join("scenarios/incidents/pause-fenced.toml"))
            .unwrap();
    let wrong = text_in
        .replace(
            "verdict = \"valid\"",
            "verdict = \"invalid\"\nviolations = [\"stale-write-accepted\"]",
        )
        .replacen("seeds = \"0..10\"", &format!("seeds = \"{seeds}\""), 1);
    let file = dir.join("wrong.toml");
    std::fs::write(&file, wrong).unwrap();
    file
}

#[test]
fn expect_fails_when_the_expectation_is_wrong() {
    // The fenced pause scenario is valid; claim otherwise and --expect must exit 1.
    let dir = out_dir("wrong-expect");
    let file = wrong_expectation(&dir, "0..10");
    let o = fencesim(&[
        "run",
        file.to_str().unwrap(),
        "--expect",
        "--seed",
        "0",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let (stdout, _) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("expectation NOT met"), "{stdout}");
    assert!(stdout.contains("reproduce: fencesim run"), "{stdout}");
}

#[test]
fn expect_quiet_over_a_range_says_each_missed_seed_in_one_line() {
    let dir = out_dir("wrong-expect-quiet");
    let file = wrong_expectation(&dir, "0..3");
    let o = fencesim(&[
        "run",
        file.to_str().unwrap(),
        "--expect",
        "--quiet",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let (stdout, _) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "a line per seed and the tally: {stdout}");
    for (seed, line) in lines[..3].iter().enumerate() {
        assert!(
            line.starts_with(&format!("pause-fenced seed {seed}: valid; "))
                && line.contains("; expectation NOT met: invalid, with stale-write-accepted; ")
                && line.ends_with(&format!(
                    "; report: {}",
                    dir.join(format!("pause-fenced/{seed}/report.json"))
                        .display()
                )),
            "{line}"
        );
    }
    assert!(
        lines[3].starts_with("pause-fenced: expectation met on 0/3 seeds"),
        "{stdout}"
    );
}

#[test]
fn a_failed_simulation_exits_4_keeps_its_history_and_prints_the_seed() {
    let dir = out_dir("sim-failed");
    let file = support::history_limit_scenario(&dir);
    let o = fencesim(&[
        "run",
        file.to_str().unwrap(),
        "--seed",
        "3",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let (stdout, _) = text(&o);
    assert_eq!(o.status.code(), Some(4), "{stdout}");
    assert!(
        stdout
            .contains("pause-fenced seed 3: simulation failed: history limit exceeded: 40 records"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "reproduce: fencesim run {} --seed 3",
            file.display()
        )),
        "{stdout}"
    );
    let history = std::fs::read_to_string(dir.join("pause-fenced/3/history.jsonl")).unwrap();
    assert_eq!(
        history.lines().count(),
        41,
        "the header and the 40 records made before the failure"
    );
    let report = support::json(&dir.join("pause-fenced/3/report.json"));
    assert_eq!(report["verdict"], "sim-failed");
    assert_eq!(report["failure"]["kind"], "history-limit");
}

#[test]
fn replay_reruns_a_report_and_compares_its_history() {
    let dir = out_dir("replay");
    let example = support::root().join("reports/examples/clock-jump-wall-expiry/0/report.json");
    let o = fencesim(&[
        "replay",
        example.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    let (stdout, _) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("replay identical: history sha256"),
        "{stdout}"
    );
    // A report whose recorded history differs from what the run gives is a failed replay.
    let mut report = support::json(&example);
    report["history"]["sha256"] = serde_json::Value::String("0".repeat(64));
    let tampered = dir.join("tampered.json");
    std::fs::write(&tampered, serde_json::to_vec(&report).unwrap()).unwrap();
    let o = fencesim(&[
        "replay",
        tampered.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o).0);
    assert!(text(&o).0.contains("replay DIFFERS"));
    let o = fencesim(&["replay", "README.md", "--out", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o)
            .1
            .starts_with("error: README.md:1:1: not a fencesim report: "),
        "{}",
        text(&o).1
    );
}

#[test]
fn check_json_gives_the_verdict_and_witnesses_as_one_object() {
    let path = support::root().join("reports/examples/pause-unfenced/0/history.jsonl");
    let o = fencesim(&["check", path.to_str().unwrap(), "--json"]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["verdict"], "invalid");
    assert_eq!(v["violations"][0]["kind"], "stale-write-accepted");
    assert_eq!(
        v["violations"][0]["witnesses"],
        serde_json::json!([118, 110])
    );
    assert_eq!(v["unknown"], serde_json::json!([]));
    let chain: Vec<&str> = v["violations"][0]["chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(
        chain,
        [
            "client-1 was granted token 1 at 0.0 s",
            "client-1 paused at 1.0 s (frozen for 15000 ms)",
            "client-1's lease (token 1) expired at 10.0 s",
            "client-2 was granted token 2 at 10.2 s",
            "client-2's write with token 2 was accepted at 11.2 s",
            "client-1 resumed at 16.0 s",
            "client-1's write with token 1 was accepted at 16.0 s",
        ]
    );
    assert_eq!(v["unsafe_exposure"]["accepted"], 1);
}

#[test]
fn a_linearizability_search_out_of_budget_makes_a_valid_history_unknown() {
    let out = out_dir("check-unknown");
    let o = fencesim(&[
        "run",
        "pause-fenced",
        "--seed",
        "0",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let history = out.join("pause-fenced/0/history.jsonl");
    let o = fencesim(&["check", history.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let o = fencesim(&[
        "check",
        history.to_str().unwrap(),
        "--linearizability-steps",
        "2",
    ]);
    let (stdout, _) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains(": Unknown (0 violations)"), "{stdout}");
    assert!(
        stdout.contains("unknown: linearizability of key \"register\""),
        "{stdout}"
    );
}

#[test]
fn a_history_of_client_operations_only_says_which_checks_it_could_not_run() {
    let source = support::root().join("reports/examples/pause-unfenced/0/history.jsonl");
    let text_in = std::fs::read_to_string(source).unwrap();
    let ops_only: Vec<&str> = text_in
        .lines()
        .filter(|l| !l.contains("\"record\":\"event\""))
        .collect();
    let dir = out_dir("ops-only");
    let file = dir.join("history.jsonl");
    // Indexes must stay consecutive: renumber the remaining records.
    let mut renumbered = vec![ops_only[0].to_owned()];
    for (i, line) in ops_only[1..].iter().enumerate() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        v["index"] = serde_json::json!(i);
        renumbered.push(v.to_string());
    }
    std::fs::write(&file, renumbered.join("\n") + "\n").unwrap();
    let o = fencesim(&["check", file.to_str().unwrap()]);
    let (stdout, stderr) = text(&o);
    // The operations alone prove the stale write: client-1's write with token 1 was invoked
    // after client-2's with token 2 was acknowledged, and acknowledged too.
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("stale-write-accepted: key \"register\": client-1 wrote with token 1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("judged from client operations alone"),
        "{stdout}"
    );
    for lacked in [
        "not checked: mutual-exclusion-service: no grant events from a lock service",
        "not checked: mutual-exclusion-client: no belief events from clients",
    ] {
        assert!(stdout.contains(lacked), "{stdout}");
    }
    assert!(
        !stdout.contains("not checked: stale-write-accepted"),
        "{stdout}"
    );
    assert!(!stdout.contains("not-linearizable:"), "{stdout}");
}

#[test]
fn export_to_jepsen_edn_and_check_it_back() {
    let source = support::root().join("reports/examples/pause-unfenced/0/history.jsonl");
    let dir = out_dir("export-edn");
    let edn = dir.join("history.edn");
    let o = fencesim(&[
        "export",
        source.to_str().unwrap(),
        "--format",
        "jepsen-edn",
        "--out",
        edn.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    // The export says which checks the EDN cannot support; the stale write is not one of
    // them, since the operations alone show it.
    let (_, stderr) = text(&o);
    assert!(stderr.contains("leaves out"), "{stderr}");
    assert!(
        stderr.contains("  mutual-exclusion-service: no grant events from a lock service"),
        "{stderr}"
    );
    assert!(!stderr.contains("stale-write-accepted"), "{stderr}");
    let written = std::fs::read_to_string(&edn).unwrap();
    let first = written.lines().next().unwrap();
    assert_eq!(
        first,
        "{:index 0, :time 58, :process 0, :type :invoke, :f :acquire, :value [\"lock\" nil], :node \"client-1\"}"
    );
    assert!(
        written.contains("{:index 18, :time 1028000308, :process :nemesis, :type :info, :f :start-pause, :value \"client-1\"}"),
        "{written}"
    );
    let o = fencesim(&[
        "check",
        edn.to_str().unwrap(),
        "--format",
        "jepsen-edn",
        "--json",
    ]);
    let (stdout, stderr) = text(&o);
    // Kleppmann's pause, found again in the Jepsen history alone.
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["verdict"], "invalid");
    assert_eq!(v["violations"][0]["kind"], "stale-write-accepted");
    assert!(v["not_checked"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!(
            "mutual-exclusion-client: no belief events from clients"
        )));
}

#[test]
fn a_bad_jepsen_history_is_located() {
    let dir = out_dir("bad-edn");
    let edn = dir.join("bad.edn");
    std::fs::write(
        &edn,
        "{:type :invoke, :f :write, :value 1, :process 0}\n{:type :invoke, :f :cas, :value 3, :process 1}\n",
    )
    .unwrap();
    let o = fencesim(&["check", edn.to_str().unwrap(), "--format", "jepsen-edn"]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "error: {}: line 2: field :value: expected [from to] or [key [from to]] for a :cas, found an integer 3\n",
            edn.display()
        )
    );
    std::fs::write(
        &edn,
        "{:type :invoke, :f :txn, :value [[:read :x nil]], :process 0}\n",
    )
    .unwrap();
    let o = fencesim(&["check", edn.to_str().unwrap(), "--format", "jepsen-edn"]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.ends_with(
            "line 1: field :f: expected :acquire, :renew, :release, :read, :write, :cas or \
             :delete, found :txn (multi-register transactions are not supported)\n"
        ),
        "{stderr}"
    );
}

/// Write `text` as `name` in a fresh folder for `test`, and return its path as a string.
fn history_file(test: &str, name: &str, text: &str) -> String {
    let file = out_dir(test).join(name);
    std::fs::write(&file, text).unwrap();
    file.to_str().unwrap().to_owned()
}

/// `check --failed-cas`: a failed cas expecting the value the register certainly holds is
/// fine under Knossos's reading (the default: it never happened) and a violation under
/// Porcupine's (it found another value). `--initial-value` gives the register its first value.
#[test]
fn check_reads_a_failed_cas_either_way_and_takes_an_initial_value() {
    let edn = history_file(
        "check-cas",
        "cas.edn",
        "[{:process 0, :type :invoke, :f :cas, :value [0 1]}
          {:process 0, :type :ok, :f :cas, :value [0 1]}
          {:process 1, :type :invoke, :f :cas, :value [1 2]}
          {:process 1, :type :fail, :f :cas, :value [1 2]}
          {:process 2, :type :invoke, :f :read, :value nil}
          {:process 2, :type :ok, :f :read, :value 1}]",
    );
    let check = |extra: &[&str]| {
        let mut args = vec!["check", edn.as_str(), "--format", "jepsen-edn"];
        args.extend_from_slice(extra);
        let o = fencesim(&args);
        let (stdout, stderr) = text(&o);
        (o.status.code(), stdout + &stderr)
    };
    // Without an initial value nothing explains the first cas, which expects 0.
    let (code, out) = check(&[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("not-linearizable: key \"register\": no order of its 2 operations"),
        "{out}"
    );
    assert!(out.contains("never written at the start"), "{out}");
    let (code, out) = check(&["--initial-value", "0"]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = check(&["--initial-value", "0", "--failed-cas", "knossos"]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = check(&[
        "--initial-value",
        "0",
        "--failed-cas",
        "porcupine",
        "--json",
    ]);
    assert_eq!(code, Some(1), "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["verdict"], "invalid");
    assert_eq!(v["violations"][0]["witnesses"], serde_json::json!([2, 3]));
    assert!(v["violations"][0]["explanation"]
        .as_str()
        .unwrap()
        .ends_with("(model: compare-and-set register, initial value \"0\"; a failed cas happened and found another value than it expected (Porcupine's reading))"));
}

/// `check --model mutex`: two acquires ok with no release between them. Without the model the
/// lock operations are not judged as a mutex, and the output says so.
#[test]
fn check_judges_locks_as_a_mutex_only_when_asked() {
    let edn = history_file(
        "check-mutex",
        "mutex.edn",
        "{:process 0, :type :invoke, :f :acquire}
         {:process 0, :type :ok, :f :acquire}
         {:process 1, :type :invoke, :f :acquire}
         {:process 1, :type :ok, :f :acquire}",
    );
    let o = fencesim(&["check", &edn, "--format", "jepsen-edn", "--model", "mutex"]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains(
            "not-linearizable: lock \"lock\": no order of its 2 acquires and releases that \
             respects real time explains the operation invoked at index 2 as a mutex"
        ),
        "{stdout}"
    );
    let o = fencesim(&[
        "check",
        &edn,
        "--format",
        "jepsen-edn",
        "--model",
        "fenced-mutex",
    ]);
    assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));
    // Without the model nothing in it can be judged (no tokens, no service events): unknown.
    let o = fencesim(&["check", &edn, "--format", "jepsen-edn"]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{stdout}{stderr}");
    assert!(
        stdout.contains("  not checked: mutual exclusion from operations: the history does not say its locks have no expiry"),
        "{stdout}"
    );
}

/// Bad values of the new flags are refused before any history is read (exit 2), naming the
/// flag and the values it takes.
#[test]
fn bad_model_flags_exit_2_naming_the_choices() {
    for (flag, value, choices) in [
        (
            "--failed-cas",
            "jepsen",
            "[possible values: knossos, porcupine]",
        ),
        (
            "--model",
            "semaphore",
            "[possible values: mutex, fenced-mutex]",
        ),
    ] {
        let o = fencesim(&["check", "no-such-file.edn", flag, value]);
        let (stdout, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{stdout}{stderr}");
        assert!(
            stderr.contains(&format!("invalid value '{value}' for '{flag}")),
            "{stderr}"
        );
        assert!(stderr.contains(choices), "{stderr}");
    }
    let o = fencesim(&["check", "no-such-file.edn", "--initial-value"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o)
        .1
        .contains("a value is required for '--initial-value <VALUE>'"));
}

/// A JSON Lines history without a header line (a recording of a real system) is read with a
/// default header and judged.
#[test]
fn a_jsonl_history_without_a_header_is_checked() {
    let ops = [
        r#"{"record":"op","index":0,"time_ns":0,"mono_ms":0,"wall_ms":0,"process":0,"node":"c1","type":"invoke","f":"write","key":"k","value":"a"}"#,
        r#"{"record":"op","index":1,"time_ns":1,"mono_ms":0,"wall_ms":0,"process":0,"node":"c1","type":"ok","f":"write","key":"k","value":"a"}"#,
        r#"{"record":"op","index":2,"time_ns":2,"mono_ms":0,"wall_ms":0,"process":1,"node":"c2","type":"invoke","f":"cas","key":"k","expected":"a","value":"b"}"#,
        r#"{"record":"op","index":3,"time_ns":3,"mono_ms":0,"wall_ms":0,"process":1,"node":"c2","type":"ok","f":"cas","key":"k","expected":"a","value":"b"}"#,
        r#"{"record":"op","index":4,"time_ns":4,"mono_ms":0,"wall_ms":0,"process":0,"node":"c1","type":"invoke","f":"read","key":"k"}"#,
        r#"{"record":"op","index":5,"time_ns":5,"mono_ms":0,"wall_ms":0,"process":0,"node":"c1","type":"ok","f":"read","key":"k","value":"b"}"#,
    ];
    let file = history_file("headerless", "history.jsonl", &(ops.join("\n") + "\n"));
    let o = fencesim(&["check", &file]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains(": Valid (0 violations"), "{stdout}");
    // The read sees the cas's value "b"; reading "a" instead is caught.
    let stale = ops.join("\n").replace(
        r#""type":"ok","f":"read","key":"k","value":"b""#,
        r#""type":"ok","f":"read","key":"k","value":"a""#,
    );
    let file = history_file("headerless-stale", "history.jsonl", &stale);
    let o = fencesim(&["check", &file]);
    assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));
}

/// `bench --only checker --peers DIR`: Knossos's folders with their figures, or a plain skip
/// without the folder.
#[test]
fn bench_judges_the_peers_histories_or_says_it_skipped() {
    let o = fencesim(&[
        "bench",
        "--only",
        "checker",
        "--quick",
        "--peers",
        "no/such/dir",
    ]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains(
            "peers: no/such/dir has no cas-register/ folder (Knossos's data/ folder has): skipped"
        ),
        "{stdout}"
    );
    let peers = support::root().join("../shared/peers/knossos-data");
    if !peers.is_dir() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{} is missing",
            peers.display()
        );
        eprintln!("skipped: {} is not there", peers.display());
        return;
    }
    let o = fencesim(&[
        "bench",
        "--only",
        "checker",
        "--quick",
        "--peers",
        peers.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    let row = |folder: &str| {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(folder))
            .unwrap_or_else(|| panic!("no {folder} row: {stdout}"));
        line.split_whitespace()
            .skip(1)
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    };
    // files, agreed, refused
    assert_eq!(row("cas-register/good"), "113 113 0");
    assert_eq!(row("cas-register/bad"), "7 7 0");
    assert_eq!(row("multi-register/good"), "1 0 1");
    assert_eq!(row("mutex/bad"), "1 - 0");
    assert!(
        !stdout.contains("cas-register/good/"),
        "every good file agrees, none is listed: {stdout}"
    );
    assert!(
        stdout.contains("  mutex/bad/etcd.edn: invalid [no verdict asserted]"),
        "{stdout}"
    );
}

/// docs/history.schema.json names every event kind and operation field the writer uses.
#[test]
fn the_history_schema_lists_every_event_kind() {
    let schema = support::json(&support::root().join("docs/history.schema.json"));
    let kinds: Vec<&str> = schema["$defs"]["event"]["properties"]["event"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    let source = ["raft-k08-revoke-unchecked", "redlock-crash-no-fsync"]
        .map(|example| {
            std::fs::read_to_string(
                support::root().join(format!("reports/examples/{example}/0/history.jsonl")),
            )
            .unwrap()
        })
        .join("");
    for line in source
        .lines()
        .filter(|l| !l.contains("\"record\":\"header\""))
    {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let def = &schema["$defs"][v["record"].as_str().unwrap()]["properties"];
        for field in v.as_object().unwrap().keys() {
            assert!(
                def.get(field).is_some(),
                "{field} is not in the schema: {line}"
            );
        }
        if let Some(kind) = v["event"].as_str() {
            assert!(kinds.contains(&kind), "{kind}");
        }
    }
    assert_eq!(kinds.len(), fencesim_history::EventKind::ALL.len());
    for kind in fencesim_history::EventKind::ALL {
        assert!(kinds.contains(&kind.as_str()), "{kind:?}");
    }
}

/// The curated reports replay to the same history. They were written with report schema 2
/// when the lease services began to record the TTL of their grants (issue 35; the Redlock
/// ones earlier, when the Redis nodes began to record their key events, issue 36). Schema 1,
/// when `lock_service` carried every design's knobs, is kept as two fixtures, a single
/// service's (flat) and a Redlock one's (knobs nested under `redlock`): each is upgraded to
/// its own design's knobs. A fresh report replays as well.
#[test]
fn reports_of_schema_1_and_2_replay_identically() {
    let dir = out_dir("replay-schemas");
    let root = support::root().join("reports/examples");
    let mut reports: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path().join("0/report.json"))
        .filter(|p| p.is_file())
        .collect();
    reports.sort();
    assert_eq!(reports.len(), 9);
    let schema = |report: &std::path::PathBuf| support::json(report)["schema_version"].clone();
    for report in &reports {
        assert_eq!(schema(report), 2, "{}", report.display());
    }
    // Schema 1 of a single service: every design's knobs, flat; upgraded to the single
    // service's own, as a fresh report of the same scenario has them.
    let flat = support::root().join("tests/fixtures/report-schema-1-single.json");
    let mut upgraded = support::json(&flat);
    assert_eq!(upgraded["schema_version"], 1);
    assert!(upgraded["scenario"]["lock_service"]["revoke_term_check"].is_boolean());
    fencesim::report::upgrade(&mut upgraded, crate::support::engine().registry()).unwrap();
    // Its own knobs kept as they were (knobs added since take their defaults on parsing),
    // the others' dropped.
    let current = support::json(&root.join("pause-unfenced/0/report.json"));
    let (kept, now) = (
        upgraded["scenario"]["lock_service"].as_object().unwrap(),
        current["scenario"]["lock_service"].as_object().unwrap(),
    );
    assert!(kept.len() >= 5, "{kept:?}");
    for (knob, value) in kept {
        assert_eq!(now.get(knob), Some(value), "{knob}");
    }
    // Schema 1 nested a design's own knobs in an object named after it: upgraded, flat.
    let nested = support::root().join("tests/fixtures/report-schema-1-redlock.json");
    let mut upgraded = support::json(&nested);
    assert_eq!(upgraded["schema_version"], 1);
    assert!(upgraded["scenario"]["lock_service"]["redlock"].is_object());
    fencesim::report::upgrade(&mut upgraded, crate::support::engine().registry()).unwrap();
    let service = &upgraded["scenario"]["lock_service"];
    assert_eq!(service["node_timeout_ms"], 50, "{service}");
    assert_eq!(service["drift_ppm"], 10000, "{service}");
    assert!(
        service.get("redlock").is_none() && service.get("raft").is_none(),
        "{service}"
    );
    // A fresh report is of schema 2, with the design's knobs only.
    let o = fencesim(&[
        "run",
        "redlock-crash-no-fsync",
        "--seed",
        "0",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o).0);
    let fresh = dir.join("redlock-crash-no-fsync/0/report.json");
    let json = support::json(&fresh);
    assert_eq!(json["schema_version"], 2);
    // Built in a checkout, the report names its commit (the engine's build script records it:
    // from the root crate's, it never reached the engine, and every report said null).
    if support::root().join(".git").exists() {
        let commit = json["tool"]["git_commit"].as_str().unwrap_or_default();
        assert_eq!(commit.len(), 12, "{}", json["tool"]);
    }
    let service = &json["scenario"]["lock_service"];
    assert_eq!(service["kind"], "redlock");
    assert_eq!(service["fsync"], "periodic");
    assert_eq!(service["fsync_every_ms"], 1000);
    assert_eq!(service["node_timeout_ms"], 50);
    assert!(service.get("revoke_term_check").is_none(), "{service}");
    reports.push(fresh);
    for report in &reports {
        let o = fencesim(&[
            "replay",
            report.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ]);
        let (stdout, stderr) = text(&o);
        assert!(
            stdout.contains("replay identical: history sha256"),
            "{}: {stdout}{stderr}",
            report.display()
        );
    }
}

/// A report of a schema this fencesim does not know is refused, saying which it reads.
#[test]
fn a_report_of_a_later_schema_is_refused() {
    let dir = out_dir("replay-later");
    let example = support::root().join("reports/examples/pause-unfenced/0/report.json");
    let mut report = support::json(&example);
    report["schema_version"] = 9.into();
    let later = dir.join("later.json");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(&later, serde_json::to_vec(&report).unwrap()).unwrap();
    let o = fencesim(&["replay", later.to_str().unwrap()]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!(
            "error: {}: not a report this fencesim reads: schema_version 9 is not one this \
             fencesim reads (1 to 2)",
            later.display()
        )
    );
}

/// `list --designs` shows what a scenario may name, from the registry: each design with its
/// knobs and client knobs, each resource with its knobs.
#[test]
fn list_designs_shows_every_kind_and_mode_with_its_knobs() {
    let o = fencesim(&["list", "--designs"]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "[lock_service] kind:");
    assert!(
        lines[1].starts_with("  single           one lease-service node"),
        "{stdout}"
    );
    assert!(
        stdout.contains("knobs: replicas, expiry_clock, revoke_term_check, leader_change"),
        "{stdout}"
    );
    assert!(stdout.contains("client knobs: takeover"), "{stdout}");
    assert!(stdout.contains("[resource] mode:"), "{stdout}");
    assert!(
        stdout.contains("  equality         accepts the current lock value"),
        "{stdout}"
    );
}

/// A real system's lock history whose acquires record their TTL is judged as leases from its
/// operations alone: a second node acquiring while the first lease certainly lived, exit 1.
#[test]
fn check_judges_leases_from_operations_with_ttls() {
    let dir = out_dir("check-ttl-leases");
    let file = dir.join("locks.edn");
    std::fs::write(
        &file,
        "[{:process 0, :type :invoke, :f :acquire, :value [\"l\" nil], :ttl-ms 1000, :time 0, :node \"a\"}\n\
          {:process 0, :type :ok, :f :acquire, :value [\"l\" 1], :ttl-ms 1000, :time 10000000, :node \"a\"}\n\
          {:process 1, :type :invoke, :f :acquire, :value [\"l\" nil], :ttl-ms 1000, :time 500000000, :node \"b\"}\n\
          {:process 1, :type :ok, :f :acquire, :value [\"l\" 2], :ttl-ms 1000, :time 520000000, :node \"b\"}]\n",
    )
    .unwrap();
    let o = fencesim(&["check", file.to_str().unwrap(), "--format", "jepsen-edn"]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("mutual-exclusion-client: lock \"l\": a acquired it at index 1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("judged from client operations alone"),
        "{stdout}"
    );
}

/// `bench --only search --quick` runs one row of those `--defect` keeps, and says so.
#[test]
fn quick_search_bench_says_it_ran_one_of_the_matching_rows() {
    let o = fencesim(&[
        "bench", "--only", "search", "--defect", "k0", "--quick", "--jobs", "2",
    ]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.starts_with("search (--quick): the first of 9 matching rows only\n"),
        "{stdout}"
    );
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("| `")).collect();
    assert_eq!(rows.len(), 1, "{stdout}");
    assert!(
        rows[0].starts_with("| `resource mode = unfenced` | K01, K02 |"),
        "{stdout}"
    );
}

/// From issue 38 (item 4): a name in a history cannot drive the reader's terminal. The belief
/// event's node holds an ESC sequence; every line `check` prints shows it escaped, and the
/// chain names the believer by its node, as the violation line does (its `holder` says
/// otherwise, and is not the party the check judged).
#[test]
fn a_control_character_in_a_history_is_printed_escaped_and_one_party_has_one_name() {
    let out = fencesim(&[
        "check",
        "tests/fixtures/histories/belief-node-with-escape.jsonl",
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(!stdout.contains('\u{1b}'), "{stdout:?}");
    let escaped = "a\\u{1b}[2Jb";
    let violation = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("mutual-exclusion-client:"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(violation.contains(escaped), "{violation}");
    let chain = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("chain:"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        chain.contains(&format!("{escaped} believed it held token 1")),
        "{chain}"
    );
    assert!(!chain.contains("x believed"), "{chain}");
}

/// `--initial-value` of an EDN history is read as EDN and compared as its values are, by
/// Clojure's equality (issue 38, item 1): a register that starts as `#{2 1}` is read back as
/// `#{1 2}`; one that starts never written cannot be.
#[test]
fn an_edn_initial_value_is_compared_as_the_historys_values() {
    let file = "tests/fixtures/histories/edn-read-of-the-initial-set.edn";
    let check = |extra: &[&str]| {
        let mut args = vec!["check", file, "--format", "jepsen-edn"];
        args.extend(extra);
        let out = fencesim(&args);
        (out.status.code(), text(&out))
    };
    assert_eq!(check(&["--initial-value", "#{2 1}"]).0, Some(0));
    assert_eq!(check(&[]).0, Some(1));
    // The string "#{2 1}" is another value.
    assert_eq!(check(&["--initial-value", "\"#{2 1}\""]).0, Some(1));
    let (code, (_, stderr)) = check(&["--initial-value", "#{2 1"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--initial-value \"#{2 1\": not EDN"),
        "{stderr}"
    );
}

/// From the adversarial run of issue 38: exporting a history of opaque tokens (Redlock's
/// random values, `token_order: acquisition`) wrote them as EDN tokens, which a check reads
/// as fencing tokens: a valid history became token-not-monotonic. They are left out now, and
/// the export says so.
#[test]
fn an_export_leaves_opaque_tokens_out_and_says_so() {
    let dir = out_dir("export-opaque-tokens");
    let edn = dir.join("h.edn");
    let out = fencesim(&[
        "export",
        "tests/fixtures/histories/opaque-tokens-in-acquisition-order.jsonl",
        "--out",
        edn.to_str().unwrap(),
    ]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("its 4 tokens are left out"), "{stderr}");
    let written = std::fs::read_to_string(&edn).unwrap();
    assert!(
        !written.contains('9') && !written.contains(":token"),
        "{written}"
    );
    let back = fencesim(&["check", edn.to_str().unwrap(), "--format", "jepsen-edn"]);
    assert_ne!(back.status.code(), Some(1), "{:?}", text(&back));
}

/// Issue 38, item 6: a history that outgrows the machine's memory ends the run as a failed
/// simulation (exit 4) with a message, its files written, instead of aborting in the
/// allocator (exit 134). Run under a 700 MB address-space limit (`ulimit -v`), where the
/// history's vector cannot double past about half a million records.
#[test]
fn a_history_that_outgrows_memory_is_a_failed_simulation_not_an_abort() {
    let out = out_dir("history-outgrows-memory");
    let script = format!(
        "ulimit -v 700000 && exec {} run tests/fixtures/regressions/history-outgrows-memory.toml --out {}",
        env!("CARGO_BIN_EXE_fencesim"),
        out.display()
    );
    let run = std::process::Command::new("sh")
        .args(["-c", &script])
        .current_dir(support::root())
        .output()
        .unwrap();
    let (stdout, stderr) = text(&run);
    assert_eq!(run.status.code(), Some(4), "{stdout}{stderr}");
    // How far it got depends on what else the process holds; that it stopped says the rest.
    assert!(
        stdout.contains("simulation failed: out of memory: the history of ")
            && stdout.contains(" records (about "),
        "{stdout}"
    );
    let seed = out.join("history-outgrows-memory/0");
    for file in ["history.jsonl", "report.json", "history.txt", "summary.md"] {
        assert!(seed.join(file).exists(), "{file} missing");
    }
}

/// The reproduce line is a command to paste into a shell: a scenario path with a space, a
/// command substitution, a quote and a newline in it stays one word of one line, and bash runs
/// the line as printed (the same run, nothing else executed). The scenario's parse errors name
/// the same path escaped, on one line.
#[test]
fn a_reproduce_line_runs_in_a_shell_whatever_the_path_holds() {
    let dir = out_dir("reproduce-shell-quoted");
    let folder = dir.join("it's $(touch pwned) `touch pwned`\nverdict: valid");
    std::fs::create_dir_all(&folder).unwrap();
    let file = folder.join("k01.toml");
    std::fs::copy(
        support::root().join("scenarios/incidents/pause-unfenced.toml"),
        &file,
    )
    .unwrap();
    let out = dir.join("out");
    let o = fencesim(&[
        "run",
        file.to_str().unwrap(),
        "--seed",
        "0",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, _) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(!stdout.contains("\nverdict: valid"), "{stdout}");
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("reproduce: fencesim "))
        .unwrap_or_else(|| panic!("no reproduce line in {stdout}"));
    assert!(
        line.starts_with("run $'") && line.ends_with("' --seed 0"),
        "{line}"
    );
    let summary = std::fs::read_to_string(out.join("pause-unfenced/0/summary.md")).unwrap();
    assert!(summary.contains(&format!("fencesim {line}\n")), "{summary}");

    // Bash runs it from another folder, writing into `again/out`.
    let again = dir.join("again");
    std::fs::create_dir_all(&again).unwrap();
    let rerun = support::in_bash(&again, &format!("fencesim {line} --out out"));
    let (rerun_stdout, rerun_stderr) = text(&rerun);
    assert_eq!(rerun.status.code(), Some(1), "{rerun_stdout}{rerun_stderr}");
    assert!(
        rerun_stdout.contains("stale-write-accepted"),
        "{rerun_stdout}"
    );
    assert!(!again.join("pwned").exists() && !support::root().join("pwned").exists());

    // A parse error names the path escaped: the newline in it adds no line.
    std::fs::write(&file, "name = 5\n").unwrap();
    let o = fencesim(&["run", file.to_str().unwrap()]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("`touch pwned`\\nverdict: valid/k01.toml:1:"),
        "{stderr}"
    );
}

/// An export that cannot be written names where it was to go (exit 2).
#[test]
fn an_export_into_a_missing_folder_names_the_path() {
    let source = support::root().join("reports/examples/pause-unfenced/0/history.jsonl");
    let missing = out_dir("export-missing-folder").join("no-such-folder/history.edn");
    let o = fencesim(&[
        "export",
        source.to_str().unwrap(),
        "--format",
        "jepsen-edn",
        "--out",
        missing.to_str().unwrap(),
    ]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "error: cannot write the export into {}: No such file or directory",
            missing.display()
        )),
        "{stderr}"
    );
}

/// A path that begins with `-` is written `./-...` in the reproduce line (as it is, the
/// command would read it as an option), and a replay's report keeps the command of the run it
/// replays: the report it was given is not a scenario.
#[test]
fn a_dash_path_and_a_replay_reproduce_as_they_ran() {
    let dir = out_dir("reproduce-dash-and-replay");
    std::fs::copy(
        support::root().join("scenarios/incidents/pause-unfenced.toml"),
        dir.join("-x.toml"),
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_fencesim");
    let in_dir = |args: &[&str]| {
        std::process::Command::new(bin)
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    let o = in_dir(&["run", "--seed", "0", "--out", "out", "--", "-x.toml"]);
    let (stdout, _) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    let line = "fencesim run ./-x.toml --seed 0";
    assert!(stdout.contains(&format!("reproduce: {line}\n")), "{stdout}");
    let rerun = support::in_bash(&dir, &format!("{line} --out again"));
    assert_eq!(rerun.status.code(), Some(1), "{:?}", text(&rerun));

    let o = in_dir(&[
        "replay",
        "out/pause-unfenced/0/report.json",
        "--out",
        "replayed",
    ]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let report = support::json(&dir.join("replayed/pause-unfenced/0/report.json"));
    assert_eq!(report["reproduce"], "fencesim run ./-x.toml --seed 0");
}

/// `export --out` naming the history being exported is refused (exit 2) and the history kept:
/// the EDN leaves out its service events.
#[test]
fn an_export_over_its_own_history_is_refused() {
    let dir = out_dir("export-over-itself");
    let history = dir.join("history.jsonl");
    std::fs::copy(
        support::root().join("reports/examples/pause-unfenced/0/history.jsonl"),
        &history,
    )
    .unwrap();
    let before = std::fs::read(&history).unwrap();
    let same = dir.join(".").join("history.jsonl");
    let o = fencesim(&[
        "export",
        history.to_str().unwrap(),
        "--format",
        "jepsen-edn",
        "--out",
        same.to_str().unwrap(),
    ]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is the history being exported"), "{stderr}");
    assert_eq!(std::fs::read(&history).unwrap(), before);
}

/// A report whose scenario triggers a fault at a design's own safepoint (`claim-sent`) reads
/// back, resolves the name against its design again, and replays to the same history; and
/// shrink keeps the trigger by name.
#[test]
fn a_report_with_a_design_safepoint_trigger_replays_and_shrinks() {
    let dir = out_dir("replay-design-safepoint");
    let name = "lease-record-claim-pause-claimant-deadline";
    let o = fencesim(&["run", name, "--seed", "0", "--out", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o).0);
    let report = dir.join(format!("{name}/0/report.json"));
    let o = fencesim(&[
        "replay",
        report.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert!(
        stdout.contains("replay identical: history sha256"),
        "{stdout}{stderr}"
    );
    let shrunk = dir.join("shrunk");
    let o = fencesim(&[
        "shrink",
        report.to_str().unwrap(),
        "--out",
        shrunk.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    let minimal = std::fs::read_to_string(shrunk.join(format!("{name}-seed-0-min.toml")))
        .unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    assert!(minimal.contains("after = \"claim-sent\""), "{minimal}");
}
