//! The fenced resource in the explored configuration: the scenario's resource design, behind
//! an object so the search needs no second type parameter, and its writes decided later
//! (case K20) as timers of its own.
//!
//! A resource's state is the design's and need not be `Clone`: a copy is a fresh resource
//! that has the same calls made again (a schedule makes a few writes), and its fingerprint is
//! those calls, with the writes still to be applied.

use std::hash::Hasher;
use std::sync::Arc;

use fencesim_design::{FencedResource, ReadValue, ResourceDesign, WriteDecision, WriteOutcome};

/// A resource's state machine, without its type.
pub trait DynResource: Send + Sync {
    /// A write; see [`FencedResource::write`].
    fn write(&mut self, key: &str, token: u64, value: &str) -> WriteDecision;
    /// A write decided later comes due; see [`FencedResource::apply_due`].
    fn apply_due(&mut self, key: &str, token: u64, value: &str) -> WriteOutcome;
    /// A delete; see [`FencedResource::delete`].
    fn delete(&mut self, key: &str, token: Option<u64>) -> WriteOutcome;
    /// A read; see [`FencedResource::read`].
    fn read(&self, key: &str) -> ReadValue;
}

impl<T: FencedResource> DynResource for T {
    fn write(&mut self, key: &str, token: u64, value: &str) -> WriteDecision {
        FencedResource::write(self, key, token, value)
    }
    fn apply_due(&mut self, key: &str, token: u64, value: &str) -> WriteOutcome {
        FencedResource::apply_due(self, key, token, value)
    }
    fn delete(&mut self, key: &str, token: Option<u64>) -> WriteOutcome {
        FencedResource::delete(self, key, token)
    }
    fn read(&self, key: &str) -> ReadValue {
        FencedResource::read(self, key)
    }
}

/// Makes a scenario's resource: every [`ResourceDesign`] is one.
pub trait VerifyResource: Send + Sync {
    /// An empty resource, from the settings the scenario parser kept for it.
    ///
    /// # Panics
    /// The scenario was not parsed (its resource has no settings).
    fn make(&self, settings: &fencesim_design::Settings) -> Box<dyn DynResource>;
}

impl<R: ResourceDesign> VerifyResource for R {
    fn make(&self, settings: &fencesim_design::Settings) -> Box<dyn DynResource> {
        let config = settings
            .get::<<R::State as FencedResource>::Config>()
            .expect("[resource] has no settings of its design: the scenario was not parsed");
        Box::new(R::State::new(config))
    }
}

/// A call made of the resource, kept to make a copy.
#[derive(Clone, Debug)]
enum Call {
    Write(String, u64, String),
    ApplyDue(String, u64, String),
    Delete(String, Option<u64>),
}

/// A write the resource decided to apply later: when, and the message it answers.
#[derive(Clone, Debug)]
pub struct Due {
    /// When, on the resource's clock, ns.
    pub at_ns: u64,
    /// The key, token and value.
    pub write: (String, u64, String),
    /// Who wrote, the message's id, and its operation.
    pub from: (crate::net::Agent, u64, Option<u64>),
}

/// The resource, the calls made of it, and its writes still to apply.
pub struct ResourceAgent {
    state: Box<dyn DynResource>,
    make: Arc<dyn Fn() -> Box<dyn DynResource> + Send + Sync>,
    calls: Vec<Call>,
    /// Writes decided later, in the order decided.
    pub due: Vec<Due>,
    /// Its clock, ns.
    pub clock_ns: u64,
    /// How many messages it sent.
    pub sent: u64,
}

impl ResourceAgent {
    /// An empty resource made by `make`.
    pub fn new(make: Arc<dyn Fn() -> Box<dyn DynResource> + Send + Sync>) -> Self {
        ResourceAgent {
            state: make(),
            make,
            calls: Vec::new(),
            due: Vec::new(),
            clock_ns: 0,
            sent: 0,
        }
    }

    /// A write.
    pub fn write(&mut self, key: &str, token: u64, value: &str) -> WriteDecision {
        self.calls
            .push(Call::Write(key.into(), token, value.into()));
        self.state.write(key, token, value)
    }

    /// A write decided earlier comes due.
    pub fn apply_due(&mut self, key: &str, token: u64, value: &str) -> WriteOutcome {
        self.calls
            .push(Call::ApplyDue(key.into(), token, value.into()));
        self.state.apply_due(key, token, value)
    }

    /// A delete.
    pub fn delete(&mut self, key: &str, token: Option<u64>) -> WriteOutcome {
        self.calls.push(Call::Delete(key.into(), token));
        self.state.delete(key, token)
    }

    /// A read.
    pub fn read(&self, key: &str) -> ReadValue {
        self.state.read(key)
    }

    /// A copy: a fresh resource with the same calls made again.
    pub fn copy(&self) -> Self {
        let mut state = (self.make)();
        for call in &self.calls {
            match call {
                Call::Write(k, t, v) => {
                    state.write(k, *t, v);
                }
                Call::ApplyDue(k, t, v) => {
                    state.apply_due(k, *t, v);
                }
                Call::Delete(k, t) => {
                    state.delete(k, *t);
                }
            }
        }
        ResourceAgent {
            state,
            make: Arc::clone(&self.make),
            calls: self.calls.clone(),
            due: self.due.clone(),
            clock_ns: self.clock_ns,
            sent: self.sent,
        }
    }

    /// Feed what decides its future into `h`: the calls made of it (its state is theirs:
    /// a read would not show a fence's highest token after a delete), the writes still to
    /// apply, its clock.
    pub fn hash_into(&self, h: &mut dyn Hasher) {
        fencesim_design::explore::hash_debug(&self.calls, h);
        fencesim_design::explore::hash_debug(&self.due, h);
        h.write_u64(self.clock_ns);
        h.write_u64(self.sent);
    }
}
