//! The histories the repository keeps, recorded by fencesim's simulator (the curated reports,
//! the fuzz seeds) or exported from them, still read: the reader's checks of each record and
//! of the pairing of operations refuse inconsistent files, never the simulator's own.

use std::path::{Path, PathBuf};

use fencesim_history::{read_jepsen_edn, read_jsonl, write_jsonl};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The files under `dir` (recursively) whose name ends in `suffix`, sorted.
fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(&path, suffix));
        } else if path.to_string_lossy().ends_with(suffix) {
            out.push(path);
        }
    }
    out.sort();
    out
}

#[test]
fn every_recorded_jsonl_history_reads_and_round_trips() {
    let mut read = 0;
    for dir in ["reports/examples", "fuzz/seeds/history_jsonl"] {
        for path in files(&root().join(dir), ".jsonl") {
            let text = std::fs::read(&path).unwrap();
            let history =
                read_jsonl(&text[..]).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let mut written = Vec::new();
            write_jsonl(&history, &mut written).unwrap();
            assert_eq!(
                read_jsonl(&written[..]).unwrap(),
                history,
                "{}",
                path.display()
            );
            read += 1;
        }
    }
    assert!(read >= 13, "only {read} histories");
}

#[test]
fn every_exported_edn_seed_reads() {
    let seeds = files(&root().join("fuzz/seeds/history_edn"), ".edn");
    assert!(seeds.len() >= 6);
    for path in seeds {
        let text = std::fs::read_to_string(&path).unwrap();
        read_jepsen_edn(&text, "seed").unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

/// The inputs that once crashed the reader still come back as errors, not crashes.
#[test]
fn the_fuzz_regressions_are_refused_without_a_crash() {
    for path in files(&root().join("fuzz/regressions/history_jsonl"), ".jsonl") {
        let text = std::fs::read(&path).unwrap();
        let err = read_jsonl(&text[..]).expect_err(&path.display().to_string());
        assert!(err.to_string().starts_with("line 1: "), "{err}");
    }
}
