//! `to_toml` writes a scenario that `parse` reads back to the same `Scenario`: for every bundled
//! scenario, for hand-written ones with every fault form, and for generated fault lists.

use crate::support;

use std::path::PathBuf;

use fencesim_scenario::{
    parse, to_toml, Action, Cut, Fault, LatencyRange, LinkSel, MessageKind, NodeEvent, NodeRole,
    Scenario, Trigger, LEADER,
};
use proptest::prelude::*;

/// Parse `source`, write it, parse that: the two scenarios must be equal and the written text a
/// fixed point of writing. Returns the written text.
fn round_trip(source: &str, file: &str) -> String {
    let first =
        parse(source, file, None, &support::designs()).unwrap_or_else(|e| panic!("{file}: {e}"));
    assert_round_trips(&first, file)
}

fn assert_round_trips(scenario: &Scenario, file: &str) -> String {
    let written = to_toml(scenario);
    let again = parse(&written, "written.toml", None, &support::designs())
        .unwrap_or_else(|e| panic!("{file}: the written scenario does not parse: {e}\n{written}"));
    assert_eq!(
        &again, scenario,
        "{file} changed in the round trip:\n{written}"
    );
    assert_eq!(
        to_toml(&again),
        written,
        "{file}: writing is not a fixed point"
    );
    written
}

#[test]
fn every_bundled_scenario_round_trips() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut files: Vec<PathBuf> = [dir.clone(), dir.join("incidents")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 30,
        "expected the bundled scenarios in {}",
        dir.display()
    );
    for path in files {
        let source = std::fs::read_to_string(&path).unwrap();
        round_trip(&source, &path.display().to_string());
    }
}

#[test]
fn the_test_fixtures_round_trip() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    let mut files = vec![root.join("lease-record-restarted-holder.toml")];
    for e in std::fs::read_dir(root.join("explore")).unwrap() {
        files.push(e.unwrap().path());
    }
    files.sort();
    assert!(files.len() >= 5, "{files:?}");
    for path in files {
        let source = std::fs::read_to_string(&path).unwrap();
        let written = round_trip(&source, &path.display().to_string());
        if source.contains("placement = \"targeted\"") {
            assert!(written.contains("placement = \"targeted\""), "{written}");
        }
    }
}

/// Every fault kind, every trigger form, every cut, with a single lock service (the only design
/// that can be restored), named and counted clients, links of both kinds and a description that
/// needs escaping.
const EVERY_FAULT: &str = r#"
name = "every-fault"
description = """
Every fault kind, trigger form and cut. A "quoted" word, a back\\slash, a tab\t, and '''.
  Indented.
"""
seeds = "3..7"
duration_ms = 100000
max_records = 5000

[network]
latency_ms = [2, 20]
loss = 0.01
duplicate = 1
reorder_window_ms = 5

[[network.links]]
from = "alice"
to = "resource"
latency_ms = [30, 40]

[[network.links]]
from = "lease-service"
to = "client-2"
latency_ms = [5, 6]
one_way = true

[lock_service]
max_ttl_ms = 10000
expiry_clock = "wall"
fsync = "periodic"
fsync_every_ms = 250
token_counter = "store"
restart_grace_ms = 100

[resource]
mode = "unfenced"
keys = ["a", "b"]

[[clients]]
name = "alice"
lock = "other"
key = "b"
ttl_ms = 5000
renew_ms = 1000
work_ms = 1500
cycles = 3

[[clients]]
count = 2
ttl_ms = 2000
backoff_ms = [10, 20]
validity_check = false
safety_margin_ms = 100
timeout_ms = 300
start_ms = 50

[[faults]]
kind = "pause"
node = "alice"
before = "write"
nth = 2
duration_ms = 500

[[faults]]
kind = "pause"
node = "client-2"
at_ms = 1000
duration_ms = 300

[[faults]]
kind = "hold"
from = "alice"
message = "write"
nth = 3
duration_ms = 15000

[[faults]]
kind = "hold"
from = "lease-service"
message = "acquire-reply"
duration_ms = 10

[[faults]]
kind = "hold-all"
message = "acquire-reply"
from = "lease-service"
at_ms = 2000
duration_ms = 100

[[faults]]
kind = "hold-all"
message = "write"
at_ms = 2100
duration_ms = 100

[[faults]]
kind = "latency"
from = "alice"
to = "resource"
latency_ms = [100, 200]
at_ms = 3000
duration_ms = 1000

[[faults]]
kind = "latency"
to = "resource"
latency_ms = [0, 0]
at_ms = 3100
duration_ms = 1000

[[faults]]
kind = "latency"
latency_ms = [7, 9]
at_ms = 3200
duration_ms = 1000

[[faults]]
kind = "loss"
from = "client-2"
rate = 0.25
at_ms = 4000
duration_ms = 100

[[faults]]
kind = "duplicate"
to = "resource"
rate = 0.25
at_ms = 4100
duration_ms = 100

[[faults]]
kind = "duplicate"
rate = 1
at_ms = 4200
duration_ms = 100

[[faults]]
kind = "reorder"
window_ms = 50
at_ms = 5000
duration_ms = 1000

[[faults]]
kind = "partition"
node = "resource"
after = "accept"
duration_ms = 2000

[[faults]]
kind = "partition"
node = "client-3"
at_ms = 5500

[[faults]]
kind = "partition"
groups = [["lease-service", "alice"], ["client-2", "client-3"], []]
at_ms = 6000

[[faults]]
kind = "heal"
at_ms = 7000

[[faults]]
kind = "partition"
from = "client-2"
to = "lease-service"
at_ms = 8000
duration_ms = 500

[[faults]]
kind = "clock-jump"
node = "lease-service"
delta_ms = -20000
at_ms = 9000

[[faults]]
kind = "clock-skew"
node = "client-3"
offset_ms = 700
before = "acquire"

[[faults]]
kind = "clock-skew"
node = "client-2"
offset_ms = -700
at_ms = 9500
duration_ms = 2000

[[faults]]
kind = "clock-drift"
node = "lease-service"
ppm = -5000
after = "grant"
nth = 2
duration_ms = 10000

[[faults]]
kind = "clock-drift"
node = "alice"
ppm = 1000000
at_ms = 9600

[[faults]]
kind = "clock-strobe"
node = "alice"
offset_ms = -300
period_ms = 50
at_ms = 10000
duration_ms = 1000

[[faults]]
kind = "crash"
node = "lease-service"
after = "grant"
nth = 4
duration_ms = 2000

[[faults]]
kind = "crash"
node = "resource"
at_ms = 12000

[[faults]]
kind = "restart"
node = "resource"
at_ms = 13000

[[faults]]
kind = "restore"
node = "lease-service"
snapshot_at_ms = 5000
at_ms = 14000

[[faults]]
kind = "restore"
node = "lease-service"
snapshot_at_ms = 100
before = "renew"
nth = 7

[[faults]]
kind = "final-heal"
at_ms = 50000
window_ms = 30000

[expect]
verdict = "invalid"
violations = ["stale-write-accepted", "token-reused"]
absent = ["not-linearizable"]
"#;

#[test]
fn every_fault_form_round_trips() {
    let written = round_trip(EVERY_FAULT, "every-fault.toml");
    let scenario = parse(EVERY_FAULT, "every-fault.toml", None, &support::designs()).unwrap();
    let kinds: Vec<&str> = scenario
        .faults
        .iter()
        .map(|f| f.action.kind().as_str())
        .collect();
    for kind in [
        "pause",
        "hold",
        "hold-all",
        "latency",
        "loss",
        "duplicate",
        "reorder",
        "partition",
        "heal",
        "clock-jump",
        "clock-skew",
        "clock-drift",
        "clock-strobe",
        "crash",
        "restart",
        "restore",
        "final-heal",
    ] {
        assert!(kinds.contains(&kind), "{kind} is missing from the test");
    }
    // Two directions of one link come back as one two-way link; a one-way link stays one-way.
    assert_eq!(written.matches("[[network.links]]").count(), 2, "{written}");
    assert_eq!(written.matches("one_way = true").count(), 1, "{written}");
}

/// `leader` targets, Raft's and a random nemesis's settings, none of them defaults.
const RAFT_LEADER: &str = r#"
name = "raft-leader"
duration_ms = 200000

[lock_service]
kind = "raft"
replicas = 5
max_ttl_ms = 4000
revoke_term_check = false
leader_change = "none"

[[clients]]
count = 2
ttl_ms = 4000

[[faults]]
kind = "pause"
node = "leader"
at_ms = 1000
duration_ms = 5000

[[faults]]
kind = "crash"
node = "leader"
at_ms = 2000

[[faults]]
kind = "partition"
node = "leader"
at_ms = 3000
duration_ms = 100

[[faults]]
kind = "clock-jump"
node = "leader"
delta_ms = 1500
at_ms = 4000

[[faults]]
kind = "clock-skew"
node = "leader"
offset_ms = -1
at_ms = 4000

[[faults]]
kind = "clock-drift"
node = "leader"
ppm = -999999
at_ms = 4000
duration_ms = 1

[[faults]]
kind = "clock-strobe"
node = "leader"
offset_ms = 10
period_ms = 3
at_ms = 4000
duration_ms = 100

[[faults]]
kind = "hold"
from = "lease-3"
message = "raft"
nth = 10
duration_ms = 100

[[faults]]
kind = "hold-all"
message = "redirect"
at_ms = 4000
duration_ms = 100

[[faults]]
kind = "partition"
node = "lease-2"
before = "release"
nth = 3

[nemesis]
kinds = ["hold-all", "clock-strobe", "latency"]
swarm = true
targets = ["lease-1", "client-2"]
start_ms = 7
interval_ms = [1, 2]
duration_ms = [3, 4]
heal_at_ms = 100000
recovery_periods = 2
clock_jump_ms = [-5, -1]
clock_offset_ms = [0, 0]
drift_ppm = [-999999, 1000000]
rate = [0.125, 1]
latency_ms = [0, 3]
reorder_window_ms = [1, 1]

[expect]
verdict = "valid"
absent = ["no-progress-after-heal"]
"#;

#[test]
fn leader_targets_and_the_nemesis_round_trip() {
    round_trip(RAFT_LEADER, "raft-leader.toml");
}

/// The layout a user sees: sections in file order, defaults written out, one client per table.
#[test]
fn the_output_reads_like_a_scenario_file() {
    let source = "name = \"tiny\"\ndescription = \"One pause.\"\nduration_ms = 1000\n\
                  [[clients]]\ncount = 2\nttl_ms = 100\n\
                  [[faults]]\nkind = \"pause\"\nnode = \"client-1\"\nbefore = \"write\"\n\
                  duration_ms = 50\n\
                  [[faults]]\nkind = \"final-heal\"\nat_ms = 400\nwindow_ms = 600\n\
                  [expect]\nverdict = \"valid\"\n";
    let expected = r#"name = "tiny"
description = """
One pause.
"""
seeds = "0..10"
duration_ms = 1000
max_records = 2000000

[network]
latency_ms = [1, 10]
loss = 0.0
duplicate = 0.0
reorder_window_ms = 0

[lock_service]
kind = "single"
max_ttl_ms = 60000
fsync = "always"
expiry_clock = "monotonic"
token_counter = "durable"
restart_grace_ms = 0
acquire = "fail-fast"
reaper = "respects-leases"
release = "compare-and-delete"

[resource]
mode = "fenced"
keys = ["register"]
check = "atomic"
tokenless = "reject"

[[clients]]
name = "client-1"
lock = "lock"
key = "register"
ttl_ms = 100
work_ms = 0
cycles = 1
start_ms = 0
timeout_ms = 1000
backoff_ms = [100, 300]
safety_margin_ms = 0
validity_check = true
deadline_from = "request"
renew_after_failure = "retry"
reclaim = "by-session"
on_lost_lease = "stop"

[[clients]]
name = "client-2"
lock = "lock"
key = "register"
ttl_ms = 100
work_ms = 0
cycles = 1
start_ms = 0
timeout_ms = 1000
backoff_ms = [100, 300]
safety_margin_ms = 0
validity_check = true
deadline_from = "request"
renew_after_failure = "retry"
reclaim = "by-session"
on_lost_lease = "stop"

[[faults]]
kind = "pause"
node = "client-1"
before = "write"
nth = 1
duration_ms = 50

[[faults]]
kind = "final-heal"
window_ms = 600
at_ms = 400

[expect]
verdict = "valid"
"#;
    assert_eq!(round_trip(source, "tiny.toml"), expected);
}

// Generated fault lists.

/// The run length of the generated scenarios, ms.
const RUN_MS: u64 = 100_000;
/// The largest number a field takes.
const MAX: u64 = 1_000_000_000_000;

/// The fixed scenario the faults are generated for: `raft` gives `leader`, Raft messages and
/// redirects; otherwise a single service, which gives `restore`.
fn base(raft: bool) -> Scenario {
    let service = if raft {
        "kind = \"raft\""
    } else {
        "kind = \"single\""
    };
    let source = format!(
        "name = \"generated\"\nduration_ms = {RUN_MS}\n[lock_service]\n{service}\n\
         [[clients]]\nname = \"alice\"\nttl_ms = 1000\n[[clients]]\ncount = 2\nttl_ms = 1000\n\
         [expect]\nverdict = \"valid\"\n"
    );
    parse(&source, "generated.toml", None, &support::designs()).unwrap()
}

const MESSAGES: [MessageKind; 13] = [
    MessageKind::Acquire,
    MessageKind::AcquireReply,
    MessageKind::Renew,
    MessageKind::RenewReply,
    MessageKind::Release,
    MessageKind::ReleaseReply,
    MessageKind::Read,
    MessageKind::ReadReply,
    MessageKind::Write,
    MessageKind::WriteReply,
    MessageKind::Raft,
    MessageKind::Redirect,
    MessageKind::Replicate,
];

/// The single service's one node (the generated scenarios are single or Raft ones).
const LEASE_SERVICE_NODE: &str = "lease-service";

/// The role of `node` in a generated single or Raft scenario.
fn role(node: &str) -> NodeRole {
    let replica = node
        .strip_prefix("lease-")
        .is_some_and(|n| n.parse::<u64>().is_ok());
    match node {
        LEASE_SERVICE_NODE => NodeRole::LeaseService,
        "resource" => NodeRole::Resource,
        _ if replica => NodeRole::LeaseService,
        _ => NodeRole::Client,
    }
}

/// Whether `from` sends `message` in a single or Raft scenario (validate_fault.rs refuses a
/// hold that could never match).
fn sends(raft: bool, from: &str, message: MessageKind) -> bool {
    let role = role(from);
    role.sends(message)
        && match message {
            MessageKind::Raft | MessageKind::Redirect => raft && role == NodeRole::LeaseService,
            MessageKind::Replicate => false,
            _ => true,
        }
}

/// `(sender, message)` pairs a hold can match.
fn sent_pairs(raft: bool, nodes: &[String]) -> Vec<(String, MessageKind)> {
    nodes
        .iter()
        .flat_map(|n| MESSAGES.iter().map(move |m| (n.clone(), *m)))
        .filter(|(n, m)| sends(raft, n, *m))
        .collect()
}

fn at() -> impl Strategy<Value = Trigger> {
    (0..RUN_MS).prop_map(|at_ms| Trigger::At { at_ms })
}

/// `at_ms`, or an event `node` reaches (before or after it), with any `nth`.
fn node_trigger(node: &str) -> BoxedStrategy<Trigger> {
    let (before, after) = NodeEvent::safepoints(role(node));
    // Events counted from the start (the default, left out of the file) or from a time.
    let event = |events: &'static [NodeEvent]| {
        (
            prop::sample::select(events),
            1..=MAX,
            prop_oneof![Just(0), 1..RUN_MS],
        )
    };
    prop_oneof![
        at(),
        event(before).prop_map(|(event, nth, count_from_ms)| Trigger::Before {
            event,
            nth,
            count_from_ms
        }),
        event(after).prop_map(|(event, nth, count_from_ms)| Trigger::After {
            event,
            nth,
            count_from_ms
        }),
    ]
    .boxed()
}

/// A node-bound fault's target and trigger: `leader` (Raft only) with `at_ms`, or a node with
/// any trigger it reaches.
fn target(raft: bool, nodes: Vec<String>) -> BoxedStrategy<(String, Trigger)> {
    let named = prop::sample::select(nodes)
        .prop_flat_map(|n| (Just(n.clone()), node_trigger(&n)))
        .boxed();
    if raft {
        prop_oneof![named, at().prop_map(|t| (LEADER.to_owned(), t))].boxed()
    } else {
        named
    }
}

fn opt_node(nodes: &[String]) -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop::sample::select(nodes.to_vec()))
}

fn window(trigger: Trigger, duration: Option<u64>, action: Action) -> Fault {
    Fault {
        action,
        trigger,
        duration_ms: duration,
    }
}

/// Any valid fault of `base(raft)` other than a final heal (at most one of those is allowed).
fn arb_fault(raft: bool) -> BoxedStrategy<Fault> {
    let nodes = base(raft).node_names();
    let node = || prop::sample::select(nodes.clone());
    let duration = || 1..=MAX;
    let maybe = || prop::option::of(duration());
    let signed = || -(MAX as i64)..=MAX as i64;
    let rate = prop_oneof![Just(0.0), Just(0.25), Just(1.0), 0.0..=1.0f64];
    let link = (opt_node(&nodes), opt_node(&nodes))
        .prop_map(|(from, to)| LinkSel { from, to })
        .boxed();
    let pairs = sent_pairs(raft, &nodes);
    let messages: Vec<MessageKind> = MESSAGES
        .into_iter()
        .filter(|m| pairs.iter().any(|(_, p)| p == m))
        .collect();
    let cut_at = prop_oneof![
        prop::collection::vec(prop::collection::vec(node(), 0..4), 2..4).prop_map(Cut::Groups),
        (node(), node()).prop_map(|(from, to)| Cut::OneWay { from, to }),
    ];
    let clocked = target(raft, nodes.clone());
    let mut kinds: Vec<BoxedStrategy<Fault>> = vec![
        (clocked.clone(), duration())
            .prop_map(|((node, t), d)| window(t, Some(d), Action::Pause { node }))
            .boxed(),
        (
            prop::sample::select(pairs.clone()),
            1..=MAX,
            prop::option::of(1..=MAX),
            duration(),
        )
            .prop_map(|((from, message), nth, copy_ms, d)| {
                let hold = Action::Hold {
                    from,
                    message,
                    nth,
                    copy_ms,
                };
                window(Trigger::At { at_ms: 0 }, Some(d), hold)
            })
            .boxed(),
        (prop::sample::select(pairs), any::<bool>(), at(), duration())
            .prop_map(|((from, message), any_sender, t, d)| {
                let from = (!any_sender).then_some(from);
                window(t, Some(d), Action::HoldAll { message, from })
            })
            .boxed(),
        (prop::sample::select(messages), at(), duration())
            .prop_map(|(message, t, d)| {
                window(
                    t,
                    Some(d),
                    Action::HoldAll {
                        message,
                        from: None,
                    },
                )
            })
            .boxed(),
        (link.clone(), (0..=MAX, 0..=MAX), at(), duration())
            .prop_map(|(link, (a, b), t, d)| {
                let latency_ms = LatencyRange {
                    min_ms: a.min(b),
                    max_ms: a.max(b),
                };
                window(t, Some(d), Action::Latency { link, latency_ms })
            })
            .boxed(),
        (link.clone(), rate.clone(), at(), duration())
            .prop_map(|(link, rate, t, d)| window(t, Some(d), Action::Loss { link, rate }))
            .boxed(),
        (link, rate, at(), duration())
            .prop_map(|(link, rate, t, d)| window(t, Some(d), Action::Duplicate { link, rate }))
            .boxed(),
        (1..=MAX, at(), duration())
            .prop_map(|(window_ms, t, d)| window(t, Some(d), Action::Reorder { window_ms }))
            .boxed(),
        (clocked.clone(), maybe())
            .prop_map(|((n, t), d)| {
                window(
                    t,
                    d,
                    Action::Partition {
                        cut: Cut::Isolate(n),
                    },
                )
            })
            .boxed(),
        (cut_at, at(), maybe())
            .prop_map(|(cut, t, d)| window(t, d, Action::Partition { cut }))
            .boxed(),
        at().prop_map(|t| window(t, None, Action::Heal)).boxed(),
        (clocked.clone(), signed())
            .prop_map(|((node, t), delta_ms)| window(t, None, Action::ClockJump { node, delta_ms }))
            .boxed(),
        (clocked.clone(), signed(), maybe())
            .prop_map(|((node, t), offset_ms, d)| {
                window(t, d, Action::ClockSkew { node, offset_ms })
            })
            .boxed(),
        (clocked.clone(), -999_999i64..=1_000_000, maybe())
            .prop_map(|((node, t), ppm, d)| window(t, d, Action::ClockDrift { node, ppm }))
            .boxed(),
        (clocked.clone(), signed(), 1..=MAX, duration())
            .prop_map(|((node, t), offset_ms, period_ms, d)| {
                let strobe = Action::ClockStrobe {
                    node,
                    offset_ms,
                    period_ms,
                };
                window(t, Some(d), strobe)
            })
            .boxed(),
        (clocked, maybe())
            .prop_map(|((node, t), d)| window(t, d, Action::Crash { node }))
            .boxed(),
        (node(), at())
            .prop_map(|(node, t)| window(t, None, Action::Restart { node }))
            .boxed(),
    ];
    if !raft {
        kinds.push(restore());
    }
    prop::strategy::Union::new(kinds).boxed()
}

/// A restore of the single service, from a backup no later than the restore (when its time is
/// known) nor than the run's end.
fn restore() -> BoxedStrategy<Fault> {
    node_trigger(LEASE_SERVICE_NODE)
        .prop_flat_map(|t| {
            let latest = match t {
                Trigger::At { at_ms } => at_ms,
                _ => RUN_MS,
            };
            (Just(t), 0..=latest)
        })
        .prop_map(|(t, snapshot_at_ms)| {
            let node = LEASE_SERVICE_NODE.to_owned();
            window(
                t,
                None,
                Action::Restore {
                    node,
                    snapshot_at_ms,
                },
            )
        })
        .boxed()
}

/// A final heal whose recovery window ends within the run.
fn final_heal() -> impl Strategy<Value = Fault> {
    (0..RUN_MS)
        .prop_flat_map(|at_ms| (Just(at_ms), 1..=RUN_MS - at_ms))
        .prop_map(|(at_ms, window_ms)| {
            window(Trigger::At { at_ms }, None, Action::FinalHeal { window_ms })
        })
}

/// Faults for `base(raft)`, with at most one final heal somewhere among them.
fn arb_faults(raft: bool) -> impl Strategy<Value = Vec<Fault>> {
    (
        prop::collection::vec(arb_fault(raft), 0..12),
        prop::option::of(final_heal()),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(mut faults, heal, place)| {
            if let Some(heal) = heal {
                faults.insert(place.index(faults.len() + 1), heal);
            }
            faults
        })
}

proptest! {
    #[test]
    fn generated_single_service_faults_round_trip(faults in arb_faults(false)) {
        let scenario = Scenario { faults, ..base(false) };
        assert_round_trips(&scenario, "generated single");
    }

    #[test]
    fn generated_raft_faults_round_trip(faults in arb_faults(true)) {
        let scenario = Scenario { faults, ..base(true) };
        assert_round_trips(&scenario, "generated raft");
    }
}
