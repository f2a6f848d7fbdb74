//! The `fencesim` command line (DESIGN.md, "CLI contract").

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use fencesim::run::{run_seed, RunOptions, SeedRun};
use fencesim::{bundled, exit, report::RunVerdict, Scenario};

/// Print a line to stdout, ignoring a closed pipe (`fencesim run ... | head -1`): the exit
/// code still carries the verdict.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

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
    Run {
        /// A scenario file, or the name of a bundled scenario (see `fencesim list`).
        scenario: String,
        /// Root seed. Without it: the first seed of the scenario's range, or with --expect
        /// every seed of the range.
        #[arg(long)]
        seed: Option<u64>,
        /// Output root; files go to DIR/<scenario name>/<seed>/.
        #[arg(long, value_name = "DIR", default_value = "reports/runs")]
        out: PathBuf,
        /// Exit 0 only if the scenario's [expect] is met (on every seed of its range unless
        /// --seed is given).
        #[arg(long)]
        expect: bool,
        /// Run each seed twice and fail (exit 4) unless the histories are byte-identical.
        #[arg(long)]
        check_determinism: bool,
    },
    /// Check a history.jsonl file (recorded by fencesim or converted from a real system).
    Check {
        /// The history file.
        history: PathBuf,
    },
    /// List the bundled scenarios with their expectations.
    List,
}

fn main() -> ExitCode {
    init_tracing();
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Run {
            scenario,
            seed,
            out,
            expect,
            check_determinism,
        } => run(&scenario, seed, out, expect, check_determinism),
        Command::Check { history } => check(&history),
        Command::List => list(),
    };
    ExitCode::from(code)
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

/// Load a scenario from a path, or else from the bundled set by name.
fn load(arg: &str) -> Result<Scenario, String> {
    let path = Path::new(arg);
    if !path.exists() {
        if let Some((file, text)) = bundled::find(arg) {
            return fencesim::parse_scenario(text, &format!("bundled:{file}"))
                .map_err(|e| e.to_string());
        }
    }
    fencesim::load_scenario(path).map_err(|e| e.to_string())
}

fn run(arg: &str, seed: Option<u64>, out: PathBuf, expect: bool, check_determinism: bool) -> u8 {
    let scenario = match load(arg) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::BAD_INPUT;
        }
    };
    let opts = RunOptions {
        out,
        scenario_arg: arg.to_owned(),
        check_determinism,
    };
    let seeds = match (seed, expect) {
        (Some(s), _) => s..s + 1,
        (None, false) => scenario.seeds.start..scenario.seeds.start + 1,
        (None, true) => scenario.seeds.start..scenario.seeds.end,
    };
    let sweep = seeds.end - seeds.start > 1;
    let mut worst = exit::VALID;
    let mut met = 0u64;
    for seed in seeds.clone() {
        let done = match run_seed(&scenario, seed, &opts) {
            Ok(done) => done,
            Err(e) => {
                eprintln!(
                    "error: cannot write the run's output under {}: {e}",
                    opts.out.display()
                );
                return exit::BAD_INPUT;
            }
        };
        let code = seed_exit_code(&done, expect);
        met += u64::from(done.report.expectation.met);
        // A sweep prints only the seeds that need attention; a single run always prints.
        if !sweep || code != exit::VALID {
            print_seed(&done, expect);
        }
        worst = worse(worst, code);
    }
    if sweep {
        let total = seeds.end - seeds.start;
        say!(
            "{}: expectation met on {met}/{total} seeds ({}..{})",
            scenario.name,
            seeds.start,
            seeds.end
        );
    }
    worst
}

fn print_seed(done: &SeedRun, expect: bool) {
    let r = &done.report;
    say!("{}", done.verdict_line());
    for v in &r.violations {
        say!(
            "  {}: {} [witnesses {:?}]",
            v.kind,
            v.explanation,
            v.witnesses
        );
    }
    if expect {
        let word = if r.expectation.met { "met" } else { "NOT met" };
        let mut wanted: Vec<&str> = r
            .expectation
            .expected
            .violations
            .iter()
            .map(|k| k.as_str())
            .collect();
        if wanted.is_empty() {
            wanted.push("no violation");
        }
        say!(
            "expectation {word}: {:?} with {}",
            r.expectation.expected.verdict,
            wanted.join(", ")
        );
    }
    say!("report: {}", done.report_path.display());
    if seed_exit_code(done, expect) != exit::VALID {
        say!("reproduce: {}", r.reproduce);
    }
}

fn seed_exit_code(done: &SeedRun, expect: bool) -> u8 {
    let r = &done.report;
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
fn worse(a: u8, b: u8) -> u8 {
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

fn check(path: &Path) -> u8 {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {}: cannot open history: {e}", path.display());
            return exit::BAD_INPUT;
        }
    };
    let history = match fencesim_history::read_jsonl(std::io::BufReader::new(file)) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: {}: {e}", path.display());
            return exit::BAD_INPUT;
        }
    };
    let result = fencesim::check(&history);
    let verdict = fencesim::report::verdict(&result, None);
    say!(
        "{}: {:?} ({} violations)",
        path.display(),
        verdict,
        result.violations.len()
    );
    for v in &result.violations {
        say!(
            "  {}: {} [witnesses {:?}]",
            v.kind,
            v.explanation,
            v.witnesses
        );
    }
    match verdict {
        RunVerdict::Valid => exit::VALID,
        RunVerdict::Unknown => exit::UNKNOWN,
        _ => exit::VIOLATION,
    }
}

fn list() -> u8 {
    for (file, text) in bundled::SCENARIOS {
        match fencesim::parse_scenario(text, file) {
            Ok(s) => {
                let mut expect = format!("{:?}", s.expect.verdict).to_lowercase();
                if !s.expect.violations.is_empty() {
                    let kinds: Vec<_> = s.expect.violations.iter().map(|k| k.as_str()).collect();
                    expect = format!("{expect} ({})", kinds.join(", "));
                }
                let summary = s
                    .description
                    .split(". ")
                    .next()
                    .unwrap_or("")
                    .replace('\n', " ");
                say!(
                    "{:<26} seeds {}..{:<5} expect {expect}\n    {summary}.",
                    s.name,
                    s.seeds.start,
                    s.seeds.end
                );
            }
            Err(e) => {
                eprintln!("error: bundled scenario is invalid: {e}");
                return exit::SIM_FAILED;
            }
        }
    }
    exit::VALID
}
