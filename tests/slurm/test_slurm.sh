#!/usr/bin/env bash
# The real Slurm test: starts a single-node cluster on loopback (cluster.sh), submits a 4-task
# job array of a tiny sweep with `memscript slurm --submit` in which one mixer's runs fail,
# waits, checks that the merged report names the failed array tasks with the sbatch command
# that reruns only them, runs that command, and checks that the report then holds every run
# exactly once, all completed. Exit 77 (counted as skipped by ctest) when the
# cluster cannot start here, with the reason printed loudly; never a pass without a cluster.
#
#   tests/slurm/test_slurm.sh MEMSCRIPT_BINARY WORK_FOLDER
set -euo pipefail

memscript=$(realpath "$1")
work=$(realpath -m "$2")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sweep_script=$here/../scripts/tiny_sweep.lua
cluster=$work/cluster
timeout_seconds=${MEMSCRIPT_SLURM_TIMEOUT:-180}

fail() {
  echo "FAIL: $*" >&2
  for log in "$work"/runs/slurm/logs/*.out; do
    [[ -f $log ]] && { echo "--- $log" >&2; tail -n 30 "$log" >&2; }
  done
  [[ -f $cluster/slurmctld.log ]] && { echo "--- slurmctld.log" >&2; tail -n 30 "$cluster/slurmctld.log" >&2; }
  exit 1
}

rm -rf "$work"
mkdir -p "$work"
trap '"$here/cluster.sh" stop "$cluster"' EXIT
set +e
exports=$("$here/cluster.sh" start "$cluster")
status=$?
set -e
[[ $status -eq 77 ]] && exit 77
[[ $status -eq 0 ]] || fail "cluster.sh start exited with $status"
eval "$exports"
echo "cluster up: $(sinfo -h -o '%P %D %T')"

cd "$work"
wait_for() {  # job id
  local job=$1 waited=0
  while [[ -n $(squeue -h -j "$job" 2>/dev/null) ]]; do
    ((waited < timeout_seconds)) || { scancel "$job" || true; fail "job $job still queued or running after ${timeout_seconds}s"; }
    sleep 1
    waited=$((waited + 1))
  done
  echo "job $job finished after ${waited}s"
}
job_of() { sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' <<<"$1"; }

# 3 mixers x 2 seeds = 6 runs over 4 array tasks (2, 2, 1, 1 runs). The mingru runs (the 5th
# and 6th, so shards 0 and 1) fail while the flag file exists.
touch "$work/fail.flag"
submitted=$("$memscript" slurm "$sweep_script" --out runs --tasks 4 --time 00:05:00 \
  --cpus-per-task 1 --set mixers=3 --set fail_mixer=mingru \
  --set fail_flag="$work/fail.flag" --submit) || fail "memscript slurm --submit failed"
echo "$submitted"
job=$(job_of "$submitted")
[[ -n $job ]] || fail "no job id in the output of sbatch"
wait_for "$job"
logs=$(ls runs/slurm/logs/ | wc -l)
((logs == 4)) || fail "expected 4 array task logs, found $logs"
for shard in 0 1 2 3; do
  grep -q "shard $shard/4" runs/slurm/logs/*_"$shard".out || fail "array task $shard did not run shard $shard/4"
done

report=runs/tiny/report/report.md
[[ ! -e $report ]] || fail "an array task wrote a report while runs were missing"
"$memscript" --out runs -e 'ms.report{ runs = "tiny" }' || fail "ms.report failed"
grep -q '^6 runs: 4 completed, 2 not completed' "$report" || fail "report after failures: $(head -3 "$report")"
rerun=$(grep -o 'sbatch --array=[0-9,]* .*\.sbatch' "$report" || true)
[[ $rerun == "sbatch --array=0,1 $work/runs/slurm/tiny_sweep.sbatch" ]] ||
  fail "expected the report to say: sbatch --array=0,1 ...; it says '$rerun'"
echo "report lists the failed tasks: $rerun"

rm "$work/fail.flag"
resubmitted=$($rerun) || fail "$rerun failed"
wait_for "$(job_of "$resubmitted")"
# The array task that completed the last run wrote the merged report by itself.
grep -q '^6 runs: 6 completed, 0 not completed' "$report" || fail "report after rerun: $(head -3 "$report")"
for mixer in lstm qlstm mingru; do
  for seed in 1 2; do
    name="mixer=$mixer,seed=$seed"
    count=$(grep -c "^| $name |" "$report" || true)
    ((count == 1)) || fail "run $name appears $count times in the report"
  done
done
echo "PASS: a 4-task array ran 6 runs; the 2 failed tasks were resubmitted alone; the merged report lists each run exactly once"
