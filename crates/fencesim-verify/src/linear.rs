//! What linearizability can still tell apart in a history so far: for each key, every
//! configuration a linearization of the history so far may have left the register in. This is
//! just-in-time linearization (Lowe 2017, "Testing for linearizability"): an operation is
//! placed in the linearization only when it must be, at its completion, or earlier where a
//! later completion needs it; until then the configurations keep every choice open.
//!
//! Two histories whose configurations are equal are linearizable under exactly the same
//! continuations, whatever their real-time orders were, so the search may merge them. Before
//! this, a state kept for each operation how many operations of every client had completed
//! when it was invoked, and the search told apart every interleaving of two clients' calls to
//! the resource, almost all of which linearize alike.
//!
//! The operations and their readings are the checker's (`fencesim-checker`'s linearizable.rs,
//! with the default options): reads, writes and deletes of a key, paired by process; a failed
//! read or write did not happen, an unknown (`info`) write may take effect at any later moment
//! or never, an unknown read or a read of an unknown value saw nothing, and a failed
//! compare-and-set did not happen (Knossos's reading). A test holds the verdict at a
//! history's end to the checker's on random histories.

use std::collections::{BTreeMap, BTreeSet};

use fencesim_history::{Op, OpFn, OpType};

/// An operation: its process, and how many operations that process had invoked before it.
type OpId = (u64, u64);

/// A register's value (`None`: never written, or deleted).
type Value = Option<String>;

/// What a pending operation does to the register if it takes effect.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Effect {
    /// A read: it changes nothing, and what it returns is checked at its completion.
    Read,
    /// A write of this value (a delete writes `None`).
    Write(Value),
    /// A compare-and-set: from `from` to `to`, only if the register holds `from`.
    Cas { from: Value, to: Value },
}

/// One state a linearization of the history so far may be in.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Config {
    /// The register's value.
    value: Value,
    /// The pending writes, deletes and compare-and-sets already placed.
    placed: BTreeSet<OpId>,
    /// For each pending read, every value the register held since it was invoked: the
    /// values it may return.
    readable: BTreeMap<OpId, BTreeSet<Value>>,
}

/// One key's pending operations and configurations.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    /// The operations invoked and not completed (an unknown write stays pending for good).
    pending: BTreeMap<OpId, Effect>,
    /// Every configuration, closed under placing any pending write (see [`Key::close`]).
    configs: BTreeSet<Config>,
}

impl Default for Key {
    fn default() -> Self {
        let empty = Config {
            value: None,
            placed: BTreeSet::new(),
            readable: BTreeMap::new(),
        };
        Key {
            pending: BTreeMap::new(),
            configs: BTreeSet::from([empty]),
        }
    }
}

/// The register configurations of every key, as the history so far leaves them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Linear {
    keys: BTreeMap<String, Key>,
    /// Each process's operation awaiting its completion, and its key.
    awaiting: BTreeMap<u64, (String, OpId)>,
    /// How many operations each process has invoked on the register.
    invoked: BTreeMap<u64, u64>,
}

impl Linear {
    /// Take `op` (any client operation: those that are not a register's are ignored).
    pub fn take(&mut self, op: &Op) {
        if !matches!(op.f, OpFn::Read | OpFn::Write | OpFn::Cas | OpFn::Delete) {
            return;
        }
        let Some(key) = op.key.as_deref() else {
            return;
        };
        match op.op_type {
            OpType::Invoke => self.invoke(key, op),
            _ => self.complete(op),
        }
    }

    /// Whether some linearization explains the history so far: the checker's verdict, were
    /// the history to end here.
    pub fn linearizable(&self) -> bool {
        self.keys.values().all(|k| !k.configs.is_empty())
    }

    fn invoke(&mut self, key: &str, op: &Op) {
        let count = self.invoked.entry(op.process).or_default();
        let id = (op.process, *count);
        *count += 1;
        // A process that invokes again before its last completed leaves that one pending for
        // good (the checker's pairing).
        self.awaiting.insert(op.process, (key.to_owned(), id));
        // A write or compare-and-set without a value writes the empty one, as the checker
        // reads it; only a delete leaves the key as never written.
        let written = || Some(op.value.clone().unwrap_or_default());
        let effect = match op.f {
            OpFn::Read => Effect::Read,
            OpFn::Write => Effect::Write(written()),
            OpFn::Delete => Effect::Write(None),
            _ => Effect::Cas {
                from: op.expected.clone(),
                to: written(),
            },
        };
        let k = self.keys.entry(key.to_owned()).or_default();
        if effect == Effect::Read {
            k.each_config(|c| {
                c.readable.insert(id, BTreeSet::from([c.value.clone()]));
            });
        }
        k.pending.insert(id, effect);
        k.close();
    }

    fn complete(&mut self, op: &Op) {
        // A completion whose invoke was not taken (or was paired already) pairs with nothing.
        let Some((key, id)) = self.awaiting.remove(&op.process) else {
            return;
        };
        let k = self.keys.get_mut(&key).expect("an awaited operation's key");
        let Some(effect) = k.pending.get(&id) else {
            return;
        };
        let read = *effect == Effect::Read;
        match op.op_type {
            // A read that returned a known value: some moment since its invoke held it.
            OpType::Ok if read && !op.value_unknown => {
                let seen = &op.value;
                k.configs
                    .retain(|c| c.readable.get(&id).is_some_and(|r| r.contains(seen)));
            }
            // A write that took effect: it was placed by now.
            OpType::Ok if !read => k.configs.retain(|c| c.placed.contains(&id)),
            // A failed write did not happen.
            OpType::Fail if !read => k.configs.retain(|c| !c.placed.contains(&id)),
            // An unknown write may still take effect, or never: it stays pending for good.
            OpType::Info if !read => return,
            // Any other read saw nothing the checker reads.
            _ => {}
        }
        k.pending.remove(&id);
        k.each_config(|c| {
            c.placed.remove(&id);
            c.readable.remove(&id);
        });
    }
}

impl Key {
    /// Change every configuration by `change` (configurations made equal become one).
    fn each_config(&mut self, mut change: impl FnMut(&mut Config)) {
        self.configs = std::mem::take(&mut self.configs)
            .into_iter()
            .map(|mut c| {
                change(&mut c);
                c
            })
            .collect();
    }

    /// Add every configuration reached by placing pending writes not yet placed, in any
    /// order: the set is kept closed, so that two histories with the same possibilities have
    /// the same set.
    fn close(&mut self) {
        let mut todo: Vec<Config> = self.configs.iter().cloned().collect();
        while let Some(c) = todo.pop() {
            for (id, effect) in &self.pending {
                if c.placed.contains(id) {
                    continue;
                }
                let value = match effect {
                    Effect::Read => continue,
                    Effect::Write(v) => v.clone(),
                    Effect::Cas { from, to } if *from == c.value => to.clone(),
                    Effect::Cas { .. } => continue,
                };
                let mut next = c.clone();
                next.placed.insert(*id);
                for seen in next.readable.values_mut() {
                    seen.insert(value.clone());
                }
                next.value = value;
                if self.configs.insert(next.clone()) {
                    todo.push(next);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use fencesim_checker::{check_with, CheckOptions};
    use fencesim_history::{Entry, Header, History, Op, OpFn, OpType, Stamp, ViolationKind};
    use proptest::prelude::*;

    use super::Linear;

    /// One client process's part in a random history.
    #[derive(Clone)]
    enum Slot {
        Idle,
        Pending(OpFn, &'static str),
    }

    fn op(process: u64, op_type: OpType, f: OpFn, key: &str, value: Option<&str>) -> Op {
        Op {
            at: Stamp::default(),
            process,
            node: format!("client-{process}").into(),
            op_type,
            f,
            lock: None,
            key: Some(key.into()),
            token: None,
            value: value.map(str::to_owned),
            expected: None,
            value_unknown: false,
            ttl_ms: None,
            error: None,
        }
    }

    /// A well-formed history of reads, writes and deletes by three processes on two keys,
    /// from `steps` (each picks a process and what it does next).
    fn history(steps: &[(usize, u8, u8, u8)]) -> Vec<Op> {
        const VALUES: [&str; 3] = ["a", "b", "c"];
        let mut slots = vec![Slot::Idle; 3];
        let mut process: Vec<u64> = vec![0, 1, 2];
        let mut next_process = 3;
        let mut ops = Vec::new();
        for &(s, what, key, value) in steps {
            let p = process[s];
            match slots[s].clone() {
                Slot::Idle => {
                    let key = ["x", "y"][usize::from(key % 2)];
                    let f =
                        [OpFn::Read, OpFn::Write, OpFn::Write, OpFn::Delete][usize::from(what % 4)];
                    // Now and then a write without a value: the checker reads it as "".
                    let v =
                        (f == OpFn::Write && value < 240).then(|| VALUES[usize::from(value % 3)]);
                    ops.push(op(p, OpType::Invoke, f, key, v));
                    slots[s] = Slot::Pending(f, key);
                }
                Slot::Pending(f, key) => {
                    let op_type = [
                        OpType::Ok,
                        OpType::Ok,
                        OpType::Ok,
                        OpType::Fail,
                        OpType::Info,
                    ][usize::from(what % 5)];
                    let seen = match (f, op_type, value % 4) {
                        (OpFn::Read, OpType::Ok, 3) if value >= 128 => Some(""),
                        (OpFn::Read, OpType::Ok, 3) => None,
                        (OpFn::Read, OpType::Ok, v) => Some(VALUES[usize::from(v)]),
                        _ => None,
                    };
                    let mut done = op(p, op_type, f, key, seen);
                    done.value_unknown =
                        f == OpFn::Read && op_type == OpType::Ok && key == "y" && value >= 200;
                    ops.push(done);
                    slots[s] = Slot::Idle;
                    if op_type == OpType::Info {
                        process[s] = next_process;
                        next_process += 1;
                    }
                }
            }
        }
        ops
    }

    /// The configurations `ops` leave.
    fn linear(ops: &[Op]) -> Linear {
        let mut l = Linear::default();
        ops.iter().for_each(|o| l.take(o));
        l
    }

    fn checker_says_linearizable(ops: &[Op]) -> bool {
        let entries = ops
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let mut o = o.clone();
                o.at = Stamp {
                    index: i as u64,
                    time_ns: i as u64,
                    ..Stamp::default()
                };
                Entry::Op(o)
            })
            .collect();
        let history = History {
            header: Header::unnamed(),
            entries,
        };
        let result = check_with(&history, &CheckOptions::default());
        // Small histories: the checker's search never runs out of budget on them.
        assert!(
            !result.unknown.iter().any(|u| u.contains("linearizab")),
            "{:?}",
            result.unknown
        );
        !result
            .violations
            .iter()
            .any(|v| v.kind == ViolationKind::NotLinearizable)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// The configurations' verdict at every prefix is the checker's on that prefix:
        /// so two prefixes with equal configurations have equal verdicts under every
        /// continuation, which is what merging them needs.
        #[test]
        fn its_verdict_is_the_checkers_on_every_prefix(
            steps in proptest::collection::vec((0usize..3, any::<u8>(), any::<u8>(), any::<u8>()), 0..16)
        ) {
            let ops = history(&steps);
            let mut linear = Linear::default();
            for (i, o) in ops.iter().enumerate() {
                linear.take(o);
                prop_assert_eq!(
                    linear.linearizable(),
                    checker_says_linearizable(&ops[..=i]),
                    "after {} of {:?}", i, ops
                );
            }
        }
    }

    #[test]
    fn a_stale_read_after_a_completed_write_is_not_linearizable_and_a_concurrent_one_is() {
        let w = |t| op(0, t, OpFn::Write, "x", Some("a"));
        let r = |t, v| op(1, t, OpFn::Read, "x", v);
        // write a completes, then a read returns nothing: no linearization.
        let after = linear(&[
            w(OpType::Invoke),
            w(OpType::Ok),
            r(OpType::Invoke, None),
            r(OpType::Ok, None),
        ]);
        assert!(!after.linearizable());
        // The read overlaps the write: it may come first.
        let overlapping = linear(&[
            w(OpType::Invoke),
            r(OpType::Invoke, None),
            w(OpType::Ok),
            r(OpType::Ok, None),
        ]);
        assert!(overlapping.linearizable());
    }

    #[test]
    fn interleavings_that_linearize_alike_are_one_state() {
        // Two clients' completed writes of one value, in either order of invoke and
        // completion, leave one configuration: the value written.
        let a = |t| op(0, t, OpFn::Write, "x", Some("a"));
        let b = |t| op(1, t, OpFn::Write, "x", Some("a"));
        let one = linear(&[
            a(OpType::Invoke),
            a(OpType::Ok),
            b(OpType::Invoke),
            b(OpType::Ok),
        ]);
        let two = linear(&[
            a(OpType::Invoke),
            b(OpType::Invoke),
            b(OpType::Ok),
            a(OpType::Ok),
        ]);
        assert_eq!(one, two);
    }
}
