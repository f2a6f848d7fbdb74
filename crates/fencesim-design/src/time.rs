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

/// One of a node's two clocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Clock {
    /// The monotonic clock: drifts, never steps.
    Monotonic,
    /// The wall clock: drifts, and steps under clock jumps and corrections. Redis judges key
    /// expiry by it, which is what a clock jump breaks (Kleppmann 2016).
    Wall,
}

impl Now {
    /// The reading of `clock`, ms.
    pub fn on(&self, clock: Clock) -> i64 {
        match clock {
            Clock::Monotonic => self.mono_ms,
            Clock::Wall => self.wall_ms,
        }
    }
}

/// A moment on one of the node's own clocks: a timer set to it fires when that clock reads
/// `at_ms`, however the clock drifts or steps meanwhile (a lease service's expiry wait, which a
/// clock jump brings forward).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Deadline {
    /// The clock.
    pub clock: Clock,
    /// The reading at which the timer fires, ms (may be negative).
    pub at_ms: i64,
}
