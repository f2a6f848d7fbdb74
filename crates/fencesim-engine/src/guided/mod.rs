//! Guided exploration (`explore --guided`): a search over fault schedules that keeps the ones
//! that made the system do something new and mutates them, as coverage-guided fuzzers keep and
//! mutate inputs (AFL, libFuzzer; for distributed systems, Mallory and Jepsen's generators
//! steered by feedback).
//!
//! It runs in generations of [`BATCH`] simulations. The first is plain exploration: the
//! scenario's own random nemesis on seeds `root`, `root + 1`, ... . Every run's history is
//! turned into features ([`signal`]); a run that shows a feature no earlier run showed puts
//! its schedule (the faults the nemesis drew, as scripted faults, with its seed) into the
//! corpus. Later generations are mostly mutants of corpus schedules ([`mutate`]: shift,
//! stretch, retarget, add, remove, splice, reseed), with half of each generation fresh nemesis
//! draws so the search keeps its breadth. The first run that misses the scenario's expectation ends the
//! search: the counterexample, a scripted scenario file that `run` reproduces.
//!
//! Deterministic: the search's choices come from one generator seeded by the root seed, and a
//! generation's candidates are fixed before any of them runs, so the same root seed gives the
//! same search whatever `--jobs` is. It reads neither the scenario's defect knobs nor its
//! expected violation kinds: only whether a run met the expectation, as `explore` does.

pub mod mutate;
pub mod probe;
pub mod signal;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use fencesim_scenario::{Fault, NemesisSpec, Placement, Scenario};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::run::{sweep_runs, Judged, RunOptions};
use crate::Engine;
use signal::Feature;

/// Simulations per generation. Fixed, not the number of workers, so that a search does not
/// depend on `--jobs`.
pub const BATCH: usize = 8;

/// Fresh nemesis draws per generation after the first.
const FRESH_PER_BATCH: usize = 4;

/// How often a mutant also gets a new simulation seed (its network and clients then differ
/// too), in percent.
const RESEED_PERCENT: u32 = 20;

/// One schedule kept for having shown something new.
#[derive(Clone, Debug)]
struct Entry {
    /// The nemesis faults, as scripted faults, the final heal last.
    faults: Vec<Fault>,
    seed: u64,
    /// The features its run showed, as numbers of [`Coverage`].
    features: Vec<u32>,
}

/// Every feature seen, numbered, with how many runs showed it: a feature few runs reach is
/// worth more, and so is a schedule that reaches many such (the rare-branch focus of
/// FairFuzz, the power schedules of AFLFast).
#[derive(Default)]
struct Coverage {
    ids: BTreeMap<Feature, u32>,
    hits: Vec<u32>,
}

impl Coverage {
    /// Count a run's features; the numbers of all of them, and how many were new.
    fn add(&mut self, features: BTreeSet<Feature>) -> (Vec<u32>, usize) {
        let mut new = 0;
        let ids = features
            .into_iter()
            .map(|f| {
                let next = self.hits.len() as u32;
                let id = *self.ids.entry(f).or_insert(next);
                if id == next {
                    self.hits.push(0);
                    new += 1;
                }
                self.hits[id as usize] += 1;
                id
            })
            .collect();
        (ids, new)
    }

    /// A schedule's worth as a parent: the rarity of what its run reached.
    fn weight(&self, entry: &Entry) -> f64 {
        entry
            .features
            .iter()
            .map(|id| 1.0 / f64::from(self.hits[*id as usize]))
            .sum()
    }
}

/// A run to make: the scenario (the original, or a scripted mutant) and its seed.
struct Candidate {
    scenario: Scenario,
    seed: u64,
    /// The schedule, for a mutant; a fresh draw's comes back in its report.
    faults: Option<Vec<Fault>>,
    /// How the candidate came about, for the report of a counterexample.
    origin: String,
}

/// What a run came to, as the search needs it.
struct Outcome {
    met: bool,
    features: BTreeSet<Feature>,
    distances: signal::Distances,
    drawn: Vec<Fault>,
    judged: Option<Box<Judged>>,
}

/// The counterexample a guided search found.
#[derive(Debug)]
pub struct Found {
    /// The scenario that shows it: the original's settings with the schedule as scripted
    /// faults and no `[nemesis]`.
    pub scenario: Scenario,
    /// Its seed.
    pub seed: u64,
    /// Its run.
    pub judged: Box<Judged>,
    /// How the schedule came about (`"fresh draw of seed 5"`, `"mutant of ..."`).
    pub origin: String,
}

/// What a guided search did.
#[derive(Debug)]
pub struct GuidedOutcome {
    /// Simulations run, the counterexample's included.
    pub simulations: u64,
    /// Generations started.
    pub generations: u64,
    /// Schedules kept.
    pub corpus: usize,
    /// Distinct features seen.
    pub features: usize,
    /// The first counterexample, if any within the budget.
    pub found: Option<Found>,
}

/// Search `scenario` (which must have a `[nemesis]`) from `root_seed`, for at most `budget`
/// simulations on `jobs` threads.
///
/// # Errors
/// Only writing a counterexample's files could fail, and this writes none: the error type is
/// [`crate::run::sweep_runs`]'s.
pub fn search(
    engine: &Engine,
    scenario: &Scenario,
    root_seed: u64,
    budget: u64,
    jobs: usize,
    opts: &RunOptions,
) -> std::io::Result<GuidedOutcome> {
    let spec = scenario
        .nemesis
        .as_ref()
        .expect("guided exploration needs a [nemesis]; the CLI checks");
    // Running for the whole search, not only while a generation's runs are: a Ctrl-C between
    // generations (while the search learns and makes the next) must also end it with its
    // summary rather than quit at once.
    let _running = opts.cancel.running();
    let mut search = Search::new(engine, scenario, spec, root_seed);
    let mut outcome = GuidedOutcome {
        simulations: 0,
        generations: 0,
        corpus: 0,
        features: 0,
        found: None,
    };
    while outcome.simulations < budget && !opts.cancel.is_cancelled() {
        let size = BATCH.min((budget - outcome.simulations) as usize);
        let candidates = search.generation(size);
        outcome.generations += 1;
        let runs: Vec<(&Scenario, u64)> =
            candidates.iter().map(|c| (&c.scenario, c.seed)).collect();
        let judge = |done| Ok(judge(done, scenario));
        let results = sweep_runs(engine, &runs, jobs, opts, judge, |o: &Outcome| !o.met)?;
        for (candidate, result) in candidates.into_iter().zip(results) {
            outcome.simulations += 1;
            outcome.found = search.learn(candidate, result);
            if outcome.found.is_some() {
                break;
            }
        }
        if outcome.found.is_some() {
            break;
        }
    }
    outcome.corpus = search.corpus.len();
    outcome.features = search.coverage.hits.len();
    Ok(outcome)
}

/// The search's state between generations.
struct Search<'a> {
    /// Validates the candidates' scenarios.
    engine: &'a Engine,
    scenario: &'a Scenario,
    /// The scenario without its `[nemesis]`: what mutants' scripted schedules are added to.
    base: Scenario,
    mutator: mutate::Mutator<'a>,
    rng: Xoshiro256PlusPlus,
    corpus: Vec<Entry>,
    coverage: Coverage,
    /// Per hazard distance, the closest any run came and the corpus schedule that did.
    champions: [Option<(i64, usize)>; 3],
    /// The seed of the next fresh draw or probe run.
    next_fresh: u64,
    /// The probe runs not run yet ([`probe`]): each a schedule (its final heal last) and the
    /// scenario it makes, validated.
    probes: VecDeque<(Vec<Fault>, Scenario)>,
    /// Probe runs in all.
    probe_runs: usize,
}

impl<'a> Search<'a> {
    fn new(
        engine: &'a Engine,
        scenario: &'a Scenario,
        spec: &'a NemesisSpec,
        root_seed: u64,
    ) -> Self {
        let mut base = scenario.clone();
        base.nemesis = None;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(root_seed ^ 0x6775_6964_6564);
        let probes = probe_runs(engine, scenario, spec, &base, &mut rng);
        Search {
            engine,
            scenario,
            base,
            mutator: mutate::Mutator { spec, scenario },
            rng,
            corpus: Vec::new(),
            coverage: Coverage::default(),
            champions: [None; 3],
            next_fresh: root_seed,
            probe_runs: probes.len(),
            probes,
        }
    }

    /// The next generation's `size` candidates, fixed before any runs: probe runs while any
    /// are left, then fresh draws (all of them while the corpus is empty), then mutants.
    fn generation(&mut self, size: usize) -> Vec<Candidate> {
        let mut candidates = Vec::with_capacity(size);
        while candidates.len() < size {
            match self.probe() {
                Some(probe) => candidates.push(probe),
                None => break,
            }
        }
        let probed = candidates.len();
        let fresh = if self.corpus.is_empty() {
            size
        } else {
            probed + FRESH_PER_BATCH.min(size)
        };
        for slot in probed..size {
            let candidate = if slot < fresh {
                self.fresh()
            } else {
                self.mutant()
            };
            candidates.push(candidate);
        }
        candidates
    }

    /// The next probe run, on the next fresh seed.
    fn probe(&mut self) -> Option<Candidate> {
        let (faults, scenario) = self.probes.pop_front()?;
        let seed = self.next_fresh;
        self.next_fresh = seed.wrapping_add(1);
        let number = self.probe_runs - self.probes.len();
        Some(Candidate {
            scenario,
            seed,
            faults: Some(faults),
            origin: format!(
                "hazard probe run {number} of {} on seed {seed}",
                self.probe_runs
            ),
        })
    }

    /// The nemesis's own draw for the next seed, placed uniformly or targeted by its parity.
    fn fresh(&mut self) -> Candidate {
        let seed = self.next_fresh;
        self.next_fresh = seed.wrapping_add(1);
        let placement = PLACEMENTS[(seed % 2) as usize];
        Candidate {
            scenario: placed(self.scenario, placement),
            seed,
            faults: None,
            origin: format!(
                "the nemesis's {} draw for seed {seed}",
                placement_name(placement)
            ),
        }
    }

    /// A mutant of a champion half the time, else of a schedule chosen by rarity.
    fn mutant(&mut self) -> Candidate {
        let champions: Vec<usize> = self.champions.iter().flatten().map(|c| c.1).collect();
        let parent = match champions.choose(&mut self.rng) {
            Some(&i) if self.rng.gen_bool(0.5) => i,
            _ => rare_parent(&self.corpus, &self.coverage, &mut self.rng),
        };
        mutant(
            self.engine,
            &self.base,
            &self.corpus,
            parent,
            &self.mutator,
            &mut self.rng,
        )
    }

    /// Take in a run: the counterexample if it is one, else keep its schedule if it showed a
    /// new feature or came closer to a property's breaking than any run before.
    fn learn(&mut self, candidate: Candidate, result: Outcome) -> Option<Found> {
        let faults = candidate.faults.unwrap_or(result.drawn);
        if !result.met {
            return Some(Found {
                scenario: scripted(&self.base, &faults),
                seed: candidate.seed,
                judged: result.judged.expect("kept for a counterexample"),
                origin: candidate.origin,
            });
        }
        let (features, new) = self.coverage.add(result.features);
        let distances = result.distances.all();
        let closer: Vec<usize> = (0..self.champions.len())
            .filter(|&i| match (distances[i], self.champions[i]) {
                (Some(d), Some((best, _))) => d < best,
                (Some(_), None) => true,
                (None, _) => false,
            })
            .collect();
        if new > 0 || !closer.is_empty() {
            for i in closer {
                self.champions[i] = distances[i].map(|d| (d, self.corpus.len()));
            }
            self.corpus.push(Entry {
                faults,
                seed: candidate.seed,
                features,
            });
        }
        None
    }
}

/// A run's outcome for the search, on the worker that ran it: the history's features, the
/// faults the nemesis drew, and the run itself only if it is a counterexample.
fn judge(done: Judged, scenario: &Scenario) -> Outcome {
    let met = done.report.expectation.met;
    let features = signal::features(&done.records, scenario);
    let drawn = done
        .report
        .nemesis
        .as_ref()
        .map_or_else(Vec::new, |p| p.faults.clone());
    Outcome {
        met,
        distances: signal::distances(&done.records),
        features,
        drawn,
        judged: (!met).then(|| Box::new(done)),
    }
}

/// The scenario's probe runs ([`probe`]), each a valid schedule with the scenario it makes:
/// a probe that the scenario's validation refuses (a trigger its nodes have no safepoint for)
/// is left out.
fn probe_runs(
    engine: &Engine,
    scenario: &Scenario,
    spec: &NemesisSpec,
    base: &Scenario,
    rng: &mut Xoshiro256PlusPlus,
) -> VecDeque<(Vec<Fault>, Scenario)> {
    let heal = fencesim_sim::random_nemesis::final_heal(spec, scenario);
    let prober = probe::Prober { spec, scenario };
    let valid = |faults: &[Fault]| engine.revalidate(&scripted(base, faults)).ok();
    prober
        .runs(&heal, rng)
        .into_iter()
        .filter_map(|run| {
            if let Some(valid_run) = valid(&run) {
                return Some((run, valid_run));
            }
            let (probes, _) = run.split_at(run.len() - 1);
            let mut kept: Vec<Fault> = probes
                .iter()
                .filter(|p| valid(&[(*p).clone(), heal.clone()]).is_some())
                .cloned()
                .collect();
            kept.push(heal.clone());
            let valid_kept = valid(&kept).filter(|_| kept.len() > 1)?;
            Some((kept, valid_kept))
        })
        .collect()
}

/// A corpus schedule chosen with the weight of the rarity of what its run reached.
fn rare_parent(corpus: &[Entry], coverage: &Coverage, rng: &mut Xoshiro256PlusPlus) -> usize {
    let weights: Vec<f64> = corpus.iter().map(|e| coverage.weight(e)).collect();
    let total: f64 = weights.iter().sum();
    let mut pick = rng.gen_range(0.0..total.max(f64::MIN_POSITIVE));
    weights
        .iter()
        .position(|w| {
            pick -= w;
            pick < 0.0
        })
        .unwrap_or(corpus.len() - 1)
}

/// A mutant of corpus schedule `index`. A mutant the scenario's validation refuses is
/// mutated again, a few times at most.
fn mutant(
    engine: &Engine,
    base: &Scenario,
    corpus: &[Entry],
    index: usize,
    mutator: &mutate::Mutator<'_>,
    rng: &mut Xoshiro256PlusPlus,
) -> Candidate {
    let parent = &corpus[index];
    let donor = &corpus[rng.gen_range(0..corpus.len())];
    let seed = if rng.gen_ratio(RESEED_PERCENT, 100) {
        rng.gen()
    } else {
        parent.seed
    };
    for _ in 0..8 {
        let faults = mutator.mutate(&parent.faults, &donor.faults, rng);
        if let Ok(valid) = engine.revalidate(&scripted(base, &faults)) {
            return Candidate {
                scenario: valid,
                seed,
                faults: Some(faults),
                origin: format!("a mutant of the schedule of seed {}", parent.seed),
            };
        }
    }
    Candidate {
        scenario: scripted(base, &parent.faults),
        seed,
        faults: Some(parent.faults.clone()),
        origin: format!("the schedule of seed {}", parent.seed),
    }
}

/// The placements fresh draws alternate between (by seed parity) and new faults are drawn
/// with: the search uses both, whatever the scenario says, for every design alike.
pub const PLACEMENTS: [Placement; 2] = [Placement::Uniform, Placement::Targeted];

fn placement_name(placement: Placement) -> &'static str {
    match placement {
        Placement::Uniform => "uniform",
        Placement::Targeted => "targeted",
    }
}

/// `scenario` with its random nemesis placing faults as `placement`.
fn placed(scenario: &Scenario, placement: Placement) -> Scenario {
    let mut s = scenario.clone();
    if let Some(nemesis) = s.nemesis.as_mut() {
        nemesis.placement = placement;
    }
    s
}

/// `base` (the scenario without its `[nemesis]`) with `faults` added to its own.
fn scripted(base: &Scenario, faults: &[Fault]) -> Scenario {
    let mut s = base.clone();
    s.faults.extend(faults.iter().cloned());
    s
}
