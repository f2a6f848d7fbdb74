//! Measuring fencesim itself: wall-clock time, only ever outside a simulation.
// Real time is forbidden inside simulations (clippy.toml); this module is the one place that
// measures the tool from outside them.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::time::Instant;

/// Elapsed real time, for seeds/s figures in `explore` and `bench`.
pub struct Stopwatch {
    started: Instant,
}

impl Stopwatch {
    /// Start now.
    pub fn start() -> Self {
        Stopwatch {
            started: Instant::now(),
        }
    }

    /// Seconds since [`Stopwatch::start`].
    pub fn seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

/// This process's peak resident memory so far, KiB (Linux's `VmHWM`; `None` elsewhere).
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Where one batch of seeds spends its time, microseconds per simulated message.
#[derive(Clone, Copy, Debug, Default)]
pub struct Phases {
    /// Simulating, history recording included ([`crate::Engine::simulate`]).
    pub simulate_us: f64,
    /// Writing the history as JSON Lines.
    pub serialize_us: f64,
    /// The SHA-256 of those bytes (the report's history hash).
    pub hash_us: f64,
    /// Every check of [`fencesim_checker::check`].
    pub check_us: f64,
}

/// Run `seeds` of `scenario` phase by phase, as [`crate::run::evaluate`] does, timing each.
/// Errors: serializing a history failed.
pub fn phases(
    engine: &crate::Engine,
    scenario: &fencesim_scenario::Scenario,
    seeds: std::ops::Range<u64>,
) -> std::io::Result<Phases> {
    let mut total = Phases::default();
    let mut messages = 0;
    for seed in seeds {
        let clock = Stopwatch::start();
        let outcome = engine.simulate(scenario, seed);
        total.simulate_us += clock.seconds();
        messages += outcome.net_stats.sent;
        let clock = Stopwatch::start();
        let mut bytes = Vec::new();
        fencesim_history::write_jsonl(&outcome.history, &mut bytes)?;
        total.serialize_us += clock.seconds();
        let clock = Stopwatch::start();
        std::hint::black_box(crate::report::sha256_hex(&bytes));
        total.hash_us += clock.seconds();
        let clock = Stopwatch::start();
        std::hint::black_box(fencesim_checker::check(&outcome.history));
        total.check_us += clock.seconds();
    }
    let per_message = |seconds: f64| seconds * 1e6 / messages.max(1) as f64;
    Ok(Phases {
        simulate_us: per_message(total.simulate_us),
        serialize_us: per_message(total.serialize_us),
        hash_us: per_message(total.hash_us),
        check_us: per_message(total.check_us),
    })
}

/// One folder of a peer checker's test histories, judged by fencesim and timed.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerFolder {
    /// The folder, relative to the peers' directory (`cas-register/good`).
    pub folder: String,
    /// The verdict the peer asserts for every file in it; `None` where it asserts none.
    pub expected: Option<crate::Verdict>,
    /// `.edn` files in it.
    pub files: usize,
    /// Files whose verdict equals `expected`.
    pub agreed: usize,
    /// Files fencesim could not read (each with the reader's error in `notes`).
    pub refused: usize,
    /// Reading and judging every file, seconds.
    pub seconds: f64,
    /// The file that took longest, and its seconds.
    pub slowest: Option<(String, f64)>,
    /// One line per file that did not agree (or, without an expected verdict, per file):
    /// its name and what fencesim said.
    pub notes: Vec<String>,
}

/// Knossos's test folders (its `data/` directory), each with the verdict Knossos's tests
/// assert of its files and the options that give Knossos's model: the compare-and-set register
/// starting at 0 with failed operations left out, and `model/mutex` for the lock history.
fn knossos_folders() -> Vec<(
    &'static str,
    Option<crate::Verdict>,
    fencesim_checker::CheckOptions,
)> {
    use fencesim_checker::{CheckOptions, LockModel};
    let register = CheckOptions {
        initial_value: Some("0".into()),
        ..CheckOptions::default()
    };
    let mutex = CheckOptions {
        lock_model: Some(LockModel::Mutex),
        ..CheckOptions::default()
    };
    vec![
        (
            "cas-register/good",
            Some(crate::Verdict::Valid),
            register.clone(),
        ),
        (
            "cas-register/bad",
            Some(crate::Verdict::Invalid),
            register.clone(),
        ),
        ("multi-register/good", Some(crate::Verdict::Valid), register),
        ("mutex/bad", None, mutex),
    ]
}

/// Judge every `.edn` file of Knossos's test folders under `dir` (files in name order), timing
/// each from reading to verdict. `None` if `dir` has no `cas-register` folder (it is not
/// Knossos's `data/`); another folder missing from it counts no files.
pub fn knossos_peers(dir: &std::path::Path) -> Option<Vec<PeerFolder>> {
    // A folder without Knossos's layout (one level too high, say) is not Knossos's data:
    // skipped and said so, rather than judged as empty.
    if !dir.join("cas-register").is_dir() {
        return None;
    }
    let judged = knossos_folders()
        .into_iter()
        .map(|(folder, expected, options)| {
            let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir.join(folder))
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "edn"))
                .collect();
            files.sort();
            let mut judged = PeerFolder {
                folder: folder.to_owned(),
                expected,
                files: files.len(),
                agreed: 0,
                refused: 0,
                seconds: 0.0,
                slowest: None,
                notes: Vec::new(),
            };
            for path in &files {
                judge_peer_file(path, &options, &mut judged);
            }
            judged
        })
        .collect();
    Some(judged)
}

/// Read and judge one peer file, adding its figures to `folder`.
fn judge_peer_file(
    path: &std::path::Path,
    options: &fencesim_checker::CheckOptions,
    folder: &mut PeerFolder,
) {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let clock = Stopwatch::start();
    let read = std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|text| {
            fencesim_history::read_jepsen_edn(&text, &name).map_err(|e| e.to_string())
        });
    let result = read.map(|history| fencesim_checker::check_with(&history, options));
    let seconds = clock.seconds();
    folder.seconds += seconds;
    if folder.slowest.as_ref().is_none_or(|(_, s)| seconds > *s) {
        folder.slowest = Some((name.clone(), seconds));
    }
    match result {
        Err(e) => {
            folder.refused += 1;
            folder.notes.push(format!("{name}: refused: {e}"));
        }
        Ok(result) if Some(result.verdict) == folder.expected => folder.agreed += 1,
        Ok(result) => {
            let why = result
                .unknown
                .first()
                .map_or_else(String::new, |u| format!(" ({u})"));
            folder.notes.push(format!(
                "{name}: {}{why}",
                format!("{:?}", result.verdict).to_lowercase()
            ));
        }
    }
}

/// Synthetic histories for measuring the checker: shaped like the simulator's, generated
/// without simulating, so their size is whatever the benchmark asks for.
pub mod synthetic {
    use fencesim_history::{
        Entry, Event, EventKind, Header, History, Op, OpFn, OpType, Phase, Stamp,
    };

    /// SplitMix64's output function: a deterministic stream of choices from a counter.
    fn mix(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    struct Builder {
        entries: Vec<Entry>,
    }

    impl Builder {
        fn stamp(&self) -> Stamp {
            let index = self.entries.len() as u64;
            Stamp {
                index,
                time_ns: index * 1_000_000,
                mono_ms: index as i64,
                wall_ms: index as i64,
            }
        }

        fn event(&mut self, kind: EventKind, fill: impl FnOnce(&mut Event)) -> u64 {
            let mut e = Event {
                at: self.stamp(),
                node: "lease-service".into(),
                ..Event::new(kind)
            };
            fill(&mut e);
            self.entries.push(Entry::from(e));
            self.entries.len() as u64 - 1
        }

        fn op(
            &mut self,
            process: u64,
            op_type: OpType,
            f: OpFn,
            token: Option<u64>,
            value: Option<String>,
        ) -> u64 {
            let (lock, key) = match f {
                OpFn::Read | OpFn::Write => (None, Some("k".to_owned())),
                _ => (Some("l".to_owned()), None),
            };
            let op = Op {
                at: self.stamp(),
                process,
                node: format!("client-{process}").into(),
                op_type,
                f,
                lock: lock.map(Into::into),
                key: key.map(Into::into),
                token,
                value,
                expected: None,
                value_unknown: false,
                ttl_ms: None,
                error: None,
            };
            self.entries.push(Entry::from(op));
            self.entries.len() as u64 - 1
        }

        fn finish(self, scenario: &str) -> History {
            History {
                header: Header {
                    format_version: fencesim_history::FORMAT_VERSION,
                    scenario: scenario.into(),
                    seed: 0,
                    tool_version: env!("CARGO_PKG_VERSION").into(),
                    token_order: Default::default(),
                    untimed: false,
                },
                entries: self.entries,
            }
        }
    }

    /// A correct history of `cycles` lock cycles by three clients in turn, 12 records each:
    /// acquire (invoke, grant, ok, belief), write (invoke, accept, ok), read (invoke, ok),
    /// release (invoke, release, belief end). Every check has work to do and finds nothing.
    pub fn sequential_history(cycles: u64) -> History {
        let mut b = Builder {
            entries: Vec::with_capacity(cycles as usize * 12),
        };
        for token in 1..=cycles {
            let p = token % 3;
            let holder = format!("client-{p}");
            let lease = |e: &mut Event| {
                e.lock = Some("l".into());
                e.holder = Some(holder.as_str().into());
                e.token = Some(token);
            };
            let invoke = b.op(p, OpType::Invoke, OpFn::Acquire, None, None);
            b.event(EventKind::Grant, |e| {
                lease(e);
                e.op = Some(invoke);
            });
            b.op(p, OpType::Ok, OpFn::Acquire, Some(token), None);
            b.event(EventKind::Belief, |e| {
                lease(e);
                e.node = holder.as_str().into();
                e.phase = Some(Phase::Start);
            });
            let value = format!("{holder}/{token}");
            let w = b.op(
                p,
                OpType::Invoke,
                OpFn::Write,
                Some(token),
                Some(value.clone()),
            );
            b.event(EventKind::Accept, |e| {
                e.node = "resource".into();
                e.key = Some("k".into());
                e.holder = Some(holder.as_str().into());
                e.token = Some(token);
                e.highest = Some(token);
                e.op = Some(w);
            });
            b.op(p, OpType::Ok, OpFn::Write, Some(token), Some(value.clone()));
            b.op(p, OpType::Invoke, OpFn::Read, None, None);
            b.op(p, OpType::Ok, OpFn::Read, Some(token), Some(value));
            let r = b.op(p, OpType::Invoke, OpFn::Release, Some(token), None);
            b.event(EventKind::Release, |e| {
                lease(e);
                e.op = Some(r);
            });
            b.event(EventKind::Belief, |e| {
                lease(e);
                e.node = holder.as_str().into();
                e.phase = Some(Phase::End);
            });
        }
        b.finish("synthetic-sequential")
    }

    /// A linearizable history of `ops` reads and writes on one key by `processes` concurrent
    /// processes: at each step a random process invokes (if idle) or completes (if busy), and
    /// its operation takes effect at its completion. `info_per_mille` of the writes end `info`
    /// instead (half of them having taken effect). `seed` picks the interleaving.
    pub fn concurrent_register_history(
        ops: u64,
        processes: u64,
        info_per_mille: u64,
        seed: u64,
    ) -> History {
        let mut b = Builder {
            entries: Vec::with_capacity(ops as usize * 2),
        };
        let mut busy: Vec<Option<(OpFn, Option<String>)>> = vec![None; processes as usize];
        let mut current: Option<String> = None;
        let (mut invoked, mut n) = (0u64, seed.wrapping_mul(0x2545_F491_4F6C_DD1D));
        while invoked < ops || busy.iter().any(Option::is_some) {
            n = mix(n);
            let p = (n % processes) as usize;
            match busy[p].take() {
                None if invoked < ops => {
                    invoked += 1;
                    let (f, value) = if mix(n).is_multiple_of(2) {
                        (OpFn::Write, Some(format!("v{invoked}")))
                    } else {
                        (OpFn::Read, None)
                    };
                    b.op(p as u64, OpType::Invoke, f, None, value.clone());
                    busy[p] = Some((f, value));
                }
                None => {}
                Some((OpFn::Write, value)) => {
                    let roll = mix(n ^ 0xA5A5) % 1000;
                    if roll < info_per_mille {
                        if roll.is_multiple_of(2) {
                            current.clone_from(&value);
                        }
                        b.op(p as u64, OpType::Info, OpFn::Write, None, value);
                    } else {
                        current.clone_from(&value);
                        b.op(p as u64, OpType::Ok, OpFn::Write, None, value);
                    }
                }
                Some((f, _)) => {
                    b.op(p as u64, OpType::Ok, f, None, current.clone());
                }
            }
        }
        b.finish("synthetic-register")
    }
}

/// For each start in `0..starts`, how many simulations `explore` from that seed runs up to and
/// including its first counterexample (`None`: none within `cap`).
///
/// Errors: none in practice (nothing is written); the sweep's error type.
pub fn explore_counts(
    engine: &crate::Engine,
    scenario: &fencesim_scenario::Scenario,
    starts: u64,
    cap: u64,
    jobs: usize,
) -> std::io::Result<Vec<Option<u64>>> {
    let seeds: Vec<u64> = (0..starts + cap).collect();
    let last_start = starts.saturating_sub(1);
    let opts = crate::run::RunOptions::in_memory();
    // Every seed up to the first counterexample at or after the last start: each start's
    // first counterexample is among them.
    let outcomes = crate::run::sweep_until(
        engine,
        scenario,
        &seeds,
        jobs,
        &opts,
        |done| Ok((done.report.seed, !done.report.expectation.met)),
        |(seed, missed)| *missed && *seed >= last_start,
    )?;
    let misses: Vec<u64> = outcomes.iter().filter(|o| o.1).map(|o| o.0).collect();
    Ok((0..starts)
        .map(|s| {
            misses
                .iter()
                .find(|&&m| m >= s && m < s + cap)
                .map(|m| m - s + 1)
        })
        .collect())
}

/// For each root seed in `0..starts`, how many simulations guided exploration runs up to and
/// including its first counterexample (`None`: none within `cap`).
///
/// Errors: the sweep's error type (nothing is written).
pub fn guided_counts(
    engine: &crate::Engine,
    scenario: &fencesim_scenario::Scenario,
    starts: u64,
    cap: u64,
    jobs: usize,
) -> std::io::Result<Vec<Option<u64>>> {
    let opts = crate::run::RunOptions::in_memory();
    (0..starts)
        .map(|root| {
            let outcome = crate::guided::search(engine, scenario, root, cap, jobs, &opts)?;
            Ok(outcome.found.map(|_| outcome.simulations))
        })
        .collect()
}

/// The median of counts where `None` (not found) ranks above every number, as
/// `">cap"` when the median is not found.
pub fn median_count(counts: &[Option<u64>], cap: u64) -> String {
    let mut sorted: Vec<u64> = counts.iter().map(|c| c.unwrap_or(u64::MAX)).collect();
    sorted.sort_unstable();
    let Some(&middle) = sorted.get(sorted.len().saturating_sub(1) / 2) else {
        return "-".to_owned();
    };
    // The lower median of an even count: a "found within" figure that half the starts meet.
    if middle == u64::MAX {
        format!(">{cap}")
    } else {
        middle.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::synthetic::{concurrent_register_history, sequential_history};
    use fencesim_history::{Entry, OpFn, OpType, ViolationKind};

    #[test]
    fn the_synthetic_histories_are_correct_by_construction() {
        assert_eq!(sequential_history(500).entries.len(), 6_000);
        assert_eq!(
            fencesim_checker::check(&sequential_history(500)).kinds(),
            []
        );
        for seed in 0..5 {
            let h = concurrent_register_history(2_000, 10, 10, seed);
            let result = fencesim_checker::check(&h);
            assert_eq!(
                result.verdict,
                fencesim_checker::Verdict::Valid,
                "seed {seed}: {:?}",
                result.violations
            );
        }
    }

    #[test]
    fn a_read_of_an_overwritten_value_in_a_concurrent_history_is_caught() {
        let mut h = concurrent_register_history(2_000, 10, 0, 7);
        // The last read returns the value of the very first write instead.
        let first = h
            .ops()
            .find(|o| o.f == OpFn::Write)
            .and_then(|o| o.value.clone());
        let last_read = h.entries.iter_mut().rev().find_map(|e| match e {
            Entry::Op(o) if o.f == OpFn::Read && o.op_type == OpType::Ok => Some(o),
            _ => None,
        });
        last_read.expect("a completed read").value = first;
        let result = fencesim_checker::check(&h);
        assert_eq!(result.kinds(), [ViolationKind::NotLinearizable]);
    }
}
