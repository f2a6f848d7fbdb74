//! The `lease-service` node of the lease-record design (case K11): a linearizable
//! compare-and-swap store of lease records ([`RecordStore`]). It never expires anything; the
//! candidates judge expiry. Its events say what each swap meant: a `grant` when a new holder
//! took the record (token: the version it took it at), a `renew` when the holder swapped its
//! own record, a `release` when it cleared it, and a `revoke` of the previous holder's lease
//! when someone else took the record over. Its state is durable (the store syncs every swap).

use std::sync::Arc;

use fencesim_history::{Event, EventKind};
use fencesim_lease::lease_record::{CasOutcome, LeaseRecord, Versioned};
use fencesim_scenario::{MessageKind, NodeEvent, LEASE_SERVICE_NODE};

use crate::message::Message;
use crate::nemesis::{Nemesis, When};
use crate::transport::Envelope;
use crate::world::World;

const NODE: &str = LEASE_SERVICE_NODE;

/// The node's main task; madsim runs it again on every restart.
pub(crate) async fn run(world: Arc<World>) {
    world.start(NODE);
    let inbox = world.inbox(NODE);
    while let Ok(env) = inbox.recv().await {
        let before = match &env.body {
            Message::RecordGet { .. } => NodeEvent::Acquire,
            Message::RecordCas { purpose, .. } => match purpose {
                MessageKind::Renew => NodeEvent::Renew,
                MessageKind::Release => NodeEvent::Release,
                _ => NodeEvent::Acquire,
            },
            _ => continue,
        };
        Nemesis::safepoint(&world, NODE, When::Before, before).await;
        let (reply, after) = handle(&world, &env);
        world.net.send(NODE, &env.src, Some(env.id), env.op, reply);
        if let Some(after) = after {
            Nemesis::safepoint(&world, NODE, When::After, after).await;
        }
    }
}

fn handle(world: &World, env: &Envelope) -> (Message, Option<NodeEvent>) {
    match &env.body {
        Message::RecordGet { lock } => {
            let seen = world.record_store.lock().expect("record store").get(lock);
            (Message::RecordGetReply(seen), None)
        }
        Message::RecordCas {
            lock,
            expected_version,
            record,
            purpose,
        } => {
            let (before, outcome) = {
                let mut store = world.record_store.lock().expect("record store");
                let before = store.get(lock);
                let takeover = *purpose == MessageKind::Acquire;
                let outcome = match (expected_version, record) {
                    (Some(v), _) => store.cas(lock, *v, record.clone(), takeover),
                    (None, Some(r)) => store.put(lock, r.clone()),
                    // An unconditional release is never sent: release always compares.
                    (None, None) => store.cas(lock, before.version, None, takeover),
                };
                (before, outcome)
            };
            let after = match &outcome {
                CasOutcome::Swapped {
                    acquired_version, ..
                } => Some(record_swap(
                    world,
                    env,
                    lock,
                    &before,
                    record.as_ref(),
                    *acquired_version,
                )),
                CasOutcome::Conflict { .. } => None,
            };
            let reply = Message::RecordCasReply {
                outcome,
                purpose: *purpose,
            };
            (reply, after)
        }
        other => unreachable!("run admitted {other:?}"),
    }
}

/// Record what a successful swap meant; returns its `after` safepoint event.
fn record_swap(
    world: &World,
    env: &Envelope,
    lock: &str,
    before: &Versioned,
    record: Option<&LeaseRecord>,
    acquired_version: u64,
) -> NodeEvent {
    let event = |kind: EventKind, holder: &str, token: u64, detail: Option<String>| {
        world.event(Event {
            node: NODE.into(),
            lock: Some(lock.into()),
            holder: Some(holder.into()),
            token: Some(token),
            detail,
            op: env.op,
            ..Event::new(kind)
        });
    };
    let previous = before.record.as_ref().map(|r| r.holder.as_str());
    match (previous, record) {
        // The holder swapped its own record and kept its token: a renewal.
        (Some(old), Some(new))
            if old == new.holder && acquired_version == before.acquired_version =>
        {
            event(EventKind::Renew, old, acquired_version, None);
            NodeEvent::Renew
        }
        (previous, Some(new)) => {
            if let Some(old) = previous {
                let detail = format!("taken over by {}", new.holder);
                event(
                    EventKind::Revoke,
                    old,
                    before.acquired_version,
                    Some(detail),
                );
            }
            event(EventKind::Grant, &new.holder, acquired_version, None);
            NodeEvent::Grant
        }
        (previous, None) => {
            let holder = previous.unwrap_or_default();
            event(EventKind::Release, holder, before.acquired_version, None);
            NodeEvent::Release
        }
    }
}
