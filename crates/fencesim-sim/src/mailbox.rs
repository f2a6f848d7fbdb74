//! A node's mailbox: the network puts envelopes in, the node's task takes them out in order.
//!
//! A general channel (async-channel) pays for what a simulation never needs: lock-free queues
//! and an event list built for many threads and many receivers. Here one thread runs the whole
//! simulation and one task at a time reads a mailbox, so a queue under a mutex and the wakers
//! of the tasks waiting on it are enough. It keeps the channel's behaviour that matters to
//! histories: a message wakes each waiting reader once (there is one in practice; with more,
//! the first to look takes the message and the others wait again), and a reader that stopped
//! waiting (its timeout passed, its task was killed) is not woken.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// The mailbox is closed: its network is gone, so nothing will ever arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Closed;

/// The mailbox is empty (or closed) right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Empty;

struct State<T> {
    queue: VecDeque<T>,
    /// Readers waiting for a message, by their wait's number. Almost always one, or none.
    waiting: Vec<(u64, Waker)>,
    next_wait: u64,
    closed: bool,
}

type Shared<T> = Arc<Mutex<State<T>>>;

fn lock<T>(shared: &Shared<T>) -> std::sync::MutexGuard<'_, State<T>> {
    shared.lock().expect("mailbox")
}

/// Every waiting reader's waker, in the order they began to wait. The usual single reader is
/// taken without giving up the list's memory: this runs at every message.
fn take_waiting<T>(state: &mut State<T>) -> Waiting {
    if state.waiting.len() == 1 {
        return Waiting {
            one: state.waiting.pop().map(|(_, waker)| waker),
            more: Vec::new(),
        };
    }
    Waiting {
        one: None,
        more: std::mem::take(&mut state.waiting),
    }
}

/// Wakers taken from a mailbox, to be woken once its lock is released (a woken task may read
/// the mailbox).
struct Waiting {
    one: Option<Waker>,
    more: Vec<(u64, Waker)>,
}

impl Waiting {
    fn wake(self) {
        let more = self.more.into_iter().map(|(_, waker)| waker);
        for waker in self.one.into_iter().chain(more) {
            waker.wake();
        }
    }
}

/// The reading end (cloneable; the same mailbox across a node's restarts).
pub struct Inbox<T>(Shared<T>);

/// The writing end, held by the network. Dropping it closes the mailbox.
pub struct Outbox<T>(Shared<T>);

/// A new, empty mailbox.
pub fn mailbox<T>() -> (Outbox<T>, Inbox<T>) {
    let shared = Arc::new(Mutex::new(State {
        queue: VecDeque::new(),
        waiting: Vec::new(),
        next_wait: 0,
        closed: false,
    }));
    (Outbox(Arc::clone(&shared)), Inbox(shared))
}

impl<T> Clone for Inbox<T> {
    fn clone(&self) -> Self {
        Inbox(Arc::clone(&self.0))
    }
}

impl<T> Outbox<T> {
    /// Put `message` at the back and wake whoever waits for it.
    pub fn send(&self, message: T) {
        let waiting = {
            let mut state = lock(&self.0);
            state.queue.push_back(message);
            take_waiting(&mut state)
        };
        waiting.wake();
    }
}

impl<T> Drop for Outbox<T> {
    fn drop(&mut self) {
        let waiting = {
            let mut state = lock(&self.0);
            state.closed = true;
            take_waiting(&mut state)
        };
        waiting.wake();
    }
}

impl<T> Inbox<T> {
    /// The next message, waiting for one if need be; `Err(Closed)` once the mailbox is empty
    /// and closed.
    pub fn recv(&self) -> Recv<'_, T> {
        Recv {
            inbox: self,
            wait: None,
        }
    }

    /// How many messages wait in the mailbox.
    pub fn len(&self) -> usize {
        lock(&self.0).queue.len()
    }

    /// True if no message waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next message if there is one now.
    pub fn try_recv(&self) -> Result<T, Empty> {
        lock(&self.0).queue.pop_front().ok_or(Empty)
    }
}

/// The future of [`Inbox::recv`].
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Recv<'a, T> {
    inbox: &'a Inbox<T>,
    /// This wait's number while it is registered as waiting.
    wait: Option<u64>,
}

impl<T> Future for Recv<'_, T> {
    type Output = Result<T, Closed>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = lock(&self.inbox.0);
        if let Some(message) = state.queue.pop_front() {
            drop(state);
            self.unregister();
            return Poll::Ready(Ok(message));
        }
        if state.closed {
            drop(state);
            self.unregister();
            return Poll::Ready(Err(Closed));
        }
        match self.wait {
            // Still registered: keep the waker unless the task moved (it never does here).
            Some(id) => match state.waiting.iter_mut().find(|(w, _)| *w == id) {
                Some((_, waker)) if waker.will_wake(cx.waker()) => {}
                Some((_, waker)) => waker.clone_from(cx.waker()),
                None => state.waiting.push((id, cx.waker().clone())),
            },
            None => {
                let id = state.next_wait;
                state.next_wait += 1;
                state.waiting.push((id, cx.waker().clone()));
                drop(state);
                self.wait = Some(id);
            }
        }
        Poll::Pending
    }
}

impl<T> Recv<'_, T> {
    fn unregister(&mut self) {
        if let Some(id) = self.wait.take() {
            lock(&self.inbox.0).waiting.retain(|(w, _)| *w != id);
        }
    }
}

impl<T> Drop for Recv<'_, T> {
    fn drop(&mut self) {
        self.unregister();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn poll<T>(recv: &mut Recv<'_, T>, waker: &Waker) -> Poll<Result<T, Closed>> {
        Pin::new(recv).poll(&mut Context::from_waker(waker))
    }

    #[test]
    fn messages_come_out_in_the_order_they_went_in() {
        let (tx, rx) = mailbox();
        tx.send(1);
        tx.send(2);
        assert_eq!(rx.try_recv(), Ok(1));
        assert_eq!(rx.try_recv(), Ok(2));
        assert_eq!(rx.try_recv(), Err(Empty));
    }

    #[test]
    fn a_waiting_reader_is_woken_once_per_message_and_a_dropped_one_not_at_all() {
        let (tx, rx) = mailbox();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        let mut recv = rx.recv();
        assert!(poll(&mut recv, &waker).is_pending());
        assert!(
            poll(&mut recv, &waker).is_pending(),
            "a second poll registers nothing new"
        );
        tx.send(7);
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
        assert_eq!(poll(&mut recv, &waker), Poll::Ready(Ok(7)));
        drop(recv);

        let mut gave_up = rx.recv();
        assert!(poll(&mut gave_up, &waker).is_pending());
        drop(gave_up);
        tx.send(8);
        assert_eq!(
            count.0.load(Ordering::Relaxed),
            1,
            "a reader that left is not woken"
        );
        assert_eq!(rx.try_recv(), Ok(8));
    }

    #[test]
    fn two_waiting_readers_are_both_woken_and_the_first_to_look_takes_the_message() {
        let (tx, rx) = mailbox();
        let (one, two) = (
            Arc::new(Count(AtomicUsize::new(0))),
            Arc::new(Count(AtomicUsize::new(0))),
        );
        let (w1, w2) = (Waker::from(Arc::clone(&one)), Waker::from(Arc::clone(&two)));
        let (mut r1, mut r2) = (rx.recv(), rx.recv());
        assert!(poll(&mut r1, &w1).is_pending());
        assert!(poll(&mut r2, &w2).is_pending());
        tx.send(5);
        assert_eq!(one.0.load(Ordering::Relaxed), 1);
        assert_eq!(two.0.load(Ordering::Relaxed), 1);
        assert_eq!(poll(&mut r2, &w2), Poll::Ready(Ok(5)));
        // The other waits again, and is woken by the next message only.
        assert!(poll(&mut r1, &w1).is_pending());
        tx.send(6);
        assert_eq!(one.0.load(Ordering::Relaxed), 2);
        assert_eq!(two.0.load(Ordering::Relaxed), 1);
        assert_eq!(poll(&mut r1, &w1), Poll::Ready(Ok(6)));
    }

    #[test]
    fn a_closed_mailbox_is_drained_first_then_says_closed() {
        let (tx, rx) = mailbox();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        tx.send(1);
        let mut waiting = rx.recv();
        assert_eq!(poll(&mut waiting, &waker), Poll::Ready(Ok(1)));
        let mut waiting = rx.recv();
        assert!(poll(&mut waiting, &waker).is_pending());
        drop(tx);
        assert_eq!(
            count.0.load(Ordering::Relaxed),
            1,
            "closing wakes the reader"
        );
        assert_eq!(poll(&mut waiting, &waker), Poll::Ready(Err(Closed)));
    }
}
