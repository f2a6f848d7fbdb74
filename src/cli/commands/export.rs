//! `fencesim export`: a history.jsonl as Jepsen EDN, saying what the conversion drops.

use std::path::{Path, PathBuf};

use fencesim::exit;

use super::check::{load_history, HistoryFormat};

/// `fencesim export`'s arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The history file (JSON Lines).
    history: PathBuf,
    /// The format to write.
    #[arg(long, value_enum, default_value_t = ExportFormat::JepsenEdn)]
    format: ExportFormat,
    /// Where to write (default: standard output).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// `fencesim export`: the history in `--format` (Jepsen's EDN, the one there is).
pub(crate) fn exec(args: &Args) -> u8 {
    let ExportFormat::JepsenEdn = args.format;
    export(&args.history, args.out.as_deref())
}

/// Formats `export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ExportFormat {
    /// Jepsen's EDN operations, one map per line.
    JepsenEdn,
}

fn export(path: &Path, out: Option<&Path>) -> u8 {
    // Writing the EDN over the history it comes from would lose the history (its service
    // events, which the EDN leaves out): refused before anything is read or written.
    if let Some(file) = out.filter(|file| same_file(path, file)) {
        complain!(
            "error: --out {} is the history being exported; write the EDN to another file",
            fencesim_history::display_path(file)
        );
        return exit::BAD_INPUT;
    }
    let Some(history) = load_history(path, HistoryFormat::Jsonl) else {
        return exit::BAD_INPUT;
    };
    let written = match out {
        Some(file) => std::fs::File::create(file)
            .and_then(|f| fencesim_history::write_jepsen_edn(&history, std::io::BufWriter::new(f))),
        None => fencesim_history::write_jepsen_edn(&history, std::io::stdout().lock()),
    };
    match written {
        Ok(export) => {
            warn_of_lost_checks(&history, &export);
            exit::VALID
        }
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => exit::VALID,
        Err(e) => {
            let into = out.map_or_else(
                || "to standard output".to_owned(),
                |file| format!("into {}", fencesim_history::display_path(file)),
            );
            complain!("error: cannot write the export {into}: {e}");
            exit::BAD_INPUT
        }
    }
}

/// Whether `a` and `b` name one existing file (through links and `..` as well).
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Jepsen's form keeps operations only: say on stderr which checks the history could support
/// and the export cannot, so that a `check` of the file calling it valid is not taken for the
/// run's verdict.
pub(crate) fn warn_of_lost_checks(
    history: &fencesim::History,
    export: &fencesim_history::EdnExport,
) {
    if export.dropped_tokens > 0 {
        complain!(
            "note: the history's tokens are opaque lock values (token_order: acquisition), which \
             the EDN would present as fencing tokens: its {} tokens are left out",
            export.dropped_tokens
        );
    }
    if export.dropped_events == 0 {
        return;
    }
    let ops_only = fencesim::History {
        header: history.header.clone(),
        entries: history
            .entries
            .iter()
            .filter(|e| match e {
                fencesim_history::Entry::Op(_) => true,
                fencesim_history::Entry::Event(e) => e.event.is_nemesis(),
            })
            .cloned()
            .collect(),
    };
    let before = fencesim_checker::not_checked(history);
    let lost: Vec<String> = fencesim_checker::not_checked(&ops_only)
        .into_iter()
        .filter(|kind| !before.contains(kind))
        .collect();
    complain!(
        "note: the EDN keeps {} operations and leaves out {} service and resource events \
         (grants, expiries, accepts, rejects, beliefs)",
        export.written,
        export.dropped_events
    );
    if !lost.is_empty() {
        complain!(
            "note: checks the history supports and the EDN cannot (check the history.jsonl for \
             the run's verdict):"
        );
        for kind in lost {
            complain!("  {kind}");
        }
    }
}
