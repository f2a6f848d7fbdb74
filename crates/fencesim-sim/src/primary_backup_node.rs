//! A node of the primary-backup lock service (`lease-1`, `lease-2`; case K06): the sans-IO
//! [`Replica`] behind a mailbox. The shell only keeps time, moves shipments and
//! acknowledgements, and records what the replica decided: a `leader` event at a promotion,
//! and a `revoke` for every lease the new primary's table lacks. Both nodes keep their state in
//! memory only: a restarted node rejoins as an empty backup that knows no primary.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use fencesim_design::ServiceEvent;
use fencesim_history::{Event, EventKind};
use fencesim_lease::primary_backup::{
    PrimaryBackupConfig, Received, Replica, Replication, Role, Timer,
};
use fencesim_lease::{
    expire_due, held_leases, serve, LeaseConfig, LeaseMessage, LeaseService, ReleaseMode,
};
use fencesim_scenario::{self as scenario, NodeEvent};

use crate::design_node::{follow_lease, history_event, safepoint_after};
use crate::message::Message;
use crate::nemesis::{Nemesis, When};
use crate::recorder::true_ns;
use crate::transport::Envelope;
use crate::world::World;

/// Node `index` (0: `lease-1`, the first primary); madsim runs it again on every restart.
pub(crate) async fn run(world: Arc<World>, index: usize) {
    let name = format!("lease-{}", index + 1);
    let incarnation = world.start(&name);
    let spec = world.scenario.lock_service.clone();
    let pb = spec
        .primary_backup
        .expect("a primary-backup node runs only in a primary-backup scenario");
    let config = PrimaryBackupConfig {
        replication: match pb.replication {
            scenario::Replication::Async => Replication::Async,
            scenario::Replication::Sync => Replication::Sync,
        },
        replication_lag_ms: pb.replication_lag_ms,
        failover_after_ms: pb.failover_after_ms,
    };
    let lease = LeaseConfig {
        max_ttl_ms: spec.max_ttl_ms,
    };
    let now = world.expiry_now_ms(&name);
    let replica = match (index, incarnation) {
        (0, 1) => {
            world.set_leader(1, &name);
            Replica::primary(&name, lease, config, now)
        }
        (_, 1) => Replica::backup(&name, lease, config, (1, Some("lease-1")), now),
        _ => Replica::backup(&name, lease, config, (0, None), now),
    };
    let mut node = Node {
        peer: format!("lease-{}", 2 - index),
        name,
        world,
        replica,
        deferred: VecDeque::new(),
    };
    node.serve().await;
}

struct Node {
    world: Arc<World>,
    name: String,
    peer: String,
    replica: Replica,
    /// Messages that arrived while a sync primary waited for an acknowledgement.
    deferred: VecDeque<Box<Envelope>>,
}

impl Node {
    /// The replica's clock (the lease service's expiry clock), local ms.
    fn now_ms(&self) -> i64 {
        self.world.expiry_now_ms(&self.name)
    }

    async fn serve(&mut self) {
        let inbox = self.world.inbox(&self.name);
        loop {
            if self.replica.role() == Role::Primary
                && reap(&self.world, &self.name, self.replica.service()).await
            {
                self.replicate_change().await;
            }
            match self.replica.on_timer(self.now_ms()) {
                Some(Timer::Ship(shipment)) => {
                    let body = Message::Replicate(shipment);
                    self.world
                        .net
                        .send(&self.name, &self.peer, None, None, body);
                }
                Some(Timer::Promoted { epoch }) => self.promoted(epoch),
                None => {}
            }
            let next = match self.deferred.pop_front() {
                Some(env) => Some(env),
                None => {
                    let wait = Duration::from_nanos(self.next_timer_ns().saturating_sub(true_ns()));
                    match crate::timer::timeout(wait, inbox.recv()).await {
                        Ok(Ok(env)) => Some(env),
                        Ok(Err(_closed)) => return,
                        Err(_timer) => None,
                    }
                }
            };
            if let Some(env) = next {
                self.on_message(*env).await;
            }
        }
    }

    /// The next replica timer or lease expiry, in true ns.
    fn next_timer_ns(&mut self) -> u64 {
        let clock = self.world.expiry_clock(&self.name);
        let at = |ms: i64| true_ns() + clock.true_ns_until(true_ns(), ms);
        let timer = at(self.replica.next_timer_ms());
        let expiry = match self.replica.role() {
            Role::Primary => self.replica.service().next_expiry(),
            Role::Backup => None,
        };
        expiry.map_or(timer, |e| timer.min(at(e)))
    }

    async fn on_message(&mut self, env: Envelope) {
        match &env.body {
            Message::Replicate(shipment) => {
                let now = self.now_ms();
                match self.replica.on_shipment(&env.src, shipment.clone(), now) {
                    Received::Ignored => {}
                    Received::Adopted { stepped_down } => {
                        if stepped_down {
                            // This node stops honouring the leases it granted; those the new
                            // primary's table has are the new primary's from now on.
                            let kept = held_leases(self.replica.service().table());
                            self.world.hand_over_leases(
                                [&self.name, &env.src, &self.name],
                                &kept,
                                "lost: the primary that granted it stepped down",
                            );
                        }
                        let ack = Message::ReplicateAck;
                        self.world
                            .net
                            .send(&self.name, &env.src, Some(env.id), None, ack);
                    }
                }
            }
            Message::ReplicateAck => self.replica.on_ack(),
            body => match request_event(body) {
                Some(event) if self.replica.role() == Role::Primary => {
                    self.serve_request(&env, event).await
                }
                Some(_) => {
                    let leader = self.replica.leader().map(str::to_owned);
                    let reply = Message::lease(LeaseMessage::Redirect { leader });
                    self.world
                        .net
                        .send(&self.name, &env.src, Some(env.id), env.op, reply);
                }
                // A clock signal: timers are recomputed on the next turn anyway.
                None => {}
            },
        }
    }

    async fn serve_request(&mut self, env: &Envelope, event: NodeEvent) {
        Nemesis::safepoint(&self.world, &self.name, When::Before, event).await;
        reap(&self.world, &self.name, self.replica.service()).await;
        let (reply, decided) = handle(&self.world, &self.name, self.replica.service(), env);
        let acknowledged = decided.is_none() || self.replicate_change().await;
        if let Some(reply) = reply.filter(|_| acknowledged) {
            self.world
                .net
                .send(&self.name, &env.src, Some(env.id), env.op, reply);
        }
        if let Some(event) = decided {
            Nemesis::safepoint(&self.world, &self.name, When::After, event).await;
        }
    }

    /// The replica became primary of `epoch`: record it, and the leases it does not have.
    fn promoted(&mut self, epoch: u64) {
        self.world.set_leader(epoch, &self.name);
        self.world.event(Event {
            node: self.name.as_str().into(),
            detail: Some(format!("epoch {epoch}: promoted")),
            ..Event::new(EventKind::Leader)
        });
        let kept = held_leases(self.replica.service().table());
        self.world.hand_over_leases(
            [&self.peer, &self.name, &self.name],
            &kept,
            "lost in failover: not replicated to the backup",
        );
    }

    /// After a change on the primary: with synchronous replication, ship now and wait for the
    /// acknowledgement (up to `failover_after_ms`). False only if it timed out.
    async fn replicate_change(&mut self) -> bool {
        if !self.replica.waits_for_ack() {
            return true;
        }
        let shipment = self.replica.ship(self.now_ms());
        let id = self.world.net.send(
            &self.name,
            &self.peer,
            None,
            None,
            Message::Replicate(shipment),
        );
        let inbox = self.world.inbox(&self.name);
        let failover_after_ms = self
            .world
            .scenario
            .lock_service
            .primary_backup
            .map_or(0, |p| p.failover_after_ms);
        let deadline_ns = true_ns() + failover_after_ms * 1_000_000;
        loop {
            let wait = Duration::from_nanos(deadline_ns.saturating_sub(true_ns()));
            match crate::timer::timeout(wait, inbox.recv()).await {
                Ok(Ok(env)) if env.reply_to == Some(id) => {
                    self.replica.on_ack();
                    return true;
                }
                Ok(Ok(env)) => self.deferred.push_back(env),
                _ => {
                    self.replica.on_ack_timeout();
                    return false;
                }
            }
        }
    }
}

/// The safepoint event of a client request to a lease service (`None`: not a request).
fn request_event(body: &Message) -> Option<NodeEvent> {
    match body.as_lease()? {
        LeaseMessage::Acquire { .. } => Some(NodeEvent::Acquire),
        LeaseMessage::Renew { .. } => Some(NodeEvent::Renew),
        LeaseMessage::Release { .. } => Some(NodeEvent::Release),
        _ => None,
    }
}

/// Expire every lease of node `node` that is due, recording each, with an `after = "expire"`
/// safepoint each. True if any expired (the table changed).
async fn reap(world: &Arc<World>, node: &str, service: &mut LeaseService) -> bool {
    let expired = expire_due(service, world.expiry_now_ms(node));
    if expired.is_empty() {
        return false;
    }
    let count = expired.len();
    for event in expired {
        record(world, node, event);
    }
    for _ in 0..count {
        Nemesis::safepoint(world, node, When::After, NodeEvent::Expire).await;
    }
    true
}

/// Serve one request at node `node`; returns the reply and the event it caused, if any.
fn handle(
    world: &World,
    node: &str,
    service: &mut LeaseService,
    env: &Envelope,
) -> (Option<Message>, Option<NodeEvent>) {
    let release = match world.scenario.lock_service.release {
        scenario::ReleaseMode::CompareAndDelete => ReleaseMode::CompareAndDelete,
        scenario::ReleaseMode::Unconditional => ReleaseMode::Unconditional,
    };
    let now = world.expiry_now_ms(node);
    let served = env
        .body
        .as_lease()
        .and_then(|request| serve(service, request, &env.src, env.op, now, release));
    let Some(served) = served else {
        return (None, None);
    };
    let decided = served.event.and_then(|event| {
        let kind = safepoint_after(event.kind);
        record(world, node, event);
        kind
    });
    (Some(Message::lease(served.reply)), decided)
}

/// Record `event` of node `node` (a primary's leases are followed, as the single service's).
fn record(world: &World, node: &str, event: ServiceEvent) {
    follow_lease(world, node, &event);
    world.event(history_event(node, event));
}
