//! `explore --shard env`: a shard's index and count from the engine that runs the job, so a
//! sweep splits over a CI matrix, a Kubernetes Indexed Job or a Slurm job array without a
//! script to compute `I/N` per job (docs/scale.md).
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
    /// How the index and count become a shard.
    pub layout: Layout,
}

/// How an engine's index and count map onto `I/N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// The index is the shard (less one, for a one-based engine) and the count is N.
    Plain,
    /// A Slurm job array: tasks are numbered by the indices given to `sbatch --array`
    /// (`0-7`, `2-8:2`, `1,3,7`), with their count, lowest, highest and step in
    /// `SLURM_ARRAY_TASK_COUNT`, `_MIN`, `_MAX` and `_STEP`. A regular array (`MIN`, then every
    /// `STEP`th index up to `MAX`) is one split, its tasks the shards `(ID - MIN) / STEP` of
    /// `COUNT`; any other array is refused. With `env/N`, which says how many shards the sweep
    /// has, each task id is its shard, whatever the array (`--array=0-7` with `env/8` is the
    /// whole split; `--array=2,5` with `env/8` a re-run of two shards). Variables no array task
    /// has (an id outside `MIN..=MAX` or off the step, a count or step of 0) are refused.
    SlurmArray,
}

/// The engines `--shard env` knows, in the order their variables are looked for.
pub const ENGINES: &[Engine] = &[
    Engine {
        name: "GitLab CI",
        index: "CI_NODE_INDEX",
        total: Some("CI_NODE_TOTAL"),
        one_based: true,
        layout: Layout::Plain,
    },
    Engine {
        name: "Buildkite",
        index: "BUILDKITE_PARALLEL_JOB",
        total: Some("BUILDKITE_PARALLEL_JOB_COUNT"),
        one_based: false,
        layout: Layout::Plain,
    },
    Engine {
        name: "CircleCI",
        index: "CIRCLE_NODE_INDEX",
        total: Some("CIRCLE_NODE_TOTAL"),
        one_based: false,
        layout: Layout::Plain,
    },
    // An Indexed Job's pods know their index but not the job's `completions`: the count is
    // given as `--shard env/N`.
    Engine {
        name: "a Kubernetes Indexed Job",
        index: "JOB_COMPLETION_INDEX",
        total: None,
        one_based: false,
        layout: Layout::Plain,
    },
    Engine {
        name: "a Slurm job array",
        index: "SLURM_ARRAY_TASK_ID",
        total: Some("SLURM_ARRAY_TASK_COUNT"),
        one_based: false,
        layout: Layout::SlurmArray,
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
                "--shard {arg}: none of {} is set; run inside a CI matrix, an Indexed Job or a Slurm array, or \
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
    if engine.layout == Layout::SlurmArray {
        return slurm_array(arg, given_count, &number).map(Some);
    }
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

/// The shard of a Slurm job array's task ([`Layout::SlurmArray`]), `number` reading a
/// variable as a count.
fn slurm_array(
    arg: &str,
    given_count: Option<u64>,
    number: &dyn Fn(&str) -> Result<Option<u64>, String>,
) -> Result<EnvShard, String> {
    let need = |name: &str| {
        number(name)?
            .ok_or_else(|| format!("--shard {arg}: SLURM_ARRAY_TASK_ID is set but {name} is not"))
    };
    let id = need("SLURM_ARRAY_TASK_ID")?;
    let (tasks, min, max) = (
        need("SLURM_ARRAY_TASK_COUNT")?,
        need("SLURM_ARRAY_TASK_MIN")?,
        need("SLURM_ARRAY_TASK_MAX")?,
    );
    let step = number("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1);
    let read = format!(
        "SLURM_ARRAY_TASK_ID={id}, SLURM_ARRAY_TASK_COUNT={tasks}, SLURM_ARRAY_TASK_MIN={min}, \
         SLURM_ARRAY_TASK_MAX={max}, SLURM_ARRAY_TASK_STEP={step}"
    );
    // What Slurm itself never sets: no array task could have read it.
    if tasks == 0 || step == 0 || min > max || id < min || id > max {
        return Err(format!(
            "--shard {arg}: these cannot be the variables of a Slurm array task ({read}): \
             Slurm sets COUNT and STEP of at least 1, and MIN <= ID <= MAX"
        ));
    }
    let (index, count) = match given_count {
        // A re-run of some shards of an N-way sweep (or the whole of it, --array=0-(N-1)).
        Some(n) => (id, n),
        None if !regular(tasks, min, max, step) => {
            return Err(format!(
                "--shard {arg}: the Slurm array's {tasks} task ids from {min} to {max} are not \
                 one split of the seeds ({read}); submit it as --array=0-{} (or A-B:S), or give \
                 --shard env/N to take each task id as its shard (a re-run of some shards)",
                tasks - 1
            ))
        }
        None if !(id - min).is_multiple_of(step) => {
            return Err(format!(
                "--shard {arg}: SLURM_ARRAY_TASK_ID={id} is not one of the array's task ids \
                 ({min} to {max} in steps of {step}), as no array task's is ({read})"
            ))
        }
        None => ((id - min) / step, tasks),
    };
    if index >= count {
        return Err(format!(
            "--shard {arg}: SLURM_ARRAY_TASK_ID={id} is past the last of {count} shards"
        ));
    }
    Ok(EnvShard {
        label: format!("{index}/{count}"),
        source: format!("a Slurm job array ({read})"),
    })
}

/// Whether `--array=MIN-MAX:STEP` (MIN, then every STEPth index up to MAX, `tasks` of them)
/// describes the array: then its task ids in order are the shards of one split.
fn regular(tasks: u64, min: u64, max: u64, step: u64) -> bool {
    (tasks - 1)
        .checked_mul(step)
        .and_then(|span| span.checked_add(min))
        == Some(max)
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

    /// The variables Slurm sets for task `id` of `sbatch --array=...` (as dumped from real
    /// array tasks: an irregular list reports step 1).
    fn slurm(
        id: &str,
        count: &str,
        min: &str,
        max: &str,
        step: &str,
    ) -> Vec<(&'static str, String)> {
        [
            ("SLURM_ARRAY_TASK_ID", id),
            ("SLURM_ARRAY_TASK_COUNT", count),
            ("SLURM_ARRAY_TASK_MIN", min),
            ("SLURM_ARRAY_TASK_MAX", max),
            ("SLURM_ARRAY_TASK_STEP", step),
        ]
        .into_iter()
        .map(|(n, v)| (n, v.to_owned()))
        .collect()
    }

    fn slurm_label(arg: &str, vars: &[(&'static str, String)]) -> Result<String, String> {
        let borrowed: Vec<(&str, &str)> = vars.iter().map(|(n, v)| (*n, v.as_str())).collect();
        label(arg, &borrowed)
    }

    #[test]
    fn a_slurm_array_is_one_split_when_its_task_ids_are_regular() {
        // --array=0-3: the task id is the shard.
        assert_eq!(
            slurm_label("env", &slurm("2", "4", "0", "3", "1")).unwrap(),
            "2/4"
        );
        // --array=2-8:2: ids 2, 4, 6, 8 are shards 0 to 3.
        let shards: Vec<String> = ["2", "4", "6", "8"]
            .iter()
            .map(|id| slurm_label("env", &slurm(id, "4", "2", "8", "2")).unwrap())
            .collect();
        assert_eq!(shards, ["0/4", "1/4", "2/4", "3/4"]);
        // With the count given, each task id is its shard, whatever the array: --array=0-3
        // with SHARDS=4 is the same split, and --array=1-4 a re-run of shards 1 to 3 and no
        // shard 4.
        assert_eq!(
            slurm_label("env/4", &slurm("3", "4", "0", "3", "1")).unwrap(),
            "3/4"
        );
        assert_eq!(
            slurm_label("env/4", &slurm("1", "4", "1", "4", "1")).unwrap(),
            "1/4"
        );
        assert_eq!(
            slurm_label("env/4", &slurm("4", "4", "1", "4", "1")).unwrap_err(),
            "--shard env/4: SLURM_ARRAY_TASK_ID=4 is past the last of 4 shards"
        );
        let shard = resolve(
            "env",
            &with(&[
                ("SLURM_ARRAY_TASK_ID", "1"),
                ("SLURM_ARRAY_TASK_COUNT", "2"),
                ("SLURM_ARRAY_TASK_MIN", "0"),
                ("SLURM_ARRAY_TASK_MAX", "1"),
                ("SLURM_ARRAY_TASK_STEP", "1"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            shard.source,
            "a Slurm job array (SLURM_ARRAY_TASK_ID=1, SLURM_ARRAY_TASK_COUNT=2, \
             SLURM_ARRAY_TASK_MIN=0, SLURM_ARRAY_TASK_MAX=1, SLURM_ARRAY_TASK_STEP=1)"
        );
    }

    #[test]
    fn a_slurm_array_that_is_not_one_split_needs_the_count_and_then_its_ids_are_the_shards() {
        // --array=1,3,7: three tasks, but not one split; Slurm says step 1.
        let list = slurm("3", "3", "1", "7", "1");
        assert_eq!(
            slurm_label("env", &list).unwrap_err(),
            "--shard env: the Slurm array's 3 task ids from 1 to 7 are not one split of the \
             seeds (SLURM_ARRAY_TASK_ID=3, SLURM_ARRAY_TASK_COUNT=3, SLURM_ARRAY_TASK_MIN=1, \
             SLURM_ARRAY_TASK_MAX=7, SLURM_ARRAY_TASK_STEP=1); submit it as --array=0-2 (or \
             A-B:S), or give --shard env/N to take each task id as its shard (a re-run of some \
             shards)"
        );
        // A re-run of shards 1, 3 and 7 of an 8-way sweep.
        assert_eq!(slurm_label("env/8", &list).unwrap(), "3/8");
        // A re-run of shard 2 of 4 alone (--array=2): its id is its shard.
        assert_eq!(
            slurm_label("env/4", &slurm("2", "1", "2", "2", "1")).unwrap(),
            "2/4"
        );
        // Without the count, a one-task array is the whole sweep.
        assert_eq!(
            slurm_label("env", &slurm("2", "1", "2", "2", "1")).unwrap(),
            "0/1"
        );
        // An id past the count given is no shard of it.
        assert_eq!(
            slurm_label("env/4", &slurm("7", "3", "1", "7", "1")).unwrap_err(),
            "--shard env/4: SLURM_ARRAY_TASK_ID=7 is past the last of 4 shards"
        );
        // Variables no Slurm array task has: an id outside the array or off its step, no
        // tasks, no step.
        let impossible = |vars: &[(&'static str, String)]| {
            let e = slurm_label("env", vars).unwrap_err();
            assert!(
                e.contains("cannot be the variables of a Slurm array task")
                    || e.contains("is not one of the array's task ids"),
                "{e}"
            );
            e
        };
        assert!(impossible(&slurm("0", "4", "2", "5", "1")).contains("SLURM_ARRAY_TASK_ID=0"));
        assert!(impossible(&slurm("9", "4", "2", "8", "2")).contains("MIN <= ID <= MAX"));
        assert!(impossible(&slurm("3", "4", "2", "8", "2")).contains(
            "SLURM_ARRAY_TASK_ID=3 is not one of the array's task ids (2 to 8 in steps of 2)"
        ));
        assert!(impossible(&slurm("2", "0", "0", "3", "1")).contains("COUNT=0"));
        assert!(impossible(&slurm("2", "4", "2", "8", "0")).contains("STEP=0"));
        assert!(impossible(&slurm("2", "4", "5", "3", "1")).contains("MIN <= ID <= MAX"));
        // A variable Slurm always sets, missing, is named.
        assert_eq!(
            label(
                "env",
                &[
                    ("SLURM_ARRAY_TASK_ID", "0"),
                    ("SLURM_ARRAY_TASK_COUNT", "2")
                ]
            )
            .unwrap_err(),
            "--shard env: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_MIN is not"
        );
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
             JOB_COMPLETION_INDEX, SLURM_ARRAY_TASK_ID is set"
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
