//! One state of the explored configuration: every node, client and the resource, the
//! messages in flight, the history so far, and the fault budgets spent; the choices it
//! offers ([`World::choices`]) and what each does ([`World::apply`]).
//!
//! The fault model is asynchronous. Any message in flight may be delivered next, lost or
//! duplicated; any agent's next timer may fire next, which moves that agent's own clock to
//! the timer's deadline and no one else's (so every lease may expire at any moment, and every
//! client may be paused at any point between its steps); a node may crash, losing what it had
//! not synced, and restart from its disk. The budgets bound the faults.

use std::collections::BTreeMap;
use std::hash::Hasher;
use std::sync::Arc;

use fencesim_design::{
    ClientInfo, ClientProtocol, Design, DesignMessage, Disk, Explorable, HeldLease, LockNode,
    MessageKind, Origin, WriteDecision,
};
use fencesim_driver::beliefs::{belief_end, belief_start, Beliefs};
use fencesim_driver::ledger::Ledger;
use fencesim_driver::resource::mutation_event;
use fencesim_history::{Entry, Event, EventKind, Name, Phase as FaultPhase};
use fencesim_scenario::{Scenario, RESOURCE_NODE};

use crate::bounds::Bounds;
use crate::client::{ClientAgent, Phase};
use crate::fingerprint::Fingerprint;
use crate::kept::Kept;
use crate::net::{message_id, Agent, Body, InFlight, Message};
use crate::node::{Deadlined, NodeAgent};
use crate::record::Records;
use crate::resource::{Due, DynResource, ResourceAgent};
use crate::trace::CheckTrace;

/// The node's and the client's message types of design `D`.
pub type NodeMsg<D> = <<D as Design>::Node as LockNode>::Msg;
/// The client protocol's message type of design `D`.
pub type ClientMsg<D> = <<D as Design>::Client as ClientProtocol>::Msg;

/// What every state of one search shares: the scenario and its names.
pub struct Setup {
    /// The parsed scenario.
    pub scenario: Scenario,
    /// The lock service's node names.
    pub node_names: Vec<String>,
    /// Each client's name, lock and key, as its records name them.
    pub client_names: Vec<(Name, Name, Name)>,
    /// The service-side safepoints the design declared.
    pub service_safepoints: Vec<&'static str>,
    /// The bounds.
    pub bounds: Bounds,
}

impl Setup {
    /// The scenario's bounded configuration.
    pub fn new(scenario: Scenario, bounds: Bounds) -> Self {
        let node_names = scenario.lock_service.nodes();
        let client_names = scenario
            .clients
            .iter()
            .map(|c| {
                (
                    c.name.as_str().into(),
                    c.lock.as_str().into(),
                    c.key.as_str().into(),
                )
            })
            .collect();
        let service_safepoints = scenario
            .lock_service
            .shape
            .safepoints
            .iter()
            .filter(|s| s.side == fencesim_design::SafepointSide::Service)
            .map(|s| s.name)
            .collect();
        Setup {
            scenario,
            node_names,
            client_names,
            service_safepoints,
            bounds,
        }
    }

    /// The agent named `name`.
    pub fn agent(&self, name: &str) -> Option<Agent> {
        if name == RESOURCE_NODE {
            return Some(Agent::Resource);
        }
        if let Some(i) = self.node_names.iter().position(|n| n == name) {
            return Some(Agent::Node(i));
        }
        let clients = &self.scenario.clients;
        clients
            .iter()
            .position(|c| c.name == name)
            .map(Agent::Client)
    }

    /// The name of `agent`.
    pub fn name_of(&self, agent: Agent) -> &str {
        match agent {
            Agent::Node(i) => &self.node_names[i],
            Agent::Client(i) => &self.scenario.clients[i].name,
            Agent::Resource => RESOURCE_NODE,
        }
    }
}

/// What the agents of one state share: the network, the history, the run's record of leases
/// and the clients' views of theirs.
#[derive(Clone)]
pub struct Shared<NM, CM> {
    /// The messages in flight, in the order sent.
    pub net: InFlight<NM, CM>,
    /// The history so far.
    pub records: Records,
    /// The run's record of leases, log entries and leadership (shared between states until
    /// one changes it: most steps do not).
    pub ledger: Kept<Ledger>,
    /// The clients' views of their leases (shared in the same way).
    pub beliefs: Kept<Beliefs>,
    /// What the checks can tell apart in the history so far.
    pub trace: CheckTrace,
    /// Whether this step recorded something a token check judges.
    pub checks_due: bool,
}

impl<NM, CM> Shared<NM, CM> {
    fn new(trace: CheckTrace) -> Self {
        Shared {
            net: InFlight::default(),
            records: Records::default(),
            ledger: Kept::default(),
            beliefs: Kept::default(),
            trace,
            checks_due: false,
        }
    }

    /// Record `entry` at `clock_ns` of the recording agent's clock (`op_key` on an invoke).
    pub fn record(&mut self, entry: impl Into<Entry>, clock_ns: u64, op_key: Option<u64>) {
        let entry = entry.into();
        self.checks_due |= self.trace.take(&entry);
        self.records.push(entry, clock_ns, op_key);
    }

    /// The leases node `from` honoured are `to`'s, which honours `kept`; the rest end as
    /// `revoke`s by node `by` (the simulator's world does the same).
    pub fn hand_over_leases(
        &mut self,
        [from, to, by]: [&str; 3],
        kept: &[HeldLease],
        reason: &str,
        clock_ns: u64,
    ) {
        for (lock, holder, token) in self.ledger.get_mut().hand_over(from, to, kept) {
            let event = Event {
                node: by.into(),
                lock: Some(lock.into()),
                holder: Some(holder.into()),
                token: Some(token),
                detail: Some(reason.to_owned()),
                ..Event::new(EventKind::Revoke)
            };
            self.record(event, clock_ns, None);
        }
    }

    /// A fault of the search's (`crash`, `restart`) on `target`, as the nemesis records one.
    pub fn nemesis(&mut self, kind: EventKind, target: &str, clock_ns: u64) {
        let event = Event {
            node: "nemesis".into(),
            phase: Some(FaultPhase::Start),
            target: Some(target.into()),
            detail: Some(format!("{} {target} (verify)", kind_word(kind))),
            ..Event::new(kind)
        };
        self.record(event, clock_ns, None);
    }

    /// `client` believes it holds `lock` with `token` until `until_ms` of its clock (which
    /// reads `mono_ms`), unless that is already past.
    pub fn believe(
        &mut self,
        client: &str,
        lock: &str,
        token: u64,
        until_ms: Option<i64>,
        mono_ms: i64,
        clock_ns: u64,
    ) {
        if until_ms.is_some_and(|u| mono_ms >= u) {
            self.end_belief(client, "reply arrived after the lease's validity", clock_ns);
            return;
        }
        self.beliefs
            .get_mut()
            .believe(client, lock, token, until_ms);
        self.record(belief_start(client, lock, token, until_ms), clock_ns, None);
    }

    /// `client` stops believing it holds its lease, for `reason`.
    pub fn end_belief(&mut self, client: &str, reason: &str, clock_ns: u64) {
        if let Some((lock, token)) = self.beliefs.get_mut().end(client) {
            self.record(belief_end(client, &lock, token, reason), clock_ns, None);
        }
    }
}

/// A message sent during a step, as the simulator's `hold` faults name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    /// Its id (a duplicate's copy keeps it).
    pub id: u64,
    /// Its sender.
    pub from: Agent,
    /// Its receiver.
    pub to: Agent,
    /// Its kind.
    pub kind: MessageKind,
}

/// The kind of a message carrying `body`, as the simulator's transport names it: a delete
/// travels as a write.
fn message_kind<NM: DesignMessage, CM: DesignMessage>(body: &Body<NM, CM>) -> MessageKind {
    match body {
        Body::FromNode(m) => m.kind(),
        Body::FromClient(m) => m.kind(),
        Body::Read { .. } => MessageKind::Read,
        Body::Write { .. } | Body::Delete { .. } => MessageKind::Write,
        Body::ReadReply(_) => MessageKind::ReadReply,
        Body::WriteReply(_) => MessageKind::WriteReply,
    }
}

fn kind_word(kind: EventKind) -> &'static str {
    match kind {
        EventKind::Crash => "crash",
        EventKind::Restart => "restart",
        _ => "fault",
    }
}

/// What a design's search needs besides its states: the setup, the design's settings, how
/// to copy and fingerprint its states (if it opts in), and how to make the resource.
pub struct Model<D: Design> {
    /// The scenario and its names.
    pub setup: Setup,
    /// The nodes' configuration.
    pub config: <D::Node as LockNode>::Config,
    /// The design's settings.
    pub settings: D::Settings,
    /// Each client's settings.
    pub client_settings: Vec<D::ClientSettings>,
    /// How to copy and fingerprint its states, if it opts in.
    pub explorable: Option<Explorable<D::Node, D::Client>>,
    /// Makes an empty resource.
    pub make_resource: Arc<dyn Fn() -> Box<dyn DynResource> + Send + Sync>,
}

/// The fault budgets spent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Spent {
    /// Messages lost.
    pub drops: u32,
    /// Messages duplicated.
    pub duplicates: u32,
    /// Node crashes.
    pub crashes: u32,
    /// Client calls given up at their timeout.
    pub timeouts: u32,
}

/// One thing that can happen next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Deliver the message in flight at this index.
    Deliver(u32),
    /// Lose it.
    Drop(u32),
    /// Duplicate it (both copies stay in flight).
    Duplicate(u32),
    /// The agent's next timer fires.
    Fire(Agent),
    /// Lock-service node `i` crashes.
    Crash(u32),
    /// Crashed node `i` restarts from its disk.
    Restart(u32),
}

/// One state.
///
/// Its agents are shared with the other states that hold them alike (copy on write): a step
/// changes one agent, so a state's successors share the rest with it and with each other,
/// and the search keeps one copy of each agent state it met ([`World::intern`]), as SPIN's
/// collapse compression keeps each process's local state once (Holzmann 1997). A design
/// explored by re-execution is never copied, so its agents are never shared.
pub struct World<D: Design> {
    /// The lock service's nodes.
    pub nodes: Vec<Arc<NodeAgent<D::Node>>>,
    /// The clients.
    pub clients: Vec<Arc<ClientAgent<D::Client>>>,
    /// The resource.
    pub resource: Arc<ResourceAgent>,
    /// The network, the history and the rest the agents share.
    pub shared: Shared<NodeMsg<D>, ClientMsg<D>>,
    /// The fault budgets spent.
    pub spent: Spent,
    /// Each node's, then each client's, then the resource's fingerprint as last computed,
    /// until a step touches it: a step changes one agent (the one a message is delivered to,
    /// whose timer fires, that crashes or restarts), and rehashing the others was most of the
    /// search's time.
    hashed: Vec<Option<u64>>,
}

impl<D: Design> World<D> {
    /// The initial state: every node started, every client begun.
    pub fn new(model: &Model<D>) -> Self {
        let setup = &model.setup;
        let opaque = setup.scenario.lock_service.shape.tokens == fencesim_design::TokenKind::Opaque;
        let mut shared = Shared::new(CheckTrace::new(opaque));
        let mut nodes: Vec<NodeAgent<D::Node>> = (0..setup.node_names.len())
            .map(|_| NodeAgent {
                driver: None,
                disk: Disk::new(false),
                clock_ns: 0,
                incarnation: 0,
                sent: 0,
            })
            .collect();
        for (i, node) in nodes.iter_mut().enumerate() {
            node.start(i, setup, &model.config, &mut shared);
        }
        let mut clients: Vec<ClientAgent<D::Client>> = setup
            .scenario
            .clients
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let info = ClientInfo {
                    name: spec.name.clone(),
                    lock: spec.lock.clone(),
                    ttl_ms: spec.ttl_ms,
                    safety_margin_ms: spec.safety_margin_ms,
                    timeout_ms: spec.timeout_ms,
                    incarnation: 1,
                    service_nodes: setup.node_names.clone(),
                };
                let protocol = D::client(&model.settings, &model.client_settings[i], info);
                ClientAgent::new(i, setup, protocol)
            })
            .collect();
        for (i, client) in clients.iter_mut().enumerate() {
            client.run(i, setup, &mut shared);
        }
        for node in &mut nodes {
            node.resolve_deadlines(); // as `apply` leaves each node it touches
        }
        World {
            hashed: vec![None; nodes.len() + clients.len() + 1],
            resource: Arc::new(ResourceAgent::new(Arc::clone(&model.make_resource))),
            shared,
            spent: Spent::default(),
            nodes: nodes.into_iter().map(Arc::new).collect(),
            clients: clients.into_iter().map(Arc::new).collect(),
        }
    }

    /// A copy, if the design opts in; `None` otherwise (the caller re-executes instead).
    /// Its agents are shared with the copy until a step changes one ([`World::apply`]).
    pub fn copy(&self, model: &Model<D>) -> Option<Self> {
        model.explorable.as_ref()?;
        Some(World {
            nodes: self.nodes.clone(),
            clients: self.clients.clone(),
            resource: Arc::clone(&self.resource),
            shared: self.shared.clone(),
            spent: self.spent,
            hashed: self.hashed.clone(),
        })
    }

    /// The state's fingerprint, if the design opts in: every agent, the messages in flight
    /// (as a multiset: the order they were sent in decides nothing), the budgets spent and
    /// what the checks have seen.
    pub fn fingerprint(&mut self, model: &Model<D>) -> Option<u64> {
        let e = model.explorable.as_ref()?;
        let mut h = Fingerprint::default();
        for (i, node) in self.nodes.iter().enumerate() {
            let of = || {
                let mut h = Fingerprint::default();
                node.hash_with(e.hash_node, &mut h);
                h.finish()
            };
            h.write_u64(*self.hashed[i].get_or_insert_with(of));
            debug_assert_eq!(self.hashed[i], Some(of()), "node {i} changed unseen");
        }
        let n = self.nodes.len();
        for (i, client) in self.clients.iter().enumerate() {
            let of = || {
                let mut h = Fingerprint::default();
                client.hash_with(e.hash_client, &mut h);
                h.finish()
            };
            h.write_u64(*self.hashed[n + i].get_or_insert_with(of));
            debug_assert_eq!(self.hashed[n + i], Some(of()), "client {i} changed unseen");
        }
        let resource = &self.resource;
        let of = || {
            let mut h = Fingerprint::default();
            resource.hash_into(&mut h);
            h.finish()
        };
        let r = self.hashed.len() - 1;
        h.write_u64(*self.hashed[r].get_or_insert_with(of));
        debug_assert_eq!(self.hashed[r], Some(of()), "the resource changed unseen");
        let mut flight: Vec<u64> = self.shared.net.fingerprints().collect();
        flight.sort_unstable();
        for m in flight {
            h.write_u64(m);
        }
        h.write_u64(self.shared.ledger.fingerprint());
        h.write_u64(self.shared.beliefs.fingerprint());
        let spent = self.spent;
        for n in [spent.drops, spent.duplicates, spent.crashes, spent.timeouts] {
            h.write_u32(n);
        }
        self.shared.trace.hash_into(&mut h);
        Some(h.finish())
    }

    /// Whether every client has ended and nothing is left to apply: nothing more can happen
    /// that a check judges.
    pub fn finished(&self) -> bool {
        self.clients.iter().all(|c| matches!(c.phase, Phase::Done)) && self.resource.due.is_empty()
    }

    /// Everything that can happen next, in a fixed order.
    pub fn choices(&mut self, bounds: &Bounds) -> Vec<Choice> {
        let mut choices = Vec::new();
        if self.finished() {
            return choices;
        }
        for (i, m) in self.shared.net.iter().enumerate() {
            let i = i as u32;
            let deliverable = match m.to {
                Agent::Client(c) => self.clients[c].receiving(),
                _ => true,
            };
            if deliverable {
                choices.push(Choice::Deliver(i));
            }
            if self.spent.drops < bounds.drops {
                choices.push(Choice::Drop(i));
            }
            if self.spent.duplicates < bounds.duplicates {
                choices.push(Choice::Duplicate(i));
            }
        }
        for (i, node) in self.nodes.iter().enumerate() {
            if node.earliest_timer().is_some() {
                choices.push(Choice::Fire(Agent::Node(i)));
            }
        }
        for (i, client) in self.clients.iter().enumerate() {
            let gives_up = matches!(client.phase, Phase::Call { .. });
            if client.next_timer().is_some() && (!gives_up || self.spent.timeouts < bounds.timeouts)
            {
                choices.push(Choice::Fire(Agent::Client(i)));
            }
        }
        if !self.resource.due.is_empty() {
            choices.push(Choice::Fire(Agent::Resource));
        }
        for (i, node) in self.nodes.iter().enumerate() {
            let i = i as u32;
            match node.driver {
                Some(_) if self.spent.crashes < bounds.crashes => choices.push(Choice::Crash(i)),
                None => choices.push(Choice::Restart(i)),
                Some(_) => {}
            }
        }
        choices
    }

    /// What `choice` does, in words, for a counterexample's steps (before it is applied).
    pub fn describe(&mut self, setup: &Setup, choice: Choice) -> String {
        let message = |i: u32| {
            let m = &self.shared.net[i as usize];
            let what = match m.reply_to {
                Some(_) => format!("the reply to {}", m.kind),
                None => m.kind.to_owned(),
            };
            let what = if m.kind == "reply" {
                "a reply".to_owned()
            } else {
                what
            };
            format!(
                "{what} from {} to {}",
                setup.name_of(m.from),
                setup.name_of(m.to)
            )
        };
        match choice {
            Choice::Deliver(i) => format!("deliver {}", message(i)),
            Choice::Drop(i) => format!("lose {}", message(i)),
            Choice::Duplicate(i) => format!("duplicate {}", message(i)),
            Choice::Fire(Agent::Client(c)) => {
                let client = &self.clients[c];
                let name = setup.name_of(Agent::Client(c));
                let at_ms = client.next_timer().unwrap_or(0) / 1_000_000;
                let what = match &client.phase {
                    Phase::Sleep { retry: true, .. } => "backoff ends".to_owned(),
                    Phase::Sleep { retry: false, .. } => "work ends".to_owned(),
                    Phase::Call { tpl, .. } => format!("{} times out", tpl.f.as_str()),
                    _ => "protocol's timer fires".to_owned(),
                };
                format!("{name}'s {what} (its clock: {at_ms} ms)")
            }
            Choice::Fire(agent) => {
                let at_ns = match agent {
                    Agent::Node(n) => self.nodes[n].earliest_timer().unwrap_or(0),
                    _ => self.resource.due.first().map_or(0, |d| d.at_ns),
                };
                let name = setup.name_of(agent);
                format!("{name}'s timer fires (its clock: {} ms)", at_ns / 1_000_000)
            }
            Choice::Crash(n) => format!("{} crashes", setup.node_names[n as usize]),
            Choice::Restart(n) => format!("{} restarts", setup.node_names[n as usize]),
        }
    }

    /// Take `choice`.
    pub fn apply(&mut self, model: &Model<D>, choice: Choice) {
        let touched = self.take(model, choice);
        self.settle(touched);
    }

    /// Take `choice`, answering what it did for a counterexample's timing
    /// ([`crate::concretise`]): the messages it sent, including those forgotten at once as
    /// dead (the simulator sends them too, and a `hold` counts them).
    pub fn apply_observed(&mut self, model: &Model<D>, choice: Choice) -> Vec<Sent> {
        let before: Vec<u64> = self.shared.net.iter().map(|m| m.id).collect();
        let touched = self.take(model, choice);
        let sent = self.sent_since(&before);
        self.settle(touched);
        sent
    }

    /// The messages in flight whose ids are not in `before`, in the order sent.
    pub fn sent_since(&self, before: &[u64]) -> Vec<Sent> {
        self.shared
            .net
            .iter()
            .filter(|m| !before.contains(&m.id))
            .map(|m| Sent {
                id: m.id,
                from: m.from,
                to: m.to,
                kind: message_kind(&m.body),
            })
            .collect()
    }

    /// `agent`'s clock (ns) and each of its timers that may fire next.
    pub fn deadlines(&mut self, agent: Agent) -> (u64, Vec<Deadlined>) {
        match agent {
            Agent::Node(n) => (self.nodes[n].clock_ns, self.nodes[n].deadlines()),
            Agent::Client(c) => (self.clients[c].clock_ns, self.clients[c].deadlines()),
            Agent::Resource => {
                // A write decided later is its request's, applied after a delay in true time.
                let due = self.resource.due.iter().map(|d| Deadlined {
                    key: d.from.1,
                    at_ns: d.at_ns,
                    on_clock: false,
                    may_repeat: false,
                });
                (self.resource.clock_ns, due.collect())
            }
        }
    }

    /// Every agent: nodes, clients, the resource.
    pub fn agents(&self) -> Vec<Agent> {
        let nodes = (0..self.nodes.len()).map(Agent::Node);
        let clients = (0..self.clients.len()).map(Agent::Client);
        nodes.chain(clients).chain([Agent::Resource]).collect()
    }

    /// Apply `choice` without forgetting dead messages; the agent it touched.
    fn take(&mut self, model: &Model<D>, choice: Choice) -> Option<Agent> {
        let setup = &model.setup;
        self.shared.checks_due = false;
        let touched = match choice {
            Choice::Deliver(i) => Some(self.shared.net[i as usize].to),
            Choice::Drop(_) | Choice::Duplicate(_) => None,
            Choice::Fire(agent) => Some(agent),
            Choice::Crash(n) | Choice::Restart(n) => Some(Agent::Node(n as usize)),
        };
        match touched {
            Some(Agent::Node(n)) => self.hashed[n] = None,
            Some(Agent::Client(c)) => self.hashed[self.nodes.len() + c] = None,
            Some(Agent::Resource) => *self.hashed.last_mut().expect("the resource's") = None,
            None => {}
        }
        self.own(model, touched);
        match choice {
            Choice::Deliver(i) => {
                let m = self.shared.net.remove(i as usize);
                self.deliver(model, m);
            }
            Choice::Drop(i) => {
                self.shared.net.remove(i as usize);
                self.spent.drops += 1;
            }
            Choice::Duplicate(i) => {
                self.shared.net.duplicate(i as usize);
                self.spent.duplicates += 1;
            }
            Choice::Fire(Agent::Node(n)) => {
                owned(&mut self.nodes[n]).fire(n, setup, &mut self.shared)
            }
            Choice::Fire(Agent::Client(c)) => {
                if matches!(self.clients[c].phase, Phase::Call { .. }) {
                    self.spent.timeouts += 1;
                }
                owned(&mut self.clients[c]).fire(c, setup, &mut self.shared)
            }
            Choice::Fire(Agent::Resource) => self.resource_fire(setup),
            Choice::Crash(n) => {
                let n = n as usize;
                owned(&mut self.nodes[n]).crash(n, setup, &mut self.shared);
                // What was in flight to it is lost with it when delivered.
                self.spent.crashes += 1;
            }
            Choice::Restart(n) => {
                let n = n as usize;
                let clock_ns = self.nodes[n].clock_ns;
                self.shared
                    .nemesis(EventKind::Restart, &setup.node_names[n], clock_ns);
                owned(&mut self.nodes[n]).start(n, setup, &model.config, &mut self.shared);
            }
        }
        touched
    }

    /// Make `agent` this state's own to change: a copy if another state shares it.
    fn own(&mut self, model: &Model<D>, agent: Option<Agent>) {
        let explorable = || {
            model
                .explorable
                .as_ref()
                .expect("only a design explored by state hashing has its states copied")
        };
        match agent {
            Some(Agent::Node(n)) => {
                own(&mut self.nodes[n], |a| {
                    a.clone_with(explorable().clone_node)
                });
            }
            Some(Agent::Client(c)) => {
                own(&mut self.clients[c], |a| {
                    a.clone_with(explorable().clone_client)
                });
            }
            Some(Agent::Resource) => {
                own(&mut self.resource, ResourceAgent::copy);
            }
            None => {}
        }
    }

    /// Let this state share each of its agents with the earlier states that hold it alike,
    /// by fingerprint: `table` keeps one copy of each agent state met (its fingerprints
    /// taken by [`World::fingerprint`], which must have run).
    pub fn intern(&mut self, table: &mut Interned<D>) {
        let n = self.nodes.len();
        for (i, node) in self.nodes.iter_mut().enumerate() {
            let fp = self.hashed[i].expect("interned after its fingerprint");
            share(node, fp, &mut table.nodes);
        }
        for (i, client) in self.clients.iter_mut().enumerate() {
            let fp = self.hashed[n + i].expect("interned after its fingerprint");
            share(client, fp, &mut table.clients);
        }
    }

    /// After a step that touched `touched`: forget the dead messages, and resolve a touched
    /// node's clock deadlines now, so that its fingerprint is taken of the form `choices`
    /// leaves it in.
    fn settle(&mut self, touched: Option<Agent>) {
        self.forget_dead_messages();
        if let Some(Agent::Node(n)) = touched {
            owned(&mut self.nodes[n]).resolve_deadlines();
        }
    }

    /// Take out of the network the messages that can no longer change anything: replies to
    /// requests their client no longer waits for, and reads whose reply would be such a
    /// reply (a read changes nothing at the resource and records nothing there). Delivering,
    /// losing or duplicating one is a step that changes no agent and records nothing, so
    /// every schedule that takes it has a twin without it (docs/verify.md, reductions).
    fn forget_dead_messages(&mut self) {
        let clients = &self.clients;
        self.shared.net.retain(|m| match (m.to, m.from, &m.body) {
            (Agent::Client(c), _, _) => clients[c].may_use(m.reply_to),
            (Agent::Resource, Agent::Client(c), Body::Read { .. }) => {
                clients[c].may_use(Some(m.id))
            }
            _ => true,
        });
    }

    fn deliver(&mut self, model: &Model<D>, m: Message<NodeMsg<D>, ClientMsg<D>>) {
        let setup = &model.setup;
        match m.to {
            Agent::Node(n) => {
                if self.nodes[n].driver.is_none() {
                    return; // crashed: lost
                }
                let origin = Origin::new(setup.name_of(m.from), m.id, m.op);
                let Some(msg) = m.body.design::<NodeMsg<D>>() else {
                    return;
                };
                owned(&mut self.nodes[n]).deliver(n, setup, origin, msg, &mut self.shared);
            }
            Agent::Client(c) => owned(&mut self.clients[c]).deliver(c, setup, m, &mut self.shared),
            Agent::Resource => self.resource_deliver(setup, m),
        }
    }

    fn resource_deliver(&mut self, setup: &Setup, m: Message<NodeMsg<D>, ClientMsg<D>>) {
        let outcome = match &m.body {
            Body::Read { key } => {
                let value = self.resource.read(key);
                self.resource_reply(&m, Body::ReadReply(value));
                return;
            }
            Body::Write { key, token, value } => {
                match owned(&mut self.resource).write(key, *token, value) {
                    WriteDecision::Now(outcome) => outcome,
                    WriteDecision::Later { after_ms } => {
                        let at_ns = self.resource.clock_ns + after_ms * 1_000_000;
                        owned(&mut self.resource).due.push(Due {
                            at_ns,
                            write: (key.clone(), *token, value.clone()),
                            from: (m.from, m.id, m.op),
                        });
                        return;
                    }
                }
            }
            Body::Delete { key, token } => owned(&mut self.resource).delete(key, *token),
            _ => return,
        };
        let (key, token, delete) = match &m.body {
            Body::Write { key, token, .. } => (key.clone(), Some(*token), false),
            Body::Delete { key, token } => (key.clone(), *token, true),
            _ => return,
        };
        let holder = setup.name_of(m.from);
        let (event, _) = mutation_event(&key, holder, token, m.op, delete, &outcome);
        self.shared.record(event, self.resource.clock_ns, None);
        self.resource_reply(&m, Body::WriteReply(outcome));
    }

    fn resource_reply(
        &mut self,
        to: &Message<NodeMsg<D>, ClientMsg<D>>,
        body: Body<NodeMsg<D>, ClientMsg<D>>,
    ) {
        let id = message_id(Agent::Resource, self.resource.sent);
        owned(&mut self.resource).sent += 1;
        self.shared.net.push(Message {
            id,
            from: Agent::Resource,
            to: to.from,
            reply_to: Some(to.id),
            op: to.op,
            body,
            kind: "reply",
        });
    }

    fn resource_fire(&mut self, setup: &Setup) {
        if self.resource.due.is_empty() {
            return;
        }
        // The earliest, the first decided among equals.
        let (i, _) = self
            .resource
            .due
            .iter()
            .enumerate()
            .min_by_key(|(i, d)| (d.at_ns, *i))
            .expect("not empty");
        let resource = owned(&mut self.resource);
        let due = resource.due.remove(i);
        resource.clock_ns = resource.clock_ns.max(due.at_ns);
        let (key, token, value) = &due.write;
        let outcome = resource.apply_due(key, *token, value);
        let (from, id, op) = due.from;
        let holder = setup.name_of(from);
        let (event, _) = mutation_event(key, holder, Some(*token), op, false, &outcome);
        self.shared.record(event, self.resource.clock_ns, None);
        let request = Message {
            id,
            from,
            to: Agent::Resource,
            reply_to: None,
            op,
            body: Body::Read { key: String::new() },
            kind: "write",
        };
        self.resource_reply(&request, Body::WriteReply(outcome));
    }
}

/// The agents' states the search has met, one copy of each, by fingerprint
/// ([`World::intern`]).
pub struct Interned<D: Design> {
    nodes: BTreeMap<u64, Arc<NodeAgent<D::Node>>>,
    clients: BTreeMap<u64, Arc<ClientAgent<D::Client>>>,
}

impl<D: Design> Default for Interned<D> {
    fn default() -> Self {
        Interned {
            nodes: BTreeMap::new(),
            clients: BTreeMap::new(),
        }
    }
}

/// `agent` replaced by the copy in `table` with fingerprint `fp`, or kept there as that copy.
fn share<T>(agent: &mut Arc<T>, fp: u64, table: &mut BTreeMap<u64, Arc<T>>) {
    match table.get(&fp) {
        Some(kept) => {
            if !Arc::ptr_eq(kept, agent) {
                *agent = Arc::clone(kept);
            }
        }
        None => {
            table.insert(fp, Arc::clone(agent));
        }
    }
}

/// `agent`, copied by `copy` first if another state shares it (copy on write).
fn own<T>(agent: &mut Arc<T>, copy: impl FnOnce(&T) -> T) {
    if Arc::get_mut(agent).is_none() {
        *agent = Arc::new(copy(agent));
    }
}

/// `agent`, which the step has made this state's own ([`World::own`]).
fn owned<T>(agent: &mut Arc<T>) -> &mut T {
    Arc::get_mut(agent).expect("a step changes only the agent it made its own")
}
