//! The engine value: which designs a process knows and what its command is called, passed to
//! every part of fencesim that parses a scenario, simulates one or prints a command to run
//! again. There is no process-wide registry: a user's test suite, a user's binary and the
//! `fencesim` binary each make the engine they need, and two engines with different designs
//! can run side by side in one process.

use std::ops::Range;
use std::path::{Path, PathBuf};

use fencesim_scenario::{Scenario, ScenarioError};
use fencesim_sim::RunOutcome;

use crate::cancel::Cancel;
use crate::registry::Registry;
use crate::{bundled, run, Checked, ScenarioCheckError};

/// The designs a scenario may name ([`Registry`]) and the name of the command that runs them
/// (`fencesim`, or a user's own binary), for the `reproduce:` lines and reports.
///
/// Cheap to clone: a registry holds `'static` references to its designs.
#[derive(Clone)]
pub struct Engine {
    registry: Registry,
    program: String,
}

impl Engine {
    /// The built-in designs ([`Registry::built_in`]), run as `fencesim`.
    pub fn built_in() -> Self {
        Engine::new(Registry::built_in())
    }

    /// The designs of `registry`, run as `fencesim`: a user's test suite makes one with its own
    /// designs added to the built-in ones.
    pub fn new(registry: Registry) -> Self {
        Engine {
            registry,
            program: "fencesim".to_owned(),
        }
    }

    /// The same engine, its command named `program` (a user's own binary, `zookeeper-lock`):
    /// the `reproduce:` lines and summaries then name a command that knows its designs.
    #[must_use]
    pub fn named(mut self, program: impl Into<String>) -> Self {
        self.program = program.into();
        self
    }

    /// The designs and resources this engine knows.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The command a user types to run this engine (`fencesim` unless [`Engine::named`]).
    pub fn program(&self) -> &str {
        &self.program
    }

    /// Read and validate a scenario file, refusing expectations this checker cannot decide.
    ///
    /// # Errors
    /// The file cannot be read or is not a valid scenario (the error names file, line and
    /// field).
    pub fn load_scenario(&self, path: &Path) -> Result<Scenario, ScenarioError> {
        fencesim_scenario::load(path, Some(fencesim_checker::CHECKED_KINDS), &self.registry)
    }

    /// A scenario given as a file path, or else as the name of a bundled scenario
    /// (`pause-fenced`), as the CLI and [`Engine::check_scenario`] take it. A path that is a
    /// file wins over a bundled name.
    ///
    /// # Errors
    /// As [`Engine::load_scenario`]; a name that is neither a file nor a bundled scenario is
    /// refused with the nearest bundled name.
    pub fn load_named(&self, arg: &str) -> Result<Scenario, ScenarioError> {
        let path = Path::new(arg);
        match (path.is_file(), bundled::find(arg)) {
            (false, Some((file, text))) => self.parse_scenario(text, &format!("bundled:{file}")),
            (false, None) if !path.exists() => Err(ScenarioError::Io {
                file: arg.to_owned(),
                message: self.no_such_scenario(arg),
            }),
            _ => self.load_scenario(path),
        }
    }

    /// Why `arg` names no scenario, with the nearest bundled name if there is one.
    fn no_such_scenario(&self, arg: &str) -> String {
        let list = format!("`{} list` shows them all", self.program);
        match bundled::nearest(arg) {
            Some(near) => format!(
                "no such file, and no bundled scenario of that name (did you mean {near}? {list})"
            ),
            None => format!("no such file, and no bundled scenario of that name ({list})"),
        }
    }

    /// Validate scenario TOML `text` (`file` names it in errors), as
    /// [`Engine::load_scenario`] does.
    ///
    /// # Errors
    /// `text` is not a valid scenario (the error names `file`, line and field).
    pub fn parse_scenario(&self, text: &str, file: &str) -> Result<Scenario, ScenarioError> {
        fencesim_scenario::parse(
            text,
            file,
            Some(fencesim_checker::CHECKED_KINDS),
            &self.registry,
        )
    }

    /// `scenario` validated again, as the file `to_toml` writes of it: for tests and tools that
    /// edit a parsed scenario (a resource's `mode`, a knob), so that the edit is checked and
    /// the design's shape follows it.
    ///
    /// # Errors
    /// The edited scenario is not valid (a located error in the scenario as `to_toml` writes
    /// it).
    pub fn revalidate(&self, scenario: &Scenario) -> Result<Scenario, ScenarioError> {
        let file = format!("{} (edited)", scenario.name);
        self.parse_scenario(&fencesim_scenario::to_toml(scenario), &file)
    }

    /// `scenario` with its design's knob `name` (`[lock_service]`) set to `value`, validated
    /// again as if the file had said so: the knob must be one the design takes, and the
    /// design's shape (its nodes, its token order) follows the new value. For tests and tools
    /// that vary one knob of a bundled scenario.
    ///
    /// # Errors
    /// The design has no such knob, or refuses the value (a located error in the scenario as
    /// `to_toml` writes it).
    pub fn with_knob(
        &self,
        scenario: &Scenario,
        name: &str,
        value: toml::Value,
    ) -> Result<Scenario, ScenarioError> {
        let mut edited = scenario.clone();
        edited.lock_service.knobs.insert(name.to_owned(), value);
        self.revalidate(&edited)
    }

    /// `scenario` with its design's client knob `name` (`[[clients]]`, such as `reclaim`) set
    /// to `value` on every client, validated again as [`Engine::with_knob`] does.
    ///
    /// # Errors
    /// The design's clients have no such knob, or refuse the value for some client.
    pub fn with_client_knob(
        &self,
        scenario: &Scenario,
        name: &str,
        value: toml::Value,
    ) -> Result<Scenario, ScenarioError> {
        let mut edited = scenario.clone();
        for client in &mut edited.clients {
            client.knobs.insert(name.to_owned(), value.clone());
        }
        self.revalidate(&edited)
    }

    /// Simulate `scenario` under root seed `seed` with its design (see [`fencesim_sim::run`]).
    ///
    /// # Panics
    /// If this engine has no design of the scenario's kind, or no resource of its mode: a
    /// scenario parsed by this engine always names ones it has.
    pub fn simulate(&self, scenario: &Scenario, seed: u64) -> RunOutcome {
        let (kind, mode) = (&scenario.lock_service.kind, &scenario.resource.mode);
        let design = self.registry.sim(kind).unwrap_or_else(|| {
            panic!("no design of kind {kind:?}: the scenario was not parsed by this engine")
        });
        let resource = self.registry.resource_sim(mode).unwrap_or_else(|| {
            panic!("no resource of mode {mode:?}: the scenario was not parsed by this engine")
        });
        fencesim_sim::run(scenario, seed, design, resource)
    }

    /// Run a scenario over `seeds` and require its `[expect]` on every one: for a user's own
    /// test suite, where `engine.check_scenario("tests/my-lock.toml", 0..200).unwrap()` fails
    /// the test with the first counterexample's explanation and the command that reproduces
    /// it.
    ///
    /// `scenario` is a file path or the name of a bundled scenario. Seeds run in parallel, one
    /// simulation thread each, and stop at the first that misses the expectation (the lowest,
    /// whatever the parallelism); that seed's files go to `reports/runs/<name>/<seed>/` under
    /// the current directory, as `fencesim run` writes them.
    ///
    /// # Errors
    /// See [`ScenarioCheckError`]: a bad scenario, an empty or too large range, a
    /// counterexample, or files that could not be written.
    pub fn check_scenario(
        &self,
        scenario: &str,
        seeds: Range<u64>,
    ) -> Result<Checked, ScenarioCheckError> {
        self.check_scenario_until(scenario, seeds, &Cancel::new())
    }

    /// [`Engine::check_scenario`], stopping early once `cancel` is cancelled (from a Ctrl-C
    /// handler of the caller's, say): the seeds in progress finish, and a range not checked to
    /// its end is [`ScenarioCheckError::Interrupted`], never a pass.
    ///
    /// # Errors
    /// As [`Engine::check_scenario`], and [`ScenarioCheckError::Interrupted`].
    pub fn check_scenario_until(
        &self,
        scenario: &str,
        seeds: Range<u64>,
        cancel: &Cancel,
    ) -> Result<Checked, ScenarioCheckError> {
        let parsed = self
            .load_named(scenario)
            .map_err(|e| ScenarioCheckError::BadScenario(e.to_string()))?;
        if seeds.is_empty() {
            return Err(ScenarioCheckError::NoSeeds {
                start: seeds.start,
                end: seeds.end,
            });
        }
        let count = seeds.end - seeds.start;
        if count > run::MAX_SWEEP_SEEDS {
            return Err(ScenarioCheckError::TooManySeeds { count });
        }
        let list: Vec<u64> = seeds.collect();
        let opts = run::RunOptions {
            out: PathBuf::from("reports/runs"),
            scenario_arg: scenario.to_owned(),
            check_determinism: false,
            swarm: false,
            cancel: cancel.clone(),
        };
        let missed = |done: run::Judged| Ok((!done.report.expectation.met).then_some(done));
        let results = run::sweep_until(
            self,
            &parsed,
            &list,
            run::default_jobs(),
            &opts,
            missed,
            Option::is_some,
        )?;
        let seeds_run = results.len() as u64;
        match results.into_iter().flatten().next() {
            None if seeds_run < count => Err(ScenarioCheckError::Interrupted { seeds_run, count }),
            None => Ok(Checked {
                scenario: parsed.name,
                seeds_run,
            }),
            Some(done) => {
                let written = done.write(self, &opts.out)?;
                Err(ScenarioCheckError::Counterexample {
                    seed: written.report.seed,
                    summary: written.explain(true),
                    report: fencesim_history::display_path(&written.report_path),
                    reproduce: written.report.reproduce.clone(),
                })
            }
        }
    }
}
