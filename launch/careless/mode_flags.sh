# mode_flags.sh: careless-user cases of flags a mode does not read
# (launch/cli/mode_flags.cpp): data files, training's length and outputs,
# the optimizer, its schedule and the loss scale, --metrics, --trace,
# --no-shuffle / --drop-last, --checkpoint-dir without a bare --resume and
# the test hooks, given on the command line to --eval-only, --predict,
# --generate or --bench: one line "--X has no meaning with --MODE", nothing
# written. What the mode reads runs (--bench's optimizer and --trace,
# --eval-only's --metrics, a bare --resume's --checkpoint-dir), and so do
# the same flags from a training run's --config, ignored, nothing of them
# written.

mode_flags() {
  gpt_fixtures
  local E P GEN BN f
  E="$D --eval-only --init-weights $T/w0"
  [[ -e x.npy ]] || npy x.npy float32 10 4
  P="--device cpu --threads 1 --layers 4,8,3 --batch-size 8 --init-weights $T/w0 --predict x.npy --predictions $T/mf-p.npy"
  GEN="--device cpu --threads 1 --model gpt --resume $T/$(ck ckg 2) --generate 5 --prompt ab"
  BN="--device cpu --threads 1 --bench --bench-steps 2 --bench-warmup 1 --layers 16,16,4 --batch-size 8"
  local EV="it trains nothing" PR="it reads no data set" GE="it reads no data and writes nothing but the bytes" BE="it times steps on random data"

  # --eval-only.
  for f in "--lr 0.1" "--optimizer adamw" "--momentum 0.5" "--weight-decay 0.01" "--init-scale 1024" "--loss-scale none" \
    "--grad-accum 2" "--clip-grad-norm 1" "--warmup-steps 3" "--drop-last" "--no-shuffle" "--steps 3" "--inject-overflow 2"; do
    case_refused "--eval-only $f" "${f%% *} has no meaning with --eval-only|$EV" -- "$BIN" $E $f
  done
  rm -rf mf-t.rank0.json mf-ck mf-w; absent mf-t.rank0.json
  case_refused "--eval-only --trace" "--trace has no meaning with --eval-only" -- "$BIN" $E --trace mf-t.json
  absent mf-ck
  case_refused "--eval-only --checkpoint-dir (no bare --resume)" "--checkpoint-dir has no meaning with --eval-only unless a bare --resume looks in it" -- \
    "$BIN" $E --checkpoint-dir mf-ck
  absent mf-w
  case_refused "--eval-only --save-weights" "--save-weights has no meaning with --eval-only" -- "$BIN" $E --save-weights mf-w
  case_runs "--eval-only --metrics (it writes them)" "eval-only (step 0)" 0 -- "$BIN" $E --metrics mf-em.jsonl
  check "… mf-em.jsonl written" "a non-empty file" "$(wc -c <mf-em.jsonl 2>&1) bytes" "$([[ -s mf-em.jsonl ]] || echo 'empty or missing')"
  case_runs "--eval-only, bare --resume in --checkpoint-dir ck0" "eval-only (step 4)" 0 -- "$BIN" $D --eval-only --checkpoint-dir "$T/ck0" --resume

  # --predict.
  absent mf-p.npy
  for f in "--data csv --train-csv $T/train.csv --test-csv $T/test.csv|--train-csv" "--data-dir $T/fm|--data-dir" "--lr 0.1|--lr" \
    "--optimizer sgd|--optimizer" "--nesterov|--nesterov" "--lr-schedule constant|--lr-schedule" "--grad-accum 2|--grad-accum" \
    "--metrics mf-pm.jsonl|--metrics" "--no-shuffle|--no-shuffle" "--stall-at-step 2|--stall-at-step" "--checkpoint-dir $T/ck0|--checkpoint-dir"; do
    absent mf-p.npy mf-pm.jsonl
    case_refused "--predict ${f%%|*}" "${f##*|} has no meaning with --predict" -- "$BIN" $P ${f%%|*}
  done
  rm -rf mf-pt.rank0.json; absent mf-p.npy mf-pt.rank0.json
  case_refused "--predict --trace" "--trace has no meaning with --predict|$PR" -- "$BIN" $P --trace mf-pt.json
  case_runs "--predict, bare --resume in --checkpoint-dir ck0" "predictions:" 0 -- \
    "$BIN" --device cpu --threads 1 --layers 4,8,3 --checkpoint-dir "$T/ck0" --resume --predict x.npy --predictions mf-p2.npy

  # --generate.
  for f in "--data text --train-text $T/lm.txt|--train-text" "--data text --val-text $T/lm.txt|--val-text" "--data text --val-fraction 0.2|--val-fraction" \
    "--optimizer adamw|--optimizer" "--beta2 0.95|--beta2" "--clip-grad-norm 1|--clip-grad-norm" "--metrics mf-gm.jsonl|--metrics" \
    "--trace mf-gt.json|--trace" "--sample-every 2|--sample-every" "--keep-checkpoints 2|--keep-checkpoints" "--checkpoint-dir $T/ckg|--checkpoint-dir" \
    "--save-weights mf-gw.safetensors|--save-weights"; do
    absent mf-gm.jsonl mf-gt.rank0.json mf-gw.safetensors
    case_refused "--generate ${f%%|*}" "${f##*|} has no meaning with --generate" -- "$BIN" $GEN ${f%%|*}
  done
  case_runs "--generate, bare --resume in --checkpoint-dir ckg" "" 0 -- \
    "$BIN" --device cpu --threads 1 --model gpt --checkpoint-dir "$T/ckg" --resume --generate 5 --prompt ab

  # --bench.
  for f in "--data csv --train-csv $T/train.csv --test-csv $T/test.csv|--train-csv" "--data synthetic --synthetic-samples 100|--synthetic-samples" \
    "--no-shuffle|--no-shuffle" "--drop-last|--drop-last" "--metrics mf-bm.jsonl|--metrics" "--steps 3|--steps" "--epochs 2|--epochs" \
    "--eval-every 2|--eval-every" "--save-weights mf-bw.safetensors|--save-weights" "--checkpoint-dir mf-bck|--checkpoint-dir" \
    "--resume $BASE|--resume" "--init-weights $T/w0|--init-weights" "--stall-at-step 2|--stall-at-step"; do
    absent mf-bm.jsonl mf-bw.safetensors mf-bck
    case_refused "--bench ${f%%|*}" "${f##*|} has no meaning with --bench|$BE" -- "$BIN" $BN ${f%%|*}
  done
  case_runs "--bench --optimizer adamw --lr 1e-3 --clip-grad-norm 1 (it steps)" '"event":"bench"' 0 -- "$BIN" $BN --optimizer adamw --lr 1e-3 --clip-grad-norm 1
  case_runs "--bench --trace (it traces its steps)" '"event":"bench"' 0 -- "$BIN" $BN --trace mf-bt.json --trace-steps 1:2
  check "… mf-bt.rank0.json written" "a non-empty file" "$(ls mf-bt.rank0.json 2>&1)" "$([[ -s mf-bt.rank0.json ]] || echo 'missing')"

  # A training run's --config: its flags ignored (not refused), nothing of them written.
  rm -rf mf-cfg
  mkdir -p mf-cfg
  cat >mf-train.ini <<EOF
data = csv
train-csv = $T/train.csv
test-csv = $T/test.csv
steps = 3
lr = 0.1
optimizer = sgd
momentum = 0.8
init-scale = 1024
grad-accum = 1
clip-grad-norm = 1
no-shuffle = true
drop-last = true
checkpoint-every = 1
keep-checkpoints = 2
metrics = $T/mf-cfg/m.jsonl
checkpoint-dir = $T/mf-cfg/ck
save-weights = $T/mf-cfg/w
EOF
  guard_dirs mf-cfg
  case_runs "--predict --config of a training run" "predictions:" 0 -- "$BIN" $P --config mf-train.ini
  guard_dirs mf-cfg
  case_runs "--bench --config of a training run" '"event":"bench"' 0 -- "$BIN" $BN --config mf-train.ini
  guard_dirs mf-cfg
  case_runs "--generate --config of a training run" "" 0 -- "$BIN" $GEN --config mf-train.ini
  cat >mf-gpt.ini <<EOF
data = text
train-text = $T/lm.txt
val-fraction = 0.2
optimizer = adamw
lr = 1e-3
beta2 = 0.95
sample-every = 2
trace = $T/mf-cfg/t.json
metrics = $T/mf-cfg/gm.jsonl
EOF
  guard_dirs mf-cfg
  case_runs "--generate --config of a GPT training run (text, sampling, trace)" "" 0 -- "$BIN" $GEN --config mf-gpt.ini
  # --eval-only reads --metrics (it is written); not --checkpoint-dir nor --save-weights.
  absent "$T/mf-cfg/ck" "$T/mf-cfg/w"
  case_runs "--eval-only --config of a training run" "eval-only (step 0)" 0 -- "$BIN" --device cpu --threads 1 --layers 4,8,3 --batch-size 8 --init-weights "$T/w0" --eval-only --config mf-train.ini
  case_refused "… its --lr on the command line instead" "--lr has no meaning with --eval-only" -- \
    "$BIN" --device cpu --threads 1 --layers 4,8,3 --batch-size 8 --init-weights "$T/w0" --eval-only --config mf-train.ini --lr 0.1

  # --eval-only's bare --resume with nothing to resume: --predict and --generate refuse it.
  rm -rf mf-none; absent mf-none
  case_refused "--eval-only, bare --resume in a missing --checkpoint-dir" "--eval-only|no valid checkpoint in" -- \
    "$BIN" $D --eval-only --checkpoint-dir mf-none --resume
}
