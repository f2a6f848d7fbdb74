//! `fencesim explore`: what a sweep of seeds found, as a summary that shards of one sweep can
//! write separately and `explore --merge` joins (DESIGN.md, "CLI contract").
//!
//! A seed's *counterexample* is a seed whose run does not meet the scenario's `[expect]`: for a
//! scenario that claims a design is safe (`verdict = "valid"`), that is a seed with a
//! violation, an unknown verdict or a failed simulation.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::report::{Report, RunVerdict};

/// Bumped on incompatible changes to the summary's shape.
pub const SUMMARY_SCHEMA_VERSION: u32 = 1;

/// The most counterexample seeds a summary lists; the counts stay exact beyond it.
pub const MAX_LISTED_SEEDS: usize = 1000;

/// What one seed of a sweep came to, without its history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedOutcome {
    /// The root seed.
    pub seed: u64,
    /// The run's verdict.
    pub verdict: RunVerdict,
    /// The distinct violation kinds found, in report order.
    pub kinds: Vec<String>,
    /// Whether the scenario's expectation was met.
    pub met: bool,
}

impl SeedOutcome {
    /// The outcome a report states.
    pub fn of(report: &Report) -> Self {
        let mut kinds: Vec<String> = Vec::new();
        for v in &report.violations {
            let k = v.kind.as_str();
            if !kinds.iter().any(|seen| seen == k) {
                kinds.push(k.to_owned());
            }
        }
        SeedOutcome {
            seed: report.seed,
            verdict: report.verdict,
            kinds,
            met: report.expectation.met,
        }
    }
}

/// `explore-summary.json`: one sweep (or one shard of it), or several merged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExploreSummary {
    /// [`SUMMARY_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The scenario's name.
    pub scenario: String,
    /// SHA-256 of the resolved scenario (as report.json holds it): shards of one sweep must
    /// have run the same scenario, swarm flag included, to be merged.
    pub scenario_sha256: String,
    /// The seed range asked for, `A..B`.
    pub seeds: String,
    /// The shards this summary covers, as `I/N` (empty: the whole range).
    pub shards: Vec<String>,
    /// Seeds run. Less than the range when the sweep stopped at its first counterexample.
    pub seeds_run: u64,
    /// Whether the sweep stopped at its first counterexample (no `--keep-going`).
    pub stopped_early: bool,
    /// Whether the user interrupted the sweep (Ctrl-C): the counts are of the seeds done
    /// before it, a prefix of the range, and the summary cannot stand for the whole range or
    /// shard (`--merge` refuses it). Left out when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// Seeds judged valid.
    pub valid: u64,
    /// Seeds with at least one violation.
    pub invalid: u64,
    /// Seeds whose verdict was unknown (a check gave up within its budget).
    pub unknown: u64,
    /// Seeds whose simulation failed (panic, time limit, deadlock, nondeterminism).
    pub failed: u64,
    /// Seeds with at least one violation of each kind.
    pub invalid_by_kind: BTreeMap<String, u64>,
    /// The lowest seed that showed each violation kind: where to start reading, in a sweep
    /// split over many jobs (merged: the lowest of the shards'). Absent from summaries
    /// written before it existed.
    #[serde(default)]
    pub first_seed_by_kind: BTreeMap<String, u64>,
    /// Seeds that met the scenario's expectation.
    pub expectation_met: u64,
    /// Counterexamples: seeds that did not meet it, ascending, at most [`MAX_LISTED_SEEDS`].
    pub counterexamples: Vec<u64>,
    /// How many counterexamples there were in all.
    pub counterexample_count: u64,
    /// Real seconds the sweep took (merged: the longest shard's, as shards run side by side).
    pub seconds: f64,
    /// Seeds per real second (merged: the sum of the shards' rates).
    pub seeds_per_second: f64,
}

impl ExploreSummary {
    /// Tally `outcomes` (in seed order) of a sweep of `scenario` over `seeds`.
    pub fn tally(
        report_scenario: &fencesim_scenario::Scenario,
        seeds: &str,
        shard: Option<&str>,
        outcomes: &[SeedOutcome],
        stopped_early: bool,
        seconds: f64,
    ) -> Self {
        let mut s = Self::start(report_scenario, seeds, shard);
        for o in outcomes {
            s.add(o);
        }
        s.finish(stopped_early, seconds)
    }

    /// An empty tally of a sweep of `scenario` over `seeds`, to [`ExploreSummary::add`] each
    /// seed's outcome to as it comes (a sweep need not keep them) and then
    /// [`ExploreSummary::finish`].
    pub fn start(
        report_scenario: &fencesim_scenario::Scenario,
        seeds: &str,
        shard: Option<&str>,
    ) -> Self {
        ExploreSummary {
            schema_version: SUMMARY_SCHEMA_VERSION,
            scenario: report_scenario.name.clone(),
            scenario_sha256: scenario_digest(report_scenario),
            seeds: seeds.to_owned(),
            shards: shard
                .and_then(parse_shard)
                .map(|(i, n)| format!("{i}/{n}"))
                .into_iter()
                .collect(),
            seeds_run: 0,
            stopped_early: false,
            interrupted: false,
            valid: 0,
            invalid: 0,
            unknown: 0,
            failed: 0,
            invalid_by_kind: BTreeMap::new(),
            first_seed_by_kind: BTreeMap::new(),
            expectation_met: 0,
            counterexamples: Vec::new(),
            counterexample_count: 0,
            seconds: 0.0,
            seeds_per_second: 0.0,
        }
    }

    /// The sweep is over: whether it stopped early, and how long it took (real seconds).
    pub fn finish(mut self, stopped_early: bool, seconds: f64) -> Self {
        self.stopped_early = stopped_early;
        self.seconds = seconds;
        self.seeds_per_second = self.seeds_run as f64 / seconds.max(1e-9);
        self
    }

    /// Count one seed's outcome (in seed order).
    pub fn add(&mut self, o: &SeedOutcome) {
        self.seeds_run += 1;
        match o.verdict {
            RunVerdict::Valid => self.valid += 1,
            RunVerdict::Invalid => self.invalid += 1,
            RunVerdict::Unknown => self.unknown += 1,
            RunVerdict::SimFailed => self.failed += 1,
        }
        for k in &o.kinds {
            *self.invalid_by_kind.entry(k.clone()).or_default() += 1;
            lowest(&mut self.first_seed_by_kind, k, o.seed);
        }
        if o.met {
            self.expectation_met += 1;
        } else {
            self.counterexample_count += 1;
            if self.counterexamples.len() < MAX_LISTED_SEEDS {
                self.counterexamples.push(o.seed);
            }
        }
    }

    /// Join shards of one sweep. Errors name the summary that does not fit: another scenario,
    /// another seed range, or a shard already merged.
    pub fn merge(parts: &[(String, ExploreSummary)]) -> Result<ExploreSummary, String> {
        let Some(((first_name, first), rest)) = parts.split_first() else {
            return Err("--merge: no summaries given".into());
        };
        if let Some((name, part)) = parts.iter().find(|(_, p)| p.interrupted) {
            return Err(format!(
                "{name}: the partial summary of an interrupted sweep ({} seeds run{}) cannot \
                 stand for its shard; run it again",
                part.seeds_run,
                if part.shards.is_empty() {
                    String::new()
                } else {
                    format!(" of shard {}", part.shards.join(", "))
                }
            ));
        }
        let count = shard_count_of(first_name, first)?;
        first.check_counts(first_name)?;
        let mut merged = first.clone();
        for (name, part) in rest {
            part.check_counts(name)?;
            if part.shards.is_empty() || merged.shards.is_empty() {
                let whole = if part.shards.is_empty() {
                    name
                } else {
                    first_name
                };
                return Err(format!(
                    "{whole}: a summary of the whole range cannot be merged with another"
                ));
            }
            if shard_count_of(name, part)? != count {
                return Err(format!(
                    "{name}: shards {} split the range another way than {first_name}'s {}",
                    part.shards.join(", "),
                    first.shards.join(", ")
                ));
            }
            if part.scenario_sha256 != first.scenario_sha256 {
                return Err(format!(
                    "{name}: scenario {:?} (sha256 {}) differs from {first_name}'s {:?} (sha256 {}); only shards of one sweep merge",
                    part.scenario, part.scenario_sha256, first.scenario, first.scenario_sha256
                ));
            }
            if part.seeds != first.seeds {
                return Err(format!(
                    "{name}: seed range {} differs from {first_name}'s {}",
                    part.seeds, first.seeds
                ));
            }
            if let Some(dup) = part.shards.iter().find(|s| merged.shards.contains(s)) {
                return Err(format!("{name}: shard {dup} is already in the merge"));
            }
            merged.absorb(part);
        }
        merged.shards.sort_by_key(|s| shard_index(s));
        Ok(merged)
    }

    fn absorb(&mut self, part: &ExploreSummary) {
        self.shards.extend(part.shards.iter().cloned());
        // Each part's counts were checked against its own seeds, and the parts' seeds are
        // disjoint, so the sums fit; saturating is only a guard.
        self.seeds_run = self.seeds_run.saturating_add(part.seeds_run);
        self.stopped_early |= part.stopped_early;
        self.valid = self.valid.saturating_add(part.valid);
        self.invalid = self.invalid.saturating_add(part.invalid);
        self.unknown = self.unknown.saturating_add(part.unknown);
        self.failed = self.failed.saturating_add(part.failed);
        for (k, n) in &part.invalid_by_kind {
            let count = self.invalid_by_kind.entry(k.clone()).or_default();
            *count = count.saturating_add(*n);
        }
        for (k, seed) in &part.first_seed_by_kind {
            lowest(&mut self.first_seed_by_kind, k, *seed);
        }
        self.expectation_met = self.expectation_met.saturating_add(part.expectation_met);
        self.counterexample_count = self
            .counterexample_count
            .saturating_add(part.counterexample_count);
        self.counterexamples.extend(&part.counterexamples);
        self.counterexamples.sort_unstable();
        self.counterexamples.truncate(MAX_LISTED_SEEDS);
        self.seconds = self.seconds.max(part.seconds);
        self.seeds_per_second += part.seeds_per_second;
    }

    /// Shards missing from a merge of `I/N` shards: how many, and the first of them as `I/N`
    /// (at most [`MAX_LISTED_SHARDS`]; a sweep may have billions). `(0, [])` when complete or
    /// unsharded. The shards must be distinct, as [`ExploreSummary::merge`] makes them.
    pub fn missing_shards(&self) -> (u64, Vec<String>) {
        let Some(n) = self.shards.first().and_then(|s| shard_count(s)) else {
            return (0, Vec::new());
        };
        let present: std::collections::BTreeSet<u64> =
            self.shards.iter().map(|s| shard_index(s)).collect();
        let first = (0..n)
            .filter(|i| !present.contains(i))
            .take(MAX_LISTED_SHARDS)
            .map(|i| format!("{i}/{n}"))
            .collect();
        (n - present.len() as u64, first)
    }

    /// Refuse a summary whose counts cannot be its sweep's: verdicts or expectations that do
    /// not add up to `seeds_run`, or, unless it stopped at its first counterexample, a
    /// `seeds_run` other than the number of seeds its shards hold of its range. A merge must
    /// not pass off a shard that ran part of its seeds as the whole of it.
    fn check_counts(&self, name: &str) -> Result<(), String> {
        // Summed wide: a hand-edited count near 2^64 must be refused, not wrap into agreement.
        let sum = |counts: &[u64]| counts.iter().map(|&c| u128::from(c)).sum::<u128>();
        let run = u128::from(self.seeds_run);
        let verdicts = sum(&[self.valid, self.invalid, self.unknown, self.failed]);
        if verdicts != run {
            return Err(format!(
                "{name}: valid + invalid + unknown + failed = {verdicts}, but seeds_run = {}",
                self.seeds_run
            ));
        }
        let judged = sum(&[self.expectation_met, self.counterexample_count]);
        if judged != run {
            return Err(format!(
                "{name}: expectation_met + counterexample_count = {judged}, but seeds_run = {}",
                self.seeds_run
            ));
        }
        if let Some((kind, n)) = self
            .invalid_by_kind
            .iter()
            .find(|(_, n)| **n > self.invalid)
        {
            return Err(format!(
                "{name}: invalid_by_kind counts {n} seeds of {kind}, but invalid = {}",
                self.invalid
            ));
        }
        let (a, b) =
            parse_seed_range(&self.seeds).map_err(|e| format!("{name}: field seeds: {e}"))?;
        let split: Vec<(u64, u64)> = self.shards.iter().filter_map(|s| parse_shard(s)).collect();
        let held: u128 = if split.is_empty() {
            b - u128::from(a)
        } else {
            split.iter().map(|&(i, n)| seeds_in_shard(a, b, i, n)).sum()
        };
        let whose = || {
            if self.shards.is_empty() {
                "the whole range".to_owned()
            } else {
                format!("shard {}", self.shards.join(", "))
            }
        };
        // A sweep ends early only at a counterexample: one that stopped with none did not
        // run its seeds, whatever it says.
        let may_stop = self.stopped_early && self.counterexample_count > 0;
        if run > held || (run < held && !may_stop) {
            return Err(format!(
                "{name}: seeds_run = {}, but {} of {} {} {held} seed{}{}",
                self.seeds_run,
                whose(),
                self.seeds,
                if held == 1 { "is" } else { "are" },
                if held == 1 { "" } else { "s" },
                if run < held {
                    "; a summary of part of its seeds cannot stand for them all (it did not \
                     stop at a counterexample)"
                } else {
                    ""
                }
            ));
        }
        // The seeds it names are its own: in its range and its shards.
        let own = |seed: u64| {
            let (seed, first) = (u128::from(seed), u128::from(a));
            (first..b).contains(&seed)
                && (split.is_empty()
                    || split
                        .iter()
                        .any(|&(i, n)| (seed - first) % u128::from(n) == u128::from(i)))
        };
        let listed = self.counterexample_count.min(MAX_LISTED_SEEDS as u64);
        if self.counterexamples.len() as u64 != listed {
            return Err(format!(
                "{name}: counterexamples lists {} seeds, but counterexample_count = {} (at most \
                 {MAX_LISTED_SEEDS} are listed)",
                self.counterexamples.len(),
                self.counterexample_count
            ));
        }
        let named = self
            .counterexamples
            .iter()
            .map(|s| ("counterexamples", *s))
            .chain(
                self.first_seed_by_kind
                    .values()
                    .map(|s| ("first_seed_by_kind", *s)),
            );
        for (field, seed) in named {
            if !own(seed) {
                return Err(format!(
                    "{name}: {field} names seed {seed}, which is not one of {} of {}",
                    whose(),
                    self.seeds
                ));
            }
        }
        Ok(())
    }

    /// The summary's lines as `explore` prints them.
    pub fn lines(&self) -> Vec<String> {
        let mut kinds: Vec<String> = self
            .invalid_by_kind
            .iter()
            .map(|(k, n)| match self.first_seed_by_kind.get(k) {
                Some(seed) => format!("{k} {n} (first at seed {seed})"),
                None => format!("{k} {n}"),
            })
            .collect();
        if kinds.is_empty() {
            kinds.push("none".into());
        }
        let lines = vec![
            format!(
                "{}: {} seed{} run{} of {}{}: {} valid, {} invalid, {} unknown, {} failed",
                self.scenario,
                self.seeds_run,
                if self.seeds_run == 1 { "" } else { "s" },
                if self.interrupted {
                    " (INTERRUPTED: a partial summary)"
                } else if self.stopped_early {
                    " (stopped at the first counterexample)"
                } else {
                    ""
                },
                self.seeds,
                if self.shards.is_empty() {
                    String::new()
                } else {
                    format!(" (shards {})", self.shards.join(", "))
                },
                self.valid,
                self.invalid,
                self.unknown,
                self.failed
            ),
            format!("  seeds with each violation: {}", kinds.join(", ")),
            format!(
                "  expectation met on {}/{} seeds; counterexample seeds: {}",
                self.expectation_met,
                self.seeds_run,
                self.counterexample_list()
            ),
            format!(
                "  {:.1} s, {:.0} seeds/s",
                self.seconds, self.seeds_per_second
            ),
        ];
        lines
    }

    fn counterexample_list(&self) -> String {
        if self.counterexample_count == 0 {
            return "none".into();
        }
        const SHOWN: usize = 20;
        let mut list: Vec<String> = self
            .counterexamples
            .iter()
            .take(SHOWN)
            .map(u64::to_string)
            .collect();
        if self.counterexample_count > SHOWN as u64 {
            list.push(format!("... ({} in all)", self.counterexample_count));
        }
        list.join(" ")
    }

    /// Read a summary written by [`ExploreSummary::write`]; errors name the file.
    pub fn read(path: &Path) -> Result<ExploreSummary, String> {
        if path.is_dir() {
            return Err(format!(
                "{}: a folder; --merge takes the shards' summary files (DIR/*/explore-summary-shard-*.json)",
                fencesim_history::display_path(path)
            ));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read: {e}", fencesim_history::display_path(path)))?;
        let summary: ExploreSummary = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}: line {} column {}: not an explore summary: {e}",
                fencesim_history::display_path(path),
                e.line(),
                e.column()
            )
        })?;
        if summary.schema_version != SUMMARY_SCHEMA_VERSION {
            return Err(format!(
                "{}: schema_version {} is not the supported {SUMMARY_SCHEMA_VERSION}",
                fencesim_history::display_path(path),
                summary.schema_version
            ));
        }
        Ok(summary)
    }

    /// Write the summary as pretty JSON.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let json = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(path, json)
    }

    /// Where a sweep's summary goes: `DIR/<name>/explore-summary.json`, or
    /// `explore-summary-shard-I-of-N.json` for a shard, so shards can share a directory.
    pub fn file_name(shard: Option<&str>) -> String {
        match shard.and_then(|s| s.split_once('/')) {
            Some((i, n)) => format!("explore-summary-shard-{i}-of-{n}.json"),
            None => "explore-summary.json".into(),
        }
    }
}

/// Keep the lower of `seed` and the seed `kind` already has.
fn lowest(first: &mut BTreeMap<String, u64>, kind: &str, seed: u64) {
    first
        .entry(kind.to_owned())
        .and_modify(|s| *s = (*s).min(seed))
        .or_insert(seed);
}

/// SHA-256 of the resolved scenario's JSON.
fn scenario_digest(scenario: &fencesim_scenario::Scenario) -> String {
    let json = serde_json::to_vec(scenario).unwrap_or_default();
    crate::report::sha256_hex(&json)
}

/// The most missing shards [`ExploreSummary::missing_shards`] names.
pub const MAX_LISTED_SHARDS: usize = 20;

/// Parse `A..B` (half-open, A < B); B may be 2^64, one past the last seed, so that seed
/// 18446744073709551615 can be swept too.
///
/// # Errors
/// One line naming `--seeds` and what was expected.
pub fn parse_seed_range(range: &str) -> Result<(u64, u128), String> {
    let bad = || format!("--seeds: expected A..B with A < B, found {range:?}");
    let (a, b) = range.split_once("..").ok_or_else(bad)?;
    let (a, b): (u64, u128) = (
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    );
    if b > 1 << 64 {
        return Err(format!(
            "--seeds: {range:?} ends past the last seed: B is at most 18446744073709551616 (one past {})",
            u64::MAX
        ));
    }
    if u128::from(a) >= b {
        return Err(bad());
    }
    Ok((a, b))
}

/// How many seeds of `a..b` shard `index` of `count` holds: every `count`-th seed from
/// `a + index`.
pub fn seeds_in_shard(a: u64, b: u128, index: u64, count: u64) -> u128 {
    let first = u128::from(a) + u128::from(index);
    if first >= b {
        0
    } else {
        (b - first - 1) / u128::from(count.max(1)) + 1
    }
}

/// `I/N` with `I < N`, as `--shard` takes it.
pub fn parse_shard(s: &str) -> Option<(u64, u64)> {
    let (i, n) = s.split_once('/')?;
    let (i, n): (u64, u64) = (i.parse().ok()?, n.parse().ok()?);
    (n > 0 && i < n).then_some((i, n))
}

/// The `N` of a summary's shards, which must all be well-formed `I/N` of one `N`; `None` for a
/// summary of the whole range.
fn shard_count_of(name: &str, s: &ExploreSummary) -> Result<Option<u64>, String> {
    let mut count = None;
    for label in &s.shards {
        let Some((i, n)) = parse_shard(label) else {
            return Err(format!("{name}: shard {label:?} is not I/N with I < N"));
        };
        if label != &format!("{i}/{n}") || count.is_some_and(|c| c != n) {
            return Err(format!(
                "{name}: shard {label:?} does not fit its summary's shards"
            ));
        }
        count = Some(n);
    }
    Ok(count)
}

fn shard_index(s: &str) -> u64 {
    s.split_once('/')
        .and_then(|(i, _)| i.parse().ok())
        .unwrap_or(u64::MAX)
}

fn shard_count(s: &str) -> Option<u64> {
    s.split_once('/').and_then(|(_, n)| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(seed: u64, verdict: RunVerdict, kinds: &[&str], met: bool) -> SeedOutcome {
        SeedOutcome {
            seed,
            verdict,
            kinds: kinds.iter().map(|k| (*k).to_owned()).collect(),
            met,
        }
    }

    fn scenario() -> fencesim_scenario::Scenario {
        let (file, text) = crate::bundled::find("pause-fenced").expect("bundled");
        crate::Engine::built_in()
            .parse_scenario(text, file)
            .expect("valid")
    }

    fn shard(i: u64, outcomes: &[SeedOutcome]) -> (String, ExploreSummary) {
        let shard = format!("{i}/2");
        let s = ExploreSummary::tally(&scenario(), "0..2", Some(&shard), outcomes, false, 2.0);
        (format!("s{i}.json"), s)
    }

    #[test]
    fn tally_counts_verdicts_kinds_and_counterexamples() {
        let outcomes = [
            outcome(0, RunVerdict::Valid, &[], true),
            outcome(1, RunVerdict::Invalid, &["stale-write-accepted"], false),
            outcome(
                2,
                RunVerdict::Invalid,
                &["token-reused", "stale-write-accepted"],
                false,
            ),
            outcome(3, RunVerdict::SimFailed, &[], false),
            outcome(4, RunVerdict::Unknown, &[], false),
        ];
        let s = ExploreSummary::tally(&scenario(), "0..10", None, &outcomes, true, 0.5);
        assert_eq!(
            (s.seeds_run, s.valid, s.invalid, s.unknown, s.failed),
            (5, 1, 2, 1, 1)
        );
        assert_eq!(s.invalid_by_kind["stale-write-accepted"], 2);
        assert_eq!(s.invalid_by_kind["token-reused"], 1);
        assert_eq!(s.counterexamples, vec![1, 2, 3, 4]);
        assert_eq!(s.expectation_met, 1);
        assert_eq!(s.seeds_per_second, 10.0);
        assert!(s.lines()[0].contains("(stopped at the first counterexample)"));
    }

    #[test]
    fn merge_joins_shards_and_names_what_is_missing() {
        let a = shard(0, &[outcome(0, RunVerdict::Valid, &[], true)]);
        let b = shard(
            1,
            &[outcome(1, RunVerdict::Invalid, &["token-reused"], false)],
        );
        let merged = ExploreSummary::merge(&[b.clone(), a.clone()]).expect("merges");
        assert_eq!(merged.shards, vec!["0/2", "1/2"]);
        assert_eq!((merged.seeds_run, merged.valid, merged.invalid), (2, 1, 1));
        assert_eq!(merged.counterexamples, vec![1]);
        assert_eq!(merged.seconds, 2.0);
        assert_eq!(merged.missing_shards(), (0, Vec::new()));
        let alone = ExploreSummary::merge(std::slice::from_ref(&a)).expect("one shard");
        assert_eq!(alone.missing_shards(), (1, vec!["1/2".to_owned()]));
        let err = ExploreSummary::merge(&[a.clone(), a]).expect_err("same shard twice");
        assert!(
            err.contains("s0.json: shard 0/2 is already in the merge"),
            "{err}"
        );
    }

    #[test]
    fn merge_refuses_another_scenario() {
        let a = shard(0, &[outcome(0, RunVerdict::Valid, &[], true)]);
        let mut b = shard(1, &[outcome(1, RunVerdict::Valid, &[], true)]);
        b.1.scenario_sha256 = "0".repeat(64);
        let err = ExploreSummary::merge(&[a, b]).expect_err("different scenarios");
        assert!(err.starts_with("s1.json: scenario"), "{err}");
    }

    #[test]
    fn merge_refuses_a_shard_whose_counts_are_not_its_seeds() {
        let valid = |seed| outcome(seed, RunVerdict::Valid, &[], true);
        // Shard 1 of 2 of 0..5 holds seeds 1 and 3; a summary of one of them is not it.
        let part = |i: u64, seeds: &[u64]| {
            let outcomes: Vec<SeedOutcome> = seeds.iter().map(|&s| valid(s)).collect();
            let shard = format!("{i}/2");
            let s = ExploreSummary::tally(&scenario(), "0..5", Some(&shard), &outcomes, false, 1.0);
            (format!("s{i}.json"), s)
        };
        let whole = ExploreSummary::merge(&[part(0, &[0, 2, 4]), part(1, &[1, 3])]).unwrap();
        assert_eq!(whole.seeds_run, 5);
        let err = ExploreSummary::merge(&[part(0, &[0, 2, 4]), part(1, &[1])]).unwrap_err();
        assert_eq!(
            err,
            "s1.json: seeds_run = 1, but shard 1/2 of 0..5 are 2 seeds; a summary of part of \
             its seeds cannot stand for them all (it did not stop at a counterexample)"
        );
        // Counts that do not add up are refused whatever the range.
        let (name, mut edited) = part(1, &[1, 3]);
        edited.valid = 0;
        let err = ExploreSummary::merge(&[(name, edited)]).unwrap_err();
        assert_eq!(
            err,
            "s1.json: valid + invalid + unknown + failed = 0, but seeds_run = 2"
        );
        // A sweep that stopped at its first counterexample ran fewer, and says so; one that
        // says it stopped with no counterexample did not run its seeds.
        let (name, mut stopped) = part(1, &[1]);
        stopped.stopped_early = true;
        let err = ExploreSummary::merge(&[part(0, &[0, 2, 4]), (name.clone(), stopped.clone())]);
        assert!(err
            .unwrap_err()
            .contains("it did not stop at a counterexample"));
        let missed = outcome(1, RunVerdict::Invalid, &["token-reused"], false);
        let stopped = ExploreSummary::tally(&scenario(), "0..5", Some("1/2"), &[missed], true, 1.0);
        assert!(ExploreSummary::merge(&[part(0, &[0, 2, 4]), (name, stopped)]).is_ok());
        // Counts near 2^64 are refused, not wrapped into agreement; listed seeds must be the
        // summary's own.
        let (name, mut huge) = part(1, &[1, 3]);
        huge.valid = u64::MAX;
        huge.invalid = 3;
        let err = ExploreSummary::merge(&[(name.clone(), huge)]).unwrap_err();
        assert!(
            err.contains("= 18446744073709551618, but seeds_run = 2"),
            "{err}"
        );
        let (_, mut foreign) = part(1, &[1, 3]);
        foreign.first_seed_by_kind.insert("token-reused".into(), 2);
        let err = ExploreSummary::merge(&[(name, foreign)]).unwrap_err();
        assert_eq!(
            err,
            "s1.json: first_seed_by_kind names seed 2, which is not one of shard 1/2 of 0..5"
        );
    }

    #[test]
    fn missing_shards_of_a_huge_split_are_counted_and_the_first_few_named() {
        let (_, mut s) = shard(0, &[outcome(0, RunVerdict::Valid, &[], true)]);
        s.shards = vec!["3/1000000000000".to_owned()];
        let (missing, named) = s.missing_shards();
        assert_eq!(missing, 999_999_999_999);
        assert_eq!(named.len(), MAX_LISTED_SHARDS);
        assert_eq!(
            (named[0].as_str(), named[3].as_str()),
            ("0/1000000000000", "4/1000000000000")
        );
    }

    #[test]
    fn a_whole_range_summary_is_not_merged_with_a_shard() {
        let a = shard(0, &[outcome(0, RunVerdict::Valid, &[], true)]);
        let whole = ExploreSummary::tally(
            &scenario(),
            "0..2",
            None,
            &[
                outcome(0, RunVerdict::Valid, &[], true),
                outcome(1, RunVerdict::Valid, &[], true),
            ],
            false,
            1.0,
        );
        let err = ExploreSummary::merge(&[a, ("all.json".into(), whole)]).unwrap_err();
        assert_eq!(
            err,
            "all.json: a summary of the whole range cannot be merged with another"
        );
    }
}
