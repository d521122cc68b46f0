# ranks_agree.sh: careless-user cases of ranks started with different flags,
# config files or data (Open MPI's MPMD form, `A : B`): the model's shape,
# the precision, the ZeRO stage, the optimizer and its rates, the seed, the
# batch, the run's length, data files of other content or missing on one
# node, config files that differ, a rank that runs --help, three-rank jobs,
# GPT flags, --bench, --predict, --eval-only, --generate and a bare --resume
# that would choose other checkpoints on each node. Each is refused at
# start-up in one line from rank 0, before anything is written; what may
# differ (--threads, --config's path, a copy of the data at another path,
# 0.1 written 1e-1) runs.

# quick_mpi: $MPI with a 1 s grace. Open MPI 4.1's mpirun, once a rank exits
# non-zero, waits odls_base_sigkill_timeout twice before it exits itself
# (20 s with $MPI's 10); ranks refused at start-up have nothing to save.
quick_mpi() { echo "${MPI/odls_base_sigkill_timeout 10/odls_base_sigkill_timeout 1}"; }

ranks_agree() {
  gpt_fixtures
  local M A B P E GEN BN W
  M=$(quick_mpi)
  A="$D --steps 2"
  # disagree NAME SETTING RANKS FLAGS0 FLAGS1: refused, naming the setting
  # and the ranks that differ; FLAGS0 and FLAGS1 each hold every flag (an
  # MPMD side takes only its own).
  disagree() {
    case_refused "$1" "the ranks disagree on $2|$3 from rank 0's|same flags, config file and data" -- \
      $M -np 1 "$BIN" $4 : -np 1 "$BIN" $5
  }
  agree() { case_runs "$1" "$2" 0 -- $M -np 1 "$BIN" $3 : -np 1 "$BIN" $4; }

  # The model, the arithmetic and the collectives.
  rm -rf rack; absent "$T/rack" "$T/ram.jsonl" "$T/raw.safetensors"
  case_refused "--layers 4,8,3 and 4,16,3 (crashed before), nothing written" "the ranks disagree on --layers|rank 1 differs" -- \
    $M -np 1 "$BIN" $A --checkpoint-dir rack --metrics ram.jsonl --save-weights raw.safetensors : \
    -np 1 "$BIN" ${A/4,8,3/4,16,3} --checkpoint-dir rack --metrics ram.jsonl --save-weights raw.safetensors
  disagree "--precision fp16 and bf16 (summed into NaN before)" "--precision" "rank 1 differs" "$A" "$A --precision bf16"
  disagree "--zero 0 and 1 (hung before)" "--zero" "rank 1 differs" "$A" "$A --zero 1"
  disagree "--zero 2 and 3" "--zero" "rank 1 differs" "$A --zero 2" "$A --zero 3"
  disagree "--optimizer sgd and adamw (hung before)" "--optimizer" "rank 1 differs" "$A" "$A --optimizer adamw"
  disagree "--lr 0.1 and 0.2" "--lr" "rank 1 differs" "$A --lr 0.1" "$A --lr 0.2"
  agree "--lr 0.1 and 1e-1 (one value)" "done:" "$A --lr 0.1" "$A --lr 1e-1"
  disagree "--seed 0 given and 1" "--seed" "rank 1 differs" "$A --seed 0" "$A --seed 1"
  disagree "--batch-size 8 and 4" "--batch-size" "rank 1 differs" "$A" "${A/--batch-size 8/--batch-size 4}"
  disagree "--grad-accum 2 on rank 1 only" "--grad-accum" "rank 1 differs" "$A" "$A --grad-accum 2"
  disagree "--clip-grad-norm 1 and 0.5" "--clip-grad-norm" "rank 1 differs" "$A --clip-grad-norm 1" "$A --clip-grad-norm 0.5"
  disagree "--steps 2 and 3" "--steps" "rank 1 differs" "$A" "$D --steps 3"
  disagree "--epochs 1 and 2" "--epochs" "rank 1 differs" "$D --epochs 1" "$D --epochs 2"
  disagree "--loss-scale static:1024 and static:2048" "--loss-scale" "rank 1 differs" "$A --loss-scale static:1024" "$A --loss-scale static:2048"
  disagree "--grad-reduce-dtype fp32 on rank 1 only" "--grad-reduce-dtype" "rank 1 differs" "$A" "$A --grad-reduce-dtype fp32"
  disagree "--no-shuffle on rank 1 only" "--no-shuffle" "rank 1 differs" "$A" "$A --no-shuffle"
  disagree "--collective-timeout 60 and 30 (not rank-local)" "--collective-timeout" "rank 1 differs" "$A --collective-timeout 60" "$A --collective-timeout 30"
  disagree "--device cpu and auto (no GPU: both the CPU; the flags differ)" "--device" "rank 1 differs" "$A" "${A/--device cpu/--device auto}"
  agree "--threads 1 and 2 (rank-local)" "done:" "$A" "${A/--threads 1/--threads 2}"

  # The data: by content, not by path.
  disagree "--train-csv of other content on rank 1" "--train-csv (what it holds)" "rank 1 differs" "$A" "${A/train.csv/other.csv}"
  disagree "--test-csv of other content on rank 1" "--test-csv (what it holds)" "rank 1 differs" "$A" "${A/test.csv/other.csv}"
  disagree "--train-csv missing on rank 1's node" "--train-csv (what it holds)" "rank 1 differs" "$A" "${A/train.csv/ra-missing.csv}"
  mkdir -p ra-node1; cp train.csv test.csv ra-node1/
  agree "the same CSVs at another path on rank 1" "done:" "$A" "${A//$T\//$T/ra-node1/}"

  # Config files.
  printf 'lr = 0.1\nsteps = 2\n' >ra-a.ini
  printf 'lr = 0.2\nsteps = 2\n' >ra-b.ini
  cp ra-a.ini ra-a-copy.ini
  disagree "config files that differ (lr)" "--lr" "rank 1 differs" "$D --config ra-a.ini" "$D --config ra-b.ini"
  agree "one config at two paths" "done:" "$D --config ra-a.ini" "$D --config ra-a-copy.ini"
  agree "--config's lr = 0.1 and --lr 0.1 on the command line" "done:" "$D --config ra-a.ini" "$A --lr 0.1"

  # A rank that never reaches the check.
  case_refused "rank 1 runs --help, --collective-timeout 3" "did not reach the configuration check within --collective-timeout 3" -- \
    $M -np 1 "$BIN" $A --collective-timeout 3 : -np 1 "$BIN" $A --collective-timeout 3 --help

  # Three ranks.
  case_refused "-np 3: ranks 1 and 2 --lr 0.2" "the ranks disagree on --lr|ranks 1, 2 differ from rank 0's 0.05" -- \
    $M -np 1 "$BIN" $A : -np 2 "$BIN" $A --lr 0.2
  case_refused "-np 3: rank 2 alone --seed 3" "the ranks disagree on --seed|rank 2 differs from rank 0's 0" -- \
    $M -np 2 "$BIN" $A : -np 1 "$BIN" $A --seed 3
  case_refused "-np 3: ranks 1 and 2 each another --seed" "the ranks disagree on --seed|ranks 1, 2 differ" -- \
    $M -np 1 "$BIN" $A : -np 1 "$BIN" $A --seed 3 : -np 1 "$BIN" $A --seed 4

  # GPT.
  python3 -c "import random; r = random.Random(4); open('lm-other.txt', 'w').write(''.join(r.choice('abcdefgh \n') for _ in range(6000)))"
  disagree "GPT --n-head 2 and 4" "--n-head" "rank 1 differs" "$G --steps 2" "${G/--n-head 2/--n-head 4} --steps 2"
  disagree "GPT --block-size 8 and 16" "--block-size" "rank 1 differs" "$G --steps 2" "${G/--block-size 8/--block-size 16} --steps 2"
  disagree "GPT --recompute block on rank 1" "--recompute" "rank 1 differs" "$G --steps 2" "$G --steps 2 --recompute block"
  disagree "GPT --train-text of other content" "--train-text (what it holds)" "rank 1 differs" "$G --steps 2" "$TX $T/lm-other.txt --steps 2"

  # The other modes.
  BN="--device cpu --threads 1 --bench --bench-steps 2 --bench-warmup 1 --layers 16,16,4 --batch-size 8"
  agree "--bench, the same flags" '"event":"bench"' "$BN" "$BN"
  disagree "--bench --batch-size 8 and 16" "--batch-size" "rank 1 differs" "$BN" "${BN/--batch-size 8/--batch-size 16}"
  disagree "--bench --bucket-mb 0 on rank 1" "--bucket-mb" "rank 1 differs" "$BN" "$BN --bucket-mb 0"
  [[ -e x.npy ]] || npy x.npy float32 10 4
  /usr/bin/python3 -c "import numpy as np; np.save('ra-y.npy', np.load('x.npy') + 1)"
  [[ -d ra-w5 ]] || timeout -k 2 30 "$BIN" $D --steps 3 --seed 5 --save-weights ra-w5 >/dev/null 2>&1
  rm -rf ra-w0; cp -r w0 ra-w0
  P="--device cpu --threads 1 --layers 4,8,3 --batch-size 8 --predictions $T/ra-p.npy"
  absent "$T/ra-p.npy"
  disagree "--predict, other --init-weights on rank 1" "--init-weights (what it holds)" "rank 1 differs" \
    "$P --init-weights $T/w0 --predict x.npy" "$P --init-weights $T/ra-w5 --predict x.npy"
  absent "$T/ra-p.npy"
  disagree "--predict, other rows on rank 1" "--predict (what it holds)" "rank 1 differs" \
    "$P --init-weights $T/w0 --predict x.npy" "$P --init-weights $T/w0 --predict ra-y.npy"
  agree "--predict, a copy of the weights on rank 1" "" "$P --init-weights $T/w0 --predict x.npy" "$P --init-weights $T/ra-w0 --predict x.npy"
  E="$D --eval-only"
  disagree "--eval-only, other --init-weights on rank 1" "--init-weights (what it holds)" "rank 1 differs" "$E --init-weights $T/w0" "$E --init-weights $T/ra-w5"
  disagree "--eval-only, other --resume checkpoints" "--resume (what it holds)" "rank 1 differs" "$E --resume $T/$(ck ck0 2)" "$E --resume $T/$(ck ck0 4)"
  disagree "--eval-only on rank 1 only" "--eval-only" "rank 1 differs" "$D --init-weights $T/w0" "$E --init-weights $T/w0"
  GEN="--device cpu --threads 1 --model gpt --resume $T/$(ck ckg 2) --generate 5"
  disagree "--generate, --prompt ab and ac" "--prompt" "rank 1 differs" "$GEN --prompt ab" "$GEN --prompt ac"

  # A bare --resume: each node's directory (-wdir) seen by its rank.
  rm -rf ra-n0 ra-n1; mkdir -p ra-n0 ra-n1; cp -r ck0 ra-n0/ck; cp -r ck0 ra-n1/ck; rm "$(ck ra-n1/ck 4)"
  guard_dirs ra-n0/ck ra-n1/ck
  case_refused "bare --resume, rank 1's node lacks step 4" "the ranks disagree on --checkpoint-dir (the checkpoints a bare --resume chooses from)|rank 1 differs" -- \
    $M -np 1 -wdir "$T/ra-n0" "$BIN" $D --steps 6 --checkpoint-dir ck --resume : -np 1 -wdir "$T/ra-n1" "$BIN" $D --steps 6 --checkpoint-dir ck --resume
  cp "$(ck ck0 4)" "$(ck ra-n1/ck 4)"
  case_runs "bare --resume, each node the same checkpoints" "resumed from" 0 -- \
    $M -np 1 -wdir "$T/ra-n0" "$BIN" $D --steps 6 --checkpoint-dir ck --resume : -np 1 -wdir "$T/ra-n1" "$BIN" $D --steps 6 --checkpoint-dir ck --resume
}
