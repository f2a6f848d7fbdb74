#!/bin/bash
# Submit a fencesim sweep to Slurm: a job array of SHARDS tasks (fencesim-sweep.sbatch), then
# one merge job (fencesim-merge.sbatch) that starts only when every task succeeded. With
# WAIT=1 it waits for the merge and exits with the sweep's verdict, for a CI step or a script.
#
#   SCENARIO=scenarios/random-nemesis-fenced.toml SEEDS=0..1000000 SHARDS=64 \
#     OUT=/shared/fencesim/run-1 deploy/slurm/submit.sh
#   # later, shards 2 and 5 of that sweep were lost: run them again and merge again
#   SCENARIO=scenarios/random-nemesis-fenced.toml SEEDS=0..1000000 SHARDS=64 ARRAY=2,5 \
#     OUT=/shared/fencesim/run-1 deploy/slurm/submit.sh
#
# Settings (environment):
#   FENCESIM       the fencesim binary; must be reachable at the same path on every node
#                  (default: fencesim on PATH here, made absolute)
#   SCENARIO       scenario file or bundled name (default random-nemesis-fenced); a file is
#                  made absolute, since the jobs may start in another folder
#   SEEDS          A..B, the whole sweep (default 0..400)
#   SHARDS         number of shards N = array tasks 0..N-1 (default 4)
#   OUT            output folder on a file system every node and the merge job see; must not
#                  hold an earlier sweep (default ./fencesim-out-<date>). The shards write
#                  OUT/sweep/<scenario>/ (their summaries explore-summary-shard-I-of-N.json and
#                  the counterexamples' reports, OUT/sweep/<scenario>/<seed>/), the merge
#                  OUT/merged/<scenario>/explore-summary.json, Slurm the jobs' logs OUT/logs/.
#   ARRAY          re-run only these shards (an sbatch --array list: 2,5) of the sweep already
#                  in OUT, with the same SCENARIO, SEEDS and SHARDS, and merge again: for
#                  shards an earlier submission lost (default: all, 0-(SHARDS-1), into an
#                  empty OUT)
#   CPUS_PER_TASK  cores per shard, also explore's --jobs (default 2)
#   MAX_RUNNING    at most this many tasks at once (--array=...%M; default: no limit)
#   TIME_LIMIT     --time for each task (default: the partition's)
#   PARTITION      --partition (default: the cluster's default partition)
#   MERGE_AFTER    afterok (default) or afterany; see below
#   WAIT           1: wait for the merge and exit with its verdict (default 0: submit only)
#   POLL           seconds between looks at the merge job while waiting (default 2)
#
# Why afterok, and what a lost shard looks like: a task exits 0 when its shard ran, even with
# counterexamples (exit 1 is the merge's to report), so afterok holds unless a task really
# failed (bad input, a failed simulation, a crash, a time limit, a lost node). Then the
# dependency can never be met and --kill-on-invalid-dep=yes makes Slurm cancel the merge at
# once instead of leaving it pending forever (Reason=DependencyNeverSatisfied); WAIT=1 lists
# the tasks with their states and exits 2. MERGE_AFTER=afterany runs the merge anyway, as the
# GitHub Actions recipe's `if: ${{ !cancelled() }}` does: it then fails with exit 2 naming the
# missing shard, or 4 when the failed task's summary counts a failed simulation. Either way,
# re-run the lost shards with ARRAY (above) once their cause is fixed.
#
# Exit status: without WAIT, 0 once both jobs are submitted; with WAIT=1, the merge's (0 clean,
# 1 counterexample, 2 lost shard, 4 a simulation failed), or 2 when the merge did not run to
# the end (cancelled, timed out, node lost). 2 also for bad settings, a scenario or range that
# explore refuses, or an OUT that is not empty.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd -P)
die() { echo "submit: $*" >&2; exit 2; }

FENCESIM=${FENCESIM:-$(command -v fencesim || true)}
[ -n "$FENCESIM" ] || die "set FENCESIM to the fencesim binary (none on PATH)"
[ -f "$FENCESIM" ] || die "FENCESIM=$FENCESIM: no such file"
FENCESIM=$(cd "$(dirname "$FENCESIM")" && pwd -P)/$(basename "$FENCESIM")
[ -x "$FENCESIM" ] || die "$FENCESIM is not executable"
SCENARIO=${SCENARIO:-random-nemesis-fenced}
if [ -f "$SCENARIO" ]; then SCENARIO=$(cd "$(dirname "$SCENARIO")" && pwd -P)/$(basename "$SCENARIO"); fi
SEEDS=${SEEDS:-0..400}
SHARDS=${SHARDS:-4}
OUT=${OUT:-$PWD/fencesim-out-$(date +%Y%m%d-%H%M%S)}
CPUS_PER_TASK=${CPUS_PER_TASK:-2}
MERGE_AFTER=${MERGE_AFTER:-afterok}
WAIT=${WAIT:-0}

positive() { case $2 in ''|*[!0-9]*|0|0*) die "$1 must be a positive integer, not \"$2\"" ;; esac; }
positive SHARDS "$SHARDS"
positive CPUS_PER_TASK "$CPUS_PER_TASK"
[ -z "${MAX_RUNNING:-}" ] || positive MAX_RUNNING "$MAX_RUNNING"
case $SEEDS in [0-9]*..[0-9]*) ;; *) die "SEEDS must be A..B, a range of seeds (0..400), not \"$SEEDS\"" ;; esac
case $MERGE_AFTER in afterok|afterany) ;; *) die "MERGE_AFTER must be afterok or afterany" ;; esac
case $WAIT in 0|1) ;; *) die "WAIT must be 0 or 1, not \"$WAIT\"" ;; esac
if [ -n "${ARRAY:-}" ]; then
  case $ARRAY in *[!0-9,:-]*) die "ARRAY must be an sbatch --array list of shards (2,5 or 0-3), without %" ;; esac
  # A re-run writes beside the sweep it completes; fencesim refuses an id past SHARDS.
  [ -f "$OUT/jobs.env" ] || die "ARRAY re-runs shards of an earlier sweep, but $OUT holds none (no jobs.env)"
elif [ -e "$OUT" ] && [ -n "$(ls -A "$OUT")" ]; then
  die "$OUT is not empty: a stale shard summary there could stand in for a lost one"
fi

# Check the scenario and the range here, once, rather than in SHARDS failed tasks, and before
# OUT holds anything (a refused submission leaves nothing to refuse the corrected one): the
# range's first seed alone, as shard 0 of a split so fine that it holds no other seed, so
# that fencesim itself reads the whole range.
check=$(mktemp -d "${TMPDIR:-/tmp}/fencesim-submit-check.XXXXXX")
trap 'rm -rf "$check"' EXIT
"$FENCESIM" explore "$SCENARIO" --seeds "$SEEDS" --shard 0/18446744073709551615 --jobs 1 \
  --keep-going --quiet --out "$check/out" >/dev/null 2>"$check/err" || {
  code=$?; [ $code -le 1 ] || { cat "$check/err" >&2; die "explore refused SCENARIO=$SCENARIO SEEDS=$SEEDS (exit $code)"; }
}

made_out=0
[ -e "$OUT" ] || made_out=1
mkdir -p "$OUT/logs"
OUT=$(cd "$OUT" && pwd -P)
# sbatch refused the submission (a setting the cluster rejects): leave OUT as it was found.
refused() {
  if [ -z "${ARRAY:-}" ]; then
    rm -rf "${OUT:?}/logs"
    [ "$made_out" = 0 ] || rmdir "$OUT" 2>/dev/null || true
  fi
  die "sbatch refused the $1 job (above); nothing was submitted${2:-}"
}

# The jobs read their settings from the environment; --export=ALL hands them over whatever the
# site's default for sbatch --export is.
export FENCESIM SCENARIO SEEDS SHARDS OUT

array="${ARRAY:-0-$((SHARDS - 1))}${MAX_RUNNING:+%$MAX_RUNNING}"
common=(--export=ALL --parsable)
[ -n "${PARTITION:-}" ] && common+=(--partition="$PARTITION")

sweep_opts=("${common[@]}" --array="$array" --cpus-per-task="$CPUS_PER_TASK"
  --output="$OUT/logs/sweep-%A_%a.out")
[ -n "${TIME_LIMIT:-}" ] && sweep_opts+=(--time="$TIME_LIMIT")
sweep=$(sbatch "${sweep_opts[@]}" "$here/fencesim-sweep.sbatch") || refused sweep
sweep=${sweep%%;*}   # --parsable prints JOBID or JOBID;CLUSTER

merge=$(sbatch "${common[@]}" --dependency="$MERGE_AFTER:$sweep" --kill-on-invalid-dep=yes \
  --output="$OUT/logs/merge-%j.out" "$here/fencesim-merge.sbatch") || {
  scancel "$sweep" 2>/dev/null || true
  refused merge " (the sweep job $sweep is cancelled)"
}
merge=${merge%%;*}

echo "submit: sweep array job $sweep (--array=$array of $SHARDS shards), merge job $merge ($MERGE_AFTER); output in $OUT" >&2
printf 'SWEEP_JOB=%q\nMERGE_JOB=%q\nOUT=%q\n' "$sweep" "$merge" "$OUT" >"$OUT/jobs.env"
[ "$WAIT" = 1 ] || exit 0

# --- wait for the merge and report.
# One line per job (per array task) as "ID STATE EXITCODE", from the accounting database when
# the cluster has one, else from slurmctld's memory (which forgets a job MinJobAge seconds, 300
# by default, after it ends).
job_lines() {
  if sacct -n -X -P -j "$1" -o JobID,State,ExitCode 2>/dev/null | tr '|' ' ' | grep .; then return; fi
  scontrol -o show job "$1" 2>/dev/null | sed -E 's/^JobId=([0-9]+) .*ArrayJobId=([0-9]+) ArrayTaskId=([^ ]+).* JobState=([A-Z_]+).* ExitCode=([0-9:]+).*/\2_\3 \4 \5/; s/^JobId=([0-9]+) .* JobState=([A-Z_]+).* ExitCode=([0-9:]+).*/\1 \2 \3/'
}
job_reason() { scontrol -o show job "$1" 2>/dev/null | sed -nE 's/.* Reason=([^ ]+).*/\1/p' | head -n1; }

unknown=0
while :; do
  read -r _ state exitcode < <(job_lines "$merge" | tail -n1) || state=UNKNOWN
  case $state in
    PENDING)
      [ "$(job_reason "$merge")" = DependencyNeverSatisfied ] && break
      # Tasks the cluster can never start (more cores than a node has, a time limit past the
      # partition's) stay pending for ever: give up on them, naming Slurm's reason.
      case $(job_reason "$sweep") in
        PartitionConfig|PartitionNodeLimit|PartitionTimeLimit|BadConstraints|InvalidQOS|InvalidAccount|*MaxCpu*Limit|*MaxNode*Limit)
          never=$(job_reason "$sweep")
          scancel "$sweep" "$merge" 2>/dev/null || true
          die "the sweep's tasks can never start (Slurm's reason: $never): both jobs are cancelled; check CPUS_PER_TASK, TIME_LIMIT and PARTITION against the cluster" ;;
      esac ;;
    RUNNING|CONFIGURING|COMPLETING|REQUEUED|RESIZING|SUSPENDED) ;;
    # slurmctld busy or restarting: look again a few times before giving up on the job.
    UNKNOWN) unknown=$((unknown + 1)); [ $unknown -le 10 ] || break ;;
    *) break ;;
  esac
  sleep "${POLL:-2}"
done

echo "submit: sweep tasks (id state exit:signal):" >&2
job_lines "$sweep" | sed 's/^/  /' >&2
echo "submit: merge $merge: $state ${exitcode:-?} $(job_reason "$merge")" >&2
tail -n 20 "$OUT"/logs/merge-"$merge".out 2>/dev/null | sed 's/^/  | /' >&2 || true

if [ "$state" = COMPLETED ] || [ "$state" = FAILED ]; then
  code=${exitcode%%:*}
  exit "$code"
fi
# Why: the last lines of each task that did not complete.
for log in "$OUT"/logs/sweep-"$sweep"_*.out; do
  [ -f "$log" ] || continue
  task=${log##*_}; task=${task%.out}
  if ! job_lines "$sweep" | grep -q "^${sweep}_${task} COMPLETED "; then
    echo "submit: task $task's log ($log):" >&2
    tail -n 5 "$log" | sed 's/^/  | /' >&2
  fi
done
echo "submit: the merge did not run to the end ($state): a sweep task failed or was lost" >&2
exit 2
