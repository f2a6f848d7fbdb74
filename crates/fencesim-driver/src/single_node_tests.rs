//! The single lease service's real node, driven by the driver alone: no madsim, no clock but
//! the one the test gives, as the coming explorer of `fencesim verify` will drive it.

use crate::node::{NodeDriver, NodeIo, NodeStep, NodeWake, Senses, Woken};
use fencesim_design::{
    Clock, Durability, FsyncPolicy, HeldLease, KeyEvent, NodeStart, Now, Origin, ServiceEvent,
    ServiceEventKind,
};
use fencesim_lease::{Attempt, LeaseMessage};
use fencesim_scenario::NodeEvent;
use fencesim_single::{LeaseDisk, LeaseNode, LeaseNodeConfig};

/// What the node's effects reached.
#[derive(Default)]
struct World {
    now_ns: u64,
    sent: Vec<(String, Option<u64>, LeaseMessage)>,
    records: Vec<ServiceEvent>,
    synced: Vec<u64>,
}

impl NodeIo<LeaseMessage, LeaseDisk> for World {
    fn now_ns(&self) -> u64 {
        self.now_ns
    }
    fn send(&mut self, to: &str, reply_to: Option<u64>, _: Option<u64>, msg: LeaseMessage) {
        self.sent.push((to.to_owned(), reply_to, msg));
    }
    fn persist(&mut self, _: LeaseDisk, durability: Durability, now_ns: u64) {
        if durability == Durability::Synced {
            self.synced.push(now_ns);
        }
    }
    fn sync(&mut self, now_ns: u64) {
        self.synced.push(now_ns);
    }
    fn declared(&self, _: &str) -> bool {
        false
    }
    fn first_to_apply(&mut self, _: u64) -> bool {
        true
    }
    fn record(&mut self, event: ServiceEvent) {
        self.records.push(event);
    }
    fn record_key(&mut self, _: KeyEvent) {}
    fn leads(&mut self, _: u64, _: Option<String>) {}
    fn hand_over(&mut self, _: &str, _: &str, _: &[HeldLease], _: &str) {}
}

fn config() -> LeaseNodeConfig {
    LeaseNodeConfig {
        max_ttl_ms: 10_000,
        fsync: FsyncPolicy::Always,
        token_counter: Default::default(),
        restart_grace_ms: 0,
        expiry_clock: Clock::Monotonic,
        acquire: Default::default(),
        release: Default::default(),
        reaper: Default::default(),
    }
}

fn acquire(lock: &str) -> LeaseMessage {
    LeaseMessage::Acquire {
        lock: lock.to_owned(),
        ttl_ms: 5_000,
        attempt: Attempt {
            incarnation: 1,
            number: 1,
        },
    }
}

/// Drain `node` at `ms` on its clocks, passing (and returning) every safepoint it asks for.
fn drain(node: &mut NodeDriver<LeaseNode>, world: &mut World, ms: i64) -> Vec<NodeEvent> {
    world.now_ns = ms as u64 * 1_000_000;
    let now = Now {
        mono_ms: ms,
        wall_ms: ms,
    };
    let clock = move || now;
    let mut random = |low: u64, _high: u64| low;
    let mut passed = Vec::new();
    loop {
        let senses = Senses {
            clock: &clock,
            random: &mut random,
        };
        match node.drain(senses, world) {
            NodeStep::Pass(decided) => {
                passed.extend(decided.iter().copied());
                node.pending.passed(decided);
            }
            NodeStep::Settled => return passed,
        }
    }
}

#[test]
fn a_grant_then_a_refusal_with_the_grants_safepoint_for_a_watched_node() {
    let mut world = World::default();
    let begin = NodeStart {
        name: "lease-service".to_owned(),
        index: 0,
        service_nodes: vec!["lease-service".to_owned()],
        incarnation: 1,
        durable: None,
    };
    let now = Now {
        mono_ms: 0,
        wall_ms: 0,
    };
    let senses = Senses {
        clock: &move || now,
        random: &mut |low, _| low,
    };
    let mut node = NodeDriver::<LeaseNode>::start(&config(), begin, true, senses, &mut world);
    assert_eq!(drain(&mut node, &mut world, 0), []);

    // client-1 asks at 10 ms: the node takes it up (the safepoint before an acquire).
    let woken = node.wake(NodeWake::Message {
        origin: Origin::new("client-1", 7, Some(0)),
        msg: acquire("l"),
    });
    let before = Some(NodeEvent::Acquire);
    assert_eq!(woken, Woken::Drain { before });
    assert_eq!(drain(&mut node, &mut world, 10), [NodeEvent::Grant]);
    assert_eq!(world.records.len(), 1);
    let grant = &world.records[0];
    assert_eq!(
        (grant.kind, grant.holder.as_str(), grant.token),
        (ServiceEventKind::Grant, "client-1", 1)
    );
    let (to, reply_to, _) = world.sent.last().expect("a reply");
    assert_eq!((to.as_str(), *reply_to), ("client-1", Some(7)));
    assert!(!world.synced.is_empty(), "fsync = always syncs the grant");

    // client-2 at 20 ms: the lock is held, refused at once (acquire = fail-fast), no grant.
    let woken = node.wake(NodeWake::Message {
        origin: Origin::new("client-2", 9, Some(1)),
        msg: acquire("l"),
    });
    assert!(matches!(woken, Woken::Drain { .. }), "taken up");
    assert_eq!(node.take_held(), Woken::Nothing, "nothing held back");
    assert_eq!(drain(&mut node, &mut world, 20), []);
    assert_eq!(world.records.len(), 1, "no second grant");
    let (to, reply_to, _) = world.sent.last().expect("a refusal");
    assert_eq!((to.as_str(), *reply_to), ("client-2", Some(9)));
}
