//! Appends history entries with their index, true time and the recording node's clocks.
//! Entries are compact structs pushed to a Vec and serialized once, after the run.

use std::sync::{Mutex, OnceLock};

use fencesim_history::{Entry, Event, Op, Stamp};

use crate::clock::{Clocks, NodeClock};

/// The history being recorded. Shared with the thread that runs the simulation, so that a run
/// that panics still leaves everything recorded up to the panic.
pub struct Recorder {
    entries: Mutex<Vec<Entry>>,
    /// The most records this run may make (the scenario's `max_records`).
    limit: u64,
    /// The run's clock, taken on first use (the recorder is made before the runtime starts):
    /// reading it is cheaper than looking up the current runtime at every record.
    time: OnceLock<madsim::time::TimeHandle>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("entries", &self.entries)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

/// Entries a history has room for before its vector first grows: enough for most bundled
/// scenarios' seeds (the bench reference records about 4,000), so that entries are rarely
/// moved. Memory the run does not write to is never touched.
const INITIAL_CAPACITY: usize = 4096;

impl Recorder {
    /// An empty history that refuses to grow past `limit` records.
    pub fn new(limit: u64) -> Self {
        Recorder {
            entries: Mutex::new(Vec::with_capacity(INITIAL_CAPACITY.min(limit as usize))),
            limit,
            time: OnceLock::new(),
        }
    }

    /// Take every entry recorded so far.
    pub fn take(&self) -> Vec<Entry> {
        std::mem::take(&mut *self.entries.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Append the entry `make` builds from its stamp: the next index, the true time, and the
    /// readings of `clock` (the recording node's). Returns the index.
    fn append(&self, clock: NodeClock, make: impl FnOnce(Stamp) -> Entry) -> u64 {
        let time_ns = elapsed_ns(self.time.get_or_init(madsim::time::TimeHandle::current));
        self.append_at(time_ns, clock, make)
    }

    /// [`Recorder::append`] at true time `time_ns`.
    fn append_at(&self, time_ns: u64, clock: NodeClock, make: impl FnOnce(Stamp) -> Entry) -> u64 {
        let mut entries = self.entries.lock().expect("recorder");
        let index = entries.len() as u64;
        // A run that records this much has lost its way (a livelock, or a scenario far larger
        // than intended); stop it before it eats the machine's memory.
        assert!(
            index < self.limit,
            "history limit exceeded: {} records",
            self.limit
        );
        // Growing the vector doubles it: the one allocation of a run that can ask for
        // gigabytes. Asked for with `try_reserve`, so that a machine without that much memory
        // ends the run as a failed simulation with what it recorded (exit 4), not an abort.
        let len = entries.len();
        if len == entries.capacity() && entries.try_reserve(len).is_err() {
            let held_mb = len * std::mem::size_of::<Entry>() / 1_000_000;
            drop(entries);
            panic!(
                "out of memory: the history of {index} records (about {held_mb} MB) could not \
                 grow; lower max_records or shorten the run"
            );
        }
        entries.push(make(Stamp {
            index,
            time_ns,
            mono_ms: clock.mono.read_ms(time_ns),
            wall_ms: clock.wall.read_ms(time_ns),
        }));
        index
    }

    /// Record a client operation (its `at` is filled in here).
    pub fn op(&self, clocks: &Clocks, op: Op) -> u64 {
        self.op_on(clocks.get(&op.node), op)
    }

    /// Record a client operation whose node's clocks are `clock`.
    pub fn op_on(&self, clock: NodeClock, mut op: Op) -> u64 {
        self.append(clock, |at| {
            op.at = at;
            Entry::from(op)
        })
    }

    /// Record an event that happens at true time `time_ns`, which madsim's clock does not show
    /// yet: a message's arrival, delivered while madsim advances its clock to it.
    pub fn event_at(&self, time_ns: u64, clocks: &Clocks, mut event: Event) -> u64 {
        let clock = clocks.get(&event.node);
        self.append_at(time_ns, clock, |at| {
            event.at = at;
            Entry::from(event)
        })
    }

    /// Record an event (its `at` is filled in here).
    pub fn event(&self, clocks: &Clocks, mut event: Event) -> u64 {
        let clock = clocks.get(&event.node);
        self.append(clock, |at| {
            event.at = at;
            Entry::from(event)
        })
    }
}

/// True (simulated) time since the runtime started, ns.
pub fn true_ns() -> u64 {
    elapsed_ns(&madsim::time::TimeHandle::current())
}

/// True time on `time` (a run's madsim clock, kept by whoever reads it often), ns.
pub(crate) fn elapsed_ns(time: &madsim::time::TimeHandle) -> u64 {
    time.elapsed().as_nanos() as u64
}
