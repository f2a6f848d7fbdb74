//! The transport's mechanics on a bare madsim runtime: where a message's delay lives.

use std::sync::Arc;
use std::time::Duration;

use fencesim_scenario::{LatencyRange, MessageKind, NetworkSpec};
use fencesim_sim::clock::Clocks;
use fencesim_sim::seeds::{rng, Stream};
use fencesim_sim::transport::{HoldRule, Network};
use fencesim_sim::Message;

fn elapsed_ms() -> u64 {
    madsim::time::TimeHandle::current().elapsed().as_millis() as u64
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
        };
        let latency = spec(10);
        let (net, mut inboxes) = Network::new(
            &["a", "b"],
            latency,
            rng(0, Stream::Network),
            vec![hold],
            Default::default(),
            Arc::new(Clocks::default()),
        );
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
    assert_eq!(arrivals[0], ("first".to_string(), 10));
    assert_eq!(arrivals[1], ("third".to_string(), 10));
    assert_eq!(arrivals[2], ("second".to_string(), 5_000));
}

#[test]
fn a_sender_paused_after_sending_does_not_delay_its_message() {
    let arrived_ms = simulate(async {
        let latency = spec(20);
        let (net, mut inboxes) = Network::new(
            &["a", "b"],
            latency,
            rng(0, Stream::Network),
            vec![],
            Default::default(),
            Arc::new(Clocks::default()),
        );
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
        let (net, mut inboxes) = Network::new(
            &["a", "b"],
            latency,
            rng(0, Stream::Network),
            vec![],
            Default::default(),
            Arc::new(Clocks::default()),
        );
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
