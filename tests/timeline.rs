//! timeline.html in a real browser: headless Chromium loads the page written for a run, and
//! the page must render without a JavaScript error and show the violation's witnesses.
//!
//! The browser is Debian's `chromium` (or the one named by `FENCESIM_CHROMIUM`); `.ci/run`
//! installs it. Without one, each test prints that it was skipped and passes.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use fencesim::run::{evaluate, RunOptions};

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FENCESIM_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// Load `page` headless and return (the DOM after the scripts ran, the browser's stderr).
fn load(browser: &Path, page: &Path, test: &str) -> (String, String) {
    let profile = support::out_dir(&format!("{test}-profile"));
    let url = format!("file://{}", page.canonicalize().expect("page").display());
    let o = Command::new("timeout")
        .arg("120")
        .arg(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(o.status.success(), "chromium failed: {o:?}");
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The text of `<div id="fencesim-status">`.
fn status(dom: &str) -> String {
    let start = dom
        .find("<div id=\"fencesim-status\">")
        .expect("status div")
        + 26;
    let end = dom[start..].find('<').expect("end of status") + start;
    dom[start..end].to_owned()
}

fn console_errors(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect()
}

fn pause_unfenced() -> fencesim::run::Evaluated {
    let (file, text) = fencesim::bundled::find("pause-unfenced").expect("bundled");
    let scenario = fencesim::parse_scenario(text, file).expect("valid");
    let opts = RunOptions {
        out: PathBuf::new(),
        scenario_arg: "pause-unfenced".into(),
        check_determinism: false,
        swarm: false,
    };
    evaluate(&scenario, 0, &opts).expect("evaluate")
}

#[test]
fn the_timeline_of_a_violation_renders_and_shows_its_witnesses() {
    let Some(browser) = chromium() else {
        eprintln!(
            "SKIPPED: no Chromium (install Debian's chromium package, or set FENCESIM_CHROMIUM)"
        );
        return;
    };
    let out = support::out_dir("timeline-pause");
    let run = fencesim::run::write(&out, pause_unfenced()).expect("write");
    let page = run.report_path.with_file_name("timeline.html");
    let (dom, stderr) = load(&browser, &page, "timeline-pause");
    assert!(dom.contains("data-status=\"rendered\""), "{}", status(&dom));
    assert_eq!(
        status(&dom),
        "rendered 122 records; violations: 1; witnesses shown: 2"
    );
    assert!(
        dom.contains("stale-write-accepted"),
        "the violation is named"
    );
    assert_eq!(console_errors(&stderr), Vec::<&str>::new());
}

#[test]
fn a_timeline_of_ten_thousand_operations_renders() {
    let Some(browser) = chromium() else {
        eprintln!(
            "SKIPPED: no Chromium (install Debian's chromium package, or set FENCESIM_CHROMIUM)"
        );
        return;
    };
    // 2,500 lock cycles of 4 operations each (12 records): 10,000 operations, 30,000 records,
    // shown with pause-unfenced's report (its witnesses, 110 and 118, exist here too).
    let history = fencesim::bench::synthetic::sequential_history(2500);
    let mut bytes = Vec::new();
    fencesim_history::write_jsonl(&history, &mut bytes).expect("serialize");
    let html = fencesim::readable::timeline_html(&pause_unfenced().report, &bytes).expect("page");
    let out = support::out_dir("timeline-large");
    let page = out.join("timeline.html");
    std::fs::write(&page, html).expect("write page");
    let (dom, stderr) = load(&browser, &page, "timeline-large");
    assert_eq!(
        status(&dom),
        "rendered 30000 records; violations: 1; witnesses shown: 2"
    );
    assert_eq!(console_errors(&stderr), Vec::<&str>::new());
}

#[test]
fn markup_in_a_description_cannot_break_the_page() {
    let Some(browser) = chromium() else {
        eprintln!(
            "SKIPPED: no Chromium (install Debian's chromium package, or set FENCESIM_CHROMIUM)"
        );
        return;
    };
    let mut done = pause_unfenced();
    done.report.scenario.description = "<!-- a comment <script> and </script> </body>".into();
    let html = fencesim::readable::timeline_html(&done.report, &done.history).expect("page");
    let out = support::out_dir("timeline-markup");
    let page = out.join("timeline.html");
    std::fs::write(&page, html).expect("write page");
    let (dom, stderr) = load(&browser, &page, "timeline-markup");
    assert!(
        status(&dom).starts_with("rendered 122 records"),
        "{}",
        status(&dom)
    );
    assert_eq!(console_errors(&stderr), Vec::<&str>::new());
}
