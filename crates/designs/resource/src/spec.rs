//! The resource on the design API: [`FencedStore`] and its three `[resource] mode`s.

use fencesim_design::{
    FencedResource, KnobError, Knobs, ReadValue, ResourceDesign, SafeKnob, SafeValue,
    WriteDecision, WriteOutcome,
};

use crate::{FenceMode, Resource};

/// How a write's token is checked against the highest accepted token.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Check {
    /// Check and store in one atomic step (a conditional update, `UPDATE ... WHERE token <=
    /// :token`), as Kleppmann 2016 requires.
    #[default]
    Atomic,
    /// DEFECT (K20): check the token, then store `apply_delay_ms` later without checking again
    /// (a read-then-write in application code). Two writes that arrive close together both
    /// pass the check, and the older one may be stored last.
    CheckThenApply {
        /// The unprotected window, simulated ms.
        apply_delay_ms: u64,
    },
}

/// What a fenced store does with a mutation that carries no token (a cleanup job's delete).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tokenless {
    /// Refuse it: every mutation of a fenced key must present a token (the safe design).
    #[default]
    Reject,
    /// DEFECT: let it through, as a maintenance path that goes around the fence does; a
    /// former holder's late cleanup then deletes its successor's data (`unfenced-mutation`).
    Accept,
}

/// A [`FencedStore`]'s settings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreConfig {
    /// How it treats tokens.
    pub mode: FenceMode,
    /// Whether the check and the store are one step.
    pub check: Check,
    /// What it does with a delete that carries no token (an unfenced store accepts it).
    pub tokenless: Tokenless,
}

/// The key-value store fenced per key ([`Resource`]) as a design's resource.
#[derive(Clone, Debug)]
pub struct FencedStore {
    resource: Resource,
    check: Check,
    tokenless: Tokenless,
}

impl FencedResource for FencedStore {
    type Config = StoreConfig;

    fn new(config: &StoreConfig) -> Self {
        FencedStore {
            resource: Resource::new(config.mode),
            check: config.check,
            tokenless: config.tokenless,
        }
    }

    fn write(&mut self, key: &str, token: u64, value: &str) -> WriteDecision {
        match self.check {
            Check::Atomic => WriteDecision::Now(self.resource.write(key, token, value)),
            Check::CheckThenApply { apply_delay_ms } => match self.resource.check(key, token) {
                Some(rejected) => WriteDecision::Now(rejected),
                None => WriteDecision::Later {
                    after_ms: apply_delay_ms,
                },
            },
        }
    }

    fn apply_due(&mut self, key: &str, token: u64, value: &str) -> WriteOutcome {
        self.resource.apply(key, token, value)
    }

    fn delete(&mut self, key: &str, token: Option<u64>) -> WriteOutcome {
        match (token, self.resource.mode(), self.tokenless) {
            (Some(token), _, _) => self.resource.delete(key, token),
            (None, FenceMode::Unfenced, _) | (None, _, Tokenless::Accept) => {
                self.resource.clear(key)
            }
            (None, _, Tokenless::Reject) => WriteOutcome::Rejected {
                presented: 0,
                highest: self.resource.highest(key),
            },
        }
    }

    fn read(&self, key: &str) -> ReadValue {
        self.resource.read(key)
    }
}

/// The window between check and apply when `check = "check-then-apply"` names none, ms.
const DEFAULT_APPLY_DELAY_MS: u64 = 100;

/// A `[resource] mode` of the [`FencedStore`]: its [`FenceMode`], and the `check` and
/// `apply_delay_ms` knobs.
#[derive(Clone, Copy, Debug)]
pub struct StoreSpec {
    mode: FenceMode,
    name: &'static str,
    about: &'static str,
}

/// `mode = "fenced"`: reject stale tokens (the safe design).
pub static FENCED: StoreSpec = StoreSpec {
    mode: FenceMode::Fenced,
    name: "fenced",
    about: "rejects a write whose token is below the highest accepted (the safe design)",
};
/// `mode = "unfenced"`: accept every write (the counterexample).
pub static UNFENCED: StoreSpec = StoreSpec {
    mode: FenceMode::Unfenced,
    name: "unfenced",
    about: "accepts every write (the counterexample)",
};
/// `mode = "equality"`: for opaque lock values (case K23).
pub static EQUALITY: StoreSpec = StoreSpec {
    mode: FenceMode::Equality,
    name: "equality",
    about: "accepts the current lock value and unseen ones, rejects replaced ones (K23)",
};

impl StoreSpec {
    /// Its knobs.
    pub const KNOBS: &'static [&'static str] = &["check", "apply_delay_ms", "tokenless"];

    /// The store's settings from the knobs.
    pub fn settings(&self, knobs: &mut Knobs) -> Result<StoreConfig, KnobError> {
        let options = [("atomic", false), ("check-then-apply", true)];
        let then_apply = knobs.choice("check", &options, false)?;
        let check = if then_apply {
            let apply_delay_ms = knobs.integer("apply_delay_ms", 1, DEFAULT_APPLY_DELAY_MS)?;
            Check::CheckThenApply { apply_delay_ms }
        } else if knobs.is_given("apply_delay_ms") {
            return Err(knobs.error(
                "apply_delay_ms",
                "only a resource with check = \"check-then-apply\" has a delay between check and apply",
            ));
        } else {
            Check::Atomic
        };
        let tokenless = if self.mode == FenceMode::Unfenced {
            if knobs.is_given("tokenless") {
                return Err(knobs.error(
                    "tokenless",
                    "an unfenced resource accepts every mutation, with a token or without",
                ));
            }
            Tokenless::Accept
        } else {
            let options = [("reject", Tokenless::Reject), ("accept", Tokenless::Accept)];
            knobs.choice("tokenless", &options, Tokenless::Reject)?
        };
        Ok(StoreConfig {
            mode: self.mode,
            check,
            tokenless,
        })
    }
}

impl ResourceDesign for StoreSpec {
    type State = FencedStore;

    fn mode(&self) -> &'static str {
        self.name
    }

    fn about(&self) -> &'static str {
        self.about
    }

    fn knob_names(&self) -> &'static [&'static str] {
        Self::KNOBS
    }

    fn config(&self, knobs: &mut Knobs) -> Result<StoreConfig, KnobError> {
        self.settings(knobs)
    }

    /// The fenced store with an atomic check and token-less mutations refused; the other
    /// modes make no claim (an unfenced store accepts stale writes, an equality store is for
    /// opaque tokens).
    fn safe_knobs(&self) -> &'static [SafeKnob] {
        match self.mode {
            FenceMode::Fenced => &[
                SafeKnob {
                    name: "check",
                    values: &[SafeValue::Text("atomic")],
                },
                SafeKnob {
                    name: "tokenless",
                    values: &[SafeValue::Text("reject")],
                },
            ],
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_then_apply_defers_a_write_that_passed_the_check() {
        let mut knobs = Knobs::from_toml("check = \"check-then-apply\"").unwrap();
        let config = FENCED.settings(&mut knobs).unwrap();
        assert_eq!(
            config.check,
            Check::CheckThenApply {
                apply_delay_ms: DEFAULT_APPLY_DELAY_MS
            }
        );
        let mut store = FencedStore::new(&config);
        assert_eq!(
            store.write("k", 34, "b"),
            WriteDecision::Later { after_ms: 100 }
        );
        assert_eq!(
            store.apply_due("k", 34, "b"),
            WriteOutcome::Accepted { highest: 34 }
        );
        assert_eq!(
            store.write("k", 33, "a"),
            WriteDecision::Now(WriteOutcome::Rejected {
                presented: 33,
                highest: 34
            })
        );
    }

    #[test]
    fn a_delay_without_check_then_apply_is_refused() {
        let mut knobs = Knobs::from_toml("apply_delay_ms = 5").unwrap();
        let e = UNFENCED.settings(&mut knobs).unwrap_err();
        assert_eq!(e.field, "apply_delay_ms");
        assert_eq!(
            e.message,
            "only a resource with check = \"check-then-apply\" has a delay between check and apply"
        );
    }

    #[test]
    fn a_delete_is_fenced_as_a_write_and_a_tokenless_one_only_where_let_through() {
        let mut fenced = FencedStore::new(&StoreConfig::default());
        assert_eq!(
            fenced.write("k", 2, "b"),
            WriteDecision::Now(WriteOutcome::Accepted { highest: 2 })
        );
        assert_eq!(
            fenced.delete("k", Some(1)),
            WriteOutcome::Rejected {
                presented: 1,
                highest: 2
            }
        );
        assert_eq!(
            fenced.delete("k", None),
            WriteOutcome::Rejected {
                presented: 0,
                highest: 2
            }
        );
        assert_eq!(fenced.read("k").value.as_deref(), Some("b"));
        assert_eq!(
            fenced.delete("k", Some(2)),
            WriteOutcome::Accepted { highest: 2 }
        );
        assert_eq!(
            fenced.read("k"),
            ReadValue {
                value: None,
                token: Some(2)
            }
        );

        let mut knobs = Knobs::from_toml("tokenless = \"accept\"").unwrap();
        let mut leaky = FencedStore::new(&FENCED.settings(&mut knobs).unwrap());
        let _ = leaky.write("k", 2, "b");
        assert_eq!(
            leaky.delete("k", None),
            WriteOutcome::Accepted { highest: 2 }
        );
        assert_eq!(leaky.read("k"), ReadValue::default());
        // The fence stands after a token-less delete: an older token is still refused.
        assert_eq!(
            leaky.write("k", 1, "a"),
            WriteDecision::Now(WriteOutcome::Rejected {
                presented: 1,
                highest: 2
            })
        );
    }
}
