//! What a scenario asks for, in live terms: which of its parts have a live form, and a clear
//! refusal for each one that has none (never a silent drop).

use fencesim_scenario::{Action, Fault, NodeEvent, Scenario, Trigger};

use crate::form::LiveForms;
use crate::wire::Armed;

/// When a client's pause begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PauseAt {
    /// At this many ms after the trial's start.
    Ms(u64),
    /// When the client reaches this safepoint (it reports it over the control channel).
    Safepoint(Armed),
}

/// One pause fault: SIGSTOP of a client's process, SIGCONT `duration_ms` later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientPause {
    /// Index of the client in `scenario.clients`.
    pub client: usize,
    /// When.
    pub at: PauseAt,
    /// For how long, ms.
    pub duration_ms: u64,
}

/// A scenario accepted for live mode.
#[derive(Clone, Debug)]
pub struct LivePlan {
    /// The scenario, as resolved.
    pub scenario: Scenario,
    /// Its faults, as pauses of client processes.
    pub pauses: Vec<ClientPause>,
    /// What differs from the simulation and is worth saying (one line each).
    pub notes: Vec<String>,
}

impl LivePlan {
    /// The safepoints armed for client `index`.
    pub fn armed(&self, index: usize) -> Vec<Armed> {
        self.pauses
            .iter()
            .filter(|p| p.client == index)
            .filter_map(|p| match p.at {
                PauseAt::Safepoint(a) => Some(a),
                PauseAt::Ms(_) => None,
            })
            .collect()
    }
}

/// Accept `scenario` for live mode, or say (one line, naming the table and the field) what in
/// it has no live form.
///
/// # Errors
/// The first part refused.
pub fn plan(scenario: &Scenario, forms: &LiveForms) -> Result<LivePlan, String> {
    let service = &scenario.lock_service;
    forms.lock_service(&service.kind, &service.knobs)?;
    forms.resource(&scenario.resource.mode, &scenario.resource.knobs)?;
    if scenario.nemesis.is_some() {
        return Err(
            "[nemesis] (a random fault schedule) has no live form yet: live mode runs \
                    the scripted [[faults]] only"
                .to_owned(),
        );
    }
    let net = &scenario.network;
    if net.loss > 0.0 || net.duplicate > 0.0 || net.reorder_window_ms > 0 || !net.links.is_empty() {
        return Err(
            "[network] loss, duplicate, reorder_window_ms and links need fencesim's TCP \
                    proxy, which live mode does not have yet"
                .to_owned(),
        );
    }
    for client in &scenario.clients {
        forms.client(&service.kind, &client.name, &client.knobs)?;
        if !client.cleanup.is_none() {
            return Err(format!(
                "[[clients]] {}: cleanup = {:?} has no live form yet",
                client.name,
                client.cleanup.as_str()
            ));
        }
    }
    let mut pauses = Vec::new();
    for (n, fault) in scenario.faults.iter().enumerate() {
        pauses.push(pause(scenario, n, fault)?);
    }
    let notes = vec![format!(
        "[network] latency_ms {}..{} is the simulation's; live links are loopback TCP",
        net.latency_ms.min_ms, net.latency_ms.max_ms
    )];
    Ok(LivePlan {
        scenario: scenario.clone(),
        pauses,
        notes,
    })
}

/// The one fault kind live mode runs so far, a client's pause, or why another has no live form.
fn pause(scenario: &Scenario, n: usize, fault: &Fault) -> Result<ClientPause, String> {
    let at = format!("[[faults]] #{}", n + 1);
    let kind = serde_json::to_value(&fault.action)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_owned))
        .unwrap_or_default();
    let Action::Pause { node } = &fault.action else {
        return Err(format!("{at}: kind = {kind:?} {}", why_not(&kind)));
    };
    let Some(client) = scenario.clients.iter().position(|c| &c.name == node) else {
        return Err(format!(
            "{at}: pausing {node:?} (a server: PostgreSQL's process group) is not in live mode \
             yet; pauses of client processes are"
        ));
    };
    let duration_ms = fault
        .duration_ms
        .ok_or_else(|| format!("{at}: a live pause needs duration_ms"))?;
    let at_point = match fault.trigger {
        Trigger::At { at_ms } => PauseAt::Ms(at_ms),
        Trigger::Before { event, nth } | Trigger::After { event, nth } => {
            if !CLIENT_EVENTS.contains(&event) {
                return Err(format!(
                    "{at}: a trigger on {event:?} is another node's event; a live client \
                     reports only its own (acquire, renew, release, read, write)"
                ));
            }
            let after = matches!(fault.trigger, Trigger::After { .. });
            PauseAt::Safepoint(Armed { after, event, nth })
        }
    };
    Ok(ClientPause {
        client,
        at: at_point,
        duration_ms,
    })
}

/// The events a live client reports safepoints for.
const CLIENT_EVENTS: [NodeEvent; 5] = [
    NodeEvent::Acquire,
    NodeEvent::Renew,
    NodeEvent::Release,
    NodeEvent::Read,
    NodeEvent::Write,
];

fn why_not(kind: &str) -> &'static str {
    match kind {
        "hold" | "hold-all" | "duplicate" | "reorder" => {
            "has no live form: holding, duplicating or reordering a named message has no \
             meaning on a byte stream"
        }
        "latency" | "loss" | "partition" | "heal" | "final-heal" => {
            "needs fencesim's TCP proxy on each link, which live mode does not have yet"
        }
        "clock-jump" | "clock-skew" | "clock-drift" | "clock-strobe" => {
            "has no live form on PostgreSQL (its clock is the machine's); clock faults are \
             planned for Redis nodes under libfaketime"
        }
        _ => "has no live form yet (live mode runs pauses of client processes)",
    }
}
