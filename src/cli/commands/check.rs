//! `fencesim check`: judge a history file, fencesim's JSON Lines or Jepsen's EDN.

use std::path::{Path, PathBuf};

use fencesim::{exit, report::RunVerdict};

/// `fencesim check`'s arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The history file.
    history: PathBuf,
    /// Print the whole result as one JSON object (verdict, violations, unknown reasons,
    /// unsafe exposure) instead of lines of text.
    #[arg(long)]
    json: bool,
    /// The history's format: fencesim's JSON Lines, or Jepsen's EDN (operation maps, loose
    /// or in one whole-file vector, as history.edn).
    #[arg(long, value_enum, default_value_t = HistoryFormat::Jsonl)]
    format: HistoryFormat,
    /// Search steps the linearizability check may take per key; past them the verdict is
    /// unknown (exit 3). At least 1.
    #[arg(long, value_name = "N", default_value_t = fencesim_checker::CheckOptions::default().linearizability_steps,
          value_parser = clap::value_parser!(u64).range(1..))]
    linearizability_steps: u64,
    /// Search steps the linearizability check may take over all keys together; keys whose
    /// turn comes after they are spent are unknown. At least 1.
    #[arg(long, value_name = "N", default_value_t = fencesim_checker::CheckOptions::default().linearizability_total_steps,
          value_parser = clap::value_parser!(u64).range(1..))]
    linearizability_total_steps: u64,
    /// The value every key's register holds before any operation (Knossos's test suite
    /// uses 0). Without it a register starts never written.
    #[arg(long, value_name = "VALUE")]
    initial_value: Option<String>,
    /// How a compare-and-set that completed fail is read: Knossos's (it never happened)
    /// or Porcupine's (it happened, and found another value than it expected).
    #[arg(long, value_enum, default_value_t = FailedCasArg::Knossos)]
    failed_cas: FailedCasArg,
    /// Judge acquire and release operations, per lock, as a mutex or a fenced mutex (ok
    /// acquires return growing fences). Only for locks without expiry: a lease that
    /// expires is taken again without a release. Without it they are not judged so.
    #[arg(long, value_enum)]
    model: Option<LockModelArg>,
}

/// `fencesim check`: read the options, judge the history, print the verdict (or JSON).
pub(crate) fn exec(args: &Args) -> u8 {
    // An EDN history's values are compared by their canonical text (Clojure's `=`): the
    // initial value is read as EDN and written the same way.
    let initial_value = match (args.format, &args.initial_value) {
        (HistoryFormat::JepsenEdn, Some(v)) => match edn_value(v) {
            Ok(canonical) => Some(canonical),
            Err(why) => {
                complain!("error: --initial-value {v:?}: {why}");
                return exit::BAD_INPUT;
            }
        },
        (_, v) => v.clone(),
    };
    let options = fencesim_checker::CheckOptions {
        linearizability_steps: args.linearizability_steps,
        linearizability_total_steps: args.linearizability_total_steps,
        initial_value,
        failed_cas: args.failed_cas.into(),
        lock_model: args.model.map(Into::into),
    };
    check(&args.history, args.format, args.json, &options)
}

/// History file formats `check` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum HistoryFormat {
    /// fencesim's JSON Lines (docs/history-format.md).
    Jsonl,
    /// Jepsen's EDN operations, one map per line.
    JepsenEdn,
}

/// How `check --failed-cas` reads a compare-and-set that completed `fail`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FailedCasArg {
    /// Knossos's: a failed operation never happened.
    Knossos,
    /// Porcupine's: it happened, and found another value than it expected.
    Porcupine,
}

impl From<FailedCasArg> for fencesim_checker::FailedCas {
    fn from(arg: FailedCasArg) -> Self {
        match arg {
            FailedCasArg::Knossos => fencesim_checker::FailedCas::Knossos,
            FailedCasArg::Porcupine => fencesim_checker::FailedCas::Porcupine,
        }
    }
}

/// `check --model`: the model acquire and release operations are judged against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LockModelArg {
    /// Knossos's mutex: an acquire of a held lock, or a release of a free one, is impossible.
    Mutex,
    /// A mutex whose ok acquires return fences (tokens) that must grow.
    FencedMutex,
}

impl From<LockModelArg> for fencesim_checker::LockModel {
    fn from(arg: LockModelArg) -> Self {
        match arg {
            LockModelArg::Mutex => fencesim_checker::LockModel::Mutex,
            LockModelArg::FencedMutex => fencesim_checker::LockModel::FencedMutex,
        }
    }
}

/// Read a history in `format`, or print why not (file and line) and return `None`.
pub(crate) fn load_history(path: &Path, format: HistoryFormat) -> Option<fencesim::History> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            // read_to_string says "stream did not contain valid UTF-8" for a binary file.
            let why = if e.kind() == std::io::ErrorKind::InvalidData {
                "cannot read history: not UTF-8 text".to_owned()
            } else {
                format!("cannot open history: {e}")
            };
            complain!("error: {}: {why}", fencesim_history::display_path(path));
            return None;
        }
    };
    let read = match format {
        HistoryFormat::Jsonl => fencesim_history::read_jsonl(text.as_bytes()),
        HistoryFormat::JepsenEdn => {
            let name = path
                .file_stem()
                .map_or("jepsen".into(), |s| s.to_string_lossy());
            fencesim_history::read_jepsen_edn(&text, &name)
        }
    };
    // A Jepsen history read as JSON Lines fails on its first line; say what was likely meant.
    let hint = match (format, path.extension().and_then(|e| e.to_str())) {
        (HistoryFormat::Jsonl, Some("edn")) => " (an .edn file: add --format jepsen-edn)",
        _ => "",
    };
    read.map_err(|e| complain!("error: {}: {e}{hint}", fencesim_history::display_path(path)))
        .ok()
}

/// `text` read as one EDN value, in the canonical text an EDN history's values are compared
/// by (`#{2 1}` reads as `#{1 2}`), or why not.
fn edn_value(text: &str) -> Result<String, String> {
    let nodes =
        fencesim_history::edn::parse_all(text).map_err(|e| format!("not EDN: {}", e.message))?;
    match <[fencesim_history::edn::Node; 1]>::try_from(nodes) {
        Ok([one]) => Ok(one.value.canonical()),
        Err(nodes) => Err(format!("expected one EDN value, found {}", nodes.len())),
    }
}

fn check(
    path: &Path,
    format: HistoryFormat,
    json: bool,
    options: &fencesim_checker::CheckOptions,
) -> u8 {
    let Some(history) = load_history(path, format) else {
        return exit::BAD_INPUT;
    };
    let result = fencesim_checker::check_with(&history, options);
    let verdict = fencesim::report::verdict(&result, None);
    if json {
        let out = serde_json::json!({
            "history": fencesim_history::display_path(path),
            "verdict": verdict,
            "violations": result.violations,
            "unknown": result.unknown,
            "not_checked": result.not_checked,
            "unsafe_exposure": result.unsafe_exposure,
        });
        say!("{out}");
    } else {
        print_check(path, verdict, &result);
    }
    match verdict {
        RunVerdict::Valid => exit::VALID,
        RunVerdict::Unknown => exit::UNKNOWN,
        _ => exit::VIOLATION,
    }
}

pub(crate) fn print_check(
    path: &Path,
    verdict: RunVerdict,
    result: &fencesim_checker::CheckResult,
) {
    let n = result.violations.len();
    let skipped = match result.not_checked.len() {
        0 => String::new(),
        k => format!(
            "; {k} check{} had nothing to judge",
            if k == 1 { "" } else { "s" }
        ),
    };
    say!(
        "{}: {:?} ({n} violation{}{skipped})",
        fencesim_history::display_path(path),
        verdict,
        if n == 1 { "" } else { "s" }
    );
    for v in &result.violations {
        say!(
            "  {}: {} [witnesses {:?}]",
            v.kind,
            v.explanation,
            v.witnesses
        );
        if !v.chain.is_empty() {
            say!("    chain: {}", v.chain.join(" -> "));
        }
    }
    for reason in &result.unknown {
        say!("  unknown: {reason}");
    }
    for lacked in &result.not_checked {
        say!("  not checked: {lacked}");
    }
}
