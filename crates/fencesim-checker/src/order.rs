//! How two tokens compare. Fencing tokens compare by value (Kleppmann 2016, Chubby sequencers,
//! etcd revisions). Opaque lock values (Redlock's random values) have no order of their own:
//! a value is as late as its acquisition, in true time, so that is how they are ranked.

use std::collections::BTreeMap;

use fencesim_history::{Entry, EventKind, History, OpFn, OpType, TokenOrder};

/// One acquisition of a lock: the service's `grant` event, or the client's `acquire` ok when the
/// history has no grant events (Redlock: the client decides, no service does).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Acquisition<'a> {
    pub lock: &'a str,
    pub token: u64,
    /// Whose: the grant's holder, or the client that acquired.
    pub holder: &'a str,
    /// Where it falls in true time: the grant, or the client's acquire invoke.
    pub index: u64,
    /// The record that shows the token (the grant, or the acquire `ok`), for witnesses.
    pub record: u64,
}

/// Every acquisition in history order. A client-decided acquisition is placed at its invoke:
/// that is when its requests went out and the nodes set their keys, while its `ok` may come
/// much later (a client paused with the replies in its buffer, case K05).
pub(crate) fn acquisitions(history: &History) -> Vec<Acquisition<'_>> {
    let has_grants = history.events().any(|e| e.event == EventKind::Grant);
    let mut invoked: BTreeMap<u64, u64> = BTreeMap::new();
    let mut found = Vec::new();
    for entry in &history.entries {
        match entry {
            Entry::Event(e) if has_grants && e.event == EventKind::Grant => {
                if let (Some(lock), Some(token)) = (e.lock.as_deref(), e.token) {
                    found.push(Acquisition {
                        lock,
                        token,
                        holder: e.holder.as_deref().unwrap_or_default(),
                        index: e.at.index,
                        record: e.at.index,
                    });
                }
            }
            Entry::Op(o) if !has_grants && o.f == OpFn::Acquire => match o.op_type {
                OpType::Invoke => {
                    invoked.insert(o.process, o.at.index);
                }
                OpType::Ok => {
                    if let (Some(lock), Some(token)) = (o.lock.as_deref(), o.token) {
                        let index = invoked.get(&o.process).copied().unwrap_or(o.at.index);
                        found.push(Acquisition {
                            lock,
                            token,
                            holder: o.node.as_str(),
                            index,
                            record: o.at.index,
                        });
                    }
                }
                OpType::Fail | OpType::Info => {}
            },
            _ => {}
        }
    }
    found.sort_by_key(|a| a.index);
    found
}

/// Tokens ranked so that a later lease has a higher rank.
pub(crate) struct TokenRanks {
    order: TokenOrder,
    /// Acquisition order: the index of each value's first acquisition.
    first_acquired: BTreeMap<u64, u64>,
}

impl TokenRanks {
    /// Ranks for `history`, by its header's `token_order`.
    pub fn new(history: &History) -> Self {
        let order = history.header.token_order;
        let mut first_acquired = BTreeMap::new();
        if order == TokenOrder::Acquisition {
            for a in acquisitions(history) {
                first_acquired.entry(a.token).or_insert(a.index);
            }
        }
        TokenRanks {
            order,
            first_acquired,
        }
    }

    /// The rank of `token`: its value, or the index of its first acquisition (`None` if the
    /// history never shows it acquired, so it cannot be ordered).
    pub fn rank(&self, token: u64) -> Option<u64> {
        match self.order {
            TokenOrder::Value => Some(token),
            TokenOrder::Acquisition => self.first_acquired.get(&token).copied(),
        }
    }

    /// Whether tokens are opaque values ordered by acquisition.
    pub fn by_acquisition(&self) -> bool {
        self.order == TokenOrder::Acquisition
    }
}
