//! The fuzz targets' seed corpus and every crash input they ever found, replayed by a plain
//! `cargo test` through the same functions the targets call (fuzz/src/lib.rs, included here):
//! what once crashed the tool stays fixed, and the seeds stay valid inputs.

#[allow(dead_code)]
#[path = "../../fuzz/src/lib.rs"]
mod fuzz;

use crate::support;

use std::path::Path;

/// Every file in `fuzz/DIR/TARGET/`, sorted, with its name.
fn inputs(dir: &str, target: &str) -> Vec<(String, Vec<u8>)> {
    let folder = support::root().join("fuzz").join(dir).join(target);
    let mut files: Vec<_> = std::fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| (name(&p), std::fs::read(&p).expect("readable")))
        .collect()
}

fn name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

fn replay(target: &str, body: fn(&[u8]), at_least: usize) {
    let mut count = 0;
    for dir in ["seeds", "regressions"] {
        for (file, data) in inputs(dir, target) {
            // A panic names the input that caused it.
            let outcome = std::panic::catch_unwind(|| body(&data));
            assert!(outcome.is_ok(), "fuzz/{dir}/{target}/{file} panicked");
            count += 1;
        }
    }
    assert!(count >= at_least, "{target}: only {count} inputs");
}

#[test]
fn the_scenario_corpus_replays() {
    replay("scenario", fuzz::scenario, 10);
}

#[test]
fn the_jsonl_corpus_replays() {
    replay("history_jsonl", fuzz::history_jsonl, 5);
}

#[test]
fn the_edn_corpus_replays() {
    replay("history_edn", fuzz::history_edn, 5);
}

/// The seeds are real inputs, not noise: each bundled kind of seed parses.
#[test]
fn the_seeds_are_valid_inputs() {
    for (file, data) in inputs("seeds", "scenario") {
        let text = String::from_utf8(data).expect("UTF-8");
        if file.starts_with("valid-") {
            fencesim_scenario::parse(&text, &file, None, crate::support::engine().registry())
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    for (file, data) in inputs("seeds", "history_jsonl") {
        if file.starts_with("valid-") {
            fencesim_history::read_jsonl(&data[..]).unwrap_or_else(|e| panic!("{file}: {e}"));
        }
    }
    for (file, data) in inputs("seeds", "history_edn") {
        if file.starts_with("valid-") {
            let text = String::from_utf8(data).expect("UTF-8");
            fencesim_history::read_jepsen_edn(&text, "seed")
                .unwrap_or_else(|e| panic!("{file}: {e}"));
        }
    }
}
