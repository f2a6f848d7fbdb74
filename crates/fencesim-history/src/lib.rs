//! Histories: what happened in one run, as Jepsen-style operations plus the services' own events.
//!
//! A history is a header and a sequence of entries in the order they happened. Client
//! operations ([`Op`]) use Jepsen's vocabulary: a `process` invokes `f` and later completes it
//! with `ok`, `fail` (it certainly did not happen) or `info` (unknown: a timeout). Events
//! ([`Event`]) are what a lock service, resource or the nemesis decided: the ground truth the
//! checker judges by. The on-disk form is JSON Lines (docs/history-format.md); the checker
//! depends on this crate only, so a history recorded from a real system can be checked too.
#![deny(missing_docs)]

mod jepsen_edn;
mod jsonl;
mod record;
mod violation;

pub use jepsen_edn::{read_jepsen_edn, write_jepsen_edn};
pub use jsonl::{read_jsonl, write_jsonl, HistoryError};
pub use record::{
    Entry, Event, EventKind, Header, History, Name, Op, OpFn, OpType, Phase, Stamp, TokenOrder,
};
pub use violation::ViolationKind;

/// The history format version written into every header. Bump on incompatible changes.
pub const FORMAT_VERSION: u32 = 1;
