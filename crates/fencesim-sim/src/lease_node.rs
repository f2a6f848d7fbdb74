//! The `lease-service` node: the sans-IO [`LeaseService`] behind a mailbox, with an expiry
//! timer and a disk. Every change to the lease table (grant, renew, release, expire) becomes
//! an event and a store write; refusals (held, lost, not holder) are only in the reply. Expiries
//! are reaped before each request is handled, so the history shows the expire before a grant
//! that depended on it. After a restart the service resumes from its store as the
//! `token_counter`, `fsync` and `restart_grace_ms` knobs say.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fencesim_history::{Event, EventKind};
use fencesim_lease::wait_queue::{Promotion, WaitQueue};
use fencesim_lease::{
    AcquireOutcome, Attempt, LeaseConfig, LeaseMessage, LeaseService, ReleaseOutcome, RenewOutcome,
};
use fencesim_scenario::{AcquireMode, Fsync, NodeEvent, Reaper, ReleaseMode, LEASE_SERVICE_NODE};

use crate::message::Message;
use crate::nemesis::{Nemesis, When};
use crate::recorder::true_ns;
use crate::transport::Envelope;
use crate::world::World;

const NODE: &str = LEASE_SERVICE_NODE;

/// The node's main task; madsim runs it again on every restart.
pub(crate) async fn run(world: Arc<World>) {
    let incarnation = world.start(NODE);
    let spec = world.scenario.lock_service.clone();
    let table = world
        .store
        .lock()
        .expect("store")
        .recover(spec.token_counter);
    let mut service = LeaseService::from_table(
        LeaseConfig {
            max_ttl_ms: spec.max_ttl_ms,
        },
        table,
    );
    if incarnation > 1 && spec.restart_grace_ms > 0 {
        service.recover_until(now_ms(&world).saturating_add_unsigned(spec.restart_grace_ms));
    }
    if let (Fsync::Periodic, Some(every_ms)) = (spec.fsync, spec.fsync_every_ms) {
        // Runs on this node, so it dies with it: a crash stops syncing too.
        let w = Arc::clone(&world);
        madsim::task::spawn(crate::guard::guarded(async move {
            loop {
                crate::timer::sleep(Duration::from_millis(every_ms)).await;
                w.store.lock().expect("store").sync(true_ns());
            }
        }));
    }
    let inbox = world.inbox(NODE);
    let mut queue = Queue::default();
    // The expiry deadline is mostly the same from one request to the next: one timer serves.
    let alarm = crate::timer::Alarm::default();
    loop {
        settle(&world, &mut service, &mut queue).await;
        let wake_at = [
            service.next_expiry(),
            queue.wake_at(&service, now_ms(&world)),
        ]
        .into_iter()
        .flatten()
        .min();
        let next = match wake_at {
            Some(at_ms) => {
                let wait = world.expiry_clock(NODE).true_ns_until(true_ns(), at_ms);
                match alarm
                    .timeout(Duration::from_nanos(wait), inbox.recv())
                    .await
                {
                    Ok(received) => received,
                    Err(_expiry_due) => continue,
                }
            }
            None => inbox.recv().await,
        };
        let Ok(env) = next else { return };
        if let Message::Deregister { holder } = &env.body {
            if deregister(&world, &mut service, holder) {
                persist(&world, &service);
            }
            continue;
        }
        let Some(event) = request_event(&env.body) else {
            // A clock signal (or stray message): loop to recompute the expiry timer.
            continue;
        };
        Nemesis::safepoint(&world, NODE, When::Before, event).await;
        settle(&world, &mut service, &mut queue).await;
        let (reply, decided) = match queue.join(&world, &mut service, &env) {
            Some(queued) => (Some(queued), None),
            None => handle(&world, NODE, &mut service, &env),
        };
        if decided.is_some() {
            persist(&world, &service);
        }
        if let Some(reply) = reply {
            world.net.send(NODE, &env.src, Some(env.id), env.op, reply);
        }
        if let Some(event) = decided {
            Nemesis::safepoint(&world, NODE, When::After, event).await;
        }
        // A release may have freed a lock someone waits for.
        settle(&world, &mut service, &mut queue).await;
    }
}

/// A maintenance job deregistered `holder` (K16). The correct reaper leaves a lease alone: one
/// still being renewed is proof of life, and an expired one is reaped anyway. The defect ends
/// every lease of the holder at once, recorded as `revoke`. True if the table changed.
fn deregister(world: &World, service: &mut LeaseService, holder: &str) -> bool {
    if world.scenario.lock_service.reaper != Reaper::IgnoresLeases {
        return false;
    }
    let locks = service.locks_held_by(holder);
    for lock in &locks {
        let Some(lease) = service.remove(lock) else {
            continue;
        };
        world.lease_ended(NODE, lock);
        world.event(Event {
            node: NODE.into(),
            lock: Some(lock.as_str().into()),
            holder: Some(lease.holder.into()),
            token: Some(lease.token),
            expires_at_ms: Some(lease.expires_at_ms),
            detail: Some("deregistered by the reaper".into()),
            ..Event::new(EventKind::Revoke)
        });
    }
    !locks.is_empty()
}

/// Reap due leases and grant freed locks to waiters until nothing changes: a lapsed waiter's
/// grant (K07's defect) is due at once, and its expiry must be on record before the lock goes
/// to anyone else, by the queue or by a direct acquire.
async fn settle(world: &Arc<World>, service: &mut LeaseService, queue: &mut Queue) {
    loop {
        if reap(world, NODE, service).await {
            persist(world, service);
        }
        if queue.promote(world, service).await == 0 {
            return;
        }
    }
}

/// The blocking acquire's queue (`acquire = "queue"`, K07) and, per waiter, the request its
/// grant or refusal answers. Empty, and never used, with `acquire = "fail-fast"`.
#[derive(Default)]
struct Queue {
    waiters: WaitQueue,
    /// (lock, token) -> (client, its acquire's operation index, its acquire attempt).
    requests: BTreeMap<(String, u64), (String, Option<u64>, Attempt)>,
}

impl Queue {
    /// Queue an acquire of a held lock, if the service queues: returns the `Queued` answer.
    fn join(
        &mut self,
        world: &World,
        service: &mut LeaseService,
        env: &Envelope,
    ) -> Option<Message> {
        let Some(LeaseMessage::Acquire {
            lock,
            ttl_ms,
            attempt,
        }) = env.body.as_lease()
        else {
            return None;
        };
        let now = now_ms(world);
        let queues = world.scenario.lock_service.acquire != AcquireMode::FailFast;
        let free = service.is_free(lock, now) && !self.waiters.has_waiters(lock);
        // During a restart grace the service answers `Recovering`, queue or not.
        if !queues || free || service.recovering_until(now).is_some() {
            return None;
        }
        let token = self.waiters.enqueue(service, lock, &env.src, *ttl_ms, now);
        persist(world, service);
        let request = (env.src.to_string(), env.op, *attempt);
        self.requests.insert((lock.clone(), token), request);
        Some(Message::lease(LeaseMessage::AcquireReply(
            AcquireOutcome::Queued { token },
        )))
    }

    /// Grant free locks to their queues' heads (or drop lapsed waiters), recording each grant,
    /// answering each waiter, and passing the `after = "grant"` safepoint per grant as a
    /// direct grant does.
    async fn promote(&mut self, world: &Arc<World>, service: &mut LeaseService) -> usize {
        let grant_expired =
            world.scenario.lock_service.acquire == AcquireMode::QueueGrantToExpiredWaiter;
        let promotions = self.waiters.promote(service, now_ms(world), grant_expired);
        let count = promotions.len();
        let mut grants = 0;
        for promotion in promotions {
            let (lock, token, answer) = match promotion {
                Promotion::Granted { lock, lease } => {
                    grants += 1;
                    let (token, expires_at_ms) = (lease.token, lease.expires_at_ms);
                    let op = self.requests.get(&(lock.clone(), token)).and_then(|r| r.1);
                    world.lease_granted(NODE, &lock, &lease.holder, token);
                    world.event(Event {
                        node: NODE.into(),
                        lock: Some(lock.as_str().into()),
                        holder: Some(lease.holder.into()),
                        token: Some(token),
                        expires_at_ms: Some(expires_at_ms),
                        op,
                        ..Event::new(EventKind::Grant)
                    });
                    let answer = AcquireOutcome::Granted {
                        token,
                        expires_at_ms,
                    };
                    (lock, token, answer)
                }
                Promotion::Dropped { lock, waiter } => {
                    let token = waiter.token;
                    (lock, token, AcquireOutcome::WaiterExpired { token })
                }
            };
            if let Some((client, op, attempt)) = self.requests.remove(&(lock, token)) {
                let answer = Message::lease(LeaseMessage::QueueAnswer {
                    entry: token,
                    attempt,
                    outcome: answer,
                });
                world.net.send(NODE, &client, None, op, answer);
            }
            persist(world, service);
        }
        for _ in 0..grants {
            Nemesis::safepoint(world, NODE, When::After, NodeEvent::Grant).await;
        }
        count
    }

    /// When the queue next needs the node awake though no lease expires: the end of a restart
    /// grace that holds waiters back.
    fn wake_at(&self, service: &LeaseService, now_ms: i64) -> Option<i64> {
        if self.waiters.is_empty() {
            return None;
        }
        service.recovering_until(now_ms)
    }
}

/// The service's expiry clock reading, local ms.
fn now_ms(world: &World) -> i64 {
    world.expiry_now_ms(NODE)
}

fn persist(world: &World, service: &LeaseService) {
    let fsync = world.scenario.lock_service.fsync;
    world
        .store
        .lock()
        .expect("store")
        .write(service.table(), fsync, true_ns());
}

/// Expire every lease of lock-service node `node` that is due, recording each, with an
/// `after = "expire"` safepoint each. True if any expired (the table changed).
pub(crate) async fn reap(world: &Arc<World>, node: &str, service: &mut LeaseService) -> bool {
    let expired = service.expire_due(world.expiry_now_ms(node));
    if expired.is_empty() {
        return false;
    }
    let count = expired.len();
    for expired in expired {
        world.lease_ended(node, &expired.lock);
        world.event(Event {
            node: node.into(),
            lock: Some(expired.lock.into()),
            holder: Some(expired.lease.holder.into()),
            token: Some(expired.lease.token),
            expires_at_ms: Some(expired.lease.expires_at_ms),
            ..Event::new(EventKind::Expire)
        });
    }
    for _ in 0..count {
        Nemesis::safepoint(world, node, When::After, NodeEvent::Expire).await;
    }
    true
}

/// The safepoint event of a client request to a lease service (`None`: not a request).
pub(crate) fn request_event(body: &Message) -> Option<NodeEvent> {
    match body.as_lease()? {
        LeaseMessage::Acquire { .. } => Some(NodeEvent::Acquire),
        LeaseMessage::Renew { .. } => Some(NodeEvent::Renew),
        LeaseMessage::Release { .. } => Some(NodeEvent::Release),
        _ => None,
    }
}

/// Apply one request at lease-service node `node`; returns the reply and the event it caused,
/// if any.
pub(crate) fn handle(
    world: &World,
    node: &str,
    service: &mut LeaseService,
    env: &Envelope,
) -> (Option<Message>, Option<NodeEvent>) {
    let now = world.expiry_now_ms(node);
    let holder = &*env.src;
    let record = |kind: EventKind, lock: &str, token: u64, expires_at_ms: Option<i64>| {
        match kind {
            EventKind::Grant => world.lease_granted(node, lock, holder, token),
            EventKind::Release => world.lease_ended(node, lock),
            _ => {}
        }
        world.event(Event {
            node: node.into(),
            lock: Some(lock.into()),
            holder: Some(holder.into()),
            token: Some(token),
            expires_at_ms,
            op: env.op,
            ..Event::new(kind)
        });
    };
    let reply = |msg| Some(Message::lease(msg));
    let Some(request) = env.body.as_lease() else {
        return (None, None);
    };
    match request {
        LeaseMessage::Acquire { lock, ttl_ms, .. } => {
            let outcome = service.acquire(lock, holder, *ttl_ms, now);
            let event = match &outcome {
                AcquireOutcome::Granted {
                    token,
                    expires_at_ms,
                } => {
                    record(EventKind::Grant, lock, *token, Some(*expires_at_ms));
                    Some(NodeEvent::Grant)
                }
                AcquireOutcome::Held { .. }
                | AcquireOutcome::Recovering { .. }
                | AcquireOutcome::Queued { .. }
                | AcquireOutcome::WaiterExpired { .. } => None,
            };
            (reply(LeaseMessage::AcquireReply(outcome)), event)
        }
        LeaseMessage::Renew { lock, token } => {
            let outcome = service.renew(lock, holder, *token, now);
            let event = match &outcome {
                RenewOutcome::Renewed { expires_at_ms } => {
                    record(EventKind::Renew, lock, *token, Some(*expires_at_ms));
                    Some(NodeEvent::Renew)
                }
                RenewOutcome::Lost => None,
            };
            (reply(LeaseMessage::RenewReply(outcome)), event)
        }
        LeaseMessage::Release { lock, .. }
            if world.scenario.lock_service.release == ReleaseMode::Unconditional =>
        {
            // K19's plain DEL: whoever's lease it was ends, and the caller is told "OK" (a
            // delete of nothing changes nothing: no event, no store write, no safepoint).
            let Some(ended) = service.release_unconditional(lock) else {
                return (
                    reply(LeaseMessage::ReleaseReply(ReleaseOutcome::Released)),
                    None,
                );
            };
            {
                world.lease_ended(node, lock);
                world.event(Event {
                    node: node.into(),
                    lock: Some(lock.as_str().into()),
                    holder: Some(ended.holder.into()),
                    token: Some(ended.token),
                    op: env.op,
                    ..Event::new(EventKind::Release)
                });
            }
            (
                reply(LeaseMessage::ReleaseReply(ReleaseOutcome::Released)),
                Some(NodeEvent::Release),
            )
        }
        LeaseMessage::Release { lock, token } => {
            let outcome = service.release(lock, holder, *token, now);
            let event = match &outcome {
                ReleaseOutcome::Released => {
                    record(EventKind::Release, lock, *token, None);
                    Some(NodeEvent::Release)
                }
                ReleaseOutcome::NotHolder => None,
            };
            (reply(LeaseMessage::ReleaseReply(outcome)), event)
        }
        // Not addressed to a lock service: ignore, as a real server drops a malformed request.
        _ => (None, None),
    }
}
