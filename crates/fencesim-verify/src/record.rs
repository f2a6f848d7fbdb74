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
    entry: Entry,
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

impl Records {
    /// How many records.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing has been recorded yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Append `entry`, stamped with its index and the recording agent's clock (`clock_ns`:
    /// the agent's own time, the only time a schedule has); `op_key` on an invoke.
    pub fn push(&mut self, entry: impl Into<Entry>, clock_ns: u64, op_key: Option<u64>) {
        let mut entry = entry.into();
        let ms = (clock_ns / 1_000_000) as i64;
        let stamp = Stamp {
            index: self.len,
            // True time is unknown to the search: the index orders the records.
            time_ns: self.len,
            mono_ms: ms,
            wall_ms: ms,
        };
        match &mut entry {
            Entry::Op(op) => op.at = stamp,
            Entry::Event(ev) => ev.at = stamp,
        }
        self.last = Some(Arc::new(Link {
            entry,
            op_key,
            prev: self.last.take(),
        }));
        self.len += 1;
    }

    /// The records as a history under `header`, each event's operation key turned into its
    /// invoke's index.
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
            .map(|l| {
                let mut entry = l.entry.clone();
                if let Entry::Event(ev) = &mut entry {
                    ev.op = ev.op.and_then(|k| invokes.get(&k).copied());
                }
                entry
            })
            .collect();
        History { header, entries }
    }
}
