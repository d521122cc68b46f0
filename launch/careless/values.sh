# values.sh: careless-user cases of values out of range: a negative --seed
# (flag, --seed=, config); loss scales beyond FP32's largest value
# (--init-scale, --loss-scale static:, --min-loss-scale; FP32's own largest
# value runs); weights beyond FP16's 65504 loaded into an FP16 run (an .npy
# directory, a .safetensors file, a Hugging Face GPT-2 directory, a
# checkpoint; to train, --eval-only, --predict and --generate; 65504 itself
# and 65519.99, which FP16 rounds to 65504, run) and the same weights run
# with --precision bf16; a Hugging Face GPT-2 safetensors holding one tensor
# with and without the 'transformer.' prefix.

values() {
  gpt_fixtures
  local M P GEN PY=/usr/bin/python3 F16="beyond FP16's largest value 65504|its FP16 working copy would be Inf|--precision bf16 holds FP32's range"
  M=$(quick_mpi)
  # The seed.
  case_refused "--seed -1" "--seed must be >= 0" -- "$BIN" $D --steps 2 --seed -1
  case_refused "--seed=-1" "--seed must be >= 0" -- "$BIN" $D --steps 2 --seed=-1
  printf 'seed = -1\n' >v-seed.ini
  case_refused "config: seed = -1" "--seed must be >= 0" -- "$BIN" $D --steps 2 --config v-seed.ini
  case_runs "--seed 4294967296 (past 32 bits)" "done:" 0 -- "$BIN" $D --steps 2 --seed 4294967296

  # Loss scales beyond FP32.
  case_refused "--init-scale 1e39" "--init-scale|beyond FP32's largest value" -- "$BIN" $D --steps 2 --init-scale 1e39
  case_refused "--init-scale 3.5e38" "--init-scale|beyond FP32's largest value" -- "$BIN" $D --steps 2 --init-scale 3.5e38
  case_refused "--init-scale FLT_MAX + half an ulp (rounds to Inf)" "--init-scale|beyond FP32's largest value" -- \
    "$BIN" $D --steps 2 --init-scale 340282356779733661637539395458142568448
  case_runs "--init-scale FLT_MAX (3.4028234663852886e38)" "done:" 0 -- "$BIN" $D --steps 2 --init-scale 340282346638528859811704183484516925440
  case_refused "--loss-scale static:1e39" "--loss-scale static:<S>|beyond FP32's largest value" -- "$BIN" $D --steps 2 --loss-scale static:1e39
  case_refused "--min-loss-scale 1e39" "--min-loss-scale|beyond FP32's largest value" -- "$BIN" $D --steps 2 --min-loss-scale 1e39
  case_refused "--precision bf16 --loss-scale dynamic --init-scale 1e39" "--init-scale|beyond FP32's largest value" -- \
    "$BIN" $D --steps 2 --precision bf16 --loss-scale dynamic --init-scale 1e39
  printf 'init-scale = 1e39\n' >v-scale.ini
  case_refused "config: init-scale = 1e39" "--init-scale|beyond FP32's largest value" -- "$BIN" $D --steps 2 --config v-scale.ini

  # Weights beyond FP16: an .npy directory.
  setw() { # setw DIR VALUE: w0 with layer0.weight's first element VALUE
    rm -rf "$1"; cp -r w0 "$1"
    $PY -c "import numpy as np, sys; a = np.load(sys.argv[1]); a.flat[0] = float(sys.argv[2]); np.save(sys.argv[1], a)" "$1/layer0.weight.npy" "$2"
  }
  setw wbig 100000
  case_refused "--init-weights .npy holding 100000" "--init-weights wbig|tensor 0.weight holds 100000|$F16" -- "$BIN" $D --steps 2 --init-weights wbig
  case_runs "… the same with --precision bf16" "done:" 0 -- "$BIN" $D --steps 2 --init-weights wbig --precision bf16
  case_refused "… the same, 2 ranks (one line)" "tensor 0.weight holds 100000|$F16" -- $M -np 2 "$BIN" $D --steps 2 --init-weights wbig
  case_refused "… the same with --loss-scale none" "tensor 0.weight holds 100000|$F16" -- "$BIN" $D --steps 2 --init-weights wbig --loss-scale none
  setw wneg -70000
  case_refused "--init-weights .npy holding -70000" "holds -70000|$F16" -- "$BIN" $D --steps 2 --init-weights wneg
  setw w65520 65520
  case_refused "--init-weights holding 65520 (FP16 rounds it to Inf)" "holds 65520|$F16" -- "$BIN" $D --steps 2 --init-weights w65520
  setw w65504 65504
  case_runs "--init-weights holding 65504 (FP16's largest)" "done:" 0 -- "$BIN" $D --steps 2 --init-weights w65504
  setw w65519 65519.99
  case_runs "--init-weights holding 65519.99 (FP16 rounds it to 65504)" "done:" 0 -- "$BIN" $D --steps 2 --init-weights w65519
  case_refused "--eval-only --init-weights holding 100000" "holds 100000|$F16" -- "$BIN" $D --eval-only --init-weights wbig
  [[ -e x.npy ]] || npy x.npy float32 10 4
  P="--device cpu --threads 1 --layers 4,8,3 --batch-size 8 --predict x.npy --predictions v-p.npy"
  absent v-p.npy
  case_refused "--predict with weights holding 100000" "holds 100000|$F16" -- "$BIN" $P --init-weights wbig
  case_runs "… the same with --precision bf16" "predictions:" 0 -- "$BIN" $P --init-weights wbig --precision bf16

  # A .safetensors file and a checkpoint.
  timeout -k 2 30 "$BIN" $D --steps 2 --save-weights v-w.safetensors >/dev/null 2>&1
  $PY - <<'PY'
from safetensors.numpy import load_file, save_file
d = load_file("v-w.safetensors")
k = sorted(d)[0]
d[k] = d[k].copy()
d[k].flat[0] = 100000
save_file(d, "v-big.safetensors", metadata={"format": "pt"})
PY
  case_refused "--init-weights .safetensors holding 100000" "v-big.safetensors|holds 100000|$F16" -- "$BIN" $D --steps 2 --init-weights v-big.safetensors
  case_runs "… the same with --precision bf16" "done:" 0 -- "$BIN" $D --steps 2 --init-weights v-big.safetensors --precision bf16
  python3 "$HERE/careless/careless_ckpt.py" "$BASE" v-big.ddpckpt w0=100000
  guard v-big.ddpckpt
  case_refused "--resume of a checkpoint holding 100000" "v-big.ddpckpt|holds 100000|$F16" -- "$BIN" $D --steps 4 --resume v-big.ddpckpt
  case_runs "… the same with --precision bf16" "resumed from" 0 -- "$BIN" $D --steps 4 --resume v-big.ddpckpt --precision bf16
  case_refused "--eval-only --resume of it" "v-big.ddpckpt|holds 100000|$F16" -- "$BIN" $D --eval-only --resume v-big.ddpckpt
  python3 "$HERE/careless/careless_ckpt.py" "$BASE" v-mom.ddpckpt m0=100000
  case_runs "--resume: momentum holding 100000 (FP32 state, no FP16 copy)" "resumed from" 0 -- "$BIN" $D --steps 4 --resume v-mom.ddpckpt

  # GPT: --generate's weights.
  python3 "$HERE/careless/careless_ckpt.py" "$T/$(ck ckg 2)" v-gbig.ckpt w0=100000
  GEN="--device cpu --threads 1 --model gpt --generate 5 --prompt ab"
  case_refused "--generate --resume of a GPT checkpoint holding 100000" "v-gbig.ckpt|holds 100000|$F16" -- "$BIN" $GEN --resume "$T/v-gbig.ckpt"
  case_runs "… the same with --precision bf16" "" 0 -- "$BIN" $GEN --resume "$T/v-gbig.ckpt" --precision bf16
  rm -rf v-hf v-hfbig v-hfdup v-hfbare
  timeout -k 2 30 "$BIN" $G --steps 2 --save-weights v-hf --weights-format hf >/dev/null 2>&1
  cp -r v-hf v-hfbig; cp -r v-hf v-hfdup; cp -r v-hf v-hfbare
  $PY - <<'PY'
from safetensors.numpy import load_file, save_file
d = load_file("v-hf/model.safetensors")
big = {k: v.copy() for k, v in d.items()}
big["transformer.wte.weight"][3, 2] = 100000
save_file(big, "v-hfbig/model.safetensors", metadata={"format": "pt"})
dup = dict(d)
dup["h.0.ln_1.weight"] = d["transformer.h.0.ln_1.weight"].copy()
save_file(dup, "v-hfdup/model.safetensors", metadata={"format": "pt"})
# GPT2Model's names: every tensor without the prefix (valid).
save_file({k[len("transformer."):]: v for k, v in d.items()}, "v-hfbare/model.safetensors", metadata={"format": "pt"})
PY
  case_refused "--generate --init-weights HF GPT-2 holding 100000" "v-hfbig|transformer.wte.weight holds 100000|$F16" -- \
    "$BIN" $GEN --init-weights v-hfbig
  case_runs "… the same with --precision bf16" "" 0 -- "$BIN" $GEN --init-weights v-hfbig --precision bf16
  case_refused "training from HF GPT-2 weights holding 100000" "transformer.wte.weight holds 100000|$F16" -- "$BIN" $G --steps 2 --init-weights v-hfbig
  guard v-hfdup/model.safetensors
  case_refused "HF GPT-2: h.0.ln_1.weight and transformer.h.0.ln_1.weight" "v-hfdup/model.safetensors|stored twice, with and without the 'transformer.' prefix" -- \
    "$BIN" $G --steps 2 --init-weights v-hfdup
  case_refused "… its model.safetensors alone (--n-head 2)" "stored twice, with and without the 'transformer.' prefix" -- \
    "$BIN" $G --steps 2 --init-weights v-hfdup/model.safetensors
  case_refused "… to --generate" "stored twice, with and without the 'transformer.' prefix" -- "$BIN" $GEN --init-weights v-hfdup
  case_runs "HF GPT-2: every tensor without the prefix (GPT2Model's save)" "done:" 0 -- "$BIN" $G --steps 2 --init-weights v-hfbare
}
