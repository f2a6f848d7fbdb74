//! A design's timers on one node or client: the ones its effects set (`SetTimer`,
//! `SetTimerAt`, `CancelTimer`), by id, with their deadlines in true ns. The caller says what
//! time it is; waiting for the earliest deadline is the caller's (the simulator sleeps on
//! madsim's clock; an explorer makes firing a timer one of the choices of a step).

use fencesim_design::{Deadline, TimerId};

/// Timers by id, each with its deadline in true ns, and for a timer set on one of the node's
/// clocks that clock's deadline, to resolve again when the clock changes. A node or client
/// has a few at a time, set and cancelled at every request: a vector, which keeps its room,
/// beats a map.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Timers {
    deadlines: Vec<(TimerId, u64, Option<Deadline>)>,
}

impl Timers {
    /// Set `id` to fire `after_ms` after `now_ns` (true ns), at least 1 ms later (as madsim's
    /// sleeps), replacing it.
    pub fn set_from(&mut self, now_ns: u64, id: TimerId, after_ms: u64) {
        let deadline_ns = now_ns.saturating_add(after_ms.max(1).saturating_mul(1_000_000));
        self.put(id, deadline_ns, None);
    }

    /// Set `id` to fire at `deadline` on the node's own clock, replacing it. It fires at true
    /// time 0 until [`Timers::resolve`] converts it.
    pub fn set_at(&mut self, id: TimerId, deadline: Deadline) {
        self.put(id, 0, Some(deadline));
    }

    fn put(&mut self, id: TimerId, deadline_ns: u64, on_clock: Option<Deadline>) {
        match self.deadlines.iter_mut().find(|(t, ..)| *t == id) {
            Some(slot) => *slot = (id, deadline_ns, on_clock),
            None => self.deadlines.push((id, deadline_ns, on_clock)),
        }
    }

    /// Convert every clock deadline to true ns with `true_ns_at`, as the node's clocks read
    /// now: before every wait, since a clock fault since the last one moves them.
    pub fn resolve(&mut self, true_ns_at: impl Fn(Deadline) -> u64) {
        for (_, at_ns, on_clock) in &mut self.deadlines {
            if let Some(deadline) = on_clock {
                *at_ns = true_ns_at(*deadline);
            }
        }
    }

    /// Whether any timer is set on a node's clock (and so needs [`Timers::resolve`]).
    pub fn has_clock_deadlines(&self) -> bool {
        self.deadlines
            .iter()
            .any(|(.., on_clock)| on_clock.is_some())
    }

    /// Whether no timer is set.
    pub fn is_empty(&self) -> bool {
        self.deadlines.is_empty()
    }

    /// Forget `id`.
    pub fn cancel(&mut self, id: TimerId) {
        self.deadlines.retain(|(t, ..)| *t != id);
    }

    /// Every timer, its deadline (true ns) and whether it is set on a node's clock (`false`:
    /// a delay in true time), in the order the timers were first set.
    pub fn deadlines(&self) -> impl Iterator<Item = (TimerId, u64, bool)> + '_ {
        self.deadlines
            .iter()
            .map(|(id, at, on_clock)| (*id, *at, on_clock.is_some()))
    }

    /// The earliest deadline (true ns) and its timer; ties go to the lower id.
    pub fn earliest(&self) -> Option<(u64, TimerId)> {
        self.deadlines.iter().map(|(id, at, _)| (*at, *id)).min()
    }

    /// Unset and return the earliest timer if it is due at `now_ns`.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<TimerId> {
        let (at, id) = self.earliest()?;
        (at <= now_ns).then(|| {
            self.cancel(id);
            id
        })
    }
}

#[cfg(test)]
mod tests {
    use fencesim_design::{Clock, Deadline, TimerId};

    use super::Timers;

    const MS: u64 = 1_000_000;

    #[test]
    fn timers_are_replaced_by_id_cancelled_and_fire_earliest_first() {
        let mut timers = Timers::default();
        timers.set_from(0, TimerId(1), 10);
        timers.set_from(0, TimerId(2), 5);
        timers.set_from(0, TimerId(3), 30);
        timers.cancel(TimerId(2));
        timers.set_from(0, TimerId(1), 20);
        assert_eq!(timers.earliest(), Some((20 * MS, TimerId(1))), "replaced");
        assert_eq!(timers.pop_due(20 * MS - 1), None, "not yet due");
        assert_eq!(timers.pop_due(25 * MS), Some(TimerId(1)));
        assert_eq!(timers.pop_due(25 * MS), None, "timer 3 is due at 30 ms");
        assert_eq!(timers.pop_due(40 * MS), Some(TimerId(3)));
        assert!(timers.is_empty());
        timers.set_from(7, TimerId(4), 0);
        assert_eq!(
            timers.earliest(),
            Some((7 + MS, TimerId(4))),
            "at least 1 ms"
        );
        // Equal deadlines: the lower id first.
        timers.set_from(7, TimerId(2), 0);
        timers.set_from(7, TimerId(1), 0);
        let fired: Vec<_> = std::iter::from_fn(|| timers.pop_due(7 + MS)).collect();
        assert_eq!(fired, [TimerId(1), TimerId(2), TimerId(4)]);
    }

    #[test]
    fn a_deadline_on_a_clock_fires_at_zero_until_resolved_and_again_after_a_clock_change() {
        let mut timers = Timers::default();
        let deadline = Deadline {
            clock: Clock::Wall,
            at_ms: 50,
        };
        timers.set_at(TimerId(1), deadline);
        assert!(timers.has_clock_deadlines());
        assert_eq!(timers.earliest(), Some((0, TimerId(1))));
        // The node's wall clock is 10 ms ahead of true time.
        timers.resolve(|d| (d.at_ms - 10) as u64 * MS);
        assert_eq!(timers.earliest(), Some((40 * MS, TimerId(1))));
        // A clock jump back by 5 ms moves it later.
        timers.resolve(|d| (d.at_ms - 5) as u64 * MS);
        assert_eq!(timers.earliest(), Some((45 * MS, TimerId(1))));
        timers.cancel(TimerId(1));
        assert!(!timers.has_clock_deadlines());
    }
}
