//! `[nemesis]` validation.

use toml::Spanned;

use crate::error::ScenarioError;
use crate::fault::FaultKind;
use crate::model::{LatencyRange, NemesisSpec, Range64, LEADER};
use crate::raw::{Pair, RawNemesis};
use crate::validate::{Ctx, MAX_NUMBER};

/// The most faults a random nemesis may draw for one seed (the drawn plan is held in memory
/// whole, and every fault is a task and records of the run).
pub const MAX_DRAWN_FAULTS: u64 = 100_000;

pub(crate) fn resolve(
    cx: &Ctx,
    spanned: &Spanned<RawNemesis>,
    nodes: &[&str],
    duration_ms: u64,
    max_ttl_ms: u64,
) -> Result<NemesisSpec, ScenarioError> {
    let n = spanned.get_ref();
    if n.kinds.get_ref().is_empty() {
        return Err(cx.err(
            n.kinds.span(),
            "nemesis.kinds",
            "expected at least one fault kind",
        ));
    }
    let mut kinds: Vec<FaultKind> = Vec::new();
    for k in n.kinds.get_ref() {
        let kind = *k.get_ref();
        if !kind.is_drawable() {
            let names: Vec<&str> = FaultKind::ALL
                .iter()
                .filter(|k| k.is_drawable())
                .map(|k| k.as_str())
                .collect();
            return Err(cx.err(
                k.span(),
                "nemesis.kinds",
                format!("a random nemesis draws only {}", names.join(", ")),
            ));
        }
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    let targets = match &n.targets {
        Some(t) => t
            .get_ref()
            .iter()
            .map(|name| {
                // `leader` is resolved when each fault starts, as in `[[faults]]`: the Raft
                // leader or the primary.
                let leader = name.get_ref() == LEADER && cx.shape.has_leader;
                if leader || nodes.contains(&name.get_ref().as_str()) {
                    Ok(name.get_ref().clone())
                } else {
                    Err(cx.err(
                        name.span(),
                        "nemesis.targets",
                        format!(
                            "unknown node {:?}; the nodes are {}",
                            name.get_ref(),
                            nodes.join(", ")
                        ),
                    ))
                }
            })
            .collect::<Result<Vec<_>, _>>()?,
        None => nodes.iter().map(|s| s.to_string()).collect(),
    };
    if targets.is_empty() {
        let span = n.targets.as_ref().map_or(spanned.span(), |t| t.span());
        return Err(cx.err(
            span,
            "nemesis.targets",
            "expected at least one node (or leave `targets` out for every node)",
        ));
    }
    let range = |p: &Option<Pair>,
                 field: &str,
                 default: LatencyRange,
                 positive: bool|
     -> Result<LatencyRange, ScenarioError> {
        let r = match p {
            Some(p) => cx.range(p, field)?,
            None => default,
        };
        match p {
            Some(p) if positive && r.min_ms == 0 => {
                Err(cx.err(p.span(), field, "expected a range of positive values"))
            }
            _ => Ok(r),
        }
    };
    let signed =
        |p: &Option<Pair>, field: &str, default: Range64| -> Result<Range64, ScenarioError> {
            match p {
                None => Ok(default),
                Some(p) => match p.get_ref()[..] {
                    [min, max]
                        if min <= max
                            && min.unsigned_abs() <= MAX_NUMBER as u64
                            && max.unsigned_abs() <= MAX_NUMBER as u64 =>
                    {
                        Ok(Range64 { min, max })
                    }
                    _ => Err(cx.err(
                        p.span(),
                        field,
                        format!(
                            "expected [min, max] with min <= max, found {:?}",
                            p.get_ref()
                        ),
                    )),
                },
            }
        };
    let heal_at_ms = cx.positive(&n.heal_at_ms, "nemesis.heal_at_ms")?;
    if let Some(p) = &n.drift_ppm {
        if p.get_ref()
            .iter()
            .any(|v| *v <= -1_000_000 || *v > 1_000_000)
        {
            return Err(cx.err(
                p.span(),
                "nemesis.drift_ppm",
                "expected values in (-1000000, 1000000]",
            ));
        }
    }
    let recovery_periods = match &n.recovery_periods {
        Some(k) => cx.positive(k, "nemesis.recovery_periods")?,
        None => 3,
    };
    let needed = heal_at_ms.saturating_add(recovery_periods.saturating_mul(max_ttl_ms));
    if needed > duration_ms {
        let m = format!("the run ({duration_ms} ms) must last past the final heal plus {recovery_periods} lease periods of {max_ttl_ms} ms ({needed} ms)");
        return Err(cx.err(n.heal_at_ms.span(), "nemesis.heal_at_ms", m));
    }
    let ttl = max_ttl_ms as i64;
    let rate = match &n.rate {
        Some(r) => match r.get_ref()[..] {
            [lo, hi] if 0.0 <= lo && lo <= hi && hi <= 1.0 => [lo, hi],
            _ => {
                return Err(cx.err(
                    r.span(),
                    "nemesis.rate",
                    "expected [low, high] with 0 <= low <= high <= 1",
                ))
            }
        },
        None => [0.05, 0.5],
    };
    let spec = NemesisSpec {
        kinds,
        swarm: n.swarm.unwrap_or(false),
        placement: n.placement.unwrap_or_default(),
        targets,
        start_ms: match &n.start_ms {
            Some(s) if *s.get_ref() >= heal_at_ms as i64 => {
                return Err(cx.err(s.span(), "nemesis.start_ms", format!("expected a start before heal_at_ms = {heal_at_ms}, or no fault is ever drawn")));
            }
            Some(s) => cx.non_negative(s, "nemesis.start_ms")?,
            None => 0,
        },
        interval_ms: range(
            &n.interval_ms,
            "nemesis.interval_ms",
            LatencyRange {
                min_ms: 500,
                max_ms: 3_000,
            },
            true,
        )?,
        duration_ms: range(
            &n.duration_ms,
            "nemesis.duration_ms",
            LatencyRange {
                min_ms: 100,
                max_ms: 5_000,
            },
            true,
        )?,
        heal_at_ms,
        recovery_periods,
        clock_jump_ms: signed(
            &n.clock_jump_ms,
            "nemesis.clock_jump_ms",
            Range64 {
                min: -2 * ttl,
                max: 2 * ttl,
            },
        )?,
        clock_offset_ms: signed(
            &n.clock_offset_ms,
            "nemesis.clock_offset_ms",
            Range64 {
                min: -2 * ttl,
                max: 2 * ttl,
            },
        )?,
        drift_ppm: signed(
            &n.drift_ppm,
            "nemesis.drift_ppm",
            Range64 {
                min: -10_000,
                max: 10_000,
            },
        )?,
        rate,
        latency_ms: range(
            &n.latency_ms,
            "nemesis.latency_ms",
            LatencyRange {
                min_ms: 20,
                max_ms: 500,
            },
            false,
        )?,
        reorder_window_ms: range(
            &n.reorder_window_ms,
            "nemesis.reorder_window_ms",
            LatencyRange {
                min_ms: 10,
                max_ms: 200,
            },
            true,
        )?,
    };
    // The plan is drawn whole before the run: a heal far away with short intervals would be
    // millions of faults (a run of 10^12 ms took all of a machine's memory). Bound it here.
    let most = (spec.heal_at_ms - spec.start_ms) / spec.interval_ms.min_ms.max(1);
    if most > MAX_DRAWN_FAULTS {
        let m = format!(
            "the random nemesis would draw up to {most} faults before the heal ({} ms of faults \
             at intervals from {} ms); at most {MAX_DRAWN_FAULTS}: heal sooner or draw less often",
            spec.heal_at_ms - spec.start_ms,
            spec.interval_ms.min_ms
        );
        return Err(cx.err(n.heal_at_ms.span(), "nemesis.heal_at_ms", m));
    }
    Ok(spec)
}
