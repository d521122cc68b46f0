# python_interpreter.sh: the careless-user cases of issue 47: the Python tools
# run where the installers put their packages even when the first `python3`
# (or `python`) on PATH is another one: a venv without them (as pyenv's,
# conda's or an activated venv's would be), a pyenv interpreter, an old
# Python. Each entry point is run as the README and the tools' usage lines
# write it (launch/x.py, python3 launch/x.py, PYTHONPATH=launch python3 -m
# ddp_tools...): it runs (exit 0) instead of "X is not installed", and a
# refusal stays one line. The GPU host's case: a python3 with a package the
# provisioned interpreter lacks keeps the tool; DDP_TOOLS_PYTHON naming no
# interpreter leaves the tool on python3, which says what it lacks. The
# mechanism: launch/ddp_tools/common/interpreter.py. Sourced by
# launch/careless_user.sh (BIN, T, HERE, S); works in $T/pi.

# pi_on DIR: the command prefix (for run_bin's timeout) that puts DIR first on
# PATH and unsets the caller's DDP_TOOLS_PYTHON, in the array ON.
pi_on() { ON=(env -u DDP_TOOLS_PYTHON "PATH=$1:$PATH"); }

pi_fixtures() {
  /usr/bin/python3 -m venv --without-pip foreign >/dev/null 2>&1 || return 1
  ! foreign/bin/python3 -c 'import numpy' 2>/dev/null || return 1 # it must be foreign
  "$BIN" $S --steps 6 --log-every 1 --metrics m.jsonl --trace tr.json --trace-steps 2:5 >/dev/null 2>&1
  [[ -s m.jsonl && -s tr.rank0.json ]] || return 1
  printf 'mode,ranks,samples_per_s,efficiency\nstrong,1,100,1\nstrong,2,180,0.9\n' >sweep.csv
  echo "my notes" >notes.txt
  # The GPU host: its python3 has torch (and numpy), the provisioned one none;
  # the stubs say whose they are and end the tool.
  /usr/bin/python3 -m venv --without-pip gpu >/dev/null 2>&1 && /usr/bin/python3 -m venv --without-pip bare >/dev/null 2>&1 || return 1
  local site m
  site=$(gpu/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  for m in numpy torch; do
    mkdir -p "$site/$m"
    echo 'print("the GPU python'"'"'s '$m'"); raise SystemExit(0)' >"$site/$m/__init__.py"
  done
}

pi_have() { /usr/bin/python3 -c "import $1" 2>/dev/null; }

pi_png() {  # NAME FILE: a row saying whether FILE is a PNG
  local sig
  sig=$(head -c 8 "$2" 2>/dev/null | od -An -tx1 | tr -d ' \n')
  check "$1" "a PNG" "${sig:-none}" "$([[ $sig == 89504e470d0a1a0a ]] || echo "$2 is not a PNG")"
}

python_interpreter() {
  rm -rf "$T/pi"
  mkdir "$T/pi" && cd "$T/pi" || return
  if ! pi_fixtures; then
    check "python interpreter: fixtures" "a venv without packages, metrics, a trace" "not made" \
      "/usr/bin/python3 -m venv --without-pip or the fixture run of $BIN failed"
    cd "$T" || return
    return
  fi
  local F=$T/pi/foreign/bin L=$HERE
  local study=(--trainer "$BIN" --trials 2 --objective test_loss --param lr=log:1e-3:1e-1)
  local trial=(-- --data synthetic --steps 3 --device cpu --threads 1)
  local ON FO
  pi_on "$F"
  FO=("${ON[@]}")

  # tune.py, issue 47's case, in each documented form.
  case_runs "launch/tune.py, a venv's python3 first on PATH" "complete|best trial" 0 -- \
    "${FO[@]}" "$L/tune.py" "${study[@]}" --study-dir st1 "${trial[@]}"
  case_runs "python3 launch/tune.py, a venv's python3 first" "complete|best trial" 0 -- \
    "${FO[@]}" python3 "$L/tune.py" "${study[@]}" --study-dir st2 "${trial[@]}"
  case_runs "PYTHONPATH=launch python3 -m ddp_tools.tune.tune --help" "usage: tune.py" 0 -- \
    "${FO[@]}" env PYTHONPATH="$L" python3 -m ddp_tools.tune.tune --help
  guard notes.txt
  case_tool "python launch/tune.py --study-dir my notes.txt (a refusal stays one line)" "--study-dir notes.txt|not a directory" 2 -- \
    "${FO[@]}" python "$L/tune.py" "${study[@]}" --study-dir notes.txt "${trial[@]}"

  # The plots and TensorBoard (matplotlib, tensorboard).
  case_runs "launch/scaling_model.py --synthetic --png, a venv's python3 first" "strong" 0 -- \
    "${FO[@]}" "$L/scaling_model.py" --synthetic gpt2-124m --ranks 1,2 --png sm.png
  pi_png "… its --png" sm.png
  case_runs "python3 launch/plot_metrics.py m.jsonl -o po" "po/overview.png" 0 -- \
    "${FO[@]}" python3 "$L/plot_metrics.py" m.jsonl -o po
  case_runs "launch/plot_sweep.py sweep.csv -o ps" "ps/sweep_efficiency.png" 0 -- \
    "${FO[@]}" "$L/plot_sweep.py" sweep.csv -o ps
  case_runs "python3 launch/metrics_to_tensorboard.py m.jsonl tb" "wrote" 0 -- \
    "${FO[@]}" python3 "$L/metrics_to_tensorboard.py" m.jsonl tb
  case_runs "launch/merge_traces.py (standard library only: stays on python3)" "1 ranks" 0 -- \
    "${FO[@]}" "$L/merge_traces.py" tr.rank0.json -o merged.json

  # PyTorch's side (torch, numpy, safetensors) where the installers gave it.
  if pi_have torch; then
    case_runs "launch/torch_gpt.py --self-test, a venv's python3 first" "ok" 0 -- "${FO[@]}" "$L/torch_gpt.py" --self-test
  else
    case_runs "launch/torch_gpt.py --self-test (no torch for /usr/bin/python3: a skip)" "SKIP" 77 -- "${FO[@]}" "$L/torch_gpt.py" --self-test
  fi

  # Every other entry point's --help as launch/x.py (the ones above import
  # their packages at import: numpy, torch).
  local s n
  for s in "$L"/*.py; do
    n=$(basename "$s" .py)
    case $n in tune | scaling_model | plot_metrics | plot_sweep | metrics_to_tensorboard | merge_traces | torch_gpt) continue ;; esac
    case_runs "launch/$n.py --help, a venv's python3 first" "usage: $n" 0 -- "${FO[@]}" "$s" --help
  done

  # Other foreign interpreters: a pyenv one (3.10+), an old `python` (Python 2.7, 3.6).
  local pyenv_root=${PYENV_ROOT:-$HOME/.pyenv} p
  p=$(ls -d "$pyenv_root"/versions/3.1[0-9]*/bin/python3 2>/dev/null | head -1)
  if [[ -n $p ]] && "$p" -m venv --without-pip pyv >/dev/null 2>&1; then
    pi_on "$T/pi/pyv/bin"
    case_runs "launch/tune.py, a venv of pyenv's $(basename "$(dirname "$(dirname "$p")")") first" "complete|best trial" 0 -- \
      "${ON[@]}" "$L/tune.py" "${study[@]}" --study-dir st3 "${trial[@]}"
  fi
  local old v
  for p in "$pyenv_root"/versions/2.7*/bin/python "$pyenv_root"/versions/3.6*/bin/python; do
    [[ -x $p ]] || continue
    v=$("$p" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    old=$T/pi/old-$v
    mkdir -p "$old" && ln -sf "$p" "$old/python"
    pi_on "$old"
    case_runs "python launch/scaling_model.py --png, python = pyenv's Python $v" "strong" 0 -- \
      "${ON[@]}" python "$L/scaling_model.py" --synthetic gpt2-124m --ranks 1,2 --png "old-$v.png"
  done

  # The GPU host: python3 has torch, the provisioned interpreter (here a bare venv) none.
  pi_on "$T/pi/gpu/bin"
  case_runs "launch/torch_gpt.py --help, python3 has torch and the provisioned one not: stays" "the GPU python's" 0 -- \
    "${ON[@]}" env DDP_TOOLS_PYTHON="$T/pi/bare/bin/python3" "$L/torch_gpt.py" --help
  # DDP_TOOLS_PYTHON names nothing: the tool stays on python3 and says what it lacks, in one line.
  absent st4
  case_tool "DDP_TOOLS_PYTHON=/nonexistent launch/tune.py, a venv's python3 first" "optuna|not installed" 2 -- \
    "${FO[@]}" env DDP_TOOLS_PYTHON=/nonexistent "$L/tune.py" "${study[@]}" --study-dir st4 "${trial[@]}"
  cd "$T" || return
}
