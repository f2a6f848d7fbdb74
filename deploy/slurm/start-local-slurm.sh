#!/usr/bin/env bash
# start-local-slurm.sh DIR: a throwaway one-node Slurm cluster (munged + slurmctld + slurmd)
# that lives entirely in DIR, for trying fencesim's Slurm recipes on a single machine.
#
#   deploy/slurm/start-local-slurm.sh /tmp/slurm-a    # prints the SLURM_CONF to export
#   . /tmp/slurm-a/env.sh                             # or: export SLURM_CONF=/tmp/slurm-a/etc/slurm.conf
#   sbatch ... ; squeue ; sinfo
#   deploy/slurm/stop-local-slurm.sh /tmp/slurm-a     # stops it all and deletes DIR
#
# Nothing outside DIR is written but one lock file (/tmp/.fencesim-slurm-ports.lock) that makes
# concurrent starts in different DIRs pick different ports. Needs root (SlurmUser=root) and
# Debian's slurm-wlm and munge packages; systemd is not used, no /etc or /run file is read
# except the binaries' own plugins. Exits 0 once the node is idle, 1 (having stopped what it
# started, DIR kept for its logs) otherwise.
#
# Environment knobs (all optional):
#   SLURM_START_TIMEOUT  seconds to wait for the node to become idle (default 60)
#   SLURM_CLUSTER_NAME   cluster name (default: fs<pid>, unique per start)
#   SLURM_NODE_CPUS      CPUs to give the node (default: what `slurmd -C` finds)
set -euo pipefail

die() { echo "start-local-slurm: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 DIR"
command -v munged >/dev/null || die "munged not found: apt-get install -y munge"
command -v slurmctld >/dev/null || die "slurmctld not found: apt-get install -y slurm-wlm"
[ "$(id -u)" -eq 0 ] || die "run as root (the config sets SlurmUser=root and SlurmdUser=root)"

mkdir -p "$1"
DIR=$(cd "$1" && pwd -P)
MARK="$DIR/.fencesim-slurm"

# Refuse a DIR that holds something else, or a cluster of ours that is still running.
if [ -e "$MARK" ]; then
  for f in "$DIR"/run/*.pid "$DIR"/munge/munged.pid; do
    [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && die "$DIR: a cluster is still running (stop-local-slurm.sh $DIR)"
  done
  # A stopped cluster of ours: start afresh (its state and logs go).
  find "$DIR" -mindepth 1 -delete
elif [ -n "$(ls -A "$DIR")" ]; then
  die "$DIR is not empty and was not made by start-local-slurm.sh"
fi
touch "$MARK"

# munged insists that every user can traverse the socket's directory, and that the key is
# readable by its owner only; mktemp -d makes 0700 folders, so open DIR up.
chmod 755 "$DIR"
mkdir -p "$DIR"/{etc,munge,state,spool,log,run}
chmod 755 "$DIR/munge"
chmod 700 "$DIR/state" "$DIR/spool"

CONF="$DIR/etc/slurm.conf"
SOCK="$DIR/munge/munge.socket"
NODE=$(hostname -s)

# munged's socket and the socket slurmd makes for each job step (SPOOL/NODE_JOBID.STEPID) are
# Unix sockets, whose path the kernel limits to 107 bytes: a DIR deep in a long path fails
# later, and obscurely (a job step that cannot start). Refuse it here, by name.
for sock in "$SOCK" "$DIR/spool/${NODE}_4294967294.4294967294"; do
  [ "${#sock}" -le 107 ] || die "$DIR is too long a path for a Unix socket in it ($sock: ${#sock} bytes, at most 107); use a shorter DIR"
done
CLUSTER=${SLURM_CLUSTER_NAME:-fs$$}
TIMEOUT=${SLURM_START_TIMEOUT:-60}

# The node's hardware line as slurmd sees it, so slurmd does not complain of a mismatch.
# (`slurmd -C` prints NodeName=... CPUs=... Boards=... SocketsPerBoard=... CoresPerSocket=...
# ThreadsPerCore=... RealMemory=...)
HW=$(slurmd -C | head -n1 | sed 's/^NodeName=[^ ]* //')
if [ -n "${SLURM_NODE_CPUS:-}" ]; then
  HW="CPUs=$SLURM_NODE_CPUS"
fi

is_listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
pick_port() {
  # Below the kernel's ephemeral range (32768+ here), so an outgoing connection cannot hold
  # it between the check and slurmctld's bind; skip ports already taken or already chosen.
  local p
  for _ in $(seq 1 200); do
    p=$(( 20000 + RANDOM % 12000 ))
    case " ${CHOSEN:-} " in *" $p "*) continue ;; esac
    is_listening "$p" && continue
    echo "$p"
    return 0
  done
  die "no free port found"
}

# Hold a lock from choosing the ports until the daemons listen on them, so two concurrent
# starts cannot pick the same port.
exec 9>/tmp/.fencesim-slurm-ports.lock
flock -w 120 9 || die "could not take /tmp/.fencesim-slurm-ports.lock"

CTLD_PORT=$(pick_port); CHOSEN="$CTLD_PORT"
SLURMD_PORT=$(pick_port)

cleanup_on_failure() {
  echo "start-local-slurm: failed; last lines of the logs:" >&2
  tail -n 15 "$DIR"/log/*.out "$DIR"/munge/munged.log >&2 2>/dev/null || true
  "$(dirname "$0")/stop-local-slurm.sh" --keep "$DIR" >/dev/null 2>&1 || true
}
trap 'cleanup_on_failure' ERR

T0=$(date +%s.%N)

# --- munge: its own key, socket, pid, log and seed file, all in DIR/munge.
mungekey --create --keyfile="$DIR/munge/munge.key" --bits=1024
chmod 600 "$DIR/munge/munge.key"
# --force: munged refuses a key, log or seed file under any group- or world-writable folder
# without the sticky bit, all the way up to /; a DIR inside such a folder (a CI checkout made
# with umask 002) would then fail to start. These files are this throwaway cluster's own.
munged --key-file="$DIR/munge/munge.key" --socket="$SOCK" \
  --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" \
  --seed-file="$DIR/munge/munged.seed" --force 9>&-
# munged forks and returns once its socket exists; check it answers.
munge -n -S "$SOCK" | unmunge -S "$SOCK" >/dev/null

# --- slurm.conf. Every path is in DIR; AuthInfo=socket= points auth/munge and cred/munge
# (daemons and the sbatch/squeue/sinfo clients, which read the same file through SLURM_CONF)
# at our munged instead of /run/munge.
cat >"$CONF" <<EOF
# Generated by start-local-slurm.sh for a one-node throwaway cluster in $DIR.
ClusterName=$CLUSTER
# slurmctld only runs where SlurmctldHost names this host; the address in () is where the
# clients and slurmd reach it.
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
# An empty plugstack, so /etc/slurm/plugstack.conf(.d) is not read.
PlugStackConfig=$DIR/etc/plugstack.conf
# No cgroups in this container: track processes through /proc, bind no tasks.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
# A node that comes back registers as idle, not down.
ReturnToService=2
# scancel: SIGKILL 5 s after SIGTERM (default 30), so stop-local-slurm.sh is quick.
KillWait=5
# Finished jobs stay visible to scontrol/squeue for 10 minutes (there is no accounting
# database, so this is the only place a job's exit code can be read back).
MinJobAge=600
# Start a queued batch job as soon as resources free up: the default batch_sched_delay of 3 s
# made every wave of a 4-task array wait 3 s on this one node.
SchedulerParameters=batch_sched_delay=0
NodeName=$NODE NodeAddr=127.0.0.1 $HW State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
: >"$DIR/etc/plugstack.conf"

cat >"$DIR/env.sh" <<EOF
export SLURM_CONF=$CONF
EOF
export SLURM_CONF="$CONF"

# --- the daemons, in the foreground (-D) of their own sessions, so we know their PIDs and
# they outlive this script; their stderr goes to DIR/log/*.out.
setsid slurmctld -D -f "$CONF" </dev/null >"$DIR/log/slurmctld.out" 2>&1 9>&- &
echo $! >"$DIR/run/slurmctld.bgpid"
setsid slurmd -D -f "$CONF" -N "$NODE" </dev/null >"$DIR/log/slurmd.out" 2>&1 9>&- &
echo $! >"$DIR/run/slurmd.bgpid"

deadline=$(( $(date +%s) + TIMEOUT ))
state=
while :; do
  state=$(sinfo -h -N -n "$NODE" -o %T 2>/dev/null || true)
  [ "$state" = idle ] && break
  for d in slurmctld slurmd; do
    kill -0 "$(cat "$DIR/run/$d.bgpid")" 2>/dev/null || { echo "start-local-slurm: $d exited" >&2; false; }
  done
  [ "$(date +%s)" -lt "$deadline" ] || { echo "start-local-slurm: node is '$state' after ${TIMEOUT}s" >&2; false; }
  sleep 0.1
done
trap - ERR
flock -u 9

T1=$(date +%s.%N)
echo "slurm up in $(awk "BEGIN{printf \"%.2f\", $T1 - $T0}")s: cluster $CLUSTER, node $NODE ($HW), slurmctld :$CTLD_PORT, slurmd :$SLURMD_PORT" >&2
echo "export SLURM_CONF=$CONF"
