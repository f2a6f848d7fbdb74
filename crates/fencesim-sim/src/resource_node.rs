//! The `resource` node: the sans-IO fenced [`fencesim_resource::Resource`] behind a mailbox.
//! Every write becomes an `accept` or `reject` event, in the order the resource applied them:
//! the order the checker judges by. Its state is durable (a database that syncs each write),
//! so it survives a crash of the node.

use std::sync::Arc;
use std::time::Duration;

use fencesim_history::{Event, EventKind};
use fencesim_resource::{Resource, WriteOutcome};
use fencesim_scenario::{NodeEvent, ResourceCheck, RESOURCE_NODE};

use crate::message::Message;
use crate::nemesis::{Nemesis, When};
use crate::transport::Envelope;
use crate::world::World;

const NODE: &str = RESOURCE_NODE;

/// The node's main task; madsim runs it again on every restart.
pub(crate) async fn run(world: Arc<World>) {
    world.start(NODE);
    let inbox = world.inbox(NODE);
    while let Ok(env) = inbox.recv().await {
        match &env.body {
            Message::Read { key } => {
                Nemesis::safepoint(&world, NODE, When::Before, NodeEvent::Read).await;
                let value = world.resource.lock().expect("resource").read(key);
                world.net.send(
                    NODE,
                    &env.src,
                    Some(env.id),
                    env.op,
                    Message::ReadReply(value),
                );
                Nemesis::safepoint(&world, NODE, When::After, NodeEvent::Read).await;
            }
            Message::Write { key, token, .. } => {
                Nemesis::safepoint(&world, NODE, When::Before, NodeEvent::Write).await;
                let spec = &world.scenario.resource;
                if spec.check == ResourceCheck::CheckThenApply {
                    let checked = world.resource.lock().expect("resource").check(key, *token);
                    if checked.is_none() {
                        // K20: the write passed the check; it is stored later, unchecked,
                        // while the node goes on serving other requests.
                        let (w, delay_ms) = (Arc::clone(&world), spec.apply_delay_ms);
                        madsim::task::spawn(crate::guard::guarded(async move {
                            crate::timer::sleep(Duration::from_millis(delay_ms)).await;
                            write_and_reply(&w, &env, |r, key, token, value| {
                                r.apply(key, token, value)
                            })
                            .await;
                        }));
                        continue;
                    }
                }
                write_and_reply(&world, &env, |r, key, token, value| {
                    r.write(key, token, value)
                })
                .await;
            }
            // Not addressed to a resource (or a clock signal): nothing to do.
            _ => {}
        }
    }
}

/// Store the write in `env` with `store`, record the outcome as an `accept` or `reject` event,
/// reply, and pass the safepoint after it.
async fn write_and_reply(
    world: &Arc<World>,
    env: &Envelope,
    store: impl FnOnce(&mut Resource, &str, u64, &str) -> WriteOutcome,
) {
    let Message::Write { key, token, value } = &env.body else {
        return;
    };
    let outcome = store(
        &mut world.resource.lock().expect("resource"),
        key,
        *token,
        value,
    );
    let (kind, highest, event) = match outcome {
        WriteOutcome::Accepted { highest } => (EventKind::Accept, highest, NodeEvent::Accept),
        WriteOutcome::Rejected { highest, .. } => (EventKind::Reject, highest, NodeEvent::Reject),
    };
    world.event(Event {
        node: NODE.into(),
        key: Some(key.as_str().into()),
        holder: Some((&*env.src).into()),
        token: Some(*token),
        highest: Some(highest),
        op: env.op,
        ..Event::new(kind)
    });
    world.net.send(
        NODE,
        &env.src,
        Some(env.id),
        env.op,
        Message::WriteReply(outcome),
    );
    Nemesis::safepoint(world, NODE, When::After, event).await;
}
