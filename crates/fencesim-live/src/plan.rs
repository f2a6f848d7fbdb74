//! What a scenario asks for, in live terms: which of its parts have a live form, and a clear
//! refusal for each one that has none (never a silent drop).

use fencesim_scenario::{
    Action, Cut, Fault, FaultKind, LinkSel, NodeEvent, NodeRole, Scenario, Trigger, RESOURCE_NODE,
};

use crate::form::{LiveForms, Needs};
use crate::wire::Armed;

/// What a live fault acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Client `0` of `scenario.clients` (its process).
    Client(usize),
    /// Server node `0` of the design's own servers (a Redis node, an etcd member).
    Server(usize),
    /// Whichever etcd member leads when the fault strikes (the cluster is asked then).
    Leader,
    /// The PostgreSQL server's whole process group (the lease table's and the resource's
    /// server).
    Postgres,
    /// The links between clients and servers (fencesim's proxy on each).
    Network,
}

/// What a live fault does.
#[derive(Clone, Debug, PartialEq)]
pub enum LiveAction {
    /// SIGSTOP, then SIGCONT `duration_ms` later.
    Pause {
        /// How long, ms.
        duration_ms: u64,
    },
    /// SIGKILL of a server node; started again `restart_after_ms` later if set.
    Crash {
        /// Down time, ms, or down until a `restart` fault.
        restart_after_ms: Option<u64>,
    },
    /// Start a crashed server node again.
    Restart,
    /// Step a Redis node's wall clock (libfaketime).
    ClockJump {
        /// By how much, ms (either sign).
        delta_ms: i64,
    },
    /// Stop the directions of the links that `cut` blocks, for `duration_ms` or until a heal.
    Partition {
        /// Which links.
        cut: Cut,
        /// How long, ms.
        duration_ms: Option<u64>,
    },
    /// End every partition.
    Heal,
    /// Delay what crosses the selected links by `delay_ms` for the window.
    Latency {
        /// Which links (by sender and receiver).
        link: LinkSel,
        /// The delay, ms (the range's upper end).
        delay_ms: u64,
        /// How long, ms (for good without).
        duration_ms: Option<u64>,
    },
    /// Reset the selected links' connections with probability `rate` per chunk.
    Loss {
        /// Which links.
        link: LinkSel,
        /// Per chunk.
        rate: f64,
        /// How long, ms.
        duration_ms: Option<u64>,
    },
}

impl LiveAction {
    /// The scenario's fault kind this action is the live form of (its name in messages is
    /// the kind's, [`FaultKind::as_str`]).
    pub fn kind(&self) -> FaultKind {
        match self {
            LiveAction::Pause { .. } => FaultKind::Pause,
            LiveAction::Crash { .. } => FaultKind::Crash,
            LiveAction::Restart => FaultKind::Restart,
            LiveAction::ClockJump { .. } => FaultKind::ClockJump,
            LiveAction::Partition { .. } => FaultKind::Partition,
            LiveAction::Heal => FaultKind::Heal,
            LiveAction::Latency { .. } => FaultKind::Latency,
            LiveAction::Loss { .. } => FaultKind::Loss,
        }
    }
}

/// When a live fault fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultAt {
    /// At this many ms after the trial's start.
    Ms(u64),
    /// When a client reaches this safepoint (it reports it over the control channel).
    Safepoint(Armed),
}

/// One scripted fault with its live meaning.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveFault {
    /// Whom.
    pub target: Target,
    /// What.
    pub action: LiveAction,
    /// When.
    pub at: FaultAt,
}

/// A scenario accepted for live mode.
#[derive(Clone, Debug)]
pub struct LivePlan {
    /// The scenario, as resolved.
    pub scenario: Scenario,
    /// What the lock service's live form needs started.
    pub needs: Needs,
    /// How its tokens are ordered (the history's header says it).
    pub token_order: fencesim_history::TokenOrder,
    /// Its faults, in their live form.
    pub faults: Vec<LiveFault>,
    /// Server nodes whose clocks the faults step (Redis nodes, under a clock library).
    pub faked_clocks: Vec<usize>,
    /// What differs from the simulation and is worth saying (one line each).
    pub notes: Vec<String>,
}

impl LivePlan {
    /// The safepoints armed for client `index`.
    pub fn armed(&self, index: usize) -> Vec<Armed> {
        self.faults
            .iter()
            .filter(|f| f.target == Target::Client(index))
            .filter_map(|f| match f.at {
                FaultAt::Safepoint(a) => Some(a),
                FaultAt::Ms(_) => None,
            })
            .collect()
    }

    /// The name of `target` as the scenario has it.
    pub fn name(&self, target: Target) -> String {
        match target {
            Target::Client(i) => self.scenario.clients[i].name.clone(),
            Target::Server(i) => self.server_nodes()[i].clone(),
            Target::Leader => "leader".to_owned(),
            Target::Postgres => "postgresql".to_owned(),
            Target::Network => "network".to_owned(),
        }
    }

    /// Whether a fault acts on the network (the trial then puts a proxy on every link).
    pub fn uses_network(&self) -> bool {
        self.faults.iter().any(|f| f.target == Target::Network)
    }

    /// Whether a partition cuts one etcd member off from another: the members then reach
    /// each other through peer proxies ([`crate::proxy::Proxy::for_peers`]).
    pub fn cuts_between_members(&self) -> bool {
        let members = self.etcd_nodes();
        self.faults.iter().any(|f| match &f.action {
            LiveAction::Partition { cut, .. } => members
                .iter()
                .any(|a| members.iter().any(|b| a != b && cut.blocks(a, b))),
            _ => false,
        })
    }

    /// The servers a client talks to, by the names faults give them: the design's lock
    /// service node on PostgreSQL (its shape's one node: `lease-service` for the single
    /// service) or its Redis nodes, and `resource`.
    pub fn servers(&self) -> Vec<String> {
        let mut servers: Vec<String> = match self.server_nodes() {
            [] => self.scenario.lock_service.nodes(),
            nodes => nodes.to_vec(),
        };
        servers.push(RESOURCE_NODE.to_owned());
        servers
    }

    /// The node name of a lock service that keeps its leases on PostgreSQL (the design's
    /// one node), if it does.
    pub fn postgres_service_node(&self) -> Option<String> {
        match (
            &self.needs.postgres_schema,
            self.scenario.lock_service.nodes().as_slice(),
        ) {
            (Some(_), [node]) => Some(node.clone()),
            _ => None,
        }
    }

    /// The Redis nodes' names (none if the design does not run on Redis).
    pub fn redis_nodes(&self) -> &[String] {
        self.needs.redis.as_ref().map_or(&[], |r| &r.nodes)
    }

    /// The etcd members' names (none if the design does not run on etcd).
    pub fn etcd_nodes(&self) -> &[String] {
        self.needs.etcd.as_ref().map_or(&[], |e| &e.nodes)
    }

    /// The names of the design's own server processes: its Redis nodes or its etcd members.
    pub fn server_nodes(&self) -> &[String] {
        match self.redis_nodes() {
            [] => self.etcd_nodes(),
            redis => redis,
        }
    }
}

/// Accept `scenario` for live mode, or say (one line, naming the table and the field) what in
/// it has no live form.
///
/// # Errors
/// The first part refused.
pub fn plan(scenario: &Scenario, forms: &LiveForms) -> Result<LivePlan, String> {
    let service = &scenario.lock_service;
    let lock = forms.lock_service(&service.kind, &service.knobs)?;
    let (needs, token_order, unobserved) = (lock.needs(), lock.token_order(), lock.unobserved());
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
            "[network] loss, duplicate, reorder_window_ms and links have no live form \
             (scripted partition, latency and loss faults do)"
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
    let mut plan = LivePlan {
        scenario: scenario.clone(),
        needs,
        token_order,
        faults: Vec::new(),
        faked_clocks: Vec::new(),
        notes: vec![format!(
            "[network] latency_ms {}..{} is the simulation's; live links are loopback TCP",
            net.latency_ms.min_ms, net.latency_ms.max_ms
        )],
    };
    for (n, fault) in scenario.faults.iter().enumerate() {
        let live = live_fault(&plan, n, fault)?;
        if let (Target::Server(i), LiveAction::ClockJump { .. }) = (live.target, &live.action) {
            plan.faked_clocks.push(i);
        }
        plan.faults.push(live);
    }
    plan.notes
        .extend(unobserved.into_iter().map(|u| format!("not observed: {u}")));
    plan.faked_clocks.sort_unstable();
    plan.faked_clocks.dedup();
    Ok(plan)
}

/// A fault's live form, or why it has none.
fn live_fault(plan: &LivePlan, n: usize, fault: &Fault) -> Result<LiveFault, String> {
    let at = format!("[[faults]] #{}", n + 1);
    let kind = fault.action.kind();
    let refused = || format!("{at}: kind = \"{kind}\" {}", why_not(kind));
    if let Some(action) = network_action(&fault.action, fault.duration_ms) {
        let at_point = at_ms(fault.trigger)
            .ok_or_else(|| format!("{at}: a network fault fires at at_ms in live mode"))?;
        if let LiveAction::Partition { cut, .. } = &action {
            refuse_unproxied_cut(cut).map_err(|why| format!("{at}: {why}"))?;
        }
        return Ok(LiveFault {
            target: Target::Network,
            action,
            at: at_point,
        });
    }
    let (node, action) = match &fault.action {
        Action::Pause { node } => {
            let duration_ms = fault
                .duration_ms
                .ok_or_else(|| format!("{at}: a live pause needs duration_ms"))?;
            (node, LiveAction::Pause { duration_ms })
        }
        Action::Crash { node } => (
            node,
            LiveAction::Crash {
                restart_after_ms: fault.duration_ms,
            },
        ),
        Action::Restart { node } => (node, LiveAction::Restart),
        Action::ClockJump { node, delta_ms } => (
            node,
            LiveAction::ClockJump {
                delta_ms: *delta_ms,
            },
        ),
        _ => return Err(refused()),
    };
    let target = target(plan, node).ok_or_else(|| {
        format!("{at}: node {node:?} is neither a client nor a server of this live run")
    })?;
    let on_etcd = match target {
        Target::Server(i) => plan.etcd_nodes().get(i).is_some(),
        Target::Leader => true,
        _ => false,
    } && plan.redis_nodes().is_empty();
    if on_etcd && matches!(action, LiveAction::ClockJump { .. }) {
        return Err(format!(
            "{at}: kind = \"clock-jump\" of etcd member {node:?} has no live form: etcd is a Go \
             binary, which reads the clock without libc, so fencesim's clock shim cannot move \
             it (pauses, crashes and restarts of members do)"
        ));
    }
    match (target, &action) {
        (_, LiveAction::Pause { .. }) | (Target::Server(_) | Target::Leader, _) => {}
        (Target::Network, _) => {}
        (Target::Postgres, LiveAction::Crash { .. } | LiveAction::Restart) => {}
        (Target::Postgres, _) => {
            return Err(format!(
                "{at}: kind = \"{kind}\" of {node:?} (PostgreSQL) has no live form (its clock is \
                 the machine's); pauses, crashes and restarts of its process group do"
            ))
        }
        (Target::Client(_), _) => {
            return Err(format!(
                "{at}: kind = \"{kind}\" of a client has no live form yet; pauses of client \
                 processes do"
            ))
        }
    }
    if let Trigger::Before {
        event: NodeEvent::Design(point),
        ..
    }
    | Trigger::After {
        event: NodeEvent::Design(point),
        ..
    } = fault.trigger
    {
        return Err(format!(
            "{at}: a trigger on {point:?}, a safepoint of the design's own code, has no live \
             form: live clients and servers do not run a design's client protocol or nodes, so \
             nothing reports it (design safepoints are for simulation; trigger on the \
             harness's events, or at at_ms)"
        ));
    }
    let at_point = match (fault.trigger, target) {
        (Trigger::At { at_ms }, _) => FaultAt::Ms(at_ms),
        (
            Trigger::Before {
                event,
                nth,
                count_from_ms,
            }
            | Trigger::After {
                event,
                nth,
                count_from_ms,
            },
            Target::Client(_),
        ) => {
            let after = matches!(fault.trigger, Trigger::After { .. });
            let (befores, afters) = NodeEvent::safepoints(NodeRole::Client);
            if !(if after { afters } else { befores }).contains(&event) {
                let event = serde_json::to_value(event)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                return Err(format!(
                    "{at}: a trigger on {event:?} is another node's event; a live client \
                     reports only its own (before acquire, read, renew, write, release; after \
                     grant, read, renew, write, release)"
                ));
            }
            FaultAt::Safepoint(Armed {
                after,
                event,
                nth,
                count_from_ms,
            })
        }
        (_, _) => {
            return Err(format!(
                "{at}: a server's fault fires at at_ms in live mode (a trigger on its own \
                 events would need the server to report them)"
            ))
        }
    };
    Ok(LiveFault {
        target,
        action,
        at: at_point,
    })
}

/// Refuse a partition that names `leader`: live mode's proxies are set up before the trial,
/// for fixed nodes (between etcd members too: [`LivePlan::cuts_between_members`]).
fn refuse_unproxied_cut(cut: &Cut) -> Result<(), String> {
    let names: Vec<&String> = match cut {
        Cut::Isolate(node) => vec![node],
        Cut::Groups(groups) => groups.iter().flatten().collect(),
        Cut::OneWay { from, to } => vec![from, to],
    };
    if names.iter().any(|n| *n == "leader") {
        return Err(
            "a partition of `leader` has no live form: the proxies are set up before the trial, \
             for fixed nodes; name the member"
                .to_owned(),
        );
    }
    Ok(())
}

/// A network fault's live form, if `action` is one.
fn network_action(action: &Action, duration_ms: Option<u64>) -> Option<LiveAction> {
    Some(match action {
        Action::Partition { cut } => LiveAction::Partition {
            cut: cut.clone(),
            duration_ms,
        },
        Action::Heal | Action::FinalHeal { .. } => LiveAction::Heal,
        Action::Latency { link, latency_ms } => LiveAction::Latency {
            link: link.clone(),
            delay_ms: latency_ms.max_ms,
            duration_ms,
        },
        Action::Loss { link, rate } => LiveAction::Loss {
            link: link.clone(),
            rate: *rate,
            duration_ms,
        },
        _ => return None,
    })
}

fn at_ms(trigger: Trigger) -> Option<FaultAt> {
    match trigger {
        Trigger::At { at_ms } => Some(FaultAt::Ms(at_ms)),
        _ => None,
    }
}

fn target(plan: &LivePlan, node: &str) -> Option<Target> {
    if let Some(i) = plan.scenario.clients.iter().position(|c| c.name == node) {
        return Some(Target::Client(i));
    }
    if let Some(i) = plan.server_nodes().iter().position(|r| r == node) {
        return Some(Target::Server(i));
    }
    if node == "leader" && !plan.etcd_nodes().is_empty() {
        return Some(Target::Leader);
    }
    let on_postgres =
        node == RESOURCE_NODE || plan.postgres_service_node().is_some_and(|n| n == node);
    on_postgres.then_some(Target::Postgres)
}

fn why_not(kind: FaultKind) -> &'static str {
    match kind {
        FaultKind::Hold | FaultKind::HoldAll | FaultKind::Duplicate | FaultKind::Reorder => {
            "has no live form: holding, duplicating or reordering a named message has no \
             meaning on a byte stream"
        }
        FaultKind::ClockSkew | FaultKind::ClockDrift | FaultKind::ClockStrobe => {
            "has no live form yet: the one live clock fault is clock-jump on a Redis node, \
             through fencesim's clock shim (an etcd member, a Go binary, reads the clock \
             without libc, and no clock fault reaches it)"
        }
        // Pauses, crashes, restarts and clock jumps have live forms, and so do partitions,
        // heals, latency and loss of the network ([`network_action`]) where their fields
        // allow one.
        FaultKind::StallRenewals
        | FaultKind::Deregister
        | FaultKind::Restore
        | FaultKind::FinalHeal
        | FaultKind::Pause
        | FaultKind::Crash
        | FaultKind::Restart
        | FaultKind::ClockJump
        | FaultKind::Partition
        | FaultKind::Heal
        | FaultKind::Latency
        | FaultKind::Loss => {
            "has no live form yet (live mode runs pause, crash, restart and clock-jump)"
        }
    }
}
