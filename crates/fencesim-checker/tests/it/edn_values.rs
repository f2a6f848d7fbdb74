//! Jepsen EDN histories judged with Clojure's equality, as Knossos judges them: values that
//! Clojure's `=` calls equal are one value to the register (issue 38 item 1), and values of
//! different types are different values (issue 31 item 4). The regression files are in
//! `tests/fixtures/histories/` at the repository root, each named for what it shows.

use std::path::PathBuf;

use fencesim_checker::{check_with, CheckOptions, Verdict};
use fencesim_history::{read_jepsen_edn, ViolationKind};

/// A regression history of the repository's `tests/fixtures/histories/`.
fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/histories")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The verdict on an EDN history and, for each violation, its kind and witnesses.
fn judge(edn: &str) -> (Verdict, Vec<(ViolationKind, Vec<u64>)>) {
    let history = read_jepsen_edn(edn, "edn-values").expect("the test history reads");
    let result = check_with(&history, &CheckOptions::default());
    let violations = result
        .violations
        .iter()
        .map(|v| (v.kind, v.witnesses.clone()))
        .collect();
    (result.verdict, violations)
}

/// A write of `written` that completed, then a read of `read`, on one key.
fn write_then_read(written: &str, read: &str) -> String {
    format!(
        "{{:process 0 :type :invoke :f :write :value [\"k\" {written}]}}
         {{:process 0 :type :ok :f :write :value [\"k\" {written}]}}
         {{:process 1 :type :invoke :f :read :value [\"k\" nil]}}
         {{:process 1 :type :ok :f :read :value [\"k\" {read}]}}"
    )
}

/// The example of issue 38: a set written `#{1 2}` and read back `#{2 1}` is one value.
#[test]
fn a_set_read_back_in_another_order_is_linearizable() {
    let edn = fixture("edn-sets-equal-in-any-order.edn");
    assert_eq!(judge(&edn), (Verdict::Valid, vec![]));
}

/// Maps in another order, a list for a vector, `1N` for `1`, a decimal's scale, nested in a
/// compare-and-set's values.
#[test]
fn values_clojure_calls_equal_are_one_value() {
    let edn = fixture("edn-clojure-equal-values.edn");
    assert_eq!(judge(&edn), (Verdict::Valid, vec![]));
}

/// The integer 5 written, the string "5" read back: no order explains the read, and the
/// witnesses are the read's invoke and completion.
#[test]
fn a_string_read_of_an_integer_write_is_not_linearizable() {
    let edn = fixture("edn-string-is-not-integer.edn");
    assert_eq!(
        judge(&edn),
        (
            Verdict::Invalid,
            vec![(ViolationKind::NotLinearizable, vec![2, 3])]
        )
    );
}

/// Clojure's `=` on a write and the read after it, row by row: equal values are linearizable,
/// unequal ones are not.
#[test]
fn a_read_matches_a_write_as_clojures_equality_says() {
    let table: &[(&str, &str, bool)] = &[
        ("#{1 2}", "#{2 1}", true),
        ("{:a 1 :b 2}", "{:b 2 :a 1}", true),
        ("{:a #{1 2}}", "{:a #{2 1}}", true),
        ("[1 (2 3)]", "(1 [2 3])", true),
        ("(1 2)", "[1 2]", true),
        ("1N", "1", true),
        ("1.50M", "1.5M", true),
        ("1M", "1", false),
        ("1.0", "1", false),
        ("5", "\"5\"", false),
        (":a", "\"a\"", false),
        (":a", "a", false),
        ("false", "[]", false),
        ("[1 2]", "[2 1]", false),
    ];
    for &(written, read, equal) in table {
        let (verdict, _) = judge(&write_then_read(written, read));
        let expected = if equal {
            Verdict::Valid
        } else {
            Verdict::Invalid
        };
        assert_eq!(verdict, expected, "write {written}, read {read}");
    }
}

/// `nil` is no value, not `false`: a cas that expects the key never written does not match a
/// register that holds `false`.
#[test]
fn nil_is_not_false() {
    let edn = "{:process 0 :type :invoke :f :write :value [\"k\" false]}
               {:process 0 :type :ok :f :write :value [\"k\" false]}
               {:process 1 :type :invoke :f :cas :value [\"k\" [nil 1]]}
               {:process 1 :type :ok :f :cas :value [\"k\" [nil 1]]}";
    assert_eq!(
        judge(edn),
        (
            Verdict::Invalid,
            vec![(ViolationKind::NotLinearizable, vec![2, 3])]
        )
    );
}

/// The initial value is compared as a value's canonical text: `0` is Knossos's integer 0.
#[test]
fn the_initial_value_is_canonical_text() {
    let edn = "{:process 0 :type :invoke :f :read :value nil}
               {:process 0 :type :ok :f :read :value 0N}";
    let options = |initial: &str| CheckOptions {
        initial_value: Some(initial.to_owned()),
        ..CheckOptions::default()
    };
    let history = read_jepsen_edn(edn, "initial").unwrap();
    assert_eq!(check_with(&history, &options("0")).verdict, Verdict::Valid);
    assert_eq!(
        check_with(&history, &options("\"0\"")).verdict,
        Verdict::Invalid
    );
}

/// A file that numbers its operations with `:index` has its violations' witnesses and
/// explanations name those numbers, not positions.
#[test]
fn witnesses_are_named_by_the_files_index() {
    let edn = fixture("edn-witnesses-named-by-index.edn");
    let history = read_jepsen_edn(&edn, "indexed").unwrap();
    let result = check_with(&history, &CheckOptions::default());
    assert_eq!(result.verdict, Verdict::Invalid);
    assert_eq!(result.violations.len(), 1);
    let v = &result.violations[0];
    assert_eq!(
        (v.kind, v.witnesses.clone()),
        (ViolationKind::NotLinearizable, vec![20, 21])
    );
    assert!(
        v.explanation
            .starts_with("key \"k\": no order of its 2 operations that respects real time explains the operation invoked at index 20;"),
        "{}",
        v.explanation
    );
}
