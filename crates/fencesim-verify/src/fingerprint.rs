//! The 64-bit fingerprint that identifies a search state: FNV-1a over everything that decides
//! what the state does next, as TLC fingerprints its states. Stable across runs, platforms
//! and Rust versions (the standard library's hasher is not), so a count of states is the same
//! everywhere.

use std::hash::Hasher;

/// FNV-1a, 64 bits.
#[derive(Clone, Copy, Debug)]
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The fingerprint of `value`'s `Debug` form.
pub fn of_debug<T: std::fmt::Debug + ?Sized>(value: &T) -> u64 {
    let mut h = Fnv::default();
    fencesim_design::explore::hash_debug(value, &mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use std::hash::Hasher;

    use super::Fnv;

    #[test]
    fn fnv1a_gives_its_published_values() {
        let of = |s: &str| {
            let mut h = Fnv::default();
            h.write(s.as_bytes());
            h.finish()
        };
        // The FNV-1a 64-bit test vectors.
        assert_eq!(of(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(of("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(of("foobar"), 0x8594_4171_f739_67e8);
    }
}
