# mlp_surfaces.sh: the MLP's careless-user cases (outputs landing on inputs or
# on each other, checkpoint pruning, resumes elsewhere and with other flags,
# damaged checkpoints, checkpoint fields, unbounded inputs, flags, signals).
# Sourced by launch/careless_user.sh, which sets D (a CSV run), S (a synthetic
# run), MPI, BASE (a step-2 checkpoint) and w0 (its --save-weights directory).

edit() { python3 "$HERE/careless/careless_ckpt.py" "$BASE" "$T/e.ddpckpt" "$@"; }

outputs_overlapping() {
  rm -rf ck; absent ck
  case_refused "--metrics ck/ckpt-step…3.safetensors, the final checkpoint's name" "--metrics|checkpoint file name" -- \
    "$BIN" $D --steps 3 --checkpoint-dir ck --metrics "$(ck ck 3)"
  rm -rf w; absent w
  case_refused "--metrics w/layer0.weight.npy with --save-weights w" "--metrics|--save-weights writes" -- \
    "$BIN" $D --steps 3 --save-weights w --metrics w/layer0.weight.npy
  rm -rf ck; case_refused "--save-weights ck/ckpt-step…3.safetensors inside --checkpoint-dir ck" "--save-weights|checkpoint" -- "$BIN" $D --steps 3 --checkpoint-dir ck --save-weights "$(ck ck 3)"
  rm -rf ck; absent "$T/ck"; case_refused "--metrics = --checkpoint-dir (new dir)" "--metrics" -- "$BIN" $D --steps 3 --checkpoint-dir ck --metrics ck
  rm -rf ck; absent "$T/ck"; case_refused "new --checkpoint-dir, --metrics in a missing dir" "--metrics|nodir" -- "$BIN" $D --steps 3 --checkpoint-dir ck --metrics nodir/m.jsonl
  rm -rf w; absent "$T/w"; case_refused "new --save-weights, --metrics in a missing dir" "--metrics|nodir" -- "$BIN" $D --steps 3 --save-weights w --metrics nodir/m.jsonl
  rm -rf both; case_runs "--save-weights = --checkpoint-dir" "done:" 0 -- "$BIN" $D --steps 3 --save-weights both --checkpoint-dir both
  ln -f train.csv hard.csv; guard train.csv; case_refused "--metrics a hard link of the train CSV" "--metrics|input" -- "$BIN" $D --steps 2 --metrics hard.csv
  guard test.csv; case_refused "--metrics ./test.csv (data given absolute)" "--metrics|input" -- "$BIN" $D --steps 2 --metrics ./test.csv
  guard train.csv; case_refused "--metrics \$T//train.csv (double slash)" "--metrics|input" -- "$BIN" $D --steps 2 --metrics "$T//train.csv"
  guard w0/layer0.weight.npy; case_refused "--save-weights w0/ = --init-weights w0 (slash)" "--save-weights|input" -- "$BIN" $D --steps 2 --init-weights w0 --save-weights w0/
  ln -sfn w0 wlink; guard w0/layer0.weight.npy; case_refused "--checkpoint-dir: a symlink to --init-weights" "--checkpoint-dir|input" -- "$BIN" $D --steps 2 --init-weights w0 --checkpoint-dir wlink
  ln -f base.ddpckpt base-hard.ddpckpt; guard base.ddpckpt; case_refused "--metrics a hard link of --resume" "--metrics|input" -- "$BIN" $D --steps 4 --resume base.ddpckpt --metrics base-hard.ddpckpt
  case_refused "--checkpoint-dir fm/ = --data-dir fm" "--checkpoint-dir|input" -- "$BIN" --device cpu --threads 1 --data fashion-mnist --data-dir fm --steps 3 --checkpoint-dir fm/
  mkdir -p w1; echo precious >w1/layer0.weight.npy.tmp; guard w1/layer0.weight.npy.tmp
  case_runs "--save-weights dir holding my layer0.weight.npy.tmp" "done:" 0 -- "$BIN" $D --steps 2 --save-weights w1
  mkdir -p w2; echo precious >precious.txt; ln -sf ../precious.txt w2/layer0.weight.npy.tmp; guard precious.txt
  case_runs "--save-weights: layer0.weight.npy.tmp links to my file" "done:" 0 -- "$BIN" $D --steps 2 --save-weights w2
}

outputs_existing() {
  mkfifo fifo.d; case_refused "--checkpoint-dir is a FIFO" "--checkpoint-dir|FIFO" -- "$BIN" $D --steps 2 --checkpoint-dir fifo.d
  case_refused "--checkpoint-dir /dev/null" "--checkpoint-dir|/dev/null" -- "$BIN" $D --steps 2 --checkpoint-dir /dev/null
  ln -sf train.csv flink; guard train.csv; case_refused "--checkpoint-dir: symlink to a file" "--checkpoint-dir|not a directory" -- "$BIN" $D --steps 2 --checkpoint-dir flink
  mkdir -p w3/layer0.weight.npy; case_refused "--save-weights: layer0.weight.npy is a directory" "--save-weights|directory" -- "$BIN" $D --steps 2 --save-weights w3
  mkdir -p w4; echo "my notes" >w4/layer1.bias.npy; guard w4/layer1.bias.npy
  case_refused "--save-weights: my text file named layer1.bias.npy" "--save-weights|layer1.bias.npy" -- "$BIN" $D --steps 2 --save-weights w4
  : >empty.jsonl; case_runs "--metrics an existing empty file" "done:" 0 -- "$BIN" $D --steps 2 --metrics empty.jsonl
  "$BIN" $D --steps 4 --checkpoint-dir ckm --stop-after-steps 2 --metrics m.jsonl >/dev/null 2>&1; head -1 m.jsonl >m.first
  run_bin "$BIN" $D --steps 4 --resume "$(ck ckm 2)" --metrics m.jsonl
  check "--resume appends to its metrics" "exit 0, earlier lines kept" "exit $RC" "$( ((RC == 0)) || echo "exit $RC")$(cmp -s m.first <(head -1 m.jsonl) || echo 'first line lost')"
  mkfifo m.fifo; case_refused "--metrics is a FIFO" "--metrics|FIFO" -- "$BIN" $D --steps 2 --metrics m.fifo
  # A device that fails every write opens like /dev/null: the first write
  # names it (one line, exit 1), there is nothing of the user's to lose.
  run_bin "$BIN" $D --steps 2 --metrics /dev/full; WHY=""
  ((RC == 1)) || WHY+="exit $RC; "
  [[ $(errline) == *"--metrics /dev/full"* ]] || WHY+="no '--metrics /dev/full'; "
  check "--metrics /dev/full (writes fail)" "one line naming --metrics at the first write" "exit $RC: $(errline | cut -c1-120)" "$WHY"
  rm -rf ckd; mkdir -p "$(ck ckd 3)"; case_refused "fresh run, a directory named like a checkpoint" "--checkpoint-dir|already holds" -- "$BIN" $D --steps 3 --checkpoint-dir ckd
}

pruning() {
  rm -rf cp theirs; "$BIN" $D --steps 10 --checkpoint-dir cp --checkpoint-every 2 --stop-after-steps 4 >/dev/null 2>&1
  "$BIN" $D --steps 3 --checkpoint-dir theirs --seed 5 >/dev/null 2>&1
  cp "$(ck theirs 3)" "$(ck cp 3)"; cp "$(ck cp 4)" "$(ck cp 4).bak"; cp "$(ck cp 2)" "$(ck cp 1)"    # theirs, a copy, a misnamed one
  cp "$(ck cp 4)" "$(ck cp 5).tmp.999"; cp "$(ck cp 2)" cp/renamed.ddpckpt; mkdir -p cp/sub; cp "$(ck cp 2)" "$(ck cp/sub 2)"
  ln "$(ck cp 2)" hardbackup.ddpckpt
  guard "$(ck cp 3)" "$(ck cp 4).bak" "$(ck cp 1)" "$(ck cp 5).tmp.999" cp/renamed.ddpckpt "$(ck cp/sub 2)" hardbackup.ddpckpt
  case_runs "prune K=1 in a mixed dir (theirs, .bak, misnamed, tmp, sub/)" "resumed from|skipping" 0 -- "$BIN" $D --steps 8 --checkpoint-dir cp --checkpoint-every 2 --keep-checkpoints 1 --resume
  local left; left=$(cd cp && ls | tr '\n' ' ')
  check "… what K=1 left in the mixed dir" "ours: only step 8" "$left" "$([[ -e $(ck cp 2) || -e $(ck cp 4) || -e $(ck cp 6) || ! -e $(ck cp 8) ]] && echo "left: $left")"
  rm -rf cq outside; mkdir outside; "$BIN" $D --steps 10 --checkpoint-dir outside --stop-after-steps 2 >/dev/null 2>&1
  mkdir cq; ln -s "$T/$(ck outside 2)" "$(ck cq 2)"; guard "$(ck outside 2)"
  case_runs "prune K=1: ck-step2 is a symlink to a file outside" "done:" 0 -- "$BIN" $D --steps 4 --checkpoint-dir cq/ --checkpoint-every 1 --keep-checkpoints 1 --resume "$(ck outside 2)"
  rm -rf cr; mkdir cr; cp "$(ck cp 5).tmp.999" "$(ck cr 1).tmp.42"; cp "$(ck cp 4).bak" cr/x.bak; guard "$(ck cr 1).tmp.42" cr/x.bak
  case_runs "fresh run K=1 beside a tmp leftover and a .bak" "done:" 0 -- "$BIN" $D --steps 3 --checkpoint-dir cr --checkpoint-every 1 --keep-checkpoints 1
  rm -rf cs; ln -sfn cp csl; guard "$(ck cp 3)"
  case_runs "resume via a symlinked --checkpoint-dir, K=1" "resumed from" 0 -- "$BIN" $D --steps 9 --checkpoint-dir csl/ --keep-checkpoints 1 --resume
}

resume_elsewhere() {
  case_runs "resume on other data of the same size" "resumed from" 0 -- "$BIN" ${D/train.csv/other.csv} --steps 4 --resume "$BASE"
  case_runs "resume with another --batch-size" "global batch 8, this run's is 4" 0 -- "$BIN" ${D/--batch-size 8/--batch-size 4} --steps 4 --resume "$BASE"
  case_runs "resume on 10x more data" "training set of 40 samples, this run's has 400" 0 -- "$BIN" ${D/train.csv/big.csv} --steps 4 --resume "$BASE"
  case_runs "resume with 2 ranks, batch 4 each" "resumed from" 0 -- $MPI -np 2 "$BIN" ${D/--batch-size 8/--batch-size 4} --steps 4 --resume "$BASE"
  case_refused "resume with 3 ranks (16 samples do not divide)" "divide among 3 ranks" -- $MPI -np 3 "$BIN" $D --steps 4 --resume "$BASE"
  case_refused "resume a CSV checkpoint on synthetic data" "model shape mismatch" -- "$BIN" $S --steps 4 --resume "$BASE"
  case_refused "resume with --layers 4,16,3" "shape mismatch|4,8,3" -- "$BIN" ${D/4,8,3/4,16,3} --steps 4 --resume "$BASE"
  case_refused "resume with --activation gelu" "checkpoint|relu" -- "$BIN" $D --activation gelu --steps 4 --resume "$BASE"
  case_refused "resume with --loss mse (class-label data)" "--loss mse" -- "$BIN" $D --loss mse --steps 4 --resume "$BASE"
  case_runs "resume with another --seed" "--seed 0; using it" 0 -- "$BIN" $D --seed 9 --steps 4 --resume "$BASE"
  case_runs "resume with --drop-last, --no-shuffle" "resumed from" 0 -- "$BIN" $D --drop-last --no-shuffle --steps 4 --resume "$BASE"
}

resume_flags() {
  case_runs "resume with --loss-scale none" "the loss scale is 1 (--loss-scale none)" 0 -- "$BIN" $D --loss-scale none --steps 4 --resume "$BASE"
  edit scale=128; case_runs "resume dynamic from a scale-128 checkpoint" "done:|final loss scale 128" 0 -- "$BIN" $D --steps 3 --resume e.ddpckpt
  case_runs "resume with --min-loss-scale above its scale" "raised to --min-loss-scale" 0 -- "$BIN" $D --min-loss-scale 65536 --init-scale 131072 --steps 4 --resume e.ddpckpt
  case_runs "resume with --lr-schedule step --lr-gamma 0.5" "done:" 0 -- "$BIN" $D --lr-schedule step --lr-gamma 0.5 --steps 4 --resume "$BASE"
  rm -rf cke; cp -r ck0 cke; guard "$(ck cke 2)" "$(ck cke 4)"
  case_runs "resume at step 4 with --steps 2" "nothing left to train" 0 -- "$BIN" $D --steps 2 --checkpoint-dir cke --resume
  case_refused "--resume of a directory" "ck0|not a regular file" -- "$BIN" $D --steps 4 --resume ck0
  case_refused "--resume of a missing file" "nope.ddpckpt" -- "$BIN" $D --steps 4 --resume nope.ddpckpt
  rm -rf ckn; case_runs "bare --resume, empty new dir" "starting from scratch" 0 -- "$BIN" $D --steps 2 --checkpoint-dir ckn --resume
}

damaged() {
  local n; n=$(stat -c %s "$BASE")
  cp "$BASE" d.ddpckpt; printf '\x00' | dd of=d.ddpckpt bs=1 seek=$((n - 1)) conv=notrunc 2>/dev/null
  guard d.ddpckpt; case_refused "checkpoint: last byte (a weight's) changed" "checksum" -- "$BIN" $D --steps 4 --resume d.ddpckpt
  head -c 100 "$BASE" >d.ddpckpt; case_refused "checkpoint cut to 100 bytes" "truncated" -- "$BIN" $D --steps 4 --resume d.ddpckpt
  : >d.ddpckpt; case_refused "checkpoint of 0 bytes" "d.ddpckpt|truncated" -- "$BIN" $D --steps 4 --resume d.ddpckpt
  { cat "$BASE"; echo junk; } >d.ddpckpt; case_refused "checkpoint with bytes appended" "d.ddpckpt" -- "$BIN" $D --steps 4 --resume d.ddpckpt
  edit widths=4,9,3; case_refused "header: widths 4,9,3, CRC fixed" "corrupt contents|model dims" -- "$BIN" $D --steps 4 --resume e.ddpckpt
  edit activation=tanh; case_refused "header: activation tanh, CRC fixed" "e.ddpckpt|tanh" -- "$BIN" $D --steps 4 --resume e.ddpckpt
  edit H=4000000000; case_refused "header length 4e9, CRC fixed" "e.ddpckpt" -- "$BIN" $D --steps 4 --resume e.ddpckpt
  edit wcount=4611686018427387904; case_refused "weight count 2^62, CRC fixed" "e.ddpckpt" -- "$BIN" $D --steps 4 --resume e.ddpckpt
  edit T=99; case_refused "total-length field 99, CRC fixed" "e.ddpckpt" -- "$BIN" $D --steps 4 --resume e.ddpckpt
  edit mom_init=7; case_refused "momentum flag 7, CRC fixed" "e.ddpckpt" -- "$BIN" $D --steps 4 --resume e.ddpckpt
  edit dtype=F16; case_refused "a weight tensor stored as F16, CRC fixed" "e.ddpckpt|F16" -- "$BIN" $D --steps 4 --resume e.ddpckpt
  edit optimizer=adamw; case_refused "optimizer adamw without its moments, CRC fixed" "e.ddpckpt|exp_avg" -- "$BIN" $D --steps 4 --resume e.ddpckpt
  case_refused "an SGD checkpoint resumed with --optimizer adamw" "optimizer mismatch" -- "$BIN" $D --optimizer adamw --steps 4 --resume "$BASE"
  timeout -k 2 30 "$BIN" $D --steps 2 --save-weights w1.safetensors >/dev/null 2>&1; guard w1.safetensors
  case_refused "--resume of a --save-weights file" "w1.safetensors|not a ddp_train checkpoint" -- "$BIN" $D --steps 4 --resume w1.safetensors
  rm -rf ckz; cp -r ck0 ckz; ln -s /dev/zero "$(ck ckz 6)"
  # Step 6 lies beyond this run's end (5): passed over by the scan, never written, kept.
  case_runs "bare --resume --steps 5: a link to /dev/zero named step 6" "not a regular file|done:" 0 -- "$BIN" $D --steps 5 --checkpoint-dir ckz --resume
  [[ -L $(ck ckz 6) ]] && check "... and the link is kept" "kept" "kept" "" || check "... and the link is kept" "kept" "gone" "link removed"
  case_refused "bare --resume --steps 8: a link to /dev/zero named step 6" "unreadable|not a regular file|ckpt-step000000000006" -- "$BIN" $D --steps 8 --checkpoint-dir ckz --resume
}

fields() {
  local c
  for c in "step=-1|step" "epoch=-5|epoch" "offset=-8|offset" "scale=nan|scale" "scale=-1|scale" "scale=0|scale" \
           "scale=inf|scale" "w0=nan|weight" "m0=inf|momentum" "skipped=-3|skipped" "hyst=-2|hysteresis" \
           "step=4611686018427387904|step" "global_batch=-8|batch"; do
    edit "${c%%|*}"; case_refused "checkpoint ${c%%|*}, CRC fixed" "e.ddpckpt|${c##*|}" -- "$BIN" $D --steps 4 --resume e.ddpckpt
  done
}

unbounded() {
  case_refused "--train-csv /dev/urandom" "/dev/urandom|not a regular file" -- "$BIN" ${D/$T\/train.csv//dev/urandom} --steps 2
  mkfifo r.fifo; case_refused "--resume of a FIFO" "r.fifo|FIFO" -- "$BIN" $D --steps 2 --resume r.fifo
  case_refused "--resume /dev/zero" "/dev/zero" -- "$BIN" $D --steps 2 --resume /dev/zero
  truncate -s 100G sparse.csv; case_refused "--train-csv: a 100 GiB sparse file" "sparse.csv|limit" -- "$BIN" ${D/$T\/train.csv/sparse.csv} --steps 2
  truncate -s 30G sparse.ddpckpt; case_refused "--resume: a 30 GiB sparse file" "sparse.ddpckpt" -- "$BIN" $D --steps 2 --resume sparse.ddpckpt
  printf '\x93NUMPY\x01\x00\x46\x00{"descr": "<f4", "fortran_order": False, "shape": (1000000000000, 4), }      \n' >huge.npy
  case_refused "--train-x: header claims 10^12 rows" "huge.npy" -- "$BIN" --device cpu --threads 1 --data npy --train-x huge.npy --train-y huge.npy --test-x huge.npy --test-y huge.npy --layers 4,3 --steps 2
  mkdir -p fw; mkfifo fw/train-images-idx3-ubyte.gz; cp fm/*labels* fm/t10k* fw/ 2>/dev/null
  case_refused "--data-dir holding a FIFO as train images" "train-images|FIFO" -- "$BIN" --device cpu --threads 1 --data-dir fw --steps 2
  case_refused "--data-dir is a file" "train.csv" -- "$BIN" --device cpu --threads 1 --data-dir train.csv --steps 2
  mkdir -p wz; ln -sf /dev/zero wz/layer0.weight.npy; case_refused "--init-weights: layer0 links to /dev/zero" "layer0.weight.npy" -- "$BIN" $D --steps 2 --init-weights wz
  truncate -s 2M big.ini; case_refused "--config: 2 MiB sparse file" "--config|limit" -- "$BIN" $D --config big.ini
  printf '\x00\x00\x08\x03\x7f\xff\xff\xff\x00\x00\x00\x1c\x00\x00\x00\x1c' | gzip >bomb.gz
  case_refused "IDX header claims 2^31 images, 20 bytes" "bomb.gz" -- "$BIN" --device cpu --threads 1 --data idx --train-images bomb.gz --train-labels fm/train-labels-idx1-ubyte.gz --test-images fm/t10k-images-idx3-ubyte.gz --test-labels fm/t10k-labels-idx1-ubyte.gz --steps 2
}

flags() {
  case_refused "--steps 3 --steps 4" "steps" -- "$BIN" $D --steps 3 --steps 4
  printf 'steps = 3\nsteps = 4\n' >dup.ini; case_refused "config with a key twice" "steps" -- "$BIN" $D --config dup.ini
  printf '[train]\nsteps = 3\n' >sec.ini; case_refused "config with a [section]" "train.steps" -- "$BIN" $D --config sec.ini
  printf '\xef\xbb\xbfsteps = 3\n' >bom.ini; case_runs "config with a UTF-8 BOM (runs, or names the BOM)" "done:" 0 -- "$BIN" $D --config bom.ini
  printf 'steps = 3\r\nlr = 0.1\r\n' >crlf.ini; case_runs "config with CRLF lines" "done:" 0 -- "$BIN" $D --config crlf.ini
  printf 'config = dup.ini\n' >self.ini; case_refused "config naming another config" "config" -- "$BIN" $D --config self.ini
  case_refused "--lr ''" "--lr" -- "$BIN" $D --steps 2 --lr ''
  case_refused "--lr 1e400" "lr" -- "$BIN" $D --steps 2 --lr 1e400
  case_refused "--steps 99999999999999999999" "steps" -- "$BIN" $D --steps 99999999999999999999
  case_refused "--layers 4,,3" "--layers" -- "$BIN" ${D/4,8,3/4,,3} --steps 2
  case_refused "--layers full-width ４,8,3" "--layers" -- "$BIN" ${D/4,8,3/４,8,3} --steps 2
  case_refused "--device CPU" "--device|CPU" -- "$BIN" ${D/cpu/CPU} --steps 2
  case_refused "--loss-scale static:" "--loss-scale" -- "$BIN" $D --steps 2 --loss-scale static:
  case_refused "--loss-scale static:nan" "--loss-scale" -- "$BIN" $D --steps 2 --loss-scale static:nan
  case_refused "--lr-schedule Cosine" "--lr-schedule|Cosine" -- "$BIN" $D --steps 2 --lr-schedule Cosine
  case_refused "stray '--' then a word" "'x'" -- "$BIN" $D --steps 2 -- x
  case_refused "--collective-timeout nan" "--collective-timeout" -- "$BIN" $D --steps 2 --collective-timeout nan
  local long; long=$(printf 'd%.0s' {1..300})
  case_refused "--metrics with a 300-char name" "--metrics" -- "$BIN" $D --steps 2 --metrics "$long"
  absent "$T/$long"; case_refused "--checkpoint-dir with a 300-char name" "File name too long" -- "$BIN" $D --steps 2 --checkpoint-dir "$long"
  mkdir -p "ü nïcode"; case_runs "--checkpoint-dir with unicode and a space" "done:" 0 -- "$BIN" $D --steps 2 --checkpoint-dir "ü nïcode/ck"
  case_refused "bare --resume without --checkpoint-dir, data missing" "--resume" -- "$BIN" ${D/$T\/train.csv/missing.csv} --steps 2 --resume
  case_refused "--global-batch 10 --grad-accum 3" "global-batch" -- "$BIN" ${D/--batch-size 8/--global-batch 10} --grad-accum 3 --steps 2
}

# catches_signal PID SIGNUM: waits (up to 5 s) until the process under
# `timeout` PID catches the signal (its SigCgt bit). One that comes before
# main() installs the handlers takes the default action, which no program
# can change; a fixed sleep of 0.15 s lost that race on a loaded host.
catches_signal() {
  local child mask
  for _ in $(seq 500); do
    child=$(pgrep -P "$1" | head -1)
    mask=$([[ -n $child ]] && awk '/^SigCgt/ {print $2}' "/proc/$child/status" 2>/dev/null)
    [[ -n $mask ]] && (((16#$mask >> ($2 - 1)) & 1)) && return 0
    sleep 0.01
  done
}

signals() {
  local pid
  timeout -k 2 30 "$BIN" --device cpu --threads 1 --data-dir fm --steps 3 >"$T/.out" 2>"$T/.err" & pid=$!
  catches_signal $pid 15; kill -TERM $pid; wait $pid; RC=$?; WHY=""; ((RC == 143)) || WHY+="exit $RC; "
  grep -q 'during start-up; nothing was trained' "$T/.err" || WHY+="no start-up line; "
  check "SIGTERM as soon as main() catches it (start-up)" "143, start-up line" "exit $RC: $(tail -1 "$T/.err" | cut -c1-100)" "$WHY"
  timeout -k 2 30 "$BIN" --device cpu --threads 1 --data-dir fm --steps 3 >"$T/.out" 2>"$T/.err" & pid=$!
  sleep 0.3; kill -INT $pid; wait $pid; RC=$?; WHY=""; ((RC == 130)) || WHY+="exit $RC; "
  grep -q 'SIGINT during start-up' "$T/.err" || WHY+="no start-up line; "
  check "SIGINT 0.3 s in (reading Fashion-MNIST)" "130, start-up line" "exit $RC: $(tail -1 "$T/.err" | cut -c1-100)" "$WHY"
  rm -rf cks; timeout -k 2 30 "$BIN" $S --steps 3000000 --checkpoint-dir cks >"$T/.out" 2>"$T/.err" & pid=$!
  # Mid-training: once the banner says training started (not while loading).
  for _ in $(seq 100); do grep -q '^world ' "$T/.out" && break; sleep 0.1; done
  sleep 0.5; kill -TERM $pid; wait $pid; RC=$?; WHY=""; ((RC == 143)) || WHY+="exit $RC; "
  grep -q 'stopped by SIGTERM at step' "$T/.out" "$T/.err" || WHY+="no stop line; "
  run_bin "$BIN" $S --steps 3000000 --stop-after-steps 1 --checkpoint-dir cks --resume; ((RC == 0)) || WHY+="resume exit $RC; "
  check "SIGTERM mid-training, then --resume" "143 with a checkpoint; resumes" "resume exit $RC" "$WHY"
  rm -rf ckp; timeout -k 2 30 $MPI -np 2 "$BIN" $S --steps 3000000 --checkpoint-dir ckp >"$T/.out" 2>"$T/.err" & pid=$!
  sleep 3; local rank; rank=$(pgrep -P "$(pgrep -P $pid | head -1)" | tail -1)   # timeout -> mpirun -> ranks
  [[ -n $rank ]] && kill -INT "$rank"; wait $pid; RC=$?; WHY=""; ((RC != 0)) || WHY+="exit 0; "
  ls ckp/*.safetensors >/dev/null 2>&1 || WHY+="no checkpoint; "
  check "SIGINT to one rank of -np 2 mid-training" "non-zero, checkpoint written" "exit $RC: $(grep -ah 'stopped by' "$T/.out" "$T/.err" | head -1 | cut -c1-90)" "$WHY"
  timeout -k 2 30 "$BIN" $S --bench --bench-steps 100000000 >"$T/.out" 2>"$T/.err" & pid=$!
  sleep 1.5; kill -TERM $pid; wait $pid; RC=$?; WHY=""; ((RC == 143)) || WHY+="exit $RC; "
  grep -q 'during --bench' "$T/.err" || WHY+="no --bench line; "
  check "SIGTERM during --bench" "143, 'during --bench'" "exit $RC: $(tail -1 "$T/.err" | cut -c1-90)" "$WHY"
  rm -rf ckq; timeout -k 2 30 "$BIN" $S --steps 3000 --log-every 1 --checkpoint-dir ckq 2>"$T/.err" | head -2 >/dev/null
  RC=${PIPESTATUS[0]}; WHY=""; ls ckq/*.safetensors >/dev/null 2>&1 || WHY+="ended by SIGPIPE ($RC), no checkpoint, no line; "
  check "stdout piped to head -2 (reader goes away)" "error line or stop with a checkpoint" "exit $RC" "$WHY"
}

