//! `[[faults]]` validation: which fields each kind takes, and what they must refer to.

use std::ops::Range;

use toml::Spanned;

use crate::error::ScenarioError;
use crate::fault::{Action, Cut, Fault, LinkSel, Trigger};
use std::fmt::Write as _;

use crate::fault::FaultKind;
use crate::model::{MessageKind, NodeEvent, NodeRole, LEADER};
use crate::raw::RawFault;
use crate::validate::Ctx;

/// How a kind is triggered.
#[derive(Clone, Copy, PartialEq, Eq)]
enum When {
    /// `at_ms`, or `after`/`before` an event of its `node` (with `nth`).
    NodeTrigger,
    /// `at_ms` only.
    AtOnly,
    /// Not triggered: `hold` picks its message by count.
    Never,
}

/// (required fields, optional fields, trigger style, duration: required?) per kind.
fn shape(
    kind: FaultKind,
) -> (
    &'static [&'static str],
    &'static [&'static str],
    When,
    Option<bool>,
) {
    use FaultKind::*;
    use When::*;
    match kind {
        Pause => (&["node"], &[], NodeTrigger, Some(true)),
        Hold => (&["from", "message"], &["nth", "copy_ms"], Never, Some(true)),
        HoldAll => (&["message"], &["from"], AtOnly, Some(true)),
        Latency => (&["latency_ms"], &["from", "to"], AtOnly, Some(true)),
        Loss | Duplicate => (&["rate"], &["from", "to"], AtOnly, Some(true)),
        Reorder => (&["window_ms"], &[], AtOnly, Some(true)),
        // A partition isolates `node` (any trigger) or cuts `groups` / `from`->`to` (at_ms).
        Partition => (
            &[],
            &["node", "groups", "from", "to"],
            NodeTrigger,
            Some(false),
        ),
        Heal => (&[], &[], AtOnly, None),
        ClockJump => (&["node", "delta_ms"], &[], NodeTrigger, None),
        ClockSkew => (&["node", "offset_ms"], &[], NodeTrigger, Some(false)),
        ClockDrift => (&["node", "ppm"], &[], NodeTrigger, Some(false)),
        ClockStrobe => (
            &["node", "offset_ms", "period_ms"],
            &[],
            NodeTrigger,
            Some(true),
        ),
        Crash => (&["node"], &[], NodeTrigger, Some(false)),
        Restart => (&["node"], &[], AtOnly, None),
        StallRenewals => (&["node"], &[], NodeTrigger, Some(true)),
        Deregister => (&["node"], &[], AtOnly, None),
        Restore => (&["node", "snapshot_at_ms"], &[], NodeTrigger, None),
        // Written so a random nemesis's drawn schedule can be replayed as scripted faults.
        FinalHeal => (&["window_ms"], &[], AtOnly, None),
    }
}

const TRIGGER_FIELDS: [&str; 5] = ["at_ms", "after", "before", "nth", "count_from_ms"];

pub(crate) fn resolve(
    cx: &Ctx,
    spanned: &Spanned<RawFault>,
    nodes: &[&str],
    run_ms: u64,
) -> Result<Fault, ScenarioError> {
    let f = spanned.get_ref();
    let kind = *f.kind.get_ref();
    let kind_name = kind_name(kind);
    let (required, optional, when, duration) = shape(kind);
    let present = f.present();
    let has = |name: &str| present.iter().any(|(n, _)| *n == name);
    for (name, span) in &present {
        let allowed = required.contains(name)
            || optional.contains(name)
            || (*name == "duration_ms" && duration.is_some())
            || (TRIGGER_FIELDS.contains(name) && when != When::Never)
            || (*name == "at_ms" && when == When::AtOnly);
        let trigger_but_at_only =
            when == When::AtOnly && TRIGGER_FIELDS.contains(name) && *name != "at_ms";
        if !allowed || trigger_but_at_only {
            return Err(cx.err(
                span.clone(),
                &format!("faults.{name}"),
                format!("a {kind_name} fault does not take `{name}`"),
            ));
        }
    }
    let kind_span = f.kind.span();
    let mut need: Vec<&str> = required.to_vec();
    if duration == Some(true) {
        need.push("duration_ms");
    }
    if when == When::AtOnly {
        need.push("at_ms");
    }
    if let Some(missing) = need.iter().find(|n| !has(n)) {
        return Err(cx.err(
            kind_span,
            &format!("faults.{missing}"),
            format!("a {kind_name} fault needs `{missing}`"),
        ));
    }
    let node =
        |field: &Option<Spanned<String>>, name: &str| -> Result<Option<String>, ScenarioError> {
            field
                .as_ref()
                .map(|n| known_node(cx, n, nodes, name))
                .transpose()
        };
    let target = match &f.node {
        // `leader`: whichever Raft replica leads when the fault starts (Jepsen's :primaries).
        Some(n) if n.get_ref() == LEADER && cx.shape.has_leader => {
            let at_only = f.after.is_none() && f.before.is_none();
            if !at_only
                || !matches!(
                    kind,
                    FaultKind::Pause
                        | FaultKind::Crash
                        | FaultKind::Partition
                        | FaultKind::ClockJump
                        | FaultKind::ClockSkew
                        | FaultKind::ClockDrift
                        | FaultKind::ClockStrobe
                )
            {
                return Err(cx.err(n.span(), "faults.node", "\"leader\" is resolved when the fault starts: use it with `at_ms` on a pause, crash, partition or clock fault"));
            }
            Some(LEADER.to_owned())
        }
        _ => node(&f.node, "faults.node")?,
    };
    let trigger = match when {
        When::Never => Trigger::At { at_ms: 0 },
        When::AtOnly => Trigger::At {
            at_ms: cx.non_negative(f.at_ms.as_ref().expect("required"), "faults.at_ms")?,
        },
        When::NodeTrigger => resolve_trigger(cx, f, spanned.span(), target.as_deref())?,
    };
    let duration_ms = f
        .duration_ms
        .as_ref()
        .map(|d| cx.positive(d, "faults.duration_ms"))
        .transpose()?;
    if let (Trigger::At { at_ms }, Some(at)) = (trigger, &f.at_ms) {
        if at_ms >= run_ms {
            return Err(cx.err(at.span(), "faults.at_ms", format!("the run ends at duration_ms = {run_ms}, so a fault at {at_ms} ms would never fire")));
        }
    }
    if let Some(from) = &f.count_from_ms {
        let count_from_ms = cx.non_negative(from, "faults.count_from_ms")?;
        if count_from_ms >= run_ms {
            return Err(cx.err(from.span(), "faults.count_from_ms", format!("the run ends at duration_ms = {run_ms}, so no event is counted from {count_from_ms} ms")));
        }
    }
    let from = node(&f.from, "faults.from")?;
    let to = node(&f.to, "faults.to")?;
    let action = match kind {
        FaultKind::Pause => Action::Pause {
            node: target.expect("required"),
        },
        FaultKind::Hold => hold(cx, f, from.expect("required"))?,
        FaultKind::HoldAll => Action::HoldAll {
            message: sent_message(cx, f, from.as_deref())?,
            from,
        },
        FaultKind::Latency => Action::Latency {
            link: LinkSel { from, to },
            latency_ms: cx.range(
                f.latency_ms.as_ref().expect("required"),
                "faults.latency_ms",
            )?,
        },
        FaultKind::Loss => Action::Loss {
            link: LinkSel { from, to },
            rate: rate(cx, f)?,
        },
        FaultKind::Duplicate => Action::Duplicate {
            link: LinkSel { from, to },
            rate: rate(cx, f)?,
        },
        FaultKind::Reorder => Action::Reorder {
            window_ms: cx.positive(f.window_ms.as_ref().expect("required"), "faults.window_ms")?,
        },
        FaultKind::Partition => Action::Partition {
            cut: cut(cx, f, target, from, to, &trigger, nodes)?,
        },
        FaultKind::Heal => Action::Heal,
        FaultKind::ClockJump => Action::ClockJump {
            node: target.expect("required"),
            delta_ms: cx.signed(f.delta_ms.as_ref().expect("required"), "faults.delta_ms")?,
        },
        FaultKind::ClockSkew => Action::ClockSkew {
            node: target.expect("required"),
            offset_ms: cx.signed(f.offset_ms.as_ref().expect("required"), "faults.offset_ms")?,
        },
        FaultKind::ClockDrift => {
            let ppm = cx.signed(f.ppm.as_ref().expect("required"), "faults.ppm")?;
            if !(-1_000_000 < ppm && ppm <= 1_000_000) {
                return Err(cx.err(
                    f.ppm.as_ref().expect("required").span(),
                    "faults.ppm",
                    "expected -1000000 < ppm <= 1000000 (a clock cannot stop or run backwards)",
                ));
            }
            Action::ClockDrift {
                node: target.expect("required"),
                ppm,
            }
        }
        FaultKind::ClockStrobe => Action::ClockStrobe {
            node: target.expect("required"),
            offset_ms: cx.signed(f.offset_ms.as_ref().expect("required"), "faults.offset_ms")?,
            period_ms: cx.positive(f.period_ms.as_ref().expect("required"), "faults.period_ms")?,
        },
        FaultKind::Crash => Action::Crash {
            node: target.expect("required"),
        },
        FaultKind::Restart => Action::Restart {
            node: target.expect("required"),
        },
        FaultKind::Deregister => {
            let span = f.node.as_ref().expect("required").span();
            let node = target.expect("required");
            if cx.role(&node) != NodeRole::Client {
                return Err(cx.err(
                    span,
                    "faults.node",
                    format!("only a client is deregistered: {node:?} is not a client"),
                ));
            }
            if !cx.shape.reaps {
                return Err(cx.err(
                    span,
                    "faults.node",
                    "this lock service has no reaper to take a deregistration",
                ));
            }
            Action::Deregister { node }
        }
        FaultKind::StallRenewals => {
            let node = target.expect("required");
            if cx.role(&node) != NodeRole::Client {
                return Err(cx.err(
                    f.node.as_ref().expect("required").span(),
                    "faults.node",
                    format!("only a client renews: {node:?} is not a client"),
                ));
            }
            Action::StallRenewals { node }
        }
        FaultKind::FinalHeal => final_heal(cx, f, &trigger, run_ms)?,
        FaultKind::Restore => {
            let node = target.expect("required");
            if !cx.shape.backups.contains(&node) {
                let m = match &cx.shape.backups[..] {
                    [] => "no node of this lock service keeps backups to restore".to_owned(),
                    nodes => format!("only {} keeps backups to restore", nodes.join(", ")),
                };
                return Err(cx.err(f.node.as_ref().expect("required").span(), "faults.node", m));
            }
            let snapshot = f.snapshot_at_ms.as_ref().expect("required");
            let snapshot_at_ms = cx.non_negative(snapshot, "faults.snapshot_at_ms")?;
            if snapshot_at_ms > run_ms {
                let m = format!("a backup from {snapshot_at_ms} ms is after the run ends at {run_ms} ms: it never exists");
                return Err(cx.err(snapshot.span(), "faults.snapshot_at_ms", m));
            }
            if let Trigger::At { at_ms } = trigger {
                if snapshot_at_ms > at_ms {
                    let m = format!("a backup from {snapshot_at_ms} ms cannot be restored at {at_ms} ms: it does not exist yet");
                    return Err(cx.err(snapshot.span(), "faults.snapshot_at_ms", m));
                }
            }
            Action::Restore {
                node,
                snapshot_at_ms,
            }
        }
    };
    Ok(Fault {
        action,
        trigger,
        duration_ms,
    })
}

/// A scripted final heal. Its recovery window must end within the run: a window cut short by
/// the run's end would report `no-progress-after-heal` for progress that had no time to happen
/// (the rule `[nemesis]` applies to `heal_at_ms`).
fn final_heal(
    cx: &Ctx,
    f: &RawFault,
    trigger: &Trigger,
    run_ms: u64,
) -> Result<Action, ScenarioError> {
    let window = f.window_ms.as_ref().expect("required");
    let window_ms = cx.positive(window, "faults.window_ms")?;
    // `at_ms` only (see `shape`), so the trigger is always `At`.
    if let Trigger::At { at_ms } = *trigger {
        let ends = at_ms.saturating_add(window_ms);
        if ends > run_ms {
            let m = format!("the run ends at duration_ms = {run_ms}, before the recovery window ends at {at_ms} + {window_ms} = {ends} ms");
            return Err(cx.err(window.span(), "faults.window_ms", m));
        }
    }
    Ok(Action::FinalHeal { window_ms })
}

/// At most one `final-heal`, and none beside a `[nemesis]`, which draws its own: the progress
/// check judges each final heal, so a second one would open a second, overlapping window.
pub(crate) fn refuse_extra_final_heals(
    cx: &Ctx,
    faults: &[Spanned<RawFault>],
    has_nemesis: bool,
) -> Result<(), ScenarioError> {
    let mut heals = faults
        .iter()
        .map(|f| &f.get_ref().kind)
        .filter(|k| *k.get_ref() == FaultKind::FinalHeal);
    if let (Some(first), true) = (heals.clone().next(), has_nemesis) {
        let m = "a [nemesis] draws its own final heal at heal_at_ms; keep either this fault or the [nemesis] table";
        return Err(cx.err(first.span(), "faults.kind", m));
    }
    match heals.nth(1) {
        Some(second) => Err(cx.err(
            second.span(),
            "faults.kind",
            "a scenario has at most one final-heal fault",
        )),
        None => Ok(()),
    }
}

fn kind_name(kind: FaultKind) -> String {
    let debug = format!("{kind:?}");
    let mut out = String::new();
    for (i, c) in debug.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

fn known_node(
    cx: &Ctx,
    n: &Spanned<String>,
    nodes: &[&str],
    field: &str,
) -> Result<String, ScenarioError> {
    if nodes.contains(&n.get_ref().as_str()) {
        return Ok(n.get_ref().clone());
    }
    let mut message = format!(
        "unknown node {:?}; the nodes are {}",
        n.get_ref(),
        nodes.join(", ")
    );
    if n.get_ref() == LEADER {
        // Reached only when the design has no leader (the leader case is taken above).
        let _ = write!(
            message,
            " (\"leader\" names the leading node of a {} service)",
            cx.designs_with_leaders()
        );
    }
    Err(cx.err(n.span(), field, message))
}

fn rate(cx: &Ctx, f: &RawFault) -> Result<f64, ScenarioError> {
    let r = f.rate.as_ref().expect("required");
    let v = *r.get_ref();
    if !(0.0..=1.0).contains(&v) {
        return Err(cx.err(
            r.span(),
            "faults.rate",
            format!("expected a probability in [0, 1], found {v}"),
        ));
    }
    Ok(v)
}

/// The fault's `nth` (1-based), 1 if not given.
fn nth(cx: &Ctx, f: &RawFault) -> Result<u64, ScenarioError> {
    f.nth
        .as_ref()
        .map_or(Ok(1), |n| cx.positive(n, "faults.nth"))
}

fn hold(cx: &Ctx, f: &RawFault, from: String) -> Result<Action, ScenarioError> {
    let nth = nth(cx, f)?;
    let message = sent_message(cx, f, Some(&from))?;
    let copy_ms = f
        .copy_ms
        .as_ref()
        .map(|n| cx.positive(n, "faults.copy_ms"))
        .transpose()?;
    Ok(Action::Hold {
        from,
        message,
        nth,
        copy_ms,
    })
}

/// The fault's `message`, refused if `from` never sends that kind (the hold could never match).
fn sent_message(cx: &Ctx, f: &RawFault, from: Option<&str>) -> Result<MessageKind, ScenarioError> {
    let spanned = f.message.as_ref().expect("required");
    let message = *spanned.get_ref();
    // Only a service's nodes send `raft`, `replicate` and `redirect`, and only the kinds the
    // design says its nodes send.
    let service_only = matches!(
        message,
        MessageKind::Raft | MessageKind::Replicate | MessageKind::Redirect
    );
    let sends = cx.shape.node_messages.contains(&message);
    let single_raft = |s: &str| service_only && !(sends && cx.shape.nodes.iter().any(|n| n == s));
    // Without a sender, some node of this design must send the kind.
    let nobody = from.is_none() && service_only && !sends;
    if nobody {
        let m = format!(
            "no node of this lock service sends {:?} messages, so this hold would never match",
            message.as_str()
        );
        return Err(cx.err(spanned.span(), "faults.message", m));
    }
    if let Some(sender) = from.filter(|s| !cx.role(s).sends(message) || single_raft(s)) {
        let m = format!(
            "node {sender:?} never sends {:?} messages, so this hold would never match",
            message.as_str()
        );
        return Err(cx.err(spanned.span(), "faults.message", m));
    }
    Ok(message)
}

/// Exactly one of `node` (isolate), `groups`, or `from` + `to` (one way).
fn cut(
    cx: &Ctx,
    f: &RawFault,
    node: Option<String>,
    from: Option<String>,
    to: Option<String>,
    trigger: &Trigger,
    nodes: &[&str],
) -> Result<Cut, ScenarioError> {
    let kind_span = f.kind.span();
    let cut = match (node, &f.groups, from, to) {
        (Some(n), None, None, None) => return Ok(Cut::Isolate(n)),
        (None, Some(groups), None, None) => {
            let mut out = Vec::new();
            for g in groups.get_ref() {
                let names = g
                    .iter()
                    .map(|n| known_node(cx, n, nodes, "faults.groups"))
                    .collect::<Result<Vec<_>, _>>()?;
                out.push(names);
            }
            if out.len() < 2 {
                return Err(cx.err(
                    groups.span(),
                    "faults.groups",
                    "expected at least two groups",
                ));
            }
            Cut::Groups(out)
        }
        (None, None, Some(from), Some(to)) => Cut::OneWay { from, to },
        _ => {
            let m = "a partition needs exactly one of `node` (isolate it), `groups` (split), or `from` and `to` (one-way loss)";
            return Err(cx.err(kind_span, "faults", m));
        }
    };
    if !matches!(trigger, Trigger::At { .. }) {
        return Err(cx.err(
            kind_span,
            "faults.at_ms",
            "only a partition that isolates a `node` can fire on an event; give `at_ms`",
        ));
    }
    Ok(cut)
}

/// Exactly one of `at_ms`, `after`, `before`; `nth` (default 1) only with an event, and only
/// events the node actually reaches.
/// The events node `node` passes (`after` or before them): the harness's for its role, less an
/// `expire` its design's nodes never record, then the design's own safepoints for its side.
pub(crate) fn reachable(cx: &Ctx, node: &str, after: bool) -> Vec<NodeEvent> {
    let role = cx.role(node);
    let (befores, afters) = NodeEvent::safepoints(role);
    // Redis nodes expire keys lazily and the lease-record store never expires anything:
    // the design says whether its nodes reach an `expire` of their own.
    let never_expires = !cx.shape.node_expires;
    let mut events: Vec<NodeEvent> = (if after { afters } else { befores })
        .iter()
        .copied()
        .filter(|e| !(never_expires && *e == NodeEvent::Expire && role == NodeRole::LeaseService))
        .collect();
    events.extend(NodeEvent::of_design(&cx.shape, role));
    events
}

fn resolve_trigger(
    cx: &Ctx,
    f: &RawFault,
    span: Range<usize>,
    node: Option<&str>,
) -> Result<Trigger, ScenarioError> {
    if let (Some(_), Some(n)) = (&f.at_ms, &f.nth) {
        return Err(cx.err(
            n.span(),
            "faults.nth",
            "`nth` counts events; it does not go with `at_ms`",
        ));
    }
    if let (Some(_), Some(c)) = (&f.at_ms, &f.count_from_ms) {
        return Err(cx.err(
            c.span(),
            "faults.count_from_ms",
            "`count_from_ms` says from when `after` or `before` counts events; it does not go with `at_ms`",
        ));
    }
    let nth = nth(cx, f)?;
    let count_from_ms = match &f.count_from_ms {
        Some(ms) => cx.non_negative(ms, "faults.count_from_ms")?,
        None => 0,
    };
    let mut events = [None, None];
    for (slot, (field, ev)) in [("after", &f.after), ("before", &f.before)]
        .into_iter()
        .enumerate()
    {
        let Some(ev) = ev else { continue };
        let Some(node) = node else {
            return Err(cx.err(
                ev.span(),
                &format!("faults.{field}"),
                "an event trigger needs the `node` whose event it is",
            ));
        };
        let allowed = reachable(cx, node, field == "after");
        let Some(event) = allowed.iter().find(|e| e.as_str() == ev.get_ref()) else {
            let names: Vec<_> = allowed.iter().map(|e| e.as_str()).collect();
            let message = format!(
                "node {node:?} never reaches {field} {:?}; its safepoints {field} events are {}",
                ev.get_ref(),
                names.join(", ")
            );
            return Err(cx.err(ev.span(), &format!("faults.{field}"), message));
        };
        events[slot] = Some(*event);
    }
    match (&f.at_ms, events) {
        (Some(at), [None, None]) => Ok(Trigger::At {
            at_ms: cx.non_negative(at, "faults.at_ms")?,
        }),
        (None, [Some(event), None]) => Ok(Trigger::After {
            event,
            nth,
            count_from_ms,
        }),
        (None, [None, Some(event)]) => Ok(Trigger::Before {
            event,
            nth,
            count_from_ms,
        }),
        _ => Err(cx.err(
            span,
            "faults",
            "give exactly one of `at_ms`, `after` or `before`",
        )),
    }
}
