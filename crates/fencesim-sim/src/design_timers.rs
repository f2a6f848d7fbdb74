//! Waiting on a design's timers ([`Timers`], the sans-IO driver's) on simulated time: the
//! next message or the earliest deadline, whichever comes first.

use std::time::Duration;

use fencesim_design::TimerId;
pub(crate) use fencesim_driver::timers::Timers;

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

/// Wait for the next message or the earliest of `timers`, whichever comes first. A message
/// already waiting wins over a timer that is due (a node resumed after a pause reads what
/// arrived meanwhile first, as a timeout polls its future before its deadline).
pub(crate) async fn next(timers: &mut Timers, alarm: &Alarm, inbox: &Inbox<Box<Envelope>>) -> Wake {
    let Some((at, _)) = timers.earliest() else {
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
    match timers.pop_due(true_ns()) {
        Some(id) => Wake::Timer(id),
        None => unreachable!("the earliest timer is due once its wait elapsed"),
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
            timers.set_from(true_ns(), TimerId(1), 10);
            timers.set_from(true_ns(), TimerId(2), 5);
            timers.set_from(true_ns(), TimerId(3), 30);
            timers.cancel(TimerId(2));
            timers.set_from(true_ns(), TimerId(1), 20);
            let set_at = timers.earliest().map(|(at, id)| (at - 20_000_000, id));
            assert_eq!(
                set_at,
                Some((true_ns(), TimerId(1))),
                "replaced: 20 ms from now"
            );
            assert!(
                timers.pop_due(true_ns()).is_none(),
                "nothing is due at 0 ms"
            );
            assert!(matches!(
                next(&mut timers, &alarm, &inbox).await,
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
            assert!(
                matches!(next(&mut timers, &alarm, &inbox).await, Wake::Message(e) if e.id == 9)
            );
            assert!(matches!(
                next(&mut timers, &alarm, &inbox).await,
                Wake::Timer(TimerId(3))
            ));
            let now = true_ns();
            assert!(
                now >= 35_000_000,
                "a due timer fires when asked, not at its deadline"
            );
            timers.set_from(true_ns(), TimerId(4), 0);
            assert_eq!(
                timers.earliest(),
                Some((now + 1_000_000, TimerId(4))),
                "at least 1 ms"
            );
        });
    }
}
