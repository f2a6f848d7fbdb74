//! The transport's mechanics on a bare madsim runtime: where a message's delay lives.

// These tests drive the network from plain madsim tasks that sleep once each; the sim crate's
// own one-timer sleeps are crate-private.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;
use std::time::Duration;

use fencesim_scenario::{Cut, LatencyRange, LinkSel, MessageKind, NetworkSpec};
use fencesim_sim::clock::Clocks;
use fencesim_sim::seeds::{rng, Stream};
use fencesim_sim::transport::{HoldRule, Network, Rule};
use fencesim_sim::Message;

fn elapsed_ms() -> u64 {
    madsim::time::TimeHandle::current().elapsed().as_millis() as u64
}

/// A network between nodes `a` and `b` (call inside a simulation).
fn two_nodes(
    spec: NetworkSpec,
    seed: u64,
    holds: Vec<HoldRule>,
) -> (Arc<Network>, fencesim_sim::transport::Inboxes) {
    Network::new(
        &["a", "b"],
        spec,
        rng(seed, Stream::Network),
        holds,
        Arc::new(fencesim_sim::recorder::Recorder::new(u64::MAX)),
        Arc::new(Clocks::default()),
    )
}

/// A network with a fixed latency and nothing else.
fn spec(ms: u64) -> NetworkSpec {
    NetworkSpec {
        latency_ms: LatencyRange {
            min_ms: ms,
            max_ms: ms,
        },
        loss: 0.0,
        duplicate: 0.0,
        reorder_window_ms: 0,
        links: vec![],
    }
}

fn read(key: &str) -> Message {
    Message::Read { key: key.into() }
}

/// Run `f` inside a fresh simulation and return what it returns.
fn simulate<T: Send + 'static>(f: impl std::future::Future<Output = T> + Send + 'static) -> T {
    madsim::runtime::Runtime::with_seed_and_config(1, madsim::Config::default()).block_on(f)
}

#[test]
fn a_held_message_arrives_after_its_hold_and_others_do_not_wait() {
    let arrivals = simulate(async {
        let hold = HoldRule {
            from: "a".into(),
            kind: MessageKind::Read,
            nth: 2,
            duration_ms: 5_000,
            copy_ms: None,
        };
        let latency = spec(10);
        let (net, mut inboxes) = two_nodes(latency, 0, vec![hold]);
        let inbox = inboxes.remove("b").unwrap();
        for key in ["first", "second", "third"] {
            net.send("a", "b", None, None, read(key));
        }
        let mut arrivals = Vec::new();
        for _ in 0..3 {
            let env = inbox.recv().await.unwrap();
            let Message::Read { key } = env.body else {
                panic!("{:?}", env.body)
            };
            arrivals.push((key, elapsed_ms()));
        }
        arrivals
    });
    // "first" and "third" are due at the same instant, in an order the seed draws.
    let mut unheld = arrivals[..2].to_vec();
    unheld.sort();
    assert_eq!(
        unheld,
        [("first".to_string(), 10), ("third".to_string(), 10)]
    );
    assert_eq!(arrivals[2], ("second".to_string(), 5_000));
}

#[test]
fn a_hold_with_a_copy_delivers_the_message_twice_at_its_two_times() {
    let arrivals = simulate(async {
        let hold = HoldRule {
            from: "a".into(),
            kind: MessageKind::Read,
            nth: 1,
            duration_ms: 300,
            copy_ms: Some(100),
        };
        let (net, mut inboxes) = two_nodes(spec(10), 0, vec![hold]);
        let inbox = inboxes.remove("b").unwrap();
        let id = net.send("a", "b", None, None, read("once"));
        let mut arrivals = Vec::new();
        for _ in 0..2 {
            let env = inbox.recv().await.unwrap();
            arrivals.push((env.id == id, elapsed_ms()));
        }
        arrivals
    });
    // The copy first (100 ms), then the held message (300 ms): one id, two deliveries.
    assert_eq!(arrivals, [(true, 100), (true, 300)]);
}

#[test]
fn a_sender_paused_after_sending_does_not_delay_its_message() {
    let arrived_ms = simulate(async {
        let latency = spec(20);
        let (net, mut inboxes) = two_nodes(latency, 0, vec![]);
        let inbox = inboxes.remove("b").unwrap();
        let handle = madsim::runtime::Handle::current();
        let a = handle.create_node().name("a").build();
        let net2 = Arc::clone(&net);
        a.spawn(async move {
            net2.send("a", "b", None, None, read("k"));
            madsim::runtime::Handle::current().pause("a");
            madsim::task::yield_now().await;
            unreachable!("node a stays paused for the rest of the run");
        });
        inbox.recv().await.unwrap();
        elapsed_ms()
    });
    assert_eq!(arrived_ms, 20);
}

#[test]
fn a_paused_receiver_gets_its_messages_on_resume() {
    let seen_ms = simulate(async {
        let latency = spec(5);
        let (net, mut inboxes) = two_nodes(latency, 0, vec![]);
        let inbox = inboxes.remove("b").unwrap();
        let handle = madsim::runtime::Handle::current();
        let b = handle.create_node().name("b").build();
        let got = b.spawn(async move {
            inbox.recv().await.unwrap();
            elapsed_ms()
        });
        madsim::time::sleep(Duration::from_millis(1)).await;
        handle.pause("b");
        net.send("a", "b", None, None, read("k"));
        madsim::time::sleep(Duration::from_millis(300)).await;
        handle.resume("b");
        got.await.unwrap()
    });
    assert_eq!(seen_ms, 301);
}

/// Send `n` reads each way between a and b with `rule` in force; count what arrives where.
fn exchange(rule: Rule, n: usize) -> (usize, usize) {
    simulate(async move {
        let (net, mut inboxes) = two_nodes(spec(5), 0, vec![]);
        net.add_rule(7, rule);
        for _ in 0..n {
            net.send("a", "b", None, None, read("a->b"));
            net.send("b", "a", None, None, read("b->a"));
        }
        madsim::time::sleep(Duration::from_millis(100)).await;
        let (a, b) = (inboxes.remove("a").unwrap(), inboxes.remove("b").unwrap());
        (b.len(), a.len())
    })
}

#[test]
fn a_one_way_partition_drops_one_direction_only() {
    let cut = Rule::Cut(Cut::OneWay {
        from: "a".into(),
        to: "b".into(),
    });
    assert_eq!(exchange(cut, 10), (0, 10));
}

#[test]
fn an_isolated_node_hears_nothing_and_is_heard_by_no_one() {
    assert_eq!(exchange(Rule::Cut(Cut::Isolate("b".into())), 10), (0, 0));
}

#[test]
fn duplication_delivers_twice() {
    let dup = Rule::Duplicate(
        LinkSel {
            from: Some("a".into()),
            to: None,
        },
        1.0,
    );
    assert_eq!(exchange(dup, 10), (20, 10));
}

#[test]
fn loss_drops_about_its_rate() {
    let (to_b, to_a) = exchange(Rule::Loss(LinkSel::default(), 0.5), 1000);
    assert!((400..=600).contains(&to_b), "{to_b}");
    assert!((400..=600).contains(&to_a), "{to_a}");
}

#[test]
fn a_message_in_flight_when_the_link_is_cut_is_lost_and_one_sent_before_a_heal_lands() {
    let (dropped, healed) = simulate(async {
        let (net, mut inboxes) = two_nodes(spec(50), 0, vec![]);
        let inbox = inboxes.remove("b").unwrap();
        net.send("a", "b", None, None, read("cut under it"));
        madsim::time::sleep(Duration::from_millis(10)).await;
        net.add_rule(1, Rule::Cut(Cut::Isolate("b".into())));
        madsim::time::sleep(Duration::from_millis(100)).await;
        let dropped = net.stats().dropped_by_partition;
        net.remove_rules(1);
        net.send("a", "b", None, None, read("after heal"));
        let env = inbox.recv().await.unwrap();
        (dropped, env.body)
    });
    assert_eq!(dropped, 1);
    assert!(
        matches!(&healed, Message::Read { key } if key == "after heal"),
        "{healed:?}"
    );
}

#[test]
fn reordering_lets_later_messages_overtake() {
    let order = simulate(async {
        let (net, mut inboxes) = two_nodes(spec(1), 3, vec![]);
        net.add_rule(1, Rule::Reorder(100));
        let inbox = inboxes.remove("b").unwrap();
        for i in 0..20 {
            net.send("a", "b", None, None, read(&i.to_string()));
        }
        let mut order = Vec::new();
        for _ in 0..20 {
            let Message::Read { key } = inbox.recv().await.unwrap().body else {
                unreachable!()
            };
            order.push(key.parse::<u32>().unwrap());
        }
        order
    });
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(sorted, (0..20).collect::<Vec<_>>());
    assert_ne!(order, sorted, "some message overtook another");
}

#[test]
fn messages_due_at_the_same_instant_arrive_in_an_order_drawn_from_the_seed() {
    // Two messages sent back to back over a link of fixed latency are due at the same instant;
    // as with a burst a hold releases, neither order may be fixed (or a later message could
    // never overtake an earlier one, which is how stale writes land). The order is the seed's.
    let order = |seed: u64| {
        simulate(async move {
            let (net, mut inboxes) = two_nodes(spec(10), seed, vec![]);
            let inbox = inboxes.remove("b").unwrap();
            net.send("a", "b", None, None, read("first"));
            net.send("a", "b", None, None, read("second"));
            let mut keys = Vec::new();
            for _ in 0..2 {
                let env = inbox.recv().await.unwrap();
                assert_eq!(elapsed_ms(), 10);
                let Message::Read { key } = env.body else {
                    panic!("{:?}", env.body)
                };
                keys.push(key);
            }
            keys.join(",")
        })
    };
    let orders: Vec<String> = (0..20).map(order).collect();
    assert!(orders.contains(&"first,second".to_string()), "{orders:?}");
    assert!(orders.contains(&"second,first".to_string()), "{orders:?}");
    assert_eq!(
        orders,
        (0..20).map(order).collect::<Vec<_>>(),
        "same seeds, same orders"
    );
}
