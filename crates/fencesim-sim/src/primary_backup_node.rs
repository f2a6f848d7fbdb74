//! A node of the primary-backup lock service (`lease-1`, `lease-2`; case K06): the sans-IO
//! [`LeaseService`] on the primary, a copy of its table on the backup.
//!
//! The primary ships its whole table to the backup every `replication_lag_ms` (which doubles as
//! its heartbeat) or, with `replication = "sync"`, after every change and before it answers the
//! client. The backup answers clients with a redirect to the primary. When it has heard nothing
//! from a primary for `failover_after_ms` it promotes itself, as Redis Sentinel does, with
//! whatever it had received, in a new epoch: every lease it has is extended by its TTL (as etcd
//! does at a leader change) and every lease it lacks is recorded as `revoke`. A primary that
//! hears from a primary of a higher epoch (or of the same epoch and a lower name) steps down and
//! takes its table. Both nodes keep their state in memory only: a restarted node rejoins as an
//! empty backup.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use fencesim_history::{Event, EventKind};
use fencesim_lease::{LeaseConfig, LeaseService};
use fencesim_scenario::{PrimaryBackupSpec, Replication};

use crate::lease_node::{handle, reap, request_event};
use crate::message::Message;
use crate::nemesis::{Nemesis, When};
use crate::recorder::true_ns;
use crate::transport::Envelope;
use crate::world::World;

/// Whether this node serves or follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Primary,
    Backup,
}

struct Node {
    world: Arc<World>,
    name: String,
    peer: String,
    spec: PrimaryBackupSpec,
    role: Role,
    epoch: u64,
    /// The primary's live table, or the backup's copy of it.
    service: LeaseService,
    /// The primary this node last heard from, for redirects.
    primary: Option<String>,
    /// Backup: when it last heard from a primary, true ns.
    last_heard_ns: u64,
    /// Primary: when it ships its table next, true ns.
    next_ship_ns: u64,
    /// Messages that arrived while a sync primary waited for an acknowledgement.
    deferred: VecDeque<Envelope>,
    /// Sync primary: whether the backup acknowledged lately. After an acknowledgement times
    /// out the primary goes on without waiting until the backup acknowledges again (MySQL
    /// semi-synchronous replication's fallback), so a dead backup does not stall every grant.
    backup_in_sync: bool,
}

/// Node `index` (0: `lease-1`, the first primary); madsim runs it again on every restart.
pub(crate) async fn run(world: Arc<World>, index: usize) {
    let name = format!("lease-{}", index + 1);
    let incarnation = world.start(&name);
    let spec = world
        .scenario
        .lock_service
        .primary_backup
        .expect("a primary-backup node runs only in a primary-backup scenario");
    let first_primary = index == 0 && incarnation == 1;
    let config = LeaseConfig {
        max_ttl_ms: world.scenario.lock_service.max_ttl_ms,
    };
    let mut node = Node {
        peer: format!("lease-{}", 2 - index),
        spec,
        role: if first_primary {
            Role::Primary
        } else {
            Role::Backup
        },
        epoch: u64::from(first_primary),
        service: LeaseService::new(config),
        // At the very start everyone knows lease-1 is the primary; after a restart, nobody.
        primary: (incarnation == 1).then(|| "lease-1".to_owned()),
        last_heard_ns: true_ns(),
        next_ship_ns: true_ns(),
        deferred: VecDeque::new(),
        backup_in_sync: true,
        world,
        name,
    };
    if first_primary {
        node.world.set_leader(1, &node.name);
    }
    node.serve().await;
}

impl Node {
    async fn serve(&mut self) {
        let inbox = self.world.inbox(&self.name);
        loop {
            if self.role == Role::Primary {
                if reap(&self.world, &self.name, &mut self.service).await {
                    self.replicate_if_sync().await;
                }
                if true_ns() >= self.next_ship_ns {
                    self.ship(None);
                }
            } else if true_ns() >= self.last_heard_ns + self.spec.failover_after_ms * 1_000_000 {
                self.promote();
                continue;
            }
            let next = match self.deferred.pop_front() {
                Some(env) => Some(env),
                None => {
                    let wait = Duration::from_nanos(self.next_timer_ns().saturating_sub(true_ns()));
                    match madsim::time::timeout(wait, inbox.recv()).await {
                        Ok(Ok(env)) => Some(env),
                        Ok(Err(_closed)) => return,
                        Err(_timer) => None,
                    }
                }
            };
            if let Some(env) = next {
                self.on_message(env).await;
            }
        }
    }

    /// When something is due without a message: the next expiry or shipment (primary), or the
    /// failover deadline (backup), in true ns.
    fn next_timer_ns(&self) -> u64 {
        match self.role {
            Role::Backup => self.last_heard_ns + self.spec.failover_after_ms * 1_000_000,
            Role::Primary => {
                let expiry = self.service.next_expiry().map(|at_ms| {
                    let clock = self.world.expiry_clock(&self.name);
                    true_ns() + clock.true_ns_until(true_ns(), at_ms as i64)
                });
                expiry.map_or(self.next_ship_ns, |e| e.min(self.next_ship_ns))
            }
        }
    }

    async fn on_message(&mut self, env: Envelope) {
        match &env.body {
            Message::Replicate { epoch, table } => {
                let (epoch, table) = (*epoch, table.clone());
                self.on_replicate(&env, epoch, table);
            }
            Message::ReplicateAck => self.backup_in_sync = true,
            _ => match request_event(&env.body) {
                Some(event) if self.role == Role::Primary => self.serve_request(&env, event).await,
                Some(_) => {
                    let leader = self.primary.clone();
                    let reply = Message::Redirect { leader };
                    self.world
                        .net
                        .send(&self.name, &env.src, Some(env.id), env.op, reply);
                }
                // A late acknowledgement, or a clock signal: timers are recomputed anyway.
                None => {}
            },
        }
    }

    async fn serve_request(&mut self, env: &Envelope, event: fencesim_scenario::NodeEvent) {
        Nemesis::safepoint(&self.world, &self.name, When::Before, event).await;
        let name = self.name.clone();
        reap(&self.world, &name, &mut self.service).await;
        let (reply, decided) = handle(&self.world, &name, &mut self.service, env);
        let replicated = decided.is_none() || self.replicate_if_sync().await;
        if let Some(reply) = reply.filter(|_| replicated) {
            self.world
                .net
                .send(&self.name, &env.src, Some(env.id), env.op, reply);
        }
        if let Some(event) = decided {
            Nemesis::safepoint(&self.world, &self.name, When::After, event).await;
        }
    }

    /// A primary's table (or heartbeat) arrived from `env.src`.
    fn on_replicate(&mut self, env: &Envelope, epoch: u64, table: fencesim_lease::LeaseTable) {
        let newer = epoch > self.epoch || (epoch == self.epoch && env.src < self.name);
        match self.role {
            Role::Primary if newer => {
                // Another primary of a later epoch: step down and take its table.
                self.world.forget_leases_missing_from(
                    &env.src,
                    &table,
                    "lost: the primary it was granted by stepped down",
                );
                self.role = Role::Backup;
            }
            Role::Primary => return,
            Role::Backup if epoch < self.epoch => return,
            Role::Backup => {}
        }
        self.epoch = epoch;
        self.primary = Some(env.src.clone());
        self.last_heard_ns = true_ns();
        self.service = LeaseService::from_table(self.service.config(), table);
        self.world.net.send(
            &self.name,
            &env.src,
            Some(env.id),
            None,
            Message::ReplicateAck,
        );
    }

    /// Become primary in a new epoch with the table received so far.
    fn promote(&mut self) {
        self.role = Role::Primary;
        self.epoch += 1;
        self.primary = Some(self.name.clone());
        let now_ms = self.world.expiry_now_ms(&self.name);
        self.service.extend_all(now_ms);
        self.world.set_leader(self.epoch, &self.name);
        self.world.event(Event {
            node: self.name.clone(),
            detail: Some(format!("epoch {}: promoted", self.epoch)),
            ..Event::new(EventKind::Leader)
        });
        self.world.forget_leases_missing_from(
            &self.name,
            self.service.table(),
            "lost in failover: not replicated to the backup",
        );
        self.next_ship_ns = true_ns();
        // The old primary fell silent, which is why this node took over: do not wait for its
        // acknowledgements until it answers a shipment again (as a backup, after a restart).
        self.backup_in_sync = false;
    }

    /// Send the table to the backup; returns the request id.
    fn ship(&mut self, op: Option<u64>) -> u64 {
        self.next_ship_ns = true_ns() + self.spec.replication_lag_ms * 1_000_000;
        let body = Message::Replicate {
            epoch: self.epoch,
            table: self.service.table().clone(),
        };
        self.world.net.send(&self.name, &self.peer, None, op, body)
    }

    /// With synchronous replication, ship the table now and wait for the backup's
    /// acknowledgement, up to `failover_after_ms`. False only if the acknowledgement timed out
    /// (the change is then not answered); from then on the primary does not wait until the
    /// backup acknowledges a shipment again.
    async fn replicate_if_sync(&mut self) -> bool {
        if self.spec.replication == Replication::Async {
            return true;
        }
        let id = self.ship(None);
        if !self.backup_in_sync {
            return true;
        }
        let inbox = self.world.inbox(&self.name);
        let deadline_ns = true_ns() + self.spec.failover_after_ms * 1_000_000;
        loop {
            let wait = Duration::from_nanos(deadline_ns.saturating_sub(true_ns()));
            match madsim::time::timeout(wait, inbox.recv()).await {
                Ok(Ok(env)) if env.reply_to == Some(id) => return true,
                Ok(Ok(env)) => self.deferred.push_back(env),
                _ => {
                    self.backup_in_sync = false;
                    return false;
                }
            }
        }
    }
}
