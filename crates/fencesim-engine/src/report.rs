//! report.json: what ran, what was found, and how to reproduce it (docs/report-format.md).

use std::collections::BTreeMap;

use fencesim_checker::{CheckResult, UnsafeExposure, Violation};
use fencesim_history::{Entry, EventKind, History, OpType};
use fencesim_scenario::{Expectation, Scenario};
use fencesim_sim::random_nemesis::NemesisPlan;
use fencesim_sim::{NetStats, SimFailure};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Bumped on incompatible changes to the report's shape. Version 2: `scenario.lock_service`
/// holds `kind`, `max_ttl_ms` and the design's own knobs only (version 1 had every design's
/// knobs, Redlock's and primary-backup's in objects of their own); [`upgrade`] reads version 1.
pub const SCHEMA_VERSION: u32 = 2;

/// Bring a report.json of an older schema (as JSON) to [`SCHEMA_VERSION`], in place, so that it
/// deserializes as a [`Report`]. Version 1's `lock_service` becomes the design's knobs: its
/// objects (Redlock's and primary-backup's settings) are spread out, and what the design does not take
/// (another design's fixed defaults, `null`s) is left out. A later version, or a kind no design
/// has, is refused.
///
/// # Errors
/// What could not be read, as one line.
pub fn upgrade(
    report: &mut serde_json::Value,
    designs: &dyn fencesim_scenario::Designs,
) -> Result<(), String> {
    let version = match report.get("schema_version") {
        None => return Err("no schema_version".to_owned()),
        Some(v) => v.as_u64().ok_or_else(|| {
            format!("schema_version must be a whole number from 1 to {SCHEMA_VERSION}, found {v}")
        })?,
    };
    match version {
        v if v == u64::from(SCHEMA_VERSION) => return Ok(()),
        1 => {}
        v => {
            return Err(format!(
                "schema_version {v} is not one this fencesim reads (1 to {SCHEMA_VERSION})"
            ))
        }
    }
    let service = report
        .pointer_mut("/scenario/lock_service")
        .and_then(|s| s.as_object_mut())
        .ok_or("no scenario.lock_service")?;
    let kind = service
        .get("kind")
        .and_then(|k| k.as_str())
        .ok_or("no scenario.lock_service.kind")?;
    let design = designs
        .find(kind)
        .ok_or_else(|| format!("no design of kind {kind:?}"))?;
    let takes =
        |name: &str| design.knob_names().contains(&name) || name == "kind" || name == "max_ttl_ms";
    let mut upgraded = serde_json::Map::new();
    for (name, value) in std::mem::take(service) {
        match value {
            // Version 1 kept a design's own settings in an object named after it.
            serde_json::Value::Object(nested) => {
                upgraded.extend(nested.into_iter().filter(|(n, _)| takes(n)));
            }
            serde_json::Value::Null => {}
            value if takes(&name) => {
                upgraded.insert(name, value);
            }
            _ => {}
        }
    }
    *service = upgraded;
    report["schema_version"] = SCHEMA_VERSION.into();
    Ok(())
}

/// The verdict of one run as the report states it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunVerdict {
    /// No violation.
    Valid,
    /// At least one violation.
    Invalid,
    /// A checker gave up.
    Unknown,
    /// The simulation failed; `violations` covers the history recorded up to the failure.
    SimFailed,
}

/// Which tool wrote the report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tool {
    /// Always `fencesim`.
    pub name: String,
    /// The crate version.
    pub version: String,
    /// The git commit the binary was built from, when known.
    pub git_commit: Option<String>,
}

/// Where the history is and how to verify it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRef {
    /// File name, next to report.json.
    pub file: String,
    /// SHA-256 of the file's bytes, hex.
    pub sha256: String,
    /// Entries (lines after the header).
    pub entries: u64,
}

/// How many of each record kind the history holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Operations by type (invoke, ok, fail, info).
    pub ops: BTreeMap<String, u64>,
    /// Events by kind (grant, accept, pause, ...).
    pub events: BTreeMap<String, u64>,
    /// Distinct Jepsen processes.
    pub processes: u64,
}

/// The expectation and whether this run met it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectationResult {
    /// What the scenario expects.
    #[serde(flatten)]
    pub expected: Expectation,
    /// Whether this run met it.
    pub met: bool,
}

/// The whole report.json.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The writer.
    pub tool: Tool,
    /// The resolved scenario (all defaults filled in).
    pub scenario: Scenario,
    /// The root seed.
    pub seed: u64,
    /// The verdict.
    pub verdict: RunVerdict,
    /// Each violation with its witnesses and explanation.
    pub violations: Vec<Violation>,
    /// Why the verdict is unknown: each check that gave up within its budget. Left out when
    /// empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<String>,
    /// Checks the history gave nothing to judge, and what each lacked. Left out when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_checked: Vec<String>,
    /// Writes that landed after their lease ended, and how many the fence caught.
    pub unsafe_exposure: UnsafeExposure,
    /// The expectation and whether it was met.
    pub expectation: ExpectationResult,
    /// Set when the simulation itself failed.
    pub failure: Option<SimFailure>,
    /// What the network did with messages.
    pub network: NetStats,
    /// What the random nemesis drew for this seed (kinds switched on, ranges, the schedule).
    pub nemesis: Option<NemesisPlan>,
    /// The history file.
    pub history: HistoryRef,
    /// Record counts.
    pub counts: Counts,
    /// Simulated ms at the last record.
    pub simulated_ms: u64,
    /// The command that reproduces this run.
    pub reproduce: String,
    /// A live trial's own facts (`fencesim live`); absent for a simulation. A live trial's
    /// report.json is written without `seed`, `network`, `nemesis` and `simulated_ms`, with
    /// `mode: "live"` ([`unseeded_json`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveRun>,
    /// A `fencesim verify` counterexample's own facts; absent otherwise. Its report.json is
    /// written as a live trial's is, with `mode: "verify"` ([`unseeded_json`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifyRun>,
}

impl Report {
    /// The report of `scenario` judged on `history` (`result`, and a simulation's `failure` if
    /// it failed), seed `seed` (0 for a live trial). What only its caller knows is left empty
    /// for it to fill: `network`, `nemesis`, `simulated_ms`, `reproduce`, `live`, and the
    /// history's SHA-256 (set when it is serialized).
    pub fn judged(
        scenario: &Scenario,
        seed: u64,
        history: &History,
        result: CheckResult,
        failure: Option<SimFailure>,
    ) -> Report {
        let met = failure.is_none() && crate::expectation::is_met(&scenario.expect, &result);
        Report {
            schema_version: SCHEMA_VERSION,
            tool: tool(),
            scenario: scenario.clone(),
            seed,
            verdict: verdict(&result, failure.as_ref()),
            violations: result.violations,
            unknown: result.unknown,
            not_checked: result.not_checked,
            unsafe_exposure: result.unsafe_exposure,
            expectation: ExpectationResult {
                expected: scenario.expect.clone(),
                met,
            },
            failure,
            network: NetStats::default(),
            nemesis: None,
            history: HistoryRef {
                file: "history.jsonl".into(),
                sha256: String::new(),
                entries: history.entries.len() as u64,
            },
            counts: counts(history),
            simulated_ms: 0,
            reproduce: String::new(),
            live: None,
            verify: None,
        }
    }
}

/// What a live trial's report says instead of a seed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveRun {
    /// The trial's number, from 1.
    pub trial: u64,
    /// The servers it ran against (`PostgreSQL 15.14 on 127.0.0.1:41234`).
    pub servers: Vec<String>,
    /// How long it ran, real ms.
    pub real_ms: u64,
    /// Why it stopped before its clients finished, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_short: Option<String>,
    /// What real time disturbed (a fault, resume or restart that took effect late on a busy
    /// machine), in words; left out when nothing was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disturbed: Vec<String>,
    /// What differs from a simulation and what the trial's history cannot show (the plan's
    /// notes, also printed before the first trial: `not observed: ...` from the lock service's
    /// live form); left out when there is none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The tool identity compiled into this binary.
pub fn tool() -> Tool {
    Tool {
        name: "fencesim".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        git_commit: option_env!("FENCESIM_GIT_COMMIT").map(str::to_owned),
    }
}

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A writer that hashes (SHA-256) what it passes on: history.jsonl written to its file as it
/// is serialized, its hash for report.json taken on the way, without the whole file in memory
/// (a history of millions of records is a gigabyte of JSON).
pub struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
}

impl<W: std::io::Write> HashingWriter<W> {
    /// Hash what goes to `inner`.
    pub fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            hasher: Sha256::new(),
        }
    }

    /// The hex SHA-256 of everything written, and the writer, flushed.
    ///
    /// # Errors
    /// Flushing `inner`.
    pub fn finish(mut self) -> std::io::Result<(String, W)> {
        self.inner.flush()?;
        Ok((hex(&self.hasher.finalize()), self.inner))
    }
}

impl<W: std::io::Write> std::io::Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Count the history's records by kind.
pub fn counts(history: &History) -> Counts {
    // Counted by type and kind, named once per kind at the end: this runs on every seed.
    let mut ops = [0u64; 4];
    let mut events: BTreeMap<EventKind, u64> = BTreeMap::new();
    let mut processes = Vec::new();
    for entry in &history.entries {
        match entry {
            Entry::Op(op) => {
                ops[op.op_type as usize] += 1;
                // Few processes, many operations each: a sorted list, grown rarely.
                if let Err(at) = processes.binary_search(&op.process) {
                    processes.insert(at, op.process);
                }
            }
            Entry::Event(ev) => *events.entry(ev.event).or_default() += 1,
        }
    }
    let op_types = [OpType::Invoke, OpType::Ok, OpType::Fail, OpType::Info];
    let op_name = |t: OpType| {
        serde_json::to_value(t)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    Counts {
        ops: op_types
            .into_iter()
            .filter(|t| ops[*t as usize] > 0)
            .map(|t| (op_name(t), ops[t as usize]))
            .collect(),
        events: events
            .into_iter()
            .map(|(k, n)| (k.as_str().to_owned(), n))
            .collect(),
        processes: processes.len() as u64,
    }
}

/// The report's verdict from the check and the simulation's fate.
pub fn verdict(result: &CheckResult, failure: Option<&SimFailure>) -> RunVerdict {
    match (failure, result.verdict) {
        (Some(_), _) => RunVerdict::SimFailed,
        (None, fencesim_checker::Verdict::Valid) => RunVerdict::Valid,
        (None, fencesim_checker::Verdict::Invalid) => RunVerdict::Invalid,
        (None, fencesim_checker::Verdict::Unknown) => RunVerdict::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A schema-1 primary-backup report: its settings in an object of their own, every other
    /// design's knobs beside them, `null` for an unset period. The upgrade keeps exactly the
    /// design's knobs, and the scenario then reads back as the design resolves it.
    #[test]
    fn a_schema_1_lock_service_becomes_its_designs_knobs() {
        let mut report = serde_json::json!({
            "schema_version": 1,
            "scenario": { "lock_service": {
                "kind": "primary-backup", "max_ttl_ms": 5000, "expiry_clock": "monotonic",
                "token_counter": "durable", "fsync": "always", "fsync_every_ms": null,
                "restart_grace_ms": 0, "replicas": 2, "revoke_term_check": true,
                "leader_change": "extend",
                "primary_backup": {
                    "replication": "sync", "replication_lag_ms": 500, "failover_after_ms": 2000
                }
            }}
        });
        upgrade(&mut report, &crate::registry::Registry::built_in()).unwrap();
        assert_eq!(report["schema_version"], 2);
        assert_eq!(
            report["scenario"]["lock_service"],
            serde_json::json!({
                "kind": "primary-backup", "max_ttl_ms": 5000, "expiry_clock": "monotonic",
                "replicas": 2, "replication": "sync", "replication_lag_ms": 500,
                "failover_after_ms": 2000
            })
        );
        // A kind no design has is refused, not guessed.
        let mut unknown = serde_json::json!({
            "schema_version": 1, "scenario": { "lock_service": { "kind": "paxos" } }
        });
        assert_eq!(
            upgrade(&mut unknown, &crate::registry::Registry::built_in()),
            Err("no design of kind \"paxos\"".to_owned())
        );
    }
}

/// What a `fencesim verify` counterexample's report says instead of a seed: the schedule the
/// search found, which no seed of `fencesim run` reproduces.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyRun {
    /// How the design's states were explored (`state-hashing` or `re-execution`, as
    /// verify.json says).
    pub strategy: fencesim_verify::Strategy,
    /// Each step of the schedule, in words, in order (as steps.txt has them).
    pub steps: Vec<String>,
}

/// report.json of a report that has no seed, a live trial's or a verify counterexample's: a
/// simulated run's report without what only a simulation has (`seed`, `network`, `nemesis`,
/// `simulated_ms`), with `"mode": "live"` or `"mode": "verify"` first and its own facts in
/// `live` or `verify` (docs/report-format.md).
#[derive(Serialize)]
struct UnseededReportJson<'a> {
    mode: &'static str,
    schema_version: u32,
    tool: &'a Tool,
    #[serde(skip_serializing_if = "Option::is_none")]
    live: Option<&'a LiveRun>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verify: Option<&'a VerifyRun>,
    scenario: &'a Scenario,
    verdict: RunVerdict,
    violations: &'a [Violation],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    unknown: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    not_checked: &'a [String],
    unsafe_exposure: &'a UnsafeExposure,
    expectation: &'a ExpectationResult,
    history: &'a HistoryRef,
    counts: &'a Counts,
    reproduce: &'a str,
}

/// Serialize a live trial's or a verify counterexample's report as report.json
/// ([`UnseededReportJson`]'s shape; `mode` is `verify` when `r.verify` is set, else `live`).
///
/// # Errors
/// Only serializing can fail.
pub fn unseeded_json(r: &Report) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec_pretty(&UnseededReportJson {
        mode: if r.verify.is_some() { "verify" } else { "live" },
        schema_version: r.schema_version,
        tool: &r.tool,
        live: r.live.as_ref(),
        verify: r.verify.as_ref(),
        scenario: &r.scenario,
        verdict: r.verdict,
        violations: &r.violations,
        unknown: &r.unknown,
        not_checked: &r.not_checked,
        unsafe_exposure: &r.unsafe_exposure,
        expectation: &r.expectation,
        history: &r.history,
        counts: &r.counts,
        reproduce: &r.reproduce,
    })
}
