//! The clients' own views of their leases: each client believes it holds one lock with one
//! token until a moment of its own monotonic clock (or until told otherwise), the view the
//! client-side mutual-exclusion check judges (`belief` events, start and end).

use std::collections::BTreeMap;

use fencesim_history::{Event, EventKind, Phase};

/// A client's own view of its lease.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Belief {
    lock: String,
    token: u64,
    /// Until when, on the client's monotonic clock (local ms); `None`: until told otherwise.
    until_ms: Option<i64>,
    active: bool,
    /// Bumped at each new lease (not at extensions), so that a stale watch stops.
    generation: u64,
}

/// Every client's belief, by client.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Beliefs {
    by_client: BTreeMap<String, Belief>,
}

impl Beliefs {
    /// `client` now believes it holds `lock` with `token` until `until_ms` on its monotonic
    /// clock (`None`: until told otherwise); a second call for the same lease extends it.
    /// Returns the generation to watch, for a new lease with a deadline: its belief is to end
    /// when the client's clock passes it ([`Beliefs::watched_until`]).
    pub fn believe(
        &mut self,
        client: &str,
        lock: &str,
        token: u64,
        until_ms: Option<i64>,
    ) -> Option<u64> {
        let b = self.by_client.entry(client.to_owned()).or_insert(Belief {
            lock: lock.to_owned(),
            token,
            until_ms,
            active: false,
            generation: 0,
        });
        let fresh = !(b.active && b.token == token && b.lock == lock);
        if fresh {
            b.generation += 1;
        }
        b.lock = lock.to_owned();
        b.token = token;
        b.until_ms = until_ms;
        b.active = true;
        fresh.then_some(b.generation).filter(|_| until_ms.is_some())
    }

    /// Whether `client` believes it holds a lease when its monotonic clock reads `mono_ms`.
    pub fn valid(&self, client: &str, mono_ms: i64) -> bool {
        self.by_client
            .get(client)
            .is_some_and(|b| b.active && b.until_ms.is_none_or(|u| mono_ms < u))
    }

    /// `client` stops believing: the lock and token it believed in, if it did.
    pub fn end(&mut self, client: &str) -> Option<(String, u64)> {
        let b = self.by_client.get_mut(client).filter(|b| b.active)?;
        b.active = false;
        Some((b.lock.clone(), b.token))
    }

    /// What a watch of `client`'s belief of `generation` waits for: `None` if the belief it
    /// watches has ended or been replaced (the watch stops), else its deadline (`None`: none).
    pub fn watched_until(&self, client: &str, generation: u64) -> Option<Option<i64>> {
        match self.by_client.get(client) {
            Some(b) if b.active && b.generation == generation => Some(b.until_ms),
            _ => None,
        }
    }
}

/// The history's `belief` start event: `client` holds `lock` with `token` until `until_ms`.
pub fn belief_start(client: &str, lock: &str, token: u64, until_ms: Option<i64>) -> Event {
    Event {
        node: client.into(),
        phase: Some(Phase::Start),
        lock: Some(lock.into()),
        holder: Some(client.into()),
        token: Some(token),
        expires_at_ms: until_ms,
        ..Event::new(EventKind::Belief)
    }
}

/// The history's `belief` end event, for `reason`.
pub fn belief_end(client: &str, lock: &str, token: u64, reason: &str) -> Event {
    Event {
        node: client.into(),
        phase: Some(Phase::End),
        lock: Some(lock.into()),
        holder: Some(client.into()),
        token: Some(token),
        detail: Some(reason.to_owned()),
        ..Event::new(EventKind::Belief)
    }
}

#[cfg(test)]
mod tests {
    use super::Beliefs;

    #[test]
    fn a_belief_is_extended_by_the_same_lease_and_replaced_by_a_new_one() {
        let mut beliefs = Beliefs::default();
        assert_eq!(beliefs.believe("c", "l", 1, Some(100)), Some(1), "watch it");
        assert!(beliefs.valid("c", 99) && !beliefs.valid("c", 100));
        // A renewal of the same lease: no new watch, the old one follows the new deadline.
        assert_eq!(beliefs.believe("c", "l", 1, Some(200)), None);
        assert_eq!(beliefs.watched_until("c", 1), Some(Some(200)));
        // A new lease: a new generation; the old watch stops.
        assert_eq!(beliefs.believe("c", "l", 2, Some(300)), Some(2));
        assert_eq!(beliefs.watched_until("c", 1), None);
        assert_eq!(beliefs.end("c"), Some(("l".to_owned(), 2)));
        assert_eq!(beliefs.end("c"), None, "ended once");
        assert!(!beliefs.valid("c", 0));
        // Without a deadline: believed until told otherwise, nothing to watch.
        assert_eq!(beliefs.believe("c", "l", 3, None), None);
        assert!(beliefs.valid("c", i64::MAX));
    }
}
