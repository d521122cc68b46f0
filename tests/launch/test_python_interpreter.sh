#!/usr/bin/env bash
# test_python_interpreter.sh SOURCE_DIR [DDP_TRAIN]: the Python entry points
# run with the interpreter launch/install_deps.sh provisioned (/usr/bin/python3)
# even when a foreign `python3` (pyenv, conda, a venv: here a venv without
# packages) comes first on PATH (issue 47; the mechanism is
# launch/ddp_tools/common/interpreter.py). About 35 s (45 s at a load of 3
# on 2 cores). Checks:
#   1. every launch/*.py's --help as launch/x.py and python3 launch/x.py, and
#      one per family as PYTHONPATH=launch python3 -m ddp_tools.<family>.<x>
#      (the forms the docs show), exits 0 with its usage;
#   2. real runs that need the packages: scaling_model.py --png (matplotlib),
#      plot_sweep.py (matplotlib), torch_gpt.py --self-test (torch, numpy,
#      safetensors; where /usr/bin/python3 has torch), scaling_model's module
#      by -m; with
#      DDP_TRAIN: a one-trial tune.py study (optuna), plot_metrics.py and
#      metrics_to_tensorboard.py on its --metrics;
#   3. `python` (not python3) first on PATH, and a pyenv interpreter's venv
#      where one is installed, run tune.py's study / scaling_model.py too;
#   4. the GPU host's case: a python3 with a module the provisioned one lacks
#      (a stub torch) keeps the tool (no re-execution);
#   5. interpreter.py's table of each family's modules holds what the
#      family's sources import (and no more than the families they use
#      import too), and every launch/*.py belongs to a family.
# Skips (77) where /usr/bin/python3 lacks the packages (launch/install_deps.sh
# not run) or cannot make a venv.
set -uo pipefail
SRC=$(cd "${1:?usage: test_python_interpreter.sh SOURCE_DIR [DDP_TRAIN]}" && pwd)
TRAINER=${2:-}
PROVISIONED=/usr/bin/python3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# What the tools write is recorded (launch/ddp_tools/common/output_registry.py):
# in a registry of this test's own, not the user's ~/.local/state.
export XDG_STATE_HOME=$T/state
fails=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; fails=$((fails + 1)); }

if ! "$PROVISIONED" -c 'import numpy, matplotlib, optuna, safetensors, tiktoken, tensorboard' 2>/dev/null; then
  echo "SKIP: $PROVISIONED lacks the tools' packages (launch/install_deps.sh)"; exit 77
fi
# The foreign interpreter: a venv of Debian's own python3 (its python3 is a
# symlink to /usr/bin/python3, but it sees none of the packages), as pyenv's
# or conda's python3 would be.
if ! "$PROVISIONED" -m venv --without-pip "$T/foreign" >/dev/null 2>&1; then
  echo "SKIP: $PROVISIONED cannot make a venv"; exit 77
fi
"$T/foreign/bin/python3" -c 'import numpy' 2>/dev/null && { echo "FAIL: the foreign venv sees numpy"; exit 1; }
FOREIGN_PATH="$T/foreign/bin:$PATH"
# PyTorch is launch/install_hf_deps.sh's: without it the torch tools are not checked.
HAVE_TORCH=0
"$PROVISIONED" -c 'import torch' 2>/dev/null && HAVE_TORCH=1
# on_path DIR CMD...: CMD (a command or a function) with DIR first on PATH and
# the provisioned interpreter the default one (a DDP_TOOLS_PYTHON of the caller's unset).
on_path() { local dir=$1; shift; PATH="$dir:$PATH" DDP_TOOLS_PYTHON='' "$@"; }
foreign() { on_path "$T/foreign/bin" "$@"; }
cd "$T" || exit 1
L=$SRC/launch

# ---- 1. every entry point's --help in the documented forms --------------------------
m_done=()
family_of() { local f; f=$(ls "$L"/ddp_tools/*/"$1.py" 2>/dev/null | head -1); basename "$(dirname "$f")"; }
for script in "$L"/*.py; do
  name=$(basename "$script" .py)
  family=$(family_of "$name")
  if ((!HAVE_TORCH)) && ! "$PROVISIONED" "$script" --help >/dev/null 2>&1; then
    echo "note: $name.py --help fails under $PROVISIONED itself (no torch): not checked"
    continue
  fi
  forms=("$script --help" "python3 $script --help")
  # -m: once per family (the family decides; the torch tools' --help takes 2 s each).
  if [[ -n $family && " ${m_done[*]} " != *" $family "* ]]; then
    forms+=("python3 -m ddp_tools.$family.$name --help")
    m_done+=("$family")
  fi
  for form in "${forms[@]}"; do
    # shellcheck disable=SC2086
    (cd "$T" && PYTHONPATH=$L foreign $form) >"$T/got.out" 2>&1
    got=$?
    if ((got == 0)) && grep -q "^usage: $name" "$T/got.out"; then
      ok "${form/$L\//launch/} (foreign python3 first): exit 0, its usage"
    else
      bad "${form/$L\//launch/} (foreign python3 first): exit $got: $(head -c 300 "$T/got.out" | tr '\n' ' ')"
    fi
  done
done

# ---- 2. real runs that need the packages ---------------------------------------------
is_png() { [[ $(head -c 8 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]]; }
run_ok() {  # WHAT CHECK CMD...: CMD exits 0 and CHECK (a shell condition) holds
  local what=$1 check=$2
  shift 2
  "$@" >"$T/run.out" 2>&1
  local rc=$?
  if ((rc == 0)) && eval "$check"; then ok "$what"; else bad "$what: exit $rc: $(tail -c 400 "$T/run.out" | tr '\n' ' ')"; fi
}
run_ok "launch/scaling_model.py --synthetic --png (matplotlib)" "is_png sm.png" \
  foreign "$L/scaling_model.py" --synthetic gpt2-124m --ranks 1,2 --png sm.png
printf 'mode,ranks,samples_per_s,efficiency\nstrong,1,100,1\nstrong,2,180,0.9\n' >sweep.csv
run_ok "python3 launch/plot_sweep.py (matplotlib)" "ls ps/*.png >/dev/null 2>&1" \
  foreign python3 "$L/plot_sweep.py" sweep.csv -o ps
if ((HAVE_TORCH)); then
  run_ok "launch/torch_gpt.py --self-test (torch, numpy, safetensors)" "! grep -q SKIP run.out" \
    foreign "$L/torch_gpt.py" --self-test
fi
run_ok "PYTHONPATH=launch python3 -m ddp_tools.scaling.scaling_model --png (matplotlib)" "is_png sm3.png" \
  env PYTHONPATH="$L" PATH="$FOREIGN_PATH" DDP_TOOLS_PYTHON='' python3 -m ddp_tools.scaling.scaling_model \
  --synthetic gpt2-124m --ranks 1,2 --png sm3.png
TRIAL=(--data synthetic --synthetic-samples 256 --steps 4 --eval-every 4 --threads 1 --log-every 2 --max-bad-steps 0)
tune_study() {  # DIR: a one-trial study
  "$L/tune.py" --trainer "$TRAINER" --study-dir "$1" --trials 1 --objective test_loss --seed 3 \
    --param lr=log:1e-3:1 -- "${TRIAL[@]}"
}
if [[ -n $TRAINER ]]; then
  run_ok "launch/tune.py, a one-trial study (optuna)" "[[ -s st/study.db ]]" foreign tune_study st
  OPENBLAS_NUM_THREADS=1 "$TRAINER" --device cpu --threads 1 --data synthetic --steps 6 --log-every 1 \
    --metrics m.jsonl >/dev/null 2>&1 || bad "ddp_train --metrics m.jsonl"
  run_ok "launch/plot_metrics.py m.jsonl (matplotlib)" "ls pm/*.png >/dev/null 2>&1" \
    foreign "$L/plot_metrics.py" m.jsonl -o pm
  run_ok "python3 launch/metrics_to_tensorboard.py m.jsonl (tensorboard)" "ls tb/* >/dev/null 2>&1" \
    foreign python3 "$L/metrics_to_tensorboard.py" m.jsonl tb
else
  echo "note: no DDP_TRAIN given: tune.py's study and the metrics plots not run"
fi

# ---- 3. `python` first on PATH; a pyenv interpreter's venv --------------------------
run_ok "python launch/scaling_model.py --png (the venv's python, not python3)" "is_png sm2.png" \
  foreign python "$L/scaling_model.py" --synthetic gpt2-124m --ranks 1,2 --png sm2.png
pyenv_python=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[0-9]*/bin/python3 2>/dev/null | head -1)
if [[ -n $pyenv_python ]] && "$pyenv_python" -m venv --without-pip "$T/pyenv-venv" >/dev/null 2>&1; then
  if [[ -n $TRAINER ]]; then
    run_ok "launch/tune.py under a venv of $pyenv_python" "[[ -s st2/study.db ]]" \
      on_path "$T/pyenv-venv/bin" tune_study st2
  fi
  run_ok "python3 launch/plot_sweep.py under a venv of $pyenv_python" "ls ps2/*.png >/dev/null 2>&1" \
    on_path "$T/pyenv-venv/bin" python3 "$L/plot_sweep.py" sweep.csv -o ps2
else
  echo "note: no pyenv python 3.10+ here: its case not run"
fi

# ---- 4. the GPU host: its python3 has what the provisioned one lacks -----------------
"$PROVISIONED" -m venv --without-pip "$T/gpu" >/dev/null 2>&1
"$PROVISIONED" -m venv --without-pip "$T/bare" >/dev/null 2>&1
site=$("$T/gpu/bin/python3" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
for m in numpy torch; do  # stubs: the first import says whose it is, and ends the tool
  mkdir -p "$site/$m"
  echo 'print("the GPU python'"'"'s '$m'"); raise SystemExit(0)' >"$site/$m/__init__.py"
done
PATH="$T/gpu/bin:$PATH" DDP_TOOLS_PYTHON="$T/bare/bin/python3" "$L/torch_gpt.py" --help >"$T/gpu.out" 2>&1
if grep -q "the GPU python's" "$T/gpu.out"; then
  ok "a python3 with torch that the provisioned one lacks keeps torch_gpt.py"
else
  bad "torch_gpt.py left the python3 that has torch: $(head -c 300 "$T/gpu.out" | tr '\n' ' ')"
fi

# ---- 5. the families' table against the sources -------------------------------------
if PYTHONPATH=$L "$PROVISIONED" - "$L" >"$T/table.out" 2>&1 <<'PY'; then ok "FAMILY_MODULES covers launch/ddp_tools/'s imports; every launch/*.py has a family"; else bad "$(cat "$T/table.out")"; fi
import glob, os, re, sys
from ddp_tools.common import interpreter
launch = sys.argv[1]
tracked = {m for ms in interpreter.FAMILY_MODULES.values() for m in ms}
tracked |= {"numpy", "matplotlib", "safetensors", "tensorboard", "optuna", "tiktoken", "torch", "transformers"}
pattern = re.compile(r"^\s*(?:import|from)\s+(%s)\b" % "|".join(sorted(tracked)), re.M)
problems = []
for d in sorted(glob.glob(os.path.join(launch, "ddp_tools", "*", ""))):
    family = os.path.basename(os.path.dirname(d))
    used, others = set(), set()
    for f in glob.glob(os.path.join(d, "**", "*.py"), recursive=True):
        text = open(f).read()
        used |= set(pattern.findall(text))
        others |= set(re.findall(r"\bddp_tools\.(\w+)", text)) - {family}
    # What the family imports itself, and at most what the families it uses import too.
    table = set(interpreter.FAMILY_MODULES.get(family, ()))
    reach = used.union(*(interpreter.FAMILY_MODULES.get(o, ()) for o in others))
    if not used <= table <= reach:
        problems.append("%s imports %s (with the families it uses: %s), the table says %s"
                        % (family, sorted(used), sorted(reach), sorted(table)))
for s in glob.glob(os.path.join(launch, "*.py")):
    if not glob.glob(os.path.join(launch, "ddp_tools", "*", os.path.basename(s))):
        problems.append("%s: no ddp_tools/<family>/%s" % (s, os.path.basename(s)))
print("\n".join(problems))
sys.exit(1 if problems else 0)
PY

echo "$fails failed"
((fails == 0))
