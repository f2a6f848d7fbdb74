//! A `redis-N` node: the sans-IO [`RedisNode`] behind a mailbox, with its own disk. Keys expire
//! lazily by the node's expiry clock (its wall clock by default, as Redis does). The `fsync`
//! knob decides which writes survive a crash (Redis's `appendfsync always | everysec | no`),
//! and `restart_delay_ms` keeps a restarted node unavailable for that long (antirez's delayed
//! restarts). The node records no events: what a Redlock client concluded is in its operations
//! and its `belief` events, and that is what the checker judges.

use std::sync::Arc;
use std::time::Duration;

use fencesim_redlock::RedisNode;
use fencesim_scenario::{Fsync, NodeEvent};

use crate::message::Message;
use crate::nemesis::{Nemesis, When};
use crate::store::Disk;
use crate::world::World;

/// A Redis node's disk.
pub(crate) type RedisDisk = Disk<RedisNode>;

/// Node `index` (0-based; `redis-{index+1}`); madsim runs it again on every restart.
pub(crate) async fn run(world: Arc<World>, index: usize) {
    let name = format!("redis-{}", index + 1);
    let incarnation = world.start(&name);
    let spec = world.scenario.lock_service.clone();
    let redlock = spec
        .redlock
        .expect("a redis node runs only in a redlock scenario");
    let inbox = world.inbox(&name);
    if incarnation > 1 && redlock.restart_delay_ms > 0 {
        // Unavailable: whatever arrives meanwhile is dropped, and its sender times out.
        let drain = async { while inbox.recv().await.is_ok() {} };
        let _ = crate::timer::timeout(Duration::from_millis(redlock.restart_delay_ms), drain).await;
    }
    let mut node = world.redis_disk(&name, |d| d.recover());
    if let (Fsync::Periodic, Some(every_ms)) = (spec.fsync, spec.fsync_every_ms) {
        // Runs on this node, so it dies with it: a crash stops syncing too.
        let (w, n) = (Arc::clone(&world), name.clone());
        madsim::task::spawn(crate::guard::guarded(async move {
            loop {
                crate::timer::sleep(Duration::from_millis(every_ms)).await;
                w.redis_disk(&n, |d| d.sync());
            }
        }));
    }
    while let Ok(env) = inbox.recv().await {
        let Some(event) = request_event(&env.body) else {
            continue;
        };
        Nemesis::safepoint(&world, &name, When::Before, event).await;
        let now_ms = world.expiry_now_ms(&name);
        let (reply, changed) = handle(&mut node, &env.body, now_ms);
        if changed {
            world.redis_disk(&name, |d| d.write(&node, spec.fsync));
        }
        world.net.send(&name, &env.src, Some(env.id), env.op, reply);
        if let Some(after) = changed.then_some(event).and_then(after_event) {
            Nemesis::safepoint(&world, &name, When::After, after).await;
        }
    }
}

fn request_event(body: &Message) -> Option<NodeEvent> {
    match body {
        Message::RedisSet { .. } | Message::RedisIncr { .. } => Some(NodeEvent::Acquire),
        Message::RedisExtend { .. } => Some(NodeEvent::Renew),
        Message::RedisDelete { .. } => Some(NodeEvent::Release),
        _ => None,
    }
}

/// The `after` safepoint of a request that changed the node: a successful SET is a grant.
fn after_event(request: NodeEvent) -> Option<NodeEvent> {
    match request {
        NodeEvent::Acquire => Some(NodeEvent::Grant),
        NodeEvent::Renew | NodeEvent::Release => Some(request),
        _ => None,
    }
}

/// Apply one command at expiry-clock `now_ms`: the reply, and whether the data changed.
fn handle(node: &mut RedisNode, body: &Message, now_ms: i64) -> (Message, bool) {
    match body {
        Message::RedisSet { key, value, ttl_ms } => {
            let ok = node.set_nx_px(key, *value, *ttl_ms, now_ms);
            (Message::RedisSetReply(ok), ok)
        }
        Message::RedisExtend { key, value, ttl_ms } => {
            let ok = node.extend_if(key, *value, *ttl_ms, now_ms);
            (Message::RedisExtendReply(ok), ok)
        }
        Message::RedisDelete { key, value } => {
            let ok = node.delete_if(key, *value, now_ms);
            (Message::RedisDeleteReply(ok), ok)
        }
        Message::RedisIncr { counter } => (Message::RedisIncrReply(node.incr(counter)), true),
        other => unreachable!("request_event admitted {other:?}"),
    }
}
