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
}

/// A Redis-like node. Expiry is lazy, as in Redis: an expired key is treated as absent.
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

    /// `SET key value NX PX ttl_ms` at wall-clock `now_ms`: true if the key was absent or
    /// expired and is now set.
    pub fn set_nx_px(&mut self, key: &str, value: u64, ttl_ms: u64, now_ms: i64) -> bool {
        if self.get(key, now_ms).is_some() {
            return false;
        }
        let expires_at_ms = now_ms.saturating_add(ttl_ms as i64);
        self.keys.insert(
            key.to_owned(),
            Entry {
                value,
                expires_at_ms,
            },
        );
        true
    }

    /// The live entry of `key` at `now_ms`.
    pub fn get(&self, key: &str, now_ms: i64) -> Option<&Entry> {
        self.keys.get(key).filter(|e| now_ms < e.expires_at_ms)
    }

    /// Release: delete `key` only if it is live and holds `value` (the Lua script of the Redlock
    /// documentation). True if deleted.
    pub fn delete_if(&mut self, key: &str, value: u64, now_ms: i64) -> bool {
        if self.get(key, now_ms).is_some_and(|e| e.value == value) {
            self.keys.remove(key);
            true
        } else {
            false
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
    /// `value`. True if extended.
    pub fn extend_if(&mut self, key: &str, value: u64, ttl_ms: u64, now_ms: i64) -> bool {
        match self
            .keys
            .get_mut(key)
            .filter(|e| now_ms < e.expires_at_ms && e.value == value)
        {
            Some(e) => {
                e.expires_at_ms = now_ms.saturating_add(ttl_ms as i64);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nx_px_release_and_extend_follow_redis() {
        let mut n = RedisNode::new();
        assert!(n.set_nx_px("k", 7, 100, 0));
        assert!(!n.set_nx_px("k", 8, 100, 99));
        assert!(
            n.set_nx_px("k", 8, 100, 100),
            "expired at 100 on the node's clock"
        );
        assert!(!n.delete_if("k", 7, 150), "not the holder's value");
        assert!(!n.extend_if("k", 7, 100, 150));
        assert!(n.extend_if("k", 8, 100, 150));
        assert_eq!(n.get("k", 249).map(|e| e.value), Some(8));
        assert!(n.delete_if("k", 8, 249));
        assert!(n.get("k", 249).is_none());
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
        n.set_nx_px("k", 1, 10_000, 0);
        // The node's clock jumps 15 s forward: by its reckoning the key is gone.
        assert!(n.set_nx_px("k", 2, 10_000, 15_000));
    }
}
