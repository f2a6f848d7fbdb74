//! A resolved [`Scenario`] written back as scenario TOML, for a user to read and rerun
//! (`fencesim run FILE`).
//!
//! The output is the input format of docs/scenario-format.md with every default written out, so
//! that [`crate::parse`] gives back an equal `Scenario`. The layout is the one the bundled
//! scenarios use: top-level keys, then `[network]`, `[lock_service]`, `[resource]`, one
//! `[[clients]]` per client, one `[[faults]]` per fault, `[nemesis]` and `[expect]`. Values are
//! escaped by the `toml` crate; only the layout is written here.

use serde::Serialize;

use crate::fault::{Action, Cut, Fault, LinkSel, Trigger};
use crate::model::{
    ClientSpec, Expectation, LatencyRange, LinkLatency, LockServiceSpec, NemesisSpec, NetworkSpec,
    Range64, ResourceSpec, Scenario,
};

/// Write `scenario` as scenario TOML (UTF-8 text, `\n` line ends) that `parse` reads back to an
/// equal `Scenario`.
///
/// Defaults are written out. Each client gets its own `[[clients]]` table with an explicit
/// `name` (no `count`); each fault its own `[[faults]]` table, `kind` first; a `[lock_service]`
/// holds `kind`, `max_ttl_ms` and the knobs its design resolved, in the order the design read them, and each
/// `[[clients]]` the workload's fields and then its design's client knobs.
pub fn to_toml(scenario: &Scenario) -> String {
    let mut doc = Doc::default();
    top_level(&mut doc, scenario);
    network(&mut doc, &scenario.network);
    lock_service(&mut doc, &scenario.lock_service);
    resource(&mut doc, &scenario.resource);
    for client in &scenario.clients {
        self::client(&mut doc, client);
    }
    for fault in &scenario.faults {
        self::fault(&mut doc, fault);
    }
    if let Some(nemesis) = &scenario.nemesis {
        self::nemesis(&mut doc, nemesis);
    }
    expect(&mut doc, &scenario.expect);
    doc.0
}

/// The document being written. Values are passed in as TOML text (see the value functions
/// below), so a key's line is always `key = value`.
#[derive(Default)]
struct Doc(String);

impl Doc {
    /// `[name]`, or `[[name]]` for an array of tables, after a blank line.
    fn table(&mut self, header: &str) {
        self.0.push('\n');
        self.0.push_str(header);
        self.0.push('\n');
    }

    fn key(&mut self, key: &str, value: impl AsRef<str>) {
        self.0.push_str(key);
        self.0.push_str(" = ");
        self.0.push_str(value.as_ref());
        self.0.push('\n');
    }
}

// Values as TOML text.

fn string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// Floats print as the shortest text that reads back to the same `f64` (`0.25`, `1.0`).
fn float(x: f64) -> String {
    toml::Value::Float(x).to_string()
}

fn int(n: impl Into<i128>) -> String {
    n.into().to_string()
}

fn boolean(b: bool) -> String {
    b.to_string()
}

/// The file name of a unit enum variant (`"stale-write-accepted"`), from its serde name, so that the
/// names cannot drift from what the parser reads.
fn name<T: Serialize>(value: &T) -> String {
    match toml::Value::try_from(value) {
        Ok(v @ toml::Value::String(_)) => v.to_string(),
        other => panic!("a unit enum variant serializes as a string, found {other:?}"),
    }
}

fn names<T: Serialize>(values: &[T]) -> String {
    array(values.iter().map(name))
}

fn strings(values: &[String]) -> String {
    array(values.iter().map(|s| string(s)))
}

fn array(items: impl Iterator<Item = String>) -> String {
    format!("[{}]", items.collect::<Vec<_>>().join(", "))
}

fn range(r: LatencyRange) -> String {
    format!("[{}, {}]", r.min_ms, r.max_ms)
}

fn signed_range(r: Range64) -> String {
    format!("[{}, {}]", r.min, r.max)
}

// Sections, in file order.

fn top_level(doc: &mut Doc, s: &Scenario) {
    doc.key("name", string(&s.name));
    if !s.description.is_empty() {
        doc.key("description", multi_line(&s.description));
    }
    doc.key(
        "seeds",
        string(&format!("{}..{}", s.seeds.start, s.seeds.end)),
    );
    doc.key("duration_ms", int(s.duration_ms));
    doc.key("max_records", int(s.max_records));
}

/// A string as a multi-line TOML string, its text starting on the line after the opening quotes.
/// The parser trims the description, so the newline added here to make `toml` choose the
/// multi-line form does not come back.
fn multi_line(text: &str) -> String {
    string(&format!("{text}\n"))
}

fn network(doc: &mut Doc, n: &NetworkSpec) {
    doc.table("[network]");
    doc.key("latency_ms", range(n.latency_ms));
    doc.key("loss", float(n.loss));
    doc.key("duplicate", float(n.duplicate));
    doc.key("reorder_window_ms", int(n.reorder_window_ms));
    let mut rest = n.links.as_slice();
    while let Some(first) = rest.first() {
        // A two-way link resolves to its reverse direction then its own, with one latency:
        // such a pair is written back as one link, anything else one direction at a time.
        match rest.get(1).filter(|second| reverses(first, second)) {
            Some(second) => {
                link(doc, second, false);
                rest = &rest[2..];
            }
            None => {
                link(doc, first, true);
                rest = &rest[1..];
            }
        }
    }
}

fn reverses(a: &LinkLatency, b: &LinkLatency) -> bool {
    a.from == b.to && a.to == b.from && a.latency_ms == b.latency_ms
}

fn link(doc: &mut Doc, l: &LinkLatency, one_way: bool) {
    doc.table("[[network.links]]");
    doc.key("from", string(&l.from));
    doc.key("to", string(&l.to));
    doc.key("latency_ms", range(l.latency_ms));
    if one_way {
        doc.key("one_way", boolean(true));
    }
}

/// `kind`, `max_ttl_ms`, then the design's knobs as it resolved them (every default written
/// out; the design reads them back to the same values).
fn lock_service(doc: &mut Doc, ls: &LockServiceSpec) {
    doc.table("[lock_service]");
    doc.key("kind", string(&ls.kind));
    doc.key("max_ttl_ms", int(ls.max_ttl_ms));
    knobs(doc, &ls.knobs);
}

/// A design's resolved knobs, in the order the design read them.
fn knobs(doc: &mut Doc, knobs: &toml::Table) {
    for (knob, value) in knobs {
        doc.key(&bare_or_quoted(knob), value.to_string());
    }
}

/// A key as TOML writes it: bare if it can be, quoted otherwise (a design's knob names are its
/// own).
pub(crate) fn bare_or_quoted(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    if bare {
        key.to_owned()
    } else {
        string(key)
    }
}

fn resource(doc: &mut Doc, r: &ResourceSpec) {
    doc.table("[resource]");
    doc.key("mode", string(&r.mode));
    doc.key("keys", strings(&r.keys));
    knobs(doc, &r.knobs);
}

fn client(doc: &mut Doc, c: &ClientSpec) {
    doc.table("[[clients]]");
    doc.key("name", string(&c.name));
    doc.key("lock", string(&c.lock));
    doc.key("key", string(&c.key));
    doc.key("ttl_ms", int(c.ttl_ms));
    doc.key("work_ms", int(c.work_ms));
    // No `renew_ms` means the client never renews; there is no value that says so.
    if let Some(renew) = c.renew_ms {
        doc.key("renew_ms", int(renew));
    }
    doc.key("cycles", int(c.cycles));
    doc.key("start_ms", int(c.start_ms));
    doc.key("timeout_ms", int(c.timeout_ms));
    doc.key("backoff_ms", range(c.backoff_ms));
    doc.key("safety_margin_ms", int(c.safety_margin_ms));
    doc.key("validity_check", boolean(c.validity_check));
    if !c.cleanup.is_none() {
        doc.key("cleanup", string(c.cleanup.as_str()));
    }
    if !c.work_clock.is_true_time() {
        doc.key("work_clock", string(c.work_clock.as_str()));
    }
    knobs(doc, &c.knobs);
}

/// One `[[faults]]` table: `kind`, what the action needs, the trigger, `duration_ms`.
fn fault(doc: &mut Doc, f: &Fault) {
    doc.table("[[faults]]");
    doc.key("kind", string(f.action.kind().as_str()));
    action(doc, &f.action);
    // A hold picks its message by count and takes no trigger (its resolved one is unused).
    if !matches!(f.action, Action::Hold { .. }) {
        trigger(doc, f.trigger);
    }
    if let Some(duration) = f.duration_ms {
        doc.key("duration_ms", int(duration));
    }
}

fn action(doc: &mut Doc, a: &Action) {
    match a {
        Action::Pause { node }
        | Action::Crash { node }
        | Action::Restart { node }
        | Action::StallRenewals { node }
        | Action::Deregister { node }
        | Action::Partition {
            cut: Cut::Isolate(node),
        } => doc.key("node", string(node)),
        Action::Hold {
            from,
            message,
            nth,
            copy_ms,
        } => {
            doc.key("from", string(from));
            doc.key("message", name(message));
            doc.key("nth", int(*nth));
            if let Some(copy_ms) = copy_ms {
                doc.key("copy_ms", int(*copy_ms));
            }
        }
        Action::HoldAll { message, from } => {
            doc.key("message", name(message));
            if let Some(from) = from {
                doc.key("from", string(from));
            }
        }
        Action::Latency { link, latency_ms } => {
            link_sel(doc, link);
            doc.key("latency_ms", range(*latency_ms));
        }
        Action::Loss { link, rate } | Action::Duplicate { link, rate } => {
            link_sel(doc, link);
            doc.key("rate", float(*rate));
        }
        Action::Reorder { window_ms } | Action::FinalHeal { window_ms } => {
            doc.key("window_ms", int(*window_ms));
        }
        Action::Partition {
            cut: Cut::Groups(groups),
        } => doc.key("groups", array(groups.iter().map(|g| strings(g)))),
        Action::Partition {
            cut: Cut::OneWay { from, to },
        } => {
            doc.key("from", string(from));
            doc.key("to", string(to));
        }
        Action::Heal => {}
        Action::ClockJump { node, delta_ms } => {
            doc.key("node", string(node));
            doc.key("delta_ms", int(*delta_ms));
        }
        Action::ClockSkew { node, offset_ms } => {
            doc.key("node", string(node));
            doc.key("offset_ms", int(*offset_ms));
        }
        Action::ClockDrift { node, ppm } => {
            doc.key("node", string(node));
            doc.key("ppm", int(*ppm));
        }
        Action::ClockStrobe {
            node,
            offset_ms,
            period_ms,
        } => {
            doc.key("node", string(node));
            doc.key("offset_ms", int(*offset_ms));
            doc.key("period_ms", int(*period_ms));
        }
        Action::Restore {
            node,
            snapshot_at_ms,
        } => {
            doc.key("node", string(node));
            doc.key("snapshot_at_ms", int(*snapshot_at_ms));
        }
    }
}

/// `from` and `to` of a network fault; a side left out matches any node.
fn link_sel(doc: &mut Doc, link: &LinkSel) {
    if let Some(from) = &link.from {
        doc.key("from", string(from));
    }
    if let Some(to) = &link.to {
        doc.key("to", string(to));
    }
}

fn trigger(doc: &mut Doc, t: Trigger) {
    match t {
        Trigger::At { at_ms } => doc.key("at_ms", int(at_ms)),
        Trigger::After {
            event,
            nth,
            count_from_ms,
        } => {
            doc.key("after", name(&event));
            doc.key("nth", int(nth));
            count_from(doc, count_from_ms);
        }
        Trigger::Before {
            event,
            nth,
            count_from_ms,
        } => {
            doc.key("before", name(&event));
            doc.key("nth", int(nth));
            count_from(doc, count_from_ms);
        }
    }
}

/// `count_from_ms`, left out when events are counted from the start (its default).
fn count_from(doc: &mut Doc, count_from_ms: u64) {
    if count_from_ms > 0 {
        doc.key("count_from_ms", int(count_from_ms));
    }
}

fn nemesis(doc: &mut Doc, n: &NemesisSpec) {
    doc.table("[nemesis]");
    doc.key("kinds", array(n.kinds.iter().map(|k| string(k.as_str()))));
    doc.key("swarm", boolean(n.swarm));
    if !n.placement.is_uniform() {
        doc.key("placement", name(&n.placement));
    }
    doc.key("targets", strings(&n.targets));
    doc.key("start_ms", int(n.start_ms));
    doc.key("interval_ms", range(n.interval_ms));
    doc.key("duration_ms", range(n.duration_ms));
    doc.key("heal_at_ms", int(n.heal_at_ms));
    doc.key("recovery_periods", int(n.recovery_periods));
    doc.key("clock_jump_ms", signed_range(n.clock_jump_ms));
    doc.key("clock_offset_ms", signed_range(n.clock_offset_ms));
    doc.key("drift_ppm", signed_range(n.drift_ppm));
    doc.key("rate", array(n.rate.iter().map(|r| float(*r))));
    doc.key("latency_ms", range(n.latency_ms));
    doc.key("reorder_window_ms", range(n.reorder_window_ms));
}

fn expect(doc: &mut Doc, e: &Expectation) {
    doc.table("[expect]");
    doc.key("verdict", name(&e.verdict));
    // Empty lists are the defaults; leaving them out keeps a valid expectation one line.
    if !e.violations.is_empty() {
        doc.key("violations", names(&e.violations));
    }
    if !e.absent.is_empty() {
        doc.key("absent", names(&e.absent));
    }
}
