//! Deletes in the register model: a delete that took effect leaves its key as if never
//! written, one that failed never happened, and one whose outcome is unknown may take effect
//! at any time after its invoke, or never (issue 31, item 0: deletes were left out of the
//! linearizability check, so a read of nothing after an accepted delete was not explained).

use std::path::Path;

use fencesim_checker::{check, CheckResult, Verdict};
use fencesim_history::{read_jsonl, ViolationKind};

/// A JSON Lines history of client operations on key `k`, one per `(process, type, f, extra
/// fields)`, numbered in order (index and true time alike).
fn history(ops: &[(u64, &str, &str, &str)]) -> String {
    ops.iter()
        .enumerate()
        .map(|(i, (process, op_type, f, extra))| {
            let extra = if extra.is_empty() {
                String::new()
            } else {
                format!(",{extra}")
            };
            format!(
                "{{\"record\":\"op\",\"index\":{i},\"time_ns\":{i},\"mono_ms\":0,\"wall_ms\":0,\
                 \"process\":{process},\"node\":\"client-{process}\",\"type\":\"{op_type}\",\
                 \"f\":\"{f}\",\"key\":\"k\"{extra}}}\n"
            )
        })
        .collect()
}

fn judge(ops: &[(u64, &str, &str, &str)]) -> CheckResult {
    check(&read_jsonl(history(ops).as_bytes()).expect("the test history reads"))
}

/// The verdict and the witnesses of each `not-linearizable` violation.
fn linearizability(result: &CheckResult) -> (Verdict, Vec<Vec<u64>>) {
    let witnesses = result
        .violations
        .iter()
        .filter(|v| v.kind == ViolationKind::NotLinearizable)
        .map(|v| v.witnesses.clone())
        .collect();
    (result.verdict, witnesses)
}

/// A write of `a` on process 0, then a delete on process 0 that ended as `done`, then a read
/// on process 1 that saw `seen` (`""`: nothing, the key never written).
fn write_delete_read(done: &str, seen: &str) -> CheckResult {
    judge(&[
        (0, "invoke", "write", r#""token":1,"value":"a""#),
        (0, "ok", "write", r#""token":1,"value":"a""#),
        (0, "invoke", "delete", r#""token":1"#),
        (0, done, "delete", r#""token":1"#),
        (1, "invoke", "read", ""),
        (1, "ok", "read", seen),
    ])
}

#[test]
fn a_fenced_delete_then_a_read_of_nothing_is_linearizable() {
    assert_eq!(
        linearizability(&write_delete_read("ok", "")),
        (Verdict::Valid, vec![])
    );
}

#[test]
fn a_read_of_the_deleted_value_after_the_delete_completed_is_not() {
    let result = write_delete_read("ok", r#""token":1,"value":"a""#);
    assert_eq!(
        linearizability(&result),
        (Verdict::Invalid, vec![vec![4, 5]])
    );
    assert!(
        result.violations[0]
            .explanation
            .starts_with("key \"k\": no order of its 3 operations that respects real time"),
        "{}",
        result.violations[0].explanation
    );
}

/// A delete that failed did not happen: the value is still there, and a read of nothing is
/// what cannot be explained.
#[test]
fn a_failed_delete_did_not_happen() {
    assert_eq!(
        linearizability(&write_delete_read("fail", r#""token":1,"value":"a""#)),
        (Verdict::Valid, vec![])
    );
    assert_eq!(
        linearizability(&write_delete_read("fail", "")),
        (Verdict::Invalid, vec![vec![4, 5]])
    );
}

/// A delete whose outcome is unknown (`info`), or that never completed, may have taken effect
/// or not, so either read is explained; but once a read saw the key empty, a later read of
/// the old value is not.
#[test]
fn an_unknown_or_pending_delete_may_or_may_not_have_happened() {
    for seen in ["", r#""token":1,"value":"a""#] {
        assert_eq!(
            linearizability(&write_delete_read("info", seen)),
            (Verdict::Valid, vec![]),
            "info, read {seen:?}"
        );
        let pending = judge(&[
            (0, "invoke", "write", r#""value":"a""#),
            (0, "ok", "write", r#""value":"a""#),
            (0, "invoke", "delete", ""),
            (1, "invoke", "read", ""),
            (1, "ok", "read", seen),
        ]);
        assert_eq!(
            linearizability(&pending),
            (Verdict::Valid, vec![]),
            "pending, read {seen:?}"
        );
    }
    let back = judge(&[
        (0, "invoke", "write", r#""value":"a""#),
        (0, "ok", "write", r#""value":"a""#),
        (0, "invoke", "delete", ""),
        (0, "info", "delete", r#""error":"no reply within 1000 ms""#),
        (1, "invoke", "read", ""),
        (1, "ok", "read", ""),
        (1, "invoke", "read", ""),
        (1, "ok", "read", r#""value":"a""#),
    ]);
    assert_eq!(linearizability(&back), (Verdict::Invalid, vec![vec![6, 7]]));
}

/// A delete concurrent with a write may land before or after it: a later read may see the
/// write's value or nothing, but not the value both replaced.
#[test]
fn a_delete_concurrent_with_a_write_may_land_on_either_side() {
    let concurrent = |seen: &str| {
        judge(&[
            (0, "invoke", "write", r#""value":"a""#),
            (0, "ok", "write", r#""value":"a""#),
            (0, "invoke", "write", r#""value":"b""#),
            (1, "invoke", "delete", ""),
            (0, "ok", "write", r#""value":"b""#),
            (1, "ok", "delete", ""),
            (2, "invoke", "read", ""),
            (2, "ok", "read", seen),
        ])
    };
    assert_eq!(
        linearizability(&concurrent(r#""value":"b""#)),
        (Verdict::Valid, vec![])
    );
    assert_eq!(linearizability(&concurrent("")), (Verdict::Valid, vec![]));
    assert_eq!(
        linearizability(&concurrent(r#""value":"a""#)),
        (Verdict::Invalid, vec![vec![6, 7]])
    );
}

/// A cas that expects the key never written (no `expected`) succeeds after a delete, and only
/// then.
#[test]
fn a_cas_expecting_never_written_succeeds_after_a_delete() {
    let with_delete = judge(&[
        (0, "invoke", "write", r#""value":"a""#),
        (0, "ok", "write", r#""value":"a""#),
        (0, "invoke", "delete", ""),
        (0, "ok", "delete", ""),
        (1, "invoke", "cas", r#""value":"c""#),
        (1, "ok", "cas", r#""value":"c""#),
        (2, "invoke", "read", ""),
        (2, "ok", "read", r#""value":"c""#),
    ]);
    assert_eq!(linearizability(&with_delete), (Verdict::Valid, vec![]));
    let without = judge(&[
        (0, "invoke", "write", r#""value":"a""#),
        (0, "ok", "write", r#""value":"a""#),
        (1, "invoke", "cas", r#""value":"c""#),
        (1, "ok", "cas", r#""value":"c""#),
    ]);
    assert_eq!(
        linearizability(&without),
        (Verdict::Invalid, vec![vec![2, 3]])
    );
}

/// The shape of the real case: one client, two cycles of acquire, read, write, fenced delete
/// and release, judged with the service's and the resource's events; the second cycle's
/// read finds nothing, with no token, because the first cycle deleted the key.
#[test]
fn two_cycles_with_a_delete_between_them_are_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/histories/delete-between-cycles-read-nothing.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let result = check(&read_jsonl(text.as_bytes()).unwrap());
    assert_eq!(
        (
            result.verdict,
            result.violations.len(),
            result.unknown.len()
        ),
        (Verdict::Valid, 0, 0),
        "{:?}",
        result.violations
    );
    // The second cycle's read is the record the check got wrong: it follows the delete.
    assert!(
        text.lines().any(|l| l.contains(r#""index":21,"#)
            && l.contains(r#""type":"ok","f":"read""#)
            && !l.contains("\"value\"")
            && !l.contains("\"token\"")),
        "the fixture's second read is an ok read of nothing at index 21"
    );
}

/// A fenced delete with a lower token, acknowledged after a write with a higher token was, is
/// a stale mutation accepted, judged from the operations alone as a write would be.
#[test]
fn a_stale_fenced_delete_is_judged_from_operations_like_a_write() {
    let result = judge(&[
        (1, "invoke", "write", r#""token":2,"value":"b""#),
        (1, "ok", "write", r#""token":2,"value":"b""#),
        (0, "invoke", "delete", r#""token":1"#),
        (0, "ok", "delete", r#""token":1"#),
    ]);
    let stale: Vec<_> = result
        .violations
        .iter()
        .filter(|v| v.kind == ViolationKind::StaleWriteAccepted)
        .map(|v| (v.witnesses.clone(), v.explanation.clone()))
        .collect();
    assert_eq!(
        stale,
        [(
            vec![3, 1],
            "key \"k\": client-0 deleted the key with token 1 (invoked at index 2, ok at index 3) \
             after client-1's write with the higher token 2 had been acknowledged ok at index 1, \
             and it was acknowledged ok too: the resource accepted a stale token (judged from \
             client operations alone: the history has no accept events from the resource)"
                .to_owned()
        )]
    );
}
