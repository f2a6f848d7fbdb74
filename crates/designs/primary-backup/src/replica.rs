//! One replica of a primary-backup lock service, sans-IO (case K06; the shape of Redis with
//! Sentinel, or of a lock table in a database with a standby).
//!
//! The primary serves a [`LeaseService`] and ships its whole table to the backup every
//! `replication_lag_ms`; the shipment is also its heartbeat. With [`Replication::Sync`] it also
//! ships after every change and answers the client only once the backup has acknowledged. The
//! backup keeps the last table it received. When it has heard nothing from a primary for
//! `failover_after_ms` it promotes itself in a new epoch, as Sentinel promotes a replica: every
//! lease it has is extended by its TTL (as etcd does when a leader changes), and whatever the
//! old primary had not shipped is lost, the token counter's increments included. A primary that
//! hears from a primary of a later epoch (or of the same epoch and a lower name) steps down and
//! takes that primary's table.
//!
//! All times are ms of the replica's own expiry clock, the clock its lease service judges by.

use serde::{Deserialize, Serialize};

use fencesim_lease::{LeaseConfig, LeaseService, LeaseTable};

/// How the primary replicates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Replication {
    /// Answer at once, ship every `replication_lag_ms`: a failover loses the latest changes.
    Async,
    /// Ship every change and answer only after the backup's acknowledgement. When one times
    /// out, stop waiting until the backup acknowledges again (MySQL semi-synchronous
    /// replication's fallback), so that a dead backup does not stall every grant.
    Sync,
}

/// Settings of a primary-backup pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrimaryBackupConfig {
    /// Asynchronous or synchronous.
    pub replication: Replication,
    /// How often the primary ships its table (and so its heartbeat period), ms.
    pub replication_lag_ms: u64,
    /// How long the backup waits without a shipment before it promotes itself, ms.
    pub failover_after_ms: u64,
}

/// What a replica is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// Serves clients and ships its table.
    Primary,
    /// Keeps the primary's table and redirects clients to the primary.
    Backup,
}

/// The primary's table, as shipped to the backup.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shipment {
    /// The sender's epoch: 1 for the first primary, one more at each promotion.
    pub epoch: u64,
    /// Its lease table.
    pub table: LeaseTable,
}

/// What a replica did with a shipment it received.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Received {
    /// It came from a primary of an older epoch: ignored, not acknowledged.
    Ignored,
    /// The replica now holds the shipped table and must acknowledge it; `stepped_down` if it
    /// was a primary until now.
    Adopted {
        /// It was a primary and is now a backup.
        stepped_down: bool,
    },
}

/// What a replica's timer decided.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Timer {
    /// The primary's shipment is due: send it to the backup.
    Ship(Shipment),
    /// The backup heard nothing for too long and is now the primary of `epoch`.
    Promoted {
        /// The new epoch.
        epoch: u64,
    },
}

/// One replica.
#[derive(Clone, Debug)]
pub struct Replica {
    name: String,
    config: PrimaryBackupConfig,
    role: Role,
    epoch: u64,
    service: LeaseService,
    primary: Option<String>,
    last_heard_ms: i64,
    next_ship_ms: i64,
    backup_in_sync: bool,
}

impl Replica {
    /// Replica `name` starting as the primary of epoch 1 at `now_ms`.
    pub fn primary(
        name: &str,
        lease: LeaseConfig,
        config: PrimaryBackupConfig,
        now_ms: i64,
    ) -> Self {
        Replica {
            name: name.to_owned(),
            config,
            role: Role::Primary,
            epoch: 1,
            service: LeaseService::new(lease),
            primary: Some(name.to_owned()),
            last_heard_ms: now_ms,
            next_ship_ms: now_ms,
            backup_in_sync: true,
        }
    }

    /// Replica `name` starting empty as a backup at `now_ms`, knowing of `epoch` and
    /// believing `primary` leads (at the very start: epoch 1 and the first primary; after a
    /// restart: 0 and nobody, until a shipment says).
    pub fn backup(
        name: &str,
        lease: LeaseConfig,
        config: PrimaryBackupConfig,
        known: (u64, Option<&str>),
        now_ms: i64,
    ) -> Self {
        let (epoch, primary) = known;
        Replica {
            role: Role::Backup,
            epoch,
            primary: primary.map(str::to_owned),
            ..Self::primary(name, lease, config, now_ms)
        }
    }

    /// Primary or backup.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The latest epoch this replica knows of.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The primary this replica believes leads (itself, if it does), for redirects.
    pub fn leader(&self) -> Option<&str> {
        self.primary.as_deref()
    }

    /// The lease service: the live one on a primary, the last shipped copy on a backup.
    pub fn service(&mut self) -> &mut LeaseService {
        &mut self.service
    }

    /// When the replica's timer is next due, ms: the shipment (primary) or the failover
    /// deadline (backup).
    pub fn next_timer_ms(&self) -> i64 {
        match self.role {
            Role::Primary => self.next_ship_ms,
            Role::Backup => self.last_heard_ms + self.config.failover_after_ms as i64,
        }
    }

    /// Run the timer at `now_ms`: `None` if nothing is due yet.
    pub fn on_timer(&mut self, now_ms: i64) -> Option<Timer> {
        if now_ms < self.next_timer_ms() {
            return None;
        }
        Some(match self.role {
            Role::Primary => Timer::Ship(self.ship(now_ms)),
            Role::Backup => {
                self.promote(now_ms);
                Timer::Promoted { epoch: self.epoch }
            }
        })
    }

    /// The primary's table to send now (the next periodic shipment is counted from here).
    pub fn ship(&mut self, now_ms: i64) -> Shipment {
        self.next_ship_ms = now_ms + self.config.replication_lag_ms as i64;
        Shipment {
            epoch: self.epoch,
            table: self.service.table().clone(),
        }
    }

    fn promote(&mut self, now_ms: i64) {
        self.role = Role::Primary;
        self.epoch += 1;
        self.primary = Some(self.name.clone());
        self.service.extend_all(now_ms);
        self.next_ship_ms = now_ms;
        // The old primary fell silent, which is why this one took over: do not wait for its
        // acknowledgements until it answers a shipment again (as a backup, after a restart).
        self.backup_in_sync = false;
    }

    /// A shipment from replica `from` arrived at `now_ms`.
    pub fn on_shipment(&mut self, from: &str, shipment: Shipment, now_ms: i64) -> Received {
        let later = shipment.epoch > self.epoch
            || (shipment.epoch == self.epoch && from < self.name.as_str());
        let stepped_down = match self.role {
            Role::Primary if later => true,
            Role::Primary => return Received::Ignored,
            Role::Backup if shipment.epoch < self.epoch => return Received::Ignored,
            Role::Backup => false,
        };
        self.role = Role::Backup;
        self.epoch = shipment.epoch;
        self.primary = Some(from.to_owned());
        self.last_heard_ms = now_ms;
        let lease = self.service.config();
        self.service = LeaseService::from_table(lease, shipment.table);
        Received::Adopted { stepped_down }
    }

    /// Whether a change must be acknowledged by the backup before the client hears of it.
    pub fn waits_for_ack(&self) -> bool {
        self.config.replication == Replication::Sync && self.backup_in_sync
    }

    /// The backup acknowledged a shipment.
    pub fn on_ack(&mut self) {
        self.backup_in_sync = true;
    }

    /// An acknowledgement did not come in time: the change goes unanswered, and the primary
    /// stops waiting until the backup acknowledges again.
    pub fn on_ack_timeout(&mut self) {
        self.backup_in_sync = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencesim_lease::AcquireOutcome;

    const LEASE: LeaseConfig = LeaseConfig { max_ttl_ms: 10_000 };

    fn config(replication: Replication) -> PrimaryBackupConfig {
        PrimaryBackupConfig {
            replication,
            replication_lag_ms: 1_000,
            failover_after_ms: 3_000,
        }
    }

    fn pair(replication: Replication) -> (Replica, Replica) {
        let c = config(replication);
        (
            Replica::primary("lease-1", LEASE, c, 0),
            Replica::backup("lease-2", LEASE, c, (1, Some("lease-1")), 0),
        )
    }

    fn granted(outcome: AcquireOutcome) -> u64 {
        match outcome {
            AcquireOutcome::Granted { token, .. } => token,
            other => panic!("expected a grant, got {other:?}"),
        }
    }

    #[test]
    fn k06_a_grant_not_yet_shipped_is_lost_at_failover_with_its_token() {
        let (mut primary, mut backup) = pair(Replication::Async);
        let Some(Timer::Ship(first)) = primary.on_timer(0) else {
            panic!("the first shipment is due at once")
        };
        assert_eq!(
            backup.on_shipment("lease-1", first, 5),
            Received::Adopted {
                stepped_down: false
            }
        );
        assert_eq!(granted(primary.service().acquire("l", "a", 10_000, 500)), 1);
        // The primary dies before its next shipment at 1 s; the backup waits 3 s from 5 ms.
        assert_eq!(backup.on_timer(3_004), None);
        assert_eq!(backup.on_timer(3_005), Some(Timer::Promoted { epoch: 2 }));
        assert_eq!(
            (backup.role(), backup.leader()),
            (Role::Primary, Some("lease-2"))
        );
        assert!(
            backup.service().lease("l").is_none(),
            "a's lease was never shipped"
        );
        assert_eq!(
            granted(backup.service().acquire("l", "b", 10_000, 3_100)),
            1,
            "token 1 again"
        );
    }

    #[test]
    fn a_shipped_lease_survives_failover_extended_by_its_ttl() {
        let (mut primary, mut backup) = pair(Replication::Sync);
        assert!(primary.waits_for_ack());
        granted(primary.service().acquire("l", "a", 10_000, 500));
        let shipment = primary.ship(500);
        backup.on_shipment("lease-1", shipment, 505);
        primary.on_ack();
        assert_eq!(backup.on_timer(3_505), Some(Timer::Promoted { epoch: 2 }));
        let lease = backup.service().lease("l").cloned().expect("shipped");
        assert_eq!((lease.holder.as_str(), lease.expires_at_ms), ("a", 13_505));
        assert!(!backup.waits_for_ack(), "the old primary is presumed dead");
        assert!(matches!(
            backup.service().acquire("l", "b", 10_000, 13_505),
            AcquireOutcome::Granted { token: 2, .. }
        ));
    }

    #[test]
    fn an_old_primary_steps_down_to_a_later_epoch_and_ignores_nothing_newer() {
        let (mut old, mut new) = pair(Replication::Async);
        new.on_timer(3_000);
        let from_new = new.ship(3_000);
        let from_old = old.ship(3_000);
        assert_eq!(
            new.on_shipment("lease-1", from_old, 3_001),
            Received::Ignored
        );
        assert_eq!(
            old.on_shipment("lease-2", from_new, 3_001),
            Received::Adopted { stepped_down: true }
        );
        assert_eq!(
            (old.role(), old.epoch(), old.leader()),
            (Role::Backup, 2, Some("lease-2"))
        );
    }

    #[test]
    fn a_sync_primary_stops_waiting_after_a_timeout_until_the_backup_answers() {
        let (mut primary, _) = pair(Replication::Sync);
        primary.on_ack_timeout();
        assert!(!primary.waits_for_ack());
        primary.on_ack();
        assert!(primary.waits_for_ack());
        let (async_primary, _) = pair(Replication::Async);
        assert!(!async_primary.waits_for_ack());
    }
}
