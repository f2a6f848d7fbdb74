//! From the raw form to a resolved [`Scenario`]: defaults, ranges and cross-references.

use std::collections::BTreeSet;
use std::ops::Range;

use toml::Spanned;

use crate::error::ScenarioError;
use crate::model::*;
use crate::raw::*;

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
struct Ctx<'a> {
    source: &'a str,
    file: &'a str,
}

impl Ctx<'_> {
    fn err(&self, span: Range<usize>, field: &str, message: impl Into<String>) -> ScenarioError {
        ScenarioError::at(self.source, self.file, span, field, message)
    }

    /// A number that must be >= `min`.
    fn at_least(&self, n: &Num, min: i64, field: &str) -> Result<u64, ScenarioError> {
        let v = *n.get_ref();
        if v < min {
            let what = if min == 1 {
                "a positive integer"
            } else {
                "an integer >= 0"
            };
            return Err(self.err(n.span(), field, format!("expected {what}, found {v}")));
        }
        Ok(v as u64)
    }

    fn positive(&self, n: &Num, field: &str) -> Result<u64, ScenarioError> {
        self.at_least(n, 1, field)
    }

    fn non_negative(&self, n: &Num, field: &str) -> Result<u64, ScenarioError> {
        self.at_least(n, 0, field)
    }

    fn range(&self, pair: &Pair, field: &str) -> Result<LatencyRange, ScenarioError> {
        let (lo, hi) = match pair.get_ref()[..] {
            [lo, hi] if 0 <= lo && lo <= hi => (lo, hi),
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
) -> Result<Scenario, ScenarioError> {
    let cx = Ctx { source, file };
    let name = raw.name.get_ref().trim().to_owned();
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !name_ok {
        return Err(cx.err(
            raw.name.span(),
            "name",
            "expected a non-empty name of letters, digits, '-' and '_' (it names the output directory)",
        ));
    }
    let seeds = match &raw.seeds {
        Some(s) => parse_seeds(&cx, s)?,
        None => DEFAULT_SEEDS,
    };
    let duration_ms = cx.positive(&raw.duration_ms, "duration_ms")?;
    let network = NetworkSpec {
        latency_ms: match &raw.network.latency_ms {
            Some(p) => cx.range(p, "network.latency_ms")?,
            None => DEFAULT_LATENCY,
        },
    };
    let lock_service = resolve_lock_service(&cx, raw.lock_service.as_ref())?;
    let resource = resolve_resource(&cx, &raw.resource)?;
    let clients = resolve_clients(&cx, &raw.clients, &lock_service, &resource)?;
    let node_names: Vec<&str> = [LEASE_SERVICE_NODE, RESOURCE_NODE]
        .into_iter()
        .chain(clients.iter().map(|c| c.name.as_str()))
        .collect();
    let faults = raw
        .faults
        .iter()
        .map(|f| resolve_fault(&cx, f, &node_names))
        .collect::<Result<Vec<_>, _>>()?;
    let expect = resolve_expect(&cx, raw.expect.as_ref(), &raw.name)?;
    Ok(Scenario {
        name,
        description: raw.description.trim().to_owned(),
        seeds,
        duration_ms,
        network,
        lock_service,
        resource,
        clients,
        faults,
        expect,
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
    Ok(LockServiceSpec {
        kind: raw.and_then(|r| r.kind).unwrap_or(LockServiceKind::Single),
        max_ttl_ms,
    })
}

fn resolve_resource(cx: &Ctx, raw: &RawResource) -> Result<ResourceSpec, ScenarioError> {
    let keys = match &raw.keys {
        Some(keys) if keys.get_ref().is_empty() => {
            let hint = "expected at least one key (leave `keys` out for [\"register\"])";
            return Err(cx.err(keys.span(), "resource.keys", hint));
        }
        Some(keys) => keys.get_ref().iter().map(|k| k.get_ref().clone()).collect(),
        None => vec![DEFAULT_KEY.to_owned()],
    };
    Ok(ResourceSpec {
        mode: raw.mode.unwrap_or(ResourceMode::Fenced),
        keys,
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
    for group in raw.get_ref() {
        let template = resolve_client_template(cx, group, lock_service, resource)?;
        let names = client_names(cx, group, out.len())?;
        for (name, span) in names {
            if RESERVED_NODE_NAMES.contains(&name.as_str()) || !seen.insert(name.clone()) {
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
    })
}

fn resolve_fault(cx: &Ctx, f: &Spanned<RawFault>, nodes: &[&str]) -> Result<Fault, ScenarioError> {
    let span = f.span();
    let f = f.get_ref();
    let kind_span = f.kind.span();
    let require = |present: bool, field: &str| -> Result<(), ScenarioError> {
        if present {
            Ok(())
        } else {
            Err(cx.err(
                kind_span.clone(),
                &format!("faults.{field}"),
                format!("this kind of fault needs `{field}`"),
            ))
        }
    };
    let forbid = |present: Option<Range<usize>>, field: &str| -> Result<(), ScenarioError> {
        match present {
            Some(s) => Err(cx.err(
                s,
                &format!("faults.{field}"),
                "not used by this kind of fault",
            )),
            None => Ok(()),
        }
    };
    let known_node = |n: &Spanned<String>, field: &str| -> Result<String, ScenarioError> {
        if nodes.contains(&n.get_ref().as_str()) {
            Ok(n.get_ref().clone())
        } else {
            Err(cx.err(
                n.span(),
                field,
                format!(
                    "unknown node {:?}; the nodes are {}",
                    n.get_ref(),
                    nodes.join(", ")
                ),
            ))
        }
    };
    require(f.duration_ms.is_some(), "duration_ms")?;
    let duration_ms = cx.positive(
        f.duration_ms.as_ref().expect("required above"),
        "faults.duration_ms",
    )?;
    match *f.kind.get_ref() {
        RawFaultKind::Pause => {
            require(f.node.is_some(), "node")?;
            forbid(span_of(&f.from), "from")?;
            forbid(span_of(&f.message), "message")?;
            forbid(span_of(&f.latency_ms), "latency_ms")?;
            let node = known_node(f.node.as_ref().expect("required above"), "faults.node")?;
            let trigger = resolve_trigger(cx, f, span, &node)?;
            Ok(Fault::Pause {
                node,
                trigger,
                duration_ms,
            })
        }
        RawFaultKind::Hold => {
            require(f.from.is_some(), "from")?;
            require(f.message.is_some(), "message")?;
            forbid(span_of(&f.node), "node")?;
            forbid(span_of(&f.after), "after")?;
            forbid(span_of(&f.before), "before")?;
            forbid(span_of(&f.at_ms), "at_ms")?;
            forbid(span_of(&f.latency_ms), "latency_ms")?;
            let from = known_node(f.from.as_ref().expect("required above"), "faults.from")?;
            let nth = match &f.nth {
                Some(n) => cx.positive(n, "faults.nth")?,
                None => 1,
            };
            let spanned = f.message.as_ref().expect("required above");
            let message = *spanned.get_ref();
            if !message.sent_by(NodeRole::of(&from)) {
                let m = format!(
                    "node {from:?} never sends a {:?} message, so this hold would never match",
                    message.as_str()
                );
                return Err(cx.err(spanned.span(), "faults.message", m));
            }
            Ok(Fault::Hold {
                from,
                message,
                nth,
                duration_ms,
            })
        }
        RawFaultKind::Latency => {
            require(f.at_ms.is_some(), "at_ms")?;
            require(f.latency_ms.is_some(), "latency_ms")?;
            forbid(span_of(&f.node), "node")?;
            forbid(span_of(&f.after), "after")?;
            forbid(span_of(&f.before), "before")?;
            forbid(span_of(&f.from), "from")?;
            forbid(span_of(&f.nth), "nth")?;
            forbid(span_of(&f.message), "message")?;
            let at_ms =
                cx.non_negative(f.at_ms.as_ref().expect("required above"), "faults.at_ms")?;
            let latency_ms = cx.range(
                f.latency_ms.as_ref().expect("required above"),
                "faults.latency_ms",
            )?;
            Ok(Fault::Latency {
                at_ms,
                duration_ms,
                latency_ms,
            })
        }
    }
}

/// Where an optional field was written, if it was.
fn span_of<T>(field: &Option<Spanned<T>>) -> Option<Range<usize>> {
    field.as_ref().map(Spanned::span)
}

/// Exactly one of `at_ms`, `after`, `before`; `nth` (default 1) only with an event.
fn resolve_trigger(
    cx: &Ctx,
    f: &RawFault,
    span: Range<usize>,
    node: &str,
) -> Result<Trigger, ScenarioError> {
    if let (Some(_), Some(n)) = (&f.at_ms, &f.nth) {
        return Err(cx.err(
            n.span(),
            "faults.nth",
            "`nth` counts events; it does not go with `at_ms`",
        ));
    }
    let nth = match &f.nth {
        Some(n) => Some(cx.positive(n, "faults.nth")?),
        None => None,
    };
    let (before, after) = NodeEvent::safepoints(NodeRole::of(node));
    for (field, ev, allowed) in [("after", &f.after, after), ("before", &f.before, before)] {
        if let Some(ev) = ev.as_ref().filter(|e| !allowed.contains(e.get_ref())) {
            let names: Vec<_> = allowed.iter().map(|e| e.as_str()).collect();
            let message = format!(
                "node {node:?} never reaches {field} {:?}; it can be paused {field} {}",
                ev.get_ref().as_str(),
                names.join(", ")
            );
            return Err(cx.err(ev.span(), &format!("faults.{field}"), message));
        }
    }
    match (&f.at_ms, &f.after, &f.before) {
        (Some(at), None, None) => {
            if let Some(n) = &f.nth {
                return Err(cx.err(
                    n.span(),
                    "faults.nth",
                    "`nth` counts events; it does not go with `at_ms`",
                ));
            }
            Ok(Trigger::At {
                at_ms: cx.non_negative(at, "faults.at_ms")?,
            })
        }
        (None, Some(ev), None) => Ok(Trigger::After {
            event: *ev.get_ref(),
            nth: nth.unwrap_or(1),
        }),
        (None, None, Some(ev)) => Ok(Trigger::Before {
            event: *ev.get_ref(),
            nth: nth.unwrap_or(1),
        }),
        _ => Err(cx.err(
            span,
            "faults",
            "give exactly one of `at_ms`, `after` or `before`",
        )),
    }
}

fn resolve_expect(
    cx: &Ctx,
    raw: Option<&RawExpect>,
    name: &Spanned<String>,
) -> Result<Expectation, ScenarioError> {
    let Some(raw) = raw else {
        return Err(cx.err(
            name.span(),
            "expect",
            "every scenario needs an [expect] table with a verdict",
        ));
    };
    let verdict = *raw.verdict.get_ref();
    let violations = raw
        .violations
        .as_ref()
        .map(|v| v.get_ref().clone())
        .unwrap_or_default();
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
        _ => Ok(Expectation {
            verdict,
            violations,
        }),
    }
}
