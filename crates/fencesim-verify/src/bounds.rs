//! How far the search goes: the faults it may inject and the size of the workload, which
//! together make the state space finite.

use serde::Serialize;

/// The bounds of one search (`fencesim verify`'s flags).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Bounds {
    /// The longest schedule explored, in steps (a delivery, a loss, a timer, a crash...).
    pub depth: u32,
    /// Stop after this many distinct states.
    pub max_states: u64,
    /// Messages the network may lose, per schedule.
    pub drops: u32,
    /// Messages the network may duplicate, per schedule.
    pub duplicates: u32,
    /// Node crashes (each followed, when the search chooses, by a restart), per schedule.
    pub crashes: u32,
    /// Calls to the resource (reads, writes, deletes) a client may give up on at their
    /// timeout, per schedule: in a model without time a timeout may fire at any moment, so
    /// each is a fault like a lost message (the call's message stays in flight).
    pub timeouts: u32,
    /// Acquire attempts per cycle: a client refused this many times stops.
    pub attempts: u32,
    /// Keepalives per cycle; later ones are skipped, as a stalled keepalive stream is.
    pub renewals: u32,
}

impl Bounds {
    /// Each bound as `(flag, value)`, in `fencesim verify`'s order (`("max-states", 2000000)`):
    /// what a reproduce line spells out and what the command prints.
    pub fn flags(&self) -> [(&'static str, u64); 8] {
        [
            ("depth", u64::from(self.depth)),
            ("max-states", self.max_states),
            ("drops", u64::from(self.drops)),
            ("duplicates", u64::from(self.duplicates)),
            ("crashes", u64::from(self.crashes)),
            ("timeouts", u64::from(self.timeouts)),
            ("attempts", u64::from(self.attempts)),
            ("renewals", u64::from(self.renewals)),
        ]
    }
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            depth: 80,
            max_states: 2_000_000,
            drops: 1,
            duplicates: 1,
            crashes: 1,
            timeouts: 1,
            attempts: 2,
            renewals: 1,
        }
    }
}
