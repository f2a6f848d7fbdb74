//! From the raw form to a resolved [`Scenario`]: defaults, ranges and cross-references.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use toml::Spanned;

use crate::error::ScenarioError;
use crate::model::LinkLatency;
use crate::model::*;
use crate::raw::*;
use crate::write::bare_or_quoted;
use fencesim_design::{ClientWorkload, DesignSpec, Designs, KnobError, Knobs, ServiceShape};
use fencesim_history::ViolationKind;

/// The largest number any field takes: 10^12 (ms: about 31 years of simulated time).
pub(crate) const MAX_NUMBER: i64 = fencesim_design::MAX_KNOB_NUMBER;
/// The default and the largest `max_records`. A record takes 264 bytes in the history's
/// vector, which doubles as it grows: at 4,000,000 records it holds 2^22 (1.1 GB), and a run
/// at the limit peaked at 1.3 GB resident, writing its files as it goes (issue 38: at
/// 10,000,000 the vector's next doubling asked for 2.2 GB more and aborted on a 4 GB machine).
const DEFAULT_MAX_RECORDS: u64 = 2_000_000;
const MAX_RECORDS: u64 = 4_000_000;
/// The most clients one scenario may have.
const MAX_CLIENTS: usize = 1_000;
/// The longest node or scenario name.
const MAX_NAME: usize = 64;

/// A scenario name for a file derived from scenario `base` (a shrunk or guided
/// counterexample): `base` followed by `suffix`, `base` cut short so that the whole stays
/// within the longest name a scenario may have (64 characters). A valid name is ASCII, so it
/// is cut on a character boundary.
pub fn derived_name(base: &str, suffix: &str) -> String {
    let keep = MAX_NAME.saturating_sub(suffix.len()).min(base.len());
    let base = base.get(..keep).unwrap_or(base);
    format!("{base}{suffix}")
}

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
    /// The designs a `kind` may name.
    designs: &'a dyn Designs,
    /// What the lock service's design said of its service, once resolved (faults and holds
    /// depend on it).
    pub shape: ServiceShape,
}

impl Ctx<'_> {
    /// The role of node `name` in the lock service resolved so far.
    pub(crate) fn role(&self, name: &str) -> NodeRole {
        NodeRole::in_service(name, &self.shape.nodes)
    }

    /// The key of the `key = value` whose value is at `value`: from the first non-blank of the
    /// value's line (a knob's key is on its value's line) to the `=`.
    pub(crate) fn key_span(&self, value: Range<usize>) -> Range<usize> {
        let at = value.start.min(self.source.len());
        let line_start = self.source[..at].rfind('\n').map_or(0, |i| i + 1);
        let line = &self.source[line_start..at];
        let key = line.split('=').next().unwrap_or_default();
        let start = line_start + (key.len() - key.trim_start().len());
        start..line_start + key.trim_end().len()
    }

    /// The designs whose services have a leader with their default knobs, as `raft or
    /// primary-backup`, for errors about `leader`.
    pub(crate) fn designs_with_leaders(&self) -> String {
        let kinds: Vec<String> = self
            .designs
            .all()
            .iter()
            .filter(|d| {
                d.resolve(&mut Knobs::default(), DEFAULT_MAX_TTL_MS)
                    .is_ok_and(|(shape, _)| shape.has_leader)
            })
            .map(|d| d.kind().to_owned())
            .collect();
        either(&kinds)
    }

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
    mut tables: RawKnobTables,
    source: &str,
    file: &str,
    checked: Option<&[ViolationKind]>,
    designs: &dyn Designs,
) -> Result<Scenario, ScenarioError> {
    let cx = Ctx {
        source,
        file,
        designs,
        shape: ServiceShape::default(),
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
        shape: lock_service.shape.clone(),
        ..cx
    };
    let resource = resolve_resource(&cx, &raw.resource, &mut tables)?;
    let clients = resolve_clients(&cx, &raw.clients, tables, &lock_service, &resource)?;
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
    // A whole number past u64 is no typo: say what the file can hold, and what reaches further.
    let past_u64 = |n: &str| {
        n.trim()
            .parse::<u128>()
            .is_ok_and(|n| n > u128::from(u64::MAX))
    };
    if past_u64(b) {
        let m = format!(
            "the end of {:?} is past {} (2^64 - 1), the largest a scenario file takes, so the \
             last seed a file can name is 2^64 - 2; `fencesim run --seed` and \
             `explore --seeds` reach 2^64 - 1",
            s.get_ref(),
            u64::MAX
        );
        return Err(cx.err(s.span(), "seeds", m));
    }
    let end: u64 = b.trim().parse().map_err(|_| bad())?;
    if start >= end {
        return Err(bad());
    }
    Ok(SeedRange { start, end })
}

/// `[lock_service]`: `kind` looked up among the designs, `max_ttl_ms`, and the rest handed to
/// the design as its knobs. A knob the design does not read is refused, naming the designs
/// that do take it.
fn resolve_lock_service(
    cx: &Ctx,
    raw: Option<&Spanned<RawLockService>>,
) -> Result<LockServiceSpec, ScenarioError> {
    let mut given = raw.map(|r| r.get_ref().clone()).unwrap_or_default();
    let header = raw.map_or(0..0, |r| r.span());
    let design = match given.remove("kind") {
        // The catalog's first design is the default.
        None => cx.designs.all().first().copied().ok_or_else(|| {
            cx.err(
                header.clone(),
                "lock_service.kind",
                "expected a `kind`: no design is the default here",
            )
        })?,
        Some(kind) => find_design(cx, &kind)?,
    };
    let max_ttl_ms = match given.remove("max_ttl_ms") {
        Some(n) => cx.positive(
            &integer(cx, &n, "lock_service.max_ttl_ms")?,
            "lock_service.max_ttl_ms",
        )?,
        None => DEFAULT_MAX_TTL_MS,
    };
    let candidates: Vec<Candidate> = cx
        .designs
        .all()
        .iter()
        .map(|d| (format!("\"{}\"", d.kind()), d.knob_names()))
        .collect();
    let mut own = vec!["kind", "max_ttl_ms"];
    own.extend(design.knob_names());
    let reader = KnobReader {
        table: "lock_service",
        candidates: &candidates,
        own: &own,
        only: |owners, knob| format!("only a kind = {owners} lock service uses `{knob}`"),
    };
    let ((shape, settings), knobs) =
        reader.read(cx, given, header.clone(), |k| design.resolve(k, max_ttl_ms))?;
    refuse_bad_shape(cx, design.kind(), &shape, header)?;
    Ok(LockServiceSpec {
        kind: design.kind().to_owned(),
        max_ttl_ms,
        knobs,
        shape,
        settings,
    })
}

/// A design's nodes must be nameable and apart from the harness's own: a shape that breaks
/// that is the design's bug, reported at `[lock_service]` rather than found mid-run.
fn refuse_bad_shape(
    cx: &Ctx,
    kind: &str,
    shape: &ServiceShape,
    header: Range<usize>,
) -> Result<(), ScenarioError> {
    let mut seen = BTreeSet::new();
    let bad = shape.nodes.iter().find(|n| {
        !valid_name(n)
            || [RESOURCE_NODE, LEADER, "nemesis", "network"].contains(&n.as_str())
            || !seen.insert(n.as_str())
    });
    let m = match (shape.nodes.is_empty(), bad) {
        (true, _) => format!("the design {kind:?} names no node for its service"),
        (false, Some(n)) => format!(
            "the design {kind:?} names a node {n:?}, which is not a valid node name or is \
             reserved or taken twice"
        ),
        (false, None) => match bad_safepoint(shape) {
            Some(name) => format!(
                "the design {kind:?} declares a safepoint {name:?}, which is not a kebab-case \
                 name, is one of the harness's own events ({}) or is declared twice",
                NodeEvent::BUILT_IN.map(NodeEvent::as_str).join(", ")
            ),
            None => return Ok(()),
        },
    };
    Err(cx.err(header, "lock_service.kind", m))
}

/// A safepoint of `shape` that a scenario could not name apart: not kebab-case, a harness
/// event's name, or declared twice.
fn bad_safepoint(shape: &ServiceShape) -> Option<&'static str> {
    let mut seen = BTreeSet::new();
    let kebab = |n: &str| {
        !n.is_empty()
            && !n.starts_with('-')
            && !n.ends_with('-')
            && n.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    shape
        .safepoints
        .iter()
        .map(|s| s.name)
        .find(|n| !kebab(n) || NodeEvent::built_in(n).is_some() || !seen.insert(*n))
}

/// The design a `kind` value names.
fn find_design<'a>(
    cx: &Ctx<'a>,
    kind: &Spanned<toml::Value>,
) -> Result<&'a dyn DesignSpec, ScenarioError> {
    let kinds: Vec<String> = cx
        .designs
        .all()
        .iter()
        .map(|d| format!("`{}`", d.kind()))
        .collect();
    let name = match kind.get_ref() {
        toml::Value::String(name) => name,
        other => {
            let m = format!(
                "expected a string, one of {}, found {}",
                kinds.join(", "),
                fencesim_design::knobs::describe(other)
            );
            return Err(cx.err(kind.span(), "lock_service.kind", m));
        }
    };
    if name.trim().is_empty() {
        let m = format!(
            "expected one of {}, found an empty string",
            kinds.join(", ")
        );
        return Err(cx.err(kind.span(), "lock_service.kind", m));
    }
    cx.designs.find(name).ok_or_else(|| {
        let all = cx.designs.all();
        let near = fencesim_history::nearest(name, all.iter().map(|d| d.kind()));
        // No near miss: perhaps a design of the user's own, which only the binary that
        // registers it knows.
        let hint = near.map_or_else(
            || " (a design of your own is known only to a binary that registers it: docs/designs.md)".to_owned(),
            |n| format!(" (did you mean `{n}`?)"),
        );
        let m = format!(
            "unknown variant `{name}`{hint}, expected one of {}",
            kinds.join(", ")
        );
        cx.err(kind.span(), "lock_service.kind", m)
    })
}

/// A TOML value that must be an integer (as every number of `[lock_service]` is).
fn integer(cx: &Ctx, value: &Spanned<toml::Value>, field: &str) -> Result<Num, ScenarioError> {
    match value.get_ref() {
        toml::Value::Integer(n) => Ok(Spanned::new(value.span(), *n)),
        other => Err(cx.err(
            value.span(),
            field,
            format!(
                "expected an integer, found {}",
                fencesim_design::knobs::describe(other)
            ),
        )),
    }
}

/// `[resource]`: `mode` looked up among the resources, `keys`, and the rest handed to the
/// resource as its knobs, as `[lock_service]`'s are to the design.
fn resolve_resource(
    cx: &Ctx,
    raw: &RawResource,
    tables: &mut RawKnobTables,
) -> Result<ResourceSpec, ScenarioError> {
    let keys = match &raw.keys {
        Some(keys) if keys.get_ref().is_empty() => {
            let hint = "expected at least one key (leave `keys` out for [\"register\"])";
            return Err(cx.err(keys.span(), "resource.keys", hint));
        }
        Some(keys) => keys.get_ref().iter().map(|k| k.get_ref().clone()).collect(),
        None => vec![DEFAULT_KEY.to_owned()],
    };
    let modes: Vec<String> = cx
        .designs
        .all_resources()
        .iter()
        .map(|r| format!("`{}`", r.mode()))
        .collect();
    let resource = match &raw.mode {
        // The catalog's first resource is the default.
        None => cx.designs.all_resources().first().copied(),
        Some(mode) => {
            let found = cx.designs.find_resource(mode.get_ref());
            if found.is_none() {
                let m = format!(
                    "unknown variant `{}`, expected one of {}",
                    mode.get_ref(),
                    modes.join(", ")
                );
                return Err(cx.err(mode.span(), "resource.mode", m));
            }
            found
        }
    }
    .ok_or_else(|| {
        cx.err(
            0..0,
            "resource.mode",
            "expected a `mode`: no resource is the default here",
        )
    })?;
    let (mut given, header) = match tables.resource.take() {
        Some(table) => (table.get_ref().clone(), table.span()),
        None => Default::default(),
    };
    given.remove("mode");
    given.remove("keys");
    let candidates: Vec<Candidate> = cx
        .designs
        .all_resources()
        .iter()
        .map(|r| (format!("\"{}\"", r.mode()), r.knob_names()))
        .collect();
    let mut own = vec!["mode", "keys"];
    own.extend(resource.knob_names());
    let reader = KnobReader {
        table: "resource",
        candidates: &candidates,
        own: &own,
        only: |owners, knob| format!("only a mode = {owners} resource uses `{knob}`"),
    };
    let (settings, resolved) = reader.read(cx, given, header, |k| resource.resolve(k))?;
    Ok(ResourceSpec {
        mode: resource.mode().to_owned(),
        keys,
        knobs: resolved,
        settings,
    })
}

fn resolve_clients(
    cx: &Ctx,
    raw: &Spanned<Vec<RawClient>>,
    client_knobs: RawKnobTables,
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
    let mut knobs = client_knobs.clients.into_iter();
    for group in raw.get_ref() {
        let fields = knobs.next().unwrap_or_default();
        let template = resolve_client_template(cx, group, fields, lock_service, resource)?;
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
            let reserved =
                RESERVED_NODE_NAMES.contains(&name.as_str()) || cx.role(&name) != NodeRole::Client;
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
    fields: RawLockService,
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
    let (settings, knobs) = resolve_client_knobs(cx, c, fields, lock_service)?;
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
        cleanup: c.cleanup.unwrap_or_default(),
        work_clock: c.work_clock.unwrap_or_default(),
        knobs,
        settings,
    })
}

/// One `[[clients]]` table's fields that are not the workload's, read by the design's client
/// protocol ([`DesignSpec::resolve_client`]); one it does not read is refused, naming the
/// designs whose clients take it, or the nearest field.
fn resolve_client_knobs(
    cx: &Ctx,
    c: &RawClient,
    mut fields: RawLockService,
    lock_service: &LockServiceSpec,
) -> Result<(fencesim_design::Settings, toml::Table), ScenarioError> {
    fields.retain(|name, _| !CLIENT_FIELDS.contains(&name.as_str()));
    let design = cx
        .designs
        .find(&lock_service.kind)
        .expect("the lock service's design was found");
    let workload = ClientWorkload {
        renews: c.renew_ms.is_some(),
        checks_validity: c.validity_check != Some(false),
    };
    let candidates: Vec<Candidate> = cx
        .designs
        .all()
        .iter()
        .map(|d| (format!("\"{}\"", d.kind()), d.client_knob_names()))
        .collect();
    let mut own = CLIENT_FIELDS.to_vec();
    own.extend(design.client_knob_names());
    let reader = KnobReader {
        table: "clients",
        candidates: &candidates,
        own: &own,
        only: |owners, knob| format!("only clients of a kind = {owners} lock service use `{knob}`"),
    };
    reader.read(cx, fields, c.ttl_ms.span(), |k| {
        design.resolve_client(k, &workload, lock_service.max_ttl_ms)
    })
}

/// Refuse a `[[clients]]` field that is neither the workload's nor a client knob of any design,
/// at its key, with the nearest of the fields the scenario's own design takes (the workload's
/// and its client knobs; another design's knob is refused later, naming the designs that take
/// it). A `kind` the catalog lacks is left for the `[lock_service]` check to name: a knob of
/// that design is not what is wrong.
pub(crate) fn refuse_unknown_client_fields(
    tables: &RawKnobTables,
    source: &str,
    file: &str,
    designs: &dyn Designs,
) -> Result<(), ScenarioError> {
    let cx = Ctx {
        source,
        file,
        designs,
        shape: ServiceShape::default(),
    };
    let all = designs.all();
    let kind = tables
        .lock_service
        .as_ref()
        .and_then(|t| t.get("kind"))
        .map(|k| k.get_ref());
    let own = match kind {
        None => all.first().copied(),
        Some(toml::Value::String(kind)) => match designs.find(kind) {
            Some(design) => Some(design),
            None => return Ok(()),
        },
        // A kind that is not a string: `[lock_service]`'s check says so.
        Some(_) => return Ok(()),
    };
    // The design's own knobs first: a long list is cut short in the message, and the
    // workload's fields are the same in every scenario.
    let mut listed: Vec<&str> = own
        .iter()
        .flat_map(|d| d.client_knob_names())
        .copied()
        .collect();
    listed.extend(CLIENT_FIELDS);
    let taken = |name: &str| all.iter().any(|d| d.client_knob_names().contains(&name));
    for (name, value) in tables.clients.iter().flatten() {
        if !listed.contains(&name.as_str()) && !taken(name) {
            let field = format!("clients.{}", bare_or_quoted(name));
            return Err(cx.err(
                cx.key_span(value.span()),
                &field,
                unknown_field(name, &listed),
            ));
        }
    }
    Ok(())
}

/// A design (or resource) that may take a knob: its name as errors quote it, and its knobs.
type Candidate = (String, &'static [&'static str]);

/// How one table's knobs are read by the design chosen for it, with the refusals every such
/// table shares.
struct KnobReader<'a> {
    /// The table, as errors name it (`lock_service`).
    table: &'a str,
    /// Every design (or resource) that could have been chosen, with its knobs.
    candidates: &'a [Candidate],
    /// The table's own fields (the harness's and the chosen design's knobs): what an unknown
    /// name is compared with for a suggestion.
    own: &'a [&'a str],
    /// The refusal of a knob only other candidates take: (their names, the knob) -> message.
    only: fn(&str, &str) -> String,
}

impl KnobReader<'_> {
    /// Read `given` (the table's fields less the harness's) with `resolve`, the chosen
    /// design's reading. A field no candidate takes is refused first, at its key, with the
    /// nearest of `own` (so that a misspelt knob is named, not blamed on one that depends on
    /// it); then a design's error, located; then a knob the design left unread, at its value,
    /// naming the candidates that take it. Returns what `resolve` gave and the resolved knobs.
    fn read<T>(
        &self,
        cx: &Ctx,
        given: RawLockService,
        header: Range<usize>,
        resolve: impl FnOnce(&mut Knobs) -> Result<T, KnobError>,
    ) -> Result<(T, toml::Table), ScenarioError> {
        let field = |name: &str| format!("{}.{}", self.table, bare_or_quoted(name));
        let taken = |name: &str| self.candidates.iter().any(|(_, k)| k.contains(&name));
        let unknown = given
            .iter()
            .find(|(name, _)| !taken(name) && !self.own.contains(&name.as_str()));
        if let Some((name, value)) = unknown {
            let span = cx.key_span(value.span());
            return Err(cx.err(span, &field(name), unknown_field(name, self.own)));
        }
        let mut knobs = Knobs::new(given, header);
        let result =
            resolve(&mut knobs).map_err(|e| cx.err(e.span, &field(&e.field), e.message))?;
        let (resolved, unread) = knobs.into_resolved();
        if let Some((name, span)) = unread.into_iter().next() {
            let owners: Vec<String> = self
                .candidates
                .iter()
                .filter(|(_, k)| k.contains(&name.as_str()))
                .map(|(n, _)| n.clone())
                .collect();
            // Listed by no candidate, yet given: the design read a knob it does not list.
            let m = match owners.is_empty() {
                true => unknown_field(&name, self.own),
                false => (self.only)(&either(&owners), &name),
            };
            return Err(cx.err(span, &field(&name), m));
        }
        Ok((result, resolved))
    }
}

/// `unknown field `x` (did you mean `y`?), expected one of ...`, as serde says it, with the
/// nearest of `known` (or the one `x` lacks a unit of: `ttl` for `ttl_ms`).
fn unknown_field(name: &str, known: &[&str]) -> String {
    let with_unit = known.iter().copied().find(|k| {
        k.strip_prefix(name)
            .is_some_and(|unit| matches!(unit, "_ms" | "_ppm"))
    });
    let near = with_unit.or_else(|| fencesim_history::nearest(name, known.iter().copied()));
    let hint = near
        .map(|n| format!(" (did you mean `{n}`?)"))
        .unwrap_or_default();
    let listed: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
    let name = bare_or_quoted(name);
    format!(
        "unknown field `{name}`{hint}, expected one of {}",
        listed.join(", ")
    )
}

/// `a`, `a or b`, `a, b or c`.
fn either(names: &[String]) -> String {
    match names.split_last() {
        None => "(none)".to_owned(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
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

#[cfg(test)]
mod derived_name_tests {
    use super::{derived_name, valid_name, MAX_NAME};

    #[test]
    fn a_derived_name_keeps_its_suffix_and_stays_valid() {
        assert_eq!(derived_name("k12", "-guided-7"), "k12-guided-7");
        let long = "a".repeat(MAX_NAME);
        let name = derived_name(&long, "-seed-18446744073709551614-min");
        assert_eq!(name.len(), MAX_NAME);
        assert!(name.ends_with("-seed-18446744073709551614-min"));
        assert!(valid_name(&name));
    }
}
