//! One Redis-like lock node: keys with values and expiries on the node's wall clock.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A stored key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The lock value (Redlock's random token).
    pub value: u64,
    /// Wall-clock ms at which the key expires: present while `now_ms < expires_at_ms`.
    pub expires_at_ms: i64,
    /// The client that set it (what the node's key events name; Redis itself keeps only the
    /// value).
    pub holder: String,
}

/// A Redis-like node. Expiry is lazy, as in Redis: an expired key is treated as absent, and
/// dropped when next touched ([`RedisNode::take_expired`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedisNode {
    keys: BTreeMap<String, Entry>,
    counters: BTreeMap<String, u64>,
}

impl RedisNode {
    /// An empty node.
    pub fn new() -> Self {
        Self::default()
    }

    /// Drop `key` if it has expired at `now_ms`, and return it: what the node's next command
    /// on the key finds gone.
    pub fn take_expired(&mut self, key: &str, now_ms: i64) -> Option<Entry> {
        if self.keys.get(key)?.expires_at_ms > now_ms {
            return None;
        }
        self.keys.remove(key)
    }

    /// `SET key value NX PX ttl_ms` for `holder` at wall-clock `now_ms`: `Ok` if the key was
    /// absent or expired and is now set, or the live key that refused it.
    pub fn set_nx_px(
        &mut self,
        key: &str,
        value: u64,
        holder: &str,
        ttl_ms: u64,
        now_ms: i64,
    ) -> Result<&Entry, &Entry> {
        self.take_expired(key, now_ms);
        match self.keys.entry(key.to_owned()) {
            std::collections::btree_map::Entry::Occupied(live) => Err(live.into_mut()),
            std::collections::btree_map::Entry::Vacant(free) => Ok(free.insert(Entry {
                value,
                expires_at_ms: now_ms.saturating_add(ttl_ms as i64),
                holder: holder.to_owned(),
            })),
        }
    }

    /// The live entry of `key` at `now_ms`.
    pub fn get(&self, key: &str, now_ms: i64) -> Option<&Entry> {
        self.keys.get(key).filter(|e| now_ms < e.expires_at_ms)
    }

    /// Release: delete `key` only if it is live and holds `value` (the Lua script of the Redlock
    /// documentation). The deleted entry, if it was.
    pub fn delete_if(&mut self, key: &str, value: u64, now_ms: i64) -> Option<Entry> {
        if self.get(key, now_ms).is_some_and(|e| e.value == value) {
            self.keys.remove(key)
        } else {
            None
        }
    }

    /// `INCR counter`: the counter's new value. Some lock libraries take their "fencing token"
    /// from such a counter on one node; it is monotonic only as long as that node keeps its
    /// data (a failover to a replica that missed increments hands out old values again).
    pub fn incr(&mut self, counter: &str) -> u64 {
        let c = self.counters.entry(counter.to_owned()).or_insert(0);
        *c += 1;
        *c
    }

    /// Extend: reset the expiry of `key` to `now_ms + ttl_ms` only if it is live and holds
    /// `value`. The extended entry, if it was.
    pub fn extend_if(&mut self, key: &str, value: u64, ttl_ms: u64, now_ms: i64) -> Option<&Entry> {
        let e = self
            .keys
            .get_mut(key)
            .filter(|e| now_ms < e.expires_at_ms && e.value == value)?;
        e.expires_at_ms = now_ms.saturating_add(ttl_ms as i64);
        Some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nx_px_release_and_extend_follow_redis() {
        let mut n = RedisNode::new();
        assert!(n.set_nx_px("k", 7, "a", 100, 0).is_ok());
        let held = n.set_nx_px("k", 8, "b", 100, 99).unwrap_err();
        assert_eq!((held.value, held.holder.as_str()), (7, "a"));
        assert_eq!(n.take_expired("k", 99), None, "live until 100");
        assert!(
            n.set_nx_px("k", 8, "b", 100, 100).is_ok(),
            "expired at 100 on the node's clock"
        );
        assert!(n.delete_if("k", 7, 150).is_none(), "not the holder's value");
        assert!(n.extend_if("k", 7, 100, 150).is_none());
        assert_eq!(
            n.extend_if("k", 8, 100, 150).map(|e| e.expires_at_ms),
            Some(250)
        );
        assert_eq!(n.get("k", 249).map(|e| e.value), Some(8));
        assert_eq!(
            n.delete_if("k", 8, 249).map(|e| e.holder),
            Some("b".to_owned())
        );
        assert!(n.get("k", 249).is_none());
        n.set_nx_px("k", 9, "c", 100, 300).unwrap();
        assert_eq!(n.take_expired("k", 400).map(|e| e.value), Some(9));
        assert_eq!(n.take_expired("k", 400), None, "dropped once");
    }

    #[test]
    fn a_counter_is_monotonic_only_while_the_node_keeps_its_data() {
        let mut primary = RedisNode::new();
        assert_eq!((primary.incr("token"), primary.incr("token")), (1, 2));
        // A replica that last synced after the first increment takes over.
        let mut replica = RedisNode::new();
        replica.incr("token");
        assert_eq!(
            replica.incr("token"),
            2,
            "token 2 is handed out a second time"
        );
    }

    #[test]
    fn a_wall_clock_jump_expires_keys_early() {
        let mut n = RedisNode::new();
        n.set_nx_px("k", 1, "a", 10_000, 0).unwrap();
        // The node's clock jumps 15 s forward: by its reckoning the key is gone.
        assert!(n.set_nx_px("k", 2, "b", 10_000, 15_000).is_ok());
    }
}
