//! The knob values under which a design claims to be safe.
//!
//! A design's knobs switch on the defects of real incidents (`fsync = "never"`, K04;
//! `release = "unconditional"`, K19) beside the correct choices. Which values are correct is
//! the design's own knowledge, so the design says it: each [`SafeKnob`] lists the values of one
//! knob that it claims keep every safety property (no stale write accepted, tokens monotonic
//! and unique, mutual exclusion, no release by a non-holder, no unfenced mutation, no duplicate
//! execution, linearizable reads and writes) under every fault of its random nemesis, in any
//! combination with the other listed values, with clients that check their own lease before
//! writing and a resource that fences. `fencesim bench --only safe-knobs` holds the design to
//! that claim: every seed draws one listed value per knob (and the workload's own knobs:
//! clients, cycles, keys, renewals, cleanup) and must show no safety violation (issue 31:
//! a false positive the checker had on deletes hid behind one fixed safe configuration per
//! design).
//!
//! A knob a design does not list is left as the scenario sets it. A design that makes no
//! safety claim under the random nemesis (primary-backup: a heartbeat failover splits the
//! brain under a partition) lists nothing.

use crate::knobs::KnobValue;

/// The values of one knob that a design claims safe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SafeKnob {
    /// The knob (`fsync`).
    pub name: &'static str,
    /// Its safe values, at least one.
    pub values: &'static [SafeValue],
}

/// One knob value, as a scenario file would write it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SafeValue {
    /// A string (`"always"`).
    Text(&'static str),
    /// An integer (`5`).
    Integer(i64),
    /// A boolean (`true`).
    Flag(bool),
}

impl SafeValue {
    /// The value as the knobs' TOML value.
    pub fn to_knob_value(self) -> KnobValue {
        match self {
            SafeValue::Text(s) => KnobValue::String(s.to_owned()),
            SafeValue::Integer(n) => KnobValue::Integer(n),
            SafeValue::Flag(b) => KnobValue::Boolean(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_become_the_toml_a_file_would_hold() {
        assert_eq!(
            SafeValue::Text("always").to_knob_value(),
            KnobValue::String("always".into())
        );
        assert_eq!(SafeValue::Integer(5).to_knob_value(), KnobValue::Integer(5));
        assert_eq!(
            SafeValue::Flag(true).to_knob_value(),
            KnobValue::Boolean(true)
        );
    }
}
