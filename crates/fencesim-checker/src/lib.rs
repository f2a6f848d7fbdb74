//! Pure safety checks over a history: a verdict, each violation with its witnesses (record
//! indexes) and a causal explanation, and the unsafe-exposure metric.
//!
//! The checker sees nothing but a [`History`]: it works the same on a history recorded by the
//! simulator and on one converted from a real system. It judges by the services' own events
//! (grants, expiries, the resource's accepts and rejects) in history order, never by what
//! clients believed, following Jepsen's practice of checking what the system actually did.
#![deny(missing_docs)]

mod exclusion;
mod exclusion_ops;
mod explain;
mod exposure;
pub mod latency;
mod leases;
mod linearizable;
mod mutation;
mod order;
mod presented;
mod progress;
mod quorum;
mod release;
mod service_expiry;
mod stale_write;
mod stale_write_ops;
mod tokens;

use std::collections::BTreeMap;

use fencesim_history::{Entry, Event, History, Op, OpType, ViolationKind};
use serde::{Deserialize, Serialize};

pub use exposure::UnsafeExposure;
pub use linearizable::{FailedCas, LockModel};
pub use presented::{is_grant, presented};

/// The overall outcome of checking one history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// No check found a violation.
    Valid,
    /// At least one violation.
    Invalid,
    /// No violation, but a check gave up within its budget (see [`CheckResult::unknown`]).
    Unknown,
}

/// One broken property.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// Which property.
    pub kind: ViolationKind,
    /// Indexes of the records that prove it, most telling first.
    pub witnesses: Vec<u64>,
    /// How the witnesses connect, in words.
    pub explanation: String,
    /// The causal chain behind it, one short phrase per step in history order (faults,
    /// grants, expiries, writes), from a graph of the history's events. Left out when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chain: Vec<String>,
}

/// Everything the checker concluded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    /// Valid unless a violation was found.
    pub verdict: Verdict,
    /// Every violation, grouped by check, each group in history order.
    pub violations: Vec<Violation>,
    /// Writes that reached the resource after their lease had ended.
    pub unsafe_exposure: UnsafeExposure,
    /// Why the verdict is unknown: each check that gave up within its budget, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<String>,
    /// Checks the history gave nothing to judge, each with what it lacked (a history of client
    /// operations only, converted from a real system, has no service events). Left out when
    /// empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_checked: Vec<String>,
}

/// The checks that would find nothing to look at in `history`, each as `KIND: WHAT WAS
/// LACKING` (as [`CheckResult::not_checked`] lists them), without running any check: cheap
/// enough to tell, before or after a conversion, which checks a history can support.
pub fn not_checked(history: &History) -> Vec<String> {
    not_run(&Records::new(history), &CheckOptions::default())
}

/// How many checks [`not_run`] can find lacking: when all of them are, the history gives the
/// checker nothing to judge, and the verdict is unknown rather than valid.
const NEEDS: usize = 9;

/// The checks that found nothing to look at in `history`, and what they needed (and, where
/// the history's lock operations were not judged as a mutex, why).
fn not_run(history: &Records, options: &CheckOptions) -> Vec<String> {
    use fencesim_history::{EventKind as K, OpFn};
    // The kinds present, a flag each, indexed by discriminant: this runs on every seed, and a
    // set insert per record cost as much as some checks. A fieldless enum of one byte has
    // fewer than 256 variants, so every discriminant has its flag.
    const _: () = assert!(std::mem::size_of::<K>() == 1 && std::mem::size_of::<OpFn>() == 1);
    let (mut events, mut fns) = ([false; 256], [false; 256]);
    // An event counts only with what the checks read of its kind: a bare `accept` (no key) or
    // `grant` (no lock or token), which a reader refuses but a history built in code may hold,
    // gives no check anything to judge, and must not make a history valid by its presence.
    history
        .events()
        .filter(|e| judgeable(e))
        .for_each(|e| events[e.event as usize] = true);
    // Writes and acquires count for the token checks only when they carry tokens: a Jepsen
    // register's writes and a mutex's acquires have none, and prove nothing about fencing.
    // Acquires that carry their TTL are judged as leases from the operations alone
    // (`exclusion_ops`): looked for in the same pass.
    let (mut tokened_writes, mut tokened_acquires, mut ttl_acquires) = (false, false, false);
    // An operation counts only on the key or lock it names, as the checks take it, and only
    // once it completed `ok`: one that failed never happened, and one pending or unknown
    // constrains nothing by itself (a history of invocations alone, a file cut short, has
    // nothing to judge).
    let placed = |o: &Op| match o.f {
        OpFn::Acquire | OpFn::Renew | OpFn::Release => o.lock.is_some(),
        OpFn::Read | OpFn::Write | OpFn::Cas | OpFn::Delete => o.key.is_some(),
    };
    let completed = |o: &Op| o.op_type == fencesim_history::OpType::Ok;
    history
        .ops()
        .filter(|o| placed(o) && completed(o))
        .for_each(|o| {
            fns[o.f as usize] = true;
            tokened_writes |= matches!(o.f, OpFn::Write | OpFn::Delete) && o.token.is_some();
            tokened_acquires |= o.f == OpFn::Acquire && o.token.is_some();
            ttl_acquires |= o.f == OpFn::Acquire && o.ttl_ms.is_some();
        });
    let has = |kinds: &[K]| kinds.iter().any(|k| events[*k as usize]);
    let has_op = |fs: &[OpFn]| fs.iter().any(|f| fns[*f as usize]);
    let needs: [(ViolationKind, bool, &str); NEEDS] = [
        (
            ViolationKind::StaleWriteAccepted,
            // Without the resource's own events, ok writes with fencing tokens still prove a
            // stale one accepted (`stale_write_ops`).
            has(&[K::Accept])
                || (history.header.token_order == fencesim_history::TokenOrder::Value
                    && tokened_writes),
            "no accept events from a resource, and no writes with fencing tokens",
        ),
        (
            ViolationKind::TokenReused,
            has(&[K::Grant]) || tokened_acquires,
            "no grants and no acquire operations with tokens",
        ),
        (
            ViolationKind::TokenNotGranted,
            has(&[K::Grant]) && tokened_writes,
            "no grant events from a lock service to judge presented tokens by, or no writes \
             with fencing tokens",
        ),
        (
            ViolationKind::MutualExclusionService,
            has(&[K::Grant, K::KeySet]),
            "no grant events from a lock service, and no key events from a quorum lock's nodes",
        ),
        (
            ViolationKind::MutualExclusionClient,
            has(&[K::Belief]) || ttl_acquires,
            "no belief events from clients",
        ),
        (
            ViolationKind::ReleaseByNonHolder,
            has(&[K::Release]),
            "no release events from a lock service",
        ),
        (
            ViolationKind::UnfencedMutation,
            has(&[K::Accept]),
            "no accept events from a resource",
        ),
        (
            ViolationKind::DuplicateExecution,
            has(&[K::Accept]),
            "no accept events from a resource",
        ),
        (
            ViolationKind::NotLinearizable,
            has_op(&[OpFn::Read, OpFn::Write, OpFn::Cas, OpFn::Delete])
                || (options.lock_model.is_some() && has_op(&[OpFn::Acquire, OpFn::Release])),
            "no read, write, cas or delete operation completed ok",
        ),
    ];
    let mut lacking: Vec<String> = needs
        .into_iter()
        .filter(|(_, present, _)| !present)
        .map(|(kind, _, lacked)| format!("{kind}: {lacked}"))
        .collect();
    // Without a lock service's grants, the operations are all there is to judge mutual
    // exclusion by, and they prove nothing of a lease: one whose TTL ran out is taken again
    // without a release. Say so, rather than let a valid verdict suggest it was judged.
    if options.lock_model.is_none()
        && has_op(&[OpFn::Acquire])
        && !has(&[K::Grant])
        && !ttl_acquires
    {
        lacking.push(format!("{MUTEX_FROM_OPS}: {MUTEX_NOT_JUDGED}"));
    }
    lacking
}

/// Whether an event carries what the checks that read its kind need: a lease event its lock
/// and token, a resource event its key, a belief its lock (and, to start, its token).
fn judgeable(e: &Event) -> bool {
    use fencesim_history::{EventKind as K, Phase};
    match e.event {
        K::Grant | K::Renew | K::Release | K::Expire | K::Revoke => {
            e.lock.is_some() && e.token.is_some()
        }
        K::Accept | K::Reject => e.key.is_some(),
        K::KeySet => e.lock.is_some() && e.token.is_some() && e.ttl_ms.is_some(),
        K::Belief => match e.phase {
            Some(Phase::Start) => e.lock.is_some() && e.token.is_some(),
            Some(Phase::End) => e.lock.is_some(),
            None => false,
        },
        _ => true,
    }
}

/// The properties that compare times, left out for an untimed history
/// ([`fencesim_history::Header::untimed`]).
const UNTIMED: [ViolationKind; 4] = [
    ViolationKind::MutualExclusionService,
    ViolationKind::MutualExclusionClient,
    ViolationKind::LeaseEndedEarly,
    ViolationKind::NoProgressAfterHeal,
];

/// Why [`UNTIMED`]'s properties were not judged.
const UNTIMED_WHY: &str = "the history is untimed (its header says so: a schedule without true \
     time, such as one `fencesim verify` found), and this property compares times";

/// What [`CheckResult::not_checked`] calls the judgement of acquire and release operations
/// as a mutex.
const MUTEX_FROM_OPS: &str = "mutual exclusion from operations";

/// Why acquire and release operations were not judged as a mutex.
const MUTEX_NOT_JUDGED: &str = "the history does not say its locks have no expiry (a lease \
     that expires is acquired again without a release) nor what TTL its acquires asked for; \
     give the lock model (fencesim check --model mutex or fenced-mutex) to judge them as a \
     mutex, or record each acquire's and renewal's TTL (`ttl_ms`; EDN `:ttl-ms`) to judge them \
     as leases";

impl CheckResult {
    /// The distinct violation kinds found, sorted.
    pub fn kinds(&self) -> Vec<ViolationKind> {
        let mut kinds: Vec<_> = self.violations.iter().map(|v| v.kind).collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }
}

/// The violation kinds this version checks: all of them.
pub const CHECKED_KINDS: &[ViolationKind] = &ViolationKind::ALL;

/// Limits on the checks that search, and the models the linearizability check judges by.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckOptions {
    /// Search steps the linearizability check may take per key before it gives up (the
    /// verdict is then unknown).
    pub linearizability_steps: u64,
    /// Search steps the linearizability check may take over all keys together; keys whose
    /// turn comes after it is spent are reported unknown, unsearched.
    pub linearizability_total_steps: u64,
    /// The value every key's register holds before any operation (Knossos's initial value,
    /// 0 in its test suite); `None`: the register starts never written. Compared with the
    /// history's values as text: for a history read from Jepsen EDN, a value's canonical text
    /// (`fencesim_history::edn::Edn::canonical`: `0` the integer, `"a"` with its quotes the
    /// string).
    #[serde(default)]
    pub initial_value: Option<String>,
    /// How the linearizability check reads a compare-and-set that completed `fail`.
    #[serde(default)]
    pub failed_cas: FailedCas,
    /// The model acquire and release operations are judged against, per lock, by the
    /// linearizability check. Only for a lock without expiry: a lease whose TTL runs out is
    /// taken again without a release. `None` (the default): lock operations are not judged
    /// as a mutex.
    #[serde(default)]
    pub lock_model: Option<LockModel>,
}

impl CheckOptions {
    /// The defaults: the search budgets of [`linearizable`], registers that start never
    /// written, Knossos's reading of a failed cas, no lock model. A `const`, so that a
    /// constant of options can spell out the budgets and take the rest from here.
    pub const DEFAULT: CheckOptions = CheckOptions {
        linearizability_steps: linearizable::DEFAULT_STEP_BUDGET,
        linearizability_total_steps: linearizable::DEFAULT_TOTAL_STEP_BUDGET,
        initial_value: None,
        failed_cas: FailedCas::Knossos,
        lock_model: None,
    };
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions::DEFAULT
    }
}

/// Run every check on `history` with the default budgets.
pub fn check(history: &History) -> CheckResult {
    check_with(history, &CheckOptions::default())
}

/// The history's events and operations, each in history order, gathered once: most checks
/// need only one kind, and walking every entry of a history (thousands of entries of a few
/// hundred bytes each) once per check cost more than the checks' own work. Reads as the
/// [`History`] it was made from.
pub(crate) struct Records<'h> {
    history: &'h History,
    events: Vec<&'h Event>,
    ops: Vec<&'h Op>,
}

impl<'h> Records<'h> {
    fn new(history: &'h History) -> Self {
        let (mut events, mut ops) = (Vec::new(), Vec::new());
        for entry in &history.entries {
            match entry {
                Entry::Event(e) => events.push(e),
                Entry::Op(o) => ops.push(o),
            }
        }
        Records {
            history,
            events,
            ops,
        }
    }

    /// The events, in history order.
    pub fn events(&self) -> impl Iterator<Item = &'h Event> + '_ {
        self.events.iter().copied()
    }

    /// The client operations, in history order.
    pub fn ops(&self) -> impl Iterator<Item = &'h Op> + '_ {
        self.ops.iter().copied()
    }

    /// The `relevant` operations, each invoke paired with its completion (`None`: never
    /// completed), in the order they completed, those never completed last. A process runs one
    /// operation at a time (Jepsen's rule), so a completion answers its process's last invoke;
    /// an invoke its process follows with another invoke was never completed.
    pub fn paired(&self, relevant: impl Fn(&Op) -> bool) -> Vec<(&'h Op, Option<&'h Op>)> {
        let mut pending: BTreeMap<u64, &'h Op> = BTreeMap::new();
        let mut pairs = Vec::new();
        for op in self.ops().filter(|o| relevant(o)) {
            if op.op_type == OpType::Invoke {
                if let Some(orphan) = pending.insert(op.process, op) {
                    pairs.push((orphan, None));
                }
            } else if let Some(invoke) = pending.remove(&op.process) {
                pairs.push((invoke, Some(op)));
            }
        }
        pairs.extend(pending.into_values().map(|invoke| (invoke, None)));
        pairs
    }
}

impl std::ops::Deref for Records<'_> {
    type Target = History;

    fn deref(&self) -> &History {
        self.history
    }
}

/// Escape the control characters in every text the checks wrote. The texts quote names and
/// values from the history (a holder, a key, a value read), and fencesim's own words hold no
/// control character: whatever one is there came from the input, and must not reach a
/// terminal as an escape sequence or add a line to a report (issue 38).
fn terminal_safe(violations: &mut [Violation], unknown: &mut [String]) {
    let escape = |text: &mut String| {
        if let std::borrow::Cow::Owned(safe) = fencesim_history::escape_controls(text) {
            *text = safe;
        }
    };
    for v in violations {
        escape(&mut v.explanation);
        v.chain.iter_mut().for_each(escape);
    }
    unknown.iter_mut().for_each(escape);
}

/// The violations of the properties a prefix of a run can show, whatever comes after it and
/// whatever the times: `stale-write-accepted`, `token-not-monotonic`, `token-reused`,
/// `token-not-granted`, `release-by-non-holder`, `unfenced-mutation` and
/// `duplicate-execution`, each with its chain, in [`check_with`]'s order. No verdict, no
/// linearizability (a history cut short has calls still pending, and its search is the
/// costly part), no timing property: what `fencesim verify` asks at each step of a schedule,
/// leaving the whole check to the schedule's end.
pub fn check_path(history: &History) -> Vec<Violation> {
    let records = Records::new(history);
    let history = &records;
    let leases = leases::lease_intervals(history);
    let mut violations = tokens_and_writes(history, &leases);
    violations.extend(releases_and_mutations(history));
    explain_all(history, &mut violations);
    terminal_safe(&mut violations, &mut []);
    violations
}

/// The path properties [`check_with`] runs before the timing ones: stale writes and tokens.
fn tokens_and_writes(history: &Records, leases: &leases::Leases) -> Vec<Violation> {
    let mut violations = stale_write::check(history, leases);
    violations.extend(stale_write_ops::check(history));
    violations.extend(tokens::check(history));
    violations.extend(presented::check(history));
    violations
}

/// The path properties [`check_with`] runs after the timing ones: releases and mutations.
fn releases_and_mutations(history: &Records) -> Vec<Violation> {
    let mut violations = release::check(history);
    violations.extend(mutation::check_unfenced(history));
    violations.extend(mutation::check_duplicates(history));
    violations
}

/// Each violation's causal chain. The graph costs as much as a check: built only when there
/// is something to explain.
fn explain_all(history: &Records, violations: &mut [Violation]) {
    if violations.is_empty() {
        return;
    }
    let graph = explain::CausalGraph::build(history);
    for v in violations {
        v.chain = graph.chain(&v.witnesses);
    }
}

/// Run every check on `history`.
pub fn check_with(history: &History, options: &CheckOptions) -> CheckResult {
    let records = Records::new(history);
    let history = &records;
    let leases = leases::lease_intervals(history);
    let mut violations = tokens_and_writes(history, &leases);
    // An untimed history (a `fencesim verify` schedule) orders its records but has no times,
    // so the checks that compare times have nothing to judge.
    let timed = !history.header.untimed;
    if timed {
        violations.extend(exclusion::check_service(&leases));
        violations.extend(exclusion::check_client(history));
        violations.extend(service_expiry::check(history));
        violations.extend(quorum::check(history));
        if exclusion_ops::applies(history) {
            violations.extend(exclusion_ops::check(history));
        }
    }
    violations.extend(releases_and_mutations(history));
    let (not_linearizable, mut unknown) = linearizable::check(history, options);
    violations.extend(not_linearizable);
    if timed {
        violations.extend(progress::check(history));
    }
    explain_all(history, &mut violations);
    let mut not_checked = not_run(history, options);
    let lacking = not_checked
        .iter()
        .filter(|l| !l.starts_with(MUTEX_FROM_OPS))
        .count();
    if !timed {
        // Not counted as lacking: the history has what they read, but no times.
        not_checked.extend(UNTIMED.iter().map(|kind| format!("{kind}: {UNTIMED_WHY}")));
    }
    // A model named by the user (an initial value, a lock model) is a claim to check the
    // history against that model, and an empty history satisfies any model: Knossos calls it
    // linearizable, and so does this.
    let model_named = options.initial_value.is_some() || options.lock_model.is_some();
    // A final heal with its window gives the progress check something to judge: whether the
    // demand after it was met.
    let progress_judged = history
        .events()
        .any(|e| e.event == fencesim_history::EventKind::FinalHeal && e.window_ms.is_some());
    if lacking == NEEDS && !model_named && !progress_judged {
        // A header and nothing any check can judge (no operations, no service events, or
        // only records without what their kind needs): to call that valid would pass an
        // empty or truncated file for a correct system.
        unknown.push(match history.entries.len() {
            0 => "nothing to judge: the history has no entries".to_owned(),
            1 => "nothing to judge: the history's one entry is no completed operation or event \
                  any check can judge"
                .to_owned(),
            n => format!(
                "nothing to judge: none of the history's {n} entries is a completed operation \
                 or an event any check can judge"
            ),
        });
    }
    terminal_safe(&mut violations, &mut unknown);
    let verdict = match (violations.is_empty(), unknown.is_empty()) {
        (false, _) => Verdict::Invalid,
        (true, false) => Verdict::Unknown,
        (true, true) => Verdict::Valid,
    };
    CheckResult {
        verdict,
        violations,
        unsafe_exposure: exposure::measure(history, &leases),
        unknown,
        not_checked,
    }
}
