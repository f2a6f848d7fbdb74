//! Per-node clocks over madsim's single true time.
//!
//! Each node has a monotonic clock (drift only, never steps) and a wall clock (drift, offset,
//! steps). Both are piecewise linear in true time: from a base point `(base_true, base_local)`
//! a clock advances at `1 + drift_ppm / 1e6` local ns per true ns. Every fault rebases the
//! clock at the moment it strikes, so a change of drift never makes the reading jump, and a
//! step or a new offset moves only the wall clock. Services read *their own* clocks for expiry
//! and clients for their view of their lease, which is what makes clock faults bite (Kleppmann
//! 2016; Jepsen's clock nemesis).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

const PPM: i128 = 1_000_000;
const NS_PER_MS: i128 = 1_000_000;

/// One piecewise-linear clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinearClock {
    /// True time of the base point, ns.
    base_true_ns: u64,
    /// Local reading at the base point, ns (may be negative after a backwards step).
    base_local_ns: i128,
    /// Rate error in parts per million (positive: runs fast).
    drift_ppm: i64,
}

impl LinearClock {
    /// The local reading at true time `true_ns`, ns.
    pub fn read_ns(&self, true_ns: u64) -> i128 {
        let elapsed = true_ns as i128 - self.base_true_ns as i128;
        if self.drift_ppm == 0 {
            // The common case (no drift fault), read on every record: no 128-bit division.
            return self.base_local_ns + elapsed;
        }
        self.base_local_ns + elapsed * (PPM + self.drift_ppm as i128) / PPM
    }

    /// The local reading at true time `true_ns`, whole ms (floored).
    pub fn read_ms(&self, true_ns: u64) -> i64 {
        let ns = self.read_ns(true_ns);
        match i64::try_from(ns) {
            // 64-bit division where the reading fits (always, short of 292 simulated years):
            // the same result, several times cheaper than the 128-bit one.
            Ok(ns) => ns.div_euclid(NS_PER_MS as i64),
            Err(_) => ns.div_euclid(NS_PER_MS) as i64,
        }
    }

    /// How far the clock is ahead of true time at `true_ns`, ms.
    pub fn offset_ms(&self, true_ns: u64) -> i64 {
        ((self.read_ns(true_ns) - true_ns as i128).div_euclid(NS_PER_MS)) as i64
    }

    /// The current rate error, ppm.
    pub fn drift_ppm(&self) -> i64 {
        self.drift_ppm
    }

    /// True ns from `now_ns` until this clock reads `local_ms` (0 if it already does). Assumes
    /// no fault changes the clock in between; callers that wait re-check after each fault.
    pub fn true_ns_until(&self, now_ns: u64, local_ms: i64) -> u64 {
        let ahead = local_ms as i128 * NS_PER_MS - self.read_ns(now_ns);
        if ahead <= 0 {
            return 0;
        }
        let rate = PPM + self.drift_ppm as i128;
        // Round up so that the clock has reached `local_ms` when the wait is over.
        ((ahead * PPM + rate - 1) / rate) as u64
    }

    /// Move the base point to `now_ns` without changing any reading.
    fn rebase(&mut self, now_ns: u64) {
        self.base_local_ns = self.read_ns(now_ns);
        self.base_true_ns = now_ns;
    }

    /// From `now_ns` on, run `ppm` fast (negative: slow). The reading does not jump.
    pub fn set_drift(&mut self, now_ns: u64, ppm: i64) {
        self.rebase(now_ns);
        self.drift_ppm = ppm;
    }

    /// Step the reading by `delta_ms` at `now_ns` (either sign).
    pub fn step(&mut self, now_ns: u64, delta_ms: i64) {
        self.rebase(now_ns);
        self.base_local_ns += delta_ms as i128 * NS_PER_MS;
    }

    /// Set the reading to true time + `offset_ms` at `now_ns`.
    pub fn set_offset(&mut self, now_ns: u64, offset_ms: i64) {
        self.rebase(now_ns);
        self.base_local_ns = now_ns as i128 + offset_ms as i128 * NS_PER_MS;
    }
}

/// A node's two clocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeClock {
    /// Monotonic clock: drifts, never steps.
    pub mono: LinearClock,
    /// Wall clock: drifts, and may be stepped and skewed.
    pub wall: LinearClock,
}

/// The clocks of every node, by name. A node without an entry reads true time on both.
#[derive(Debug, Default)]
pub struct Clocks {
    nodes: Mutex<BTreeMap<String, NodeClock>>,
    /// How many changes the table has seen. Until the first, every node reads true time, and a
    /// reading (at every record) needs neither the lock nor the lookup; after it, a reader that
    /// kept the clocks it last looked up ([`ClockCache`]) uses them again while this stays put.
    generation: AtomicU64,
}

/// One node's clocks as last looked up, and the table's generation then: kept by a node's or
/// client's task for its own readings ([`Clocks::get_cached`]).
#[derive(Debug, Default)]
pub struct ClockCache(Cell<(u64, NodeClock)>);

impl Clocks {
    /// The clocks of `node`.
    pub fn get(&self, node: &str) -> NodeClock {
        if self.generation.load(Ordering::Relaxed) == 0 {
            return NodeClock::default();
        }
        self.nodes
            .lock()
            .expect("clock table")
            .get(node)
            .copied()
            .unwrap_or_default()
    }

    /// The clocks of `node`, from `cache` (which only `node`'s readings may use) if no clock
    /// changed since it was filled.
    pub fn get_cached(&self, node: &str, cache: &ClockCache) -> NodeClock {
        let generation = self.generation.load(Ordering::Relaxed);
        if generation == 0 {
            return NodeClock::default();
        }
        let (seen, clock) = cache.0.get();
        if seen == generation {
            return clock;
        }
        let clock = self.get(node);
        cache.0.set((generation, clock));
        clock
    }

    /// Change the clocks of `node` with `f`.
    pub fn update(&self, node: &str, f: impl FnOnce(&mut NodeClock)) {
        let mut nodes = self.nodes.lock().expect("clock table");
        self.generation.fetch_add(1, Ordering::Relaxed);
        f(nodes.entry(node.to_owned()).or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn identity_reads_true_time() {
        let c = LinearClock::default();
        assert_eq!(c.read_ms(1_999_999), 1);
        assert_eq!(c.true_ns_until(1_000_000, 5), 4_000_000);
        assert_eq!(c.true_ns_until(6_000_000, 5), 0);
    }

    #[test]
    fn drift_accumulates_from_the_moment_it_is_set_without_a_jump() {
        let mut c = LinearClock::default();
        c.set_drift(10 * S, 1_000);
        assert_eq!(c.read_ms(10 * S), 10_000);
        assert_eq!(c.read_ms(20 * S), 20_010);
        let wait = c.true_ns_until(20 * S, 21_011);
        assert!(c.read_ms(20 * S + wait) >= 21_011);
        assert!(c.read_ms(20 * S + wait - 1_000_000) < 21_011);
    }

    #[test]
    fn a_step_moves_the_reading_and_keeps_the_rate() {
        let mut c = LinearClock::default();
        c.set_drift(0, -500);
        c.step(4 * S, -3_000);
        assert_eq!(c.read_ms(4 * S), 4_000 - 2 - 3_000);
        assert_eq!(c.drift_ppm(), -500);
        assert_eq!(c.read_ms(8 * S) - c.read_ms(4 * S), 3_998);
    }

    #[test]
    fn an_offset_is_relative_to_true_time() {
        let mut c = LinearClock::default();
        c.step(S, 700);
        c.set_offset(2 * S, -250);
        assert_eq!(c.offset_ms(2 * S), -250);
        assert_eq!(c.read_ms(3 * S), 2_750);
    }

    #[test]
    fn a_cached_reading_is_looked_up_again_after_any_change() {
        let clocks = Clocks::default();
        let (a, b) = (ClockCache::default(), ClockCache::default());
        assert_eq!(clocks.get_cached("a", &a), NodeClock::default());
        clocks.update("a", |c| c.wall.set_offset(0, 100));
        assert_eq!(clocks.get_cached("a", &a).wall.offset_ms(S), 100);
        assert_eq!(clocks.get_cached("b", &b), NodeClock::default());
        // A change of another node's clocks moves the generation too: looked up again, the same.
        clocks.update("b", |c| c.wall.set_offset(0, -5));
        assert_eq!(clocks.get_cached("a", &a).wall.offset_ms(S), 100);
        assert_eq!(clocks.get_cached("b", &b).wall.offset_ms(S), -5);
        clocks.update("a", |c| c.wall.step(S, 50));
        assert_eq!(clocks.get_cached("a", &a), clocks.get("a"));
        assert_eq!(clocks.get_cached("a", &a).wall.offset_ms(S), 150);
    }
}
