#!/usr/bin/env bash
# test_local_slurm.sh TRAINER REPO_ROOT: the cluster path under a real Slurm.
#
# Starts a one-node Slurm of its own (munged, slurmctld, slurmd; every file in
# a temporary directory, ports that were free, this host's name and cores),
# then, with CPU ranks:
#   1. submits launch/slurm/slurm_ddp_train.sbatch twice (sbatch --wait, 2 tasks,
#      srun --mpi=pmix): slot 1 stops at --stop-after-steps with a
#      checkpoint, slot 2 resumes from it and finishes, and the run directory
#      gets DONE; a third submission sees DONE and does nothing;
#   2. runs launch/scaling_sweep.py --slurm --ranks 1,2 through the same Slurm
#      and checks its sweep.csv has both rows.
# The daemons it started are stopped by their pids on every exit (trap).
# Exit 0: passed; 77: skipped (no Slurm/munge, not root, or they would not
# start; one line says why); anything else: failed.
set -uo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 TRAINER REPO_ROOT" >&2
  exit 2
fi
trainer=$(realpath -e "$1" 2>/dev/null) || { echo "FAIL: trainer $1 does not exist" >&2; exit 1; }
repo=$(realpath -e "$2" 2>/dev/null) || { echo "FAIL: repository root $2 does not exist" >&2; exit 1; }
here=$(dirname "$(realpath "$0")")

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; show_logs; exit 1; }

[[ $(id -u) -eq 0 ]] || skip "needs root (the daemons run as root here; a cluster has a slurm user)"
for cmd in munged slurmctld slurmd sbatch srun sinfo squeue scancel; do
  command -v "$cmd" >/dev/null || skip "$cmd not found (launch/install_test_deps.sh installs slurm-wlm and munge)"
done
# An allocation we may be running in must not leak into our jobs.
for v in $(compgen -e | grep '^SLURM_'); do unset "$v"; done

dir=$(mktemp -d /tmp/ddp-slurm-test.XXXXXX)
chmod 755 "$dir"   # munged wants its socket's directories searchable by all (the key stays 0400)
mkdir -p "$dir"/{munge,state,spool,log,tmp}
pids=()   # daemons we started, stopped in reverse order
# Jobs inherit it (sbatch exports our environment): Open MPI's session
# directory and the like stay apart from another copy of this test.
export TMPDIR=$dir/tmp

show_logs() {
  for f in "$dir"/log/*.log "$dir"/munge/munged.log; do
    [[ -s $f ]] || continue
    echo "--- last lines of $(basename "$f"):" >&2
    tail -n 15 "$f" >&2
  done
}

our_stepds() {
  local p
  for p in $(pgrep -x slurmstepd); do
    { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=$dir/slurm.conf" && echo "$p"
  done
}

cleanup() {
  local rc=$?
  if [[ -f $dir/slurm.conf ]] && [[ ${#pids[@]} -ge 2 ]]; then
    # Jobs left behind by a failure: their slurmstepd must not outlive slurmd.
    local jobs
    jobs=$(squeue -h -o %i 2>/dev/null | tr '\n' ' ')
    if [[ -n ${jobs// /} ]]; then
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null
      for _ in $(seq 20); do [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break; sleep 0.5; done
    fi
  fi
  # A job's slurmstepd outlives it by a moment and is not our child: ours
  # inherited our slurmd's SLURM_CONF (another Slurm's do not). Give them 10 s.
  local stepds="" p
  for _ in $(seq 20); do
    stepds=$(our_stepds)
    [[ -z $stepds ]] && break
    sleep 0.5
  done
  for p in $stepds; do kill -KILL "$p" 2>/dev/null; done
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    local pid=${pids[i]}
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  if [[ $rc -eq 0 || $rc -eq 77 ]]; then rm -rf "$dir"; else echo "(files kept in $dir)" >&2; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  # The kernel's choice of a free port (closed again at once: a small race,
  # but no fixed port that another Slurm or test may hold).
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# --- munge: a key and a daemon of our own --------------------------------------
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
munged --foreground --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" \
  >"$dir/munge/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [[ -S $dir/munge/munge.socket ]] && break; sleep 0.1; done
[[ -S $dir/munge/munge.socket ]] || skip "munged would not start: $(tail -n 1 "$dir/munge/munged.out" "$dir/munge/munged.log" 2>/dev/null | grep -v '^==>' | grep . | tail -n 1)"

# --- slurm.conf from the template ----------------------------------------------
host=$(hostname -s)
cpus=$(nproc)
[[ $cpus -ge 2 ]] || skip "this host has $cpus CPU; the 2-task jobs need 2 (they would wait forever)"
avail_mb=$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo)
memory_mb=$((avail_mb / 2 > 1024 ? 1024 : avail_mb / 2))   # below free memory: slurmd drains a node that has less
ctld_port=$(free_port)
slurmd_port=$(free_port)
while [[ $slurmd_port == "$ctld_port" ]]; do slurmd_port=$(free_port); done
sed -e "s|@DIR@|$dir|g" -e "s|@HOST@|$host|g" -e "s|@CPUS@|$cpus|g" -e "s|@MEMORY_MB@|$memory_mb|g" \
    -e "s|@FIRST_JOB_ID@|$((1000 + RANDOM * 16))|g" -e "s|@CTLD_PORT@|$ctld_port|g" -e "s|@SLURMD_PORT@|$slurmd_port|g" -e "s|@MPI_DEFAULT@|pmix|g" \
    "$here/slurm.conf.in" >"$dir/slurm.conf"
export SLURM_CONF=$dir/slurm.conf
# --mpi=list reads slurm.conf (no daemon needed); the example launches with --mpi=pmix.
srun --mpi=list 2>&1 | grep -qw pmix ||
  skip "this Slurm lists no pmix in srun --mpi=list, which the example's srun --mpi=pmix needs"

# --- slurmctld and slurmd ------------------------------------------------------
slurmctld -D -i -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$host" >"$dir/log/slurmd.out" 2>&1 &
pids+=($!)
state=""
for _ in $(seq 60); do
  state=$(sinfo -h -n "$host" -o %T 2>/dev/null | head -n 1)
  [[ $state == idle ]] && break
  for pid in "${pids[@]}"; do
    kill -0 "$pid" 2>/dev/null || { show_logs; skip "a Slurm daemon (pid $pid) exited at start-up (logs above)"; }
  done
  sleep 0.5
done
[[ $state == idle ]] || { show_logs; skip "the node did not come up idle in 30 s (state '${state:-none}')"; }
echo "local Slurm up: node $host, $cpus CPUs, ${memory_mb} MB, ports $ctld_port/$slurmd_port, in $dir"

# --- 1. the sbatch example, two slots and a third that finds DONE ---------------
run_dir=$dir/run
slot_env=(DDP_ROOT="$repo" TRAIN="$trainer" RUN_DIR="$run_dir" DEVICE=cpu DATA=synthetic GLOBAL_BATCH=64
          TOTAL_STEPS=40 STEPS_PER_SLOT=25 CHECKPOINT_EVERY=10 LOG_EVERY=5 THREADS=1 SRUN_ARGS=)
# (SRUN_ARGS empty: task/none cannot bind, and srun would say so for --cpu-bind=cores.)
# The command line overrides the example's 2x8-GPU #SBATCH lines; --gpus-per-node=0
# drops its GPU request (this node has no GRES).
slot_opts=(--wait --parsable --nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0
           --time=5 --chdir="$dir")

submit_slot() {  # submit_slot N: one slot; its log in $dir/slot-N.out
  local n=$1 out=$dir/slot-$1.out
  local t0=$SECONDS
  local rc=0
  # timeout: a job that cannot start (pending for ever) fails in 3 minutes, not at CTest's limit.
  timeout 180 env "${slot_env[@]}" sbatch "${slot_opts[@]}" --output="$out" "$repo/launch/slurm/slurm_ddp_train.sbatch" \
    >"$dir/sbatch-$n.out" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]]; then
    # The trainer's own error line, else the log's end (srun's messages come last).
    local why
    why=$(grep -m 3 -E 'ddp_train: error|ddp_train: TRAIN' "$out" 2>/dev/null | tr '\n' ' ')
    [[ -n $why ]] || why=$(tail -n 5 "$out" 2>/dev/null | tr '\n' ' ')
    [[ $rc -ne 124 ]] || why="timed out after 180 s; squeue: $(squeue -h -o '%i %T %r' | tr '\n' ' ') $why"
    fail "slot $n: sbatch --wait exited $rc (sbatch said: $(tr '\n' ' ' <"$dir/sbatch-$n.out")); job log: $why"
  fi
  echo "slot $n: job $(head -n 1 "$dir/sbatch-$n.out") done in $((SECONDS - t0)) s"
}
expect_line() {  # expect_line FILE REGEX WHAT
  grep -Eq -- "$2" "$1" || { echo "--- $1:" >&2; cat "$1" >&2; fail "$3: no line matching /$2/ in $(basename "$1")"; }
}
summary_field() {  # summary_field METRICS FIELD: the last summary record's numeric FIELD
  grep '"event":"summary"' "$1" | tail -n 1 | grep -o "\"$2\":[0-9]*" | cut -d: -f2
}

submit_slot 1
expect_line "$dir/slot-1.out" 'world 2 \(MPI\)' "slot 1 ran 2 ranks as one MPI world (srun --mpi=pmix)"
expect_line "$dir/slot-1.out" 'stopping after 25 steps \(--stop-after-steps\) at step 25 of 40' "slot 1 stopped at 25"
expect_line "$dir/slot-1.out" 'at step 25 of 40; submit again' "slot 1 left the run unfinished"
ls "$run_dir"/checkpoints/*step000000000025* >/dev/null 2>&1 || fail "slot 1 wrote no checkpoint at step 25"
[[ ! -e $run_dir/DONE ]] || fail "slot 1 marked the run DONE at step 25 of 40"

submit_slot 2
expect_line "$dir/slot-2.out" 'resumed from .*step000000000025[^ ]* at step 25' "slot 2 resumed from slot 1's checkpoint"
job2=$(head -n 1 "$dir/sbatch-2.out")
reached=$(summary_field "$run_dir/metrics-$job2.jsonl" steps)
[[ $reached == 40 ]] || fail "slot 2's summary reached step '${reached:-none}', not 40"
world=$(summary_field "$run_dir/metrics-$job2.jsonl" world_size)
[[ $world == 2 ]] || fail "slot 2's summary has world size '${world:-none}', not 2"
[[ -e $run_dir/DONE ]] || fail "slot 2 reached step 40 but the run directory has no DONE"
expect_line "$dir/slot-2.out" 'reached step 40 of 40; run complete' "slot 2 reported the run complete"

submit_slot 3
expect_line "$dir/slot-3.out" 'already reached 40 steps; nothing to do' "slot 3 saw DONE"
! grep -q 'resumed from' "$dir/slot-3.out" || fail "slot 3 trained again after DONE"

# --- 2. the sweep through the same Slurm ----------------------------------------
sweep_dir=$dir/sweep
t0=$SECONDS
python3 "$repo/launch/scaling_sweep.py" --slurm --slurm-args "--cpus-per-task=1 --time=5" --ranks 1,2 --steps 20 --bind-to default --timeout 180 \
  --device cpu --data synthetic --global-batch 64 --trainer "$trainer" --out-dir "$sweep_dir" -- --threads 1 \
  >"$dir/sweep.out" 2>&1 || { cat "$dir/sweep.out" >&2; fail "scaling_sweep.py --slurm exited non-zero"; }
echo "sweep: done in $((SECONDS - t0)) s"
csv=$sweep_dir/sweep.csv
[[ -s $csv ]] || { cat "$dir/sweep.out" >&2; fail "the sweep wrote no $csv"; }
# Columns: mode,ranks,batch_per_rank,global_batch,steps,samples_per_s,...
rows=$(awk -F, 'NR > 1 && $5 == 20 && $6 > 0 { print $2 }' "$csv" | sort -n | tr '\n' ' ')
[[ $rows == "1 2 " ]] || { cat "$csv" >&2; fail "sweep.csv has rows for ranks '${rows}', not '1 2 ' (20 steps, samples/s > 0)"; }
for n in 1 2; do
  w=$(summary_field "$sweep_dir/metrics-strong-n$n.jsonl" world_size)
  [[ $w == "$n" ]] || fail "the sweep's N=$n run had world size '${w:-none}'"
done

sed -n '/^| mode/,/^$/p' "$dir/sweep.out"   # the sweep's table, for the test log
grep '^plots' "$dir/sweep.out"
echo "PASS: two slots (stop at 25, resume to 40, DONE, third slot idle) and a 1,2-rank sweep under Slurm"
