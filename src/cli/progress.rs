//! Progress of a sweep on stderr: an indicatif bar on a terminal, a plain line every few
//! seconds otherwise (CI logs, batch systems), nothing with `--quiet`. Real time is read here,
//! outside any simulation, only to pace the output; nothing of it reaches a history.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};

use fencesim::bench::Stopwatch;

/// Seconds between two plain progress lines.
const PLAIN_EVERY_S: f64 = 5.0;

/// How progress is shown.
enum Display {
    Bar(ProgressBar),
    Plain { last_line_s: Mutex<f64> },
    Off,
}

/// Counts seeds done and counterexamples found, and shows them.
pub struct Progress {
    total: u64,
    done: AtomicU64,
    counterexamples: AtomicU64,
    clock: Stopwatch,
    display: Display,
}

impl Progress {
    /// Progress over `total` seeds; `quiet` shows nothing.
    pub fn new(total: u64, quiet: bool) -> Self {
        let display = if quiet {
            Display::Off
        } else if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:30}] {pos}/{len} seeds, {per_sec}, {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_message("0 counterexamples");
            Display::Bar(bar)
        } else {
            Display::Plain {
                last_line_s: Mutex::new(0.0),
            }
        };
        Progress {
            total,
            done: AtomicU64::new(0),
            counterexamples: AtomicU64::new(0),
            clock: Stopwatch::start(),
            display,
        }
    }

    /// One seed finished; `counterexample` if it missed the expectation.
    pub fn seed_done(&self, counterexample: bool) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let found = if counterexample {
            self.counterexamples.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            self.counterexamples.load(Ordering::Relaxed)
        };
        match &self.display {
            Display::Bar(bar) => {
                bar.inc(1);
                if counterexample {
                    bar.set_message(format!("{found} counterexample{}", plural(found)));
                }
            }
            Display::Plain { last_line_s } => {
                let now = self.clock.seconds();
                let mut last = last_line_s.lock().expect("progress clock");
                if now - *last >= PLAIN_EVERY_S {
                    *last = now;
                    complain!(
                        "explore: {done}/{} seeds, {found} counterexample{}, {:.0} seeds/s",
                        self.total,
                        plural(found),
                        done as f64 / now.max(1e-9)
                    );
                }
            }
            Display::Off => {}
        }
    }

    /// Remove the bar before the summary is printed.
    pub fn finish(&self) {
        if let Display::Bar(bar) = &self.display {
            bar.finish_and_clear();
        }
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
