//! The ZooKeeper recipe under fencesim, the two ways a user runs a design of their own: from
//! their test suite (`check_scenario` of an engine with their design) and through their own
//! binary, which is fencesim's whole command line with their design added.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root: scenario paths below are relative to it.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// A fresh output folder for one test.
fn out_dir(test: &str) -> PathBuf {
    let dir = root().join("target/test-runs/zookeeper-lock").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Run this crate's binary (`zookeeper-lock ARGS`) in the workspace root.
fn cli(args: &[&str]) -> (Option<i32>, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(env!("CARGO_BIN_EXE_zookeeper-lock"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&stdout).into_owned() + &String::from_utf8_lossy(&stderr);
    (status.code(), text)
}

const RANDOM: &str = "examples/zookeeper-lock/scenarios/zk-random-nemesis.toml";
const DEFECT: &str = "examples/zookeeper-lock/scenarios/zk-take-on-watch.toml";
const SCRIPTED: &str = "examples/zookeeper-lock/scenarios/zk-waiter-expires.toml";

/// The recipe is safe under every fault of the random nemesis (the README's sweep runs 1000
/// seeds; the test suite 200, about 2 s).
#[test]
fn the_recipe_is_safe_under_the_random_nemesis() {
    let scenario = root().join(RANDOM).display().to_string();
    let checked = zookeeper_lock::engine()
        .check_scenario(&scenario, 0..200)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(checked.seeds_run, 200);
}

/// The scripted trap: with the defect, client-3 takes the lock when client-2's session
/// expires although client-1 still holds it; with the recipe, it waits for client-1.
#[test]
fn a_waiter_that_takes_the_lock_when_its_predecessor_expires_breaks_it() {
    let engine = zookeeper_lock::engine();
    let path = root().join(SCRIPTED);
    let defect = engine.load_scenario(&path).unwrap();
    let run = engine.simulate(&defect, 0);
    let result = fencesim::check(&run.history);
    let kinds: Vec<&str> = result.violations.iter().map(|v| v.kind.as_str()).collect();
    // The waiter that took the lock on its own wrote with its znode's czxid, which the
    // server never granted it (its znode was never the lowest): token-not-granted names the
    // client's fault, beside the overlap it caused.
    assert_eq!(
        kinds,
        ["token-not-granted", "mutual-exclusion-client"],
        "{:?}",
        result.violations
    );
    assert!(
        result.violations[0]
            .explanation
            .starts_with("key \"register\": client-3 presented token 6 in its write"),
        "{}",
        result.violations[0].explanation
    );
    let explanation = &result.violations[1].explanation;
    assert!(
        explanation.contains("client client-3 with token 6")
            && explanation.contains("while client-1 with token 2"),
        "{explanation}"
    );
    // The fenced resource still refused client-1's older token after client-3's write.
    let rejected: Vec<(String, Option<u64>)> = run
        .history
        .events()
        .filter(|e| e.event.as_str() == "reject")
        .map(|e| (e.holder.as_deref().unwrap_or("").to_owned(), e.token))
        .collect();
    assert_eq!(rejected, [("client-1".to_owned(), Some(2))]);

    let text = std::fs::read_to_string(&path).unwrap();
    let recipe = text
        .replace(
            "predecessor_gone = \"take\"",
            "predecessor_gone = \"recheck\"",
        )
        .replace(
            "verdict = \"invalid\"\nviolations = [\"mutual-exclusion-client\"]",
            "verdict = \"valid\"",
        );
    assert_ne!(recipe, text);
    let dir = out_dir("recipe");
    let file = dir.join("zk-waiter-recheck.toml");
    std::fs::write(&file, recipe).unwrap();
    engine
        .check_scenario(&file.display().to_string(), 0..10)
        .unwrap_or_else(|e| panic!("{e}"));
    // client-3 got the lock from client-1, after its release, with the next czxid.
    let scenario = engine.load_scenario(&file).unwrap();
    let history = engine.simulate(&scenario, 0).history;
    let grants: Vec<(String, Option<u64>)> = history
        .events()
        .filter(|e| e.event.as_str() == "grant")
        .map(|e| (e.holder.as_deref().unwrap_or("").to_owned(), e.token))
        .collect();
    assert_eq!(
        grants[..2],
        [
            ("client-1".to_owned(), Some(2)),
            ("client-3".to_owned(), Some(6))
        ]
    );
}

/// Explore finds the defect under the random nemesis, and shrink cuts the drawn faults down
/// to a scenario that still shows it, which `run` reproduces.
#[test]
fn explore_finds_the_defect_and_shrink_minimises_it() {
    let out = out_dir("explore");
    let out_arg = out.to_str().unwrap();
    let (code, text) = cli(&[
        "explore", DEFECT, "--seeds", "0..40", "--sweep", "--quiet", "--shrink", "--out", out_arg,
    ]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains(
            "7 seeds run (stopped at the first counterexample) of 0..40: 6 valid, 1 invalid"
        ) && text.contains("counterexample seeds: 6\n"),
        "{text}"
    );
    let shrunk = out.join("shrunk/zk-take-on-watch-seed-6-min.toml");
    assert!(shrunk.is_file(), "{text}");
    assert!(
        text.contains("shrunk seed 6 of zk-take-on-watch keeping token-not-granted: faults 21 -> 3, clients 3 -> 3"),
        "{text}"
    );
    let (code, text) = cli(&[
        "run",
        shrunk.to_str().unwrap(),
        "--seed",
        "6",
        "--out",
        out_arg,
    ]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("seed 6: INVALID (1 violation: token-not-granted)"),
        "{text}"
    );
    assert!(text.contains("reproduce: zookeeper-lock run "), "{text}");
}

/// The binary is fencesim's command line with the design added; its knobs are refused as
/// the built-ins' are, with the file, line and column.
#[test]
fn the_binary_knows_the_design_and_refuses_bad_knobs() {
    let (code, text) = cli(&["list", "--designs"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("zookeeper"), "{text}");
    assert!(text.contains("predecessor_gone"), "{text}");

    let dir = out_dir("bad-knob");
    let text = std::fs::read_to_string(root().join(SCRIPTED)).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        text.replace("predecessor_gone = \"take\"", "predecessor_gone = \"grab\""),
    )
    .unwrap();
    let (code, text) = cli(&["run", bad.to_str().unwrap(), "--seed", "0"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains(":49:20: field `clients.predecessor_gone`: unknown variant `grab`, expected `recheck` or `take`"),
        "{text}"
    );
    // An unknown client field lists the workload's fields and this design's client knobs,
    // not the other designs'.
    let bogus = dir.join("bogus.toml");
    let source = std::fs::read_to_string(root().join(SCRIPTED)).unwrap();
    std::fs::write(
        &bogus,
        source.replace("predecessor_gone = \"take\"", "bogus_client = 1"),
    )
    .unwrap();
    let (code, text) = cli(&["run", bogus.to_str().unwrap(), "--seed", "0"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains(
            "field `clients.bogus_client`: unknown field `bogus_client`, expected one of \
             `predecessor_gone`, `acquire_wait_ms`, `name`, "
        ) && !text.contains("reclaim"),
        "{text}"
    );
}
