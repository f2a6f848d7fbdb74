//! Per-node clocks over madsim's single true time.
//!
//! Each node has a monotonic clock (drift only, never jumps) and a wall clock (drift, offset,
//! steps), both computed as `local = true + offset + drift_ppm * (true - since) / 1e6`. In this
//! slice every clock is the identity (no offset, no drift); the clock-fault issue sets them.
//! Services read *their* clock for expiry, which is what makes clock faults bite.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// One linear clock: `local_ms = true_ms + offset_ms + drift_ppm * (true_ms - since_ms) / 1e6`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinearClock {
    /// Constant offset from true time, ms.
    pub offset_ms: i64,
    /// Rate error in parts per million (positive: runs fast).
    pub drift_ppm: i64,
    /// True time (ms) from which the drift accumulates.
    pub since_ms: i64,
}

impl LinearClock {
    /// The local reading at true time `true_ns`, in local ms (floored).
    pub fn read_ms(&self, true_ns: u64) -> i64 {
        let true_ms = (true_ns / 1_000_000) as i64;
        let drift = (true_ms - self.since_ms) as i128 * self.drift_ppm as i128 / 1_000_000;
        true_ms + self.offset_ms + drift as i64
    }

    /// True ns from `now_ns` until this clock reads `local_ms` (0 if it already does).
    pub fn true_ns_until(&self, now_ns: u64, local_ms: i64) -> u64 {
        let ahead_ms = local_ms - self.read_ms(now_ns);
        if ahead_ms <= 0 {
            return 0;
        }
        // Local time runs at (1 + ppm/1e6) of true time; round up so the deadline is reached.
        let rate = 1_000_000 + self.drift_ppm as i128;
        let true_ns = (ahead_ms as i128 * 1_000_000 * 1_000_000 + rate - 1) / rate.max(1);
        true_ns.max(0) as u64
    }
}

/// A node's two clocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeClock {
    /// Monotonic clock: used for lease expiry by default, never stepped.
    pub mono: LinearClock,
    /// Wall clock: may be stepped and skewed.
    pub wall: LinearClock,
}

/// The clocks of every node, by node name. Nodes without an entry read true time.
#[derive(Debug, Default)]
pub struct Clocks {
    nodes: Mutex<BTreeMap<String, NodeClock>>,
}

impl Clocks {
    /// The clock of `node` (identity if never set).
    pub fn get(&self, node: &str) -> NodeClock {
        self.nodes
            .lock()
            .expect("clock table")
            .get(node)
            .copied()
            .unwrap_or_default()
    }

    /// Replace the clock of `node`.
    pub fn set(&self, node: &str, clock: NodeClock) {
        self.nodes
            .lock()
            .expect("clock table")
            .insert(node.to_owned(), clock);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_reads_true_time() {
        let c = LinearClock::default();
        assert_eq!(c.read_ms(1_999_999), 1);
        assert_eq!(c.true_ns_until(1_000_000, 5), 4_000_000);
        assert_eq!(c.true_ns_until(6_000_000, 5), 0);
    }

    #[test]
    fn drift_and_offset_follow_the_formula() {
        let c = LinearClock {
            offset_ms: 100,
            drift_ppm: 1_000,
            since_ms: 0,
        };
        assert_eq!(c.read_ms(10_000_000_000), 10_000 + 100 + 10);
        let wait = c.true_ns_until(0, 1_101);
        assert!(c.read_ms(wait) >= 1_101, "{wait}");
        assert!(c.read_ms(wait - 1_000_000) < 1_101);
    }
}
