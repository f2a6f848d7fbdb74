//! The human-readable files next to report.json: history.txt (the history in aligned
//! columns), summary.md (verdict, explanation, reproduction) and timeline.html (the run drawn
//! per node, from the template `timeline.html`). docs/report-format.md describes them.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use fencesim_history::{Entry, Event, History, Op};
use serde::Serialize;

use crate::report::{Report, RunVerdict};

/// The most history records a timeline.html is written for: the page holds the whole history
/// and renders it in the browser (tested with 30,000 records). Beyond it, summary.md says so.
pub const TIMELINE_MAX_RECORDS: usize = 200_000;

/// The timeline page; the data goes where the placeholder is.
const TIMELINE_TEMPLATE: &str = include_str!("timeline.html");
const TIMELINE_PLACEHOLDER: &str = "/*FENCESIM_DATA*/null";

/// `NAME seed N`, or for a live trial `NAME live trial T`, or for a verify counterexample
/// `NAME verify counterexample (S steps)`.
fn run_title(name: &str, seed: u64, report: &Report) -> String {
    match (&report.live, &report.verify) {
        (Some(live), _) => format!("{name} live trial {}", live.trial),
        (None, Some(v)) => format!("{name} verify counterexample ({} steps)", v.steps.len()),
        (None, None) => format!("{name} seed {seed}"),
    }
}

/// history.txt, written to `out` line by line (a history of millions of records is never
/// held as one string): one line per entry, in columns (mark, index, true time in seconds,
/// node, what, details). Entries that are witnesses of a violation are marked `*`.
///
/// # Errors
/// `out`'s.
pub fn write_history_txt(
    out: &mut impl std::io::Write,
    history: &History,
    report: &Report,
) -> std::io::Result<()> {
    let witnesses: BTreeSet<u64> = report
        .violations
        .iter()
        .flat_map(|v| v.witnesses.iter().copied())
        .collect();
    writeln!(
        out,
        "# fencesim history: {}, {} entries. `*` marks a witness of a violation.",
        run_title(&history.header.scenario, history.header.seed, report),
        history.entries.len()
    )?;
    writeln!(
        out,
        "# Columns: mark, index, true time (s), node, what (operation type and function, or event and phase), details (key=value). docs/report-format.md#historytxt"
    )?;
    let untimed = history.header.untimed;
    if untimed {
        writeln!(
            out,
            "# Untimed: a `fencesim verify` schedule has no true time (time_s is `-`); the index orders the records."
        )?;
    }
    writeln!(
        out,
        "{:1} {:>7} {:>10}  {:<16} {:<22} details",
        "", "index", "time_s", "node", "what"
    )?;
    for entry in &history.entries {
        let at = entry.at();
        let mark = if witnesses.contains(&at.index) {
            "*"
        } else {
            ""
        };
        let (node, what, details) = match entry {
            Entry::Op(op) => (op.node.as_str(), op_what(op), op_details(op)),
            Entry::Event(ev) => (ev.node.as_str(), event_what(ev), event_details(ev)),
        };
        let time_s = if untimed {
            "-".to_owned()
        } else {
            format!("{:.3}", at.time_ns as f64 / 1e9)
        };
        writeln!(
            out,
            "{mark:1} {:>7} {time_s:>10}  {node:<16} {what:<22} {details}",
            at.index,
        )?;
    }
    out.flush()
}

fn name<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

fn op_what(op: &Op) -> String {
    format!("{} {}", name(&op.op_type), name(&op.f))
}

fn op_details(op: &Op) -> String {
    let mut d = vec![format!("process={}", op.process)];
    push(&mut d, "lock", &op.lock);
    push(&mut d, "key", &op.key);
    push(&mut d, "token", &op.token);
    push(&mut d, "value", &op.value);
    push(
        &mut d,
        "error",
        &op.error.as_ref().map(|s| format!("{s:?}")),
    );
    d.join(" ")
}

fn event_what(ev: &Event) -> String {
    match &ev.phase {
        Some(phase) => format!("{} {}", ev.event.as_str(), name(phase)),
        None => ev.event.as_str().to_owned(),
    }
}

fn event_details(ev: &Event) -> String {
    let mut d = Vec::new();
    push(&mut d, "lock", &ev.lock);
    push(&mut d, "key", &ev.key);
    push(&mut d, "holder", &ev.holder);
    push(&mut d, "token", &ev.token);
    push(&mut d, "highest", &ev.highest);
    push(&mut d, "expires_at_ms", &ev.expires_at_ms);
    // The TTL a grant, renewal or key promised, which the checks hold it to.
    push(&mut d, "ttl_ms", &ev.ttl_ms);
    push(&mut d, "nodes", &ev.nodes);
    push(&mut d, "op", &ev.op);
    push(&mut d, "target", &ev.target);
    push(&mut d, "window_ms", &ev.window_ms);
    push(
        &mut d,
        "detail",
        &ev.detail.as_ref().map(|s| format!("{s:?}")),
    );
    d.join(" ")
}

fn push<T: std::fmt::Display>(d: &mut Vec<String>, key: &str, value: &Option<T>) {
    if let Some(v) = value {
        d.push(format!("{key}={v}"));
    }
}

/// summary.md: the verdict, each violation with its explanation and causal chain, what could
/// not be judged, and the commands that reproduce, replay and shrink the run (`dir` is where
/// report.json is, as the run's output root names it).
pub fn summary_md(engine: &crate::Engine, report: &Report, dir: &std::path::Path) -> String {
    let mut md = String::new();
    let verdict = match report.verdict {
        RunVerdict::Valid => "valid",
        RunVerdict::Invalid => "INVALID",
        RunVerdict::Unknown => "unknown",
        RunVerdict::SimFailed => "simulation failed",
    };
    let _ = writeln!(
        md,
        "# {}: {verdict}\n",
        run_title(&report.scenario.name, report.seed, report)
    );
    let _ = writeln!(md, "{}\n", report.scenario.description.trim());
    let expected = &report.expectation;
    let _ = writeln!(
        md,
        "Expectation ({}{}): {}.\n",
        name(&expected.expected.verdict),
        if expected.expected.violations.is_empty() {
            String::new()
        } else {
            let kinds: Vec<&str> = expected
                .expected
                .violations
                .iter()
                .map(|k| k.as_str())
                .collect();
            format!(": {}", kinds.join(", "))
        },
        if expected.met { "met" } else { "NOT met" }
    );
    if let Some(f) = &report.failure {
        let _ = writeln!(md, "The simulation failed: {}\n", f.message);
    }
    for (i, v) in report.violations.iter().enumerate() {
        let _ = writeln!(md, "## Violation {}: {}\n", i + 1, v.kind);
        let _ = writeln!(md, "{}\n", v.explanation);
        let _ = writeln!(md, "Witnesses (history indexes): {:?}\n", v.witnesses);
        if !v.chain.is_empty() {
            let _ = writeln!(md, "How it happened:\n");
            for step in &v.chain {
                let _ = writeln!(md, "1. {step}");
            }
            md.push('\n');
        }
    }
    list(&mut md, "Unknown (a check gave up)", &report.unknown);
    list(
        &mut md,
        "Not checked (the history lacked what these need)",
        &report.not_checked,
    );
    let e = &report.unsafe_exposure;
    if !e.unmeasured {
        let _ = writeln!(
            md,
            "Writes after their lease ended: {} ({} accepted, {} rejected).\n",
            e.writes_after_lease_end, e.accepted, e.rejected
        );
    }
    if let Some(v) = &report.verify {
        let _ = writeln!(
            md,
            "## The schedule\n\nOne of the shortest schedules with this violation, found by `fencesim verify` ({}). It has no true time: each record's time is its index.\n",
            v.strategy.as_str()
        );
        for step in &v.steps {
            let _ = writeln!(md, "1. {step}");
        }
        md.push('\n');
    }
    let _ = writeln!(md, "## Reproduce\n\n```sh\n{}", report.reproduce);
    // A verify counterexample written as a scripted scenario: the simulator runs it.
    let scenario = dir.join(crate::verify::SCENARIO_FILE);
    if report.verify.is_some() && scenario.exists() {
        let program = fencesim_history::shell_word(engine.program());
        let scenario = crate::run::argument_word(&scenario.to_string_lossy());
        let _ = writeln!(md, "{program} run {scenario}");
    }
    let report_json = dir.join("report.json");
    // A live trial and a verify counterexample have no seed: they are run again, not
    // replayed or shrunk.
    if report.live.is_none() && report.verify.is_none() {
        // Commands to paste into a shell: each word quoted for one, as the reproduce line is.
        let program = fencesim_history::shell_word(engine.program());
        let report_json = crate::run::argument_word(&report_json.to_string_lossy());
        let _ = writeln!(md, "{program} replay {report_json}");
        if !report.violations.is_empty() {
            let _ = writeln!(md, "{program} shrink {report_json}");
        }
    }
    let timeline = if report.history.entries as usize <= TIMELINE_MAX_RECORDS {
        ", timeline.html"
    } else {
        " (no timeline.html: the history is over the 200,000 records a page can show)"
    };
    let _ = writeln!(
        md,
        "```\n\nFiles: report.json, {} (sha256 {}), history.txt{timeline}.",
        report.history.file, report.history.sha256
    );
    md
}

fn list(md: &mut String, title: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(md, "## {title}\n");
    for item in items {
        let _ = writeln!(md, "- {item}");
    }
    md.push('\n');
}

/// The scenario's nodes by role, for timeline.html, which gives each a lane even if it
/// recorded nothing (an idle Redis node, a client that crashed before its first operation).
/// The page gets the names from here rather than repeating the rule that names the lock
/// service's nodes ([`fencesim_scenario::LockServiceSpec::nodes`]).
#[derive(Serialize)]
struct PageNodes<'a> {
    clients: Vec<&'a str>,
    lock_service: Vec<String>,
    resource: &'static str,
}

impl<'a> PageNodes<'a> {
    fn of(scenario: &'a crate::Scenario) -> Self {
        PageNodes {
            clients: scenario.clients.iter().map(|c| c.name.as_str()).collect(),
            lock_service: scenario.lock_service.nodes(),
            resource: fencesim_scenario::RESOURCE_NODE,
        }
    }
}

/// timeline.html: the template with the report, the scenario's nodes ([`PageNodes`]) and the
/// history (header first, as history.jsonl has it) as its data. Every `<` in the data is
/// written `\u003c`, which JSON and JavaScript read back as `<` but an HTML parser never
/// sees: a description holding `</script>` or `<!--` cannot end the script early.
pub fn timeline_html(report: &Report, history_jsonl: &[u8]) -> std::io::Result<String> {
    let mut data = String::with_capacity(history_jsonl.len() + 4096);
    data.push_str("{\"report\":");
    data.push_str(&serde_json::to_string(report).map_err(std::io::Error::other)?);
    data.push_str(",\"nodes\":");
    let nodes = PageNodes::of(&report.scenario);
    data.push_str(&serde_json::to_string(&nodes).map_err(std::io::Error::other)?);
    data.push_str(",\"history\":[");
    let text = std::str::from_utf8(history_jsonl).map_err(std::io::Error::other)?;
    for (i, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        if i > 0 {
            data.push(',');
        }
        data.push_str(line);
    }
    data.push_str("]}");
    let data = data.replace('<', "\\u003c");
    Ok(TIMELINE_TEMPLATE.replacen(TIMELINE_PLACEHOLDER, &data, 1))
}

/// Write a run that has no seed (a live trial, a verify counterexample) under `dir` as a
/// simulated run's is: history.jsonl and report.json first ([`crate::report::unseeded_json`],
/// what `check` needs), then history.txt, summary.md and, for a history small enough for the
/// page, timeline.html. `report`'s history SHA-256 is set from the bytes written.
///
/// # Errors
/// A file could not be written.
pub fn write_unseeded(
    engine: &crate::Engine,
    dir: &std::path::Path,
    report: &Report,
    history: &fencesim_history::History,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut bytes = Vec::new();
    fencesim_history::write_jsonl(history, &mut bytes)?;
    let mut report = report.clone();
    report.history.sha256 = crate::report::sha256_hex(&bytes);
    std::fs::write(dir.join("history.jsonl"), &bytes)?;
    std::fs::write(
        dir.join("report.json"),
        crate::report::unseeded_json(&report).map_err(std::io::Error::other)?,
    )?;
    let mut txt = std::io::BufWriter::new(std::fs::File::create(dir.join("history.txt"))?);
    write_history_txt(&mut txt, history, &report)?;
    drop(txt);
    std::fs::write(dir.join("summary.md"), summary_md(engine, &report, dir))?;
    if history.entries.len() <= TIMELINE_MAX_RECORDS {
        std::fs::write(dir.join("timeline.html"), timeline_html(&report, &bytes)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_has_its_placeholder_once() {
        assert_eq!(TIMELINE_TEMPLATE.matches(TIMELINE_PLACEHOLDER).count(), 1);
    }

    /// Markup in the data (a description, a value) cannot end the page's script: without a
    /// browser, the page has exactly the template's `</script` and `<!--`, and the data, read
    /// back, holds the text unchanged.
    #[test]
    fn markup_in_the_data_stays_inside_the_script() {
        let (file, text) = crate::bundled::find("pause-fenced").expect("bundled");
        let engine = crate::Engine::built_in();
        let scenario = engine.parse_scenario(text, file).expect("valid");
        let opts = crate::run::RunOptions::in_memory();
        let mut done = crate::run::evaluate(&engine, &scenario, 0, &opts).expect("evaluate");
        let nasty = "<!-- a </script><script>alert(1)</script> -->";
        done.report.scenario.description = nasty.into();
        let page = timeline_html(&done.report, &done.history).expect("page");
        for markup in ["</script", "<!--", "<script"] {
            assert_eq!(
                page.matches(markup).count(),
                TIMELINE_TEMPLATE.matches(markup).count(),
                "{markup}"
            );
        }
        let start = page.find("const DATA = ").expect("data") + "const DATA = ".len();
        let end = start + page[start..].find(";\n").expect("end of data");
        let data: serde_json::Value = serde_json::from_str(&page[start..end]).expect("json");
        assert_eq!(data["report"]["scenario"]["description"], nasty);
    }
}
