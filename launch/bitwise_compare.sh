#!/bin/bash
# bitwise_compare.sh OLD NEW [CASE...]: train with both binaries and the same
# flags, then compare what each wrote: every saved weight file byte for byte,
# every checkpoint (tensors and metadata, but for the run's random lineage id
# and the checksum over it), and the metrics records with the timings
# (samples_per_s, allreduce_ms_per_step, wall_s, ...) left out. A change that
# claims not to change what the trainer computes passes every case.
# Cases: the MLP (SGD, AdamW) and the GPT, 1 and 2 ranks, --zero 0..3, with
# and without --grad-accum. CASE names run a subset (e.g. gpt2z3).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
old=$1 new=$2
shift 2 || { echo "usage: bitwise_compare.sh OLD NEW [CASE...]" >&2; exit 2; }
only=" $* "
out=$(mktemp -d /tmp/bitwise.XXXXXX)
here=$(cd "$(dirname "$0")" && pwd)
fails=0
run() {  # name np flags...
  local name=$1 np=$2
  shift 2
  [ "$only" = "  " ] || [[ "$only" == *" $name "* ]] || return 0
  for which in old new; do
    local bin=$old
    [ $which = new ] && bin=$new
    local dir=$out/$name.$which
    mkdir -p "$dir"
    local launcher=()
    [ "$np" = 1 ] || launcher=(mpirun --oversubscribe -np "$np")
    "${launcher[@]}" "$bin" "$@" --save-weights "$dir/w" --checkpoint-dir "$dir/ck" --checkpoint-every 7 \
      --metrics "$dir/metrics.jsonl" --log-every 5 > "$dir.log" 2>&1
    echo "$which rc=$?" >> "$out/$name.rc"
  done
  if PYTHONPATH="$here" /usr/bin/python3 -m ddp_tools.checks.bitwise_outputs "$out/$name.old" "$out/$name.new"; then
    echo "$name: identical ($(tr '\n' ' ' < "$out/$name.rc"))"
  else
    echo "$name: DIFFERENT ($(tr '\n' ' ' < "$out/$name.rc"); logs in $out)"
    fails=$((fails + 1))
  fi
  grep -q "rc=0" "$out/$name.rc" && ! grep -qv "rc=0" "$out/$name.rc" || fails=$((fails + 1))
}
S="--data synthetic --layers 10,37,13,10 --loss mse --steps 40 --threads 1"
F="--data fashion-mnist --layers 784,100,30,10 --steps 30 --batch-size 64 --threads 1"
A="--optimizer adamw --lr 0.002 --weight-decay 0.01"
text=$out/text.txt
for i in $(seq 1 120); do echo "line $i: the quick brown fox jumps over the lazy dog $((i * 7919 % 1000))"; done > "$text"
G="--model gpt --data text --train-text $text --n-layer 2 --n-head 2 --n-embd 32 --block-size 16 --batch-size 4"
G="$G --steps 20 --threads 1 --optimizer adamw --lr 0.003 --eval-every 10"
run syn1 1 $S
run syn1acc 1 $S --grad-accum 3
run syn2 2 $S
run syn2acc 2 $S --grad-accum 2
run fm1 1 $F --activation gelu
run fm2 2 $F
run fm2acc 2 $F --grad-accum 2 --clip-grad-norm 1.0 --weight-decay 1e-4
run fm1clip 1 $F --clip-grad-norm 0.5 --nesterov
run adam1 1 $S $A
run adam2z1 2 $S $A --zero 1
run adam2z2 2 $S $A --zero 2 --grad-accum 2
run adam2z3 2 $S $A --zero 3
run sgd2z3 2 $S --zero 3 --grad-accum 2
run gpt1 1 $G
run gpt1acc 1 $G --grad-accum 2
run gpt2 2 $G
run gpt2z2 2 $G --zero 2
run gpt2z3 2 $G --zero 3 --grad-accum 2
echo "fails=$fails (outputs in $out)"
[ $fails = 0 ]
