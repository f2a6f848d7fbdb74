//! Panics inside simulated tasks, caught before madsim sees them.
//!
//! madsim writes a `context: node=..., task=... (spawned at ...)` line to stderr for every task
//! that panics, before it unwinds the whole runtime. A failed run (a design's panic, the
//! history limit) must say what went wrong once, in its verdict line and report, and a sweep of
//! a thousand failing seeds must not print a thousand such lines. So every task fencesim
//! spawns is [`guarded`]: a panic is kept as the run's failure (the first one; others in the
//! same instant are dropped), the task stops, and the run's main future, [`stop_on_failure`],
//! ends the run at that instant. The runner reads the failure with [`take_failure`].
//!
//! The failure lives in a thread-local: each seed runs on a fresh thread of its own, and every
//! task of its simulation runs on that thread.

use std::cell::RefCell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// The run's failure, and who to wake when it comes.
#[derive(Default)]
struct Failure {
    message: Option<String>,
    /// The main future's waker, so it ends the run as soon as a task fails.
    main: Option<Waker>,
}

thread_local! {
    static FAILURE: RefCell<Failure> = RefCell::new(Failure::default());
}

/// A task whose panics end the run instead of reaching madsim.
pub struct Guarded<F> {
    inner: Pin<Box<F>>,
    failed: bool,
}

/// Wrap `task` so that a panic in it becomes the run's failure.
pub fn guarded<F: Future>(task: F) -> Guarded<F> {
    Guarded {
        inner: Box::pin(task),
        failed: false,
    }
}

impl<F: Future> Future for Guarded<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if self.failed {
            // A task that panicked is left half-done: it never runs again.
            return Poll::Pending;
        }
        let inner = &mut self.inner;
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(payload) => {
                self.failed = true;
                fail(panic_text(&*payload));
                Poll::Pending
            }
        }
    }
}

/// Record `message` as the run's failure, unless one is already recorded, and wake the main
/// future.
fn fail(message: String) {
    let main = FAILURE.with(|f| {
        let mut f = f.borrow_mut();
        f.message.get_or_insert(message);
        f.main.take()
    });
    if let Some(main) = main {
        main.wake();
    }
}

/// Run `main` until it finishes or a guarded task fails, whichever is first; `true` if it
/// finished.
pub async fn stop_on_failure<F: Future<Output = ()>>(main: F) -> bool {
    let mut main = Box::pin(main);
    std::future::poll_fn(move |cx| {
        let failed = FAILURE.with(|f| {
            let mut f = f.borrow_mut();
            if f.message.is_some() {
                return true;
            }
            f.main = Some(cx.waker().clone());
            false
        });
        if failed {
            return Poll::Ready(false);
        }
        main.as_mut().poll(cx).map(|()| true)
    })
    .await
}

/// The failure a guarded task recorded on this thread, if any, taken.
pub fn take_failure() -> Option<String> {
    FAILURE.with(|f| {
        let mut f = f.borrow_mut();
        f.main = None;
        f.message.take()
    })
}

/// A panic payload as text.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}
