#!/usr/bin/env bash
# A single-node Slurm cluster on loopback, for the test suite: munged, slurmctld and slurmd,
# all started from here with their state, logs and sockets in one folder, on non-default ports.
#
#   tests/slurm/cluster.sh start DIR   start it; prints `export SLURM_CONF=DIR/slurm.conf`
#   tests/slurm/cluster.sh stop DIR    stop what `start` started (by its pid files only)
#
# Needs root and Debian's slurm-wlm and munge (scripts/bootstrap.sh --slurm installs them).
# Exit 77 from `start` means the cluster could not start here (the test then counts as
# skipped); the reason is printed.
set -euo pipefail

action=${1:?usage: cluster.sh start|stop DIR}
dir=${2:?usage: cluster.sh start|stop DIR}
node=memscript-node
skip() {
  printf '\n*** SLURM TEST SKIPPED: %s ***\n\n' "$*" >&2
  [[ -f $dir/slurmctld.log ]] && tail -n 20 "$dir/slurmctld.log" >&2
  [[ -f $dir/slurmd.log ]] && tail -n 20 "$dir/slurmd.log" >&2
  stop_cluster
  exit 77
}

stop_pid_file() {
  local file=$1
  [[ -f $file ]] || return 0
  local pid
  pid=$(cat "$file")
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

stop_cluster() {
  if [[ -f $dir/slurm.conf ]] && command -v scontrol >/dev/null; then
    SLURM_CONF=$dir/slurm.conf timeout 10 scontrol shutdown >/dev/null 2>&1 || true
  fi
  stop_pid_file "$dir/slurmd.pid"
  stop_pid_file "$dir/slurmctld.pid"
  stop_pid_file "$dir/munged.pid"
}

free_port() {  # the first port from $1 up that nothing listens on
  local port=$1
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
  echo "$port"
}

write_config() {
  local ctld_port slurmd_port cpus
  ctld_port=$(free_port 26817)
  slurmd_port=$(free_port $((ctld_port + 1)))
  cpus=$(nproc)
  cat >"$dir/slurm.conf" <<CONF
ClusterName=memscript-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$node NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
}

start_munge() {
  mkdir -p "$dir/munge"
  chmod 700 "$dir/munge"
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/munged.seed" >"$dir/munge/start.log" 2>&1 ||
    skip "munged did not start: $(cat "$dir/munge/start.log")"
  munge --socket="$dir/munge/munge.socket" -n | unmunge --socket="$dir/munge/munge.socket" \
    >/dev/null 2>&1 || skip "munge cannot encode and decode a credential"
}

wait_for_idle_node() {
  for _ in $(seq 60); do
    state=$(sinfo -h -n "$node" -o %T 2>/dev/null || true)
    case $state in
      idle*|mixed*|allocated*) return 0 ;;
      down*|drain*) scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true ;;
    esac
    sleep 0.5
  done
  skip "node $node never became idle (last state: '${state:-none}')"
}

start_cluster() {
  [[ $(id -u) -eq 0 ]] || skip "needs root (slurmd runs jobs as their user; SlurmUser=root)"
  for tool in munged munge slurmctld slurmd sbatch squeue sinfo scontrol; do
    command -v "$tool" >/dev/null || skip "$tool not found (install slurm-wlm and munge: scripts/bootstrap.sh --slurm)"
  done
  stop_cluster
  rm -rf "$dir"
  mkdir -p "$dir/state" "$dir/spool"
  write_config
  export SLURM_CONF=$dir/slurm.conf
  start_munge
  slurmctld -c -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 ||
    skip "slurmctld did not start: $(cat "$dir/slurmctld.out")"
  slurmd -N "$node" -f "$SLURM_CONF" >"$dir/slurmd.out" 2>&1 ||
    skip "slurmd did not start: $(cat "$dir/slurmd.out")"
  wait_for_idle_node
  echo "export SLURM_CONF=$SLURM_CONF"
}

case $action in
  start) start_cluster ;;
  stop) stop_cluster ;;
  *) echo "usage: cluster.sh start|stop DIR" >&2; exit 2 ;;
esac
