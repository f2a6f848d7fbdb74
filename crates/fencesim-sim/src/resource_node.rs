//! The `resource` node: a design's [`FencedResource`] behind a mailbox. Every write becomes an
//! `accept` or `reject` event, in the order the resource decided them: the order the checker
//! judges by. The resource's state is one instance for the whole run (a database that syncs
//! each write), so it survives a crash of the node.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fencesim_design::{FencedResource, WriteDecision, WriteOutcome};
use fencesim_driver::resource::mutation_event;
use fencesim_scenario::{NodeEvent, RESOURCE_NODE};

use crate::message::Message;
use crate::nemesis::{Nemesis, When};
use crate::transport::Envelope;
use crate::world::World;

const NODE: &str = RESOURCE_NODE;

/// The node's main task; madsim runs it again on every restart.
pub(crate) async fn run<R: FencedResource>(world: Arc<World>, store: Arc<Mutex<R>>) {
    world.start(NODE);
    let inbox = world.inbox(NODE);
    while let Ok(env) = inbox.recv().await {
        match &env.body {
            Message::Read { key } => {
                Nemesis::safepoint(&world, NODE, When::Before, NodeEvent::Read).await;
                let value = lock(&store).read(key);
                world.net.send(
                    NODE,
                    &env.src,
                    Some(env.id),
                    env.op,
                    Message::ReadReply(value),
                );
                Nemesis::safepoint(&world, NODE, When::After, NodeEvent::Read).await;
            }
            Message::Write { key, token, value } => {
                Nemesis::safepoint(&world, NODE, When::Before, NodeEvent::Write).await;
                let decision = lock(&store).write(key, *token, value);
                match decision {
                    WriteDecision::Now(outcome) => reply(&world, &env, outcome).await,
                    WriteDecision::Later { after_ms } => {
                        // K20: the write passed the check; it is stored later while the node
                        // goes on serving other requests.
                        let (w, s) = (Arc::clone(&world), Arc::clone(&store));
                        madsim::task::spawn(crate::guard::guarded(async move {
                            crate::timer::sleep(Duration::from_millis(after_ms)).await;
                            if let Message::Write { key, token, value } = &env.body {
                                let outcome = lock(&s).apply_due(key, *token, value);
                                reply(&w, &env, outcome).await;
                            }
                        }));
                    }
                }
            }
            Message::Delete { key, token } => {
                let outcome = lock(&store).delete(key, *token);
                reply(&world, &env, outcome).await;
            }
            // Not addressed to a resource (or a clock signal): nothing to do.
            _ => {}
        }
    }
}

/// The resource, whose lock a panicking task cannot leave unusable for the rest of the run.
fn lock<R>(store: &Mutex<R>) -> MutexGuard<'_, R> {
    store.lock().unwrap_or_else(|e| e.into_inner())
}

/// Record the mutation in `env` (a write or a delete) decided as `outcome` as an `accept` or
/// `reject` event, reply, and pass the safepoint after it.
async fn reply(world: &Arc<World>, env: &Envelope, outcome: WriteOutcome) {
    let (key, token, delete) = match &env.body {
        Message::Write { key, token, .. } => (key, Some(*token), false),
        Message::Delete { key, token } => (key, *token, true),
        _ => return,
    };
    let (event, after) = mutation_event(key, &env.src, token, env.op, delete, &outcome);
    world.event(event);
    world.net.send(
        NODE,
        &env.src,
        Some(env.id),
        env.op,
        Message::WriteReply(outcome),
    );
    Nemesis::safepoint(world, NODE, When::After, after).await;
}
