//! timeline.html in a real browser: headless Chromium loads the page written for a run, and
//! the page must render without a JavaScript error and show the violation's witnesses.
//!
//! The browser is Debian's `chromium` (or the one named by `FENCESIM_CHROMIUM`); `.ci/run`
//! installs it. Without one, each test prints that it was skipped and passes.

use crate::support;

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
    evaluated("pause-unfenced")
}

/// Seed 0 of the bundled scenario `name`, evaluated (nothing written).
fn evaluated(name: &str) -> fencesim::run::Evaluated {
    let (file, text) = fencesim::bundled::find(name).expect("bundled");
    let scenario = crate::support::engine()
        .parse_scenario(text, file)
        .expect("valid");
    let opts = RunOptions {
        out: PathBuf::new(),
        scenario_arg: name.into(),
        check_determinism: false,
        swarm: false,
        cancel: Default::default(),
    };
    evaluate(crate::support::engine(), &scenario, 0, &opts).expect("evaluate")
}

/// Write seed 0 of the bundled scenario `name` as a run and return its timeline.html.
fn run_page(name: &str, test: &str) -> PathBuf {
    let out = support::out_dir(test);
    let run = fencesim::run::write(crate::support::engine(), &out, evaluated(name)).expect("write");
    run.report_path.with_file_name("timeline.html")
}

/// For probes: `canvasPixels()` reads the canvas once (reading it pixel by pixel makes Chromium
/// log a performance warning) and returns `(x, y) => [r, g, b, a]` in CSS pixels.
const CANVAS_PIXELS: &str = "const canvasPixels = () => { \
    const dpr = window.devicePixelRatio || 1, img = ctx.getImageData(0, 0, cv.width, cv.height); \
    return (x, y) => { const i = 4 * (Math.round(y * dpr) * img.width + Math.round(x * dpr)); \
      return [...img.data.slice(i, i + 4)]; }; };";

/// Load a copy of `page` with `body` (the body of a JavaScript function) run after the page's
/// own script, and return what it returns, as JSON. The probe sees the page's top-level names
/// (`M`, `PW`, `hits`, `X`, `draw`, ...) as any later script does. The page must still render
/// without a console error.
fn probe(browser: &Path, page: &Path, body: &str, test: &str) -> serde_json::Value {
    const OPEN: &str = "<pre id=\"fencesim-probe\">";
    let html = std::fs::read_to_string(page).expect("read page");
    // The data has every `<` escaped, so the last `</body>` is the page's own.
    let at = html.rfind("</body>").expect("</body>");
    let script = format!(
        "{OPEN}</pre><script>\n(function () {{\n  let out;\n  \
         {CANVAS_PIXELS}\n  \
         try {{ out = JSON.stringify((function () {{\n{body}\n}})()); }}\n  \
         catch (e) {{ out = JSON.stringify({{ probe_error: String(e && e.stack || e) }}); }}\n  \
         document.getElementById('fencesim-probe').textContent = out;\n}})();\n</script>\n"
    );
    let probed = page.with_file_name("timeline-probe.html");
    std::fs::write(&probed, format!("{}{script}{}", &html[..at], &html[at..])).expect("write");
    let (dom, stderr) = load(browser, &probed, test);
    assert!(status(&dom).starts_with("rendered"), "{}", status(&dom));
    assert_eq!(console_errors(&stderr), Vec::<&str>::new());
    let start = dom.find(OPEN).expect("probe output") + OPEN.len();
    let end = start + dom[start..].find("</pre>").expect("end of probe output");
    let text = dom[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&");
    let value: serde_json::Value = serde_json::from_str(&text).expect("probe output is JSON");
    assert!(value.get("probe_error").is_none(), "{value}");
    value
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
    let run =
        fencesim::run::write(crate::support::engine(), &out, pause_unfenced()).expect("write");
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

#[test]
fn the_legend_shows_each_tokens_colour_as_the_bars_are_drawn() {
    let Some(browser) = chromium() else {
        eprintln!(
            "SKIPPED: no Chromium (install Debian's chromium package, or set FENCESIM_CHROMIUM)"
        );
        return;
    };
    let page = run_page("pause-unfenced", "timeline-legend");
    // Each legend swatch, and the canvas pixel 70% along each lease bar (past its label).
    let v = probe(
        &browser,
        &page,
        r#"
        const pixel = canvasPixels();
        const swatches = [...document.querySelectorAll('#legend-bars .tok')].map(el => ({
          token: el.dataset.token, label: el.textContent,
          color: getComputedStyle(el.querySelector('i')).backgroundColor }));
        const bars = M.lanes.flatMap(l => l.items.filter(it => it.row === 'lease').map(it => {
          const row = l.rows.lease, x = X(it.t0) + 0.7 * (X(it.t1) - X(it.t0)), y = l.y + row.y + row.h / 2;
          const p = pixel(x, y);
          return { token: String(it.token), pixel: `rgb(${p[0]}, ${p[1]}, ${p[2]})` };
        }));
        return { swatches, bars };
        "#,
        "timeline-legend",
    );
    let swatches = v["swatches"].as_array().expect("swatches");
    let labels: Vec<(&str, &str)> = swatches
        .iter()
        .map(|s| (s["token"].as_str().unwrap(), s["label"].as_str().unwrap()))
        .collect();
    assert_eq!(labels, [("1", "t1"), ("2", "t2")], "{v}");
    assert_ne!(swatches[0]["color"], swatches[1]["color"], "{v}");
    let bars = v["bars"].as_array().expect("bars");
    assert_eq!(bars.len(), 2, "one lease per token: {v}");
    for bar in bars {
        let swatch = swatches
            .iter()
            .find(|s| s["token"] == bar["token"])
            .expect("a swatch for the bar's token");
        assert_eq!(bar["pixel"], swatch["color"], "token {}: {v}", bar["token"]);
    }
}

#[test]
fn the_stale_witness_of_a_stale_write_is_marked_apart_from_the_newer_one() {
    let Some(browser) = chromium() else {
        eprintln!(
            "SKIPPED: no Chromium (install Debian's chromium package, or set FENCESIM_CHROMIUM)"
        );
        return;
    };
    let page = run_page("pause-unfenced", "timeline-stale");
    // The rings as drawn (the stale one is filled: a pixel inside it, off its triangle, is
    // tinted red), then with the violation selected, then the details of a click on the stale one.
    let v = probe(
        &browser,
        &page,
        r#"
        const pixel = canvasPixels();
        const red = w => { const p = pixel(w.x - 5, w.y - 3); return p[0] - p[1] > 40; };
        const rings = () => hits.filter(h => h.witness).map(h => h.witness);
        const drawn = rings().map(w => ({ idx: w.idx, role: w.role, label: w.label, red: red(w) }));
        document.querySelector('.viol').click(); draw();
        const selected = rings().map(w => w.label);
        const stale = rings().find(w => w.role === 'stale');
        showDetail(hitAt(stale.x, stale.y).it);
        return { drawn, selected, chips: [...document.querySelectorAll('.chip')].map(c => c.textContent),
          detail: $('detail').textContent.split('\n')[0], legend: $('legend-witness').textContent };
        "#,
        "timeline-stale",
    );
    assert_eq!(
        v["drawn"],
        serde_json::json!([
            { "idx": 118, "role": "stale", "label": "W stale", "red": true },
            { "idx": 110, "role": "newer", "label": "W newer", "red": false },
        ])
    );
    assert_eq!(v["selected"], serde_json::json!(["W1 stale", "W2 newer"]));
    assert_eq!(
        v["chips"],
        serde_json::json!([
            "W1 stale #118: resource accept",
            "W2 newer #110: resource accept"
        ])
    );
    assert_eq!(
        v["detail"],
        "WITNESS W1 (stale: the write accepted with the older token, after the newer token was \
         accepted) of violation 1: stale-write-accepted, record #118"
    );
    assert_eq!(v["legend"], "witnessstale write (W1)newer write (W2)");
}

#[test]
fn every_node_of_the_scenario_has_a_lane_even_if_it_recorded_nothing() {
    let Some(browser) = chromium() else {
        eprintln!(
            "SKIPPED: no Chromium (install Debian's chromium package, or set FENCESIM_CHROMIUM)"
        );
        return;
    };
    let lanes = "return M.lanes.map(l => `${l.name}: ${l.sub}`);";
    // Redlock's five Redis nodes record their key events (issue 36), each on its own lane.
    let page = run_page("redlock-clock-jump", "timeline-lanes-redlock");
    assert_eq!(
        probe(&browser, &page, lanes, "timeline-lanes-redlock"),
        serde_json::json!([
            "client-1: process 0",
            "client-2: process 1",
            "redis-1: lock service",
            "redis-2: lock service",
            "redis-3: lock service",
            "redis-4: lock service",
            "redis-5: lock service",
            "resource: resource: writes",
            "nemesis: network-wide faults",
        ])
    );
    // Raft's third replica never leads nor applies an entry first, so it records nothing: its
    // lane is there, and says so.
    let page = run_page("raft-k08-revoke-unchecked", "timeline-lanes-raft");
    let raft = probe(&browser, &page, lanes, "timeline-lanes-raft");
    let raft: Vec<&str> = raft
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        raft.contains(&"lease-3: lock service · no records")
            && raft.contains(&"lease-1: lock service"),
        "{raft:?}"
    );
    // Where every node recorded something, the lanes are as before.
    let page = run_page("pause-unfenced", "timeline-lanes-single");
    assert_eq!(
        probe(&browser, &page, lanes, "timeline-lanes-single"),
        serde_json::json!([
            "client-1: process 0",
            "client-2: process 1",
            "lease-service: lock service",
            "resource: resource: writes",
        ])
    );
}

/// The initial view, and fit after zooming and panning away, keep every witness's ring and
/// label at least 3% of the plot's width from either edge. pause-unfenced's stale write lands
/// 17 ms before the run ends; clock-jump-wall-expiry's first belief starts at 12 ms.
#[test]
fn fit_keeps_every_witness_clear_of_the_edges() {
    let Some(browser) = chromium() else {
        eprintln!(
            "SKIPPED: no Chromium (install Debian's chromium package, or set FENCESIM_CHROMIUM)"
        );
        return;
    };
    // Each drawn witness's margins to the plot's left and right edges, as shares of its width:
    // of the ring alone (from its centre and the selected ring's radius), and of ring and label.
    let body = r#"
        const margins = () => hits.filter(h => h.witness).map(h => ({ idx: h.witness.idx,
          ring: [(h.witness.x - RING_R_SEL - LABEL_W) / PW, (LABEL_W + PW - h.witness.x - RING_R_SEL) / PW],
          marker: [(h.x0 - LABEL_W) / PW, (LABEL_W + PW - h.x1) / PW] }));
        const initial = margins();
        zoomAt(M.tmax / 2, 0.05); pan(M.tmax); draw();
        const away = margins().length;
        $('b-fit').click(); draw();
        return { witnesses: M.wit.size, initial, away, fitted: margins(), view: [v0, v1], tmax: M.tmax };
        "#;
    for name in ["pause-unfenced", "clock-jump-wall-expiry"] {
        let test = format!("timeline-fit-{name}");
        let v = probe(&browser, &run_page(name, &test), body, &test);
        let witnesses = v["witnesses"].as_u64().expect("witnesses");
        assert!(witnesses >= 2, "{name}: {v}");
        assert_eq!(v["away"], 0, "{name}: zoomed away from every witness: {v}");
        for when in ["initial", "fitted"] {
            let drawn = v[when].as_array().expect("margins");
            assert_eq!(
                drawn.len() as u64,
                witnesses,
                "{name} {when}: every witness drawn: {v}"
            );
            for w in drawn {
                for side in ["ring", "marker"] {
                    for m in w[side].as_array().expect("left, right") {
                        let m = m.as_f64().expect("margin");
                        assert!(
                            m >= 0.03,
                            "{name} {when}: witness {} {side}: {m}: {v}",
                            w["idx"]
                        );
                    }
                }
            }
        }
        // And the view still shows the whole run.
        let (v0, v1, tmax) = (
            v["view"][0].as_f64(),
            v["view"][1].as_f64(),
            v["tmax"].as_f64(),
        );
        assert!(v0 <= Some(0.0) && v1 >= tmax, "{name}: {v}");
    }
}
