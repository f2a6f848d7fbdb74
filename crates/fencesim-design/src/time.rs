//! Time as a design sees it: its node's own clocks, and its own timers.

/// A node's own clocks at one instant, in milliseconds.
///
/// `mono_ms` is the monotonic clock (it drifts, but never steps); `wall_ms` is the wall clock
/// (it drifts and can be stepped by a clock-jump fault or set by an NTP-like correction). Both
/// are signed: a wall clock stepped back past its start reads below 0, and a deadline computed
/// from it stays valid arithmetic. Which clock judges a lease's expiry is the design's choice,
/// and the crux of several incidents (Kleppmann 2016 on process pauses and clock jumps).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Now {
    /// The monotonic clock, ms since the node's clock started.
    pub mono_ms: i64,
    /// The wall clock, ms (may be negative after a backward step).
    pub wall_ms: i64,
}

/// A timer of a node or client, named by the design. Setting a timer again under the same id
/// replaces it; a cancelled or replaced timer never fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimerId(pub u64);
