//! Stopping work early: a [`Cancel`] token, shared by whoever may ask to stop (the binary's
//! Ctrl-C handler, a library user's own) and the sweeps, searches, benchmarks and live runs
//! that honour it. It is passed in, never process-wide: two sweeps of one process (two tests
//! of one test binary) stop apart. It never reaches a simulation, whose seeds run to their end.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// A request to stop, and a count of the work under way that would honour it. Clones share
/// both. A sweep that sees it cancelled claims no more seeds and finishes the ones in progress,
/// so the seeds done form a prefix of the sweep that can be summarised (exit 130 in the CLI).
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<State>);

#[derive(Debug, Default)]
struct State {
    requested: AtomicBool,
    running: AtomicUsize,
}

impl Cancel {
    /// A token not cancelled, with nothing running under it.
    pub fn new() -> Self {
        Self::default()
    }

    /// Ask everything that holds this token (or a clone) to stop after the work in progress.
    pub fn cancel(&self) {
        self.0.requested.store(true, Ordering::SeqCst);
    }

    /// Whether [`Cancel::cancel`] was called: work that returns with this set is partial.
    pub fn is_cancelled(&self) -> bool {
        self.0.requested.load(Ordering::SeqCst)
    }

    /// Whether work that finishes what is in progress on a cancel is under way (a sweep, a
    /// guided search, a live run). Outside such work a Ctrl-C has nothing to let finish, and
    /// the binary quits at once.
    pub fn is_running(&self) -> bool {
        self.0.running.load(Ordering::SeqCst) > 0
    }

    /// Count one piece of work as running under this token until the returned guard drops.
    #[must_use = "the work counts as running only while the guard lives"]
    pub fn running(&self) -> Running {
        self.0.running.fetch_add(1, Ordering::SeqCst);
        Running(self.clone())
    }
}

/// Work counted as running under a [`Cancel`] ([`Cancel::running`]), until dropped.
#[derive(Debug)]
pub struct Running(Cancel);

impl Drop for Running {
    fn drop(&mut self) {
        self.0 .0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_request_and_the_count_and_tokens_stay_apart() {
        let cancel = Cancel::new();
        let other = Cancel::new();
        let clone = cancel.clone();
        assert!(!cancel.is_running());
        {
            let _a = clone.running();
            let _b = cancel.running();
            assert!(cancel.is_running() && !other.is_running());
        }
        assert!(!cancel.is_running());
        clone.cancel();
        assert!(cancel.is_cancelled() && !other.is_cancelled());
    }
}
