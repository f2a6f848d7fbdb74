//! The set of fingerprints seen: open addressing over `u64`s, which never iterates (so no
//! order can leak) and costs 8 bytes a state at most twice over.

/// Fingerprints seen so far.
#[derive(Debug)]
pub struct Seen {
    slots: Vec<u64>,
    len: usize,
    /// Whether fingerprint 0 (the empty slot's mark) was seen.
    zero: bool,
}

impl Default for Seen {
    fn default() -> Self {
        Seen {
            slots: vec![0; 1 << 12],
            len: 0,
            zero: false,
        }
    }
}

impl Seen {
    /// Whether `fp` was added.
    pub fn contains(&self, fp: u64) -> bool {
        if fp == 0 {
            return self.zero;
        }
        let mask = self.slots.len() - 1;
        let mut i = (fp as usize) & mask;
        loop {
            match self.slots[i] {
                0 => return false,
                s if s == fp => return true,
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Add `fp`; false if it was there.
    pub fn insert(&mut self, fp: u64) -> bool {
        if fp == 0 {
            return !std::mem::replace(&mut self.zero, true);
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = (fp as usize) & mask;
        loop {
            match self.slots[i] {
                0 => {
                    self.slots[i] = fp;
                    self.len += 1;
                    return true;
                }
                s if s == fp => return false,
                _ => i = (i + 1) & mask,
            }
        }
    }

    fn grow(&mut self) {
        let doubled = vec![0; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        self.len = 0;
        for fp in old.into_iter().filter(|&fp| fp != 0) {
            self.insert(fp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Seen;

    #[test]
    fn each_fingerprint_is_new_once_across_growth() {
        let mut seen = Seen::default();
        for fp in 0..10_000u64 {
            assert!(
                !seen.contains(fp.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                "{fp}"
            );
            assert!(seen.insert(fp.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
        }
        for fp in 0..10_000u64 {
            assert!(
                seen.contains(fp.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                "{fp}"
            );
            assert!(!seen.insert(fp.wrapping_mul(0x9e37_79b9_7f4a_7c15)), "{fp}");
        }
        assert!(!seen.contains(7));
        assert!(seen.insert(7));
        assert!(seen.contains(7));
    }
}
