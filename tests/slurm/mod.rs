//! The Slurm recipe (deploy/slurm/) end to end, on a one-node Slurm cluster that the test
//! starts with deploy/slurm/start-local-slurm.sh in a folder under target/test-runs and stops
//! with stop-local-slurm.sh when it ends, passed or not (issue 37, item 3): submit.sh's array of
//! 4 shards and its merge job exit as one unsharded `explore` of the range does, and the merged
//! summary equals the unsharded one field for field but time, on a sweep that finds
//! counterexamples and on a clean one; a task lost to SIGKILL fails the pipeline with exit 2,
//! whether the merge waits with afterok or afterany, and running that shard again alone
//! (`ARRAY=1`) completes the sweep; `--shard env` takes `--array=2-8:2` as shards 0..3 of 4 and
//! refuses `--array=1,3,7`.
//!
//! A module of tests/live.rs (`mod slurm;`, this file being tests/slurm/mod.rs). It needs root
//! and Debian's `slurm-wlm` and `munge` packages: without them it says SKIPPED and passes,
//! except under CI (the `CI` variable set), where `.ci/run` installs them and a missing one
//! fails it. It holds live.rs's ONE_AT_A_TIME for its whole run: its sweeps keep both cores
//! busy, which would disturb the live trials' real-time margins. About 26 s with a release
//! binary on 2 cores, about 40 s with the debug one.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{json, out_dir, root, text};
use crate::{bin, nix_is_root, ONE_AT_A_TIME};

/// The sweep the pipelines split: 7 counterexamples of the broken scenario in it.
const SEEDS: &str = "0..200";

/// The programs the test runs, with the Debian package of each.
const NEEDED: &[(&str, &str)] = &[
    ("munged", "munge"),
    ("mungekey", "munge"),
    ("munge", "munge"),
    ("unmunge", "munge"),
    ("slurmctld", "slurm-wlm"),
    ("slurmd", "slurm-wlm"),
    ("sbatch", "slurm-wlm"),
    ("squeue", "slurm-wlm"),
    ("sinfo", "slurm-wlm"),
    ("scontrol", "slurm-wlm"),
    ("scancel", "slurm-wlm"),
];

/// submit.sh's settings: none may come from the environment of whoever runs the tests.
const SUBMIT_SETTINGS: &[&str] = &[
    "FENCESIM",
    "SCENARIO",
    "SEEDS",
    "SHARDS",
    "OUT",
    "ARRAY",
    "CPUS_PER_TASK",
    "MAX_RUNNING",
    "TIME_LIMIT",
    "PARTITION",
    "MERGE_AFTER",
    "WAIT",
    "POLL",
];

/// PATH with the sbin folders added, where Debian puts the daemons, should the test's lack them.
fn path_with_sbin() -> OsString {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    for extra in ["/usr/sbin", "/sbin", "/usr/bin", "/bin"] {
        if !dirs.iter().any(|d| d.as_path() == Path::new(extra)) {
            dirs.push(PathBuf::from(extra));
        }
    }
    std::env::join_paths(dirs).expect("a PATH")
}

/// Where `program` is on `path`.
fn which(program: &str, path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|file| file.is_file())
}

/// Whether a Slurm cluster can be started here; under CI, what is missing fails the test.
fn slurm_ready(test: &str, path: &OsStr) -> bool {
    let missing: Vec<String> = NEEDED
        .iter()
        .filter(|(program, _)| which(program, path).is_none())
        .map(|(program, package)| format!("{program} (package {package})"))
        .collect();
    let why = if !missing.is_empty() {
        format!(
            "{} not installed (apt-get install slurm-wlm munge)",
            missing.join(", ")
        )
    } else if !nix_is_root() {
        "not root (the test's cluster runs slurmctld and slurmd as root)".to_owned()
    } else {
        return true;
    };
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: {why}, and CI must run the Slurm test (.ci/run installs Debian's `slurm-wlm` \
         and `munge` packages, and runs as root)"
    );
    eprintln!("{test}: SKIPPED: {why}");
    false
}

/// The cluster's folder: `work/cluster`, unless that is too long a path for the Unix sockets in
/// it (107 bytes: munged's, and slurmd's `spool/NODE_JOBID.STEPID` of each job step, which
/// start-local-slurm.sh checks), as a deep checkout makes it; then a folder in the system's
/// temporary one.
fn cluster_dir(work: &Path) -> PathBuf {
    let near = work.join("cluster");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let node = host.trim().split('.').next().unwrap_or_default();
    let longest =
        near.as_os_str().len() + "/spool/".len() + node.len() + "_4294967294.4294967294".len();
    if longest <= 107 {
        near
    } else {
        std::env::temp_dir().join(format!("fencesim-slurm-{}", std::process::id()))
    }
}

/// A one-node cluster of deploy/slurm/start-local-slurm.sh, stopped on drop by
/// stop-local-slurm.sh, which removes its folder, or keeps it (logs and all) when the test
/// failed.
struct Cluster {
    /// The cluster's folder.
    dir: PathBuf,
    /// The test's folder, where every command runs.
    work: PathBuf,
    /// PATH for the commands.
    path: OsString,
}

impl Cluster {
    fn start(dir: PathBuf, work: &Path, path: OsString) -> Cluster {
        // Made before the start, so that drop stops a cluster that only half started too.
        let cluster = Cluster {
            dir,
            work: work.to_owned(),
            path,
        };
        let started = cluster
            .command(&root().join("deploy/slurm/start-local-slurm.sh"))
            .arg(&cluster.dir)
            .output()
            .expect("run start-local-slurm.sh");
        let (stdout, stderr) = text(&started);
        assert!(
            started.status.success(),
            "start-local-slurm.sh: {stdout}{stderr}"
        );
        eprintln!("{}", stderr.trim());
        cluster
    }

    /// `program ARGS` under `timeout` (a job that never ends fails the test instead of hanging
    /// it), in the test's folder, with this cluster's SLURM_CONF, a PATH that finds Slurm's
    /// programs, and none of the caller's Slurm, sbatch or submit.sh settings.
    fn command(&self, program: &Path) -> Command {
        let mut command = Command::new("timeout");
        command
            .arg("300")
            .arg(program)
            .current_dir(&self.work)
            .env("PATH", &self.path);
        for (name, _) in std::env::vars_os() {
            let name_text = name.to_string_lossy();
            if name_text.starts_with("SLURM_")
                || name_text.starts_with("SBATCH_")
                || SUBMIT_SETTINGS.iter().any(|s| name_text == *s)
            {
                command.env_remove(&name);
            }
        }
        command.env("SLURM_CONF", self.dir.join("etc/slurm.conf"));
        command
    }

    /// deploy/slurm/submit.sh with WAIT=1: SEEDS of `scenario` in 4 shards of one core each,
    /// into `out`, with `settings` besides.
    fn submit(
        &self,
        fencesim: &Path,
        scenario: &str,
        out: &Path,
        settings: &[(&str, &str)],
    ) -> Output {
        let mut submit = self.command(&root().join("deploy/slurm/submit.sh"));
        submit
            .env("FENCESIM", fencesim)
            .env("SCENARIO", scenario)
            .env("SEEDS", SEEDS)
            .env("SHARDS", "4")
            .env("CPUS_PER_TASK", "1")
            .env("OUT", out)
            .env("WAIT", "1")
            .env("POLL", "1");
        for (name, value) in settings {
            submit.env(name, value);
        }
        submit.output().expect("run submit.sh")
    }

    /// `sbatch --wait --array=ARRAY fencesim-sweep.sbatch` of random-nemesis-fenced's seeds
    /// 0..40 into `out`, without SHARDS (as a user submits the array by hand), each task's log
    /// in `out/<job id>_<task id>.out`: sbatch's output (its exit code is the highest of the
    /// tasks').
    fn sweep_array(&self, fencesim: &Path, array: &str, out: &Path) -> Output {
        std::fs::create_dir_all(out).expect("create the array's folder");
        let sbatch = which("sbatch", &self.path).expect("sbatch");
        self.command(&sbatch)
            .env("FENCESIM", fencesim)
            .env("SCENARIO", "random-nemesis-fenced")
            .env("SEEDS", "0..40")
            .env("OUT", out)
            .args(["--wait", "--quiet", "--export=ALL", "--cpus-per-task=1"])
            .arg(format!("--array={array}"))
            .arg(format!("--output={}/%A_%a.out", out.display()))
            .arg(root().join("deploy/slurm/fencesim-sweep.sbatch"))
            .output()
            .expect("run sbatch")
    }
}

/// The log of array task `task` in `dir` (`<job id>_<task>.out`, the one array submitted there).
fn task_log(dir: &Path, task: u32) -> String {
    let suffix = format!("_{task}.out");
    let logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(&suffix))
        .collect();
    assert_eq!(
        logs.len(),
        1,
        "task {task}'s log in {}: {logs:?}",
        dir.display()
    );
    std::fs::read_to_string(&logs[0]).expect("a task's log")
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let mut stop = self.command(&root().join("deploy/slurm/stop-local-slurm.sh"));
        if std::thread::panicking() {
            stop.arg("--keep");
            eprintln!(
                "slurm e2e: the cluster's folder is kept, logs and all: {}",
                self.dir.display()
            );
        }
        let _ = stop.arg(&self.dir).output();
    }
}

/// random-nemesis-fenced made unsafe, written into `dir`: an unfenced resource and clients
/// without a safety margin, still expecting valid, so that a sweep finds counterexamples (7 in
/// 0..200). No bundled scenario would: each one's expectation holds on every seed.
fn broken_scenario(dir: &Path) -> PathBuf {
    let source = std::fs::read_to_string(root().join("scenarios/random-nemesis-fenced.toml"))
        .expect("bundled scenario");
    let broken = source
        .replacen(
            "name = \"random-nemesis-fenced\"",
            "name = \"random-nemesis-broken\"",
            1,
        )
        .replacen("mode = \"fenced\"", "mode = \"unfenced\"", 1)
        .replacen("safety_margin_ms = 1000", "safety_margin_ms = 0", 1);
    for line in [
        "name = \"random-nemesis-broken\"",
        "mode = \"unfenced\"",
        "safety_margin_ms = 0",
    ] {
        assert!(
            broken.lines().any(|l| l == line),
            "random-nemesis-fenced.toml changed: no `{line}` after the edit"
        );
    }
    let file = dir.join("random-nemesis-broken.toml");
    std::fs::write(&file, broken).expect("write the scenario");
    file
}

/// A summary without what differs between two runs of one sweep: its timings, and `shards`
/// (none for an unsharded sweep, the merged ones for a merge).
fn timeless(path: &Path) -> serde_json::Value {
    let mut summary = json(path);
    let fields = summary
        .as_object_mut()
        .unwrap_or_else(|| panic!("{}: not a JSON object", path.display()));
    for field in ["seconds", "seeds_per_second", "shards"] {
        assert!(
            fields.remove(field).is_some(),
            "{}: no `{field}`",
            path.display()
        );
    }
    summary
}

/// A summary's counts on one line, for the test's log.
fn counts(summary: &serde_json::Value) -> String {
    format!(
        "seeds_run {}, valid {}, invalid {}, failed {}, shards {}, counterexamples {}, \
         first_seed_by_kind {}",
        summary["seeds_run"],
        summary["valid"],
        summary["invalid"],
        summary["failed"],
        summary["shards"],
        summary["counterexamples"],
        summary["first_seed_by_kind"]
    )
}

/// Seconds since the call, for the lines the test prints (real time: the harness's own clock).
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
fn stopwatch() -> impl Fn() -> f64 {
    let start = std::time::Instant::now();
    move || start.elapsed().as_secs_f64()
}

#[test]
fn a_sweep_split_over_a_slurm_job_array_merges_into_the_unsharded_sweep() {
    let test = "slurm e2e";
    let path = path_with_sbin();
    if !slurm_ready(test, &path) {
        return;
    }
    // A test that failed while holding the lock poisons it; the others still run.
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let secs = stopwatch();
    let step = |what: &str| eprintln!("{test}: {:5.1} s  {what}", secs());
    let work = out_dir("slurm-e2e");
    let cluster = Cluster::start(cluster_dir(&work), &work, path);
    step("cluster started");
    let fencesim = bin();

    // The pipeline exits as one unsharded explore of the range, and merges into its summary:
    // on a sweep with counterexamples (exit 1), and on a clean one (exit 0).
    let broken = broken_scenario(&work);
    let cases = [
        (
            broken.to_str().expect("a UTF-8 path"),
            "random-nemesis-broken",
            1,
        ),
        ("random-nemesis-fenced", "random-nemesis-fenced", 0),
    ];
    let unsharded = work.join("unsharded");
    for (scenario, name, verdict) in cases {
        let alone = Command::new(&fencesim)
            .args([
                "explore",
                scenario,
                "--seeds",
                SEEDS,
                "--keep-going",
                "--quiet",
                "--out",
            ])
            .arg(&unsharded)
            .current_dir(root())
            .output()
            .expect("run fencesim explore");
        assert_eq!(
            alone.status.code(),
            Some(verdict),
            "unsharded explore of {name}: {}",
            text(&alone).1
        );
        step(&format!(
            "unsharded explore of {name} {SEEDS}: exit {verdict}"
        ));
        let out = work.join(format!("sweep-{name}"));
        let run = cluster.submit(&fencesim, scenario, &out, &[]);
        let (stdout, stderr) = text(&run);
        assert_eq!(
            run.status.code(),
            Some(verdict),
            "submit.sh of {name} exits as the unsharded explore did\n{stdout}{stderr}"
        );
        step(&format!("submit.sh, 4 shards of {name}: exit {verdict}"));
        let alone_summary = unsharded.join(name).join("explore-summary.json");
        let merged_summary = out.join("merged").join(name).join("explore-summary.json");
        let (want, got) = (json(&alone_summary), json(&merged_summary));
        eprintln!("    unsharded: {}", counts(&want));
        eprintln!("    merged:    {}", counts(&got));
        assert_eq!(want["shards"], serde_json::json!([]));
        assert_eq!(
            got["shards"],
            serde_json::json!(["0/4", "1/4", "2/4", "3/4"])
        );
        assert_eq!(
            timeless(&merged_summary),
            timeless(&alone_summary),
            "the merged summary of {name} differs from the unsharded one"
        );
        // Every counterexample's report is where the merge job's log says.
        let seeds = want["counterexamples"].as_array().expect("counterexamples");
        assert_eq!(seeds.is_empty(), verdict == 0, "{}", counts(&want));
        for seed in seeds {
            let report = out
                .join("sweep")
                .join(name)
                .join(seed.to_string())
                .join("report.json");
            assert!(report.is_file(), "no {}", report.display());
        }
    }

    // A task lost before it wrote anything (task 1 SIGKILLs itself, as an OOM kill would) fails
    // the pipeline with exit 2: afterok cancels the merge, afterany's merge names the shard.
    let lose = work.join("lose-task-1");
    let real = fencesim.to_str().expect("a UTF-8 path");
    assert!(!real.contains('\''), "{real}");
    std::fs::write(
        &lose,
        format!(
            "#!/bin/sh\n# Test double: array task 1 dies as an OOM kill would, writing nothing.\n\
             if [ \"${{SLURM_ARRAY_TASK_ID:-}}\" = 1 ]; then kill -KILL $$; fi\n\
             exec '{real}' \"$@\"\n"
        ),
    )
    .expect("write the test double");
    std::fs::set_permissions(&lose, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("make the test double executable");
    for after in ["afterok", "afterany"] {
        let out = work.join(format!("lost-{after}"));
        let run = cluster.submit(
            &lose,
            "random-nemesis-fenced",
            &out,
            &[("MERGE_AFTER", after)],
        );
        let (stdout, stderr) = text(&run);
        assert_eq!(run.status.code(), Some(2), "{after}: {stdout}{stderr}");
        assert!(
            stderr.contains("_1 FAILED"),
            "{after}: task 1 not listed as failed: {stderr}"
        );
        let why = if after == "afterok" {
            "DependencyNeverSatisfied"
        } else {
            "the merge lacks shards 1/4 of the sweep"
        };
        assert!(stderr.contains(why), "{after}: no `{why}` in {stderr}");
        step(&format!(
            "submit.sh with task 1 lost, merge {after}: exit 2"
        ));
    }
    // Running the lost shard again alone completes the sweep.
    let out = work.join("lost-afterany");
    let run = cluster.submit(&fencesim, "random-nemesis-fenced", &out, &[("ARRAY", "1")]);
    let (stdout, stderr) = text(&run);
    assert_eq!(run.status.code(), Some(0), "ARRAY=1: {stdout}{stderr}");
    assert_eq!(
        timeless(&out.join("merged/random-nemesis-fenced/explore-summary.json")),
        timeless(&unsharded.join("random-nemesis-fenced/explore-summary.json")),
        "the sweep completed by a re-run differs from the unsharded one"
    );
    step("submit.sh ARRAY=1, the lost shard again: exit 0, the unsharded summary");

    // `--shard env` without SHARDS: --array=2-8:2 is shards 0..3 of 4...
    let stepped = work.join("stepped");
    let run = cluster.sweep_array(&fencesim, "2-8:2", &stepped);
    assert!(run.status.success(), "--array=2-8:2: {}", text(&run).1);
    let mut summaries: Vec<String> = std::fs::read_dir(stepped.join("sweep/random-nemesis-fenced"))
        .expect("the array's output")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("explore-summary-shard-"))
        .collect();
    summaries.sort();
    assert_eq!(
        summaries,
        [
            "explore-summary-shard-0-of-4.json",
            "explore-summary-shard-1-of-4.json",
            "explore-summary-shard-2-of-4.json",
            "explore-summary-shard-3-of-4.json",
        ]
    );
    let log = task_log(&stepped, 8);
    assert!(
        log.contains("shard 3/4 from a Slurm job array (SLURM_ARRAY_TASK_ID=8,"),
        "{log}"
    );
    step("sbatch --array=2-8:2: shards 0..3 of 4");
    // ...and --array=1,3,7 is no split: every task refuses it, naming the variables.
    let irregular = work.join("irregular");
    let run = cluster.sweep_array(&fencesim, "1,3,7", &irregular);
    assert_eq!(
        run.status.code(),
        Some(2),
        "--array=1,3,7: {}",
        text(&run).1
    );
    for id in [1, 3, 7] {
        let log = task_log(&irregular, id);
        assert!(
            log.contains("are not one split of the seeds"),
            "task {id}: {log}"
        );
    }
    step("sbatch --array=1,3,7: refused by its 3 tasks");
    drop(cluster);
    step("cluster stopped");
}

/// Settings submit.sh refuses before it creates OUT or submits anything, and what it says:
/// no cluster is needed to refuse them, so this runs wherever bash does.
#[test]
fn submit_sh_refuses_bad_settings_before_it_creates_anything() {
    let work = out_dir("slurm-submit-refusals");
    let out = work.join("out");
    let cases: &[(&str, &str, &str)] = &[
        (
            "SEEDS",
            "abc",
            "SEEDS must be A..B, a range of seeds (0..400), not \"abc\"",
        ),
        ("SEEDS", "0..abc", "SEEDS must be A..B"),
        // Well-formed, but explore itself refuses it: the whole range is read, not its start.
        (
            "SEEDS",
            "20..10",
            "explore refused SCENARIO=random-nemesis-fenced SEEDS=20..10",
        ),
        (
            "CPUS_PER_TASK",
            "abc",
            "CPUS_PER_TASK must be a positive integer, not \"abc\"",
        ),
        (
            "CPUS_PER_TASK",
            "0",
            "CPUS_PER_TASK must be a positive integer",
        ),
        ("SHARDS", "-1", "SHARDS must be a positive integer"),
        ("MAX_RUNNING", "x", "MAX_RUNNING must be a positive integer"),
        (
            "MERGE_AFTER",
            "afterfoo",
            "MERGE_AFTER must be afterok or afterany",
        ),
        ("WAIT", "yes", "WAIT must be 0 or 1"),
        (
            "SCENARIO",
            "no-such-scenario",
            "explore refused SCENARIO=no-such-scenario",
        ),
    ];
    for (name, value, said) in cases {
        let mut submit = Command::new(root().join("deploy/slurm/submit.sh"));
        for setting in SUBMIT_SETTINGS {
            submit.env_remove(setting);
        }
        let run = submit
            .env("FENCESIM", bin())
            .env("OUT", &out)
            .env(name, value)
            .output()
            .expect("run submit.sh");
        let (_, stderr) = text(&run);
        assert_eq!(run.status.code(), Some(2), "{name}={value}: {stderr}");
        assert!(stderr.contains(said), "{name}={value}: {stderr}");
        assert!(
            !out.exists(),
            "{name}={value}: a refused submission leaves no OUT behind"
        );
    }
}
