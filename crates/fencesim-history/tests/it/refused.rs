//! Records that say too little, and operations that do not pair up, are refused by both
//! readers with the lines involved (issue 31 item 4, issue 38 items 2 and 3). Each file in
//! `tests/fixtures/histories/` named `refused-*` was judged valid before.

use std::path::Path;

use fencesim_history::{read_jepsen_edn, read_jsonl, OpType};

/// The reader's error for a fixture file.
fn refusal(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/histories")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let read = if name.ends_with(".edn") {
        read_jepsen_edn(&text, "fixture")
    } else {
        read_jsonl(text.as_bytes())
    };
    read.map(|_| ()).expect_err(name).to_string()
}

/// A JSON Lines file of these entries, numbered by the reader (no index, no clocks).
fn jsonl(lines: &[&str]) -> String {
    let ops: Vec<String> = lines
        .iter()
        .map(|l| format!("{{\"record\":{l}}}\n"))
        .collect();
    match read_jsonl(ops.concat().as_bytes()) {
        Ok(_) => "read".to_owned(),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_record_without_what_its_kind_needs_is_refused() {
    assert_eq!(
        refusal("refused-bare-accept.jsonl"),
        "line 2: field `key`: missing: an accept names the key written"
    );
    assert_eq!(
        refusal("refused-bare-grant.jsonl"),
        "line 2: field `lock`: missing: a grant names the lock, holder and token of its lease"
    );
    let event = |fields: &str| jsonl(&[&format!("\"event\",\"node\":\"n\",{fields}")]);
    for (fields, says) in [
        (
            r#""event":"grant","lock":"l","token":1"#,
            "field `holder`: missing: a grant names the lock, holder and token of its lease",
        ),
        (
            r#""event":"release","lock":"l","holder":"c""#,
            "field `token`: missing: a release names the lock, holder and token of its lease",
        ),
        (
            r#""event":"renew""#,
            "field `lock`: missing: a renew names the lock, holder and token of its lease",
        ),
        (
            r#""event":"expire","lock":"l""#,
            "field `token`: missing: an expire names the lock and token of the lease it ends",
        ),
        (
            r#""event":"revoke","token":3"#,
            "field `lock`: missing: a revoke names the lock and token of the lease it ends",
        ),
        (
            r#""event":"reject","token":3"#,
            "field `key`: missing: a reject names the key written",
        ),
        (
            r#""event":"belief","lock":"l","token":1"#,
            "field `phase`: missing: a belief starts or ends (phase), on a lock, and a start \
             names its token",
        ),
        (
            r#""event":"belief","phase":"start","lock":"l""#,
            "field `token`: missing: a belief starts or ends (phase), on a lock, and a start \
             names its token",
        ),
        (
            r#""event":"pause","target":"c""#,
            "field `phase`: missing: a nemesis action (pause) starts or ends: phase \"start\" \
             or \"end\"",
        ),
        (
            r#""event":"final-heal","phase":"start","time_ns":0"#,
            "field `window_ms`: missing: a final-heal starts or ends (phase), and its start \
             gives the window in which a write is due",
        ),
    ] {
        assert_eq!(event(fields), format!("line 1: {says}"), "{fields}");
    }
    // What each kind may leave out: an expire's holder, an accept's token and writer (a
    // token-less mutation), a belief end's token, a leader's everything.
    for fields in [
        r#""event":"expire","lock":"l","token":1"#,
        r#""event":"accept","key":"k""#,
        r#""event":"belief","phase":"end","lock":"l""#,
        r#""event":"leader""#,
    ] {
        assert_eq!(event(fields), "read", "{fields}");
    }
}

#[test]
fn operations_that_do_not_pair_are_refused_with_both_lines() {
    assert_eq!(
        refusal("refused-write-completed-by-read.jsonl"),
        "line 3: an ok read on process 0 completes its write invoked at line 2: a completion \
         has its invocation's f"
    );
    assert_eq!(
        refusal("refused-completed-twice.jsonl"),
        "line 4: a fail write completes no operation: process 0's write invoked at line 2 was \
         already completed (ok) at line 3"
    );
    assert_eq!(
        refusal("refused-completion-without-invoke.jsonl"),
        "line 2: an ok write completes no operation: process 0 invoked nothing before it"
    );
    assert_eq!(
        refusal("refused-completion-on-another-key.jsonl"),
        "line 3: an ok write on key \"b\" completes process 0's write on key \"a\" invoked at \
         line 2: a completion is on its invocation's key"
    );
    assert_eq!(
        refusal("refused-event-answers-nothing.jsonl"),
        "line 3: field `op`: expected the index of the invoke this accept answers, found 5, \
         which no entry has (the history has 2 entries)"
    );
    // The EDN reader makes the same check, with its own lines.
    assert_eq!(
        refusal("refused-write-completed-by-read.edn"),
        "line 2: an ok read on process 0 completes its write invoked at line 1: a completion \
         has its invocation's f"
    );
}

#[test]
fn more_pairings_refused_and_jepsens_conventions_kept() {
    let op = |p: u64, t: &str, f: &str| {
        format!("\"op\",\"process\":{p},\"node\":\"c\",\"type\":\"{t}\",\"f\":\"{f}\",\"key\":\"k\",\"value\":\"1\"")
    };
    // A process runs one operation at a time.
    assert_eq!(
        jsonl(&[&op(0, "invoke", "write"), &op(0, "invoke", "read")]),
        "line 2: an invoke of a read on process 0, whose write invoked at line 1 has not \
         completed: a process runs one operation at a time (Jepsen's rule), so a completion is \
         missing or two processes share a number"
    );
    // An event's op must be an invoke.
    assert_eq!(
        jsonl(&[
            &op(0, "invoke", "write"),
            &op(0, "ok", "write"),
            "\"event\",\"node\":\"resource\",\"event\":\"accept\",\"key\":\"k\",\"op\":1",
        ]),
        "line 3: field `op`: expected the index of the invoke this accept answers, found 1, \
         which is an ok write at line 2"
    );
    // Jepsen's conventions: an operation never completed (its client crashed) leaves its
    // process open at the end; `info` completes it, and a process may even go on after it
    // (Jepsen would give it a new number; the checks keep the `info` operation pending
    // whatever comes next, so the number does not matter).
    assert_eq!(
        jsonl(&[
            &op(0, "invoke", "write"),
            &op(0, "info", "write"),
            &op(0, "invoke", "write"),
            &op(1, "invoke", "write"),
        ]),
        "read"
    );
    // EDN: a completion without :value is on the default key, whatever its invocation's;
    // one that names another key is refused.
    let keyed = "{:process 0, :type :invoke, :f :write, :value [\"k\" 1]}\n\
                 {:process 0, :type :info, :f :write}\n";
    let h = read_jepsen_edn(keyed, "x").unwrap();
    assert_eq!(h.ops().nth(1).map(|o| o.op_type), Some(OpType::Info));
    let other = "{:process 0, :type :invoke, :f :write, :value [\"k\" 1]}\n\
                 {:process 0, :type :ok, :f :write, :value [\"j\" 1]}\n";
    assert_eq!(
        read_jepsen_edn(other, "x").unwrap_err().to_string(),
        "line 2: an ok write on key \"j\" completes process 0's write on key \"k\" invoked at \
         line 1: a completion is on its invocation's key"
    );
}

/// A recorded client history without local clocks (as Porcupine's etcd logs convert), or
/// without indexes and times at all, reads; the first is numbered as given, the second by
/// its order.
#[test]
fn client_histories_without_clocks_read() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/histories");
    let timed = std::fs::read(dir.join("client-history-without-local-clocks.jsonl")).unwrap();
    let timed = read_jsonl(&timed[..]).unwrap();
    let ordered = std::fs::read(dir.join("client-history-in-file-order.jsonl")).unwrap();
    let ordered = read_jsonl(&ordered[..]).unwrap();
    assert_eq!(timed.entries.len(), 14);
    for (i, (t, o)) in timed.entries.iter().zip(&ordered.entries).enumerate() {
        let (t, o) = (t.at(), o.at());
        assert_eq!(
            (t.index, o.index, o.time_ns),
            (i as u64, i as u64, i as u64)
        );
        assert_eq!((t.mono_ms, t.wall_ms, o.mono_ms, o.wall_ms), (0, 0, 0, 0));
    }
    assert_eq!(timed.entries[9].at().time_ns, 1_012_000_009);
}
