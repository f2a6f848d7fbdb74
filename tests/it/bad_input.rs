//! Bad input: one clear line naming file, line:column and field, exit code 2, never a panic.

use crate::support;

use crate::support::{fencesim, out_dir, text};

const GOOD: &str = r#"name = "bad"
duration_ms = 10000
[lock_service]
max_ttl_ms = 20000
[[clients]]
name = "client-1"
ttl_ms = 5000
[[faults]]
kind = "pause"
node = "client-1"
before = "write"
duration_ms = 1000
[expect]
verdict = "valid"
"#;

/// Write `GOOD` with `from` replaced by `to`, run it, and return (exit code, stderr, path).
fn run_variant(test: &str, from: &str, to: &str) -> (Option<i32>, String, String) {
    run_edited(test, &[(from, to)])
}

/// Write `GOOD` with each `(from, to)` replacement made once, run it, and return (exit code,
/// stderr, path).
fn run_edited(test: &str, edits: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut toml = GOOD.to_owned();
    for (from, to) in edits {
        assert!(toml.contains(from), "{from}");
        toml = toml.replacen(from, to, 1);
    }
    let dir = out_dir(test);
    let file = dir.join("bad.toml");
    std::fs::write(&file, toml).unwrap();
    let o = fencesim(&[
        "run",
        file.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    let (_, stderr) = text(&o);
    (o.status.code(), stderr, file.display().to_string())
}

fn assert_located(test: &str, from: &str, to: &str, location: &str, field: &str, says: &str) {
    let (code, stderr, file) = run_variant(test, from, to);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    let prefix = format!("error: {file}:{location}: field `{field}`: ");
    assert!(
        stderr.starts_with(&prefix),
        "expected prefix {prefix:?} in {stderr:?}"
    );
    assert!(stderr.contains(says), "expected {says:?} in {stderr:?}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn the_unmodified_file_is_accepted() {
    let (code, stderr, _) = run_variant("bad-none", "name", "name");
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn a_missing_file() {
    let o = fencesim(&["run", "scenarios/does-not-exist.toml"]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr.starts_with("error: scenarios/does-not-exist.toml: cannot read scenario: "),
        "{stderr}"
    );
    assert!(
        stderr.contains("`fencesim list` shows them all"),
        "{stderr}"
    );
}

/// A mistyped bundled name says which one was probably meant and where the list is, not only
/// "No such file or directory".
#[test]
fn a_mistyped_bundled_name_points_at_the_list() {
    let o = fencesim(&["run", "pause-fencd"]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr,
        "error: pause-fencd: cannot read scenario: no such file, and no bundled scenario of that \
         name (did you mean pause-fenced? `fencesim list` shows them all)\n"
    );
}

/// The linearizability budgets refuse 0 (a budget of no steps can only ever say unknown).
#[test]
fn a_zero_linearizability_budget_is_refused() {
    let history = "reports/examples/pause-unfenced/0/history.jsonl";
    for flag in ["--linearizability-steps", "--linearizability-total-steps"] {
        let o = fencesim(&["check", history, flag, "0"]);
        let (_, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{flag}: {stderr}");
        assert!(stderr.contains("0 is not in 1.."), "{flag}: {stderr}");
    }
}

/// A failed seed's report is the whole story: no backtrace and no panic message on stderr,
/// even with RUST_BACKTRACE set (it used to print a page per seed).
#[test]
fn a_failed_seed_prints_no_backtrace_even_with_rust_backtrace_set() {
    let dir = out_dir("sim-failed-quiet");
    let file = support::history_limit_scenario(&dir);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args([
            "explore",
            file.to_str().unwrap(),
            "--seeds",
            "0..3",
            "--keep-going",
            "--quiet",
        ])
        .args(["--out", dir.to_str().unwrap()])
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(4), "{stdout}{stderr}");
    assert!(!stderr.contains("stack backtrace"), "{stderr}");
    assert!(!stderr.contains("panicked at"), "{stderr}");
    // madsim's own line for a task that panics: fencesim catches the panic first.
    assert!(!stderr.contains("context: node="), "{stderr}");
    assert_eq!(
        stdout
            .matches("simulation failed: history limit exceeded")
            .count(),
        3,
        "{stdout}"
    );
}

#[test]
fn an_unknown_field() {
    assert_located(
        "bad-unknown",
        "ttl_ms = 5000",
        "ttl = 5000",
        "7:1",
        "clients.ttl",
        "unknown field `ttl` (did you mean `ttl_ms`?)",
    );
}

#[test]
fn a_missing_field_names_its_own_table() {
    // Reported at the table's header: the table is the one that lacks it, not the one above.
    assert_located(
        "bad-missing",
        "ttl_ms = 5000\n",
        "",
        "5:1",
        "clients.ttl_ms",
        "missing field `ttl_ms`",
    );
}

#[test]
fn a_wrong_type() {
    assert_located(
        "bad-type",
        "duration_ms = 10000",
        "duration_ms = \"ten\"",
        "2:15",
        "duration_ms",
        "expected an integer, found string \"ten\"",
    );
}

#[test]
fn an_unknown_node_in_a_fault() {
    assert_located(
        "bad-node",
        "node = \"client-1\"",
        "node = \"client-9\"",
        "10:8",
        "faults.node",
        "unknown node \"client-9\"; the nodes are lease-service, resource, client-1",
    );
}

#[test]
fn a_zero_duration() {
    assert_located(
        "bad-zero",
        "duration_ms = 1000\n",
        "duration_ms = 0\n",
        "12:15",
        "faults.duration_ms",
        "expected a positive integer of at most 1000000000000, found 0",
    );
}

#[test]
fn a_negative_duration() {
    assert_located(
        "bad-negative",
        "duration_ms = 10000",
        "duration_ms = -5",
        "2:15",
        "duration_ms",
        "expected a positive integer of at most 1000000000000, found -5",
    );
}

#[test]
fn a_ttl_above_the_maximum() {
    assert_located(
        "bad-ttl",
        "ttl_ms = 5000",
        "ttl_ms = 25000",
        "7:10",
        "clients.ttl_ms",
        "TTL 25000 ms is above lock_service.max_ttl_ms = 20000 ms",
    );
}

#[test]
fn an_unknown_event_name() {
    assert_located(
        "bad-event",
        "before = \"write\"",
        "before = \"wrote\"",
        "11:10",
        "faults.before",
        "node \"client-1\" never reaches before \"wrote\"; its safepoints before events are \
         acquire, read, renew, write, release",
    );
}

#[test]
fn two_triggers_at_once() {
    assert_located(
        "bad-trigger",
        "before = \"write\"",
        "before = \"write\"\nat_ms = 5",
        "8:1",
        "faults",
        "exactly one of `at_ms`, `after` or `before`",
    );
}

#[test]
fn not_a_toml_file() {
    assert_located(
        "bad-syntax",
        "[expect]",
        "[expect",
        "13:8",
        "(document)",
        "",
    );
}

#[test]
fn a_bad_history_file_for_check() {
    let dir = out_dir("bad-history");
    let file = dir.join("h.jsonl");
    std::fs::write(&file, "{\"record\":\"header\",\"format_version\":1,\"scenario\":\"s\",\"seed\":0,\"tool_version\":\"x\"}\nnot json\n").unwrap();
    let o = fencesim(&["check", file.to_str().unwrap()]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr.starts_with(&format!("error: {}: line 2: ", file.display())),
        "{stderr}"
    );
}

#[test]
fn an_unknown_seed_flag_value_is_a_usage_error() {
    let o = fencesim(&[
        "run",
        "scenarios/incidents/pause-fenced.toml",
        "--seed",
        "-1",
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn an_event_the_node_never_reaches() {
    assert_located(
        "bad-never",
        "before = \"write\"",
        "before = \"grant\"",
        "11:10",
        "faults.before",
        "node \"client-1\" never reaches before \"grant\"",
    );
}

#[test]
fn a_hold_that_could_never_match() {
    let hold = "kind = \"hold\"\nfrom = \"client-1\"\nmessage = \"write-reply\"\n";
    let (code, stderr, file) = run_variant(
        "bad-hold",
        "kind = \"pause\"\nnode = \"client-1\"\nbefore = \"write\"\n",
        hold,
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.starts_with(&format!("error: {file}:11:11: field `faults.message`: node \"client-1\" never sends \"write-reply\" messages")), "{stderr}");
}

#[test]
fn a_range_with_three_numbers() {
    assert_located(
        "bad-range",
        "ttl_ms = 5000",
        "ttl_ms = 5000\nbackoff_ms = [1, 2, 3]",
        "8:14",
        "clients.backoff_ms",
        "expected [min, max] with 0 <= min <= max, found [1, 2, 3]",
    );
}

#[test]
fn no_resource_keys() {
    assert_located(
        "bad-keys",
        "[lock_service]",
        "[resource]\nkeys = []\n[lock_service]",
        "4:8",
        "resource.keys",
        "expected at least one key",
    );
}

#[test]
fn an_unknown_violation_name() {
    let (code, stderr, file) = run_variant(
        "bad-expect",
        "verdict = \"valid\"",
        "verdict = \"invalid\"\nviolations = [\"stale-read\"]",
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!("error: {file}:15:15: ")) && stderr.contains("stale-read"),
        "{stderr}"
    );
}

#[test]
fn a_time_too_large_to_simulate() {
    assert_located(
        "bad-huge",
        "duration_ms = 10000",
        "duration_ms = 18446744073710",
        "2:15",
        "duration_ms",
        "at most 1000000000000, found 18446744073710",
    );
}

#[test]
fn too_many_clients() {
    assert_located(
        "bad-count",
        "name = \"client-1\"\nttl_ms",
        "count = 100000\nttl_ms",
        "6:9",
        "clients.count",
        "expected at most 1000 clients in all, found 100000",
    );
}

#[test]
fn one_key_written_under_two_locks() {
    let two = "name = \"client-1\"\nttl_ms = 5000\n[[clients]]\nname = \"client-2\"\nlock = \"other\"\nttl_ms = 5000\n";
    let (code, stderr, file) =
        run_variant("bad-two-locks", "name = \"client-1\"\nttl_ms = 5000\n", two);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.starts_with(&format!("error: {file}:11:10: field `clients.key`: key \"register\" is written under lock \"lock\"")), "{stderr}");
}

#[test]
fn events_counted_from_a_time_with_a_time_trigger() {
    assert_located(
        "bad-count-from",
        "before = \"write\"",
        "at_ms = 5\ncount_from_ms = 100",
        "12:17",
        "faults.count_from_ms",
        "it does not go with `at_ms`",
    );
    assert_located(
        "bad-count-from-late",
        "before = \"write\"",
        "before = \"write\"\ncount_from_ms = 10000",
        "12:17",
        "faults.count_from_ms",
        "the run ends at duration_ms = 10000",
    );
}

#[test]
fn a_fault_after_the_run_ends() {
    assert_located(
        "bad-late",
        "before = \"write\"",
        "at_ms = 10000",
        "11:9",
        "faults.at_ms",
        "the run ends at duration_ms = 10000",
    );
}

#[test]
fn a_client_name_with_a_newline() {
    assert_located(
        "bad-newline",
        "name = \"client-1\"",
        "name = \"client\\nFAKE\"",
        "6:8",
        "clients.name",
        "expected 1 to 64 letters",
    );
}

#[test]
fn the_largest_seed_runs() {
    let dir = out_dir("max-seed");
    let o = fencesim(&[
        "run",
        "pause-unfenced",
        "--seed",
        "18446744073709551615",
        "--expect",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let (stdout, _) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("pause-unfenced seed 18446744073709551615: INVALID"),
        "{stdout}"
    );
    assert!(dir
        .join("pause-unfenced/18446744073709551615/report.json")
        .is_file());
}

#[test]
fn a_raft_cluster_of_four() {
    assert_located(
        "bad-replicas",
        "[lock_service]",
        "[lock_service]\nkind = \"raft\"\nreplicas = 4",
        "5:12",
        "lock_service.replicas",
        "expected 3 or 5 replicas, found 4",
    );
}

#[test]
fn the_leader_of_a_single_service() {
    assert_located(
        "bad-leader",
        "node = \"client-1\"",
        "node = \"leader\"",
        "10:8",
        "faults.node",
        "unknown node \"leader\"; the nodes are lease-service, resource, client-1 (\"leader\" names the leading node of a raft, primary-backup or etcd service)",
    );
}

#[test]
fn a_random_nemesis_with_no_targets() {
    let nemesis = "[nemesis]\nkinds = [\"pause\"]\ntargets = []\nheal_at_ms = 100\nrecovery_periods = 1\n[expect]";
    let (code, stderr, file) = run_variant("bad-targets", "[expect]", nemesis);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!("error: {file}:"))
            && stderr.contains("field `nemesis.targets`: expected at least one node"),
        "{stderr}"
    );
}

#[test]
fn a_knob_the_chosen_design_would_ignore() {
    assert_located(
        "bad-knob",
        "max_ttl_ms = 20000",
        "max_ttl_ms = 20000\nrevoke_term_check = false",
        "5:21",
        "lock_service.revoke_term_check",
        "only a kind = \"raft\" lock service uses `revoke_term_check`",
    );
}

#[test]
fn a_redlock_of_four_nodes() {
    assert_located(
        "bad-redlock-nodes",
        "[lock_service]",
        "[lock_service]\nkind = \"redlock\"\nreplicas = 4",
        "5:12",
        "lock_service.replicas",
        "expected 1, 3, 5 or 7 Redlock nodes, found 4",
    );
}

#[test]
fn a_redlock_knob_on_a_single_service() {
    assert_located(
        "bad-recheck",
        "max_ttl_ms = 20000",
        "max_ttl_ms = 20000\nrecheck_elapsed = false",
        "5:19",
        "lock_service.recheck_elapsed",
        "only a kind = \"redlock\" lock service uses `recheck_elapsed`",
    );
}

#[test]
fn fsync_on_a_raft_service() {
    assert_located(
        "bad-fsync-raft",
        "[lock_service]",
        "[lock_service]\nkind = \"raft\"\nfsync = \"never\"",
        "5:9",
        "lock_service.fsync",
        "only a kind = \"single\" or \"redlock\" lock service uses `fsync`",
    );
}

#[test]
fn a_zero_redlock_node_timeout() {
    assert_located(
        "bad-node-timeout",
        "[lock_service]",
        "[lock_service]\nkind = \"redlock\"\nnode_timeout_ms = 0",
        "5:19",
        "lock_service.node_timeout_ms",
        "expected",
    );
}

#[test]
fn an_unknown_token_source() {
    assert_located(
        "bad-token-source",
        "[lock_service]",
        "[lock_service]\nkind = \"redlock\"\ntoken_source = \"sequence\"",
        "5:16",
        "lock_service.token_source",
        "unknown variant `sequence`",
    );
}

#[test]
fn a_primary_backup_of_three() {
    assert_located(
        "bad-pb-replicas",
        "[lock_service]",
        "[lock_service]\nkind = \"primary-backup\"\nreplicas = 3",
        "5:12",
        "lock_service.replicas",
        "a primary-backup service has 2 nodes, found 3",
    );
}

#[test]
fn a_lease_record_knob_on_primary_backup() {
    assert_located(
        "bad-judged-by",
        "[lock_service]",
        "[lock_service]\nkind = \"primary-backup\"\nexpiry_judged_by = \"own-duration\"",
        "5:20",
        "lock_service.expiry_judged_by",
        "only a kind = \"lease-record\" lock service uses `expiry_judged_by`",
    );
}

#[test]
fn a_replicate_hold_on_the_single_service() {
    let hold = "[[faults]]\nkind = \"hold\"\nfrom = \"lease-service\"\nmessage = \"replicate\"\nduration_ms = 10\n[expect]";
    let (code, stderr, file) = run_variant("bad-replicate-hold", "[expect]", hold);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!("error: {file}:"))
            && stderr.contains("field `faults.message`")
            && stderr.contains("never sends \"replicate\" messages"),
        "{stderr}"
    );
}

#[test]
fn a_client_named_like_a_node_of_its_design() {
    let (code, stderr, file) = run_variant(
        "bad-service-name",
        "name = \"client-1\"",
        "name = \"lease-service\"",
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!("error: {file}:6:"))
            && stderr.contains("clients.name")
            && stderr.contains("\"lease-service\" is reserved or already taken"),
        "{stderr}"
    );
    // Another design's node name is a name like any other: the harness knows only the
    // scenario's own design's nodes.
    let (code, stderr, _) = run_edited(
        "other-design-name",
        &[
            ("name = \"client-1\"", "name = \"redis-1\""),
            ("node = \"client-1\"", "node = \"redis-1\""),
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn a_restore_of_the_lease_record_store() {
    let restore = "[lock_service]\nkind = \"lease-record\"";
    let fault = "[[faults]]\nkind = \"restore\"\nnode = \"lease-service\"\nat_ms = 10\nsnapshot_at_ms = 0\n[expect]";
    let (code, stderr, _) = run_edited(
        "bad-record-restore",
        &[("[lock_service]", restore), ("[expect]", fault)],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("field `faults.node`") && stderr.contains("keeps backups to restore"),
        "{stderr}"
    );
}

#[test]
fn an_expire_trigger_on_a_redis_node() {
    let fault = "[[faults]]\nkind = \"pause\"\nnode = \"redis-1\"\nafter = \"expire\"\nduration_ms = 10\n[expect]";
    let (code, stderr, _) = run_edited(
        "bad-redis-expire",
        &[
            ("[lock_service]", "[lock_service]\nkind = \"redlock\""),
            ("[expect]", fault),
        ],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("never reaches after \"expire\""),
        "{stderr}"
    );
}

#[test]
fn a_failover_quicker_than_the_shipments() {
    assert_located(
        "bad-failover",
        "[lock_service]",
        "[lock_service]\nkind = \"primary-backup\"\nreplication_lag_ms = 1000\nfailover_after_ms = 500",
        "6:21",
        "lock_service.failover_after_ms",
        "must be greater than replication_lag_ms (1000 ms)",
    );
}

#[test]
fn a_drift_allowance_of_the_whole_ttl() {
    assert_located(
        "bad-drift",
        "[lock_service]",
        "[lock_service]\nkind = \"redlock\"\ndrift_ppm = 1000000",
        "5:13",
        "lock_service.drift_ppm",
        "expected less than 1000000 ppm",
    );
}

#[test]
fn a_hold_all_of_raft_messages_without_raft() {
    let fault = "[[faults]]\nkind = \"hold-all\"\nmessage = \"raft\"\nat_ms = 10\nduration_ms = 10\n[expect]";
    let (code, stderr, _) = run_variant("bad-hold-all", "[expect]", fault);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("field `faults.message`")
            && stderr.contains("no node of this lock service sends \"raft\" messages"),
        "{stderr}"
    );
}

#[test]
fn the_release_defect_belongs_to_the_single_service() {
    assert_located(
        "bad-release-raft",
        "[lock_service]",
        "[lock_service]\nkind = \"raft\"\nrelease = \"unconditional\"",
        "5:11",
        "lock_service.release",
        "only a kind = \"single\" lock service uses `release`",
    );
}

#[test]
fn a_client_defect_on_a_redlock_client() {
    let (code, stderr, file) = run_edited(
        "bad-deadline-redlock",
        &[
            ("[lock_service]", "[lock_service]\nkind = \"redlock\""),
            (
                "ttl_ms = 5000\n",
                "ttl_ms = 5000\ndeadline_from = \"notice\"\n",
            ),
        ],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!("error: {file}:9:17: field `clients.deadline_from`: only clients of a kind = \"single\", \"raft\", \"primary-backup\" or \"etcd\" lock service use `deadline_from`")
    );
}

#[test]
fn an_unknown_defect_value_lists_the_known_ones() {
    let (code, stderr, file) = run_variant(
        "bad-renew-after-failure",
        "ttl_ms = 5000\n",
        "ttl_ms = 5000\nrenew_after_failure = \"give-up\"\n",
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!("error: {file}:8:"))
            && stderr.contains("renew_after_failure")
            && stderr.contains("expected `retry` or `stop`"),
        "{stderr}"
    );
}

#[test]
fn an_apply_delay_needs_a_check_then_apply_resource() {
    assert_located(
        "bad-apply-delay",
        "[[clients]]",
        "[resource]\napply_delay_ms = 100\n[[clients]]",
        "6:18",
        "resource.apply_delay_ms",
        "only a resource with check = \"check-then-apply\" has a delay between check and apply",
    );
}

#[test]
fn a_keepalive_stall_is_for_clients_only() {
    assert_located(
        "bad-stall",
        "[expect]",
        "[[faults]]\nkind = \"stall-renewals\"\nnode = \"lease-service\"\nat_ms = 10\nduration_ms = 10\n[expect]",
        "15:8",
        "faults.node",
        "only a client renews: \"lease-service\" is not a client",
    );
}

#[test]
fn the_wait_queue_belongs_to_the_single_service() {
    assert_located(
        "bad-acquire-raft",
        "[lock_service]",
        "[lock_service]\nkind = \"raft\"\nacquire = \"queue\"",
        "5:11",
        "lock_service.acquire",
        "only a kind = \"single\" lock service uses `acquire`",
    );
}

#[test]
fn a_defect_knob_that_would_do_nothing_is_refused() {
    assert_located(
        "bad-stop-without-renew",
        "ttl_ms = 5000\n",
        "ttl_ms = 5000\nrenew_after_failure = \"stop\"\n",
        "8:23",
        "clients.renew_after_failure",
        "a client without renew_ms never renews, so it has no keepalive to stop",
    );
    assert_located(
        "bad-notice-without-check",
        "ttl_ms = 5000\n",
        "ttl_ms = 5000\nvalidity_check = false\ndeadline_from = \"notice\"\n",
        "9:17",
        "clients.deadline_from",
        "a client with validity_check = false has no deadline of its own to count",
    );
}

#[test]
fn only_lease_record_clients_claim_records() {
    assert_located(
        "bad-takeover",
        "ttl_ms = 5000\n",
        "ttl_ms = 5000\ntakeover = \"unconditional\"\n",
        "8:12",
        "clients.takeover",
        "only clients of a kind = \"lease-record\" lock service use `takeover`",
    );
}

#[test]
fn a_deregistration_needs_a_client_and_the_single_service() {
    assert_located(
        "bad-deregister-node",
        "[expect]",
        "[[faults]]\nkind = \"deregister\"\nnode = \"resource\"\nat_ms = 10\n[expect]",
        "15:8",
        "faults.node",
        "only a client is deregistered: \"resource\" is not a client",
    );
    assert_located(
        "bad-reaper-raft",
        "[lock_service]",
        "[lock_service]\nkind = \"raft\"\nreaper = \"ignores-leases\"",
        "5:10",
        "lock_service.reaper",
        "only a kind = \"single\" lock service uses `reaper`",
    );
}

#[test]
fn session_defects_belong_to_plain_clients() {
    for (knob, value, column) in [
        ("reclaim", "by-name", "11"),
        ("on_lost_lease", "keep-role", "17"),
    ] {
        let (code, stderr, file) = run_edited(
            &format!("bad-{knob}-redlock"),
            &[
                ("[lock_service]", "[lock_service]\nkind = \"redlock\""),
                (
                    "ttl_ms = 5000\n",
                    &format!("ttl_ms = 5000\n{knob} = \"{value}\"\n"),
                ),
            ],
        );
        assert_eq!(code, Some(2), "{stderr}");
        assert_eq!(
            stderr.trim_end(),
            format!("error: {file}:9:{column}: field `clients.{knob}`: only clients of a kind = \"single\", \"raft\", \"primary-backup\" or \"etcd\" lock service use `{knob}`")
        );
    }
}

#[test]
fn keeping_a_role_needs_renewals_to_lose_it_by() {
    assert_located(
        "bad-keep-role-without-renew",
        "ttl_ms = 5000\n",
        "ttl_ms = 5000\non_lost_lease = \"keep-role\"\n",
        "8:17",
        "clients.on_lost_lease",
        "a client without renew_ms is never told its lease is lost by a renewal",
    );
}

#[test]
fn a_seed_range_past_the_last_seed_is_refused_and_the_last_seed_can_be_swept() {
    let out = out_dir("seeds-past-the-end");
    let explore = |range: &str| {
        fencesim(&[
            "explore",
            "pause-fenced",
            "--seeds",
            range,
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let o = explore("18446744073709551615..18446744073709551617");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o)
            .1
            .contains("ends past the last seed: B is at most 18446744073709551616"),
        "{}",
        text(&o).1
    );
    // The last seed, u64::MAX, is the range ending at 2^64.
    let o = explore("18446744073709551615..18446744073709551616");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).1);
    assert!(
        text(&o)
            .0
            .contains("1 seed run of 18446744073709551615..18446744073709551616"),
        "{}",
        text(&o).0
    );
}

/// Hostile Jepsen EDN that crashed, aborted or hung the tool when it read EDN with the
/// edn-format crate (a `\u` escape before a multi-byte character, a decimal whose exponent
/// asked for 446744073709551615 bytes, 10,000 open brackets): each is now one located error
/// line and exit 2.
#[test]
fn hostile_jepsen_edn_is_one_located_error() {
    let dir = out_dir("hostile-edn");
    let deep = "[".repeat(10_000);
    let cases: [(&str, &str, &str); 4] = [
        (
            "char-boundary",
            "dnu\\u\\lwƖƖw",
            "line 1: not EDN: column 6: bad character",
        ),
        (
            "huge-exponent",
            "2000000000000000000000000000000000000018e446744073709551615M",
            "line 1: not EDN: column 1: bad number",
        ),
        (
            "huge-exponent-long",
            &format!("{}e446744073709551615M", "7".repeat(180)),
            "line 1: not EDN: column 1: bad number",
        ),
        (
            "deep",
            &deep,
            "line 1: not EDN: column 257: nested deeper than 256 levels",
        ),
    ];
    for (name, body, says) in cases {
        let file = dir.join(format!("{name}.edn"));
        std::fs::write(&file, body).unwrap();
        let o = fencesim(&["check", file.to_str().unwrap(), "--format", "jepsen-edn"]);
        let (_, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.starts_with(&format!("error: {}: {says}", file.display())),
            "{name}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        assert!(
            stderr.len() < 300,
            "{name}: an error line of {} bytes",
            stderr.len()
        );
    }
}

/// A foreign value in an error is named by its type and cut short, never written out in full
/// (a decimal `1E99999999M` once made a 100 MB error line).
#[test]
fn a_foreign_value_in_an_edn_error_is_cut_short() {
    let dir = out_dir("foreign-edn");
    let file = dir.join("h.edn");
    let long = "x".repeat(100_000);
    std::fs::write(
        &file,
        format!("{{:type :invoke, :f :write, :process 1E99999999M}}\n{{:type :ok, :f :{long}, :process 0}}\n"),
    )
    .unwrap();
    let o = fencesim(&["check", file.to_str().unwrap(), "--format", "jepsen-edn"]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "error: {}: line 1: field :process: expected a process number or :nemesis, found a decimal 1E99999999M\n",
            file.display()
        )
    );
    std::fs::write(&file, format!("{{:type :ok, :f :{long}, :process 0}}\n")).unwrap();
    let o = fencesim(&["check", file.to_str().unwrap(), "--format", "jepsen-edn"]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.len() < 300,
        "an error line of {} bytes",
        stderr.len()
    );
    assert!(stderr.contains("found :xxxx"), "{stderr}");
}

/// Error lines are capped however much of the input a parser's message quotes.
#[test]
fn error_lines_are_capped() {
    let dir = out_dir("capped-errors");
    let long = "y".repeat(50_000);
    let history = dir.join("h.jsonl");
    std::fs::write(
        &history,
        format!("{{\"record\":\"header\",\"format_version\":1,\"scenario\":\"s\",\"seed\":\"{long}\",\"tool_version\":\"x\"}}\n"),
    )
    .unwrap();
    let scenario = dir.join("s.toml");
    std::fs::write(
        &scenario,
        format!("name = \"s\"\nduration_ms = \"{long}\"\n"),
    )
    .unwrap();
    for args in [
        vec!["check", history.to_str().unwrap()],
        vec!["run", scenario.to_str().unwrap()],
    ] {
        let o = fencesim(&args);
        let (_, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.len() < 600,
            "{args:?}: an error line of {} bytes",
            stderr.len()
        );
        // The history reader quotes at most 40 characters of a value, as the EDN reader does;
        // the scenario's error is cut by the cap.
        if args[0] == "check" {
            assert!(
                stderr.contains(&format!(
                    "field `seed`: expected a non-negative integer (the root seed), found a \
                     string \"{}\"…",
                    "y".repeat(40)
                )),
                "{stderr}"
            );
        } else {
            assert!(stderr.contains("more characters)"), "{args:?}: {stderr}");
        }
    }
}

/// A random nemesis whose plan would be millions of faults is refused, located, before it is
/// drawn (a run of 10^12 ms with a heal just before its end took all of a machine's memory).
#[test]
fn a_random_nemesis_plan_too_large_to_draw_is_refused() {
    let dir = out_dir("huge-plan");
    let source =
        std::fs::read_to_string(support::root().join("scenarios/random-nemesis-fenced.toml"))
            .unwrap();
    let mut lines: Vec<String> = source.lines().map(str::to_owned).collect();
    let run = lines
        .iter()
        .position(|l| l.starts_with("duration_ms = "))
        .unwrap();
    lines[run] = "duration_ms = 1000000000000".into();
    let heal = lines
        .iter()
        .position(|l| l.starts_with("heal_at_ms = "))
        .unwrap();
    lines[heal] = "heal_at_ms = 999999000000".into();
    let file = dir.join("huge.toml");
    std::fs::write(&file, lines.join("\n")).unwrap();
    let o = fencesim(&["run", file.to_str().unwrap()]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "error: {}:{}:14: field `nemesis.heal_at_ms`: the random nemesis would draw up to ",
            file.display(),
            heal + 1
        )),
        "{stderr}"
    );
    assert!(stderr.contains("at most 100000"), "{stderr}");
}

/// A token that is not a non-negative integer is an error naming the field, not a silently
/// missing token (two acquires of the token "abc" were judged valid with no token at all).
#[test]
fn a_jepsen_token_of_the_wrong_type_is_located() {
    let dir = out_dir("edn-token-type");
    let cases = [
        (
            "{:process 0, :type :ok, :f :acquire, :value [\"lock\" \"abc\"]}",
            "field :value's token: expected a non-negative integer, found a string \"abc\"",
        ),
        (
            "{:process 0, :type :ok, :f :write, :value [\"k\" 1], :token 5.0}",
            "field :token: expected a non-negative integer, found a float 5.0",
        ),
        (
            "{:process 0, :type :ok, :f :write, :value 1, :time -3}",
            "field :time: expected a non-negative integer, found an integer -3",
        ),
    ];
    for (i, (body, says)) in cases.into_iter().enumerate() {
        let file = dir.join(format!("{i}.edn"));
        std::fs::write(&file, format!("{body}\n")).unwrap();
        let o = fencesim(&["check", file.to_str().unwrap(), "--format", "jepsen-edn"]);
        let (_, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{body}: {stderr}");
        assert_eq!(
            stderr,
            format!("error: {}: line 1: {says}\n", file.display())
        );
    }
    // An .edn file checked as JSON Lines says which flag was meant.
    let o = fencesim(&["check", dir.join("0.edn").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o)
            .1
            .contains("(an .edn file: add --format jepsen-edn)"),
        "{}",
        text(&o).1
    );
}

/// Control characters quoted from the input are escaped: an error is one line and writes no
/// escape sequence to the terminal.
#[test]
fn control_characters_in_an_error_are_escaped() {
    let dir = out_dir("control-chars");
    let file = dir.join("h.jsonl");
    std::fs::write(
        &file,
        "{\"record\":\"header\",\"format_version\":1,\"scenario\":\"s\",\"seed\":0,\"tool_version\":\"x\"}\n{\"record\":\"op\",\"index\":0,\"time_ns\":0,\"mono_ms\":0,\"wall_ms\":0,\"process\":0,\"node\":\"c\",\"type\":\"line1\\nerror: forged \\u001b[31m\",\"f\":\"write\"}\n",
    )
    .unwrap();
    let o = fencesim(&["check", file.to_str().unwrap()]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    assert!(stderr.contains("line1\\nerror: forged"), "{stderr}");
}

/// A history that is not text says so, not that it cannot be opened.
#[test]
fn a_binary_history_is_named_as_not_text() {
    let dir = out_dir("binary-history");
    let file = dir.join("h.jsonl");
    std::fs::write(&file, [0xff, 0xfe, 0x00]).unwrap();
    let o = fencesim(&["check", file.to_str().unwrap()]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr,
        format!(
            "error: {}: cannot read history: not UTF-8 text\n",
            file.display()
        )
    );
}

/// `run --expect` refuses a range larger than a sweep may be, as `explore` does, instead of
/// allocating it (a range of 10^14 seeds aborted on allocation).
#[test]
fn run_expect_refuses_a_range_too_large_to_sweep() {
    let dir = out_dir("huge-range");
    let source =
        std::fs::read_to_string(support::root().join("scenarios/incidents/pause-fenced.toml"))
            .unwrap();
    let file = dir.join("wide.toml");
    let wide = source.replace("seeds = \"0..10\"", "seeds = \"0..100000000000000\"");
    assert_ne!(wide, source);
    std::fs::write(&file, wide).unwrap();
    let o = fencesim(&["run", file.to_str().unwrap(), "--expect"]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("are 100000000000000 seeds; run --expect takes at most 100000000"),
        "{stderr}"
    );
}

/// From the new-user trial: an unknown field names its table and the field meant.
#[test]
fn an_unknown_field_names_its_table_and_the_field_meant() {
    assert_located(
        "bad-unknown-suggested",
        "ttl_ms = 5000",
        "ttl_ms = 5000\nrenw_ms = 1000",
        "8:1",
        "clients.renw_ms",
        "unknown field `renw_ms` (did you mean `renew_ms`?)",
    );
}

/// From the new-user trial: a bad value on a continuation line of a multi-line array names the
/// array's key, not "(document)".
#[test]
fn a_bad_value_inside_a_multi_line_array_names_the_array() {
    let nemesis = "[nemesis]\nkinds = [\"pause\",\n  \"hold-al\"]\nheal_at_ms = 5000\n[expect]";
    let (code, stderr, file) = run_edited("bad-nemesis-kind", &[("[expect]", nemesis)]);
    assert_eq!(code, Some(2), "{stderr}");
    let prefix = format!("error: {file}:15:3: field `nemesis.kinds`: unknown variant `hold-al`");
    assert!(
        stderr.starts_with(&prefix),
        "expected {prefix:?} in {stderr:?}"
    );
}

/// From the hardening issue (31, item 5): a mistyped fault kind is answered with every kind
/// there is, the last one included; only what came from the input is cut.
#[test]
fn a_mistyped_fault_kind_gets_the_whole_list_of_kinds() {
    let faults = "[[faults]]\nkind = \"deregistr\"\nnode = \"client-1\"\nat_ms = 10\n[expect]";
    let (code, stderr, _) = run_edited("bad-fault-kind-list", &[("[expect]", faults)]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("unknown variant `deregistr`"), "{stderr}");
    assert!(!stderr.contains("more characters"), "{stderr}");
    // The list ends with the last kind the parser knows.
    let expected = stderr.split("expected one of ").nth(1).unwrap_or_default();
    let kinds: Vec<&str> = expected.trim().split(", ").collect();
    assert!(kinds.len() >= 15, "{kinds:?}");
    assert!(kinds.contains(&"`deregister`"), "{kinds:?}");
    assert!(kinds.contains(&"`final-heal`"), "{kinds:?}");
    assert!(
        kinds.iter().all(|k| k.starts_with('`') && k.ends_with('`')),
        "{kinds:?}"
    );
}

/// From the new-user trial of design-owned knobs: a knob's errors speak the scenario format,
/// never a Rust type, and each points where the fix goes.
#[test]
fn design_knob_errors_name_no_rust_type_and_point_at_the_fix() {
    let cases: [(&str, &str, &str, &str, &str); 11] = [
        (
            "[lock_service]\nmax_ttl_ms = 20000",
            "[lock_service]\nkind = \"raft\"\nreplicas = 99999999999999999999",
            "5:12",
            "lock_service.replicas",
            "expected an integer between -1000000000000 and 1000000000000, found 99999999999999999999",
        ),
        (
            "[lock_service]\nmax_ttl_ms = 20000",
            "[[lock_service]]\nmax_ttl_ms = 20000",
            "3:1",
            "lock_service",
            "expected a table, found an array (`[[...]]` is an array of tables)",
        ),
        (
            "max_ttl_ms = 20000",
            "kind = \"redlock\"\ndrift_ppm = -1",
            "5:13",
            "lock_service.drift_ppm",
            "expected an integer from 0 to 999999, found -1",
        ),
        (
            "max_ttl_ms = 20000",
            "kind = \"\"",
            "4:8",
            "lock_service.kind",
            "expected one of `single`, `raft`, `redlock`, `primary-backup`, `lease-record`, `etcd`, found an empty string",
        ),
        (
            "max_ttl_ms = 20000",
            "max_ttl_ms = 20000\nfsync_evry_ms = 10",
            "5:1",
            "lock_service.fsync_evry_ms",
            "unknown field `fsync_evry_ms` (did you mean `fsync_every_ms`?)",
        ),
        (
            "max_ttl_ms = 20000",
            "max_ttl_ms = 20000\nfsync = 1",
            "5:9",
            "lock_service.fsync",
            "expected a string, one of `always`, `periodic` or `never`, found integer 1",
        ),
        // A number of milliseconds written as text or with a fraction: no `i64` in the words.
        (
            "ttl_ms = 5000",
            "ttl_ms = \"5s\"",
            "7:10",
            "clients.ttl_ms",
            "expected an integer, found string \"5s\"",
        ),
        (
            "ttl_ms = 5000",
            "ttl_ms = 2.5",
            "7:10",
            "clients.ttl_ms",
            "expected an integer, found floating point 2.5",
        ),
        // The same words in `[lock_service]`, for a design's knob, and for a name field.
        (
            "max_ttl_ms = 20000",
            "max_ttl_ms = \"20s\"",
            "4:14",
            "lock_service.max_ttl_ms",
            "expected an integer, found string \"20s\"",
        ),
        (
            "max_ttl_ms = 20000",
            "kind = \"raft\"\nreplicas = 1.5",
            "5:12",
            "lock_service.replicas",
            "expected an integer, found floating point 1.5",
        ),
        (
            "ttl_ms = 5000",
            "ttl_ms = 5000\ncleanup = 5",
            "8:11",
            "clients.cleanup",
            "expected a string, found integer 5",
        ),
    ];
    for (i, (from, to, location, field, says)) in cases.into_iter().enumerate() {
        assert_located(
            &format!("bad-knob-words-{i}"),
            from,
            to,
            location,
            field,
            says,
        );
    }
}

/// A report whose schema_version is not a number says so.
#[test]
fn a_report_with_a_schema_version_that_is_no_number() {
    let dir = out_dir("bad-schema-version");
    let example = support::root().join("reports/examples/pause-unfenced/0/report.json");
    let mut report = support::json(&example);
    report["schema_version"] = "x".into();
    let file = dir.join("report.json");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(&file, serde_json::to_vec(&report).unwrap()).unwrap();
    let o = fencesim(&["replay", file.to_str().unwrap()]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!(
            "error: {}: not a report this fencesim reads: schema_version must be a whole number \
             from 1 to 2, found \"x\"",
            file.display()
        )
    );
}

/// From the second new-user trial: tables of the wrong shape say so in the format's words,
/// and a misspelt knob is named before a knob that depends on it is blamed.
#[test]
fn wrong_shapes_and_misspelt_knobs_are_named_plainly() {
    let cases: [(&str, &str, &str, &str, &str); 4] = [
        (
            "[lock_service]\nmax_ttl_ms = 20000",
            "[lock_service]\nmax_ttl_ms = 20000\n[[resource]]\nmode = \"fenced\"",
            "5:1",
            "resource",
            "expected a table, found an array (`[[...]]` is an array of tables)",
        ),
        (
            "[[clients]]\nname = \"client-1\"",
            "[clients]\nname = \"client-1\"",
            "5:1",
            "clients",
            "expected an array of tables (`[[...]]`), found a table",
        ),
        (
            "[lock_service]\nmax_ttl_ms = 20000",
            "[lock_service]\nmax_ttl_ms = 20000\n[resource]\nchek = \"check-then-apply\"\napply_delay_ms = 500",
            "6:1",
            "resource.chek",
            "unknown field `chek` (did you mean `check`?)",
        ),
        (
            "max_ttl_ms = 20000",
            "max_ttl_ms = 20000\nfsyn = \"periodic\"\nfsync_every_ms = 500",
            "5:1",
            "lock_service.fsyn",
            "unknown field `fsyn` (did you mean `fsync`?)",
        ),
    ];
    for (i, (from, to, location, field, says)) in cases.into_iter().enumerate() {
        assert_located(&format!("bad-shape-{i}"), from, to, location, field, says);
    }
}

/// A scenario of a user's design run by a binary that does not register it: the kind is
/// named, with where to look, before any of the design's client knobs is refused.
#[test]
fn a_design_this_binary_lacks_is_named_before_its_client_knobs() {
    let file = "examples/zookeeper-lock/scenarios/zk-waiter-expires.toml";
    let o = fencesim(&["run", file, "--seed", "0"]);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "error: {file}:20:8: field `lock_service.kind`: unknown variant `zookeeper` (a design \
             of your own is known only to a binary that registers it: docs/designs.md)"
        )),
        "{stderr}"
    );
}

#[test]
fn a_bench_defect_filter_that_matches_nothing_is_refused() {
    let o = fencesim(&["bench", "--only", "search", "--defect", "no-such-defect"]);
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains("--defect \"no-such-defect\" matches no row of the mutation table")
            && stderr.contains("deadline_from = notice (K12)"),
        "{stderr}"
    );
    assert!(stdout.is_empty(), "no table is started: {stdout}");
    let o = fencesim(&["bench", "--only", "search", "--defect", " "]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("--defect is blank"), "{}", text(&o).1);
    let o = fencesim(&["bench", "--only", "scenarios", "--defect", "K04"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("--defect narrows the `search` part"));
}

/// From the adversarial run of issue 38 (generated histories): each input that crashed,
/// passed where it should not, or printed what it should not, with what it gives now.
#[test]
fn adversarial_histories_get_their_right_answers() {
    let check = |file: &str, edn: bool| {
        let path = format!("tests/fixtures/histories/{file}");
        let mut args = vec!["check", path.as_str()];
        if edn {
            args.extend(["--format", "jepsen-edn"]);
        }
        let out = fencesim(&args);
        let (stdout, stderr) = text(&out);
        (out.status.code(), stdout, stderr)
    };
    // TTLs and times past u64 nanoseconds panicked (attempt to multiply with overflow); a
    // lease that ends past the end of time covers the rest of the history.
    for (file, edn) in [
        ("ttl-past-u64-nanoseconds.jsonl", false),
        ("renewal-ttl-past-u64-nanoseconds.jsonl", false),
        ("acquire-at-the-end-of-time.jsonl", false),
        ("edn-ttl-past-u64-nanoseconds.edn", true),
    ] {
        let (code, stdout, stderr) = check(file, edn);
        assert_eq!(code, Some(0), "{file}: {stdout}{stderr}");
    }
    // Invocations alone (a file cut short) judged nothing: unknown, not valid.
    for (file, edn) in [
        ("only-a-pending-write.jsonl", false),
        ("edn-only-a-pending-read.edn", true),
    ] {
        let (code, stdout, _) = check(file, edn);
        assert_eq!(code, Some(3), "{file}: {stdout}");
        assert!(stdout.contains("nothing to judge"), "{stdout}");
    }
    // A release event that says it answers an acquire is refused, both lines named.
    let (code, _, stderr) = check("refused-release-answers-an-acquire.jsonl", false);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "line 2: field `op`: a release answers release, found 2, which is an invoke of an \
             acquire at line 3"
        ),
        "{stderr}"
    );
    // Line and paragraph separators and bidirectional overrides in names are escaped.
    let (code, stdout, _) = check("names-with-invisible-formatting.jsonl", false);
    assert_eq!(code, Some(1));
    assert!(stdout.contains("b\\u{2028}FAKE2\\u{202e}evil"), "{stdout}");
    assert!(
        !stdout.contains('\u{2028}') && !stdout.contains('\u{202e}'),
        "{stdout}"
    );
}

/// From the same run: a file name that holds an escape sequence reached stderr raw in error
/// lines; every message is escaped now.
#[test]
fn an_escape_sequence_in_a_file_name_is_escaped_in_errors() {
    let dir = out_dir("bad-esc-file-name");
    let file = dir.join("bad\u{1b}[2Jname.jsonl");
    std::fs::write(&file, "{\"record\":\"op\"}\n").unwrap();
    let out = fencesim(&["check", file.to_str().unwrap()]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    assert!(stderr.contains("bad\\u{1b}[2Jname.jsonl"), "{stderr}");
    // A newline in a file name would start a line fencesim did not write ("verdict: valid").
    let file = dir.join("bad\nverdict: valid.jsonl");
    std::fs::write(&file, "{\"record\":\"op\"}\n").unwrap();
    let out = fencesim(&["check", file.to_str().unwrap()]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("bad\\nverdict: valid.jsonl"), "{stderr}");
    assert!(!stdout.contains("verdict: valid"), "{stdout}");
}

/// Live mode runs no design's code, so a fault triggered at a design's own safepoint has no
/// live form, and is refused by name. No built-in design with a live form declares one: the
/// trigger is set on the single service's `pause-fenced` directly, as a user's design with a
/// live form and a safepoint of its own would have it.
#[test]
fn a_trigger_on_a_designs_own_safepoint_has_no_live_form() {
    use fencesim_scenario::{NodeEvent, Trigger};
    let engine = crate::support::engine();
    let mut scenario = engine.load_named("pause-fenced").expect("bundled");
    scenario.faults[0].trigger = Trigger::After {
        event: NodeEvent::Design("claim-sent"),
        nth: 1,
        count_from_ms: 0,
    };
    let err = fencesim_live::plan::plan(&scenario, engine.registry().live()).expect_err("refused");
    assert!(
        err.starts_with(
            "[[faults]] #1: a trigger on \"claim-sent\", a safepoint of the design's own code, \
             has no live form"
        ),
        "{err}"
    );
}

/// A seed range whose end is past 2^64 - 1 says so, rather than that A < B fails.
#[test]
fn a_seed_range_past_the_largest_seed_says_so() {
    assert_located(
        "bad-seeds-past-u64",
        "duration_ms = 10000",
        "seeds = \"18446744073709551615..18446744073709551616\"\nduration_ms = 10000",
        "2:9",
        "seeds",
        "is past 18446744073709551615 (2^64 - 1), the largest a scenario file takes",
    );
}
