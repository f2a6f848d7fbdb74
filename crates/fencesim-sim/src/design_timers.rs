//! A design's timers on one node or client: the ones its effects set, by id, on simulated time.

use std::time::Duration;

use fencesim_design::{Deadline, TimerId};

use crate::mailbox::Inbox;
use crate::recorder::true_ns;
use crate::timer::Alarm;
use crate::transport::Envelope;

/// What woke a node loop.
pub(crate) enum Wake {
    /// A message arrived.
    Message(Box<Envelope>),
    /// This timer is due (and no longer set).
    Timer(TimerId),
    /// The inbox is gone: the simulation is ending.
    Closed,
}

/// Timers by id, each with its deadline in true simulated ns, and for a timer set on one of
/// the node's clocks that clock's deadline, to resolve again when the clock changes. A node or
/// client has a few at a time, set and cancelled at every request: a vector, which keeps its
/// room, beats a map.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    deadlines: Vec<(TimerId, u64, Option<Deadline>)>,
}

impl Timers {
    /// Set `id` to fire `after_ms` from now (at least 1 ms, as madsim's sleeps), replacing it.
    pub fn set(&mut self, id: TimerId, after_ms: u64) {
        self.set_from(true_ns(), id, after_ms);
    }

    /// [`Timers::set`], with the true time now (`now_ns`) read by the caller.
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

    /// The earliest deadline (ns) and its timer; ties go to the lower id.
    pub fn earliest(&self) -> Option<(u64, TimerId)> {
        self.deadlines.iter().map(|(id, at, _)| (*at, *id)).min()
    }

    /// Unset and return the earliest timer if it is due now.
    pub fn pop_due(&mut self) -> Option<TimerId> {
        let (at, id) = self.earliest()?;
        (at <= true_ns()).then(|| {
            self.cancel(id);
            id
        })
    }

    /// Wait for the next message or the earliest timer, whichever comes first. A message
    /// already waiting wins over a timer that is due (a node resumed after a pause reads what
    /// arrived meanwhile first, as a timeout polls its future before its deadline).
    pub async fn next(&mut self, alarm: &Alarm, inbox: &Inbox<Box<Envelope>>) -> Wake {
        let Some((at, _)) = self.earliest() else {
            return match inbox.recv().await {
                Ok(env) => Wake::Message(env),
                Err(_) => Wake::Closed,
            };
        };
        let now = true_ns();
        if at > now {
            match alarm
                .timeout(Duration::from_nanos(at - now), inbox.recv())
                .await
            {
                Ok(Ok(env)) => return Wake::Message(env),
                Ok(Err(_)) => return Wake::Closed,
                Err(_elapsed) => {}
            }
        } else if let Ok(env) = inbox.try_recv() {
            return Wake::Message(env);
        }
        match self.pop_due() {
            Some(id) => Wake::Timer(id),
            None => unreachable!("the earliest timer is due once its wait elapsed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::mailbox::mailbox;
    use crate::message::Message;

    fn simulate(body: impl std::future::Future<Output = ()> + 'static) {
        let rt = madsim::runtime::Runtime::with_seed_and_config(1, madsim::Config::default());
        rt.block_on(body);
    }

    fn envelope(id: u64) -> Box<Envelope> {
        let name: Arc<str> = Arc::from("n");
        Box::new(Envelope {
            src: Arc::clone(&name),
            dst: name,
            id,
            reply_to: None,
            op: None,
            body: Message::ClockChanged,
        })
    }

    #[test]
    fn timers_are_replaced_by_id_cancelled_and_fire_earliest_first() {
        simulate(async {
            let (outbox, inbox) = mailbox();
            let alarm = Alarm::default();
            let mut timers = Timers::default();
            timers.set(TimerId(1), 10);
            timers.set(TimerId(2), 5);
            timers.set(TimerId(3), 30);
            timers.cancel(TimerId(2));
            timers.set(TimerId(1), 20);
            let set_at = timers.earliest().map(|(at, id)| (at - 20_000_000, id));
            assert_eq!(
                set_at,
                Some((true_ns(), TimerId(1))),
                "replaced: 20 ms from now"
            );
            assert!(timers.pop_due().is_none(), "nothing is due at 0 ms");
            assert!(matches!(
                timers.next(&alarm, &inbox).await,
                Wake::Timer(TimerId(1))
            ));
            // madsim's clock moves on a few ns as tasks run: within the ms, not to the ns.
            assert!(
                (20_000_000..21_000_000).contains(&true_ns()),
                "{}",
                true_ns()
            );
            // At the next deadline a message is already waiting: it comes first.
            crate::timer::sleep(Duration::from_millis(15)).await;
            outbox.send(envelope(9));
            assert!(matches!(timers.next(&alarm, &inbox).await, Wake::Message(e) if e.id == 9));
            assert!(matches!(
                timers.next(&alarm, &inbox).await,
                Wake::Timer(TimerId(3))
            ));
            let now = true_ns();
            assert!(
                now >= 35_000_000,
                "a due timer fires when asked, not at its deadline"
            );
            timers.set(TimerId(4), 0);
            assert_eq!(
                timers.earliest(),
                Some((now + 1_000_000, TimerId(4))),
                "at least 1 ms"
            );
        });
    }
}
