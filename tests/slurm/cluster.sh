#!/usr/bin/env bash
# A throwaway single-node SLURM cluster with fake GPUs, for tests/slurm.
#
#   tests/slurm/cluster.sh start    bring up munged (unless one already answers),
#                                   slurmctld and slurmd; wait until the node is idle
#   tests/slurm/cluster.sh stop     cancel its jobs, kill exactly the daemons `start`
#                                   started (newest first) and wait until they are gone
#   tests/slurm/cluster.sh status   the recorded daemons and `sinfo`
#
# Needs root and Debian's `slurm-wlm munge` (Slurm 22.05); no systemd. It writes
# /etc/slurm/slurm.conf and gres.conf (marked as its own; it refuses to overwrite
# others, and `stop` removes them): the configuration must be at the default path,
# because the plugin's job step drops SLURM_CONF from the environment of the `srun`
# inside each job. State, spool, logs and the PID list live in $PFL_SLURM_DIR
# (default /tmp/pflrepro-slurm). $PFL_SLURM_GPUS fake GPUs (1-4, default 2). Ports:
# $PFL_SLURM_PORT (slurmctld, default 6817) and
# the next one (slurmd). Finished jobs are recorded in $PFL_SLURM_DIR/log/jobcomp.txt
# (`sacct --completion`). `start` is idempotent: it returns at once when its daemons
# are already running. Recipe and pitfalls: ../shared/notes/slurm-ci.md.
set -euo pipefail

DIR=${PFL_SLURM_DIR:-/tmp/pflrepro-slurm}
PORT=${PFL_SLURM_PORT:-6817}
ETC=/etc/slurm
CONF=$ETC/slurm.conf
MARK="# Written by tests/slurm/cluster.sh"
PIDS=$DIR/pids          # one "name pid" line per daemon this script started, oldest first
HOST=$(hostname -s)
GPUS=${PFL_SLURM_GPUS:-2}
# One existing character device per fake GPU (slurmd only checks that the file is a
# device; the jobs never open it). Distinct devices, so that slurmd counts them apart.
FAKE_DEVICES=(/dev/null /dev/zero /dev/full /dev/urandom)
unset SLURM_CONF  # clients read /etc/slurm/slurm.conf

log() { echo "cluster.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

alive() {  # alive NAME PID: the process exists and is still the daemon we started
  [ -r "/proc/$2/comm" ] && [ "$(cat "/proc/$2/comm" 2>/dev/null)" = "$1" ]
}

recorded_alive() {  # every recorded daemon is running (and at least one is recorded)
  [ -s "$PIDS" ] || return 1
  local name pid
  while read -r name pid; do alive "$name" "$pid" || return 1; done < "$PIDS"
}

node_state() { sinfo -h -N -o %T 2>/dev/null | head -n1; }

wait_idle() {
  local i state
  for i in $(seq 1 60); do
    state=$(node_state || true)
    case "$state" in
      idle*|mixed*|allocated*) return 0 ;;
      drain*|inval*|down*) scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true ;;
    esac
    sleep 1
  done
  die "node not idle after 60 s (state: '${state:-none}'); see $DIR/log/"
}

write_conf() {
  local cpus mem
  cpus=$(nproc)
  case "$GPUS" in 1|2|3|4) ;; *) die "PFL_SLURM_GPUS=$GPUS: expected 1 to 4" ;; esac
  mem=$(awk '/^MemTotal:/ {printf "%d", $2 / 1024 * 0.85}' /proc/meminfo)
  mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log" "$ETC"
  local f
  for f in "$CONF" "$ETC/gres.conf"; do
    if [ -e "$f" ] && ! head -n1 "$f" | grep -qF "$MARK"; then
      die "$f exists and is not ours: refusing to overwrite it"
    fi
  done
  cat > "$CONF" <<EOF
$MARK: a single-node test cluster, $GPUS fake GPU(s).
ClusterName=pflrepro
SlurmctldHost=localhost
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
MpiDefault=none
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# SLURM's record of every finished job (partition, account, state, ...), one line each,
# which sacct --completion reads without an accounting database.
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
# No accounting database: plain sacct cannot answer, so clients must use squeue for job
# status, and finished jobs must stay visible to squeue/scontrol long enough.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=3600
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
ReturnToService=2
GresTypes=gpu
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Gres=gpu:fake:$GPUS State=UNKNOWN
# Two partitions on the one node: a job lands in debug only when it asks for it.
PartitionName=main Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
PartitionName=debug Nodes=$HOST Default=NO MaxTime=INFINITE State=UP
EOF
  # A File= per GPU: without a device file the node goes INVAL (gres count too low).
  {
    echo "$MARK"
    echo "AutoDetect=off"
    local i
    for i in $(seq 0 $((GPUS - 1))); do
      echo "NodeName=$HOST Name=gpu Type=fake File=${FAKE_DEVICES[$i]}"
    done
  } > "$ETC/gres.conf"
}

spawn() {  # spawn NAME COMMAND...: start a foreground daemon detached, record its PID
  local name=$1; shift
  setsid "$@" > "$DIR/log/$name.out" 2>&1 < /dev/null 9>&- &
  local pid=$!
  echo "$name $pid" >> "$PIDS"
  # setsid execs the daemon, so $! is the daemon itself once exec has happened
  local i
  for i in $(seq 1 50); do
    alive "$name" "$pid" && return 0
    kill -0 "$pid" 2>/dev/null || die "$name exited at once; see $DIR/log/$name.out"
    sleep 0.1
  done
  die "$name (pid $pid) did not start"
}

munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

port_busy() { ss -ltnH "sport = :$1" 2>/dev/null | grep -q .; }

start() {
  [ "$(id -u)" -eq 0 ] || die "must run as root (the daemons and jobs run as root)"
  local tool
  for tool in munged munge slurmctld slurmd sinfo sbatch setsid setpriv; do
    command -v "$tool" >/dev/null || die "$tool not found: apt-get install slurm-wlm munge"
  done
  mkdir -p "$DIR"
  if recorded_alive; then
    wait_idle
    log "already running ($(tr '\n' ' ' < "$PIDS"))"
    return 0
  fi
  [ -s "$PIDS" ] && { log "some recorded daemons are gone: restarting"; stop_daemons; }
  rm -f "$PIDS"
  for tool in "$PORT" "$((PORT + 1))"; do
    port_busy "$tool" && die "port $tool is in use (another slurmctld/slurmd?); set PFL_SLURM_PORT"
  done
  write_conf

  if munge_ok; then
    log "munged already running: using it (not recorded, not stopped)"
  else
    local key=/etc/munge/munge.key
    [ -s "$key" ] || mungekey --create --keyfile="$key"
    chown munge:munge "$key" && chmod 400 "$key"
    install -d -o munge -g munge -m 755 /run/munge
    spawn munged setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged -F
    local i
    for i in $(seq 1 50); do munge_ok && break; sleep 0.1; done
    munge_ok || die "munge does not answer; see $DIR/log/munged.out"
  fi

  # -c: start without the state of an earlier run (no stale jobs); job ids start over,
  # so the completion records start over too
  rm -f "$DIR/log/jobcomp.txt"
  spawn slurmctld slurmctld -D -c
  for tool in $(seq 1 100); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.1; done
  spawn slurmd slurmd -D
  wait_idle
  log "up: $(tr '\n' ' ' < "$PIDS")"
}

stop_daemons() {  # kill the recorded daemons, newest first; wait until each is gone
  [ -f "$PIDS" ] || return 0
  local name pid i failed=0
  while read -r name pid; do
    alive "$name" "$pid" || continue
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 100); do alive "$name" "$pid" || break; sleep 0.1; done
    if alive "$name" "$pid"; then
      log "$name ($pid) ignored SIGTERM for 10 s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for i in $(seq 1 50); do alive "$name" "$pid" || break; sleep 0.1; done
    fi
    alive "$name" "$pid" && { log "$name ($pid) is still running"; failed=1; }
  done < <(tac "$PIDS")
  [ "$failed" -eq 0 ] || return 1
  rm -f "$PIDS"
}

stop() {
  if [ -s "$PIDS" ] && scontrol ping 2>/dev/null | grep -q UP; then
    # cancel this cluster's jobs first, so no job step outlives its slurmd
    local jobs i
    jobs=$(squeue -h -t PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED -o %i 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null || true
      for i in $(seq 1 30); do
        [ -z "$(squeue -h -t PENDING,RUNNING,CONFIGURING,COMPLETING -o %i 2>/dev/null)" ] && break
        sleep 1
      done
    fi
  fi
  stop_daemons
  local f
  for f in "$CONF" "$ETC/gres.conf"; do
    if [ -e "$f" ] && head -n1 "$f" | grep -qF "$MARK"; then rm -f "$f"; fi
  done
  log "stopped"
}

status() {
  if [ -s "$PIDS" ]; then
    local name pid
    while read -r name pid; do
      if alive "$name" "$pid"; then echo "$name $pid running"; else echo "$name $pid gone"; fi
    done < "$PIDS"
    sinfo -N -o "%N %T %G" 2>/dev/null || true
  else
    echo "not started"
  fi
}

cmd=${1:-}
case "$cmd" in
  start|stop|status)
    mkdir -p "$DIR"
    exec 9> "$DIR/lock"
    flock -w 120 9 || die "another cluster.sh holds $DIR/lock"
    "$cmd" ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
