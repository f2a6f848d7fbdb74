//! `fencesim shrink`: a failing run reduced to a minimal scenario file.

use std::path::{Path, PathBuf};

use fencesim::cancel::Cancel;
use fencesim::run::RunOptions;
use fencesim::{exit, Engine};

use super::replay::read_report;
use super::unwritable;

/// `fencesim shrink`'s arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// A report.json written by `run` or `explore`.
    report: PathBuf,
    /// Where the minimal scenario (NAME-seed-N-min.toml) and its run's files go (the same
    /// folder `explore --shrink` uses with the default --out, git-ignored).
    #[arg(long, value_name = "DIR", default_value = "reports/runs/shrunk")]
    out: PathBuf,
    /// The violation kind to keep (default: the report's first violation's).
    #[arg(long)]
    kind: Option<String>,
}

/// `fencesim shrink`: the run of `--report`, shrunk, keeping `--kind`.
pub(crate) fn exec(engine: &Engine, args: &Args) -> u8 {
    shrink(engine, &args.report, &args.out, args.kind.as_deref())
}

/// `shrink`: reduce a failing run to a minimal scenario, write it as TOML, run it once to
/// write its report, and print how to rerun it.
pub(crate) fn shrink(engine: &Engine, path: &Path, out: &Path, kind: Option<&str>) -> u8 {
    let stored = match read_report(engine, path) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let kind = match kind {
        Some(k) => match fencesim::ViolationKind::ALL
            .into_iter()
            .find(|v| v.as_str() == k)
        {
            Some(k) => k,
            None => {
                let all: Vec<&str> = fencesim::ViolationKind::ALL
                    .iter()
                    .map(|k| k.as_str())
                    .collect();
                complain!(
                    "error: --kind: expected one of {}, found {k:?}",
                    all.join(", ")
                );
                return exit::BAD_INPUT;
            }
        },
        None => match stored.violations.first() {
            Some(v) => v.kind,
            None => {
                complain!(
                    "error: {}: seed {} of {} has no violation to shrink (verdict {})",
                    fencesim_history::display_path(path),
                    stored.seed,
                    stored.scenario.name,
                    serde_json::to_value(stored.verdict)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default()
                );
                return exit::BAD_INPUT;
            }
        },
    };
    let clock = fencesim::bench::Stopwatch::start();
    let shrunk = match fencesim::shrink::shrink_report(engine, &stored, kind) {
        Ok(s) => s,
        Err(e) => {
            complain!("error: {}: {e}", fencesim_history::display_path(path));
            return exit::BAD_INPUT;
        }
    };
    let seconds = clock.seconds();
    let file = out.join(format!("{}.toml", shrunk.scenario.name));
    let written = std::fs::create_dir_all(out)
        .and_then(|()| std::fs::write(&file, fencesim_scenario::to_toml(&shrunk.scenario)));
    if let Err(e) = written {
        return unwritable(out, &e);
    }
    let (b, a) = (shrunk.before, shrunk.after);
    say!(
        "shrunk seed {} of {} keeping {}: faults {} -> {}, clients {} -> {}, run {} ms -> {} ms{} ({} runs, {seconds:.1} s)",
        shrunk.seed,
        stored.scenario.name,
        kind.as_str(),
        b.faults,
        a.faults,
        b.clients,
        a.clients,
        b.duration_ms,
        a.duration_ms,
        moved(shrunk.sooner_ms),
        shrunk.runs
    );
    say!(
        "minimal scenario: {}",
        fencesim_history::display_path(&file)
    );
    let opts = RunOptions {
        out: out.to_path_buf(),
        scenario_arg: file.to_string_lossy().into_owned(),
        check_determinism: false,
        swarm: false,
        // One run: nothing to cut short.
        cancel: Cancel::new(),
    };
    match fencesim::run::run_seed(engine, &shrunk.scenario, shrunk.seed, &opts) {
        Ok(done) => {
            say!("{}", done.verdict_line());
            say!(
                "report: {}",
                fencesim_history::display_path(&done.report_path)
            );
        }
        Err(e) => return unwritable(out, &e),
    }
    say!(
        "reproduce: {}",
        fencesim::run::reproduce_command(engine, &opts, shrunk.seed)
    );
    exit::VALID
}

/// `, schedule 23000 ms sooner` when shrink moved the schedule, else nothing.
fn moved(sooner_ms: u64) -> String {
    if sooner_ms == 0 {
        String::new()
    } else {
        format!(", schedule {sooner_ms} ms sooner")
    }
}
