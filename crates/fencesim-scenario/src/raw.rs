//! The scenario as written: serde's view, with positions kept for validation errors.
//! Numbers are read as i64 so that a negative duration gets our own message, with its position.

use fencesim_history::ViolationKind;
use serde::Deserialize;
use toml::Spanned;

use std::collections::BTreeMap;

use crate::model::{ExpectedVerdict, MessageKind, Placement};

pub(crate) type Num = Spanned<i64>;
pub(crate) type Pair = Spanned<Vec<i64>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScenario {
    pub name: Spanned<String>,
    #[serde(default)]
    pub description: String,
    pub seeds: Option<Spanned<String>>,
    pub duration_ms: Num,
    pub max_records: Option<Num>,
    #[serde(default)]
    pub network: RawNetwork,
    pub lock_service: Option<Spanned<RawLockService>>,
    #[serde(default)]
    pub resource: RawResource,
    pub clients: Spanned<Vec<RawClient>>,
    #[serde(default)]
    pub faults: Vec<Spanned<RawFault>>,
    pub expect: Option<RawExpect>,
    pub nemesis: Option<Spanned<RawNemesis>>,
}

/// `[nemesis]`: faults drawn from the seed.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNemesis {
    pub kinds: Spanned<Vec<Spanned<crate::fault::FaultKind>>>,
    pub swarm: Option<bool>,
    pub placement: Option<Placement>,
    pub targets: Option<Spanned<Vec<Spanned<String>>>>,
    pub start_ms: Option<Num>,
    pub interval_ms: Option<Pair>,
    pub duration_ms: Option<Pair>,
    pub heal_at_ms: Num,
    pub recovery_periods: Option<Num>,
    pub clock_jump_ms: Option<Pair>,
    pub clock_offset_ms: Option<Pair>,
    pub drift_ppm: Option<Pair>,
    pub rate: Option<Spanned<Vec<f64>>>,
    pub latency_ms: Option<Pair>,
    pub reorder_window_ms: Option<Pair>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNetwork {
    pub latency_ms: Option<Pair>,
    pub loss: Option<Spanned<f64>>,
    pub duplicate: Option<Spanned<f64>>,
    pub reorder_window_ms: Option<Num>,
    #[serde(default)]
    pub links: Vec<RawLink>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLink {
    pub from: Spanned<String>,
    pub to: Spanned<String>,
    pub latency_ms: Pair,
    pub one_way: Option<bool>,
}

/// The workload fields of `[[clients]]` ([`RawClient`]); every other field of the table is a
/// knob of the design's client protocol.
pub(crate) const CLIENT_FIELDS: &[&str] = &[
    "name",
    "count",
    "lock",
    "key",
    "ttl_ms",
    "work_ms",
    "renew_ms",
    "cycles",
    "start_ms",
    "timeout_ms",
    "backoff_ms",
    "safety_margin_ms",
    "validity_check",
    "cleanup",
    "work_clock",
];

/// The tables whose fields are partly a design's knobs, as written, field by field with its
/// place: the second reading of the file. A `[[clients]]` table's knobs are the fields not in
/// [`CLIENT_FIELDS`]; `[resource]`'s, those other than `mode` and `keys`.
#[derive(Deserialize, Default)]
pub(crate) struct RawKnobTables {
    /// `[lock_service]`, for its `kind`: whose client knobs the `[[clients]]` tables may use.
    #[serde(default)]
    pub lock_service: Option<RawLockService>,
    #[serde(default)]
    pub clients: Vec<BTreeMap<String, Spanned<toml::Value>>>,
    #[serde(default)]
    pub resource: Option<Spanned<BTreeMap<String, Spanned<toml::Value>>>>,
}

/// `[lock_service]` as written: `kind`, `max_ttl_ms` and the design's knobs, each with its
/// place. Which knobs exist is the design's business (`DesignSpec::resolve`).
pub(crate) type RawLockService = BTreeMap<String, Spanned<toml::Value>>;

/// `[resource]`'s own fields; its others are the resource's knobs, read from
/// [`RawKnobTables`] (so unknown fields are refused there, not by serde).
#[derive(Deserialize, Default)]
pub(crate) struct RawResource {
    pub mode: Option<Spanned<String>>,
    pub keys: Option<Spanned<Vec<Spanned<String>>>>,
}

/// A `[[clients]]` table's workload fields. Its other fields are the design's client knobs,
/// read from [`RawKnobTables`] (so unknown fields are refused there, not by serde).
#[derive(Deserialize)]
pub(crate) struct RawClient {
    pub name: Option<Spanned<String>>,
    pub count: Option<Num>,
    pub lock: Option<String>,
    pub key: Option<Spanned<String>>,
    pub ttl_ms: Num,
    pub work_ms: Option<Num>,
    pub renew_ms: Option<Num>,
    pub cycles: Option<Num>,
    pub start_ms: Option<Num>,
    pub timeout_ms: Option<Num>,
    pub backoff_ms: Option<Pair>,
    pub safety_margin_ms: Option<Num>,
    pub validity_check: Option<bool>,
    pub cleanup: Option<crate::model::Cleanup>,
    pub work_clock: Option<crate::model::WorkClock>,
}

/// Every field any fault kind uses; which kind takes which is in `validate_fault.rs`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFault {
    pub kind: Spanned<crate::fault::FaultKind>,
    pub node: Option<Spanned<String>>,
    pub at_ms: Option<Num>,
    /// An event's name: the harness's (`grant`) or the design's own (`claim-sent`),
    /// resolved once the design is known.
    pub after: Option<Spanned<String>>,
    pub before: Option<Spanned<String>>,
    pub nth: Option<Num>,
    pub copy_ms: Option<Num>,
    pub count_from_ms: Option<Num>,
    pub duration_ms: Option<Num>,
    pub from: Option<Spanned<String>>,
    pub to: Option<Spanned<String>>,
    pub message: Option<Spanned<MessageKind>>,
    pub latency_ms: Option<Pair>,
    pub rate: Option<Spanned<f64>>,
    pub window_ms: Option<Num>,
    pub groups: Option<Spanned<Vec<Vec<Spanned<String>>>>>,
    pub delta_ms: Option<Num>,
    pub offset_ms: Option<Num>,
    pub ppm: Option<Num>,
    pub period_ms: Option<Num>,
    pub snapshot_at_ms: Option<Num>,
}

impl RawFault {
    /// (name, position) of every field that was written, `kind` excluded.
    pub fn present(&self) -> Vec<(&'static str, std::ops::Range<usize>)> {
        fn at<T>(
            name: &'static str,
            f: &Option<Spanned<T>>,
        ) -> Option<(&'static str, std::ops::Range<usize>)> {
            f.as_ref().map(|s| (name, s.span()))
        }
        [
            at("node", &self.node),
            at("at_ms", &self.at_ms),
            at("after", &self.after),
            at("before", &self.before),
            at("nth", &self.nth),
            at("copy_ms", &self.copy_ms),
            at("count_from_ms", &self.count_from_ms),
            at("duration_ms", &self.duration_ms),
            at("from", &self.from),
            at("to", &self.to),
            at("message", &self.message),
            at("latency_ms", &self.latency_ms),
            at("rate", &self.rate),
            at("window_ms", &self.window_ms),
            at("groups", &self.groups),
            at("delta_ms", &self.delta_ms),
            at("offset_ms", &self.offset_ms),
            at("ppm", &self.ppm),
            at("period_ms", &self.period_ms),
            at("snapshot_at_ms", &self.snapshot_at_ms),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawExpect {
    pub verdict: Spanned<ExpectedVerdict>,
    pub violations: Option<Spanned<Vec<Spanned<ViolationKind>>>>,
    pub absent: Option<Spanned<Vec<Spanned<ViolationKind>>>>,
}
