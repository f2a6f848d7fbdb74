//! `fencesim replay`: the run a report describes, again, compared byte for byte.

use std::path::{Path, PathBuf};

use fencesim::cancel::Cancel;
use fencesim::run::{write, RunOptions};
use fencesim::{exit, Engine};

/// `fencesim replay`'s arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// A report.json written by `run` or `explore`.
    report: PathBuf,
    /// Output root for the replayed run.
    #[arg(long, value_name = "DIR", default_value = "reports/replays")]
    out: PathBuf,
}

/// `fencesim replay`: the run a report describes, again, compared byte for byte.
pub(crate) fn exec(engine: &Engine, args: &Args) -> u8 {
    replay(engine, &args.report, args.out.clone())
}

fn replay(engine: &Engine, path: &Path, out: PathBuf) -> u8 {
    let stored = match read_report(engine, path) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let opts = RunOptions {
        out,
        scenario_arg: path.to_string_lossy().into_owned(),
        check_determinism: false,
        swarm: false,
        // One run: nothing to cut short.
        cancel: Cancel::new(),
    };
    // The command that reproduces the replayed run is the one the stored report names (its
    // scenario and seed); this report's path is not a scenario.
    let keep_command = |mut e: fencesim::run::Evaluated| {
        e.report.reproduce = stored.reproduce.clone();
        e
    };
    let done = match fencesim::run::evaluate(engine, &stored.scenario, stored.seed, &opts)
        .map(keep_command)
        .and_then(|e| write(engine, &opts.out, e))
    {
        Ok(done) => done,
        Err(e) => {
            complain!(
                "error: cannot write the replay under {}: {e}",
                fencesim_history::display_path(&opts.out)
            );
            return exit::BAD_INPUT;
        }
    };
    say!("{}", done.verdict_line());
    say!(
        "report: {}",
        fencesim_history::display_path(&done.report_path)
    );
    if done.report.history.sha256 == stored.history.sha256 {
        say!("replay identical: history sha256 {}", stored.history.sha256);
        exit::VALID
    } else {
        say!(
            "replay DIFFERS: history sha256 {} (recorded {}); tool {} (recorded {})",
            done.report.history.sha256,
            stored.history.sha256,
            done.report.tool.version,
            stored.tool.version
        );
        exit::SIM_FAILED
    }
}

/// Print why `path` is not a report (serde's message, located where it can be) and return the
/// exit code.
fn not_a_report(path: &Path, e: &serde_json::Error) -> u8 {
    // serde's message ends with its own "at line L column C": say it once.
    let message = e.to_string();
    let what = json_words(message.split(" at line ").next().unwrap_or(&message));
    // An error in an upgraded report (read from a JSON value) has no place: line 0.
    let at = match e.line() {
        0 => String::new(),
        line => format!(":{line}:{}", e.column()),
    };
    complain!(
        "error: {}{at}: not a fencesim report: {what}",
        fencesim_history::display_path(path)
    );
    exit::BAD_INPUT
}

/// serde's words for JSON types in JSON's terms: no Rust types (`u64`, `struct Report`), no
/// `map` or `sequence`.
fn json_words(message: &str) -> String {
    let mut words = message.to_owned();
    for (rust, json) in [
        ("expected u64", "expected a whole number >= 0"),
        ("expected u32", "expected a whole number >= 0"),
        ("expected i64", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected a map", "expected an object"),
        ("invalid type: map", "invalid type: object"),
        ("invalid type: sequence", "invalid type: array"),
        (
            "expected any valid TOML value",
            "expected a string, number, boolean, array or object",
        ),
    ] {
        words = words.replace(rust, json);
    }
    match words.find("expected struct ") {
        Some(at) => format!("{}expected an object", &words[..at]),
        None => words,
    }
}

/// Read a report.json (upgrading an older schema, [`fencesim::report::upgrade`]), or print why
/// not and return the exit code.
pub(crate) fn read_report(engine: &Engine, path: &Path) -> Result<fencesim::report::Report, u8> {
    let bytes = std::fs::read(path).map_err(|e| {
        complain!(
            "error: {}: cannot read: {e}",
            fencesim_history::display_path(path)
        );
        exit::BAD_INPUT
    })?;
    let mut json: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| not_a_report(path, &e))?;
    if json.get("mode").and_then(|m| m.as_str()) == Some("live") {
        complain!(
            "error: {}: a live trial's report: a live trial has no seed and cannot be replayed or \
             shrunk; run it again with `fencesim live` (its `reproduce` line)",
            fencesim_history::display_path(path)
        );
        return Err(exit::BAD_INPUT);
    }
    if json.get("mode").and_then(|m| m.as_str()) == Some("verify") {
        complain!(
            "error: {}: a verify counterexample's report: its schedule was chosen by `fencesim \
             verify`, not drawn from a seed, so it cannot be replayed or shrunk; its steps are \
             in steps.txt beside it, and its `reproduce` line searches again",
            fencesim_history::display_path(path)
        );
        return Err(exit::BAD_INPUT);
    }
    let current = json.get("schema_version").and_then(|v| v.as_u64())
        == Some(u64::from(fencesim::report::SCHEMA_VERSION));
    // A report of the current schema is read from its bytes, so that an error has its place.
    let report: fencesim::report::Report = if current {
        serde_json::from_slice(&bytes).map_err(|e| not_a_report(path, &e))?
    } else {
        if let Err(why) = fencesim::report::upgrade(&mut json, engine.registry()) {
            complain!(
                "error: {}: not a report this fencesim reads: {why}",
                fencesim_history::display_path(path)
            );
            return Err(exit::BAD_INPUT);
        }
        serde_json::from_value(json).map_err(|e| not_a_report(path, &e))?
    };
    // A hand-edited report could hold a scenario that validation would refuse; and the design
    // resolves the scenario's knobs again into the shape of its service, which a report does
    // not carry.
    let text = fencesim_scenario::to_toml(&report.scenario);
    match engine.parse_scenario(&text, "report.json") {
        Ok(scenario) => Ok(fencesim::report::Report { scenario, ..report }),
        Err(e) => {
            // The error's line and column are in the scenario TOML written from the report,
            // not in the report: name the field alone.
            let what = match &e {
                fencesim::ScenarioError::Invalid { field, message, .. } => {
                    format!("field `scenario.{field}`: {message}")
                }
                other => other.to_string(),
            };
            complain!(
                "error: {}: its scenario is not valid: {what}",
                fencesim_history::display_path(path)
            );
            Err(exit::BAD_INPUT)
        }
    }
}
