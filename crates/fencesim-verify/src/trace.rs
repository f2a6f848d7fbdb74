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
//! Two checks read an order across chains, and the client chain keeps the one fact each needs
//! at the operation that needs it:
//! - `token-not-granted` judges a mutation's invoke against the grants and renewals recorded
//!   before it: each invoke that presents a token says whether its client had been granted it;
//! - with opaque tokens (Redlock: no service records grants), the checker ranks lock values by
//!   the order their acquires were invoked in: each acquire invoke says how many acquires
//!   every client had invoked before it.
//!
//! So the trace keeps a hash chain per lock, per key and per client, and the register's
//! configurations, and forgets how records of different chains interleave. That is the
//! partial-order reduction: deliveries and timers of different agents commute, and their
//! interleavings are explored as one state once their histories agree on every chain and
//! linearize alike. A chain keeps more order than a check needs, never less.

use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use fencesim_history::{Entry, EventKind, OpFn, OpType};

use fencesim_checker::{is_grant, presented};

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
    /// Each (holder, token) a grant or renewal named so far (a function of the lock chains,
    /// so not hashed).
    granted: Arc<BTreeSet<(String, u64)>>,
    /// Whether lock values are ranked by the order of their acquires' invokes (opaque
    /// tokens), and how many acquires have been invoked so far (a function of the client
    /// chains, so not hashed).
    ranks_acquires: bool,
    acquires: u64,
}

const LOCK: u8 = 0;
const KEY: u8 = 1;
const CLIENT: u8 = 2;

impl CheckTrace {
    /// An empty trace for a design whose tokens are opaque (`opaque`: ranked by acquisition)
    /// or fencing tokens.
    pub fn new(opaque: bool) -> Self {
        CheckTrace {
            ranks_acquires: opaque,
            ..CheckTrace::default()
        }
    }

    /// Take `entry` into its chain. Answers whether a check that runs along the path (every
    /// checked property but linearizability) may find a violation that `entry` witnesses,
    /// so that the search asks at the very step that shows one and a counterexample stays a
    /// shortest one: a grant or renewal (`token-not-monotonic`, `token-reused`), a release
    /// (`release-by-non-holder`), an accept (`stale-write-accepted`, `unfenced-mutation`,
    /// `duplicate-execution`), a reject with a token (it makes its key fenced, which
    /// `unfenced-mutation` reads back), and a call that presents a token its client was
    /// never granted (`token-not-granted`). An expiry or a revocation witnesses none.
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
                let seen = (ev.event, &ev.lock, &ev.key, &ev.holder, ev.token, ev.op);
                let seen = crate::fingerprint::of_hash(&seen);
                if let (true, Some(holder), Some(token)) = (is_grant(ev), &ev.holder, ev.token) {
                    Arc::make_mut(&mut self.granted).insert((holder.to_string(), token));
                }
                self.extend(chain, seen);
                match ev.event {
                    EventKind::Expire | EventKind::Revoke => false,
                    EventKind::Reject => ev.token.is_some(),
                    _ => true,
                }
            }
            Entry::Op(op) => {
                let client = name(Some(op.node.as_str()));
                let on_resource =
                    matches!(op.f, OpFn::Read | OpFn::Write | OpFn::Cas | OpFn::Delete);
                let mut seen = Fingerprint::default();
                let fields = (op.f, op.op_type, &op.lock, &op.key, op.token, &op.value);
                (fields, &op.expected, op.process).hash(&mut seen);
                let invoke = op.op_type == OpType::Invoke;
                let mut judged = false;
                if let Some(token) = presented(op) {
                    let granted = self.granted.contains(&(op.node.to_string(), token));
                    seen.write_u8(if granted { 1 } else { 2 });
                    judged = !granted;
                }
                if self.ranks_acquires && invoke && op.f == OpFn::Acquire {
                    seen.write_u64(self.acquires);
                    self.acquires += 1;
                }
                if on_resource {
                    Arc::make_mut(&mut self.linear).take(op);
                    self.linear_fp = crate::fingerprint::of_hash(&*self.linear);
                }
                self.extend((CLIENT, client), seen.finish());
                judged
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

    /// Chain `seen` (a record's fingerprint) onto `chain`.
    fn extend(&mut self, chain: (u8, u64), seen: u64) {
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
        h.write_u64(seen);
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
    use fencesim_history::{Event, Op, Stamp};

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
            process: if client == "client-1" { 1000 } else { 2000 },
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

    fn with_token(entry: Entry, token: u64) -> Entry {
        let Entry::Op(mut o) = entry else {
            unreachable!("an operation")
        };
        o.token = Some(token);
        o.lock = (o.f == OpFn::Acquire).then(|| "lock".into());
        Entry::Op(o)
    }

    #[test]
    fn a_token_presented_before_its_grant_differs_from_one_presented_after_it() {
        // token-not-granted judges a mutation's invoke against the grants before it.
        let write = with_token(op("client-1", OpFn::Write, OpType::Invoke), 1);
        let before = trace(&[write.clone(), grant("lock-a", 1)]);
        let after = trace(&[grant("lock-a", 1), write]);
        assert_ne!(before, after);
    }

    #[test]
    fn acquires_keep_their_order_across_clients_only_for_opaque_tokens() {
        let a = op("client-1", OpFn::Acquire, OpType::Invoke);
        let b = op("client-2", OpFn::Acquire, OpType::Invoke);
        let run = |opaque: bool, entries: &[Entry]| {
            let mut t = CheckTrace::new(opaque);
            for e in entries {
                t.take(e);
            }
            let mut h = Fingerprint::default();
            t.hash_into(&mut h);
            h.finish()
        };
        let (ab, ba) = ([a.clone(), b.clone()], [b, a]);
        // Redlock ranks lock values by their acquires' invokes: the order is kept.
        assert_ne!(run(true, &ab), run(true, &ba));
        // Fencing tokens are ranked by value: two clients' acquires commute.
        assert_eq!(run(false, &ab), run(false, &ba));
    }
}
