//! `explore --shard env`: a shard's index and count from the engine that runs the job, so a
//! sweep splits over a CI matrix or a Kubernetes Indexed Job without a script to compute
//! `I/N` per job (docs/scale.md).
//!
//! Each engine names its variables its own way; fencesim reads the one engine whose index
//! variable is set and refuses to guess when several are.

/// A job engine's variables for "which of the parallel jobs am I".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Engine {
    /// The engine, as messages name it.
    pub name: &'static str,
    /// The variable holding this job's index.
    pub index: &'static str,
    /// The variable holding the number of jobs, if the engine sets one.
    pub total: Option<&'static str>,
    /// Whether the index counts from 1 (GitLab) rather than 0.
    pub one_based: bool,
}

/// The engines `--shard env` knows, in the order their variables are looked for.
pub const ENGINES: &[Engine] = &[
    Engine {
        name: "GitLab CI",
        index: "CI_NODE_INDEX",
        total: Some("CI_NODE_TOTAL"),
        one_based: true,
    },
    Engine {
        name: "Buildkite",
        index: "BUILDKITE_PARALLEL_JOB",
        total: Some("BUILDKITE_PARALLEL_JOB_COUNT"),
        one_based: false,
    },
    Engine {
        name: "CircleCI",
        index: "CIRCLE_NODE_INDEX",
        total: Some("CIRCLE_NODE_TOTAL"),
        one_based: false,
    },
    // An Indexed Job's pods know their index but not the job's `completions`: the count is
    // given as `--shard env/N`.
    Engine {
        name: "a Kubernetes Indexed Job",
        index: "JOB_COMPLETION_INDEX",
        total: None,
        one_based: false,
    },
];

/// A shard found in the environment: `I/N` (0-based, as `--shard I/N` takes it) and where it
/// came from, for the message that says so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvShard {
    /// `I/N`.
    pub label: String,
    /// `"GitLab CI (CI_NODE_INDEX=2, CI_NODE_TOTAL=4)"`.
    pub source: String,
}

/// Resolve `--shard ARG` when ARG is `env` or `env/N` (`N`: the number of shards, for an
/// engine that does not say it, or to check the one that does), reading variables through
/// `var`; `Ok(None)` for any other ARG (an `I/N` given outright).
///
/// # Errors
/// No engine's index variable set, several set, a value that is not a number, an index out of
/// range, no count anywhere, or a count that disagrees with the engine's: each says which
/// variables it read.
pub fn resolve(
    arg: &str,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<EnvShard>, String> {
    let given_count = match arg.strip_prefix("env") {
        None => return Ok(None),
        Some("") => None,
        Some(rest) => match rest.strip_prefix('/').and_then(|n| n.parse::<u64>().ok()) {
            Some(n) if n > 0 => Some(n),
            _ => {
                return Err(format!(
                    "--shard: expected env or env/N with N >= 1, found {arg:?}"
                ))
            }
        },
    };
    let set: Vec<&Engine> = ENGINES.iter().filter(|e| var(e.index).is_some()).collect();
    let engine = match set.as_slice() {
        [one] => *one,
        [] => {
            let names: Vec<&str> = ENGINES.iter().map(|e| e.index).collect();
            return Err(format!(
                "--shard {arg}: none of {} is set; run inside a CI matrix or an Indexed Job, or \
                 give --shard I/N",
                names.join(", ")
            ));
        }
        several => {
            let names: Vec<String> = several
                .iter()
                .map(|e| format!("{} ({})", e.name, e.index))
                .collect();
            return Err(format!(
                "--shard {arg}: the variables of several engines are set: {}; give --shard I/N",
                names.join(", ")
            ));
        }
    };
    let number = |name: &str| -> Result<Option<u64>, String> {
        match var(name) {
            None => Ok(None),
            Some(text) => text.trim().parse().map(Some).map_err(|_| {
                format!("--shard {arg}: {name}={text:?} is not a non-negative integer")
            }),
        }
    };
    let raw_index = number(engine.index)?.expect("the engine was chosen for its index variable");
    let engine_count = match engine.total {
        Some(total) => number(total)?,
        None => None,
    };
    let count = match (engine_count, given_count) {
        (Some(e), Some(g)) if e != g => {
            return Err(format!(
                "--shard {arg}: {} says {e} jobs ({}={e}), not {g}",
                engine.name,
                engine.total.unwrap_or_default()
            ))
        }
        (Some(0), _) => {
            return Err(format!(
                "--shard {arg}: {}=0: a sweep of no jobs",
                engine.total.unwrap_or_default()
            ))
        }
        (Some(n), _) | (None, Some(n)) => n,
        (None, None) => {
            return Err(format!(
                "--shard env: {} does not say how many jobs there are ({} alone is set); give \
                 --shard env/N",
                engine.name, engine.index
            ))
        }
    };
    let index = match (engine.one_based, raw_index) {
        (true, 0) => {
            return Err(format!(
                "--shard {arg}: {}=0, but {} counts jobs from 1",
                engine.index, engine.name
            ))
        }
        (true, i) => i - 1,
        (false, i) => i,
    };
    if index >= count {
        return Err(format!(
            "--shard {arg}: {}={raw_index} is past the last of {count} jobs",
            engine.index
        ));
    }
    let mut read = format!("{}={raw_index}", engine.index);
    if let (Some(total), Some(n)) = (engine.total, engine_count) {
        read.push_str(&format!(", {total}={n}"));
    }
    Ok(Some(EnvShard {
        label: format!("{index}/{count}"),
        source: format!("{} ({read})", engine.name),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    fn label(arg: &str, vars: &[(&str, &str)]) -> Result<String, String> {
        resolve(arg, &with(vars)).map(|s| s.map(|s| s.label).unwrap_or_default())
    }

    #[test]
    fn each_engine_gives_a_zero_based_shard() {
        let gitlab = [("CI_NODE_INDEX", "1"), ("CI_NODE_TOTAL", "4")];
        assert_eq!(label("env", &gitlab).unwrap(), "0/4");
        let buildkite = [
            ("BUILDKITE_PARALLEL_JOB", "3"),
            ("BUILDKITE_PARALLEL_JOB_COUNT", "4"),
        ];
        assert_eq!(label("env", &buildkite).unwrap(), "3/4");
        let circle = [("CIRCLE_NODE_INDEX", "0"), ("CIRCLE_NODE_TOTAL", "2")];
        assert_eq!(label("env/2", &circle).unwrap(), "0/2");
        let k8s = [("JOB_COMPLETION_INDEX", "7")];
        assert_eq!(label("env/8", &k8s).unwrap(), "7/8");
        let shard = resolve("env", &with(&gitlab)).unwrap().unwrap();
        assert_eq!(shard.source, "GitLab CI (CI_NODE_INDEX=1, CI_NODE_TOTAL=4)");
        assert_eq!(resolve("2/4", &with(&gitlab)).unwrap(), None);
    }

    #[test]
    fn what_cannot_be_a_shard_is_refused_naming_the_variables() {
        let k8s = [("JOB_COMPLETION_INDEX", "7")];
        assert_eq!(
            label("env", &k8s).unwrap_err(),
            "--shard env: a Kubernetes Indexed Job does not say how many jobs there are \
             (JOB_COMPLETION_INDEX alone is set); give --shard env/N"
        );
        assert_eq!(
            label("env/7", &k8s).unwrap_err(),
            "--shard env/7: JOB_COMPLETION_INDEX=7 is past the last of 7 jobs"
        );
        assert!(label("env", &[]).unwrap_err().starts_with(
            "--shard env: none of CI_NODE_INDEX, BUILDKITE_PARALLEL_JOB, CIRCLE_NODE_INDEX, \
             JOB_COMPLETION_INDEX is set"
        ));
        let both = [
            ("CI_NODE_INDEX", "1"),
            ("CI_NODE_TOTAL", "2"),
            ("JOB_COMPLETION_INDEX", "0"),
        ];
        assert!(label("env", &both).unwrap_err().contains(
            "several engines are set: GitLab CI (CI_NODE_INDEX), a Kubernetes Indexed Job \
             (JOB_COMPLETION_INDEX)"
        ));
        let zero = [("CI_NODE_INDEX", "0"), ("CI_NODE_TOTAL", "2")];
        assert_eq!(
            label("env", &zero).unwrap_err(),
            "--shard env: CI_NODE_INDEX=0, but GitLab CI counts jobs from 1"
        );
        let disagree = [("CIRCLE_NODE_INDEX", "0"), ("CIRCLE_NODE_TOTAL", "2")];
        assert_eq!(
            label("env/3", &disagree).unwrap_err(),
            "--shard env/3: CircleCI says 2 jobs (CIRCLE_NODE_TOTAL=2), not 3"
        );
        let junk = [
            ("BUILDKITE_PARALLEL_JOB", "x"),
            ("BUILDKITE_PARALLEL_JOB_COUNT", "2"),
        ];
        assert_eq!(
            label("env", &junk).unwrap_err(),
            "--shard env: BUILDKITE_PARALLEL_JOB=\"x\" is not a non-negative integer"
        );
        assert_eq!(
            label("env/0", &k8s).unwrap_err(),
            "--shard: expected env or env/N with N >= 1, found \"env/0\""
        );
        assert_eq!(
            label("envy", &k8s).unwrap_err(),
            "--shard: expected env or env/N with N >= 1, found \"envy\""
        );
    }
}
