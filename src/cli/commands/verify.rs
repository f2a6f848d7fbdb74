//! `fencesim verify`: every schedule of a scenario's small configuration, breadth-first, under
//! an asynchronous fault model (docs/verify.md).

use std::path::PathBuf;

use fencesim::cancel::Cancel;
use fencesim::verify::{reproduce_command, verify, write, Concrete, Verified, SCENARIO_FILE};
use fencesim::{exit, Engine};
use fencesim_verify::{Bounds, Ending};

use super::{ensure_writable, load, unwritable};

/// `fencesim verify`'s arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// A scenario file, or the name of a bundled scenario (see `fencesim list`). Its design,
    /// resource and clients are explored; its faults, nemesis and network are not used (the
    /// search brings its own faults, bounded by the flags below).
    scenario: String,
    /// The longest schedule explored, in steps.
    #[arg(long, value_name = "N", default_value_t = Bounds::default().depth,
          value_parser = clap::value_parser!(u32).range(1..))]
    depth: u32,
    /// Stop after this many distinct states.
    #[arg(long, value_name = "N", default_value_t = Bounds::default().max_states,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_states: u64,
    /// Messages the network may lose per schedule.
    #[arg(long, value_name = "N", default_value_t = Bounds::default().drops)]
    drops: u32,
    /// Messages the network may duplicate per schedule.
    #[arg(long, value_name = "N", default_value_t = Bounds::default().duplicates)]
    duplicates: u32,
    /// Lock-service node crashes per schedule (each node restarts when the search chooses).
    #[arg(long, value_name = "N", default_value_t = Bounds::default().crashes)]
    crashes: u32,
    /// Calls to the resource that clients may give up on at their timeout, per schedule (the
    /// call's message stays in flight).
    #[arg(long, value_name = "N", default_value_t = Bounds::default().timeouts)]
    timeouts: u32,
    /// Acquire attempts per cycle: a client refused this many times stops.
    #[arg(long, value_name = "N", default_value_t = Bounds::default().attempts,
          value_parser = clap::value_parser!(u32).range(1..))]
    attempts: u32,
    /// Keepalives per cycle (later ones are skipped, as a stalled keepalive stream is).
    #[arg(long, value_name = "N", default_value_t = Bounds::default().renewals)]
    renewals: u32,
    /// Worker threads expanding states (default 1). The states, transitions and
    /// counterexample are the same for any number; on a machine whose memory bandwidth is
    /// the limit, more threads gain little (docs/performance.md).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256))]
    jobs: Option<u64>,
    /// Where verify.json (and a counterexample's steps.txt, scenario.toml, history.jsonl,
    /// report.json, history.txt, summary.md and timeline.html) go: DIR/NAME/.
    #[arg(long, value_name = "DIR", default_value = "reports/verify")]
    out: PathBuf,
}

/// `fencesim verify`: exit 0 verified, 1 a counterexample, 3 bounds reached, 130 interrupted.
pub(crate) fn exec(engine: &Engine, args: &Args, cancel: &Cancel) -> u8 {
    let scenario = match load(engine, &args.scenario) {
        Ok(s) => s,
        Err(e) => {
            complain!("error: {e}");
            return exit::BAD_INPUT;
        }
    };
    let bounds = Bounds {
        depth: args.depth,
        max_states: args.max_states,
        drops: args.drops,
        duplicates: args.duplicates,
        crashes: args.crashes,
        timeouts: args.timeouts,
        attempts: args.attempts,
        renewals: args.renewals,
    };
    // Refused before the search, not after minutes of it.
    if let Err(e) = ensure_writable(&args.out, &scenario.name) {
        return unwritable(&args.out, &e);
    }
    let jobs = args.jobs.map_or(1, |j| j as usize);
    let verified = match verify(engine, &scenario, &bounds, jobs, cancel) {
        Ok(v) => v,
        Err(e) => {
            complain!("error: {}: {e}", args.scenario);
            return exit::BAD_INPUT;
        }
    };
    // The result first: a folder that fails now still leaves it on the screen.
    print(
        &scenario.name,
        &scenario.lock_service.kind,
        &bounds,
        &verified,
    );
    let dir = args.out.join(&scenario.name);
    if let Some(concrete) = &verified.concrete {
        say_scenario(engine, &dir, concrete);
    }
    let reproduce = reproduce_command(engine, &args.scenario, &bounds);
    let written = match write(engine, &dir, &scenario, &bounds, &verified, &reproduce) {
        Ok(w) => w,
        Err(e) => return unwritable(&args.out, &e),
    };
    for path in &written {
        say!("wrote {}", fencesim_history::display_path(path));
    }
    match verified.outcome.ending {
        Ending::Verified => exit::VALID,
        Ending::Violation => exit::VIOLATION,
        Ending::BoundsReached => exit::UNKNOWN,
        Ending::Interrupted => exit::INTERRUPTED,
    }
}

/// What became of the counterexample written as a scenario.
fn say_scenario(engine: &Engine, dir: &std::path::Path, concrete: &Concrete) {
    match concrete {
        Concrete::Written {
            found,
            reproduced,
            seed,
            ..
        } => {
            let path = dir.join(SCENARIO_FILE);
            let command = format!(
                "{} run {}",
                fencesim_history::shell_word(engine.program()),
                fencesim_history::shell_word(&fencesim_history::display_path(&path))
            );
            let found: Vec<&str> = found.iter().map(|k| k.as_str()).collect();
            if *reproduced {
                say!(
                    "as a scenario: `{command}` reproduces it on seed {seed} ({})",
                    found.join(", ")
                );
            } else {
                say!(
                    "as a scenario: `{command}` does NOT reproduce it on seeds 0 to {} (seed 0 \
                     shows: {}); the schedule's steps above are the counterexample",
                    fencesim::verify::SEEDS_TRIED - 1,
                    if found.is_empty() {
                        "no violation".to_owned()
                    } else {
                        found.join(", ")
                    }
                );
            }
        }
        Concrete::Unwritable(why) => say!("not written as a scenario: {why}"),
    }
}

/// The result in words.
fn print(name: &str, kind: &str, bounds: &Bounds, verified: &Verified) {
    let o = &verified.outcome;
    let figures = format!(
        "{} states, {} transitions, depth {}, {:.1} s ({:.0} states/s on {} thread{})",
        o.states,
        o.transitions,
        o.depth,
        verified.seconds,
        verified.states_per_second(),
        verified.jobs,
        if verified.jobs == 1 { "" } else { "s" }
    );
    let head = match o.ending {
        Ending::Verified => format!("VERIFIED up to the bounds: {figures}"),
        Ending::Violation => format!("VIOLATION found after {figures}"),
        Ending::BoundsReached => format!("BOUNDS REACHED with no violation: {figures}"),
        Ending::Interrupted => format!("INTERRUPTED with no violation so far: {figures}"),
    };
    say!(
        "{name} (design {kind}, {}): {head}",
        verified.strategy.as_str()
    );
    let flags: Vec<String> = bounds
        .flags()
        .iter()
        .map(|(flag, value)| format!("{flag} {value}"))
        .collect();
    say!("bounds: {}", flags.join(", "));
    let checked: Vec<&str> = fencesim_verify::CHECKED
        .iter()
        .map(|k| k.as_str())
        .collect();
    say!("checked: {}", checked.join(", "));
    let not: Vec<&str> = fencesim_verify::NOT_CHECKED
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    say!(
        "not checked (timing properties, the simulator's job): {}",
        not.join(", ")
    );
    if let Some(cx) = &o.counterexample {
        say!(
            "{} in {} steps (no shorter schedule has a violation):",
            cx.violation.kind.as_str(),
            cx.steps.len()
        );
        for (i, step) in cx.steps.iter().enumerate() {
            say!("{:>4}. {step}", i + 1);
        }
        say!("why: {}", cx.violation.explanation);
    }
}
