//! The scenario as written: serde's view, with positions kept for validation errors.
//! Numbers are read as i64 so that a negative duration gets our own message, with its position.

use fencesim_history::ViolationKind;
use serde::Deserialize;
use toml::Spanned;

use crate::model::{ExpectedVerdict, LockServiceKind, MessageKind, NodeEvent, ResourceMode};

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
    #[serde(default)]
    pub network: RawNetwork,
    pub lock_service: Option<RawLockService>,
    #[serde(default)]
    pub resource: RawResource,
    pub clients: Spanned<Vec<RawClient>>,
    #[serde(default)]
    pub faults: Vec<Spanned<RawFault>>,
    pub expect: Option<RawExpect>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNetwork {
    pub latency_ms: Option<Pair>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLockService {
    pub kind: Option<LockServiceKind>,
    pub max_ttl_ms: Option<Num>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawResource {
    pub mode: Option<ResourceMode>,
    pub keys: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
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
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum RawFaultKind {
    Pause,
    Hold,
    Latency,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFault {
    pub kind: Spanned<RawFaultKind>,
    pub node: Option<Spanned<String>>,
    pub at_ms: Option<Num>,
    pub after: Option<Spanned<NodeEvent>>,
    pub before: Option<Spanned<NodeEvent>>,
    pub nth: Option<Num>,
    pub duration_ms: Option<Num>,
    pub from: Option<Spanned<String>>,
    pub message: Option<Spanned<MessageKind>>,
    pub latency_ms: Option<Pair>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawExpect {
    pub verdict: Spanned<ExpectedVerdict>,
    pub violations: Option<Spanned<Vec<ViolationKind>>>,
}
