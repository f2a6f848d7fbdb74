//! What each fuzz target does with one input: parse it, and where it parses, check the
//! properties that must hold for every input (a written form reads back the same; the checker
//! judges it without panicking and within its budgets). The fuzz targets call these, and so
//! does `tests/it/fuzz_corpus.rs` in the main workspace (it includes this file), replaying the
//! seed corpus and every crash input ever found with a plain `cargo test`.
//!
//! Whatever the input, these functions must return: a panic, an abort, a hang or a stack
//! overflow is a bug in fencesim's readers (issue: no input may crash the tool).

use fencesim_checker::{check_with, CheckOptions};
use fencesim_history::edn::Edn;
use fencesim_history::{
    read_jepsen_edn, read_jsonl, write_jepsen_edn, write_jsonl, Entry, History, Op,
};

/// Small search budgets: a fuzz input is judged in well under the fuzzer's timeout, and the
/// budgets themselves are under test (a history past them must come back unknown, quickly).
const OPTIONS: CheckOptions = CheckOptions {
    linearizability_steps: 20_000,
    linearizability_total_steps: 50_000,
    ..CheckOptions::DEFAULT
};

/// The built-in designs and resources a scenario may name: the one list the `fencesim`
/// crate's registry is built from (`fencesim_builtin`), without the simulators, which the fuzz
/// workspace does not build.
fn designs() -> &'static fencesim_scenario::Catalog {
    static DESIGNS: std::sync::OnceLock<fencesim_scenario::Catalog> = std::sync::OnceLock::new();
    DESIGNS.get_or_init(fencesim_builtin::catalog)
}

/// A scenario file: validated, and if valid, written back with `to_toml` (what `shrink` does)
/// and read again to the same scenario.
pub fn scenario(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(scenario) = fencesim_scenario::parse(text, "fuzz.toml", None, designs()) else {
        return;
    };
    let written = fencesim_scenario::to_toml(&scenario);
    match fencesim_scenario::parse(&written, "written.toml", None, designs()) {
        Ok(back) => assert_eq!(back, scenario, "to_toml changed the scenario:\n{written}"),
        Err(e) => panic!("to_toml wrote a file that does not parse: {e}\n{written}"),
    }
}

/// A history.jsonl: read, and if it reads, written back byte for byte readable to the same
/// history, then checked.
pub fn history_jsonl(data: &[u8]) {
    let Ok(history) = read_jsonl(data) else {
        return;
    };
    let mut written = Vec::new();
    write_jsonl(&history, &mut written).expect("writing to memory");
    let back = read_jsonl(&written[..]).expect("a written history reads back");
    assert_eq!(back, history, "a history changed through write_jsonl");
    judge(&history);
}

/// A Jepsen history.edn: read, and if it reads, exported and read back to the same operations,
/// then checked. The export writes fencesim's values, which are text, as EDN strings, so each
/// value comes back as that string's canonical text (the integer `5`, read as `5`, is written
/// `"5"` and read back as `"5"` with its quotes); everything else comes back unchanged.
pub fn history_edn(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(history) = read_jepsen_edn(text, "fuzz") else {
        return;
    };
    let mut written = Vec::new();
    write_jepsen_edn(&history, &mut written).expect("writing to memory");
    let written = String::from_utf8(written).expect("the EDN writer writes UTF-8");
    let back = read_jepsen_edn(&written, "fuzz").expect("an exported history reads back");
    let as_string = |v: &Option<String>| v.clone().map(|v| Edn::Str(v).canonical());
    let exported: Vec<Entry> = history
        .entries
        .iter()
        .map(|e| match e {
            Entry::Op(op) => Entry::Op(Op {
                value: as_string(&op.value),
                expected: as_string(&op.expected),
                ..op.clone()
            }),
            other => other.clone(),
        })
        .collect();
    assert_eq!(
        back.entries, exported,
        "operations changed through the export:\n{written}"
    );
    judge(&history);
}

fn judge(history: &History) {
    let result = check_with(history, &OPTIONS);
    // Every violation points at records of the history, by their index (a position, or in
    // a Jepsen EDN file that numbers its operations, their `:index`).
    for v in &result.violations {
        for w in &v.witnesses {
            assert!(
                history.entries.iter().any(|e| e.at().index == *w),
                "{}: witness {w} is the index of none of the history's {} entries",
                v.kind,
                history.entries.len()
            );
        }
    }
}
