//! `token-not-granted`: a client presented, in a mutation, a fencing token that the lock
//! service never granted it.
//!
//! The other token checks judge the service's grants. A client that presents a token it chose
//! or remembered (an epoch it keeps, a token read back from its own storage, the last one it
//! saw) is invisible to them, and a resource that compares tokens accepts a high one that no
//! lease stands behind: the fence is only as good as the tokens presented to it (Kleppmann
//! 2016; Chubby checks a presented sequencer against the lock's current generation for the
//! same reason). So each write, delete or compare-and-set that carries a token is judged
//! against what the service granted its client: a `grant` or `renew` event naming that client
//! as holder with that token, recorded before the mutation was invoked.
//!
//! It needs the service's `grant` events: a history without them (Redlock's opaque values, a
//! Jepsen history) has nothing to judge tokens against, and the check does not run.

use std::collections::{BTreeMap, BTreeSet};

use fencesim_history::{Entry, Event, EventKind, Op, OpFn, OpType, ViolationKind};

use crate::stale_write::at_index;
use crate::{Records, Violation};

/// Whether the history has what the check judges by: a grant naming its holder and token.
pub(crate) fn applies(history: &Records) -> bool {
    history
        .events()
        .any(|e| is_grant(e) && e.event == EventKind::Grant)
}

pub(crate) fn check(history: &Records) -> Vec<Violation> {
    if !applies(history) {
        return Vec::new();
    }
    // What each client was granted so far, and where each token was granted first (to whom).
    let mut granted: BTreeSet<(&str, u64)> = BTreeSet::new();
    let mut last_to: BTreeMap<&str, &Event> = BTreeMap::new();
    let mut first_of: BTreeMap<u64, &Event> = BTreeMap::new();
    let mut reported: BTreeSet<(&str, u64)> = BTreeSet::new();
    let mut violations = Vec::new();
    for entry in &history.entries {
        match entry {
            Entry::Event(e) if is_grant(e) => {
                let (holder, token) = (
                    e.holder.as_deref().unwrap_or_default(),
                    e.token.unwrap_or_default(),
                );
                granted.insert((holder, token));
                last_to.insert(holder, e);
                first_of.entry(token).or_insert(e);
            }
            Entry::Op(op) => {
                let Some(token) = presented(op) else { continue };
                let client = op.node.as_str();
                if granted.contains(&(client, token)) || !reported.insert((client, token)) {
                    continue;
                }
                violations.push(violation(
                    op,
                    token,
                    last_to.get(client).copied(),
                    first_of.get(&token).copied(),
                    history.header.untimed,
                ));
            }
            Entry::Event(_) => {}
        }
    }
    violations
}

/// Whether `e` is a `grant` or `renew` that says who holds which token: what a presented
/// token is judged against (`fencesim verify`'s trace keeps the same facts).
pub fn is_grant(e: &Event) -> bool {
    matches!(e.event, EventKind::Grant | EventKind::Renew)
        && e.holder.is_some()
        && e.token.is_some()
        && e.lock.is_some()
}

/// The token a mutation's invocation presents, if it is one that carries a token.
pub fn presented(op: &Op) -> Option<u64> {
    let mutation = matches!(op.f, OpFn::Write | OpFn::Delete | OpFn::Cas);
    (mutation && op.op_type == OpType::Invoke)
        .then_some(op.token)
        .flatten()
}

fn violation(
    op: &Op,
    token: u64,
    last: Option<&Event>,
    elsewhere: Option<&Event>,
    untimed: bool,
) -> Violation {
    let client = op.node.as_str();
    let what = match op.f {
        OpFn::Delete => "delete",
        OpFn::Cas => "compare-and-set",
        _ => "write",
    };
    let key = op
        .key
        .as_deref()
        .map(|k| format!("key {k:?}: "))
        .unwrap_or_default();
    let mut witnesses = vec![op.at.index];
    let mine = match last {
        Some(g) => {
            witnesses.push(g.at.index);
            format!(
                "its last grant was token {} at index {}",
                g.token.unwrap_or_default(),
                g.at.index
            )
        }
        None => "it had been granted nothing".to_owned(),
    };
    let theirs = match elsewhere {
        Some(g) if g.at.index < op.at.index => {
            witnesses.push(g.at.index);
            format!(
                "; token {token} was granted to {} at index {}",
                g.holder.as_deref().unwrap_or_default(),
                g.at.index
            )
        }
        _ => format!("; no client had been granted token {token}"),
    };
    Violation {
        chain: Vec::new(),
        kind: ViolationKind::TokenNotGranted,
        witnesses,
        explanation: format!(
            "{key}{client} presented token {token} in its {what} at {}, but the lock service \
             never granted it that token: {mine}{theirs}",
            at_index(untimed, op.at.index, op.at.time_ns)
        ),
    }
}
