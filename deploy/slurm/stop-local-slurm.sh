#!/usr/bin/env bash
# stop-local-slurm.sh [--keep] DIR: stop the cluster that start-local-slurm.sh DIR started (its jobs, slurmd,
# slurmctld and munged, each by the PID recorded in DIR) and delete DIR, or with --keep leave
# DIR (logs, state, job output) in place.
set -uo pipefail

keep=0
if [ "${1:-}" = --keep ]; then keep=1; shift; fi
[ $# -eq 1 ] || { echo "usage: $0 [--keep] DIR" >&2; exit 2; }
[ -d "$1" ] || { echo "stop-local-slurm: $1: no such folder (already stopped?)" >&2; exit 0; }
DIR=$(cd "$1" && pwd -P)
[ -e "$DIR/.fencesim-slurm" ] || { echo "stop-local-slurm: $DIR was not made by start-local-slurm.sh" >&2; exit 2; }
export SLURM_CONF="$DIR/etc/slurm.conf"

alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
pid_of() { [ -s "$1" ] && cat "$1"; }
# Wait up to $1 tenths of a second for the PIDs that follow to exit.
wait_gone() {
  local n=$1; shift
  while [ "$n" -gt 0 ]; do
    local any=0
    for p in "$@"; do alive "$p" && any=1; done
    [ $any -eq 0 ] && return 0
    sleep 0.1; n=$((n - 1))
  done
  return 1
}

ctld=$(pid_of "$DIR/run/slurmctld.bgpid")
slurmd=$(pid_of "$DIR/run/slurmd.bgpid")

# 1. Cancel every job while slurmd is still there to kill their processes (KillWait=5).
if alive "$ctld" && [ -f "$SLURM_CONF" ]; then
  jobs=$(squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')
  if [ -n "${jobs// }" ]; then
    # shellcheck disable=SC2086  # one argument per job id
    scancel $jobs 2>/dev/null || true
    for _ in $(seq 1 150); do
      [ -z "$(squeue -h -t R,CG,S -o %A 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
fi

# 2. The daemons: SIGTERM, then SIGKILL after 15 s.
for p in $slurmd $ctld; do alive "$p" && kill -TERM "$p"; done
# shellcheck disable=SC2086  # empty when not recorded
wait_gone 150 $slurmd $ctld || { for p in $slurmd $ctld; do alive "$p" && kill -KILL "$p"; done; }

# 3. A job step that outlived slurmd (slurmstepd is not slurmd's child to wait for: it keeps
# running when slurmd dies). Ours are the slurmstepd processes that inherited our SLURM_CONF
# from our slurmd; kill each one's whole process tree.
descendants() {
  local p=$1 c
  for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do descendants "$c"; echo "$c"; done
}
for env in /proc/[0-9]*/environ; do
  pid=${env#/proc/}; pid=${pid%/environ}
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = slurmstepd ] || continue
  tr '\0' '\n' <"$env" 2>/dev/null | grep -qx "SLURM_CONF=$SLURM_CONF" || continue
  # shellcheck disable=SC2046
  kill -KILL $(descendants "$pid") "$pid" 2>/dev/null || true
done

# 4. munged: ask the daemon on our socket to stop; fall back to its PID.
munge_pid=$(pid_of "$DIR/munge/munged.pid")
if alive "$munge_pid"; then
  munged -s -S "$DIR/munge/munge.socket" >/dev/null 2>&1 || kill -TERM "$munge_pid"
  wait_gone 50 "$munge_pid" || kill -KILL "$munge_pid" 2>/dev/null
fi

if [ $keep -eq 1 ]; then
  echo "stop-local-slurm: stopped; $DIR kept" >&2
else
  rm -rf "$DIR"
  echo "stop-local-slurm: stopped and removed $DIR" >&2
fi
