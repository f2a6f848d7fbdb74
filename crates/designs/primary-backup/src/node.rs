//! A node of the primary-backup lock service (`lease-1`, `lease-2`; case K06): the sans-IO
//! [`Replica`] as a [`LockNode`].
//!
//! The primary serves requests with [`serve`], reaps due leases and ships its table; the
//! backup adopts shipments, redirects clients to the primary, and promotes itself when the
//! primary falls silent, recording a `leader` event and handing over the old primary's leases
//! (a `revoke` for each one it never received). With synchronous replication a change is
//! answered only once the backup acknowledges it, and the node takes up nothing else
//! meanwhile ([`LockNode::takes_now`]). Both nodes keep their state in memory only: a
//! restarted node rejoins as an empty backup that knows no primary.

use fencesim_design::{
    Clock, Deadline, LockNode, NodeCtx, NodeStart, Origin, ServiceEvent, ServiceEventKind, TimerId,
};

use fencesim_lease::{expire_due, held_leases, serve, LeaseConfig, ReleaseMode};

use crate::replica::{PrimaryBackupConfig, Received, Replica, Role, Shipment, Timer};
use crate::PrimaryBackupMessage;

/// This service's lease messages: the requests and answers every lease service shares, and
/// the replicas' shipments and acknowledgements.
type LeaseMessage = fencesim_lease::LeaseMessage<PrimaryBackupMessage>;

/// The settings of a primary-backup node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrimaryBackupNodeConfig {
    /// The pair's replication.
    pub pair: PrimaryBackupConfig,
    /// The longest TTL granted, ms of the expiry clock.
    pub max_ttl_ms: u64,
    /// The clock leases expire by (and the replica's timers run on).
    pub expiry_clock: Clock,
    /// How a release works.
    pub release: ReleaseMode,
}

/// The replica's next timer (a shipment or the failover deadline) or lease expiry.
const WAKE: TimerId = TimerId(1);
/// The end of the wait for a synchronous acknowledgement.
const ACK: TimerId = TimerId(2);

/// A synchronous primary's wait for the backup to acknowledge shipment `seq`.
#[derive(Clone, Debug)]
struct Awaiting {
    seq: u64,
    /// The answer held back until then: the request's origin and its reply.
    reply: Option<(Origin, LeaseMessage)>,
    /// The decision that takes effect with the answer (its `after` safepoint comes then).
    decided: Option<ServiceEventKind>,
}

/// Which half of [`LockNode::settle`] runs next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Settle {
    Reap,
    Timer,
}

/// A node of the primary-backup pair.
#[derive(Clone, Debug)]
pub struct PrimaryBackupNode {
    config: PrimaryBackupNodeConfig,
    name: String,
    peer: String,
    replica: Replica,
    next_seq: u64,
    awaiting: Option<Awaiting>,
    /// Leases reaped but not yet shipped to a synchronous backup.
    reaped: bool,
    /// Whether the replica's timer is to be checked at the next settle: after a message or a
    /// wake-up, not before a message (a backup resumed from a pause past its failover deadline
    /// reads the shipment that came meanwhile before it gives up on the primary).
    check_timer: bool,
    next_settle: Settle,
}

type Ctx<'a> = NodeCtx<'a, LeaseMessage, ()>;

impl PrimaryBackupNode {
    fn now_ms(&self, ctx: &Ctx<'_>) -> i64 {
        ctx.now().on(self.config.expiry_clock)
    }

    /// Send `shipment` to the backup; returns its number.
    fn send(&mut self, shipment: Shipment, ctx: &mut Ctx<'_>) -> u64 {
        self.next_seq += 1;
        let seq = self.next_seq;
        ctx.send(
            self.peer.clone(),
            LeaseMessage::Peer(PrimaryBackupMessage::Replicate { seq, shipment }),
        );
        seq
    }

    /// Ship the table now and wait for the backup's acknowledgement (up to
    /// `failover_after_ms`) before answering with `reply` and passing `decided`'s safepoint.
    fn await_ack(
        &mut self,
        reply: Option<(Origin, LeaseMessage)>,
        decided: Option<ServiceEventKind>,
        ctx: &mut Ctx<'_>,
    ) {
        let shipment = self.replica.ship(self.now_ms(ctx));
        let seq = self.send(shipment, ctx);
        self.awaiting = Some(Awaiting {
            seq,
            reply,
            decided,
        });
        ctx.cancel_timer(WAKE);
        ctx.set_timer(ACK, self.config.pair.failover_after_ms);
    }

    /// A change the client hears of: at once, or with synchronous replication once the
    /// backup has it.
    fn answer_change(
        &mut self,
        origin: &Origin,
        reply: LeaseMessage,
        event: ServiceEvent,
        ctx: &mut Ctx<'_>,
    ) {
        if !self.replica.waits_for_ack() {
            ctx.record(event);
            ctx.reply(origin, reply);
            return;
        }
        let decided = Some(event.kind);
        ctx.record_only(event);
        self.await_ack(Some((origin.clone(), reply)), decided, ctx);
    }

    /// A client's request: served by the primary, redirected by the backup.
    fn on_request(&mut self, origin: &Origin, msg: &LeaseMessage, ctx: &mut Ctx<'_>) {
        if self.replica.role() == Role::Backup {
            let leader = self.replica.leader().map(str::to_owned);
            ctx.reply(origin, LeaseMessage::Redirect { leader });
            return;
        }
        let now = self.now_ms(ctx);
        let (holder, op, release) = (origin.from(), origin.op(), self.config.release);
        let Some(served) = serve(self.replica.service(), msg, holder, op, now, release) else {
            return;
        };
        match served.event {
            Some(event) => self.answer_change(origin, served.reply, event, ctx),
            // A refusal changes nothing: it is answered at once.
            None => ctx.reply(origin, served.reply),
        }
    }

    /// A shipment from the other node.
    fn on_shipment(&mut self, origin: &Origin, msg: LeaseMessage, ctx: &mut Ctx<'_>) {
        let LeaseMessage::Peer(PrimaryBackupMessage::Replicate { seq, shipment }) = msg else {
            return;
        };
        let now = self.now_ms(ctx);
        match self.replica.on_shipment(origin.from(), shipment, now) {
            Received::Ignored => {}
            Received::Adopted { stepped_down } => {
                if stepped_down {
                    // This node stops honouring the leases it granted; those the new primary's
                    // table has are the new primary's from now on.
                    let kept = held_leases(self.replica.service().table());
                    let reason = "lost: the primary that granted it stepped down";
                    ctx.hand_over(self.name.clone(), origin.from(), kept, reason);
                }
                ctx.reply(
                    origin,
                    LeaseMessage::Peer(PrimaryBackupMessage::ReplicateAck { seq }),
                );
            }
        }
    }

    /// The backup acknowledged shipment `seq`.
    fn on_ack(&mut self, seq: u64, ctx: &mut Ctx<'_>) {
        self.replica.on_ack();
        // Not the one waited for: a periodic shipment's, or one that came after its wait
        // timed out.
        let Some(awaiting) = self.awaiting.take_if(|a| a.seq == seq) else {
            return;
        };
        ctx.cancel_timer(ACK);
        if let Some((origin, msg)) = awaiting.reply {
            ctx.reply(&origin, msg);
        }
        if let Some(kind) = awaiting.decided {
            ctx.decided(kind);
        }
    }

    /// The replica became primary of `epoch`: say so, and hand over the old primary's leases.
    fn promoted(&mut self, epoch: u64, ctx: &mut Ctx<'_>) {
        ctx.leads(epoch, Some(format!("epoch {epoch}: promoted")));
        let kept = held_leases(self.replica.service().table());
        let reason = "lost in failover: not replicated to the backup";
        ctx.hand_over(self.peer.clone(), self.name.clone(), kept, reason);
    }

    /// Set the wake-up timer for the replica's next timer or the next expiry.
    fn arm(&mut self, ctx: &mut Ctx<'_>) {
        let expiry = match self.replica.role() {
            Role::Primary => self.replica.service().next_expiry(),
            Role::Backup => None,
        };
        let timer = self.replica.next_timer_ms();
        let at_ms = expiry.map_or(timer, |e| e.min(timer));
        let clock = self.config.expiry_clock;
        ctx.set_timer_at(WAKE, Deadline { clock, at_ms });
    }
}

impl LockNode for PrimaryBackupNode {
    type Msg = LeaseMessage;
    type Durable = ();
    type Config = PrimaryBackupNodeConfig;

    fn start(config: &Self::Config, start: NodeStart<()>, ctx: &mut Ctx<'_>) -> Self {
        let name = start.name;
        let first = start.service_nodes.first().cloned().unwrap_or_default();
        let peer = start
            .service_nodes
            .iter()
            .find(|n| **n != name)
            .cloned()
            .unwrap_or_default();
        let lease = LeaseConfig {
            max_ttl_ms: config.max_ttl_ms,
        };
        let now = ctx.now().on(config.expiry_clock);
        let replica = match (start.index, start.incarnation) {
            (0, 1) => {
                ctx.leads(1, None);
                Replica::primary(&name, lease, config.pair, now)
            }
            (_, 1) => Replica::backup(&name, lease, config.pair, (1, Some(&first)), now),
            _ => Replica::backup(&name, lease, config.pair, (0, None), now),
        };
        PrimaryBackupNode {
            config: *config,
            name,
            peer,
            replica,
            next_seq: 0,
            awaiting: None,
            reaped: false,
            check_timer: true,
            next_settle: Settle::Reap,
        }
    }

    fn on_message(&mut self, origin: &Origin, msg: LeaseMessage, ctx: &mut Ctx<'_>) {
        self.check_timer = true;
        match msg {
            LeaseMessage::Peer(PrimaryBackupMessage::Replicate { .. }) => {
                self.on_shipment(origin, msg, ctx)
            }
            LeaseMessage::Peer(PrimaryBackupMessage::ReplicateAck { seq }) => self.on_ack(seq, ctx),
            LeaseMessage::Acquire { .. }
            | LeaseMessage::Renew { .. }
            | LeaseMessage::Release { .. } => self.on_request(origin, &msg, ctx),
            // Answers are for clients: a server drops them.
            _ => {}
        }
    }

    fn on_timer(&mut self, id: TimerId, ctx: &mut Ctx<'_>) {
        // The replica's timer itself runs in the settle that follows, after the reaping.
        self.check_timer = true;
        if id == ACK {
            // The acknowledgement did not come in time: the change goes unanswered, though it
            // was decided.
            self.replica.on_ack_timeout();
            if let Some(kind) = self.awaiting.take().and_then(|a| a.decided) {
                ctx.decided(kind);
            }
        }
    }

    /// While waiting for an acknowledgement only that is taken up; the rest waits its turn.
    /// (Asked when a message arrives: a request that came just before a reaped expiry's wait
    /// began is still served, and its own change waits in that expiry's place.)
    fn takes_now(&self, msg: &LeaseMessage) -> bool {
        match (&self.awaiting, msg) {
            (None, _) => true,
            (Some(a), LeaseMessage::Peer(PrimaryBackupMessage::ReplicateAck { seq })) => {
                a.seq == *seq
            }
            (Some(_), _) => false,
        }
    }

    /// Reap due leases (the primary), then, after a message or a wake-up, run the replica's
    /// timer: a shipment, or the backup's promotion; nothing while waiting for an
    /// acknowledgement.
    fn settle(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if self.awaiting.is_some() {
            self.next_settle = Settle::Reap;
            return false;
        }
        match self.next_settle {
            Settle::Reap => {
                self.next_settle = Settle::Timer;
                if self.replica.role() == Role::Primary {
                    let now = self.now_ms(ctx);
                    for event in expire_due(self.replica.service(), now) {
                        ctx.record(event);
                        self.reaped = true;
                    }
                }
                true
            }
            Settle::Timer => {
                self.next_settle = Settle::Reap;
                if std::mem::take(&mut self.reaped) && self.replica.waits_for_ack() {
                    // After the expiries' safepoints: ship them, and wait.
                    self.await_ack(None, None, ctx);
                    return true;
                }
                if std::mem::take(&mut self.check_timer) {
                    let now = self.now_ms(ctx);
                    match self.replica.on_timer(now) {
                        Some(Timer::Ship(shipment)) => {
                            self.send(shipment, ctx);
                        }
                        Some(Timer::Promoted { epoch }) => self.promoted(epoch, ctx),
                        None => {}
                    }
                }
                self.arm(ctx);
                false
            }
        }
    }

    const FOLLOWS_LEASES: bool = true;
}

#[cfg(test)]
mod tests {
    use fencesim_design::{NodeEffect, Now};

    use super::*;
    use crate::replica::{Replication, Shipment};
    use fencesim_lease::Attempt;

    type Effects = Vec<NodeEffect<LeaseMessage, ()>>;

    fn config(replication: Replication) -> PrimaryBackupNodeConfig {
        PrimaryBackupNodeConfig {
            pair: PrimaryBackupConfig {
                replication,
                replication_lag_ms: 1_000,
                failover_after_ms: 3_000,
            },
            max_ttl_ms: 10_000,
            expiry_clock: Clock::Monotonic,
            release: ReleaseMode::CompareAndDelete,
        }
    }

    /// Node `index` of the pair, started at 0 ms.
    fn start(replication: Replication, index: usize) -> PrimaryBackupNode {
        let names = vec!["lease-1".to_owned(), "lease-2".to_owned()];
        let start = NodeStart {
            name: names[index].clone(),
            index,
            service_nodes: names,
            incarnation: 1,
            durable: None,
        };
        let mut effects = Effects::new();
        at(0, &mut effects, |ctx| {
            PrimaryBackupNode::start(&config(replication), start, ctx)
        })
    }

    /// Run `f` at `now_ms` on the monotonic clock, appending its effects.
    fn at<R>(now_ms: i64, effects: &mut Effects, f: impl FnOnce(&mut Ctx<'_>) -> R) -> R {
        let clock = move || Now {
            mono_ms: now_ms,
            wall_ms: now_ms,
        };
        f(&mut NodeCtx::new(&clock, effects))
    }

    /// The harness's settle: again while it asks.
    fn settle(node: &mut PrimaryBackupNode, now_ms: i64, effects: &mut Effects) {
        while at(now_ms, effects, |ctx| node.settle(ctx)) {}
    }

    fn origin(from: &str, id: u64) -> Origin {
        Origin::new(std::sync::Arc::from(from), id, Some(id))
    }

    /// Client-1's first acquire of lock `l`.
    fn acquire() -> LeaseMessage {
        LeaseMessage::Acquire {
            lock: "l".into(),
            ttl_ms: 5_000,
            attempt: Attempt {
                incarnation: 1,
                number: 1,
            },
        }
    }

    fn leads(effects: &Effects) -> bool {
        effects
            .iter()
            .any(|e| matches!(e, NodeEffect::Leads { .. }))
    }

    #[test]
    fn a_backup_resumed_past_its_deadline_reads_the_waiting_shipment_first() {
        let mut backup = start(Replication::Async, 1);
        let mut effects = Effects::new();
        settle(&mut backup, 0, &mut effects);
        // Paused from 0 to 5 s, past the 3 s failover deadline; a shipment came meanwhile.
        settle(&mut backup, 5_000, &mut effects);
        let shipment = Shipment {
            epoch: 1,
            table: Default::default(),
        };
        let msg = LeaseMessage::Peer(PrimaryBackupMessage::Replicate { seq: 7, shipment });
        at(5_000, &mut effects, |ctx| {
            backup.on_message(&origin("lease-1", 1), msg, ctx)
        });
        settle(&mut backup, 5_000, &mut effects);
        assert!(
            !leads(&effects),
            "promoted before reading the shipment: {effects:?}"
        );
        let acked = effects.iter().any(|e| {
            matches!(
                e,
                NodeEffect::Reply {
                    msg: LeaseMessage::Peer(PrimaryBackupMessage::ReplicateAck { seq: 7 }),
                    ..
                }
            )
        });
        assert!(acked, "{effects:?}");
        // Silent from then on: it promotes itself 3 s after the shipment.
        let mut later = Effects::new();
        at(8_000, &mut later, |ctx| backup.on_timer(WAKE, ctx));
        settle(&mut backup, 8_000, &mut later);
        assert!(leads(&later), "{later:?}");
    }

    #[test]
    fn a_sync_primary_answers_and_counts_its_grant_once_the_backup_has_it() {
        let mut primary = start(Replication::Sync, 0);
        let mut effects = Effects::new();
        settle(&mut primary, 10, &mut effects);
        effects.clear();
        let acquire = acquire();
        let client = origin("client-1", 3);
        at(10, &mut effects, |ctx| {
            primary.on_message(&client, acquire.clone(), ctx)
        });
        let seq = effects.iter().find_map(|e| match e {
            NodeEffect::Send {
                msg: LeaseMessage::Peer(PrimaryBackupMessage::Replicate { seq, .. }),
                ..
            } => Some(*seq),
            _ => None,
        });
        let seq = seq.expect("the grant is shipped at once");
        assert!(
            matches!(effects[0], NodeEffect::RecordOnly(_)),
            "{effects:?}"
        );
        assert!(!effects
            .iter()
            .any(|e| matches!(e, NodeEffect::Reply { .. })));
        assert!(!primary.takes_now(&acquire), "nothing else while it waits");
        assert!(
            !primary.takes_now(&LeaseMessage::Peer(PrimaryBackupMessage::ReplicateAck {
                seq: seq + 1
            }))
        );
        assert!(
            primary.takes_now(&LeaseMessage::Peer(PrimaryBackupMessage::ReplicateAck {
                seq
            }))
        );
        effects.clear();
        let ack = LeaseMessage::Peer(PrimaryBackupMessage::ReplicateAck { seq });
        at(20, &mut effects, |ctx| {
            primary.on_message(&origin("lease-2", 4), ack, ctx)
        });
        assert!(
            matches!(
                effects.as_slice(),
                [
                    NodeEffect::CancelTimer(ACK),
                    NodeEffect::Reply { .. },
                    NodeEffect::Decided(ServiceEventKind::Grant)
                ]
            ),
            "{effects:?}"
        );
        assert!(primary.takes_now(&acquire));
    }

    #[test]
    fn an_unacknowledged_change_goes_unanswered_but_was_decided() {
        let mut primary = start(Replication::Sync, 0);
        let mut effects = Effects::new();
        let acquire = acquire();
        at(10, &mut effects, |ctx| {
            primary.on_message(&origin("client-1", 3), acquire, ctx)
        });
        effects.clear();
        at(3_010, &mut effects, |ctx| primary.on_timer(ACK, ctx));
        assert!(
            matches!(
                effects.as_slice(),
                [NodeEffect::Decided(ServiceEventKind::Grant)]
            ),
            "{effects:?}"
        );
    }
}
