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
//! Deadlines are madsim's: at least 1 ms from when the sleep is made (as tokio's and madsim's
//! own sleeps), so moving a wait from madsim's functions to these does not move it in time.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

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

/// `future`'s output, or `Err(Elapsed)` if `duration` (at least 1 ms) passes first. The future
/// is polled first, so one that is ready at the deadline still wins, as with madsim's
/// `timeout`.
pub async fn timeout<F: Future>(duration: Duration, future: F) -> Result<F::Output, Elapsed> {
    let mut future = std::pin::pin!(future);
    let mut timer = sleep(duration);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(Ok(output));
        }
        Pin::new(&mut timer).poll(cx).map(|()| Err(Elapsed))
    })
    .await
}

/// The deadline of a [`timeout`] passed first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elapsed;
