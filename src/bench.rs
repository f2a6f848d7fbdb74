//! Measuring fencesim itself: wall-clock time, only ever outside a simulation.
// Real time is forbidden inside simulations (clippy.toml); this module is the one place that
// measures the tool from outside them.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::time::Instant;

/// Elapsed real time, for seeds/s figures in `explore` and `bench`.
pub struct Stopwatch {
    started: Instant,
}

impl Stopwatch {
    /// Start now.
    pub fn start() -> Self {
        Stopwatch {
            started: Instant::now(),
        }
    }

    /// Seconds since [`Stopwatch::start`].
    pub fn seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}
