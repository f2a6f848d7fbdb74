//! Local clocks (`mono_ms`, `wall_ms`) may be left out of a history recorded by a real system
//! (issue 31 item 4), and the reader then reads them as 0. That is sound only while no check
//! reads them: these tests hold every check to that, on the recorded histories the repository
//! keeps (the client-view check included, which judges beliefs by their events' true times,
//! not by the clients' clocks), and judge a client history that has none.

use std::path::{Path, PathBuf};

use fencesim_checker::{check, Verdict};
use fencesim_history::{read_jsonl, Entry, History};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> History {
    let text = std::fs::read(path).unwrap();
    read_jsonl(&text[..]).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `history` with every local clock reading replaced by `clock(index)`.
fn with_clocks(history: &History, clock: impl Fn(u64) -> (i64, i64)) -> History {
    let mut h = history.clone();
    for entry in &mut h.entries {
        let at = match entry {
            Entry::Op(op) => &mut op.at,
            Entry::Event(e) => &mut e.at,
        };
        (at.mono_ms, at.wall_ms) = clock(at.index);
    }
    h
}

/// Every check gives the same result whatever the local clocks read: left out (0), or far
/// off true time and out of order.
#[test]
fn no_check_reads_the_local_clocks() {
    let examples = root().join("reports/examples");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&examples)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let mut judged = 0;
    for dir in dirs {
        let history = read(&dir.join("0/history.jsonl"));
        let expected = check(&history);
        for (what, clock) in [
            ("left out", (|_| (0, 0)) as fn(u64) -> (i64, i64)),
            ("scrambled", |i| {
                (-((i * 7919 % 1000) as i64), (i * 104_729 % 77) as i64)
            }),
        ] {
            assert_eq!(
                check(&with_clocks(&history, clock)),
                expected,
                "{}: clocks {what}",
                dir.display()
            );
        }
        judged += 1;
    }
    assert!(judged >= 9, "only {judged} histories");
}

/// A client history converted from a real system, with true times and no local clocks, and
/// the same history with neither (the file's order standing for time), are judged alike.
#[test]
fn a_client_history_without_local_clocks_is_judged() {
    let dir = root().join("tests/fixtures/histories");
    let timed = check(&read(
        &dir.join("client-history-without-local-clocks.jsonl"),
    ));
    let ordered = check(&read(&dir.join("client-history-in-file-order.jsonl")));
    assert_eq!(
        (timed.verdict, timed.violations.len(), timed.unknown.len()),
        (Verdict::Valid, 0, 0),
        "{timed:?}"
    );
    assert_eq!(timed, ordered);
    // Reading 7 instead of 2 after the write of 2 is caught in both.
    for name in [
        "client-history-without-local-clocks.jsonl",
        "client-history-in-file-order.jsonl",
    ] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let last = text.lines().last().unwrap();
        let stale = text.replace(last, &last.replace(r#""value":"2""#, r#""value":"7""#));
        let result = check(&read_jsonl(stale.as_bytes()).unwrap());
        assert_eq!(result.verdict, Verdict::Invalid, "{name}");
        assert_eq!(result.violations[0].witnesses, [12, 13], "{name}");
    }
}
