//! Histories: what happened in one run, as Jepsen-style operations plus the services' own events.
//!
//! A history is a header and a sequence of entries in the order they happened. Client
//! operations ([`Op`]) use Jepsen's vocabulary: a `process` invokes `f` and later completes it
//! with `ok`, `fail` (it certainly did not happen) or `info` (unknown: a timeout). Events
//! ([`Event`]) are what a lock service, resource or the nemesis decided: the ground truth the
//! checker judges by. The on-disk form is JSON Lines (docs/history-format.md); the checker
//! depends on this crate only, so a history recorded from a real system can be checked too.
#![deny(missing_docs)]

pub mod edn;
mod jepsen_edn;
mod jsonl;
mod record;
mod text;
mod validate;
mod violation;

pub use jepsen_edn::{read_jepsen_edn, write_jepsen_edn, EdnExport};
pub use jsonl::{read_jsonl, write_jsonl, HistoryError};
pub use record::{
    Entry, Event, EventKind, Header, History, Name, Op, OpFn, OpType, Phase, Stamp, TokenOrder,
};
pub use text::{
    cap_message, display_path, edit_distance, escape_controls, nearest, shell_word, MAX_QUOTE_CHARS,
};
pub use violation::ViolationKind;

/// The history format version written into every header. Bump on incompatible changes.
///
/// Version 2: `expires_at_ms` is a signed local-clock reading, negative when the clock it is
/// on was stepped back past its start (version 1 clamped such readings to 0). A version-1 file
/// is read unchanged: its values are a subset of version 2's.
///
/// Version 3: Jepsen's register vocabulary. Operations may be `cas` (`expected` the value it
/// compares with, `value` the one it sets), an `ok` read may say `value_unknown` (it matches
/// any value: Knossos's read of `nil`), and the header line is optional (a file that starts
/// with an entry has a default header: no scenario, seed 0). A version-1 or version-2 file is
/// read unchanged: it has none of these. The reader also lets an entry leave out `index`,
/// `time_ns` (every entry or none) and the local clocks, whatever its version: a reader that
/// required them refused such a file, so no file reads differently than it did.
pub const FORMAT_VERSION: u32 = 3;
