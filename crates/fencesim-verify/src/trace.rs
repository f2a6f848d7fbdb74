//! What the checks can still tell apart in a history: the part of a schedule's history that
//! is part of a search state's fingerprint.
//!
//! Two schedules that bring every agent to the same state but record the same events in
//! different interleavings are one state for the search when no checked property can tell
//! their histories apart, now or after any continuation. The checked properties read the
//! history in these orders only:
//! - per lock, the lock service's decisions (grant, renew, release, expire, revoke) in order,
//!   across nodes: `token-not-monotonic`, `token-reused` and `release-by-non-holder`;
//! - per key, the resource's decisions (accept, reject) in order: `stale-write-accepted` and
//!   `unfenced-mutation`;
//! - per client, its operations in order;
//! - across clients, the real-time order of operations on the resource, which
//!   linearizability respects (Herlihy and Wing 1990): `not-linearizable`. Of that order, the
//!   trace keeps what linearizability can still tell apart: every configuration a
//!   linearization of the history so far may be in ([`Linear`], just-in-time linearization).
//!
//! So the trace keeps a hash chain per lock, per key and per client, and the register's
//! configurations, and forgets how records of different chains interleave. That is the
//! partial-order reduction: deliveries and timers of different agents commute, and their
//! interleavings are explored as one state once their histories agree on every chain and
//! linearize alike. A chain keeps more order than a check needs, never less.

use std::hash::Hasher;
use std::sync::Arc;

use fencesim_history::{Entry, EventKind, OpFn};

use crate::fingerprint::Fingerprint;
use crate::linear::Linear;

/// The chains of one history, each keyed by the fingerprint of its lock, key or client name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckTrace {
    /// Hash chains, sorted by (kind of chain, name's fingerprint).
    chains: Vec<((u8, u64), u64)>,
    /// The register's configurations (shared between states until a call to the resource
    /// changes them), and their fingerprint.
    linear: Arc<Linear>,
    linear_fp: u64,
}

const LOCK: u8 = 0;
const KEY: u8 = 1;
const CLIENT: u8 = 2;

impl CheckTrace {
    /// Take `entry` into its chain. Answers whether a check that runs along the path (every
    /// checked property but linearizability) has something new to judge.
    pub fn take(&mut self, entry: &Entry) -> bool {
        match entry {
            Entry::Event(ev) => {
                let chain = match ev.event {
                    EventKind::Grant
                    | EventKind::Renew
                    | EventKind::Release
                    | EventKind::Expire
                    | EventKind::Revoke => (LOCK, name(ev.lock.as_deref())),
                    EventKind::Accept | EventKind::Reject => (KEY, name(ev.key.as_deref())),
                    _ => return false,
                };
                let seen = format!(
                    "{:?} {:?} {:?} {:?} {:?} {:?}",
                    ev.event, ev.lock, ev.key, ev.holder, ev.token, ev.op
                );
                self.extend(chain, &seen);
                ev.event != EventKind::Reject
            }
            Entry::Op(op) => {
                let client = name(Some(op.node.as_str()));
                let on_resource =
                    matches!(op.f, OpFn::Read | OpFn::Write | OpFn::Cas | OpFn::Delete);
                let seen = format!(
                    "{:?} {} {:?} {:?} {:?} {:?} {:?} {}",
                    op.f,
                    op.op_type.as_str(),
                    op.lock,
                    op.key,
                    op.token,
                    op.value,
                    op.expected,
                    op.process
                );
                if on_resource {
                    Arc::make_mut(&mut self.linear).take(op);
                    self.linear_fp = crate::fingerprint::of_debug(&*self.linear);
                }
                self.extend((CLIENT, client), &seen);
                false
            }
        }
    }

    /// Feed every chain to `h`.
    pub fn hash_into(&self, h: &mut dyn Hasher) {
        for ((kind, key), chain) in &self.chains {
            h.write_u8(*kind);
            h.write_u64(*key);
            h.write_u64(*chain);
        }
        h.write_u64(self.linear_fp);
    }

    fn extend(&mut self, chain: (u8, u64), seen: &str) {
        let at = match self.chains.binary_search_by_key(&chain, |(c, _)| *c) {
            Ok(at) => at,
            Err(at) => {
                self.chains
                    .insert(at, (chain, Fingerprint::default().finish()));
                at
            }
        };
        let mut h = Fingerprint::default();
        h.write_u64(self.chains[at].1);
        h.write(seen.as_bytes());
        self.chains[at].1 = h.finish();
    }
}

/// The fingerprint of a lock, key or client name (`None`: the chain of records without one).
fn name(name: Option<&str>) -> u64 {
    let mut h = Fingerprint::default();
    if let Some(name) = name {
        h.write(name.as_bytes());
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencesim_history::{Event, Op, OpType, Stamp};

    fn grant(lock: &str, token: u64) -> Entry {
        Entry::Event(Event {
            lock: Some(lock.into()),
            holder: Some("client-1".into()),
            token: Some(token),
            ..Event::new(EventKind::Grant)
        })
    }

    fn op(client: &str, f: OpFn, op_type: OpType) -> Entry {
        Entry::Op(Op {
            at: Stamp::default(),
            process: 0,
            node: client.into(),
            op_type,
            f,
            lock: None,
            key: Some("register".into()),
            token: None,
            value: None,
            expected: None,
            value_unknown: false,
            ttl_ms: None,
            error: None,
        })
    }

    fn trace(entries: &[Entry]) -> CheckTrace {
        let mut t = CheckTrace::default();
        for e in entries {
            t.take(e);
        }
        t
    }

    #[test]
    fn records_of_different_chains_commute_and_of_one_chain_do_not() {
        let (a, b) = (grant("lock-a", 1), grant("lock-b", 1));
        assert_eq!(
            trace(&[a.clone(), b.clone()]),
            trace(&[b.clone(), a.clone()])
        );
        let (one, two) = (grant("lock-a", 1), grant("lock-a", 2));
        assert_ne!(trace(&[one.clone(), two.clone()]), trace(&[two, one]));
    }

    #[test]
    fn an_invoke_after_a_completion_differs_from_one_before_it() {
        let ok = op("client-1", OpFn::Write, OpType::Ok);
        let invoke = op("client-2", OpFn::Read, OpType::Invoke);
        let w = op("client-1", OpFn::Write, OpType::Invoke);
        let before = trace(&[w.clone(), invoke.clone(), ok.clone()]);
        let after = trace(&[w, ok, invoke]);
        assert_ne!(before, after);
    }
}
