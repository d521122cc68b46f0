# zero.sh: careless-user cases of --zero: stages that do not exist, every
# stage with the other flags (accumulation, clipping, pre-division, AdamW,
# evaluation, inference, generation, benchmarks, traces, samples, injected
# overflows, resumes across stages and world sizes), a rank killed mid-run
# and SIGTERM to mpirun.

zero() {
  gpt_fixtures
  local Z="$S --steps 6" pid rank
  [[ -e x.npy ]] || npy x.npy float32 10 4
  case_refused "--zero 4" "--zero" -- "$BIN" $Z --zero 4
  case_refused "--zero -1" "--zero" -- "$BIN" $Z --zero -1
  case_refused "--zero 1.5" "--zero" -- "$BIN" $Z --zero 1.5
  case_refused "--zero 3 --cuda-graph" "--cuda-graph" -- "$BIN" $Z --zero 3 --cuda-graph
  case_runs "--zero 1 on one rank" "done:|--zero 1" 0 -- "$BIN" $Z --zero 1
  case_runs "--zero 2 --grad-accum 2, 2 ranks (gradients whole)" "done:" 0 -- $MPI -np 2 "$BIN" $Z --zero 2 --grad-accum 2
  case_runs "--zero 3, 3 ranks (uneven ranges)" "done:" 0 -- $MPI -np 3 "$BIN" $Z --zero 3
  case_runs "--zero 2 --clip-grad-norm 0.5, 2 ranks" "done:" 0 -- $MPI -np 2 "$BIN" $Z --zero 2 --clip-grad-norm 0.5
  case_runs "--zero 3 --optimizer adamw --grad-predivide 2, 2 ranks" "done:" 0 -- $MPI -np 2 "$BIN" $Z --zero 3 --optimizer adamw --lr 1e-3 --grad-predivide 2
  case_runs "--zero 3 --inject-overflow at step 2, 2 ranks" "skipped" 0 -- $MPI -np 2 "$BIN" $Z --zero 3 --inject-overflow 2 --log-every 1
  case_runs "--zero 1 --lr-scaling linear --base-batch 64, 2 ranks" "done:" 0 -- $MPI -np 2 "$BIN" $Z --zero 1 --lr-scaling linear --base-batch 64
  case_runs "--zero 3 --no-prefetch --drop-last, 2 ranks" "done:" 0 -- $MPI -np 2 "$BIN" $Z --zero 3 --no-prefetch --drop-last
  case_runs "--zero 3 --bench, 2 ranks" "zero_stage" 0 -- $MPI -np 2 "$BIN" --device cpu --threads 1 --bench --zero 3 --bench-steps 3
  case_runs "--zero 3 --trace, 2 ranks" "done:" 0 -- $MPI -np 2 "$BIN" $Z --zero 3 --trace zt.json --trace-steps 2:3
  check "… both ranks' trace files" "zt.rank0.json, zt.rank1.json" "$(ls zt.rank*.json 2>/dev/null | tr '\n' ' ')" \
    "$([[ -s zt.rank0.json && -s zt.rank1.json ]] || echo 'missing')"
  case_runs "--zero 3 GPT --sample-every 2, 2 ranks" "sample (step 2)" 0 -- $MPI -np 2 "$BIN" $G --steps 2 --zero 3 --sample-every 2 --sample-length 10
  # Without $G's optimizer flags: --eval-only reads none of them (mode_flags.sh refuses them).
  case_runs "--zero 3 --eval-only of a GPT checkpoint, 2 ranks" "eval-only (step 2)" 0 -- $MPI -np 2 "$BIN" ${G/--optimizer adamw --lr 1e-3 /} --zero 3 --eval-only --resume "$T/$(ck ckg 2)"
  case_runs "--zero 3 --predict, 2 ranks" "" 0 -- $MPI -np 2 "$BIN" --device cpu --threads 1 --layers 4,8,3 --init-weights "$T/w0" --zero 3 --predict x.npy --predictions pz.npy
  case_runs "--zero 3 --generate" "" 0 -- "$BIN" --device cpu --threads 1 --model gpt --resume "$T/$(ck ckg 2)" --zero 3 --generate 5 --prompt ab
  rm -rf zk
  case_runs "--zero 0 on 2 ranks, stopped at step 3" "done:" 0 -- $MPI -np 2 "$BIN" $Z --checkpoint-dir zk --stop-after-steps 3
  case_runs "… resumed at --zero 3 on 3 ranks" "resumed from" 0 -- $MPI -np 3 "$BIN" $Z --zero 3 --checkpoint-dir zk --resume --stop-after-steps 2
  case_runs "… resumed at --zero 1 on 1 rank" "resumed from" 0 -- "$BIN" $Z --zero 1 --checkpoint-dir zk --resume
  rm -rf zkill
  timeout -k 2 40 $MPI -np 2 "$BIN" $S --steps 3000000 --zero 3 --checkpoint-dir zkill --checkpoint-every 20 >"$T/.out" 2>"$T/.err" &
  pid=$!
  for _ in $(seq 100); do ls zkill/*.safetensors >/dev/null 2>&1 && break; sleep 0.1; done
  sleep 0.5
  rank=$(pgrep -P "$(pgrep -P $pid | head -1)" | tail -1)
  [[ -n $rank ]] && kill -KILL "$rank"
  wait $pid
  RC=$?
  WHY=""
  ((RC != 0 && RC != 124)) || WHY+="exit $RC; "
  grep -qa 'signal 9' "$T/.out" "$T/.err" || WHY+="no word of the killed rank; "
  run_bin "$BIN" $S --steps 3000000 --stop-after-steps 1 --zero 1 --checkpoint-dir zkill --resume
  ((RC == 0)) || WHY+="resume exit $RC; "
  check "--zero 3: SIGKILL to one rank of -np 2, then --resume" "mpirun non-zero; the last checkpoint resumes" "resume exit $RC" "$WHY"
  rm -rf zterm
  # Open MPI 4.1's mpirun, once signalled, forwards no output until it has
  # passed the signal on (odls_base_sigkill_timeout, 10 s in $MPI): a rank
  # printing an evaluation line per 32-step epoch fills the pipe meanwhile
  # and blocks in write() (README, "Stopping a run"), so this run's epochs
  # are long and its log sparse, as a real run's are.
  timeout -k 2 40 $MPI -np 2 "$BIN" $S --synthetic-samples 4000000 --log-every 100000 --steps 3000000 --zero 2 \
    --checkpoint-dir zterm >"$T/.out" 2>"$T/.err" &
  pid=$!
  for _ in $(seq 100); do grep -q '^world ' "$T/.out" && break; sleep 0.1; done
  sleep 1
  kill -TERM "$(pgrep -P $pid | head -1)"
  wait $pid
  RC=$?
  WHY=""
  ((RC != 0 && RC != 124 && RC != 137)) || WHY+="exit $RC; "
  grep -q 'stopped by SIGTERM at step' "$T/.out" "$T/.err" || WHY+="no stop line; "
  ls zterm/*.safetensors >/dev/null 2>&1 || WHY+="no checkpoint; "
  check "--zero 2: SIGTERM to mpirun (-np 2)" "non-zero, a stop line and a checkpoint" "exit $RC: $(grep -ah 'stopped by' "$T/.out" "$T/.err" | head -1 | cut -c1-90)" "$WHY"
}
