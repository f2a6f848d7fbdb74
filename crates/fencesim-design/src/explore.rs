//! What `fencesim verify` may do with a design's states beyond running them: copy them and
//! tell them apart. A design that opts in ([`crate::Design::explorable`]) has every state it
//! reaches explored once, however many schedules reach it, and each step taken from a copy of
//! its parent; one that does not is re-executed from the start for every step, and never
//! merges two schedules (sound, but the search grows with every branch, as a tree search does).
//!
//! Opting in is sound only when the copy is independent of the original (a clone that shares
//! storage with it, as raft-rs's `MemStorage` does, must not opt in) and the hash covers every
//! field that can change what the node or client does next. [`hash_derived`] feeds a value's
//! derived `Hash`, [`hash_debug`] its derived `Debug` form; both cover every field. The
//! single design uses the first, the other built-ins the second.
//!
//! The idea is stateright's `Actor` states (`Clone + Hash`) and TLC's fingerprints: a state
//! space explored breadth-first, each state once.

use std::fmt::{Debug, Write};
use std::hash::{Hash, Hasher};

/// How to copy and fingerprint a design's node (`N`) and client protocol (`C`).
pub struct Explorable<N, C> {
    /// An independent copy of a node (it shares nothing with the original).
    pub clone_node: fn(&N) -> N,
    /// An independent copy of a client protocol.
    pub clone_client: fn(&C) -> C,
    /// Feed everything that decides what the node does next into the hasher.
    pub hash_node: fn(&N, &mut dyn Hasher),
    /// Feed everything that decides what the client protocol does next into the hasher.
    pub hash_client: fn(&C, &mut dyn Hasher),
}

impl<N: Clone + Debug, C: Clone + Debug> Explorable<N, C> {
    /// Copies by `Clone`, fingerprints by the derived `Debug` form ([`hash_debug`]): right for
    /// a node and a client protocol that own all their data and derive both.
    pub fn by_clone_and_debug() -> Self {
        Explorable {
            clone_node: N::clone,
            clone_client: C::clone,
            hash_node: hash_debug::<N>,
            hash_client: hash_debug::<C>,
        }
    }
}

impl<N: Clone + Hash, C: Clone + Hash> Explorable<N, C> {
    /// Copies by `Clone`, fingerprints by the derived `Hash` ([`hash_derived`]): right for a
    /// node and a client protocol that own all their data and derive both, and about ten times
    /// cheaper per state than [`Explorable::by_clone_and_debug`] (a `Debug` form goes through
    /// the formatting machinery a piece at a time). stateright's actors are `Clone + Hash`.
    pub fn by_clone_and_hash() -> Self {
        Explorable {
            clone_node: N::clone,
            clone_client: C::clone,
            hash_node: hash_derived::<N>,
            hash_client: hash_derived::<C>,
        }
    }
}

/// Feed `value`'s derived `Hash` into `hasher`. A derived `Hash` covers every field, maps and
/// sets in their order, as a derived `Debug` prints them (a `HashMap` has no `Hash`).
pub fn hash_derived<T: Hash + ?Sized>(value: &T, mut hasher: &mut dyn Hasher) {
    value.hash(&mut hasher);
}

/// Feed `value`'s `Debug` form into `hasher`, without allocating it: a derived `Debug` prints
/// every field, maps and sets in their order (a `BTreeMap`'s is by key; a `HashMap`'s is not
/// stable, and a design that iterates one breaks determinism anyway).
pub fn hash_debug<T: Debug + ?Sized>(value: &T, hasher: &mut dyn Hasher) {
    /// A derived `Debug` writes a piece of a few bytes at a time (a field's name, a
    /// separator, a number): gathered here, the hasher takes them a buffer at a time.
    struct Feed<'a> {
        hasher: &'a mut dyn Hasher,
        buffer: [u8; 256],
        len: usize,
    }
    impl Feed<'_> {
        fn flush(&mut self) {
            self.hasher.write(&self.buffer[..self.len]);
            self.len = 0;
        }
    }
    impl Write for Feed<'_> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let bytes = s.as_bytes();
            if self.len + bytes.len() > self.buffer.len() {
                self.flush();
                if bytes.len() > self.buffer.len() {
                    self.hasher.write(bytes);
                    return Ok(());
                }
            }
            self.buffer[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
            Ok(())
        }
    }
    let mut feed = Feed {
        hasher,
        buffer: [0; 256],
        len: 0,
    };
    // Writing into a hasher cannot fail.
    let _ = write!(feed, "{value:?}");
    feed.flush();
}

#[cfg(test)]
mod tests {
    use std::hash::Hasher;

    use super::hash_debug;

    /// The bytes hashed, kept whole: equal bytes, equal fingerprints.
    #[derive(Default)]
    struct Bytes(Vec<u8>);

    impl Hasher for Bytes {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.extend_from_slice(bytes);
        }
    }

    fn fed<T: std::fmt::Debug>(value: &T) -> Vec<u8> {
        let mut h = Bytes::default();
        hash_debug(value, &mut h);
        h.0
    }

    #[test]
    fn a_derived_hash_feeds_equal_values_alike_and_a_changed_field_differently() {
        #[derive(Hash)]
        struct Lease {
            holder: &'static str,
            token: u64,
        }
        let fed = |lease: &Lease| {
            let mut h = Bytes::default();
            super::hash_derived(lease, &mut h);
            h.0
        };
        let a = fed(&Lease {
            holder: "client-1",
            token: 3,
        });
        let mut expected = b"client-1\xff".to_vec();
        expected.extend(3u64.to_ne_bytes());
        assert_eq!(a, expected);
        let b = fed(&Lease {
            holder: "client-1",
            token: 4,
        });
        assert_ne!(a, b);
    }

    #[test]
    fn equal_values_feed_alike_and_a_changed_field_differently() {
        #[derive(Debug)]
        #[allow(dead_code)] // read through Debug only
        struct Lease {
            holder: &'static str,
            token: u64,
        }
        let a = fed(&Lease {
            holder: "client-1",
            token: 3,
        });
        assert_eq!(
            String::from_utf8_lossy(&a),
            r#"Lease { holder: "client-1", token: 3 }"#
        );
        assert_eq!(
            a,
            fed(&Lease {
                holder: "client-1",
                token: 3
            })
        );
        assert_ne!(
            a,
            fed(&Lease {
                holder: "client-1",
                token: 4
            })
        );
    }
}
