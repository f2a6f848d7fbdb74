//! From the raw form to a resolved [`Scenario`]: defaults, ranges and cross-references.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use toml::Spanned;

use crate::error::ScenarioError;
use crate::model::*;
use crate::model::{
    ExpiryClock, ExpiryJudgedBy, Fsync, LeaderChangeMode, LinkLatency, TokenCounter,
};
use crate::raw::*;
use fencesim_history::ViolationKind;

/// The largest number any field takes: 10^12 (ms: about 31 years of simulated time).
pub(crate) const MAX_NUMBER: i64 = 1_000_000_000_000;
/// The default and the largest `max_records` (a record takes a few hundred bytes in memory).
const DEFAULT_MAX_RECORDS: u64 = 2_000_000;
const MAX_RECORDS: u64 = 10_000_000;
/// The most clients one scenario may have.
const MAX_CLIENTS: usize = 1_000;
/// The longest node or scenario name.
const MAX_NAME: usize = 64;

/// Whether `name` is a safe node or directory name.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Defaults, documented in docs/scenario-format.md.
const DEFAULT_SEEDS: SeedRange = SeedRange { start: 0, end: 10 };
const DEFAULT_LATENCY: LatencyRange = LatencyRange {
    min_ms: 1,
    max_ms: 10,
};
const DEFAULT_MAX_TTL_MS: u64 = 60_000;
const DEFAULT_TIMEOUT_MS: u64 = 1_000;
const DEFAULT_BACKOFF: LatencyRange = LatencyRange {
    min_ms: 100,
    max_ms: 300,
};
const DEFAULT_LOCK: &str = "lock";
const DEFAULT_KEY: &str = "register";

/// Validation context: the source and file name for located errors.
pub(crate) struct Ctx<'a> {
    source: &'a str,
    file: &'a str,
    /// The lock service's design, once resolved (faults and holds depend on it).
    pub kind: LockServiceKind,
}

impl Ctx<'_> {
    pub(crate) fn err(
        &self,
        span: Range<usize>,
        field: &str,
        message: impl Into<String>,
    ) -> ScenarioError {
        ScenarioError::at(self.source, self.file, span, field, message)
    }

    /// A number that must be >= `min`.
    /// A number in `min..=MAX_NUMBER`. The upper bound keeps every time in ns inside u64
    /// (a simulated ms is a million ns) with room for sums.
    pub(crate) fn at_least(&self, n: &Num, min: i64, field: &str) -> Result<u64, ScenarioError> {
        let v = *n.get_ref();
        if v < min || v > MAX_NUMBER {
            let what = if min == 1 {
                "a positive integer"
            } else {
                "an integer >= 0"
            };
            return Err(self.err(
                n.span(),
                field,
                format!("expected {what} of at most {MAX_NUMBER}, found {v}"),
            ));
        }
        Ok(v as u64)
    }

    /// A signed number with |n| <= MAX_NUMBER.
    pub(crate) fn signed(&self, n: &Num, field: &str) -> Result<i64, ScenarioError> {
        let v = *n.get_ref();
        if v.unsigned_abs() > MAX_NUMBER as u64 {
            return Err(self.err(
                n.span(),
                field,
                format!("expected an integer between -{MAX_NUMBER} and {MAX_NUMBER}, found {v}"),
            ));
        }
        Ok(v)
    }

    pub(crate) fn positive(&self, n: &Num, field: &str) -> Result<u64, ScenarioError> {
        self.at_least(n, 1, field)
    }

    pub(crate) fn non_negative(&self, n: &Num, field: &str) -> Result<u64, ScenarioError> {
        self.at_least(n, 0, field)
    }

    pub(crate) fn range(&self, pair: &Pair, field: &str) -> Result<LatencyRange, ScenarioError> {
        let (lo, hi) = match pair.get_ref()[..] {
            [lo, hi] if 0 <= lo && lo <= hi && hi <= MAX_NUMBER => (lo, hi),
            _ => {
                return Err(self.err(
                    pair.span(),
                    field,
                    format!(
                        "expected [min, max] with 0 <= min <= max, found {:?}",
                        pair.get_ref()
                    ),
                ))
            }
        };
        Ok(LatencyRange {
            min_ms: lo as u64,
            max_ms: hi as u64,
        })
    }
}

pub(crate) fn resolve(
    raw: RawScenario,
    source: &str,
    file: &str,
    checked: Option<&[ViolationKind]>,
) -> Result<Scenario, ScenarioError> {
    let cx = Ctx {
        source,
        file,
        kind: LockServiceKind::Single,
    };
    let name = raw.name.get_ref().trim().to_owned();
    if !valid_name(&name) || name.starts_with('.') {
        let m = format!("expected 1 to {MAX_NAME} letters, digits, '-', '_' or '.' (it names the output directory)");
        return Err(cx.err(raw.name.span(), "name", m));
    }
    let seeds = match &raw.seeds {
        Some(s) => parse_seeds(&cx, s)?,
        None => DEFAULT_SEEDS,
    };
    let duration_ms = cx.positive(&raw.duration_ms, "duration_ms")?;
    let max_records = match &raw.max_records {
        Some(n) if *n.get_ref() > MAX_RECORDS as i64 => {
            return Err(cx.err(
                n.span(),
                "max_records",
                format!("expected at most {MAX_RECORDS}, found {}", n.get_ref()),
            ));
        }
        Some(n) => cx.positive(n, "max_records")?,
        None => DEFAULT_MAX_RECORDS,
    };
    let lock_service = resolve_lock_service(&cx, raw.lock_service.as_ref())?;
    let cx = Ctx {
        kind: lock_service.kind,
        ..cx
    };
    let resource = resolve_resource(&cx, &raw.resource)?;
    let clients = resolve_clients(&cx, &raw.clients, &lock_service, &resource)?;
    let lease_nodes = lock_service.nodes();
    let node_names: Vec<&str> = lease_nodes
        .iter()
        .map(String::as_str)
        .chain([RESOURCE_NODE])
        .chain(clients.iter().map(|c| c.name.as_str()))
        .collect();
    let network = resolve_network(&cx, &raw.network, &node_names)?;
    let faults = raw
        .faults
        .iter()
        .map(|f| crate::validate_fault::resolve(&cx, f, &node_names, duration_ms))
        .collect::<Result<Vec<_>, _>>()?;
    crate::validate_fault::refuse_extra_final_heals(&cx, &raw.faults, raw.nemesis.is_some())?;
    let expect = resolve_expect(&cx, raw.expect.as_ref(), &raw.name, checked)?;
    let nemesis = raw
        .nemesis
        .as_ref()
        .map(|n| {
            crate::validate_nemesis::resolve(
                &cx,
                n,
                &node_names,
                duration_ms,
                lock_service.max_ttl_ms,
            )
        })
        .transpose()?;
    Ok(Scenario {
        name,
        description: raw.description.trim().to_owned(),
        seeds,
        duration_ms,
        max_records,
        network,
        lock_service,
        resource,
        clients,
        faults,
        expect,
        nemesis,
    })
}

fn resolve_network(
    cx: &Ctx,
    raw: &RawNetwork,
    nodes: &[&str],
) -> Result<NetworkSpec, ScenarioError> {
    let probability = |p: &Option<Spanned<f64>>, field: &str| -> Result<f64, ScenarioError> {
        match p {
            Some(p) if !(0.0..=1.0).contains(p.get_ref()) => Err(cx.err(
                p.span(),
                field,
                format!("expected a probability in [0, 1], found {}", p.get_ref()),
            )),
            Some(p) => Ok(*p.get_ref()),
            None => Ok(0.0),
        }
    };
    let known = |n: &Spanned<String>| -> Result<String, ScenarioError> {
        if nodes.contains(&n.get_ref().as_str()) {
            Ok(n.get_ref().clone())
        } else {
            Err(cx.err(
                n.span(),
                "network.links",
                format!(
                    "unknown node {:?}; the nodes are {}",
                    n.get_ref(),
                    nodes.join(", ")
                ),
            ))
        }
    };
    let mut links = Vec::new();
    for l in &raw.links {
        let (from, to) = (known(&l.from)?, known(&l.to)?);
        let latency_ms = cx.range(&l.latency_ms, "network.links.latency_ms")?;
        if !l.one_way.unwrap_or(false) {
            links.push(LinkLatency {
                from: to.clone(),
                to: from.clone(),
                latency_ms,
            });
        }
        links.push(LinkLatency {
            from,
            to,
            latency_ms,
        });
    }
    Ok(NetworkSpec {
        latency_ms: match &raw.latency_ms {
            Some(p) => cx.range(p, "network.latency_ms")?,
            None => DEFAULT_LATENCY,
        },
        loss: probability(&raw.loss, "network.loss")?,
        duplicate: probability(&raw.duplicate, "network.duplicate")?,
        reorder_window_ms: match &raw.reorder_window_ms {
            Some(n) => cx.non_negative(n, "network.reorder_window_ms")?,
            None => 0,
        },
        links,
    })
}

fn parse_seeds(cx: &Ctx, s: &Spanned<String>) -> Result<SeedRange, ScenarioError> {
    let bad = || {
        cx.err(
            s.span(),
            "seeds",
            format!("expected \"A..B\" with A < B, found {:?}", s.get_ref()),
        )
    };
    let (a, b) = s.get_ref().split_once("..").ok_or_else(bad)?;
    let start: u64 = a.trim().parse().map_err(|_| bad())?;
    let end: u64 = b.trim().parse().map_err(|_| bad())?;
    if start >= end {
        return Err(bad());
    }
    Ok(SeedRange { start, end })
}

fn resolve_lock_service(
    cx: &Ctx,
    raw: Option<&RawLockService>,
) -> Result<LockServiceSpec, ScenarioError> {
    let max_ttl_ms = match raw.and_then(|r| r.max_ttl_ms.as_ref()) {
        Some(n) => cx.positive(n, "lock_service.max_ttl_ms")?,
        None => DEFAULT_MAX_TTL_MS,
    };
    let fsync = raw.and_then(|r| r.fsync.as_ref());
    let every = raw.and_then(|r| r.fsync_every_ms.as_ref());
    let fsync_every_ms = match (fsync.map(|f| *f.get_ref()), every) {
        (Some(Fsync::Periodic), Some(n)) => Some(cx.positive(n, "lock_service.fsync_every_ms")?),
        (Some(Fsync::Periodic), None) => {
            let span = fsync.expect("matched Some").span();
            return Err(cx.err(
                span,
                "lock_service.fsync_every_ms",
                "fsync = \"periodic\" needs `fsync_every_ms`",
            ));
        }
        (_, Some(n)) => {
            return Err(cx.err(
                n.span(),
                "lock_service.fsync_every_ms",
                "only used with fsync = \"periodic\"",
            ));
        }
        (_, None) => None,
    };
    let restart_grace_ms = match raw.and_then(|r| r.restart_grace_ms.as_ref()) {
        Some(n) => cx.non_negative(n, "lock_service.restart_grace_ms")?,
        None => 0,
    };
    let kind = raw.and_then(|r| r.kind).unwrap_or(LockServiceKind::Single);
    let replicas = resolve_replicas(cx, kind, raw.and_then(|r| r.replicas.as_ref()))?;
    if let Some(r) = raw {
        refuse_misplaced_knobs(cx, kind, r)?;
    }
    let redlock = match kind {
        LockServiceKind::Redlock => Some(resolve_redlock(cx, raw)?),
        _ => None,
    };
    let expiry_judged_by = match kind {
        LockServiceKind::LeaseRecord => Some(
            raw.and_then(|r| r.expiry_judged_by.as_ref())
                .map_or(ExpiryJudgedBy::RecordedDuration, |s| *s.get_ref()),
        ),
        _ => None,
    };
    let primary_backup = match kind {
        LockServiceKind::PrimaryBackup => Some(resolve_primary_backup(cx, raw)?),
        _ => None,
    };
    // Redis judges key expiry by its wall clock; the other designs default to the safe clock.
    let default_clock = match kind {
        LockServiceKind::Redlock => ExpiryClock::Wall,
        _ => ExpiryClock::Monotonic,
    };
    Ok(LockServiceSpec {
        kind,
        replicas,
        revoke_term_check: raw
            .and_then(|r| r.revoke_term_check.as_ref())
            .is_none_or(|s| *s.get_ref()),
        leader_change: raw
            .and_then(|r| r.leader_change.as_ref())
            .map_or(LeaderChangeMode::Extend, |s| *s.get_ref()),
        max_ttl_ms,
        expiry_clock: raw.and_then(|r| r.expiry_clock).unwrap_or(default_clock),
        token_counter: raw
            .and_then(|r| r.token_counter.as_ref())
            .map_or(TokenCounter::Durable, |s| *s.get_ref()),
        fsync: fsync.map_or(Fsync::Always, |f| *f.get_ref()),
        fsync_every_ms,
        restart_grace_ms,
        redlock,
        primary_backup,
        expiry_judged_by,
        reaper: raw
            .and_then(|r| r.reaper.as_ref())
            .map_or(Reaper::RespectsLeases, |s| *s.get_ref()),
        acquire: raw
            .and_then(|r| r.acquire.as_ref())
            .map_or(AcquireMode::FailFast, |s| *s.get_ref()),
        release: raw
            .and_then(|r| r.release.as_ref())
            .map_or(ReleaseMode::CompareAndDelete, |s| *s.get_ref()),
    })
}

/// How many nodes the design runs: 1 for `single`, 3 or 5 Raft replicas (default 3), an odd
/// number of Redlock nodes up to 7 (default 5, the Redlock documentation's choice).
fn resolve_replicas(
    cx: &Ctx,
    kind: LockServiceKind,
    raw: Option<&Num>,
) -> Result<u64, ScenarioError> {
    let (allowed, default): (&[i64], u64) = match kind {
        LockServiceKind::Single => (&[], 1),
        LockServiceKind::Raft => (&[3, 5], 3),
        LockServiceKind::Redlock => (&[1, 3, 5, 7], 5),
        LockServiceKind::PrimaryBackup => (&[2], 2),
        LockServiceKind::LeaseRecord => (&[], 1),
    };
    let Some(n) = raw else { return Ok(default) };
    let m = match kind {
        _ if allowed.contains(n.get_ref()) => return Ok(*n.get_ref() as u64),
        LockServiceKind::Single | LockServiceKind::LeaseRecord => {
            "this lock service has one node; leave `replicas` out".to_owned()
        }
        LockServiceKind::PrimaryBackup => {
            format!(
                "a primary-backup service has 2 nodes, found {}",
                n.get_ref()
            )
        }
        LockServiceKind::Raft => format!("expected 3 or 5 replicas, found {}", n.get_ref()),
        LockServiceKind::Redlock => {
            format!("expected 1, 3, 5 or 7 Redlock nodes, found {}", n.get_ref())
        }
    };
    Err(cx.err(n.span(), "lock_service.replicas", m))
}

/// A `[lock_service]` field, where it is in the file, and the designs that use it.
type Knob<'a> = (&'a str, Option<Range<usize>>, &'a [LockServiceKind]);

/// Each knob belongs to some designs; a value the chosen design would ignore is a mistake.
fn refuse_misplaced_knobs(
    cx: &Ctx,
    kind: LockServiceKind,
    r: &RawLockService,
) -> Result<(), ScenarioError> {
    use LockServiceKind::{LeaseRecord, PrimaryBackup, Raft, Redlock, Single};
    let num = |n: &Option<Num>| n.as_ref().map(|n| n.span());
    let knobs: [Knob; 17] = [
        ("reaper", r.reaper.as_ref().map(|s| s.span()), &[Single]),
        ("acquire", r.acquire.as_ref().map(|s| s.span()), &[Single]),
        ("release", r.release.as_ref().map(|s| s.span()), &[Single]),
        (
            "token_counter",
            r.token_counter.as_ref().map(|s| s.span()),
            &[Single],
        ),
        ("restart_grace_ms", num(&r.restart_grace_ms), &[Single]),
        (
            "fsync",
            r.fsync.as_ref().map(|s| s.span()),
            &[Single, Redlock],
        ),
        (
            "revoke_term_check",
            r.revoke_term_check.as_ref().map(|s| s.span()),
            &[Raft],
        ),
        (
            "leader_change",
            r.leader_change.as_ref().map(|s| s.span()),
            &[Raft],
        ),
        (
            "recheck_elapsed",
            r.recheck_elapsed.as_ref().map(|s| s.span()),
            &[Redlock],
        ),
        ("drift_ppm", num(&r.drift_ppm), &[Redlock]),
        ("node_timeout_ms", num(&r.node_timeout_ms), &[Redlock]),
        (
            "token_source",
            r.token_source.as_ref().map(|s| s.span()),
            &[Redlock],
        ),
        ("restart_delay_ms", num(&r.restart_delay_ms), &[Redlock]),
        (
            "replication",
            r.replication.as_ref().map(|s| s.span()),
            &[PrimaryBackup],
        ),
        (
            "replication_lag_ms",
            num(&r.replication_lag_ms),
            &[PrimaryBackup],
        ),
        (
            "failover_after_ms",
            num(&r.failover_after_ms),
            &[PrimaryBackup],
        ),
        (
            "expiry_judged_by",
            r.expiry_judged_by.as_ref().map(|s| s.span()),
            &[LeaseRecord],
        ),
    ];
    for (field, span, owners) in knobs {
        if let Some(span) = span.filter(|_| !owners.contains(&kind)) {
            let names: Vec<String> = owners
                .iter()
                .map(|k| format!("\"{}\"", kind_name(*k)))
                .collect();
            let m = format!(
                "only a kind = {} lock service uses `{field}`",
                names.join(" or ")
            );
            return Err(cx.err(span, &format!("lock_service.{field}"), m));
        }
    }
    Ok(())
}

fn kind_name(kind: LockServiceKind) -> &'static str {
    match kind {
        LockServiceKind::Single => "single",
        LockServiceKind::Raft => "raft",
        LockServiceKind::Redlock => "redlock",
        LockServiceKind::PrimaryBackup => "primary-backup",
        LockServiceKind::LeaseRecord => "lease-record",
    }
}

/// `[lock_service]`'s primary-backup settings.
fn resolve_primary_backup(
    cx: &Ctx,
    raw: Option<&RawLockService>,
) -> Result<PrimaryBackupSpec, ScenarioError> {
    let num = |n: Option<&Num>, field: &str, default: u64| match n {
        Some(n) => cx.positive(n, &format!("lock_service.{field}")),
        None => Ok(default),
    };
    let replication_lag_ms = num(
        raw.and_then(|r| r.replication_lag_ms.as_ref()),
        "replication_lag_ms",
        1_000,
    )?;
    let failover = raw.and_then(|r| r.failover_after_ms.as_ref());
    let failover_after_ms = num(failover, "failover_after_ms", 3_000)?;
    if failover_after_ms <= replication_lag_ms {
        let m = format!(
            "must be greater than replication_lag_ms ({replication_lag_ms} ms): a backup would \
             promote itself between two shipments"
        );
        // Point at whichever of the two the file set (the default of the other is implied).
        let span = failover
            .map(|n| n.span())
            .or_else(|| {
                raw.and_then(|r| r.replication_lag_ms.as_ref())
                    .map(|n| n.span())
            })
            .unwrap_or(0..0);
        return Err(cx.err(span, "lock_service.failover_after_ms", m));
    }
    Ok(PrimaryBackupSpec {
        replication: raw
            .and_then(|r| r.replication.as_ref())
            .map_or(Replication::Async, |s| *s.get_ref()),
        replication_lag_ms,
        failover_after_ms,
    })
}

/// Redlock's clock drift allowance, ppm of the TTL: below 10^6, since at 10^6 the allowance is
/// the whole TTL and no client could ever hold the lock.
fn drift_ppm(cx: &Ctx, raw: Option<&RawLockService>) -> Result<u64, ScenarioError> {
    match raw.and_then(|r| r.drift_ppm.as_ref()) {
        Some(n) if *n.get_ref() >= 1_000_000 => Err(cx.err(
            n.span(),
            "lock_service.drift_ppm",
            format!(
                "expected less than 1000000 ppm, found {}: the allowance would be the whole TTL",
                n.get_ref()
            ),
        )),
        Some(n) => cx.non_negative(n, "lock_service.drift_ppm"),
        None => Ok(10_000),
    }
}

/// `[lock_service]`'s Redlock settings, with the Redlock documentation's defaults.
fn resolve_redlock(cx: &Ctx, raw: Option<&RawLockService>) -> Result<RedlockSpec, ScenarioError> {
    let num =
        |get: fn(&RawLockService) -> Option<&Num>, field: &str, default: u64, positive: bool| {
            match raw.and_then(get) {
                Some(n) if positive => cx.positive(n, &format!("lock_service.{field}")),
                Some(n) => cx.non_negative(n, &format!("lock_service.{field}")),
                None => Ok(default),
            }
        };
    Ok(RedlockSpec {
        recheck_elapsed: raw
            .and_then(|r| r.recheck_elapsed.as_ref())
            .is_none_or(|s| *s.get_ref()),
        drift_ppm: drift_ppm(cx, raw)?,
        node_timeout_ms: num(|r| r.node_timeout_ms.as_ref(), "node_timeout_ms", 50, true)?,
        token_source: raw
            .and_then(|r| r.token_source.as_ref())
            .map_or(TokenSource::Random, |s| *s.get_ref()),
        restart_delay_ms: num(
            |r| r.restart_delay_ms.as_ref(),
            "restart_delay_ms",
            0,
            false,
        )?,
    })
}

/// The window between check and apply when `check = "check-then-apply"` names none, ms.
const DEFAULT_APPLY_DELAY_MS: u64 = 100;

fn resolve_resource(cx: &Ctx, raw: &RawResource) -> Result<ResourceSpec, ScenarioError> {
    let keys = match &raw.keys {
        Some(keys) if keys.get_ref().is_empty() => {
            let hint = "expected at least one key (leave `keys` out for [\"register\"])";
            return Err(cx.err(keys.span(), "resource.keys", hint));
        }
        Some(keys) => keys.get_ref().iter().map(|k| k.get_ref().clone()).collect(),
        None => vec![DEFAULT_KEY.to_owned()],
    };
    let check = raw
        .check
        .as_ref()
        .map_or(ResourceCheck::Atomic, |c| *c.get_ref());
    let apply_delay_ms = match (&raw.apply_delay_ms, check) {
        (Some(n), ResourceCheck::CheckThenApply) => cx.positive(n, "resource.apply_delay_ms")?,
        (Some(n), ResourceCheck::Atomic) => {
            let m = "only a resource with check = \"check-then-apply\" has a delay between check and apply";
            return Err(cx.err(n.span(), "resource.apply_delay_ms", m));
        }
        (None, ResourceCheck::CheckThenApply) => DEFAULT_APPLY_DELAY_MS,
        (None, ResourceCheck::Atomic) => 0,
    };
    Ok(ResourceSpec {
        mode: raw.mode.unwrap_or(ResourceMode::Fenced),
        keys,
        check,
        apply_delay_ms,
    })
}

fn resolve_clients(
    cx: &Ctx,
    raw: &Spanned<Vec<RawClient>>,
    lock_service: &LockServiceSpec,
    resource: &ResourceSpec,
) -> Result<Vec<ClientSpec>, ScenarioError> {
    if raw.get_ref().is_empty() {
        return Err(cx.err(
            raw.span(),
            "clients",
            "expected at least one [[clients]] table",
        ));
    }
    let mut out: Vec<ClientSpec> = Vec::new();
    let mut seen = BTreeSet::new();
    // One key, one lock: tokens of different locks are unrelated numbers, so a resource fenced
    // on one key cannot order writes made under two locks.
    let mut lock_of_key: BTreeMap<String, String> = BTreeMap::new();
    for group in raw.get_ref() {
        let template = resolve_client_template(cx, group, lock_service, resource)?;
        let lock = lock_of_key
            .entry(template.key.clone())
            .or_insert_with(|| template.lock.clone());
        if *lock != template.lock {
            let span = group.key.as_ref().map_or(group.ttl_ms.span(), |k| k.span());
            let m = format!("key {:?} is written under lock {lock:?} by another client; fencing tokens of lock {:?} cannot be ordered against those", template.key, template.lock);
            return Err(cx.err(span, "clients.key", m));
        }
        let total = out.len() as i64 + group.count.as_ref().map_or(1, |c| *c.get_ref());
        if total > MAX_CLIENTS as i64 {
            let span = group
                .count
                .as_ref()
                .map_or(group.ttl_ms.span(), |c| c.span());
            return Err(cx.err(
                span,
                "clients.count",
                format!("expected at most {MAX_CLIENTS} clients in all, found {total}"),
            ));
        }
        let names = client_names(cx, group, out.len())?;
        for (name, span) in names {
            let reserved = RESERVED_NODE_NAMES.contains(&name.as_str())
                || NodeRole::of(&name) != NodeRole::Client;
            if reserved || !seen.insert(name.clone()) {
                return Err(cx.err(
                    span,
                    "clients.name",
                    format!("node name {name:?} is reserved or already taken"),
                ));
            }
            out.push(ClientSpec {
                name,
                ..template.clone()
            });
        }
    }
    Ok(out)
}

/// The names of one `[[clients]]` group: its `name`, or `client-<n>` numbered on from `taken`.
fn client_names(
    cx: &Ctx,
    group: &RawClient,
    taken: usize,
) -> Result<Vec<(String, Range<usize>)>, ScenarioError> {
    match (&group.name, &group.count) {
        (Some(_), Some(count)) => Err(cx.err(
            count.span(),
            "clients.count",
            "give either `name` (one client) or `count` (client-1..N), not both",
        )),
        (Some(name), None) => {
            let n = name.get_ref().trim();
            if !valid_name(n) {
                return Err(cx.err(
                    name.span(),
                    "clients.name",
                    format!(
                        "expected 1 to {MAX_NAME} letters, digits, '-', '_' or '.', found {n:?}"
                    ),
                ));
            }
            if n.is_empty() {
                return Err(cx.err(
                    name.span(),
                    "clients.name",
                    "expected a non-empty node name",
                ));
            }
            Ok(vec![(n.to_owned(), name.span())])
        }
        (None, count) => {
            let count = match count {
                Some(c) if *c.get_ref() > MAX_CLIENTS as i64 => {
                    return Err(cx.err(
                        c.span(),
                        "clients.count",
                        format!(
                            "expected at most {MAX_CLIENTS} clients, found {}",
                            c.get_ref()
                        ),
                    ));
                }
                Some(c) => cx.positive(c, "clients.count")? as usize,
                None => 1,
            };
            let span = group.ttl_ms.span();
            Ok((1..=count)
                .map(|i| (format!("client-{}", taken + i), span.clone()))
                .collect())
        }
    }
}

fn resolve_client_template(
    cx: &Ctx,
    c: &RawClient,
    lock_service: &LockServiceSpec,
    resource: &ResourceSpec,
) -> Result<ClientSpec, ScenarioError> {
    let ttl_ms = cx.positive(&c.ttl_ms, "clients.ttl_ms")?;
    if ttl_ms > lock_service.max_ttl_ms {
        return Err(cx.err(
            c.ttl_ms.span(),
            "clients.ttl_ms",
            format!(
                "TTL {ttl_ms} ms is above lock_service.max_ttl_ms = {} ms",
                lock_service.max_ttl_ms
            ),
        ));
    }
    let key = match &c.key {
        Some(k) if resource.keys.contains(k.get_ref()) => k.get_ref().clone(),
        Some(k) => {
            return Err(cx.err(
                k.span(),
                "clients.key",
                format!(
                    "key {:?} is not in resource.keys {:?}",
                    k.get_ref(),
                    resource.keys
                ),
            ));
        }
        None => resource.keys[0].clone(),
    };
    let opt = |n: &Option<Num>,
               field: &str,
               default: u64,
               positive: bool|
     -> Result<u64, ScenarioError> {
        match n {
            Some(n) if positive => cx.positive(n, field),
            Some(n) => cx.non_negative(n, field),
            None => Ok(default),
        }
    };
    Ok(ClientSpec {
        name: String::new(),
        lock: c.lock.clone().unwrap_or_else(|| DEFAULT_LOCK.to_owned()),
        key,
        ttl_ms,
        work_ms: opt(&c.work_ms, "clients.work_ms", 0, false)?,
        renew_ms: c
            .renew_ms
            .as_ref()
            .map(|n| cx.positive(n, "clients.renew_ms"))
            .transpose()?,
        cycles: opt(&c.cycles, "clients.cycles", 1, true)?,
        start_ms: opt(&c.start_ms, "clients.start_ms", 0, false)?,
        timeout_ms: opt(
            &c.timeout_ms,
            "clients.timeout_ms",
            DEFAULT_TIMEOUT_MS,
            true,
        )?,
        backoff_ms: match &c.backoff_ms {
            Some(p) => cx.range(p, "clients.backoff_ms")?,
            None => DEFAULT_BACKOFF,
        },
        safety_margin_ms: opt(&c.safety_margin_ms, "clients.safety_margin_ms", 0, false)?,
        validity_check: c.validity_check.unwrap_or(true),
        deadline_from: knob_needing(
            cx,
            &c.deadline_from,
            "clients.deadline_from",
            lock_service,
            c.validity_check != Some(false),
            "a client with validity_check = false has no deadline of its own to count",
        )?,
        renew_after_failure: knob_needing(
            cx,
            &c.renew_after_failure,
            "clients.renew_after_failure",
            lock_service,
            c.renew_ms.is_some(),
            "a client without renew_ms never renews, so it has no keepalive to stop",
        )?,
        takeover: takeover(cx, c, lock_service)?,
        reclaim: generic_client_knob(cx, &c.reclaim, "clients.reclaim", lock_service)?,
        on_lost_lease: knob_needing(
            cx,
            &c.on_lost_lease,
            "clients.on_lost_lease",
            lock_service,
            c.renew_ms.is_some(),
            "a client without renew_ms is never told its lease is lost by a renewal",
        )?,
    })
}

/// A defect knob of the plain client that would do nothing unless `needed` holds (the client
/// renews, or keeps a deadline of its own): refused, with `why`, unless it keeps its default.
fn knob_needing<T: Copy + Default + PartialEq>(
    cx: &Ctx,
    raw: &Option<Spanned<T>>,
    field: &str,
    lock_service: &LockServiceSpec,
    needed: bool,
    why: &str,
) -> Result<T, ScenarioError> {
    let value = generic_client_knob(cx, raw, field, lock_service)?;
    match raw {
        Some(s) if !needed && value != T::default() => Err(cx.err(s.span(), field, why)),
        _ => Ok(value),
    }
}

/// `takeover`: only a lease-record client claims records.
fn takeover(
    cx: &Ctx,
    c: &RawClient,
    lock_service: &LockServiceSpec,
) -> Result<Takeover, ScenarioError> {
    match &c.takeover {
        Some(s) if lock_service.kind != LockServiceKind::LeaseRecord => Err(cx.err(
            s.span(),
            "clients.takeover",
            "only clients of a kind = \"lease-record\" lock service claim records",
        )),
        Some(s) => Ok(*s.get_ref()),
        None => Ok(Takeover::CompareAndSwap),
    }
}

/// A client knob of the plain acquire/renew client, which Redlock and lease-record clients
/// (with their own protocols) do not have.
fn generic_client_knob<T: Copy + Default>(
    cx: &Ctx,
    raw: &Option<Spanned<T>>,
    field: &str,
    lock_service: &LockServiceSpec,
) -> Result<T, ScenarioError> {
    let Some(value) = raw else {
        return Ok(T::default());
    };
    match lock_service.kind {
        LockServiceKind::Redlock | LockServiceKind::LeaseRecord => Err(cx.err(
            value.span(),
            field,
            format!(
                "only clients of a kind = \"single\", \"raft\" or \"primary-backup\" lock service use `{}`",
                field.trim_start_matches("clients.")
            ),
        )),
        _ => Ok(*value.get_ref()),
    }
}

/// The kinds in an `expect` list, refusing any the checker in use does not check.
fn kinds(
    cx: &Ctx,
    list: Option<&Spanned<Vec<Spanned<ViolationKind>>>>,
    field: &str,
    checked: Option<&[ViolationKind]>,
) -> Result<Vec<ViolationKind>, ScenarioError> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for k in list.get_ref() {
        if checked.is_some_and(|c| !c.contains(k.get_ref())) {
            let m = format!("{} is not checked by this version of fencesim, so this expectation could never be decided", k.get_ref());
            return Err(cx.err(k.span(), field, m));
        }
        out.push(*k.get_ref());
    }
    Ok(out)
}

fn resolve_expect(
    cx: &Ctx,
    raw: Option<&RawExpect>,
    name: &Spanned<String>,
    checked: Option<&[ViolationKind]>,
) -> Result<Expectation, ScenarioError> {
    let Some(raw) = raw else {
        return Err(cx.err(
            name.span(),
            "expect",
            "every scenario needs an [expect] table with a verdict",
        ));
    };
    let verdict = *raw.verdict.get_ref();
    let violations = kinds(cx, raw.violations.as_ref(), "expect.violations", checked)?;
    let absent = kinds(cx, raw.absent.as_ref(), "expect.absent", checked)?;
    match verdict {
        ExpectedVerdict::Valid if !violations.is_empty() => Err(cx.err(
            raw.verdict.span(),
            "expect.violations",
            "a valid verdict lists no violations",
        )),
        ExpectedVerdict::Invalid if violations.is_empty() => Err(cx.err(
            raw.verdict.span(),
            "expect.violations",
            "an invalid verdict must list the violations it expects",
        )),
        _ => {
            if let Some(both) = absent.iter().find(|k| violations.contains(k)) {
                let span = raw.absent.as_ref().expect("non-empty").span();
                return Err(cx.err(
                    span,
                    "expect.absent",
                    format!("{both} is both expected and absent"),
                ));
            }
            Ok(Expectation {
                verdict,
                violations,
                absent,
            })
        }
    }
}
