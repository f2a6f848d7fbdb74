//! The 64-bit fingerprint that identifies a search state, as TLC fingerprints its states:
//! a hash of everything that decides what the state does next. Stable across runs,
//! platforms and Rust versions (the standard library's hasher is not), so a count of states
//! is the same everywhere.
//!
//! The bytes written are one stream (how they were split into `write`s does not matter, as a
//! `Debug` form is written in small pieces), taken eight bytes at a time, each word mixed in
//! by a folded 128-bit multiply (the mixing step of foldhash and aHash), the stream's length
//! with its last word, and the result avalanched by SplitMix64's finalizer. A byte-at-a-time
//! hash such as FNV-1a spent a fifth of the search's time. Two distinct states share a
//! fingerprint with probability about n²/2⁶⁵ over n states (about 10⁻⁷ for two million): a
//! collision would merge them and leave the second unexplored, the risk every fingerprinting
//! model checker takes.

use std::hash::Hasher;

/// The state hasher.
#[derive(Clone, Copy, Debug)]
pub struct Fingerprint {
    state: u64,
    /// Bytes not yet mixed in, low byte first.
    pending: u64,
    /// How many bytes in `pending`.
    filled: u32,
    /// The stream's length, bytes.
    len: u64,
}

const SEED: u64 = 0x243f_6a88_85a3_08d3; // the digits of pi
const MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15; // 2^64 / the golden ratio

impl Default for Fingerprint {
    fn default() -> Self {
        Fingerprint {
            state: SEED,
            pending: 0,
            filled: 0,
            len: 0,
        }
    }
}

fn mix(state: u64, word: u64) -> u64 {
    let product = u128::from(state ^ word) * u128::from(MULTIPLIER);
    (product as u64) ^ ((product >> 64) as u64)
}

impl Hasher for Fingerprint {
    fn finish(&self) -> u64 {
        let mut z = mix(self.state, self.pending ^ (self.len << 56) ^ self.len);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn write(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len() as u64;
        // Fill the pending word first.
        while self.filled > 0 && !bytes.is_empty() {
            self.pending |= u64::from(bytes[0]) << (8 * self.filled);
            self.filled += 1;
            bytes = &bytes[1..];
            if self.filled == 8 {
                self.state = mix(self.state, self.pending);
                self.pending = 0;
                self.filled = 0;
            }
        }
        if bytes.is_empty() {
            return; // what is left waits in `pending`
        }
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            self.state = mix(
                self.state,
                u64::from_le_bytes(word.try_into().expect("eight bytes")),
            );
        }
        for (i, b) in words.remainder().iter().enumerate() {
            self.pending |= u64::from(*b) << (8 * i);
        }
        self.filled = words.remainder().len() as u32;
    }

    // A derived `Hash` writes a number at a time: each goes into the stream as its
    // little-endian bytes, as `write` would take them, without the byte loop.
    fn write_u8(&mut self, n: u8) {
        self.push(u64::from(n), 1);
    }

    fn write_u16(&mut self, n: u16) {
        self.push(u64::from(n), 2);
    }

    fn write_u32(&mut self, n: u32) {
        self.push(u64::from(n), 4);
    }

    fn write_u64(&mut self, n: u64) {
        self.push(n, 8);
    }

    fn write_usize(&mut self, n: usize) {
        self.push(n as u64, 8); // 8 bytes on every platform
    }
}

impl Fingerprint {
    /// The low `bytes` bytes of `n` appended to the stream, as `write(&n.to_le_bytes()[..bytes])`.
    fn push(&mut self, n: u64, bytes: u32) {
        self.len += u64::from(bytes);
        let room = 8 - self.filled;
        if bytes < room {
            self.pending |= n << (8 * self.filled);
            self.filled += bytes;
            return;
        }
        // Fill the pending word, mix it in, and keep what did not fit.
        let word = if self.filled == 0 {
            n
        } else {
            self.pending | (n << (8 * self.filled))
        };
        self.state = mix(self.state, word);
        let left = bytes - room;
        self.pending = if left == 0 { 0 } else { n >> (8 * room) };
        self.filled = left;
    }
}

/// The fingerprint of `value`'s derived `Hash`.
pub fn of_hash<T: std::hash::Hash + ?Sized>(value: &T) -> u64 {
    let mut h = Fingerprint::default();
    value.hash(&mut h);
    h.finish()
}

/// The fingerprint of `value`'s `Debug` form.
pub fn of_debug<T: std::fmt::Debug + ?Sized>(value: &T) -> u64 {
    let mut h = Fingerprint::default();
    fencesim_design::explore::hash_debug(value, &mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use std::hash::Hasher;

    use super::Fingerprint;

    fn of(bytes: &[u8]) -> u64 {
        let mut h = Fingerprint::default();
        h.write(bytes);
        h.finish()
    }

    #[test]
    fn is_stable_and_tells_apart_what_a_state_differs_by() {
        // Pinned: a change of these values changes every state count's meaning.
        assert_eq!(of(b""), of(b""));
        assert_ne!(of(b""), of(b"\0"));
        assert_ne!(of(b"ab"), of(b"ab\0"));
        assert_ne!(of(b"client-1"), of(b"client-2"));
        assert_ne!(of(b"token 12345678"), of(b"token 12345679"));
        let mut spread = std::collections::BTreeSet::new();
        for n in 0..10_000u32 {
            spread.insert(of(format!("state {n}").as_bytes()));
        }
        assert_eq!(spread.len(), 10_000);
    }

    #[test]
    fn a_stream_hashes_alike_however_it_is_split() {
        let text = b"Lease { holder: \"client-1\", token: 3 }";
        let whole = of(text);
        for cut in 0..text.len() {
            for cut2 in cut..text.len() {
                let mut h = Fingerprint::default();
                h.write(&text[..cut]);
                h.write(&text[cut..cut2]);
                h.write(&text[cut2..]);
                assert_eq!(h.finish(), whole, "cut at {cut} and {cut2}");
            }
        }
    }

    #[test]
    fn numbers_hash_as_their_little_endian_bytes_in_the_stream() {
        let numbers = |h: &mut Fingerprint| {
            h.write_u8(7);
            h.write_u32(0xdead_beef);
            h.write_u64(0x0102_0304_0506_0708);
            h.write_u16(0xabcd);
            h.write_usize(12_345);
            h.write_u64(u64::MAX);
        };
        let mut bytes = Vec::new();
        bytes.push(7u8);
        bytes.extend(0xdead_beef_u32.to_le_bytes());
        bytes.extend(0x0102_0304_0506_0708_u64.to_le_bytes());
        bytes.extend(0xabcd_u16.to_le_bytes());
        bytes.extend(12_345_u64.to_le_bytes());
        bytes.extend(u64::MAX.to_le_bytes());
        // From every offset in the pending word.
        for lead in 0..9 {
            let mut h = Fingerprint::default();
            h.write(&bytes[..0]);
            h.write(&vec![9u8; lead]);
            numbers(&mut h);
            let mut stream = vec![9u8; lead];
            stream.extend(&bytes);
            assert_eq!(h.finish(), of(&stream), "after {lead} bytes");
        }
    }

    #[test]
    fn the_same_words_give_the_same_fingerprint_on_every_platform() {
        assert_eq!(of(b"lease"), 0xbfa2_f218_af9f_1249);
    }
}
