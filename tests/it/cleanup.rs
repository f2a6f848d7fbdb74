//! A mutation kind besides the write: a job's cleanup deletes its key after its write, with its
//! fencing token or without one, and the resource decides whether a token-less delete goes
//! through (`[resource] tokenless`). A late cleanup that goes around the fence deletes the next
//! holder's data (`unfenced-mutation`); a fenced cleanup, or a resource that refuses token-less
//! mutations, stops it.

use crate::support::{out_dir, root};

const FIXTURE: &str = "tests/fixtures/cleanup/late-cleanup-tokenless.toml";

/// The fixture with `from` replaced by `to` (and its expectation by `expect`), written for one
/// test.
fn variant(test: &str, edits: &[(&str, &str)]) -> String {
    let mut text = std::fs::read_to_string(root().join(FIXTURE)).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{from:?} is not in the fixture");
        text = text.replace(from, to);
    }
    let file = out_dir(test).join("cleanup.toml");
    std::fs::write(&file, text).unwrap();
    file.display().to_string()
}

const VALID: (&str, &str) = (
    "verdict = \"invalid\"\nviolations = [\"unfenced-mutation\"]",
    "verdict = \"valid\"",
);

#[test]
fn a_late_tokenless_cleanup_deletes_the_next_holders_data() {
    let file = root().join(FIXTURE).display().to_string();
    let checked = crate::support::engine()
        .check_scenario(&file, 0..10)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(checked.seeds_run, 10);
    let scenario = crate::support::engine()
        .load_scenario(&root().join(FIXTURE))
        .unwrap();
    let history = crate::support::engine().simulate(&scenario, 0).history;
    let result = fencesim::check(&history);
    let v = &result.violations[0];
    assert_eq!(v.kind.as_str(), "unfenced-mutation");
    // It names what it destroyed, and the chain tells how the two met.
    assert!(
        v.explanation.ends_with(
            "; it deleted client-2's data: the write with token 2 accepted at index 110"
        ),
        "{}",
        v.explanation
    );
    assert_eq!(
        v.chain,
        [
            "client-1 was granted token 1 at 0.0 s",
            "client-1 paused at 1.0 s (frozen for 15000 ms)",
            "client-1's lease (token 1) expired at 10.0 s",
            "client-2 was granted token 2 at 10.2 s",
            "client-2's write with token 2 was accepted at 11.2 s",
            "client-1's delete without a token was accepted at 16.0 s"
        ]
    );
    // The delete is an operation of the history, and the register reads as never written.
    let deletes: Vec<String> = history
        .ops()
        .filter(|o| format!("{:?}", o.f) == "Delete")
        .map(|o| format!("{:?} {:?} {:?}", o.op_type, o.node, o.token))
        .collect();
    assert_eq!(
        deletes,
        ["Invoke \"client-1\" None", "Ok \"client-1\" None"]
    );
}

#[test]
fn a_resource_that_refuses_tokenless_mutations_or_a_fenced_cleanup_keeps_the_data() {
    let refused = variant(
        "cleanup-refused",
        &[("tokenless = \"accept\"", "tokenless = \"reject\""), VALID],
    );
    crate::support::engine()
        .check_scenario(&refused, 0..10)
        .unwrap_or_else(|e| panic!("{e}"));
    let scenario = crate::support::engine()
        .load_scenario(std::path::Path::new(&refused))
        .unwrap();
    let history = crate::support::engine().simulate(&scenario, 0).history;
    let failed: Vec<&str> = history
        .ops()
        .filter(|o| format!("{:?}", o.f) == "Delete")
        .filter_map(|o| o.error.as_deref())
        .collect();
    assert_eq!(failed, ["a delete without a token: highest accepted is 2"]);

    let fenced = variant(
        "cleanup-fenced",
        &[
            (
                "start_ms = 0\ncleanup = \"unfenced\"",
                "start_ms = 0\ncleanup = \"fenced\"",
            ),
            VALID,
        ],
    );
    crate::support::engine()
        .check_scenario(&fenced, 0..10)
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn bad_cleanup_and_tokenless_values_are_refused_located() {
    let bad = variant(
        "cleanup-bad",
        &[("cleanup = \"unfenced\"", "cleanup = \"sometimes\"")],
    );
    let err = crate::support::engine()
        .load_scenario(std::path::Path::new(&bad))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("field `clients.cleanup`: unknown variant `sometimes`, expected one of `none`, `fenced`, `unfenced`"),
        "{err}"
    );
    let unfenced = variant(
        "cleanup-unfenced-mode",
        &[("mode = \"fenced\"", "mode = \"unfenced\"")],
    );
    let err = crate::support::engine()
        .load_scenario(std::path::Path::new(&unfenced))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("field `resource.tokenless`: an unfenced resource accepts every mutation, with a token or without"),
        "{err}"
    );
}
