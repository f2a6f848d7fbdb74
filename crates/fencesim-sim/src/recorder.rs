//! Appends history entries with their index, true time and the recording node's clocks.
//! Entries are compact structs pushed to a Vec and serialized once, after the run.

use std::sync::Mutex;

use fencesim_history::{Entry, Event, Op, Stamp};

use crate::clock::Clocks;

/// The history being recorded. Shared with the thread that runs the simulation, so that a run
/// that panics still leaves everything recorded up to the panic.
#[derive(Debug)]
pub struct Recorder {
    entries: Mutex<Vec<Entry>>,
    /// The most records this run may make (the scenario's `max_records`).
    limit: u64,
}

impl Recorder {
    /// An empty history that refuses to grow past `limit` records.
    pub fn new(limit: u64) -> Self {
        Recorder {
            entries: Mutex::new(Vec::new()),
            limit,
        }
    }

    /// Take every entry recorded so far.
    pub fn take(&self) -> Vec<Entry> {
        std::mem::take(&mut *self.entries.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Stamp and append; returns the entry's index.
    fn push(&self, clocks: &Clocks, node: &str, fill: impl FnOnce(Stamp) -> Entry) -> u64 {
        let time_ns = true_ns();
        let clock = clocks.get(node);
        let mut entries = self.entries.lock().expect("recorder");
        let index = entries.len() as u64;
        // A run that records this much has lost its way (a livelock, or a scenario far larger
        // than intended); stop it before it eats the machine's memory.
        assert!(
            index < self.limit,
            "history limit exceeded: {} records",
            self.limit
        );
        let at = Stamp {
            index,
            time_ns,
            mono_ms: clock.mono.read_ms(time_ns),
            wall_ms: clock.wall.read_ms(time_ns),
        };
        entries.push(fill(at));
        index
    }

    /// Record a client operation (its `at` is filled in here).
    pub fn op(&self, clocks: &Clocks, op: Op) -> u64 {
        let node = op.node.clone();
        self.push(clocks, &node, |at| Entry::Op(Op { at, ..op }))
    }

    /// Record an event (its `at` is filled in here).
    pub fn event(&self, clocks: &Clocks, event: Event) -> u64 {
        let node = event.node.clone();
        self.push(clocks, &node, |at| Entry::Event(Event { at, ..event }))
    }
}

/// True (simulated) time since the runtime started, ns.
pub fn true_ns() -> u64 {
    madsim::time::TimeHandle::current().elapsed().as_nanos() as u64
}
