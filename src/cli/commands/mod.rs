//! What the commands share: loading the scenario a `run` or `explore` names, the output
//! folder check, and how a seed is printed and what it makes the exit code.

use std::path::{Path, PathBuf};

use fencesim::cancel::Cancel;
use fencesim::run::{RunOptions, SeedRun};
use fencesim::{exit, report::RunVerdict, Engine, Scenario};

pub(crate) mod bench;
pub(crate) mod check;
pub(crate) mod explore;
pub(crate) mod export;
pub(crate) mod guided;
pub(crate) mod list;
pub(crate) mod live;
pub(crate) mod replay;
pub(crate) mod run;
pub(crate) mod shrink;
pub(crate) mod verify;

/// What `run` and `explore` share: the scenario and how to run it.
#[derive(clap::Args)]
pub(crate) struct Target {
    /// A scenario file, or the name of a bundled scenario (see `fencesim list`).
    pub(crate) scenario: String,
    /// Output root; files go to DIR/<scenario name>/<seed>/.
    #[arg(long, value_name = "DIR", default_value = "reports/runs")]
    pub(crate) out: PathBuf,
    /// Run each seed twice and fail (exit 4) unless the histories are byte-identical.
    #[arg(long)]
    pub(crate) check_determinism: bool,
    /// Force swarm mode on the scenario's random nemesis.
    #[arg(long)]
    pub(crate) swarm: bool,
}

/// Load a scenario from a path, or else from the bundled set by name.
pub(crate) fn load(engine: &Engine, arg: &str) -> Result<Scenario, String> {
    engine.load_named(arg).map_err(|e| e.to_string())
}

/// Load the target's scenario (a file, else a bundled name), apply `--swarm`, and build the
/// run options (stopping early once `cancel` is cancelled); on bad input, the exit code.
pub(crate) fn prepare(
    engine: &Engine,
    t: &Target,
    cancel: &Cancel,
) -> Result<(Scenario, RunOptions), u8> {
    let mut scenario = load(engine, &t.scenario).map_err(|e| {
        complain!("error: {e}");
        exit::BAD_INPUT
    })?;
    if t.swarm {
        let Some(nemesis) = scenario.nemesis.as_mut() else {
            complain!(
                "error: {}: --swarm needs a scenario with a [nemesis] section",
                t.scenario
            );
            return Err(exit::BAD_INPUT);
        };
        nemesis.swarm = true;
    }
    let opts = RunOptions {
        out: t.out.clone(),
        scenario_arg: t.scenario.clone(),
        check_determinism: t.check_determinism,
        swarm: t.swarm,
        cancel: cancel.clone(),
    };
    Ok((scenario, opts))
}

/// Make `out/<name>/` and write a probe file in it, so that an output folder that cannot be
/// written is refused before a sweep, not after it.
pub(crate) fn ensure_writable(out: &Path, name: &str) -> std::io::Result<()> {
    let dir = out.join(name);
    // The nearest part of the path that exists must be a folder: name it if it is not.
    if let Some(blocking) = dir
        .ancestors()
        .find(|p| p.symlink_metadata().is_ok())
        .filter(|p| !p.is_dir())
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!(
                "{} is not a folder",
                fencesim_history::display_path(blocking)
            ),
        ));
    }
    std::fs::create_dir_all(&dir).map_err(|e| at_path(&dir, &e))?;
    // Named after the process: two runs probing one folder must not remove each other's.
    let probe = dir.join(format!(".fencesim-write-probe-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| at_path(&dir, &e))?;
    std::fs::remove_file(&probe)
}

pub(crate) fn unwritable(out: &Path, e: &std::io::Error) -> u8 {
    complain!(
        "error: cannot write the run's output under {}: {e}",
        fencesim_history::display_path(out)
    );
    exit::BAD_INPUT
}

/// `e` with the path it happened at in its text (`std::fs`'s errors leave it out).
pub(crate) fn at_path(path: &Path, e: &std::io::Error) -> std::io::Error {
    std::io::Error::new(
        e.kind(),
        format!("{}: {e}", fencesim_history::display_path(path)),
    )
}

pub(crate) fn print_seed(done: &SeedRun, expect: bool) {
    // The expectation line only where it is judged: --expect and explore.
    say!("{}", done.explain(expect));
    say!(
        "report: {}",
        fencesim_history::display_path(&done.report_path)
    );
    if seed_exit_code(&done.report, expect) != exit::VALID {
        say!("reproduce: {}", done.report.reproduce);
    }
}

/// A seed that missed its expectation in one line, for `--quiet`: its verdict line and where
/// its report is (the explanation is in the report and summary.md).
pub(crate) fn print_seed_line(done: &SeedRun) {
    let explained = done.explain(true);
    let mut line = explained.lines().next().unwrap_or_default().to_owned();
    if let Some(missed) = explained
        .lines()
        .find(|l| l.starts_with("expectation NOT met"))
    {
        line.push_str("; ");
        line.push_str(missed);
    }
    say!(
        "{line}; report: {}",
        fencesim_history::display_path(&done.report_path)
    );
}

pub(crate) fn seed_exit_code(r: &fencesim::report::Report, expect: bool) -> u8 {
    match r.verdict {
        RunVerdict::SimFailed => exit::SIM_FAILED,
        _ if expect => {
            if r.expectation.met {
                exit::VALID
            } else {
                exit::VIOLATION
            }
        }
        RunVerdict::Valid => exit::VALID,
        RunVerdict::Invalid => exit::VIOLATION,
        RunVerdict::Unknown => exit::UNKNOWN,
    }
}

/// The more serious of two exit codes: a failed simulation over unknown over a violation.
/// What `--check-determinism` found over a run's seeds: a seed is simulated a second time
/// only if its first run did not fail, so seeds whose first run failed are counted apart
/// rather than as reruns that differed.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Determinism {
    same: u64,
    differed: u64,
    not_rerun: u64,
}

impl Determinism {
    /// Count one seed's report.
    pub(crate) fn add(&mut self, report: &fencesim::report::Report) {
        match &report.failure {
            None => self.same += 1,
            Some(f) if f.kind == fencesim::FailureKind::Nondeterministic => self.differed += 1,
            Some(_) => self.not_rerun += 1,
        }
    }

    /// Add another tally's counts (a sweep folds each seed's).
    pub(crate) fn merge(&mut self, other: Determinism) {
        self.same += other.same;
        self.differed += other.differed;
        self.not_rerun += other.not_rerun;
    }

    /// The line `run` and `explore` print under `--check-determinism`.
    pub(crate) fn line(&self) -> String {
        let rerun = self.same + self.differed;
        let mut line = format!(
            "determinism: {} of {rerun} seed{} ran twice with the same history",
            self.same,
            if rerun == 1 { "" } else { "s" }
        );
        if self.not_rerun > 0 {
            line.push_str(&format!(
                " ({} not rerun: their first run failed)",
                self.not_rerun
            ));
        }
        line
    }
}

pub(crate) fn worse(a: u8, b: u8) -> u8 {
    let rank = |c: u8| match c {
        exit::SIM_FAILED => 3,
        exit::UNKNOWN => 2,
        exit::VIOLATION => 1,
        _ => 0,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}
