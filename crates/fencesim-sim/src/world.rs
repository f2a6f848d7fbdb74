//! What every task of one run shares.

use std::sync::{Arc, Mutex};

use fencesim_history::{Event, Op, OpFn, OpType};
use fencesim_scenario::Scenario;

use crate::clock::Clocks;
use crate::nemesis::Nemesis;
use crate::recorder::Recorder;
use crate::transport::Network;

/// The shared state of one simulated run. Tasks run one at a time on madsim's executor, so
/// the mutexes never contend; they exist because madsim's `spawn` wants `Send` futures.
pub(crate) struct World {
    pub scenario: Scenario,
    pub recorder: Arc<Recorder>,
    pub clocks: Arc<Clocks>,
    pub net: Arc<Network>,
    pub nemesis: Nemesis,
    next_process: Mutex<u64>,
}

impl World {
    pub fn new(
        scenario: Scenario,
        recorder: Arc<Recorder>,
        clocks: Arc<Clocks>,
        net: Arc<Network>,
        nemesis: Nemesis,
    ) -> Self {
        World {
            scenario,
            recorder,
            clocks,
            net,
            nemesis,
            next_process: Mutex::new(0),
        }
    }

    /// A fresh Jepsen process id (clients get a new one after every `info`).
    pub fn new_process(&self) -> u64 {
        let mut next = self.next_process.lock().expect("process counter");
        let p = *next;
        *next += 1;
        p
    }

    /// Record a service or nemesis event; returns its index.
    pub fn event(&self, event: Event) -> u64 {
        self.recorder.event(&self.clocks, event)
    }

    /// Record a client operation; returns its index.
    pub fn op(&self, op: Op) -> u64 {
        self.recorder.op(&self.clocks, op)
    }
}

/// The fields of an operation that stay the same from invoke to completion.
#[derive(Clone, Debug)]
pub(crate) struct OpTemplate {
    pub process: u64,
    pub node: String,
    pub f: OpFn,
    pub lock: Option<String>,
    pub key: Option<String>,
    pub token: Option<u64>,
    pub value: Option<String>,
}

impl OpTemplate {
    /// The record of this operation with type `op_type`.
    pub fn record(&self, op_type: OpType) -> Op {
        Op {
            at: Default::default(),
            process: self.process,
            node: self.node.clone(),
            op_type,
            f: self.f,
            lock: self.lock.clone(),
            key: self.key.clone(),
            token: self.token,
            value: self.value.clone(),
            error: None,
        }
    }
}
