//! What a run knows across its lock-service nodes, from their decisions as they apply them:
//! which replicated log entries are in the history already, which leases each node that can
//! forget them honours (a crash, a restore or a hand-over ends the ones it no longer
//! honours, as `revoke`s), and which replica led last. One value for the whole run, shared by
//! every node's driver.

use std::collections::BTreeMap;

use fencesim_design::HeldLease;

/// A lease a node honoured and no longer does: its lock, holder and token.
pub type LostLease = (String, String, u64);

/// The run's record of its lock-service nodes' leases, log and leadership.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ledger {
    /// The live leases of the nodes that can forget them (the single lease service, the
    /// primaries of primary-backup) as their events tell them: (node, lock) -> (holder,
    /// token). Keyed by node as well: two primary-backup primaries may each honour a lease at
    /// once.
    live_leases: BTreeMap<(String, String), (String, u64)>,
    /// The leader of the highest term seen so far: (term, node).
    leader: Option<(u64, String)>,
    /// The highest log index whose effects are in the history: every replica applies every
    /// entry, but the history records each once, when it first takes effect anywhere.
    recorded_index: u64,
}

impl Ledger {
    /// True the first time any replica reports applying log `index` (entries apply in order).
    pub fn first_to_apply(&mut self, index: u64) -> bool {
        let first = index > self.recorded_index;
        if first {
            self.recorded_index = index;
        }
        first
    }

    /// Node `node` (the single service, or a primary) granted `lock` to `holder` with `token`.
    pub fn lease_granted(&mut self, node: &str, lock: &str, holder: &str, token: u64) {
        self.live_leases.insert(
            (node.to_owned(), lock.to_owned()),
            (holder.to_owned(), token),
        );
    }

    /// Node `node` ended its lease on `lock`.
    pub fn lease_ended(&mut self, node: &str, lock: &str) {
        self.live_leases.remove(&(node.to_owned(), lock.to_owned()));
    }

    /// Follow node `node`'s decision `event` in its live leases (for a node whose leases the
    /// harness follows, [`fencesim_design::LockNode::FOLLOWS_LEASES`]): a grant opens one, a
    /// release, expiry or revoke ends it.
    pub fn follow(&mut self, node: &str, event: &fencesim_design::ServiceEvent) {
        use fencesim_design::ServiceEventKind as K;
        match event.kind {
            K::Grant => self.lease_granted(node, &event.lock, &event.holder, event.token),
            K::Release | K::Expire | K::Revoke => self.lease_ended(node, &event.lock),
            K::Renew => {}
        }
    }

    /// The leases node `from` honoured are now node `to`'s to serve, of which `to` honours
    /// `kept` (a restart from disk: `from` = `to`; a promoted backup taking over the old
    /// primary's; a primary stepping down to the new one's table). Returns the ones `kept`
    /// lacks, which have ended, in (lock) order; the others are `to`'s from now on.
    pub fn hand_over(&mut self, from: &str, to: &str, kept: &[HeldLease]) -> Vec<LostLease> {
        let theirs: Vec<(String, String)> = self
            .live_leases
            .keys()
            .filter(|(node, _)| node == from)
            .cloned()
            .collect();
        let mut lost = Vec::new();
        for key in theirs {
            let Some((holder, token)) = self.live_leases.remove(&key) else {
                continue;
            };
            let honoured = kept
                .iter()
                .any(|l| l.lock == key.1 && l.holder == holder && l.token == token);
            if honoured {
                self.live_leases
                    .insert((to.to_owned(), key.1), (holder, token));
            } else {
                lost.push((key.1, holder, token));
            }
        }
        lost
    }

    /// `node` became leader in `term` (a later report of an older term changes nothing).
    pub fn set_leader(&mut self, term: u64, node: &str) {
        if self.leader.as_ref().is_none_or(|(t, _)| term >= *t) {
            self.leader = Some((term, node.to_owned()));
        }
    }

    /// The node that led in the highest term seen so far.
    pub fn leader(&self) -> Option<&str> {
        self.leader.as_ref().map(|(_, n)| n.as_str())
    }
}

#[cfg(test)]
mod tests {
    use fencesim_design::HeldLease;

    use super::Ledger;

    #[test]
    fn each_log_entry_is_first_applied_once() {
        let mut ledger = Ledger::default();
        assert!(ledger.first_to_apply(1));
        assert!(
            !ledger.first_to_apply(1),
            "another replica applies it later"
        );
        assert!(ledger.first_to_apply(3));
        assert!(!ledger.first_to_apply(2));
    }

    #[test]
    fn a_hand_over_keeps_what_the_new_node_honours_and_returns_the_rest() {
        let mut ledger = Ledger::default();
        ledger.lease_granted("primary-1", "a", "client-1", 1);
        ledger.lease_granted("primary-1", "b", "client-2", 2);
        ledger.lease_granted("primary-2", "c", "client-3", 3);
        let kept = [HeldLease {
            lock: "b".to_owned(),
            holder: "client-2".to_owned(),
            token: 2,
        }];
        let lost = ledger.hand_over("primary-1", "primary-2", &kept);
        assert_eq!(lost, [("a".to_owned(), "client-1".to_owned(), 1)]);
        // b is primary-2's now: its crash would end it.
        assert_eq!(ledger.hand_over("primary-1", "primary-1", &[]), []);
        let lost = ledger.hand_over("primary-2", "primary-2", &[]);
        assert_eq!(lost.len(), 2, "{lost:?}");
        ledger.lease_granted("primary-2", "d", "client-4", 4);
        ledger.lease_ended("primary-2", "d");
        assert_eq!(ledger.hand_over("primary-2", "primary-2", &[]), []);
    }

    #[test]
    fn the_leader_is_the_one_of_the_highest_term() {
        let mut ledger = Ledger::default();
        assert_eq!(ledger.leader(), None);
        ledger.set_leader(2, "raft-2");
        ledger.set_leader(1, "raft-1");
        assert_eq!(ledger.leader(), Some("raft-2"));
        ledger.set_leader(2, "raft-3");
        assert_eq!(
            ledger.leader(),
            Some("raft-3"),
            "a report of the same term replaces it"
        );
    }
}
