//! Sleeps and timeouts that put one timer in madsim's timer heap, not one per poll.
//!
//! madsim's `Sleep` adds a new timer every time it is polled while pending, and a timer that
//! fires wakes its task even if the task has moved on. A task that waits for a reply under a
//! timeout is polled at every message it receives, and at every stale timer of its earlier
//! waits; each such poll added yet another timer, which later woke it again. [`Timer`] arms
//! once, at its first poll, and afterwards only compares the time: the task still wakes at the
//! deadline, from the one timer armed for it. madsim cannot take a timer back, so a [`Timer`]
//! dropped before its deadline (the reply came first) disarms the waker it gave madsim: when
//! that timer fires, nothing is woken.
//!
//! A task that waits again and again under long timeouts (a client's requests, the lease
//! service's expiry) uses an [`Alarm`], which lets its waits share timers.
//!
//! Deadlines are madsim's: at least 1 ms from when the sleep is made (as tokio's and madsim's
//! own sleeps), so moving a wait from madsim's functions to these does not move it in time.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

/// A deadline on madsim's simulated clock. madsim's `Instant` is std's type, which clippy.toml
/// disallows (it could be read from the machine's clock); these only come from madsim's sleeps.
#[allow(clippy::disallowed_types)]
type SimInstant = madsim::time::Instant;

/// madsim's own sleep: only this module makes them.
fn madsim_sleep(duration: Duration) -> madsim::time::Sleep {
    #[allow(clippy::disallowed_methods)]
    madsim::time::sleep(duration)
}

/// Call `waker` once `duration` (at least 1 ms) of `time` has passed: one timer, whose waker
/// is not the current task's (a message's arrival).
pub(crate) fn wake_after(time: &madsim::time::TimeHandle, waker: &Waker, duration: Duration) {
    let mut sleep = time.sleep(duration);
    // Polling the sleep registers its timer with `waker`; it is not due yet (at least 1 ms).
    let _ = Pin::new(&mut sleep).poll(&mut Context::from_waker(waker));
}

/// The waker a [`Timer`] gives madsim: the task's, until the timer is dropped.
struct Disarmable {
    task: Waker,
    disarmed: AtomicBool,
}

impl Wake for Disarmable {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // A timer whose wait is over (its reply came, its task moved on) wakes no one: a
        // spurious poll would cost as much as a real one.
        if !self.disarmed.load(Ordering::Relaxed) {
            self.task.wake_by_ref();
        }
    }
}

/// A future that completes at its deadline, arming one timer for it.
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Timer {
    sleep: madsim::time::Sleep,
    /// Set at the first poll: the waker madsim's timer will call.
    armed: Option<Arc<Disarmable>>,
}

impl Future for Timer {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.sleep.is_elapsed() {
            return Poll::Ready(());
        }
        if self.armed.is_none() {
            let waker = Arc::new(Disarmable {
                task: cx.waker().clone(),
                disarmed: AtomicBool::new(false),
            });
            let task = Waker::from(Arc::clone(&waker));
            // Registers the timer with that waker; pending, since not elapsed.
            let _ = Pin::new(&mut self.sleep).poll(&mut Context::from_waker(&task));
            self.armed = Some(waker);
        }
        Poll::Pending
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        if let Some(waker) = &self.armed {
            waker.disarmed.store(true, Ordering::Relaxed);
        }
    }
}

/// Complete after `duration` of simulated time (at least 1 ms).
pub fn sleep(duration: Duration) -> Timer {
    Timer {
        sleep: madsim_sleep(duration),
        armed: None,
    }
}

/// `future`'s output, or `Err(Elapsed)` if `duration` (at least 1 ms) passes first: one wait
/// on an [`Alarm`] of its own, so one timer, which wakes no one once the wait is over.
pub async fn timeout<F: Future>(duration: Duration, future: F) -> Result<F::Output, Elapsed> {
    Alarm::default().timeout(duration, future).await
}

/// A task's timeouts, sharing madsim timers from one wait to the next.
///
/// A client waits for each reply under a timeout of hundreds of milliseconds, and a reply
/// usually comes within a few. With [`timeout`], each wait arms a timer that madsim keeps until
/// its deadline, long after the reply: about one stale timer in madsim's heap per request. An
/// alarm arms a timer only when none of its timers still pending fires at or before the new
/// deadline. A wait whose deadline is later than such a timer lets it fire, is polled then
/// (early, and only if it is still waiting), and arms one for its own deadline. So a task that
/// waits for replies arms about one timer per timeout period instead of one per request, and
/// wakes at every deadline it waits for, as with [`timeout`].
///
/// For one task's waits, one at a time (the task's waker is the one woken). A clone is the same
/// alarm (its state is shared), for a task that waits on it while lending itself elsewhere.
#[derive(Clone, Default)]
pub(crate) struct Alarm {
    shared: Arc<Mutex<AlarmState>>,
}

#[derive(Default)]
struct AlarmState {
    /// Deadlines of this alarm's madsim timers that have not fired yet.
    pending: Vec<SimInstant>,
    /// The waiting task, once a wait has been polled.
    waiter: Option<Waker>,
    /// A wait is on. Two at once would share one waiter slot, and the first to end would
    /// leave the other unwoken at its deadline: refused.
    busy: bool,
}

/// The waker an [`Alarm`] gives madsim for one of its timers.
struct AlarmTimer {
    shared: Weak<Mutex<AlarmState>>,
    deadline: SimInstant,
}

impl Wake for AlarmTimer {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let waiter = {
            let mut state = shared.lock().expect("alarm");
            state.pending.retain(|d| *d != self.deadline);
            state.waiter.clone()
        };
        if let Some(waiter) = waiter {
            waiter.wake();
        }
    }
}

impl Alarm {
    /// `future`'s output, or `Err(Elapsed)` if `duration` (at least 1 ms) passes first. The
    /// future is polled first, so one that is ready at the deadline still wins, as with
    /// madsim's `timeout`.
    pub(crate) async fn timeout<F: Future>(
        &self,
        duration: Duration,
        future: F,
    ) -> Result<F::Output, Elapsed> {
        let mut future = std::pin::pin!(future);
        // madsim's sleep, for its deadline rule (at least 1 ms); armed only if needed.
        let mut sleep = madsim_sleep(duration);
        let _waiting = Waiting::begin(&self.shared);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(output) = future.as_mut().poll(cx) {
                return Poll::Ready(Ok(output));
            }
            if sleep.is_elapsed() {
                return Poll::Ready(Err(Elapsed));
            }
            self.wait(&mut sleep, cx);
            Poll::Pending
        })
        .await
    }

    /// Be woken by `sleep`'s deadline: arm a timer for it unless a pending one fires first.
    fn wait(&self, sleep: &mut madsim::time::Sleep, cx: &Context<'_>) {
        let deadline = sleep.deadline();
        let mut state = self.shared.lock().expect("alarm");
        match &mut state.waiter {
            Some(w) if w.will_wake(cx.waker()) => {}
            waiter => *waiter = Some(cx.waker().clone()),
        }
        if state.pending.iter().any(|d| *d <= deadline) {
            return;
        }
        state.pending.push(deadline);
        drop(state);
        let timer = Waker::from(Arc::new(AlarmTimer {
            shared: Arc::downgrade(&self.shared),
            deadline,
        }));
        // Registers the timer with that waker; pending, since not elapsed.
        let _ = Pin::new(sleep).poll(&mut Context::from_waker(&timer));
    }
}

/// Ends an [`Alarm`]'s wait however it ends (done, timed out, or dropped): its timers then
/// wake no one.
struct Waiting<'a>(&'a Mutex<AlarmState>);

impl<'a> Waiting<'a> {
    fn begin(shared: &'a Mutex<AlarmState>) -> Self {
        // The lock is released before the check can panic: the other wait's guard still has to
        // take it as the panic unwinds.
        let was_busy = std::mem::replace(&mut shared.lock().expect("alarm").busy, true);
        assert!(!was_busy, "an Alarm serves one wait at a time");
        Waiting(shared)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut state = self.0.lock().expect("alarm");
        state.waiter = None;
        state.busy = false;
    }
}

/// The deadline of a [`timeout`] passed first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elapsed;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::true_ns;
    use std::pin::pin;
    use std::sync::atomic::AtomicUsize;

    /// Run `body` in a fresh simulation.
    fn simulate<F: Future<Output = ()> + 'static>(body: F) {
        let rt = madsim::runtime::Runtime::with_seed_and_config(1, madsim::Config::default());
        rt.block_on(body);
    }

    /// A future that never completes and counts how often it is polled.
    struct Never(Arc<AtomicUsize>);

    impl Future for Never {
        type Output = ();
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Poll::Pending
        }
    }

    #[test]
    fn an_alarm_times_out_at_each_waits_own_deadline() {
        simulate(async {
            let alarm = Alarm::default();
            let ms = |ns: u64| ns / 1_000_000;
            // Done before its deadline: its timer (1000 ms) stays pending in madsim's heap.
            let done = alarm.timeout(
                Duration::from_millis(1000),
                sleep(Duration::from_millis(10)),
            );
            assert_eq!(done.await, Ok(()));
            assert_eq!(ms(true_ns()), 10);
            // A later deadline (1010 ms): the pending timer fires first, and the wait still
            // ends at its own deadline, not at the earlier timer's.
            let polls = Arc::new(AtomicUsize::new(0));
            let waited = alarm.timeout(Duration::from_millis(1000), Never(Arc::clone(&polls)));
            assert_eq!(waited.await, Err(Elapsed));
            assert_eq!(ms(true_ns()), 1010);
            // Polled when it began, when the shared timer fired at 1000 ms, and at 1010 ms.
            assert_eq!(polls.load(Ordering::Relaxed), 3);
            // An earlier deadline than any pending timer arms its own.
            sleep(Duration::from_millis(5)).await;
            let short = alarm.timeout(
                Duration::from_millis(20),
                Never(Arc::new(AtomicUsize::new(0))),
            );
            assert_eq!(short.await, Err(Elapsed));
            assert_eq!(ms(true_ns()), 1035);
        });
    }

    #[test]
    #[should_panic(expected = "an Alarm serves one wait at a time")]
    fn two_waits_on_one_alarm_at_once_are_refused() {
        simulate(async {
            let alarm = Alarm::default();
            let mut cx = Context::from_waker(Waker::noop());
            let first = pin!(alarm.timeout(Duration::from_millis(200), Never(Default::default())));
            let second = pin!(alarm.timeout(Duration::from_millis(100), Never(Default::default())));
            assert!(first.poll(&mut cx).is_pending());
            let _ = second.poll(&mut cx);
        });
    }

    #[test]
    fn a_finished_wait_is_not_woken_by_its_alarms_timer() {
        simulate(async {
            let alarm = Alarm::default();
            let quick = alarm.timeout(Duration::from_millis(100), sleep(Duration::from_millis(1)));
            assert_eq!(quick.await, Ok(()));
            // No wait is on when the 100 ms timer fires: a future awaited meanwhile without the
            // alarm is polled only by its own wakers (once at the start, once at its end).
            let polls = Arc::new(AtomicUsize::new(0));
            let counted = Never(Arc::clone(&polls));
            assert_eq!(
                timeout(Duration::from_millis(500), counted).await,
                Err(Elapsed)
            );
            assert_eq!(polls.load(Ordering::Relaxed), 2);
        });
    }
}
