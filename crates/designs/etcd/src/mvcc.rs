//! etcd's data model, as far as a lock needs it: a key space under one global revision, and
//! leases that keys are attached to.
//!
//! - Every write (a put, or a delete that removed a key) raises the store's revision by one.
//!   A key keeps the revision that created it (`create_revision`) and the one that last
//!   modified it (`mod_revision`); deleting a key and putting it again gives it a new
//!   `create_revision`. The create revision is what etcd's docs name the fencing token of a
//!   lock ("Notes on the usage of lock and lease", etcd.io/docs/v3.5/learning/why/): it grows
//!   with every write of the whole cluster, so a later holder's is always higher.
//! - A lease has a TTL and an expiry time by the leader's clock; a keepalive moves the expiry
//!   to now + TTL; revoking it, or its expiry, deletes every key attached to it.
//!
//! Deterministic: ordered maps only, and no clock (callers pass the leader's `now_ms`).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// A lease's id. etcd draws it at random per member; here it is a counter, so ids are the same
/// on every replica and in every run of a seed.
pub type LeaseId = u64;

/// One key's record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyValue {
    /// The revision of the write that created the key (since it last did not exist).
    pub create_revision: u64,
    /// The revision of the write that last modified it.
    pub mod_revision: u64,
    /// The value: for a lock key, the name of the client whose key it is.
    pub value: String,
    /// The lease the key is attached to, if any: revoking the lease deletes the key.
    pub lease: Option<LeaseId>,
}

/// The key space: every live key, and the revision of the last write.
#[derive(Clone, Debug, Default)]
pub struct KeySpace {
    revision: u64,
    keys: BTreeMap<String, KeyValue>,
}

impl KeySpace {
    /// The revision of the last write (0 before any).
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The key's record, if it exists.
    pub fn get(&self, key: &str) -> Option<&KeyValue> {
        self.keys.get(key)
    }

    /// Put `value` at `key`, attached to `lease`: one write. A new key takes this revision as
    /// its create revision; an existing one keeps its own.
    pub fn put(&mut self, key: &str, value: &str, lease: Option<LeaseId>) -> &KeyValue {
        self.revision += 1;
        let revision = self.revision;
        let record = self.keys.entry(key.to_owned()).or_insert(KeyValue {
            create_revision: revision,
            mod_revision: revision,
            value: String::new(),
            lease,
        });
        record.mod_revision = revision;
        record.value = value.to_owned();
        record.lease = lease;
        record
    }

    /// Delete `key`: one write if it existed, none otherwise. Returns what it was.
    pub fn delete(&mut self, key: &str) -> Option<KeyValue> {
        let removed = self.keys.remove(key)?;
        self.revision += 1;
        Some(removed)
    }

    /// Whether a key under `prefix` was created before `revision` (the lock recipe's wait:
    /// etcd's `Mutex` waits until none is left, then holds).
    pub fn any_created_before(&self, prefix: &str, revision: u64) -> bool {
        self.keys
            .range(prefix.to_owned()..)
            .take_while(|(key, _)| key.starts_with(prefix))
            .any(|(_, kv)| kv.create_revision < revision)
    }
}

/// One lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// Its TTL, ms of the leader's clock.
    pub ttl_ms: u64,
    /// When it expires unless kept alive, ms of the leader's clock.
    pub expires_at_ms: i64,
    /// The keys attached to it.
    pub keys: BTreeSet<String>,
}

/// The leases, as etcd's lessor keeps them (the expiry decisions are the leader's: it proposes
/// a revocation of each lease its clock shows expired).
#[derive(Clone, Debug, Default)]
pub struct Lessor {
    last_id: LeaseId,
    leases: BTreeMap<LeaseId, Lease>,
}

impl Lessor {
    /// Grant a lease of `ttl_ms` from `now_ms`; returns its id.
    pub fn grant(&mut self, ttl_ms: u64, now_ms: i64) -> LeaseId {
        self.last_id += 1;
        let lease = Lease {
            ttl_ms,
            expires_at_ms: now_ms.saturating_add_unsigned(ttl_ms),
            keys: BTreeSet::new(),
        };
        self.leases.insert(self.last_id, lease);
        self.last_id
    }

    /// The lease, if it exists (granted and not revoked).
    pub fn get(&self, id: LeaseId) -> Option<&Lease> {
        self.leases.get(&id)
    }

    /// Attach `key` to lease `id` (which exists).
    pub fn attach(&mut self, id: LeaseId, key: &str) {
        if let Some(lease) = self.leases.get_mut(&id) {
            lease.keys.insert(key.to_owned());
        }
    }

    /// A keepalive at `now_ms`: the lease, if it exists and has not expired by `now_ms`, now
    /// expires at `now_ms` + its TTL, which is returned. etcd refuses a keepalive of an expired
    /// lease (its lessor answers "lease not found" once the revocation is through).
    pub fn keep_alive(&mut self, id: LeaseId, now_ms: i64) -> Option<i64> {
        let lease = self.leases.get_mut(&id)?;
        if lease.expires_at_ms <= now_ms {
            return None;
        }
        lease.expires_at_ms = now_ms.saturating_add_unsigned(lease.ttl_ms);
        Some(lease.expires_at_ms)
    }

    /// Remove lease `id`; returns it (its keys are the caller's to delete).
    pub fn revoke(&mut self, id: LeaseId) -> Option<Lease> {
        self.leases.remove(&id)
    }

    /// The leases expired by `now_ms`, in id order.
    pub fn expired(&self, now_ms: i64) -> Vec<LeaseId> {
        self.leases
            .iter()
            .filter(|(_, l)| l.expires_at_ms <= now_ms)
            .map(|(id, _)| *id)
            .collect()
    }

    /// A new leader's promotion: every lease expires its TTL after `now_ms`, so none the old
    /// leader granted can look expired early by the new leader's clock (etcd's
    /// `lessor.Promote`, which also adds the election timeout; the TTL alone is the bound a
    /// holder counts on).
    pub fn promote(&mut self, now_ms: i64) {
        for lease in self.leases.values_mut() {
            lease.expires_at_ms = lease
                .expires_at_ms
                .max(now_ms.saturating_add_unsigned(lease.ttl_ms));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_write_raises_the_revision_and_a_recreated_key_gets_a_new_create_revision() {
        let mut keys = KeySpace::default();
        assert_eq!(keys.put("l/1", "a", Some(1)).create_revision, 1);
        let again = keys.put("l/1", "b", Some(1));
        assert_eq!((again.create_revision, again.mod_revision), (1, 2));
        assert_eq!(keys.delete("l/1").map(|kv| kv.value), Some("b".into()));
        assert_eq!(keys.revision(), 3);
        // Deleting a missing key writes nothing.
        assert_eq!(keys.delete("l/1"), None);
        assert_eq!(keys.revision(), 3);
        assert_eq!(keys.put("l/1", "c", None).create_revision, 4);
    }

    #[test]
    fn the_lock_wait_sees_only_earlier_keys_under_its_own_prefix() {
        let mut keys = KeySpace::default();
        keys.put("other/1", "x", None); // 1
        keys.put("lock/2", "a", None); // 2
        keys.put("lock/3", "b", None); // 3
        keys.put("lockx/4", "c", None); // 4: another prefix that starts alike
        assert!(!keys.any_created_before("lock/", 2));
        assert!(keys.any_created_before("lock/", 3));
        assert!(!keys.any_created_before("lockx/", 4));
        keys.delete("lock/2");
        assert!(!keys.any_created_before("lock/", 3));
    }

    #[test]
    fn a_keepalive_moves_an_unexpired_lease_and_refuses_an_expired_one() {
        let mut lessor = Lessor::default();
        let id = lessor.grant(1_000, 0);
        assert_eq!(lessor.keep_alive(id, 500), Some(1_500));
        assert_eq!(lessor.expired(1_499), Vec::<LeaseId>::new());
        assert_eq!(lessor.expired(1_500), vec![id]);
        assert_eq!(lessor.keep_alive(id, 1_500), None);
        // A promotion restarts every TTL from the new leader's clock, never shortening one.
        lessor.promote(1_200);
        assert_eq!(lessor.get(id).map(|l| l.expires_at_ms), Some(2_200));
        lessor.promote(0);
        assert_eq!(lessor.get(id).map(|l| l.expires_at_ms), Some(2_200));
    }
}
