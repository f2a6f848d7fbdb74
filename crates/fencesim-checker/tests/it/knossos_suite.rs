//! Knossos's own test histories, judged by fencesim: every `cas-register/good` file must be
//! valid and every `cas-register/bad` file invalid, with Knossos's model (a compare-and-set
//! register starting at 0) and its reading of a failed cas (it never happened).
//!
//! The files are peer data outside the repository (`../shared/peers/knossos-data` from the
//! repository root, jepsen-io/knossos's `data/` folder), read where they lie and never copied.
//! Without the folder the test says it skipped, and fails instead when `CI` is set.

use std::path::{Path, PathBuf};

use fencesim_checker::{check_with, CheckOptions, FailedCas, LockModel, Verdict};
use fencesim_history::{read_jepsen_edn, ViolationKind};

/// The peers' Knossos folder, if it is there; `None` after saying so (or a panic under CI).
fn knossos_data() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/peers/knossos-data");
    if dir.is_dir() {
        return Some(dir);
    }
    let message = format!(
        "skipped: Knossos's test histories are not at {} (the peers' data folder)",
        dir.display()
    );
    assert!(std::env::var_os("CI").is_none(), "{message}, and CI is set");
    eprintln!("{message}");
    None
}

/// The `.edn` files of `dir`, sorted by name.
fn edn_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "edn"))
        .collect();
    files.sort();
    files
}

/// Knossos's `cas-register` model: initial value 0, failed operations never happened.
fn cas_register() -> CheckOptions {
    CheckOptions {
        initial_value: Some("0".into()),
        failed_cas: FailedCas::Knossos,
        ..CheckOptions::default()
    }
}

/// fencesim's verdict on one file under `options`, the violation kinds and unknown reasons.
fn verdict(path: &Path, options: &CheckOptions) -> (Verdict, Vec<ViolationKind>, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap();
    let name = path.file_stem().unwrap().to_string_lossy();
    let history =
        read_jepsen_edn(&text, &name).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let result = check_with(&history, options);
    (result.verdict, result.kinds(), result.unknown)
}

#[test]
fn every_cas_register_history_gets_knossos_verdict() {
    let Some(data) = knossos_data() else {
        return;
    };
    let mut disagree = Vec::new();
    let mut counts = Vec::new();
    for (folder, expected) in [("good", Verdict::Valid), ("bad", Verdict::Invalid)] {
        let files = edn_files(&data.join("cas-register").join(folder));
        counts.push(files.len());
        for path in files {
            let (got, kinds, unknown) = verdict(&path, &cas_register());
            let name = path.file_name().unwrap().to_string_lossy();
            let right = match expected {
                // A bad history is invalid for not being linearizable, nothing else.
                Verdict::Invalid => got == expected && kinds == [ViolationKind::NotLinearizable],
                // Every good file, including mongodb-v0-ack-rollback-.edn, which holds nemesis
                // operations only: under a named model an empty history is linearizable.
                _ => got == expected && unknown.is_empty(),
            };
            if !right {
                disagree.push(format!("{folder}/{name}: {got:?} {kinds:?} {unknown:?}"));
            }
        }
    }
    assert_eq!(counts, [113, 7], "the peers' folder changed");
    assert!(
        disagree.is_empty(),
        "fencesim disagrees with Knossos on:\n{}",
        disagree.join("\n")
    );
}

/// Jepsen's etcd lock history (`mutex/bad/etcd.edn`) judged as a mutex: Knossos files it
/// under bad and asserts nothing; fencesim finds it invalid, and the operations alone prove
/// it, whatever order the concurrent ones took. Count, up to the completion of process 0's
/// acquire (`:index 1119`, client operation 1107): 131 acquires had completed
/// `ok`, and at most 129 releases had even been invoked, leaving out those that completed
/// `fail` (which never happened). Every completed acquire took effect before that moment and
/// no other release could, so at that moment two acquires held the lock with no release
/// between them. etcd's locks are leases: the failed releases just before it
/// (`:not-found "etcdserver: requested lease not found"`) show leases that expired, the
/// very reason a lease history is not a mutex. The search reports process 0's acquire
/// (invoked at `:index 1095`, client operation 1085) as the one it could not place, named by
/// the file's `:index`, as every operation of the file carries one.
#[test]
fn the_etcd_lock_history_is_not_a_mutex() {
    let Some(data) = knossos_data() else {
        return;
    };
    let options = CheckOptions {
        lock_model: Some(LockModel::Mutex),
        ..CheckOptions::default()
    };
    let text = std::fs::read_to_string(data.join("mutex/bad/etcd.edn")).unwrap();
    let history = read_jepsen_edn(&text, "etcd").unwrap();
    assert_eq!(history.entries.len(), 1123, "12 nemesis operations skipped");
    let result = check_with(&history, &options);
    assert_eq!(result.verdict, Verdict::Invalid);
    let found: Vec<_> = result
        .violations
        .iter()
        .map(|v| (v.kind, v.witnesses.clone()))
        .collect();
    assert_eq!(found, [(ViolationKind::NotLinearizable, vec![1095, 1119])]);
    assert_eq!(
        result.violations[0].explanation,
        "lock \"lock\": no order of its 264 acquires and releases that respects real time \
         explains the operation invoked at index 1095 as a mutex (Knossos's model/mutex: an \
         acquire of a held lock or a release of a free one is impossible); failed operations \
         never happened, and ones whose outcome is unknown may have taken effect at any time \
         after their invoke, or never"
    );
    // Without the model, the lock operations are not judged as a mutex, and that is said;
    // nothing else can be judged (no tokens, no service events), so the verdict is unknown.
    let unjudged = check_with(&history, &CheckOptions::default());
    assert_eq!(unjudged.verdict, Verdict::Unknown);
    assert!(
        unjudged.unknown[0].starts_with("nothing to judge"),
        "{:?}",
        unjudged.unknown
    );
    assert!(unjudged
        .not_checked
        .iter()
        .any(|l| l.starts_with("mutual exclusion from operations: ")));
}
