//! Live mode (`fencesim live`, docs/live.md) through the binary, against a real PostgreSQL
//! server that each run starts on loopback and removes: the scaled-down K01 pause against the
//! unfenced and the fenced table, and the check-then-apply race (K20); and the refusals, which
//! need no server.
//!
//! Without PostgreSQL's server binaries the server tests say so and pass, except under CI
//! (the `CI` variable set), where `.ci/run` installs the `postgresql` package and a missing
//! server is a failure.
//!
//! The Slurm recipe's end-to-end test is a module of this binary (tests/slurm/mod.rs), so that
//! it holds the same [`ONE_AT_A_TIME`] as the live trials: its sweeps keep every core busy.

mod slurm;
mod support;

use std::path::Path;
use std::process::Command;

use support::{json, out_dir, root, text};

/// The binary under test: this build's, or the one `FENCESIM_BIN` names (to run these tests
/// against a copy that a rebuild cannot replace mid-run, as the 20-runs-under-load trial of
/// issue 31 does, or against an installed fencesim).
fn bin() -> std::path::PathBuf {
    std::env::var_os("FENCESIM_BIN").map_or_else(
        || std::path::PathBuf::from(env!("CARGO_BIN_EXE_fencesim")),
        std::path::PathBuf::from,
    )
}

/// Held by each test that runs trials: one at a time, so that the trials' timings (margins of
/// a few hundred ms) do not depend on how many servers the other tests start beside them.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Whether a PostgreSQL server can be started here; under CI its absence fails the test.
fn postgres_installed(test: &str) -> bool {
    let found = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .map(|o| {
            Path::new(String::from_utf8_lossy(&o.stdout).trim())
                .join("postgres")
                .exists()
        })
        .unwrap_or(false)
        || std::fs::read_dir("/usr/lib/postgresql").is_ok_and(|mut d| d.next().is_some());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: PostgreSQL is not installed, and CI must run the live tests (.ci/run installs \
             the `postgresql` package)"
        );
        eprintln!(
            "{test}: SKIPPED: PostgreSQL's server is not installed (apt-get install postgresql)"
        );
    }
    found
}

fn live(args: &[&str]) -> std::process::Output {
    // A test that failed while holding the lock poisons it; the others still run.
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    Command::new(bin())
        .arg("live")
        .args(args)
        .current_dir(root())
        .output()
        .expect("run fencesim live")
}

/// How many times a run whose trials real time disturbed is made again before its result is
/// judged as it stands.
const ATTEMPTS: usize = 3;

/// The trial lines of `stdout` that say real time disturbed them (a fault, resume, restart
/// or a client's start late on a busy machine: docs/live.md).
fn disturbed(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| l.contains("disturbed by real time"))
        .collect()
}

/// Run `attempt` again (up to [`ATTEMPTS`] times) while the trials it prints were disturbed
/// by real time, saying so on stderr each time: a busy machine's lateness changes the
/// schedule a trial runs, and with it what the test may assert. The last attempt is judged
/// whatever it says.
fn settled(test: &str, mut attempt: impl FnMut() -> std::process::Output) -> std::process::Output {
    for n in 1..ATTEMPTS {
        let run = attempt();
        let (stdout, _) = text(&run);
        let lines = disturbed(&stdout);
        if lines.is_empty() {
            return run;
        }
        eprintln!("{test}: attempt {n} of {ATTEMPTS} was disturbed by real time, running it again: {lines:?}");
    }
    attempt()
}

/// `fencesim live ARGS --out DIR` into a fresh folder for `test`, which must exit 0: the folder
/// and stdout (made again while real time disturbs its trials: [`settled`]).
fn live_ok(test: &str, args: &[&str]) -> (std::path::PathBuf, String) {
    let out = out_dir(test);
    let mut all = args.to_vec();
    all.extend(["--out", out.to_str().unwrap()]);
    let run = settled(test, || {
        let _ = std::fs::remove_dir_all(&out);
        live(&all)
    });
    let (stdout, stderr) = text(&run);
    assert_eq!(run.status.code(), Some(0), "{stdout}{stderr}");
    (out, stdout)
}

/// The entries of a history.jsonl, header left out.
fn entries(history: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(history)
        .expect("history.jsonl")
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// When `node` invoked each of its writes, ns of the trial, in history order.
fn write_invokes_ns(entries: &[serde_json::Value], node: &str) -> Vec<u64> {
    entries
        .iter()
        .filter(|e| e["f"] == "write" && e["type"] == "invoke" && e["node"] == node)
        .map(|e| e["time_ns"].as_u64().unwrap())
        .collect()
}

fn events<'a>(entries: &'a [serde_json::Value], kind: &str) -> Vec<&'a serde_json::Value> {
    entries.iter().filter(|e| e["event"] == kind).collect()
}

#[test]
fn k01_pause_against_the_unfenced_table_accepts_the_stale_write() {
    if !postgres_installed("k01 unfenced") {
        return;
    }
    let out = out_dir("live-k01-unfenced");
    // Real time: the trial stops client-1 for 2 s, so it cannot end sooner (the simulation of
    // the same file takes milliseconds). The harness's own clock is the measure here.
    #[allow(clippy::disallowed_methods, clippy::disallowed_types)]
    let started = std::time::Instant::now();
    let run = live(&[
        "scenarios/live/pg-pause-unfenced.toml",
        "--trials",
        "2",
        "--expect",
        "--out",
        out.to_str().unwrap(),
    ]);
    let elapsed = started.elapsed();
    let (stdout, stderr) = text(&run);
    assert_eq!(run.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        elapsed.as_millis() >= 4000,
        "two trials with a 2 s pause took {elapsed:?}"
    );
    // Real time: a loaded machine may stretch a trial enough for the clients' own views of
    // the lease to overlap too (mutual-exclusion-client beside the stale write).
    let trial_1 = stdout
        .lines()
        .find(|l| l.starts_with("trial 1: INVALID ("))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(trial_1.contains("stale-write-accepted"), "{trial_1}");
    assert!(
        stdout.contains("stale-write-accepted: live 2 of 2 trials, simulation 10 of 10 seeds"),
        "{stdout}"
    );
    let dir = out.join("pg-pause-unfenced/live-1");
    let report = json(&dir.join("report.json"));
    assert_eq!(report["mode"], "live");
    assert_eq!(report["live"]["trial"], 1);
    assert!(report.get("seed").is_none(), "a live report has no seed");
    assert!(report["live"]["servers"][0]
        .as_str()
        .unwrap()
        .starts_with("PostgreSQL "));
    assert!(report["live"]["real_ms"].as_u64().unwrap() >= 2000);
    assert_eq!(report["violations"][0]["kind"], "stale-write-accepted");
    let history = entries(&dir.join("history.jsonl"));
    // The pause really lasted its 2 s, on the machine's monotonic clock.
    let pauses = events(&history, "pause");
    assert_eq!(pauses.len(), 2, "start and end");
    let paused_ns = pauses[1]["time_ns"].as_u64().unwrap() - pauses[0]["time_ns"].as_u64().unwrap();
    assert!(
        (2_000_000_000..2_500_000_000).contains(&paused_ns),
        "paused {paused_ns} ns"
    );
    // The database's order: token 2 accepted, then the stale token 1 over it.
    let accepts: Vec<u64> = events(&history, "accept")
        .iter()
        .map(|e| e["token"].as_u64().unwrap())
        .collect();
    assert_eq!(accepts, [2, 1]);
    let grants: Vec<(&str, u64)> = events(&history, "grant")
        .iter()
        .map(|e| (e["holder"].as_str().unwrap(), e["token"].as_u64().unwrap()))
        .collect();
    assert_eq!(grants, [("client-1", 1), ("client-2", 2)]);
    assert_eq!(
        events(&history, "expire").len(),
        1,
        "client-1's lease ran out"
    );
    // The same history, judged again by `check`, and the files a simulated run has.
    let check = support::fencesim(&["check", dir.join("history.jsonl").to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(1));
    for file in ["history.txt", "summary.md", "timeline.html"] {
        assert!(dir.join(file).exists(), "{file}");
    }
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        summary.starts_with("# pg-pause-unfenced live trial 1: INVALID"),
        "{summary}"
    );
    // A live report cannot be replayed or shrunk: there is no seed to run again.
    for command in ["replay", "shrink"] {
        let refused = support::fencesim(&[command, dir.join("report.json").to_str().unwrap()]);
        assert_eq!(refused.status.code(), Some(2), "{command}");
        assert!(
            text(&refused).1.contains("a live trial's report"),
            "{command}"
        );
    }
}

#[test]
fn k01_pause_against_the_fenced_table_rejects_the_late_write() {
    if !postgres_installed("k01 fenced") {
        return;
    }
    let (out, stdout) = live_ok(
        "live-k01-fenced",
        &[
            "scenarios/live/pg-pause-fenced.toml",
            "--expect",
            "--write-all",
        ],
    );
    assert!(stdout.contains("trial 1: valid"), "{stdout}");
    let history = entries(&out.join("pg-pause-fenced/live-1/history.jsonl"));
    let rejects = events(&history, "reject");
    assert_eq!(rejects.len(), 1, "client-1's late write");
    assert_eq!(rejects[0]["holder"], "client-1");
    assert_eq!(
        (rejects[0]["token"].as_u64(), rejects[0]["highest"].as_u64()),
        (Some(1), Some(2))
    );
    let failed_write = history
        .iter()
        .find(|e| e["f"] == "write" && e["type"] == "fail")
        .expect("client-1's write completes fail");
    assert_eq!(
        failed_write["error"],
        "stale token 1: highest accepted is 2"
    );
}

#[test]
fn k20_check_then_apply_lets_the_older_token_land_last() {
    if !postgres_installed("k20") {
        return;
    }
    let (out, stdout) = live_ok(
        "live-k20",
        &[
            "scenarios/live/pg-check-then-apply.toml",
            "--trials",
            "2",
            "--expect",
        ],
    );
    assert!(
        stdout.contains("stale-write-accepted: live 2 of 2 trials, simulation 10 of 10 seeds"),
        "{stdout}"
    );
    let history = entries(&out.join("pg-check-then-apply/live-1/history.jsonl"));
    let accepts: Vec<(u64, u64)> = events(&history, "accept")
        .iter()
        .map(|e| (e["token"].as_u64().unwrap(), e["highest"].as_u64().unwrap()))
        .collect();
    // Both writes passed the check; token 1's update waited for token 2's row lock and won.
    assert_eq!(accepts, [(2, 2), (1, 1)]);
}

fn refused(args: &[&str], why: &str) {
    let run = live(args);
    let (stdout, stderr) = text(&run);
    assert_eq!(run.status.code(), Some(2), "{args:?}: {stdout}{stderr}");
    assert!(stderr.contains(why), "{args:?}: {stderr}");
}

#[test]
fn parts_without_a_live_form_are_refused_by_name() {
    refused(
        &["scenarios/incidents/raft-leader-crash.toml"],
        "[lock_service] kind = \"raft\" has no live form (live mode runs: \"single\", \"redlock\", \"etcd\")",
    );
    refused(
        &["scenarios/incidents/delayed-write-unfenced.toml"],
        "[[faults]] #1: kind = \"hold\" has no live form: holding, duplicating or reordering a \
         named message has no meaning on a byte stream",
    );
    refused(
        &["random-nemesis-fenced"],
        "[nemesis] (a random fault schedule) has no live form",
    );
    refused(
        &["scenarios/incidents/k07-grant-to-expired-waiter.toml"],
        "[lock_service] acquire = \"queue-grant-to-expired-waiter\" has no live form",
    );
    refused(
        &["scenarios/incidents/redlock-crash-no-fsync.toml"],
        "[lock_service] fsync = \"periodic\" has no live form (live mode takes \"always\", \"never\")",
    );
    refused(
        &["scenarios/incidents/redlock-clock-jump-monotonic.toml"],
        "[lock_service] expiry_clock = \"monotonic\" has no live form (live mode takes \"wall\")",
    );
}

/// Two pauses armed at the same event start together, and the client stays stopped until the
/// longer one ends, as the simulation thaws overlapping pauses.
#[test]
fn two_pauses_at_one_event_start_together_and_the_longer_one_holds() {
    if !postgres_installed("coinciding pauses") {
        return;
    }
    let fixture = std::fs::read_to_string(root().join("tests/fixtures/live-count-from.toml"))
        .unwrap()
        .replace(
            "nth = 1\ncount_from_ms = 1000\nduration_ms = 2000",
            "nth = 3\nduration_ms = 500",
        );
    let second = "\n[[faults]]\nkind = \"pause\"\nnode = \"client-1\"\nbefore = \"write\"\nnth = 3\nduration_ms = 800\n\n[expect]";
    let scenario = fixture.replace("\n[expect]", second);
    let dir = out_dir("live-coinciding-pauses");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("coinciding.toml");
    std::fs::write(&file, scenario).unwrap();
    let (out, stdout) = live_ok(
        "live-coinciding-pauses-run",
        &[file.to_str().unwrap(), "--write-all"],
    );
    assert!(stdout.contains("trial 1: valid"), "{stdout}");
    let history = entries(&out.join("live-count-from/live-1/history.jsonl"));
    let time = |e: &serde_json::Value| e["time_ns"].as_u64().unwrap();
    let pauses = events(&history, "pause");
    let starts: Vec<u64> = pauses
        .iter()
        .filter(|e| e["phase"] == "start")
        .map(|e| time(e))
        .collect();
    assert_eq!(starts.len(), 2, "{pauses:?}");
    assert!(
        starts[1] - starts[0] < 50_000_000,
        "started together: {starts:?}"
    );
    let write_after = write_invokes_ns(&history, "client-1")
        .into_iter()
        .find(|t| *t > starts[1])
        .expect("client-1 writes after its pauses");
    assert!(
        write_after >= starts[0] + 800_000_000,
        "client-1 wrote {} ms after the pauses began",
        (write_after - starts[0]) / 1_000_000
    );
}

/// An event trigger counted from a time (`count_from_ms`) strikes at the client's first such
/// event at or after it, as in the simulation: client-1 writes several times before 1 s of
/// the trial and is paused before its first write after it.
#[test]
fn an_event_trigger_counted_from_a_time_strikes_after_that_time() {
    if !postgres_installed("count_from_ms live") {
        return;
    }
    let (out, stdout) = live_ok(
        "live-count-from",
        &[
            "tests/fixtures/live-count-from.toml",
            "--expect",
            "--write-all",
        ],
    );
    assert!(stdout.contains("trial 1: valid"), "{stdout}");
    let history = entries(&out.join("live-count-from/live-1/history.jsonl"));
    let pauses = events(&history, "pause");
    assert_eq!(pauses.len(), 2, "start and end");
    let time = |e: &serde_json::Value| e["time_ns"].as_u64().unwrap();
    let (paused_ns, resumed_ns) = (time(pauses[0]), time(pauses[1]));
    assert!(paused_ns >= 1_000_000_000, "paused at {paused_ns} ns");
    let writes = write_invokes_ns(&history, "client-1");
    // Counting from the start would have struck before the first of these.
    assert!(writes[0] < 1_000_000_000, "{writes:?}");
    // Its first write at or after 1 s waited out the pause: none came between.
    let first_after = writes.iter().find(|t| **t >= 1_000_000_000).copied();
    assert!(
        first_after.is_some_and(|t| t >= resumed_ns),
        "writes {writes:?}, paused {paused_ns}..{resumed_ns}"
    );
}

#[test]
fn a_missing_server_names_the_package_to_install() {
    let empty = out_dir("live-no-server");
    let run = Command::new(bin())
        .args(["live", "scenarios/live/pg-pause-fenced.toml", "--out"])
        .arg(&empty)
        .env("FENCESIM_PG_BINDIR", &empty)
        .current_dir(root())
        .output()
        .unwrap();
    let (stdout, stderr) = text(&run);
    assert_eq!(run.status.code(), Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains("install the Debian package `postgresql`"),
        "{stderr}"
    );
}

/// Whether `redis-server` is installed; under CI its absence fails the test.
fn redis_installed(test: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("redis-server").exists()));
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: redis-server is not installed, and CI must run the live tests (.ci/run \
             installs the `redis-server` package)"
        );
        eprintln!("{test}: SKIPPED: redis-server is not installed (apt-get install redis-server)");
    }
    found && postgres_installed(test)
}

#[test]
fn k04_a_redis_node_that_loses_its_key_lets_two_clients_hold_the_lock() {
    if !redis_installed("k04 no fsync") {
        return;
    }
    let (out, stdout) = live_ok(
        "live-k04-no-fsync",
        &[
            "scenarios/live/redis-crash-no-fsync.toml",
            "--trials",
            "2",
            "--expect",
        ],
    );
    assert!(stdout.contains("redis-server "), "{stdout}");
    assert!(
        stdout.contains("mutual-exclusion-client: live 2 of 2 trials, simulation 10 of 10 seeds"),
        "{stdout}"
    );
    let file = out.join("redis-crash-no-fsync/live-1/history.jsonl");
    let header: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        header["token_order"], "acquisition",
        "Redlock's values are opaque"
    );
    let history = entries(&file);
    let crashes: Vec<(&str, &str)> = events(&history, "crash")
        .iter()
        .map(|e| (e["target"].as_str().unwrap(), e["phase"].as_str().unwrap()))
        .collect();
    assert_eq!(
        crashes,
        [
            ("redis-4", "start"),
            ("redis-5", "start"),
            ("redis-4", "end"),
            ("redis-5", "end"),
            ("redis-3", "start"),
            ("redis-3", "end")
        ]
    );
    let acquired: Vec<&str> = history
        .iter()
        .filter(|e| e["f"] == "acquire" && e["type"] == "ok")
        .map(|e| e["node"].as_str().unwrap())
        .collect();
    assert_eq!(
        acquired,
        ["client-1", "client-2"],
        "client-2 while client-1 held it"
    );
    // What the replies showed of redis-3's key: set for client-1, then (after the restart
    // that lost it) set for client-2. The loss itself has no reply, and no record.
    let redis_3_sets: Vec<&str> = events(&history, "key-set")
        .iter()
        .filter(|e| e["node"] == "redis-3")
        .map(|e| e["holder"].as_str().unwrap())
        .collect();
    assert_eq!(redis_3_sets, ["client-1", "client-2"]);
    assert!(
        events(&history, "key-expire").is_empty(),
        "no reply shows a node's own expiry"
    );
    assert!(
        stdout.contains("note: not observed: a key lost in a restart has no record of its own"),
        "{stdout}"
    );
    let report = json(&out.join("redis-crash-no-fsync/live-1/report.json"));
    let early = report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["kind"] == "lease-ended-early")
        .expect("redis-3 lost client-1's key");
    let said = early["explanation"].as_str().unwrap();
    assert!(
        said.starts_with("lock \"lock\": redis-3 set the key for client-1 with value ")
            && said.contains("when it set the key for another client")
            && said.contains("; it had crashed at index ")
            && said.ends_with("and restarted without the key (not synced)"),
        "{said}"
    );
    let chain: Vec<&str> = early["chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let crash = chain
        .iter()
        .position(|c| c.starts_with("redis-3 crashed at "));
    let set_for_2 = chain
        .iter()
        .position(|c| c.starts_with("redis-3 set the key for client-2 "));
    assert!(crash.is_some() && crash < set_for_2, "{chain:?}");
    assert!(
        report["live"]["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().starts_with("not observed: ")),
        "{report}"
    );
}

#[test]
fn k04_with_appendfsync_always_the_restarted_node_keeps_the_key() {
    if !redis_installed("k04 fsync always") {
        return;
    }
    let (out, stdout) = live_ok(
        "live-k04-fsync-always",
        &[
            "scenarios/live/redis-crash-fsync-always.toml",
            "--trials",
            "2",
            "--expect",
            "--write-all",
        ],
    );
    assert!(stdout.contains("live: 2 of 2 trials valid"), "{stdout}");
    let history = entries(&out.join("redis-crash-fsync-always/live-1/history.jsonl"));
    let first_refusal = history
        .iter()
        .find(|e| e["node"] == "client-2" && e["f"] == "acquire" && e["type"] == "fail")
        .expect("client-2 is refused while client-1 holds the lock");
    assert_eq!(first_refusal["error"], "only 2 of 5 nodes granted");
    // client-1's release reaches the restarted redis-3 too (on a new connection).
    let release = history
        .iter()
        .find(|e| e["node"] == "client-1" && e["f"] == "release" && e["type"] != "invoke")
        .expect("client-1 releases");
    assert_eq!(release["type"], "ok", "{release}");
}

#[test]
fn a_redis_persistence_without_a_live_form_is_refused() {
    let dir = out_dir("live-periodic");
    let text_of = std::fs::read_to_string(root().join("scenarios/live/redis-crash-no-fsync.toml"))
        .unwrap()
        .replace(
            "fsync = \"never\"",
            "fsync = \"periodic\"\nfsync_every_ms = 1000",
        );
    let file = dir.join("periodic.toml");
    std::fs::write(&file, text_of).unwrap();
    refused(
        &[file.to_str().unwrap()],
        "[lock_service] fsync = \"periodic\" has no live form (live mode takes \"always\", \"never\")",
    );
}

#[test]
fn k15_a_partition_through_the_proxy_cuts_the_holder_off_from_the_lease_service() {
    if !postgres_installed("k15") {
        return;
    }
    let (out, _) = live_ok(
        "live-k15",
        &[
            "scenarios/live/pg-partition-holder-careless.toml",
            "--expect",
        ],
    );
    let history = entries(&out.join("pg-partition-holder-careless/live-1/history.jsonl"));
    // Renewals invoked across the cut link end `info` (a link to PostgreSQL resets when cut);
    // before the partition the service renewed the lease.
    let cut_at = events(&history, "partition")[0]["time_ns"]
        .as_u64()
        .unwrap();
    assert!(events(&history, "renew")
        .iter()
        .all(|e| e["time_ns"].as_u64().unwrap() < cut_at));
    assert!(
        !events(&history, "renew").is_empty(),
        "renewed before the cut"
    );
    let invoked_after: Vec<u64> = history
        .iter()
        .filter(|e| e["f"] == "renew" && e["type"] == "invoke")
        .filter(|e| e["time_ns"].as_u64().unwrap() > cut_at)
        .map(|e| e["index"].as_u64().unwrap())
        .collect();
    assert!(invoked_after.len() >= 3, "{invoked_after:?}");
    let completed: Vec<&str> = history
        .iter()
        .filter(|e| e["f"] == "renew" && e["type"] != "invoke")
        .filter(|e| e["time_ns"].as_u64().unwrap() > cut_at)
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert!(completed.iter().all(|t| *t == "info"), "{completed:?}");
    // Still reaching the resource, client-1 writes late and is rejected.
    let write = history
        .iter()
        .find(|e| e["node"] == "client-1" && e["f"] == "write" && e["type"] != "invoke")
        .expect("client-1's write completes");
    assert_eq!(write["type"], "fail");
    let expire = events(&history, "expire");
    assert_eq!(expire.len(), 1);
    // The lease ends where its last renewal before the cut put it (a slow start may leave
    // time for more than one).
    let renewed_until = events(&history, "renew").last().unwrap()["expires_at_ms"]
        .as_i64()
        .unwrap();
    assert_eq!(
        expire[0]["expires_at_ms"].as_i64(),
        Some(renewed_until),
        "the renewed end"
    );
}

#[test]
fn k04_as_the_incident_has_it_a_partition_and_a_node_that_loses_its_key() {
    if !redis_installed("k04 partition") {
        return;
    }
    let (out, stdout) = live_ok(
        "live-k04-partition",
        &[
            "scenarios/live/redis-partition-crash-no-fsync.toml",
            "--expect",
        ],
    );
    assert!(
        stdout.contains("mutual-exclusion-client: live 1 of 1 trials"),
        "{stdout}"
    );
    let history = entries(&out.join("redis-partition-crash-no-fsync/live-1/history.jsonl"));
    let partition = events(&history, "partition");
    assert_eq!(partition.len(), 1, "for the whole trial");
    assert!(partition[0]["detail"]
        .as_str()
        .unwrap()
        .starts_with("groups [[\"client-1\""));
}

#[test]
fn a_postgres_option_that_cannot_work_is_refused_before_anything_starts() {
    refused(
        &["pg-pause-fenced", "--postgres", "postgresql://[nope"],
        "--postgres (not shown: it may hold a password) is not a libpq connection string or \
         postgres:// URL",
    );
    refused(
        &["pg-pause-fenced", "--postgres", ""],
        "--postgres \"\" names no host",
    );
    // A server of the user's that cannot be reached is a bad option (exit 2), named.
    refused(
        &[
            "pg-pause-fenced",
            "--postgres",
            "host=127.0.0.1 port=1 user=u connect_timeout=2",
        ],
        "--postgres \"host=127.0.0.1 port=1 user=u connect_timeout=2\": cannot connect",
    );
    refused(
        &[
            "pg-partition-holder-careless",
            "--postgres",
            "host=127.0.0.1 port=1",
        ],
        "the partition in the scenario needs the server fencesim starts; leave out --postgres",
    );
    // The refusal names the scenario's own fault: a crash is not called a pause.
    refused(
        &["pg-crash-durable", "--postgres", "host=127.0.0.1 port=1"],
        "the crash of PostgreSQL in the scenario needs the server fencesim starts",
    );
}

/// The folders a run of process `pid` made, and the processes still running in them.
fn leftovers(pid: u32) -> (Vec<String>, Vec<String>) {
    let tag = format!("-{pid}-");
    let folders: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("fencesim-live-") && n.contains(&tag))
        .collect();
    let ps = Command::new("ps").args(["-eo", "args"]).output().unwrap();
    let processes = String::from_utf8_lossy(&ps.stdout)
        .lines()
        .filter(|l| l.contains(&tag) && (l.contains("redis-server") || l.contains("postgres")))
        .map(str::to_owned)
        .collect();
    (folders, processes)
}

/// `fencesim live redis-crash-no-fsync --trials 5` into a fresh folder for `test`, once the
/// first trial's Redis nodes run (their folders carry the run's pid): the child process.
fn a_redis_run_under_way(test: &str) -> std::process::Child {
    let out = out_dir(test);
    let mut child = Command::new(bin())
        .args(["live", "redis-crash-no-fsync", "--trials", "5", "--out"])
        .arg(&out)
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    for _ in 0..400 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let redis_folders = leftovers(pid)
            .0
            .iter()
            .filter(|f| f.starts_with("fencesim-live-redis"))
            .count();
        if redis_folders >= 2 {
            return child;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("{test}: the run never started its Redis nodes");
}

#[test]
fn quitting_at_once_still_removes_every_server_and_folder() {
    if !redis_installed("quit at once") {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut child = a_redis_run_under_way("live-quit");
    let pid = child.id();
    // Ctrl-C, then SIGTERM at once: the second quits without finishing the trial.
    let signal = |name: &str| {
        Command::new("kill")
            .args([name, &pid.to_string()])
            .status()
            .unwrap();
    };
    signal("-INT");
    std::thread::sleep(std::time::Duration::from_millis(100));
    signal("-TERM");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (folders, processes) = leftovers(pid);
    assert!(folders.is_empty(), "left behind: {folders:?}");
    assert!(processes.is_empty(), "left running: {processes:?}");
}

#[test]
fn k03_a_redis_node_whose_clock_jumps_lets_two_clients_hold_the_lock() {
    if !redis_installed("k03") {
        return;
    }
    let out = out_dir("live-k03");
    // The binary alone, as `cargo install` leaves it: the clock shim it needs is inside it
    // (issue 31, item 6), not beside it in the target folder.
    let installed = out.join("bin");
    std::fs::create_dir_all(&installed).unwrap();
    std::fs::copy(bin(), installed.join("fencesim")).unwrap();
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let run = settled("k03", || {
        Command::new(installed.join("fencesim"))
            .args([
                "live",
                "redis-clock-jump",
                "--trials",
                "2",
                "--expect",
                "--out",
            ])
            .arg(&out)
            .env_remove("FENCESIM_CLOCKSHIM")
            .current_dir(root())
            .output()
            .unwrap()
    });
    let (stdout, stderr) = text(&run);
    assert_eq!(run.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("mutual-exclusion-client: live 2 of 2 trials, simulation 10 of 10 seeds"),
        "{stdout}"
    );
    let history = entries(&out.join("redis-clock-jump/live-1/history.jsonl"));
    let jumps: Vec<&str> = events(&history, "clock-jump")
        .iter()
        .map(|e| e["detail"].as_str().unwrap())
        .collect();
    assert_eq!(
        jumps,
        [
            "wall clock +5000 ms (fencesim's clock shim)",
            "instantaneous"
        ]
    );
}

/// A `redis-server` of the test's own on a free port (killed on drop), as a user's server.
struct UserRedis(std::process::Child, u16);

impl UserRedis {
    fn start() -> Self {
        Self::start_with(&[])
    }

    /// With more options for `redis-server` (`--requirepass PW`).
    fn start_with(options: &[&str]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no"])
            .args(options)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        UserRedis(child, port)
    }

    fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.1.to_string()])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for UserRedis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn redis_servers_of_the_users_keep_their_own_keys() {
    if !redis_installed("user redis") {
        return;
    }
    let servers = [UserRedis::start(), UserRedis::start(), UserRedis::start()];
    servers[0].cli(&["set", "precious", "data"]);
    let out = out_dir("live-user-redis");
    let urls: Vec<String> = servers
        .iter()
        .map(|s| format!("redis://127.0.0.1:{}/", s.1))
        .collect();
    let mut args = vec!["tests/fixtures/live-user-redis.toml", "--expect", "--out"];
    args.push(out.to_str().unwrap());
    for url in &urls {
        args.extend(["--redis", url.as_str()]);
    }
    let run = live(&args);
    let (stdout, stderr) = text(&run);
    assert_eq!(run.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("Redis servers of the user's"), "{stdout}");
    // Wait out the lock keys' TTL (1.5 s): only the user's key is left.
    std::thread::sleep(std::time::Duration::from_millis(1600));
    assert_eq!(servers[0].cli(&["keys", "*"]), "precious");
    assert_eq!(servers[0].cli(&["get", "precious"]), "data");
    // One URL per node, or nothing starts.
    let two = live(&[
        "tests/fixtures/live-user-redis.toml",
        "--redis",
        &urls[0],
        "--redis",
        &urls[1],
    ]);
    assert_eq!(two.status.code(), Some(2));
    assert!(text(&two)
        .1
        .contains("the design has 3 nodes (redis-1, redis-2, redis-3)"));
}

#[test]
fn k06_postgresql_killed_and_restarted_keeps_every_acknowledged_lease() {
    if !postgres_installed("k06") {
        return;
    }
    let (out, _) = live_ok("live-k06", &["pg-crash-durable", "--expect", "--write-all"]);
    let history = entries(&out.join("pg-crash-durable/live-1/history.jsonl"));
    let crashes: Vec<&str> = events(&history, "crash")
        .iter()
        .map(|e| e["phase"].as_str().unwrap())
        .collect();
    assert_eq!(crashes, ["start", "end"]);
    // The token counter survived the crash: the grants carry 1, then 2.
    let tokens: Vec<u64> = events(&history, "grant")
        .iter()
        .map(|e| e["token"].as_u64().unwrap())
        .collect();
    assert_eq!(tokens, [1, 2]);
    // Calls while the server was down ended info, not fail.
    let down = history.iter().filter(|e| e["type"] == "info").count();
    assert!(down >= 1, "no call met the outage");
}

#[test]
fn a_heal_ends_every_partition_as_the_simulator_records_it() {
    if !postgres_installed("heal") {
        return;
    }
    let dir = out_dir("live-heal-scenario");
    let text_of =
        std::fs::read_to_string(root().join("scenarios/live/pg-partition-holder-careless.toml"))
            .unwrap()
            + "\n[[faults]]\nkind = \"heal\"\nat_ms = 1000\n";
    let file = dir.join("healed.toml");
    std::fs::write(&file, text_of).unwrap();
    let out = out_dir("live-heal");
    // The heal at 1 s leaves client-1's lease (renewed last at 600 ms, TTL 1.5 s) 1.1 s for a
    // renewal to go through; a heal that real time made late is run again.
    let run = settled("a_heal_ends_every_partition", || {
        let _ = std::fs::remove_dir_all(&out);
        live(&[
            file.to_str().unwrap(),
            "--write-all",
            "--out",
            out.to_str().unwrap(),
        ])
    });
    let (stdout, stderr) = text(&run);
    assert!(matches!(run.status.code(), Some(0 | 1)), "{stdout}{stderr}");
    let history = entries(&out.join("pg-partition-holder-careless/live-1/history.jsonl"));
    let network: Vec<(&str, &str, &str)> = history
        .iter()
        .filter(|e| e["event"] == "partition" || e["event"] == "heal")
        .map(|e| {
            (
                e["event"].as_str().unwrap(),
                e["phase"].as_str().unwrap(),
                e["detail"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(network.len(), 4, "{network:?}");
    assert_eq!(network[1], ("partition", "end", "healed"));
    assert_eq!((network[2].0, network[2].1), ("heal", "start"));
    assert_eq!((network[3].0, network[3].1), ("heal", "end"));
    // After the heal client-1's renewals reach the lease service again: one is answered,
    // `ok` or `fail` (a definite answer; a renewal cut off ends `info`). On a loaded machine
    // PostgreSQL may answer after the lease ran out, and then the answer is `fail`
    // (seen: invoked 283 ms after the heal, answered `fail` 1.35 s later).
    let heal_ns = history
        .iter()
        .find(|e| e["event"] == "heal")
        .and_then(|e| e["time_ns"].as_u64())
        .unwrap();
    let renewed_after = history
        .iter()
        .filter(|e| e["f"] == "renew" && (e["type"] == "ok" || e["type"] == "fail"))
        .any(|e| e["time_ns"].as_u64().unwrap() > heal_ns);
    let renewals: Vec<String> = history
        .iter()
        .filter(|e| e["f"] == "renew")
        .map(|e| format!("{} {}", e["type"], e["time_ns"]))
        .collect();
    assert!(
        renewed_after,
        "no renewal went through after the heal at {heal_ns} ns: {renewals:?}\n{stdout}"
    );
}

/// A PostgreSQL server of the test's own that asks for a password (scram-sha-256), as a
/// user's server: its folder and process removed on drop.
struct PasswordPostgres {
    child: std::process::Child,
    folder: std::path::PathBuf,
    port: u16,
}

impl PasswordPostgres {
    fn start(password: &str) -> Self {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .unwrap()
            .flatten()
            .map(|e| e.path().join("bin"))
            .find(|d| d.join("initdb").exists())
            .expect("PostgreSQL's server binaries");
        let folder =
            std::env::temp_dir().join(format!("fencesim-test-pgpw-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&folder);
        std::fs::create_dir_all(&folder).unwrap();
        // As root, PostgreSQL runs as the `postgres` user (it refuses root).
        let ids = |flag: &str| -> Option<u32> {
            let out = Command::new("id").args([flag, "postgres"]).output().ok()?;
            String::from_utf8_lossy(&out.stdout).trim().parse().ok()
        };
        let owner = (nix_is_root()).then(|| (ids("-u").unwrap(), ids("-g").unwrap()));
        let pwfile = folder.join("pw");
        std::fs::write(&pwfile, password).unwrap();
        if let Some((uid, gid)) = owner {
            Command::new("chown")
                .args(["-R", &format!("{uid}:{gid}")])
                .arg(&folder)
                .status()
                .unwrap();
        }
        let as_owner = |mut c: Command| {
            if let Some((uid, gid)) = owner {
                std::os::unix::process::CommandExt::uid(&mut c, uid);
                std::os::unix::process::CommandExt::gid(&mut c, gid);
            }
            c
        };
        let data = folder.join("data");
        let mut initdb = as_owner(Command::new(bin.join("initdb")));
        let made = initdb
            .args([
                "-D",
                data.to_str().unwrap(),
                "-U",
                "fencesim",
                "-A",
                "scram-sha-256",
            ])
            .arg(format!("--pwfile={}", pwfile.display()))
            .args(["--no-sync", "--no-instructions"])
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(made.success(), "initdb");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut postgres = as_owner(Command::new(bin.join("postgres")));
        let child = postgres
            .args(["-D", data.to_str().unwrap(), "-k", folder.to_str().unwrap()])
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        for _ in 0..500 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        PasswordPostgres {
            child,
            folder,
            port,
        }
    }
}

impl Drop for PasswordPostgres {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.folder);
    }
}

/// Whether this process runs as root (`id -u` says 0).
fn nix_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Every file under `dir`, as text.
fn every_file(dir: &Path) -> Vec<(std::path::PathBuf, String)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(every_file(&path));
        } else {
            files.push((
                path.clone(),
                String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned(),
            ));
        }
    }
    files
}

/// Runs `fencesim live ARGS --write-all --out DIR` with `env`, and asserts that `secret`
/// appears in no file written, nor on stdout or stderr, and that the reproduce line shows the
/// server masked: the files and the output.
fn live_keeps_secret(
    test: &str,
    args: &[&str],
    env: &[(&str, &str)],
    secret: &str,
) -> (String, Vec<(std::path::PathBuf, String)>) {
    let out = out_dir(test);
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut command = Command::new(bin());
    command
        .arg("live")
        .args(args)
        .arg("--write-all")
        .arg("--out")
        .arg(&out);
    for (name, value) in env {
        command.env(name, value);
    }
    let run = command.current_dir(root()).output().unwrap();
    let (stdout, stderr) = text(&run);
    assert!(matches!(run.status.code(), Some(0 | 1)), "{stdout}{stderr}");
    assert!(
        !stdout.contains(secret) && !stderr.contains(secret),
        "{stdout}{stderr}"
    );
    let files = every_file(&out);
    assert!(files.len() >= 5, "{files:?}");
    for (path, content) in &files {
        assert!(
            !content.contains(secret),
            "{} holds the password",
            path.display()
        );
    }
    (stdout, files)
}

#[test]
fn no_password_reaches_a_report_or_the_output() {
    if !postgres_installed("passwords") || !redis_installed("passwords") {
        return;
    }
    let secret = "Zq7-s3cret/pw";
    let server = PasswordPostgres::start(secret);
    let encoded = "Zq7-s3cret%2Fpw";
    // In the URL.
    let url = format!(
        "postgresql://fencesim:{encoded}@127.0.0.1:{}/postgres",
        server.port
    );
    // Neither the raw nor the encoded form may show: look for what both hold.
    let needle = "s3cret";
    let (stdout, files) = live_keeps_secret(
        "live-secret-url",
        &["pg-pause-unfenced", "--postgres", &url],
        &[],
        needle,
    );
    // The reproduce line leaves the password out (a `***` would be sent as the password):
    // it is run again with the password in PGPASSWORD or the password file. The URL needs
    // no shell quoting, so it has none (the JSON string ends after it).
    let rerun = format!(
        "--postgres postgresql://fencesim@127.0.0.1:{}/postgres\"",
        server.port
    );
    let report = &files
        .iter()
        .find(|(p, _)| p.ends_with("report.json"))
        .unwrap()
        .1;
    assert!(report.contains(&rerun), "{report}");
    assert!(
        stdout.contains("trial 1: INVALID (stale-write-accepted"),
        "{stdout}"
    );
    // In a libpq string, and from PGPASSWORD.
    let keywords = format!(
        "host=127.0.0.1 port={} user=fencesim dbname=postgres password='{secret}'",
        server.port
    );
    live_keeps_secret(
        "live-secret-keywords",
        &["pg-pause-unfenced", "--postgres", &keywords],
        &[],
        needle,
    );
    let bare = format!("postgresql://fencesim@127.0.0.1:{}/postgres", server.port);
    live_keeps_secret(
        "live-secret-pgpassword",
        &["pg-pause-unfenced", "--postgres", &bare],
        &[("PGPASSWORD", secret)],
        needle,
    );
    // Without a password anywhere, the server refuses, and the error says why.
    let refused = live(&["pg-pause-unfenced", "--postgres", &bare]);
    assert_eq!(refused.status.code(), Some(2), "{:?}", text(&refused));
    assert!(
        text(&refused).1.contains("password"),
        "{}",
        text(&refused).1
    );

    // Redis servers that ask for a password, in the URL and from REDISCLI_AUTH.
    let redis_secret = "r3dis-Pw-9";
    let servers = [
        UserRedis::start_with(&["--requirepass", redis_secret]),
        UserRedis::start_with(&["--requirepass", redis_secret]),
        UserRedis::start_with(&["--requirepass", redis_secret]),
    ];
    let mut args = vec!["tests/fixtures/live-user-redis.toml".to_owned()];
    for s in &servers {
        args.extend([
            "--redis".to_owned(),
            format!("redis://:{redis_secret}@127.0.0.1:{}/", s.1),
        ]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (stdout, _) = live_keeps_secret("live-secret-redis", &args, &[], redis_secret);
    assert!(
        stdout.contains(&format!("redis://:***@127.0.0.1:{}/", servers[0].1)),
        "{stdout}"
    );
    let mut args = vec!["tests/fixtures/live-user-redis.toml".to_owned()];
    for s in &servers {
        args.extend(["--redis".to_owned(), format!("redis://127.0.0.1:{}/", s.1)]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    live_keeps_secret(
        "live-secret-rediscli-auth",
        &args,
        &[("REDISCLI_AUTH", redis_secret)],
        redis_secret,
    );
}

/// From issue 31 (item 3): a run killed with SIGKILL runs no destructor, and its servers die
/// with it but its folders stay; the next live run removes them and says how many.
#[test]
fn the_folders_of_a_killed_run_are_removed_by_the_next_run() {
    if !redis_installed("killed run") {
        return;
    }
    let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut child = a_redis_run_under_way("live-killed");
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    // The servers follow their parent (the kernel's parent-death signal); the folders stay.
    let mut left = leftovers(pid);
    for _ in 0..100 {
        if left.1.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        left = leftovers(pid);
    }
    assert!(left.1.is_empty(), "left running: {:?}", left.1);
    assert!(!left.0.is_empty(), "a SIGKILL leaves the folders");
    // The next run (here one whose server cannot be reached) removes them first. The turn
    // is still held: another test's run would remove them before it.
    let next = Command::new(bin())
        .args(["live", "pg-pause-fenced", "--postgres"])
        .arg("postgresql://fencesim@127.0.0.1:1/postgres?connect_timeout=2")
        .current_dir(root())
        .output()
        .unwrap();
    drop(turn);
    let (_, stderr) = text(&next);
    assert_eq!(next.status.code(), Some(2), "{stderr}");
    // At least these (a run killed earlier on this machine may have left more).
    let count: usize = stderr
        .split("note: removed ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no note of what was removed in {stderr}"));
    assert!(count >= left.0.len(), "{stderr}");
    assert!(
        stderr.contains("left by live runs that were killed"),
        "{stderr}"
    );
    for folder in &left.0 {
        assert!(
            stderr.contains(folder.as_str()),
            "{folder} not named in {stderr}"
        );
    }
    assert_eq!(leftovers(pid).0, Vec::<String>::new());
}

/// From a newcomer's attempt to break live mode (issue 31): a Ctrl-C while PostgreSQL is
/// stopped by a pause hung (the harness waited on the stopped server for its log); the trial
/// now continues what it paused before it ends, writes the cut-short trial and exits 130,
/// leaving no process stopped.
#[test]
fn a_ctrl_c_during_a_pause_of_postgresql_ends_the_trial_and_continues_the_server() {
    if !postgres_installed("ctrl-c during a pause") {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let out = out_dir("live-ctrl-c-pause");
    let mut child = Command::new(bin())
        .args(["live", "tests/fixtures/live-pg-server-pause.toml", "--out"])
        .arg(&out)
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until the pause has started: PostgreSQL's processes stopped (state T).
    let stopped = || {
        Command::new("ps")
            .args(["-eo", "stat,args"])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .filter(|l| l.starts_with('T') && l.contains("postgres"))
                    .count()
            })
            .unwrap_or(0)
    };
    let mut paused = false;
    for _ in 0..300 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        if stopped() > 0 {
            paused = true;
            break;
        }
    }
    assert!(paused, "PostgreSQL was never paused");
    Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    // It ends (it used to wait on the stopped server for good), with nothing left stopped.
    let mut status = None;
    for _ in 0..600 {
        status = child.try_wait().unwrap();
        if status.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let Some(status) = status else {
        let _ = child.kill();
        panic!("the interrupted run did not end: it waits on the stopped server");
    };
    assert_eq!(status.code(), Some(130));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut rest).unwrap();
    assert!(rest.contains("cut short: interrupted"), "{rest}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(stopped(), 0, "a PostgreSQL process was left stopped");
}

/// From a newcomer's attempt to break live mode (issue 31): a client process killed from
/// outside (here while it is paused) was judged as if it had stopped believing in its lease
/// only at the history's end, a false mutual-exclusion-client. The trial now fails (exit 4),
/// saying which process ended outside the scenario, and is not judged.
#[test]
fn a_client_killed_from_outside_fails_the_trial_instead_of_being_judged() {
    if !postgres_installed("client killed") {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let out = out_dir("live-client-killed");
    let child = Command::new(bin())
        .args(["live", "pg-pause-unfenced", "--out"])
        .arg(&out)
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let parent = child.id().to_string();
    // The first client process of the run, once it is stopped by the scenario's pause.
    let paused_client = || -> Option<String> {
        let ps = Command::new("ps")
            .args(["-o", "pid=,stat=", "--ppid", &parent])
            .output()
            .ok()?;
        String::from_utf8_lossy(&ps.stdout)
            .lines()
            .find(|l| {
                l.split_whitespace()
                    .nth(1)
                    .is_some_and(|s| s.starts_with('T'))
            })
            .and_then(|l| l.split_whitespace().next().map(str::to_owned))
    };
    let mut victim = None;
    for _ in 0..300 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        victim = paused_client();
        if victim.is_some() {
            break;
        }
    }
    let victim = victim.expect("a client was paused");
    Command::new("kill")
        .args(["-KILL", &victim])
        .status()
        .unwrap();
    let run = child.wait_with_output().unwrap();
    let (stdout, stderr) = text(&run);
    assert_eq!(run.status.code(), Some(4), "{stdout}{stderr}");
    assert!(
        stderr.contains("process ended outside the scenario (signal: 9"),
        "{stderr}"
    );
}

/// Whether etcd (Debian's `etcd-server`) and PostgreSQL can be started here; under CI their
/// absence fails the test.
fn etcd_installed(test: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("etcd").exists()));
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: etcd is not installed, and CI must run the live tests (.ci/run installs \
             the `etcd-server` package)"
        );
        eprintln!("{test}: SKIPPED: etcd is not installed (apt-get install etcd-server)");
    }
    found && postgres_installed(test)
}

/// Jepsen's first etcd 3.4.3 finding against a real member: a holder stopped past its session
/// lease, a second holder, and the stale write taken by the unfenced table; fenced by the
/// lock key's create revision, the same pause leaves two holders and the write rejected.
#[test]
fn k01_on_a_real_etcd_member_two_holders_and_the_fence_decides_the_write() {
    if !etcd_installed("k01 etcd") {
        return;
    }
    let (out, stdout) = live_ok(
        "live-etcd-k01-unfenced",
        &["scenarios/live/etcd-live-pause-unfenced.toml", "--expect"],
    );
    assert!(
        stdout.contains("stale-write-accepted: live 1 of 1 trials, simulation 10 of 10 seeds"),
        "{stdout}"
    );
    assert!(
        stdout.contains("not observed: etcd's own decisions"),
        "{stdout}"
    );
    let history = entries(&out.join("etcd-live-pause-unfenced/live-1/history.jsonl"));
    // client-1's token is its key's create revision, and client-2's a higher one.
    let tokens: Vec<(String, u64)> = history
        .iter()
        .filter(|e| e["f"] == "acquire" && e["type"] == "ok")
        .map(|e| {
            (
                e["node"].as_str().unwrap().to_owned(),
                e["token"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(tokens.len(), 2, "{tokens:?}");
    assert_eq!(tokens[0].0, "client-1");
    assert!(tokens[1].1 > tokens[0].1, "{tokens:?}");

    let (out, stdout) = live_ok(
        "live-etcd-k01-fenced",
        &["scenarios/live/etcd-live-pause-fenced.toml", "--expect"],
    );
    assert!(
        stdout.contains("mutual-exclusion-client: live 1 of 1 trials, simulation 10 of 10 seeds"),
        "{stdout}"
    );
    let history = entries(&out.join("etcd-live-pause-fenced/live-1/history.jsonl"));
    let late = history
        .iter()
        .find(|e| e["node"] == "client-1" && e["f"] == "write" && e["type"] != "invoke")
        .expect("client-1's write completes");
    assert_eq!(late["type"], "fail", "the fenced table rejects it");
}

/// A real three-member cluster loses its leader (asked of the cluster when the fault strikes)
/// while a lock is held: the holder's keepalives carry on through another member.
#[test]
fn k06_the_leading_etcd_member_killed_while_a_lock_is_held() {
    if !etcd_installed("k06 etcd") {
        return;
    }
    let (out, stdout) = live_ok(
        "live-etcd-k06",
        &[
            "scenarios/live/etcd-live-leader-kill.toml",
            "--expect",
            "--write-all",
        ],
    );
    assert!(stdout.contains("live: 1 of 1 trials valid"), "{stdout}");
    let history = entries(&out.join("etcd-live-leader-kill/live-1/history.jsonl"));
    let crash = events(&history, "crash");
    assert_eq!(crash.len(), 2, "a start and an end");
    let killed = crash[0]["target"].as_str().unwrap();
    assert!(killed.starts_with("etcd-"), "{killed}");
    // client-1 renewed after the kill, through a member still up.
    let killed_at = crash[0]["time_ns"].as_u64().unwrap();
    assert!(history.iter().any(|e| e["node"] == "client-1"
        && e["f"] == "renew"
        && e["type"] == "ok"
        && e["time_ns"].as_u64().unwrap() > killed_at));
}

#[test]
fn etcd_faults_without_a_live_form_are_refused_by_name() {
    let dir = out_dir("live-etcd-refusals");
    let base =
        std::fs::read_to_string(root().join("scenarios/live/etcd-live-leader-kill.toml")).unwrap();
    let base = &base[..base.find("[[faults]]").unwrap()];
    let cases = [
        (
            "[[faults]]\nkind = \"clock-jump\"\nnode = \"etcd-2\"\nat_ms = 3000\ndelta_ms = 5000\n",
            "etcd is a Go binary, which reads the clock without libc",
        ),
        (
            "[[faults]]\nkind = \"partition\"\nnode = \"leader\"\nat_ms = 3000\nduration_ms = 1000\n",
            "a partition of `leader` has no live form",
        ),
    ];
    for (n, (fault, why)) in cases.iter().enumerate() {
        let file = dir.join(format!("refused-{n}.toml"));
        let text = format!("{base}{fault}\n[expect]\nverdict = \"valid\"\n");
        std::fs::write(&file, text).unwrap();
        refused(&[file.to_str().unwrap()], why);
    }
}

/// Jepsen's second etcd 3.4.3 finding on the real server: the lock API answers a waiter whose
/// session lease expired while it waited (etcd 3.4.23 still does), and a client that trusts
/// the answer holds the lock beside the next waiter; a client that checks its own key fails
/// its acquire instead.
#[test]
fn k07_a_real_etcd_returns_a_lock_to_a_waiter_whose_lease_expired() {
    if !etcd_installed("k07 etcd") {
        return;
    }
    let (out, stdout) = live_ok(
        "live-etcd-k07-trusting",
        &[
            "scenarios/live/etcd-live-lock-after-expiry.toml",
            "--expect",
        ],
    );
    assert!(
        stdout.contains("mutual-exclusion-client: live 1 of 1 trials, simulation 10 of 10 seeds"),
        "{stdout}"
    );
    let history = entries(&out.join("etcd-live-lock-after-expiry/live-1/history.jsonl"));
    // client-2 was stopped while it waited, and its acquire returned only after the pause.
    let resumed_at = events(&history, "pause")[1]["time_ns"].as_u64().unwrap();
    let granted = history
        .iter()
        .find(|e| e["node"] == "client-2" && e["f"] == "acquire" && e["type"] == "ok")
        .expect("client-2's acquire returns");
    assert!(granted["time_ns"].as_u64().unwrap() > resumed_at);

    let (_, stdout) = live_ok(
        "live-etcd-k07-checking",
        &[
            "scenarios/live/etcd-live-lock-checks-own-key.toml",
            "--expect",
            "--write-all",
        ],
    );
    assert!(stdout.contains("live: 1 of 1 trials valid"), "{stdout}");
}

/// A holder cut off from its etcd member through the proxy: its keepalives go unanswered,
/// etcd expires its lease and the next caller holds; the fenced table rejects the late write.
#[test]
fn k15_a_partition_cuts_the_holder_off_from_its_etcd_member() {
    if !etcd_installed("k15 etcd") {
        return;
    }
    let (out, stdout) = live_ok(
        "live-etcd-k15",
        &[
            "scenarios/live/etcd-live-holder-partitioned.toml",
            "--expect",
        ],
    );
    assert!(
        stdout.contains("mutual-exclusion-client: live 1 of 1 trials, simulation 10 of 10 seeds"),
        "{stdout}"
    );
    let history = entries(&out.join("etcd-live-holder-partitioned/live-1/history.jsonl"));
    let partition = events(&history, "partition");
    let cut_at = partition[0]["time_ns"].as_u64().unwrap();
    let healed_at = partition[1]["time_ns"].as_u64().unwrap();
    // Every keepalive that ends while the link is cut ends without an answer.
    let across: Vec<&str> = history
        .iter()
        .filter(|e| e["node"] == "client-1" && e["f"] == "renew" && e["type"] != "invoke")
        .filter(|e| (cut_at..healed_at).contains(&e["time_ns"].as_u64().unwrap()))
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert!(
        !across.is_empty() && across.iter().all(|t| *t == "info"),
        "{across:?}"
    );
    let late = history
        .iter()
        .find(|e| e["node"] == "client-1" && e["f"] == "write" && e["type"] != "invoke")
        .expect("client-1's write completes");
    assert_eq!(late["type"], "fail", "the fenced table rejects it");
}

/// An `etcd` member of the test's own on free ports in a folder of its own (killed and
/// deleted on drop), as a user's cluster of one.
struct UserEtcd {
    child: std::process::Child,
    folder: std::path::PathBuf,
    url: String,
}

impl UserEtcd {
    fn start() -> Self {
        let port = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        };
        let (client, peer) = (port(), port());
        let folder = std::env::temp_dir().join(format!("fencesim-test-etcd-{client}"));
        let url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let child = Command::new("etcd")
            .args(["--name", "own", "--data-dir"])
            .arg(&folder)
            .args([
                "--listen-client-urls",
                &url,
                "--advertise-client-urls",
                &url,
            ])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("own={peer_url}")])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let etcd = UserEtcd { child, folder, url };
        for _ in 0..200 {
            if etcd.call("/v3/maintenance/status", "{}").is_ok() {
                return etcd;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the test's etcd did not answer");
    }

    /// POST to the member's JSON gateway, with a token if given.
    fn call(&self, path: &str, body: &str) -> Result<serde_json::Value, String> {
        let value: serde_json::Value = serde_json::from_str(body).unwrap();
        let agent = fencesim_live::etcd_gateway::agent(std::time::Duration::from_secs(2));
        fencesim_live::etcd_gateway::post(&agent, &self.url, path, &value)
    }

    /// Turn on etcd's auth with user `root` and `password`.
    fn require_password(&self, password: &str) {
        let user = format!(r#"{{"name": "root", "password": "{password}"}}"#);
        self.call("/v3/auth/user/add", &user).unwrap();
        self.call("/v3/auth/user/grant", r#"{"user": "root", "role": "root"}"#)
            .unwrap();
        self.call("/v3/auth/enable", "{}").unwrap();
    }

    /// The keys (decoded) under `prefix`, read as `root` with `password`.
    fn keys(&self, prefix: &str, password: &str) -> Vec<String> {
        let agent = fencesim_live::etcd_gateway::agent(std::time::Duration::from_secs(2));
        let mut member = fencesim_live::etcd_gateway::Gateway::new(
            &self
                .url
                .replace("http://", &format!("http://root:{password}@")),
        );
        let (key, end) = (b64(prefix), b64(&format!("{prefix}\u{7f}")));
        let body = serde_json::json!({ "key": key, "range_end": end, "keys_only": true });
        let answer = member.post(&agent, "/v3/kv/range", &body).unwrap();
        let kvs = answer["kvs"].as_array().cloned().unwrap_or_default();
        kvs.iter()
            .map(|kv| unb64(kv["key"].as_str().unwrap()))
            .collect()
    }
}

impl Drop for UserEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.folder);
    }
}

fn b64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn unb64(text: &str) -> String {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

/// `--etcd`: a cluster of the user's, with auth on. The run's lock names go under a prefix of
/// its own and leave the user's keys alone; the password (in the URL, or from
/// ETCDCTL_PASSWORD) reaches no output and no file; what cannot work on a cluster of the
/// user's is refused before anything starts.
#[test]
fn an_etcd_cluster_of_the_users_keeps_its_keys_and_its_password() {
    if !etcd_installed("user etcd") {
        return;
    }
    let etcd = UserEtcd::start();
    let secret = "etcd-Pw-4u";
    etcd.call(
        "/v3/kv/put",
        &format!(
            r#"{{"key": "{}", "value": "{}"}}"#,
            b64("precious"),
            b64("data")
        ),
    )
    .unwrap();
    // A user who may only read under the run's prefix.
    etcd.call("/v3/auth/role/add", r#"{"name": "reader"}"#)
        .unwrap();
    let read_only = serde_json::json!({ "name": "reader", "perm": {
        "permType": "READ", "key": b64("fencesim-live-"), "range_end": b64("fencesim-live.") } });
    etcd.call("/v3/auth/role/grant", &read_only.to_string())
        .unwrap();
    etcd.call(
        "/v3/auth/user/add",
        r#"{"name": "lim", "password": "lim-Pw-1"}"#,
    )
    .unwrap();
    etcd.call(
        "/v3/auth/user/grant",
        r#"{"user": "lim", "role": "reader"}"#,
    )
    .unwrap();
    etcd.require_password(secret);
    let with_password = etcd
        .url
        .replace("http://", &format!("http://root:{secret}@"));
    let scenario = "scenarios/live/etcd-live-pause-unfenced.toml";
    let (stdout, files) = live_keeps_secret(
        "live-user-etcd",
        &[scenario, "--expect", "--etcd", &with_password],
        &[],
        secret,
    );
    // The same defect as on the members fencesim starts.
    assert!(
        stdout.contains("stale-write-accepted: live 1 of 1 trials"),
        "{stdout}"
    );
    let shown = etcd.url.replace("http://", "http://root:***@");
    assert!(
        stdout.contains(&format!("of the user's: {shown}")),
        "{stdout}"
    );
    // The reproduce line names the user and leaves the password to the environment.
    let rerun = etcd.url.replace("http://", "http://root@");
    let report = &files
        .iter()
        .find(|(p, _)| p.ends_with("report.json"))
        .unwrap()
        .1;
    assert!(report.contains(&format!("--etcd {rerun}")), "{report}");
    // From ETCDCTL_PASSWORD, with the user in the URL.
    live_keeps_secret(
        "live-user-etcd-env",
        &[scenario, "--etcd", &rerun],
        &[("ETCDCTL_PASSWORD", secret)],
        secret,
    );
    // The user's key is there; the run's keys went with their leases (2 s).
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert_eq!(etcd.keys("precious", secret), ["precious"]);
    assert_eq!(etcd.keys("fencesim-live-", secret), Vec::<String>::new());

    // Refused, exit 2, naming why, the password nowhere.
    let wrong = etcd.url.replace("http://", "http://root:not-Its-pw@");
    let reader = etcd.url.replace("http://", "http://lim:lim-Pw-1@");
    let via_localhost = with_password.replace("127.0.0.1", "localhost");
    for (args, expected) in [
        (
            vec![scenario, "--etcd", &wrong],
            "authenticating as \"root\"",
        ),
        (
            vec![scenario, "--etcd", &etcd.url],
            "user name is empty: the cluster has auth enabled: give a user in the URL",
        ),
        (
            vec![scenario, "--etcd", &reader],
            "permission denied: the user may not write under",
        ),
        (
            vec![
                "scenarios/live/etcd-live-leader-kill.toml",
                "--etcd",
                &with_password,
            ],
            "faults on etcd members and network faults need the members fencesim starts",
        ),
        (
            vec![
                "tests/fixtures/live-user-redis.toml",
                "--etcd",
                &with_password,
            ],
            "(kind = \"redlock\") does not run on etcd",
        ),
        (
            vec![scenario, "--etcd", &with_password, "--etcd", &with_password],
            "is given twice",
        ),
        (
            vec![scenario, "--etcd", &with_password, "--etcd", &via_localhost],
            "is the same member as",
        ),
    ] {
        let run = live(&args);
        let (stdout, stderr) = text(&run);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stdout}{stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(
            !stderr.contains(secret) && !stderr.contains("not-Its-pw"),
            "{stderr}"
        );
    }
}

/// A partition between etcd members cuts exactly the links it names. Each member's peer port
/// is behind a proxy that tells the connecting member by the process owning the connection, so
/// that even a follower's forwarded keepalives (`POST /leases`, which name no sender) stop.
/// Here one follower is cut off from both other members, and the clients are not cut at all:
/// a keepalive through it goes unanswered, the other follower's reaches the leader, the cut
/// follower still answers its own clients, and after the heal its keepalives go through again.
#[test]
fn a_partition_between_etcd_members_cuts_exactly_those_links() {
    if !etcd_installed("etcd peer partition") {
        return;
    }
    let names: Vec<String> = (1..=3).map(|n| format!("etcd-{n}")).collect();
    let cluster = fencesim_live::etcd_server::start_cluster(&names, true, 1).unwrap();
    assert_eq!(cluster.peer_links.len(), 6, "one link per ordered pair");
    let urls: Vec<String> = cluster.members.iter().map(|m| m.url()).collect();
    let leader = fencesim_live::etcd_gateway::leader(&urls).expect("a leader");
    let i = names.iter().position(|n| *n == leader).unwrap();
    let (cut, other) = ((i + 1) % 3, (i + 2) % 3);
    let agent = fencesim_live::etcd_gateway::agent(std::time::Duration::from_secs(2));
    let call = |member: usize, path: &str, body: serde_json::Value| {
        fencesim_live::etcd_gateway::post(&agent, &urls[member], path, &body)
    };
    let grant = call(i, "/v3/lease/grant", serde_json::json!({ "TTL": 60 })).unwrap();
    let lease = grant["ID"].as_str().unwrap().to_owned();
    let keepalive = |member: usize| {
        call(
            member,
            "/v3/lease/keepalive",
            serde_json::json!({ "ID": lease }),
        )
        .map(|a| a["result"]["TTL"].as_str().unwrap_or("0").to_owned())
    };
    assert!(
        keepalive(cut).is_ok(),
        "through the follower before the cut"
    );

    let set = |stopped: bool| {
        for link in &cluster.peer_links {
            if link.client == names[cut] || link.server == names[cut] {
                link.set(|l| {
                    l.up.stopped = stopped;
                    l.down.stopped = stopped;
                });
            }
        }
    };
    set(true);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let through_cut = keepalive(cut);
    assert!(
        through_cut.is_err(),
        "forwarded across the cut: {through_cut:?}"
    );
    assert_eq!(
        keepalive(other).as_deref(),
        Ok("60"),
        "the other follower's link is not cut"
    );
    assert!(
        call(cut, "/v3/maintenance/status", serde_json::json!({})).is_ok(),
        "its clients still reach the cut member"
    );
    assert_eq!(
        fencesim_live::etcd_gateway::leader(&urls[other..=other]).as_deref(),
        Some(leader.as_str()),
        "the majority kept its leader"
    );

    set(false);
    let healed = (0..40).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(250));
        keepalive(cut).is_ok_and(|ttl| ttl != "0")
    });
    assert!(
        healed,
        "keepalives through the member go through after the heal"
    );
    drop(cluster);

    // The scenario: client-1's keepalive through etcd-1 goes unanswered in the cut, and its
    // session carries the lease on through another member.
    let (out, stdout) = live_ok(
        "live-etcd-member-partitioned",
        &[
            "scenarios/live/etcd-live-member-partitioned.toml",
            "--expect",
            "--write-all",
        ],
    );
    assert!(stdout.contains("live: 1 of 1 trials valid"), "{stdout}");
    let history = entries(&out.join("etcd-live-member-partitioned/live-1/history.jsonl"));
    let cut_at = events(&history, "partition")[0]["time_ns"]
        .as_u64()
        .unwrap();
    let renewals: Vec<&str> = history
        .iter()
        .filter(|e| e["node"] == "client-1" && e["f"] == "renew" && e["type"] != "invoke")
        .filter(|e| e["time_ns"].as_u64().unwrap() > cut_at)
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    // A cut-off leader answers keepalives itself until it finds it lost its majority (an
    // election timeout): the cut is felt at once or a little later, and the lease carries on.
    let felt = renewals.iter().position(|r| *r == "info");
    let felt = felt.unwrap_or_else(|| panic!("no keepalive went unanswered: {renewals:?}"));
    assert!(renewals[felt..].contains(&"ok"), "{renewals:?}");
}
