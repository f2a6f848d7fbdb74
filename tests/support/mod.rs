//! Running the built `fencesim` binary from integration tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root (where scenarios/ lives).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The output folder of runs that write nothing (`fencesim::run::evaluate` keeps the report
/// and history in memory), shared by the tests of `area`: made once, never emptied.
pub fn unwritten_dir(area: &str) -> PathBuf {
    let dir = root().join("target").join("test-runs").join(area);
    std::fs::create_dir_all(&dir).expect("create test output dir");
    dir
}

/// A fresh, empty output directory for one test. Each name may be asked for once per test
/// binary: tests of one binary run at once, and two that shared a folder would remove each
/// other's files (a second call panics, naming it).
pub fn out_dir(test: &str) -> PathBuf {
    static TAKEN: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let fresh = TAKEN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(test.to_owned());
    assert!(
        fresh,
        "out_dir({test:?}) was already given to a test of this binary"
    );
    let dir = root().join("target").join("test-runs").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create test output dir");
    dir
}

/// Run `fencesim ARGS` in the repository root.
pub fn fencesim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run fencesim")
}

/// Run `line`, a command fencesim printed (`fencesim run ...`), in bash in `dir`, with
/// `fencesim` standing for this binary: a reproduce line is run as a user pastes it.
pub fn in_bash(dir: &Path, line: &str) -> Output {
    let bin = env!("CARGO_BIN_EXE_fencesim");
    Command::new("bash")
        .arg("-c")
        .arg(format!("fencesim() {{ \"{bin}\" \"$@\"; }}; {line}"))
        .current_dir(dir)
        .output()
        .expect("run bash")
}

/// `pause-fenced` with a history limit of 40 records, written into `dir`: every seed fails
/// (exit 4, `history limit exceeded: 40 records`).
pub fn history_limit_scenario(dir: &Path) -> PathBuf {
    let source = std::fs::read_to_string(root().join("scenarios/incidents/pause-fenced.toml"))
        .expect("bundled scenario");
    let file = dir.join("tiny.toml");
    let tiny = source.replace(
        "duration_ms = 60000",
        "duration_ms = 60000\nmax_records = 40",
    );
    assert_ne!(tiny, source, "pause-fenced's duration line moved");
    std::fs::write(&file, tiny).expect("write the scenario");
    file
}

/// stdout and stderr as text.
pub fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Start `fencesim ARGS` in the repository root, send it SIGINT (Ctrl-C) after `after`, and
/// wait for it to end.
pub fn interrupted_after(args: &[&str], after: std::time::Duration) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(args)
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start fencesim");
    std::thread::sleep(after);
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(status.success());
    child.wait_with_output().expect("fencesim ends")
}

/// The file and seed of the `reproduce: fencesim run FILE --seed N` line in `stdout`.
pub fn reproduce_line(stdout: &str) -> (String, String) {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("reproduce: fencesim run "))
        .unwrap_or_else(|| panic!("no reproduce line in {stdout}"));
    let (file, seed) = line.split_once(" --seed ").expect("FILE --seed N");
    (file.to_owned(), seed.to_owned())
}

/// Parse a JSON file.
pub fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("read json")).expect("parse json")
}

/// Run every seed of the scenario's range (in parallel, nothing written) and fail listing the
/// seeds that miss its expectation.
pub fn assert_met_on_whole_range(scenario: &fencesim::Scenario, opts: &fencesim::run::RunOptions) {
    use fencesim::run::{default_jobs, sweep};
    let seeds: Vec<u64> = (scenario.seeds.start..scenario.seeds.end).collect();
    let missed = sweep(engine(), scenario, &seeds, default_jobs(), opts, |done| {
        Ok((!done.report.expectation.met)
            .then(|| format!("seed {}: {:?}", done.report.seed, done.report.violations)))
    })
    .unwrap();
    let missed: Vec<String> = missed.into_iter().flatten().collect();
    assert!(missed.is_empty(), "{missed:#?}");
}

/// The engine of the built-in designs, made once per test binary: what the tests parse,
/// simulate and sweep scenarios with.
pub fn engine() -> &'static fencesim::Engine {
    static ENGINE: std::sync::OnceLock<fencesim::Engine> = std::sync::OnceLock::new();
    ENGINE.get_or_init(fencesim::Engine::built_in)
}
