//! The Redlock client algorithm, one acquisition at a time.

use serde::{Deserialize, Serialize};

/// Settings of a Redlock client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedlockConfig {
    /// How many independent nodes (usually 5).
    pub nodes: usize,
    /// The lock's TTL, ms.
    pub ttl_ms: u64,
    /// Clock drift allowance in ppm of the TTL, plus 2 ms, as the Redlock documentation has it.
    pub drift_ppm: u64,
    /// Re-check the validity (TTL - elapsed - drift) after the replies are in. Off: the client
    /// believes it holds the lock whenever it got a majority, however late (case K05).
    pub recheck_elapsed: bool,
}

/// The outcome of an acquisition (or an extension, which follows the same rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Decision {
    /// A majority granted: the client holds the lock until `valid_until_ms` on its own clock.
    Acquired {
        /// Validity left at the decision, ms: TTL - elapsed - drift allowance. Negative only
        /// when the re-check is off.
        validity_ms: i64,
        /// Until when the client believes it holds the lock, its clock's ms: start + TTL -
        /// drift with the re-check; without it, the client counts the TTL from the decision,
        /// as if no time had passed since it sent the requests.
        valid_until_ms: i64,
    },
    /// Fewer than a majority of nodes granted: release on every node.
    NoMajority {
        /// How many granted.
        granted: usize,
    },
    /// A majority granted, but too late: the validity had run out (the re-check at work).
    Expired {
        /// The validity left, ms (zero or less).
        validity_ms: i64,
    },
}

/// One acquisition: started at the client's clock reading `started_ms`; replies come in as
/// [`Redlock::on_reply`]; [`Redlock::decide`] gives the outcome once every node has answered or
/// timed out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redlock {
    config: RedlockConfig,
    started_ms: i64,
    granted: Vec<bool>,
    answered: Vec<bool>,
}

impl Redlock {
    /// Begin acquiring at client clock `started_ms`; the caller sends SET NX PX to every node.
    pub fn begin(config: RedlockConfig, started_ms: i64) -> Self {
        Redlock {
            config,
            started_ms,
            granted: vec![false; config.nodes],
            answered: vec![false; config.nodes],
        }
    }

    /// Node `node` answered (or timed out: `granted = false`).
    pub fn on_reply(&mut self, node: usize, granted: bool) {
        if let (Some(a), Some(g)) = (self.answered.get_mut(node), self.granted.get_mut(node)) {
            *a = true;
            *g = granted;
        }
    }

    /// Whether every node has answered or timed out.
    pub fn complete(&self) -> bool {
        self.answered.iter().all(|a| *a)
    }

    /// The nodes that granted (the ones to release on failure, or to extend).
    pub fn granted_nodes(&self) -> Vec<usize> {
        (0..self.config.nodes)
            .filter(|n| self.granted[*n])
            .collect()
    }

    /// The outcome at client clock `now_ms`.
    pub fn decide(&self, now_ms: i64) -> Decision {
        let granted = self.granted.iter().filter(|g| **g).count();
        if granted < self.config.nodes / 2 + 1 {
            return Decision::NoMajority { granted };
        }
        let elapsed = now_ms - self.started_ms;
        let drift =
            (self.config.ttl_ms.saturating_mul(self.config.drift_ppm) / 1_000_000) as i64 + 2;
        let ttl = self.config.ttl_ms as i64;
        let validity_ms = ttl - elapsed - drift;
        if !self.config.recheck_elapsed {
            return Decision::Acquired {
                validity_ms,
                valid_until_ms: now_ms + ttl - drift,
            };
        }
        if validity_ms <= 0 {
            return Decision::Expired { validity_ms };
        }
        Decision::Acquired {
            validity_ms,
            valid_until_ms: self.started_ms + ttl - drift,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(recheck_elapsed: bool) -> RedlockConfig {
        RedlockConfig {
            nodes: 5,
            ttl_ms: 10_000,
            drift_ppm: 10_000,
            recheck_elapsed,
        }
    }

    #[test]
    fn a_majority_in_time_acquires_with_the_documented_validity() {
        let mut r = Redlock::begin(config(true), 1_000);
        for (n, ok) in [(0, true), (1, true), (2, true), (3, false), (4, false)] {
            r.on_reply(n, ok);
        }
        assert!(r.complete());
        assert_eq!(r.granted_nodes(), [0, 1, 2]);
        // 10000 - 50 elapsed - (100 + 2) drift.
        assert_eq!(
            r.decide(1_050),
            Decision::Acquired {
                validity_ms: 9_848,
                valid_until_ms: 10_898
            }
        );
    }

    #[test]
    fn a_minority_fails() {
        let mut r = Redlock::begin(config(true), 0);
        for n in 0..5 {
            r.on_reply(n, n < 2);
        }
        assert_eq!(r.decide(10), Decision::NoMajority { granted: 2 });
    }

    #[test]
    fn k05_late_replies_fail_only_with_the_recheck() {
        for (recheck, acquired) in [(true, false), (false, true)] {
            let mut r = Redlock::begin(config(recheck), 0);
            for n in 0..5 {
                r.on_reply(n, true);
            }
            // The client paused for 12 s while the replies waited in its buffer.
            let expected = if acquired {
                // Without the re-check it counts its TTL from now: valid until 21.898 s.
                Decision::Acquired {
                    validity_ms: -2_102,
                    valid_until_ms: 21_898,
                }
            } else {
                Decision::Expired {
                    validity_ms: -2_102,
                }
            };
            assert_eq!(r.decide(12_000), expected, "recheck {recheck}");
        }
    }
}
