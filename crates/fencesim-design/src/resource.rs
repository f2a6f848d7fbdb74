//! Resources: the storage a lock protects, as a design of its own (`[resource] mode`).
//!
//! A resource is a sans-IO state machine like a lock-service node: the harness's `resource`
//! node hands it each write and read its clients send, records each write's decision as an
//! `accept` or `reject` event in the order the resource made them (the order the checker
//! judges by), and answers the client. A fenced resource keeps the highest fencing token it has
//! accepted per key and refuses older ones in the same atomic step as the write (Kleppmann
//! 2016; `UPDATE ... WHERE highest_fence_token <= :token`). A resource may also decide a write
//! later ([`WriteDecision::Later`]): it checked the token now and stores the value after a
//! delay, without checking again, which is the race of case K20.
//!
//! Which resource runs is the scenario's `[resource] mode`, looked up in the catalog as a
//! [`ResourceModeSpec`] that reads the table's knobs (all but `mode` and `keys`) as a lock design
//! reads its own. The workload mutates a key two ways: a write, always with the fencing token
//! of the lease it holds, and, where a client's `cleanup` asks for it, a delete, with the token
//! or (a cleanup path that bypasses the fence, as in incidents where a janitor job removed a
//! live holder's data) without one. The resource decides how it fences each kind.

use serde::{Deserialize, Serialize};

use crate::knobs::{KnobError, Knobs};

/// A write's outcome, as the resource answers the client and the history records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WriteOutcome {
    /// The value was stored; `highest` is the key's highest accepted token afterwards (in
    /// `equality` mode: the current value, which is this write's).
    Accepted {
        /// The highest accepted token (equality: the current value) after this write.
        highest: u64,
    },
    /// A stale token: nothing changed.
    Rejected {
        /// The token the mutation carried (0: it carried none, a delete refused for that).
        presented: u64,
        /// The key's highest accepted token, which is greater than `presented` (equality: the
        /// current value, which replaced `presented`).
        highest: u64,
    },
}

/// What a resource does with a write now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteDecision {
    /// Decided at once (the atomic check and store of a fenced resource).
    Now(WriteOutcome),
    /// The token passed the check; the value is stored `after_ms` of simulated time later by
    /// [`FencedResource::apply_due`], while the resource serves other requests (a read-then-
    /// write in application code, case K20).
    Later {
        /// The delay, simulated ms.
        after_ms: u64,
    },
}

/// A read's answer: the current value and the token of the write that stored it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadValue {
    /// The stored value (`None`: never written).
    pub value: Option<String>,
    /// The token the stored value was written with (`None`: never written).
    pub token: Option<u64>,
}

/// A resource's state machine. Its state is durable: the harness keeps one instance across
/// crashes of the `resource` node (a database that syncs every write).
///
/// `Send + Sync`: `fencesim verify` shares one copy of a state among the search states that
/// hold it alike, across its worker threads (plain data is both; a `RefCell` or `Rc` is not).
pub trait FencedResource: Send + Sync + 'static {
    /// The resource's settings, from its knobs.
    type Config: Clone + Send + Sync + 'static;

    /// An empty resource.
    fn new(config: &Self::Config) -> Self;
    /// A write of `value` with fencing token `token` to `key`.
    fn write(&mut self, key: &str, token: u64, value: &str) -> WriteDecision;
    /// A write this resource answered [`WriteDecision::Later`] comes due: store it as the
    /// resource does then (a K20 resource stores it unchecked).
    fn apply_due(&mut self, key: &str, token: u64, value: &str) -> WriteOutcome;
    /// A delete of `key` with fencing token `token`, or with none (`None`: a cleanup path that
    /// bypasses the fence). Decided at once; after an accepted delete a read finds the key
    /// never written (`value: None`). Whether a token-less delete is accepted is the
    /// resource's choice, which `unfenced-mutation` judges.
    fn delete(&mut self, key: &str, token: Option<u64>) -> WriteOutcome;
    /// The current value of `key`.
    fn read(&self, key: &str) -> ReadValue;
}

/// A resource as the scenario parser sees it: every [`ResourceDesign`](crate::ResourceDesign)
/// is one (a resource implements `ResourceDesign`, never this). Object-safe, as
/// [`DesignSpec`](crate::DesignSpec) is.
pub trait ResourceModeSpec: Send + Sync {
    /// The `[resource] mode` that selects it (`"fenced"`).
    fn mode(&self) -> &'static str;
    /// One line on what it does.
    fn about(&self) -> &'static str;
    /// Every knob it may read (besides `mode` and `keys`).
    fn knob_names(&self) -> &'static [&'static str];
    /// Read its knobs with located errors, keeping each value read (default or given), into
    /// its typed configuration.
    ///
    /// # Errors
    /// A knob's value is refused.
    fn resolve(&self, knobs: &mut Knobs) -> Result<crate::Settings, KnobError>;
    /// The knob values it claims safe ([`crate::safe`]).
    fn safe_knobs(&self) -> &'static [crate::safe::SafeKnob];
}
