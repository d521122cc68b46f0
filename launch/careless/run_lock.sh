# run_lock.sh: careless-user cases of two runs in one --checkpoint-dir: a
# second run started into the directory of a running one (fresh or a bare
# --resume, by another spelling of the path, through a symlink, under
# mpirun, or the running one under mpirun) is refused in one line and writes
# nothing; another directory meanwhile, and an --eval-only that only reads
# the directory, run. Once the first run has ended (finished, SIGINT,
# kill -9) the directory takes a new run: no stale lock, and no lock file
# is left in it.

# hold FLAGS...: a long run in the background (HOLDER, its pid; its output
# in .hold.out/.hold.err) that has taken its steps, and so its directory's
# lock, when hold returns.
hold() {
  timeout -k 2 120 "$@" --steps 1000000000 --log-every 1000 >"$T/.hold.out" 2>"$T/.hold.err" </dev/null &
  HOLDER=$!
  for _ in $(seq 1200); do grep -qa 'step [0-9]*000/' "$T/.hold.out" && return 0; sleep 0.05; done
}
# release SIGNAL: stops the holder (SIGKILL goes to ddp_train itself: timeout cannot pass it on); HRC, its status.
release() {
  if [[ $1 == KILL ]]; then kill -KILL "$(pgrep -P $HOLDER | head -1)"; else kill -"$1" $HOLDER; fi
  wait $HOLDER
  HRC=$?
}

run_lock() {
  local M WHY held
  M=$(quick_mpi)
  rm -rf lk lk2 lk3 lk4 lk5 lkother lk-link lk-m.jsonl lk-w.safetensors lk-w
  mkdir -p lk
  hold "$BIN" $D --checkpoint-dir lk
  held=$(flock -n lk true 2>/dev/null && echo free || echo held)
  check "a run of 10^9 steps, --checkpoint-every 0, holds lk's lock" "held (flock -n fails)" "$held" "$([[ $held == held ]] || echo 'the lock is free')"
  guard_dirs lk; absent "$T/lk-m.jsonl" "$T/lk-w.safetensors"
  case_refused "a second fresh run into lk" "--checkpoint-dir lk|another run is writing its checkpoints there now|lock" -- \
    "$BIN" $D --steps 3 --checkpoint-dir lk --metrics lk-m.jsonl --save-weights lk-w.safetensors
  guard_dirs lk
  case_refused "a second run, bare --resume in lk" "--checkpoint-dir lk|another run is writing" -- "$BIN" $D --steps 3 --checkpoint-dir lk --resume
  guard_dirs lk
  case_refused "a second run into \$T//lk/ (another spelling)" "another run is writing" -- "$BIN" $D --steps 3 --checkpoint-dir "$T//lk/"
  ln -sfn lk lk-link
  guard_dirs lk
  case_refused "a second run into a symlink to lk" "--checkpoint-dir lk-link|another run is writing" -- "$BIN" $D --steps 3 --checkpoint-dir lk-link
  guard_dirs lk; absent "$T/lk-w"
  case_refused "a second run under mpirun -np 2 into lk" "--checkpoint-dir lk|another run is writing" -- \
    $M -np 2 "$BIN" $D --steps 3 --checkpoint-dir lk --save-weights lk-w
  case_runs "meanwhile a run into another directory" "done:" 0 -- "$BIN" $D --steps 3 --checkpoint-dir lkother
  release INT
  WHY=""
  ((HRC == 130)) || WHY+="exit $HRC; "
  grep -qa 'stopped by SIGINT at step' "$T/.hold.out" "$T/.hold.err" || WHY+="no stop line; "
  ls lk/ckpt-step*.safetensors >/dev/null 2>&1 || WHY+="no checkpoint at the stop; "
  [[ -z $(ls -A lk | grep -v '^ckpt-step[0-9]*\.safetensors$') ]] || WHY+="lk holds $(ls -A lk | grep -v '^ckpt-step' | tr '\n' ' '); "
  check "… the first run stopped by SIGINT" "130, a stop line, its checkpoint, nothing else in lk" "exit $HRC: $(ls -A lk | tr '\n' ' ' | cut -c1-80)" "$WHY"
  case_runs "… then a bare --resume in lk (no stale lock)" "resumed from|nothing left to train" 0 -- "$BIN" $D --steps 3 --checkpoint-dir lk --resume

  # The holder killed: the kernel drops its lock with its descriptors.
  mkdir -p lk2
  hold "$BIN" $D --checkpoint-dir lk2
  release KILL
  check "a run into lk2 killed with SIGKILL" "137, nothing in lk2" "exit $HRC: $(ls -A lk2 | tr '\n' ' ')" \
    "$( ((HRC == 137)) || echo "exit $HRC; ")$([[ -z $(ls -A lk2) ]] || echo 'lk2 not empty')"
  case_runs "… then a fresh run into lk2" "done:" 0 -- "$BIN" $D --steps 3 --checkpoint-dir lk2

  # A finished run leaves nothing but its checkpoints.
  run_bin "$BIN" $D --steps 3 --checkpoint-dir lk3 --checkpoint-every 1 --keep-checkpoints 2
  check "a finished run's directory" "exit 0, its 2 checkpoints only" "exit $RC: $(ls -A lk3 | tr '\n' ' ')" \
    "$( ((RC == 0)) || echo "exit $RC; ")$([[ $(ls -A lk3 | tr '\n' ' ') == "$(basename "$(ck x 2)") $(basename "$(ck x 3)") " ]] || echo 'other files')"
  case_runs "… then a bare --resume to step 5 in lk3" "resumed from" 0 -- "$BIN" $D --steps 5 --checkpoint-dir lk3 --resume

  # An --eval-only reads the newest checkpoint of a running run's directory.
  cp -r ck0 lk4
  hold "$BIN" $D --checkpoint-dir lk4 --resume
  guard_dirs lk4
  case_runs "--eval-only, bare --resume in a running run's directory (reads only)" "eval-only (step 4)" 0 -- \
    "$BIN" $D --eval-only --checkpoint-dir lk4 --resume
  release TERM
  check "… the running run stopped by SIGTERM" "143" "exit $HRC" "$( ((HRC == 143)) || echo "exit $HRC")"

  # The holder under mpirun: rank 0 holds the lock.
  mkdir -p lk5
  hold $M -np 2 "$BIN" $D --checkpoint-dir lk5
  guard_dirs lk5
  # (Under mpirun too: a singleton's own orted takes most of a minute to
  # start beside two busy ranks on a two-core host.)
  case_refused "a run into lk5 while an mpirun -np 2 run holds it" "--checkpoint-dir lk5|another run is writing" -- $M -np 1 "$BIN" $D --steps 3 --checkpoint-dir lk5
  release TERM
  case_runs "… after mpirun ended, a run into lk5" "done:" 0 -- "$BIN" $D --steps 3 --checkpoint-dir lk5 --resume
}
