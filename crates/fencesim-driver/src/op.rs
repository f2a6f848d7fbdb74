//! A client's operations as the history records them (Jepsen's invoke, then ok, fail or
//! info): the fields an operation keeps from invoke to completion, what a design's
//! [`OpResult`] completes it as, and what a resource's answer to a write or delete does.
//! The simulator's client and the explorer's both record through these.

use fencesim_design::{OpResult, WriteOutcome};
use fencesim_history::{Name, Op, OpFn, OpType};

/// The fields of an operation that stay the same from invoke to completion.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OpTemplate {
    /// The Jepsen process that invokes it.
    pub process: u64,
    /// The client's name.
    pub node: Name,
    /// What it does.
    pub f: OpFn,
    /// The lock (acquire, renew, release).
    pub lock: Option<Name>,
    /// The resource key (read, write, delete).
    pub key: Option<Name>,
    /// The fencing token presented.
    pub token: Option<u64>,
    /// The value written.
    pub value: Option<String>,
}

impl OpTemplate {
    /// Operation `f` of client `node` (process `process`) on its `lock` or its `key`, as `f`
    /// says, with the token and value it presents.
    pub fn new(
        process: u64,
        node: &Name,
        [lock, key]: [&Name; 2],
        f: OpFn,
        token: Option<u64>,
        value: Option<String>,
    ) -> Self {
        let (lock, key) = match f {
            OpFn::Acquire | OpFn::Renew | OpFn::Release => (Some(lock.clone()), None),
            // The simulated clients never compare-and-set; a cas would be on the key too.
            OpFn::Read | OpFn::Write | OpFn::Cas | OpFn::Delete => (None, Some(key.clone())),
        };
        OpTemplate {
            process,
            node: node.clone(),
            f,
            lock,
            key,
            token,
            value,
        }
    }

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
            expected: None,
            value_unknown: false,
            ttl_ms: None,
            error: None,
        }
    }
}

/// The result of a lock operation, without its error text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// `ok`, with the fencing token it carries (an acquire's grant).
    Ok(Option<u64>),
    /// `fail`: it did not happen.
    Failed,
    /// `info`: nobody knows whether it happened; the process is retired.
    Unknown,
}

/// A design's completion of lock operation `tpl` as its history record, and its outcome.
pub fn completion(tpl: &OpTemplate, result: OpResult) -> (Op, Outcome) {
    let (op_type, token, error, outcome) = match result {
        OpResult::Ok { token } => (OpType::Ok, token, None, Outcome::Ok(token)),
        OpResult::Fail { error } => (OpType::Fail, None, Some(error), Outcome::Failed),
        OpResult::Unknown { error } => (OpType::Info, None, Some(error), Outcome::Unknown),
    };
    let mut record = tpl.record(op_type);
    if token.is_some() {
        record.token = token;
    }
    record.error = error;
    (record, outcome)
}

/// The completion of a write or delete (`tpl`) the resource answered with `outcome`: `ok`
/// if it was accepted, `fail` with why it was refused.
pub fn mutation_completion(tpl: &OpTemplate, outcome: &WriteOutcome) -> Op {
    match *outcome {
        WriteOutcome::Accepted { .. } => tpl.record(OpType::Ok),
        WriteOutcome::Rejected { presented, highest } => {
            let error = match presented {
                0 if tpl.f == OpFn::Delete => {
                    format!("a delete without a token: highest accepted is {highest}")
                }
                _ => format!("stale token {presented}: highest accepted is {highest}"),
            };
            Op {
                error: Some(error),
                ..tpl.record(OpType::Fail)
            }
        }
    }
}

/// The `info` completion of a read, write or delete (`tpl`) that had no reply within
/// `timeout_ms`.
pub fn timed_out(tpl: &OpTemplate, timeout_ms: u64) -> Op {
    Op {
        error: Some(format!("no reply within {timeout_ms} ms")),
        ..tpl.record(OpType::Info)
    }
}
