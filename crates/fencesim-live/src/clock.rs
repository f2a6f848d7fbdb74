//! Real clocks, read the same way in every process of a trial.
//!
//! Linux's `CLOCK_MONOTONIC` is one clock for the whole machine, so the times a client
//! process stamps its operations with and the times the harness stamps its faults with are
//! comparable without any exchange. PostgreSQL stamps its log with `clock_timestamp()`, the
//! wall clock (`CLOCK_REALTIME`); [`Origin`] turns those into the same monotonic axis.

use nix::time::{clock_gettime, ClockId};

fn read(clock: ClockId) -> i128 {
    // Reading these two clocks cannot fail on Linux (only an invalid clock id can).
    let t = clock_gettime(clock).expect("CLOCK_MONOTONIC and CLOCK_REALTIME always read");
    i128::from(t.tv_sec()) * 1_000_000_000 + i128::from(t.tv_nsec())
}

/// `CLOCK_MONOTONIC` now, ns (since an arbitrary point, the same for every process).
pub fn mono_ns() -> u64 {
    read(ClockId::CLOCK_MONOTONIC) as u64
}

/// `CLOCK_MONOTONIC` now, ms: the clock a live form is fed (`LockCall::now_ms`).
pub fn mono_ms() -> i64 {
    (mono_ns() / 1_000_000) as i64
}

/// A trial's time origin: its monotonic start, and the wall clock read at the same moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Origin {
    /// `CLOCK_MONOTONIC` at the trial's start, ns.
    pub mono_ns: u64,
    /// `CLOCK_REALTIME` at the same moment, µs since the Unix epoch.
    pub wall_us: i64,
}

impl Origin {
    /// Now, read on both clocks (the wall clock between two monotonic reads, so the pair is
    /// off by at most the time of one read).
    pub fn now() -> Self {
        let before = read(ClockId::CLOCK_MONOTONIC);
        let wall = read(ClockId::CLOCK_REALTIME);
        let after = read(ClockId::CLOCK_MONOTONIC);
        Origin {
            mono_ns: ((before + after) / 2) as u64,
            wall_us: (wall / 1000) as i64,
        }
    }

    /// A monotonic reading as ns since the origin (0 for a reading before it).
    pub fn since_ns(&self, mono_ns: u64) -> u64 {
        mono_ns.saturating_sub(self.mono_ns)
    }

    /// A wall-clock stamp (µs since the epoch, as the database writes them) as ns since the
    /// origin on the monotonic axis (0 before it). The wall clock is not stepped during a
    /// trial (clock faults are refused on PostgreSQL), so the offset holds.
    pub fn wall_to_ns(&self, wall_us: i64) -> u64 {
        (wall_us.saturating_sub(self.wall_us)).max(0) as u64 * 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_stamps_land_on_the_monotonic_axis() {
        let o = Origin {
            mono_ns: 5_000_000_000,
            wall_us: 1_700_000_000_000_000,
        };
        assert_eq!(o.since_ns(5_250_000_000), 250_000_000);
        assert_eq!(o.since_ns(4_000_000_000), 0);
        assert_eq!(o.wall_to_ns(1_700_000_000_250_000), 250_000_000);
        assert_eq!(o.wall_to_ns(1_699_999_999_000_000), 0);
    }

    #[test]
    fn the_monotonic_clock_moves_forward() {
        let a = mono_ns();
        let b = mono_ns();
        assert!(b >= a);
        assert!(a > 0);
    }
}
