//! The `fencesim` command line (DESIGN.md, "CLI contract"): the list of commands, which this
//! module dispatches, and the process-wide setup (panic hook, Ctrl-C, tracing). Each command's
//! arguments (`Args`) and the function that runs it (`exec`) are in a file of its own under
//! `commands/`, as cargo's own commands are. It is in the library so that a user's
//! own binary runs the whole CLI with designs of their own ([`main`]); the `fencesim` binary
//! (`src/main.rs`) is that call with the built-in designs.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::cancel::Cancel;
use crate::exit;
use crate::registry::Registry;
use crate::Engine;

/// Print a line to stdout, ignoring a closed pipe (`fencesim run ... | head -1`): the exit
/// code still carries the verdict.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), "{}", $crate::cli::terminal_safe(&format!($($arg)*)));
    }};
}

/// `eprintln!` for fencesim's messages on stderr, escaped as [`say!`]'s lines are: an error
/// quotes a path or a value of the user's, which may hold an escape sequence.
macro_rules! complain {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "{}", $crate::cli::terminal_safe(&format!($($arg)*)));
    }};
}

/// A line for stdout or stderr with every control and invisible formatting character but the
/// line breaks escaped ([`fencesim_history::escape_controls`]): what fencesim prints quotes
/// its inputs (a path, a name from a history), and none of it may reach the terminal as an
/// escape sequence or reorder what is shown. The checkers escape what they quote, line breaks
/// included; this is the last guard for everything else.
pub(crate) fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    let lines: Vec<_> = text
        .split('\n')
        .map(fencesim_history::escape_controls)
        .collect();
    if lines
        .iter()
        .all(|l| matches!(l, std::borrow::Cow::Borrowed(_)))
    {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(lines.join("\n"))
}

// After `say!`, so that the commands can use it.
mod commands;
mod progress;

#[derive(Parser)]
#[command(
    name = "fencesim",
    version,
    about = "Deterministic simulation and checking of lease-based locks with fencing tokens"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate a scenario, check the history, write report.json and history.jsonl.
    Run(commands::run::Args),
    /// Look for a counterexample (a run that misses the scenario's expectation): for a
    /// scenario with a [nemesis], a guided search of its fault schedules; otherwise, or with
    /// --sweep, --keep-going, --shard or --check-determinism, a sweep of the seeds in
    /// parallel. Writes files only for counterexamples, and a summary.
    Explore(commands::explore::Args),
    /// Check a history: a history.jsonl (recorded by fencesim or converted from a real system),
    /// or a Jepsen history.edn with --format jepsen-edn.
    Check(commands::check::Args),
    /// Write a history.jsonl in another format, for other tools (Jepsen's Knossos and Elle).
    Export(commands::export::Args),
    /// Re-run the scenario and seed a report.json records (its resolved scenario is inside) and
    /// check that the history comes out byte-identical (exit 0) or not (exit 4).
    Replay(commands::replay::Args),
    /// Reduce a failing run (its report.json) to a minimal scenario that still shows the same
    /// violation kind, and write it as a scenario file that `fencesim run` reproduces.
    Shrink(commands::shrink::Args),
    /// Explore every schedule of a scenario's small configuration (its design's own code,
    /// its clients' cycles) under message loss, duplication, reordering, any timer firing
    /// first and node crashes, breadth-first: exit 0 verified up to the bounds, 1 with the
    /// shortest counterexample, 3 if the bounds were reached first, 130 if interrupted
    /// (docs/verify.md).
    Verify(commands::verify::Args),
    /// List the bundled scenarios with their expectations (or, with --designs, the lock designs
    /// and resources a scenario may name, with their knobs).
    List(commands::list::Args),
    /// Run a scenario against real servers (PostgreSQL, redis-server for Redlock, etcd) with clients
    /// as OS processes and real faults (SIGSTOP pauses, SIGKILL crashes, a TCP proxy for the
    /// network), record the same history and judge it with the same checks (docs/live.md).
    /// Exit 0 if every trial is valid (with --expect: meets the scenario's expectation), 1 if
    /// one is not, 3 if a verdict is unknown, 2 if the scenario has parts with no live form or
    /// a server is not installed, 4 if a server failed, 130 if interrupted.
    Live(commands::live::Args),
    /// A live trial's client process (started by `fencesim live`, not by hand).
    #[command(hide = true)]
    LiveClient,
    /// Measure fencesim itself: seeds per second, records per seed and simulated latencies of
    /// every bundled scenario (release builds give the meaningful figures).
    Bench(commands::bench::Args),
}

/// Run the `fencesim` command line on this process's arguments with the designs of
/// `registry`, and return its exit code (README's table). The engine is named after the
/// binary (`argv[0]`'s file name), so that the `reproduce:` lines a user's own binary prints
/// name that binary, which knows its designs.
pub fn main(registry: Registry) -> ExitCode {
    let engine = match std::env::args_os().next().as_deref().and_then(program_name) {
        Some(name) => Engine::new(registry).named(name),
        None => Engine::new(registry),
    };
    init_tracing();
    quiet_simulation_panics();
    // The one token of this process's commands; the Ctrl-C handler holds a clone.
    let cancel = Cancel::new();
    stop_sweeps_on_ctrl_c(cancel.clone());
    let cli = Cli::parse();
    let code = match &cli.command {
        Command::Run(args) => commands::run::exec(&engine, args, &cancel),
        Command::Explore(args) => commands::explore::exec(&engine, args, &cancel),
        Command::Check(args) => commands::check::exec(args),
        Command::Export(args) => commands::export::exec(args),
        Command::Replay(args) => commands::replay::exec(&engine, args),
        Command::Shrink(args) => commands::shrink::exec(&engine, args),
        Command::Verify(args) => commands::verify::exec(&engine, args, &cancel),
        Command::List(args) => commands::list::exec(&engine, args),
        Command::Live(args) => commands::live::exec(&engine, args, &cancel),
        Command::LiveClient => commands::live::live_client(&engine),
        Command::Bench(args) => commands::bench::exec(&engine, args, &cancel),
    };
    ExitCode::from(code)
}

/// The command's name from `argv0`: its file name without an extension (`fencesim`,
/// `zookeeper-lock`), if it has one.
fn program_name(argv0: &std::ffi::OsStr) -> Option<String> {
    let stem = std::path::Path::new(argv0).file_stem()?;
    Some(stem.to_string_lossy().into_owned()).filter(|n| !n.is_empty())
}

/// A panic inside a simulation is caught and reported (verdict line, report.json, exit 4), so
/// the default hook's message and backtrace would only repeat it; other panics keep the hook.
fn quiet_simulation_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_simulation = std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("fencesim-seed-"));
        // RUST_BACKTRACE is often set for other work; it must not turn every failed seed of
        // a sweep into a page of backtrace. FENCESIM_DEBUG_PANICS asks for them on purpose.
        if !in_simulation || std::env::var_os("FENCESIM_DEBUG_PANICS").is_some() {
            default(info);
        }
    }));
}

/// The first Ctrl-C cancels `cancel`: a sweep finishes the seeds in progress and writes what it
/// found so far (a partial summary, exit 130); a second one quits at once.
fn stop_sweeps_on_ctrl_c(cancel: Cancel) {
    let result = ctrlc::set_handler(move || {
        // Only a sweep has seeds in progress to finish; anything else stops at once.
        if cancel.is_cancelled() || !cancel.is_running() {
            // Quitting at once runs no destructor: stop and remove what a live run started.
            fencesim_live::reaper::reap_all();
            std::process::exit(i32::from(exit::INTERRUPTED));
        }
        cancel.cancel();
        complain!(
            "\ninterrupted: finishing the work in progress (the seeds or simulations, the live trial, or the search), then \
             writing what was found so far (Ctrl-C again to quit at once)"
        );
    });
    // Without the handler (another one was installed first, as in a test harness) Ctrl-C
    // still stops the process, only without a summary: nothing to report.
    drop(result);
}

/// Diagnostics only when RUST_LOG asks for them: the hot loop stays quiet by default.
fn init_tracing() {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
}
