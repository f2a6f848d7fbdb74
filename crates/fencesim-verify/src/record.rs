//! The history of one schedule, shared with the schedules that branch from it: each state
//! holds its last record and a link to the ones before, so a step copies nothing of the past
//! (a persistent list). [`Records::history`] turns it into the [`History`] the checker and
//! `fencesim run` read.
//!
//! A client operation's key (`op` in messages and in the service's events) is the client's
//! own count of its operations, not the invoke's index in the history, so that a node's state
//! does not depend on how the other agents' records interleaved with this client's; the
//! history the checker reads has the invoke's index, as the simulator records it.

use std::collections::BTreeMap;
use std::sync::Arc;

use fencesim_history::{Entry, Header, History, Stamp};

struct Link {
    /// The entry without its stamp (its `at` is the default), shared with every equal entry
    /// of the states the search keeps ([`Records::intern`]).
    entry: Arc<Entry>,
    /// The recording agent's clock, ms: the stamp's local clocks.
    clock_ms: i64,
    /// The operation key, on an invoke.
    op_key: Option<u64>,
    prev: Option<Arc<Link>>,
}

/// The records of a schedule so far.
#[derive(Clone, Default)]
pub struct Records {
    last: Option<Arc<Link>>,
    len: u64,
}

/// One copy of each entry the kept states recorded (without its stamp), by fingerprint: the
/// same grant or write is recorded in thousands of states, at different places in their
/// histories, and a state keeps its own records until it is expanded.
#[derive(Default)]
pub struct Entries {
    kept: BTreeMap<u64, Arc<Entry>>,
}

impl Entries {
    /// `entry` replaced by the equal one kept, or kept; false if it was already shared.
    fn share(&mut self, entry: &mut Arc<Entry>) -> bool {
        if Arc::strong_count(entry) > 1 {
            return false;
        }
        let fp = crate::fingerprint::of_hash(&**entry);
        match self.kept.get(&fp) {
            // Equal, not only alike in fingerprint: a history must never change.
            Some(kept) if **kept == **entry => *entry = Arc::clone(kept),
            Some(_) => {}
            None => {
                self.kept.insert(fp, Arc::clone(entry));
            }
        }
        true
    }
}

impl Records {
    /// How many records.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing has been recorded yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Append `entry`, recorded at `clock_ns` of the recording agent's clock (the agent's own
    /// time, the only time a schedule has); `op_key` on an invoke. Its stamp is given when
    /// the history is read: its index, and that clock.
    pub fn push(&mut self, entry: impl Into<Entry>, clock_ns: u64, op_key: Option<u64>) {
        let mut entry = entry.into();
        *stamp(&mut entry) = Stamp::default();
        self.last = Some(Arc::new(Link {
            entry: Arc::new(entry),
            clock_ms: (clock_ns / 1_000_000) as i64,
            op_key,
            prev: self.last.take(),
        }));
        self.len += 1;
    }

    /// Share the entries recorded since the last call (the links this state alone holds)
    /// with the equal ones in `entries`.
    pub fn intern(&mut self, entries: &mut Entries) {
        let mut at = self.last.as_mut();
        while let Some(link) = at {
            let Some(link) = Arc::get_mut(link) else {
                return; // shared with another state: interned when that one was kept
            };
            if !entries.share(&mut link.entry) {
                return;
            }
            at = link.prev.as_mut();
        }
    }

    /// The records as a history under `header`, each stamped with its index (true time is
    /// unknown to the search: the index orders the records) and its agent's clock, and each
    /// event's operation key turned into its invoke's index.
    pub fn history(&self, header: Header) -> History {
        let mut links = Vec::with_capacity(self.len as usize);
        let mut at = self.last.as_deref();
        while let Some(link) = at {
            links.push(link);
            at = link.prev.as_deref();
        }
        links.reverse();
        let invokes: BTreeMap<u64, u64> = links
            .iter()
            .enumerate()
            .filter_map(|(i, l)| l.op_key.map(|k| (k, i as u64)))
            .collect();
        let entries = links
            .into_iter()
            .enumerate()
            .map(|(i, l)| {
                let mut entry = Entry::clone(&l.entry);
                *stamp(&mut entry) = Stamp {
                    index: i as u64,
                    time_ns: i as u64,
                    mono_ms: l.clock_ms,
                    wall_ms: l.clock_ms,
                };
                if let Entry::Event(ev) = &mut entry {
                    ev.op = ev.op.and_then(|k| invokes.get(&k).copied());
                }
                entry
            })
            .collect();
        History { header, entries }
    }
}

/// Where `entry` keeps its stamp.
fn stamp(entry: &mut Entry) -> &mut Stamp {
    match entry {
        Entry::Op(op) => &mut op.at,
        Entry::Event(ev) => &mut ev.at,
    }
}
