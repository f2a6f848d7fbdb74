//! Case K06 on the primary-backup lock service: asynchronous replication loses a grant at
//! failover (token reused, two holders); synchronous replication keeps it.

use crate::support;

use fencesim::run::{evaluate, RunOptions};
use fencesim::Scenario;
use fencesim_history::{EventKind, History, OpFn, OpType};

fn load(name: &str) -> Scenario {
    let path = support::root().join(format!("scenarios/incidents/{name}.toml"));
    crate::support::engine()
        .load_scenario(&path)
        .expect("bundled scenario loads")
}

fn opts() -> RunOptions {
    RunOptions {
        out: support::unwritten_dir("primary-backup"),
        scenario_arg: "primary-backup".into(),
        check_determinism: false,
        swarm: false,
        cancel: Default::default(),
    }
}

fn history(name: &str, seed: u64) -> History {
    let bytes = evaluate(crate::support::engine(), &load(name), seed, &opts())
        .expect("runs")
        .history;
    fencesim_history::read_jsonl(&bytes[..]).expect("our own history parses")
}

/// `(node, holder, token)` of every grant and revoke, in history order.
fn service_events(h: &History, kind: EventKind) -> Vec<(String, String, u64)> {
    h.events()
        .filter(|e| e.event == kind)
        .map(|e| {
            (
                e.node.to_string(),
                e.holder.as_deref().unwrap_or_default().to_owned(),
                e.token.unwrap_or(0),
            )
        })
        .collect()
}

#[test]
fn the_promoted_backup_revokes_the_unreplicated_lease_and_reissues_its_token() {
    let h = history("primary-backup-async-failover", 0);
    let owned = |v: [(&str, &str, u64); 2]| -> Vec<(String, String, u64)> {
        v.iter()
            .map(|(n, c, t)| (n.to_string(), c.to_string(), *t))
            .collect()
    };
    assert_eq!(
        service_events(&h, EventKind::Grant),
        owned([("lease-1", "client-1", 1), ("lease-2", "client-2", 1)])
    );
    let revokes = service_events(&h, EventKind::Revoke);
    assert_eq!(revokes, owned([("lease-2", "client-1", 1); 2])[..1]);
    let promoted: Vec<_> = h
        .events()
        .filter(|e| e.event == EventKind::Leader)
        .map(|e| (e.node.as_str(), e.detail.as_deref()))
        .collect();
    assert_eq!(promoted, [("lease-2", Some("epoch 2: promoted"))]);
}

#[test]
fn with_sync_replication_client_2_waits_for_the_lease_and_gets_token_2() {
    let h = history("primary-backup-sync-failover", 0);
    let tokens: Vec<(String, u64)> = h
        .ops()
        .filter(|o| o.f == OpFn::Acquire && o.op_type == OpType::Ok)
        .map(|o| (o.node.to_string(), o.token.unwrap()))
        .collect();
    assert_eq!(
        tokens,
        [("client-1".to_owned(), 1), ("client-2".to_owned(), 2)]
    );
    assert!(service_events(&h, EventKind::Revoke).is_empty());
    // client-1's lease moved to lease-2 and expired there (client-1's release went to the
    // crashed primary): only then was client-2 granted.
    let expired = service_events(&h, EventKind::Expire);
    assert_eq!(expired, [("lease-2".to_owned(), "client-1".to_owned(), 1)]);
}
