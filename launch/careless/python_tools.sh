# python_tools.sh: the careless-user cases of the Python tools in launch/
# (merge_traces, scaling_model, validate_scaling_model, plot_metrics,
# plot_sweep, metrics_to_tensorboard, tune, scaling_sweep, zero_table,
# torch_load_weights): empty, torn, foreign and huge inputs, a FIFO or a
# directory as an input, outputs on inputs (directly, ./, symlink, hard link),
# in a missing directory, on a directory or on someone else's file, a user's
# OUT.tmp, bad numbers, and tune.py studies interrupted and resumed; issue
# 47's rule at every tool's output (pt_owned_outputs): a user's file refused
# and unchanged, --overwrite replacing it, the tool's own output replaced and
# said, that output refused again once edited, a registry that cannot be
# written costing one note. A refusal is exit 2, one line (besides argparse's
# usage), the inputs unchanged and nothing created in the working directory.
# Sourced by launch/careless_user.sh (BIN, T, HERE, S, MPI); works in $T/pt,
# with its own output registry ($T/pt-state, XDG_STATE_HOME). Cases needing
# tensorboard run where it is installed; torch_load_weights' missing-torch
# case where torch is not.

pt_have() { /usr/bin/python3 -c "import $1" 2>/dev/null; }

# pt_refused NAME WORDS -- CMD...: case_tool's exit-2 refusal that also leaves
# the working directory's names as they were (no output, no temporary).
pt_refused() {
  guard_dirs .
  case_tool "$1" "$2" 2 "${@:3}"
}

pt_fixtures() {
  "$BIN" $S --steps 6 --log-every 1 --metrics m.jsonl --trace tr.json --trace-steps 2:5 >/dev/null 2>&1
  $MPI -np 2 "$BIN" $S --steps 6 --trace t2.json --trace-steps 2:5 >/dev/null 2>&1
  [[ -s tr.rank0.json && -s t2.rank1.json && -s m.jsonl ]] || return 1
  : >empty.json
  head -c 3000 tr.rank0.json >torn.json
  head -c "$(($(stat -c %s m.jsonl) - 40))" m.jsonl >torn.jsonl
  printf '\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR' >x.png
  echo '{"name": "my-app", "version": "1.0.0", "dependencies": {}}' >package.json
  echo '[1, 2, 3]' >array.json
  /usr/bin/python3 - <<'PY'
import json
with open("tr.rank0.json") as f:
    doc = json.load(f)
doc["traceEvents"].insert(0, 7)
with open("ev.json", "w") as f:
    json.dump(doc, f)
with open("nan.json", "w") as f:
    f.write('{"name": "x", "gpus_per_node": 8, "intra": {"bandwidth_GBps": NaN, "latency_us": 3},'
            ' "inter": {"bandwidth_GBps": 50, "latency_us": 8}}\n')
PY
  truncate -s 8G huge.json
  mkfifo fifo.json
  mkdir -p tdir odir
  echo "my notes" >notes.txt
  echo "# my notes on scaling" >notes.md
  printf 'mode,ranks,samples_per_s,efficiency\nstrong,1,100,1\nstrong,2,180,0.9\n' >sweep.csv
  printf 'mode,ranks,samples_per_s,efficiency\nstrong,1,100,1\nstrong,2' >torn.csv
  printf 'mode,ranks,samples_per_s,efficiency\nstrong,1,100,1\nstrong,1e300,180,0.9\n' >absurd.csv
  /usr/bin/python3 "$HERE/scaling_model.py" --trace tr.rank0.json --ranks 1,2,4 --csv pred.csv >/dev/null
  "$BIN" $S --steps 2 --save-weights w.safetensors >/dev/null 2>&1
}

pt_merge_traces() {
  local mt=(/usr/bin/python3 "$HERE/merge_traces.py")
  guard empty.json; pt_refused "merge_traces: a 0-byte trace" "empty.json|not JSON" -- "${mt[@]}" empty.json -o o.json
  guard torn.json; pt_refused "merge_traces: a trace cut mid-record (no closing bracket)" "torn.json|not JSON" -- "${mt[@]}" torn.json -o o.json
  guard m.jsonl; pt_refused "merge_traces: a --metrics file as a trace" "m.jsonl|not JSON" -- "${mt[@]}" m.jsonl -o o.json
  pt_refused "merge_traces: a PNG as a trace" "x.png|not JSON" -- "${mt[@]}" x.png -o o.json
  pt_refused "merge_traces: another program's JSON" "package.json|not a ddp_train trace" -- "${mt[@]}" package.json -o o.json
  pt_refused "merge_traces: an event that is a number" "ev.json|traceEvents[0]" -- "${mt[@]}" ev.json -o o.json
  pt_refused "merge_traces: a sparse 8 GiB trace" "huge.json|limit" -- "${mt[@]}" huge.json -o o.json
  pt_refused "merge_traces: a FIFO as a trace" "fifo.json|not a regular file" -- "${mt[@]}" fifo.json -o o.json
  pt_refused "merge_traces: a directory as a trace" "tdir|is a directory" -- "${mt[@]}" tdir -o o.json
  pt_refused "merge_traces: a missing trace" "nope.json|no such file" -- "${mt[@]}" nope.json -o o.json
  guard t2.rank0.json; pt_refused "merge_traces: -o ./(an input)" "--output|one of the inputs" -- "${mt[@]}" t2.json -o ./t2.rank0.json
  ln -sf t2.rank1.json soft.json; guard t2.rank1.json
  pt_refused "merge_traces: -o a symlink to an input" "soft.json|one of the inputs" -- "${mt[@]}" t2.json -o soft.json
  ln -f t2.rank1.json hard.json; guard t2.rank1.json
  pt_refused "merge_traces: -o a hard link of an input" "hard.json|one of the inputs" -- "${mt[@]}" t2.json -o hard.json
  pt_refused "merge_traces: -o in a missing directory" "nodir|does not exist" -- "${mt[@]}" t2.json -o nodir/o.json
  guard_dirs odir; pt_refused "merge_traces: -o an existing directory" "odir|is a directory" -- "${mt[@]}" t2.json -o odir
  guard notes.txt; pt_refused "merge_traces: -o my notes.txt" "notes.txt|not a file ddp_train wrote|--overwrite" -- "${mt[@]}" t2.json -o notes.txt
  guard t2.rank0.json; pt_refused "merge_traces: -o an input, with --overwrite" "--output|one of the inputs" -- "${mt[@]}" t2.json -o t2.rank0.json --overwrite
  rm -rf mo; mkdir mo; echo "precious" >mo/merged.json.tmp; guard mo/merged.json.tmp
  case_runs "merge_traces: -o merged.json beside my merged.json.tmp" "2 ranks" 0 -- "${mt[@]}" t2.json -o mo/merged.json
  local left; left=$(ls -A mo | tr '\n' ' ')
  check "… what it left in that directory" "merged.json and my .tmp only" "$left" \
    "$([[ $left == "merged.json merged.json.tmp " ]] || echo "left: $left")"
}

pt_scaling_model() {
  local sm=(/usr/bin/python3 "$HERE/scaling_model.py")
  pt_refused "scaling_model: --trace a FIFO" "--trace fifo.json|not a regular file" -- "${sm[@]}" --trace fifo.json
  pt_refused "scaling_model: --trace a sparse 8 GiB file" "--trace huge.json|limit" -- "${sm[@]}" --trace huge.json
  guard tr.rank0.json; pt_refused "scaling_model: --csv = --trace" "--csv|one of the inputs" -- "${sm[@]}" --trace tr.rank0.json --csv tr.rank0.json
  ln -f tr.rank0.json trace-hard.md; guard tr.rank0.json
  pt_refused "scaling_model: --md a hard link of --trace" "--md|one of the inputs" -- "${sm[@]}" --trace tr.rank0.json --md trace-hard.md
  absent out.x; pt_refused "scaling_model: --csv and --md one path" "--md out.x|also --csv" -- "${sm[@]}" --trace tr.rank0.json --csv out.x --md out.x
  absent odir.png; pt_refused "scaling_model: --png an existing directory" "--png odir|is a directory" -- "${sm[@]}" --trace tr.rank0.json --png odir
  pt_refused "scaling_model: --md in a missing directory" "--md|does not exist" -- "${sm[@]}" --trace tr.rank0.json --md nodir/m.md
  pt_refused "scaling_model: --cluster a JSON array" "--cluster array.json|JSON object" -- "${sm[@]}" --trace tr.rank0.json --cluster array.json
  pt_refused "scaling_model: --cluster a PNG" "--cluster x.png|not JSON" -- "${sm[@]}" --trace tr.rank0.json --cluster x.png
  pt_refused "scaling_model: --cluster with a NaN bandwidth" "--cluster nan.json|finite bandwidth" -- "${sm[@]}" --trace tr.rank0.json --cluster nan.json
  pt_refused "scaling_model: --allreduce-table a PNG" "--allreduce-table x.png" -- "${sm[@]}" --trace tr.rank0.json --allreduce-table x.png
  guard notes.md; pt_refused "scaling_model: --projection my notes.md" "--projection notes.md|not a file ddp_train wrote" -- "${sm[@]}" --projection notes.md
  pt_refused "scaling_model: --ranks -4" "--ranks" -- "${sm[@]}" --synthetic gpt2-124m --ranks -4
  pt_refused "scaling_model: --mfu nan" "--mfu nan" -- "${sm[@]}" --synthetic gpt2-124m --mfu nan
}

pt_validate_scaling_model() {
  local vs=(/usr/bin/python3 "$HERE/validate_scaling_model.py")
  guard t2.rank0.json; pt_refused "validate_scaling_model: --out = an input trace" "--out|one of the inputs" -- "${vs[@]}" --from-traces tr.rank0.json t2.rank0.json --out t2.rank0.json
  pt_refused "validate_scaling_model: --out in a missing directory" "--out|does not exist" -- "${vs[@]}" --from-traces tr.rank0.json t2.rank0.json --out nodir/v.md
  pt_refused "validate_scaling_model: --trainer missing" "--trainer nope|not an executable" -- "${vs[@]}" --trainer nope
  pt_refused "validate_scaling_model: --steps -3" "--steps -3" -- "${vs[@]}" --steps -3
  pt_refused "validate_scaling_model: an N = 2 trace that is a FIFO" "fifo.json|not a regular file" -- "${vs[@]}" --from-traces tr.rank0.json fifo.json
}

pt_plot_metrics() {
  local pm=(/usr/bin/python3 "$HERE/plot_metrics.py")
  pt_refused "plot_metrics: a FIFO as metrics" "fifo.json|not a regular file" -- "${pm[@]}" fifo.json -o po
  pt_refused "plot_metrics: a sparse 8 GiB metrics file" "huge.json|limit" -- "${pm[@]}" huge.json -o po
  guard tr.rank0.json; pt_refused "plot_metrics: a trace as metrics" "tr.rank0.json|line 1 is not JSON" -- "${pm[@]}" tr.rank0.json -o po
  pt_refused "plot_metrics: a 0-byte metrics file" "empty.json|no step records" -- "${pm[@]}" empty.json -o po
  absent "$T/loss.png" "$T/overview.png"; pt_refused "plot_metrics: --prefix ../ (out of -o)" "--prefix ../|not a path" -- "${pm[@]}" m.jsonl -o odir --prefix ../
  rm -rf po; mkdir po; cp m.jsonl po/loss.png; guard po/loss.png; guard_dirs po
  case_tool "plot_metrics: my metrics named loss.png in -o" "po/loss.png|one of the inputs" 2 -- "${pm[@]}" po/loss.png -o po
  rm -rf po; mkdir po; echo "my notes" >po/lr.png; guard po/lr.png; guard_dirs po
  case_tool "plot_metrics: my text file lr.png in -o" "po/lr.png|not a file ddp_train wrote" 2 -- "${pm[@]}" m.jsonl -o po
  guard m.jsonl; pt_refused "plot_metrics: -o the metrics file" "-o m.jsonl|not a directory" -- "${pm[@]}" m.jsonl -o m.jsonl
}

pt_plot_sweep() {
  local ps=(/usr/bin/python3 "$HERE/plot_sweep.py")
  pt_refused "plot_sweep: a FIFO as the sweep CSV" "fifo.json|not a regular file" -- "${ps[@]}" fifo.json -o so
  guard torn.csv; pt_refused "plot_sweep: a CSV cut mid-row" "torn.csv|line 3|fewer cells" -- "${ps[@]}" torn.csv -o so
  pt_refused "plot_sweep: ranks 1e300" "absurd.csv|line 3|ranks" -- "${ps[@]}" absurd.csv -o so
  pt_refused "plot_sweep: a PNG as the sweep CSV" "x.png|not a sweep CSV" -- "${ps[@]}" x.png -o so
  pt_refused "plot_sweep: metrics as the --prediction CSV" "m.jsonl|no column" -- "${ps[@]}" sweep.csv --prediction m.jsonl -o so
  rm -rf so; mkdir so; cp sweep.csv so/sweep_efficiency.png; guard so/sweep_efficiency.png; guard_dirs so
  case_tool "plot_sweep: my CSV named sweep_efficiency.png in -o" "sweep_efficiency.png|one of the inputs" 2 -- "${ps[@]}" so/sweep_efficiency.png -o so
}

pt_metrics_to_tensorboard() {
  local tb=(/usr/bin/python3 "$HERE/metrics_to_tensorboard.py")
  pt_refused "metrics_to_tensorboard: a FIFO as metrics" "fifo.json|not a regular file" -- "${tb[@]}" fifo.json tb
  pt_refused "metrics_to_tensorboard: a sparse 8 GiB metrics file" "huge.json|limit" -- "${tb[@]}" huge.json tb
  guard m.jsonl; pt_refused "metrics_to_tensorboard: the log dir = the metrics file" "m.jsonl|not a directory" -- "${tb[@]}" m.jsonl m.jsonl
  if pt_have tensorboard.summary; then
    rm -rf tb; guard torn.jsonl
    case_runs "metrics_to_tensorboard: metrics cut mid-record" "torn last line|wrote" 0 -- "${tb[@]}" torn.jsonl tb
  fi
}

# pt_interrupt SIG: tune.py stopped by SIG while its first trial runs (a
# launcher holds it), then the same command finishes the study's 2 trials.
pt_interrupt() {
  local sig=$1 dir=st-$1 flag=$PWD/st-$1.held pid n
  local hold="sh -c 'if [ ! -e $flag ]; then touch $flag; sleep 30; fi; exec \"\$@\"' hold"
  local cmd=(/usr/bin/python3 "$HERE/tune.py" --trainer "$BIN" --study-dir "$dir" --trials 2 --objective test_loss
    --param lr=log:1e-3:1e-1 --launcher "$hold" -- --data synthetic --steps 3 --device cpu --threads 1)
  rm -rf "$dir" "$flag"
  # A script's background job starts with SIGINT ignored, and Python would keep
  # it so: restore the default, as a terminal's Ctrl-C finds it.
  timeout -k 2 60 /usr/bin/python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "${cmd[@]}" >"$T/.out" 2>"$T/.err" </dev/null &
  pid=$!
  for _ in $(seq 200); do [[ -e $flag ]] && break; sleep 0.1; done
  sleep 0.3
  kill "-$sig" "$pid"
  wait "$pid"
  RC=$?
  WHY=""
  ((RC == 130)) || WHY+="exit $RC; "
  n=$(grep -c . "$T/.err")
  [[ $n == 1 ]] || WHY+="$n stderr lines; "
  grep -q "re-run the same command" "$T/.err" || WHY+="no 're-run the same command'; "
  common_checks
  check "tune.py: SIG$sig mid-trial" "exit 130, one line" "exit $RC: $(head -1 "$T/.err" | cut -c1-120)" "$WHY"
  run_bin "${cmd[@]}"
  WHY=""
  ((RC == 0)) || WHY+="exit $RC; "
  n=$(grep -c '| complete |' "$T/.out")
  [[ $n == 2 ]] || WHY+="$n complete trials, not 2; "
  grep -q '| fail (interrupted) |' "$T/.out" || WHY+="the interrupted trial not listed; "
  common_checks
  check "… the same command again" "exit 0, 2 complete (the stopped one not counted)" "exit $RC: $n complete" "$WHY"
}

pt_tune() {
  local tu=(/usr/bin/python3 "$HERE/tune.py" --trainer "$BIN" --trials 2 --objective test_loss --param lr=log:1e-3:1e-1)
  local trial=(-- --data synthetic --steps 3 --device cpu --threads 1)
  guard notes.txt; pt_refused "tune.py: --study-dir my notes.txt" "--study-dir notes.txt|not a directory" -- "${tu[@]}" --study-dir notes.txt "${trial[@]}"
  rm -rf sf; mkdir sf; echo "not a database" >sf/study.db; guard sf/study.db; guard_dirs sf
  case_tool "tune.py: a study.db that is not SQLite" "--study-dir sf|not a SQLite" 2 -- "${tu[@]}" --study-dir sf "${trial[@]}"
  rm -rf sc; mkdir sc; printf 'SQLite format 3\0\020\0' >sc/study.db; head -c 300 /dev/zero >>sc/study.db; guard sc/study.db; guard_dirs sc
  case_tool "tune.py: a study.db cut short" "--study-dir sc|not a readable study" 2 -- "${tu[@]}" --study-dir sc "${trial[@]}"
  rm -rf sd; mkdir -p sd/study.db; guard_dirs sd
  case_tool "tune.py: study.db is a directory" "--study-dir sd|is a directory" 2 -- "${tu[@]}" --study-dir sd "${trial[@]}"
  absent sn; pt_refused "tune.py: --timeout nan" "--timeout nan" -- "${tu[@]}" --study-dir sn --timeout nan "${trial[@]}"
  absent sn; pt_refused "tune.py: --seed -1" "--seed -1" -- "${tu[@]}" --study-dir sn --seed -1 "${trial[@]}"
  absent sn; pt_refused "tune.py: --startup-trials -3" "--startup-trials" -- "${tu[@]}" --study-dir sn --startup-trials -3 "${trial[@]}"
  absent sn; pt_refused "tune.py: --launcher not a command" "--launcher|nosuchcmd" -- "${tu[@]}" --study-dir sn --launcher "nosuchcmd -n 2" "${trial[@]}"
  absent sn; pt_refused "tune.py: --trials -1" "--trials" -- "${tu[@]}" --study-dir sn --trials -1 "${trial[@]}"
  pt_interrupt INT
  pt_interrupt TERM
}

pt_scaling_sweep() {
  local ss=(/usr/bin/python3 "$HERE/scaling_sweep.py" --ranks 1 --steps 3 --data synthetic --global-batch 8 --trainer "$BIN")
  local one=(--no-mpirun-for-1)
  local trial=(-- --threads 1)
  guard notes.txt; pt_refused "scaling_sweep: --out-dir my notes.txt" "--out-dir notes.txt|not a directory" -- "${ss[@]}" "${one[@]}" --out-dir notes.txt "${trial[@]}"
  absent sw; pt_refused "scaling_sweep: --prediction a PNG (before any run)" "--prediction|x.png" -- "${ss[@]}" "${one[@]}" --out-dir sw --prediction x.png "${trial[@]}"
  absent sw; pt_refused "scaling_sweep: --prediction a FIFO" "--prediction|not a regular file" -- "${ss[@]}" "${one[@]}" --out-dir sw --prediction fifo.json "${trial[@]}"
  rm -rf sw; mkdir sw; cp pred.csv sw/sweep.csv; guard sw/sweep.csv; guard_dirs sw
  case_tool "scaling_sweep: --prediction = <out-dir>/sweep.csv" "sweep.csv|one of the inputs" 2 -- "${ss[@]}" "${one[@]}" --out-dir sw --prediction sw/sweep.csv "${trial[@]}"
  rm -rf sw; mkdir sw; echo "# my notes" >sw/sweep.md; guard sw/sweep.md; guard_dirs sw
  case_tool "scaling_sweep: my sweep.md in --out-dir" "sweep.md|not a file ddp_train wrote" 2 -- "${ss[@]}" "${one[@]}" --out-dir sw "${trial[@]}"
  rm -rf sw; mkdir -p sw/job-strong-n1.sbatch; guard_dirs sw
  case_tool "scaling_sweep --slurm: the job script's name is a directory" "job-strong-n1.sbatch|is a directory" 2 -- "${ss[@]}" --slurm --sbatch /bin/true --out-dir sw "${trial[@]}"
  absent sw2; pt_refused "scaling_sweep: --timeout nan" "--timeout" -- "${ss[@]}" "${one[@]}" --out-dir sw2 --timeout nan "${trial[@]}"
}

pt_zero_table() {
  local zt=(/usr/bin/python3 "$HERE/zero_table.py" --binary "$BIN" --models mlp --ranks 1 --stages 0 --steps 1 --warmup 0)
  pt_refused "zero_table: --ranks a" "--ranks a" -- "${zt[@]}" --ranks a
  pt_refused "zero_table: --ranks 0 (ran as mpiexec -n 0)" "--ranks 0" -- "${zt[@]}" --ranks 0
  pt_refused "zero_table: --models nope" "--models nope" -- "${zt[@]}" --models nope
  pt_refused "zero_table: --out in a missing directory (before the runs)" "--out|does not exist" -- "${zt[@]}" --out nodir/z.md
  guard notes.md; pt_refused "zero_table: --out my notes.md" "--out notes.md|not a file ddp_train wrote" -- "${zt[@]}" --out notes.md
  pt_refused "zero_table: --binary missing" "--binary nope|not an executable" -- "${zt[@]}" --binary nope
}

pt_torch_load_weights() {
  local tl=(/usr/bin/python3 "$HERE/torch_load_weights.py" --weights w.safetensors)
  pt_refused "torch_load_weights: --layers 10,x" "--layers 10,x" -- "${tl[@]}" --layers 10,x
  guard tr.rank0.json; pt_refused "torch_load_weights: --metrics a trace" "--metrics tr.rank0.json|not JSON" -- "${tl[@]}" --layers 10,10 --metrics tr.rank0.json
  pt_refused "torch_load_weights: --weights a FIFO" "--weights fifo.json|not a regular file" -- "${tl[@]}" --layers 10,10 --weights fifo.json
  if ! pt_have torch; then
    guard_dirs .
    case_tool "torch_load_weights: torch not installed" "torch|not installed" 3 -- "${tl[@]}" --layers 10,10 --no-predict --test-x w.safetensors --test-y w.safetensors
  fi
}

# pt_owned NAME OUT WRITER -- CMD...: issue 47's rule at one output OUT of a
# tool (CMD writes it; an @OW argument marks where --overwrite goes, else it
# goes last): my file there refused and unchanged; --overwrite replaces it and
# says so; the same command again replaces the tool's own output, naming
# WRITER; once I edit it (a line appended), refused again.
pt_owned() {
  local name=$1 out=$2 writer=$3 a
  shift 4
  local plain=() ow=()
  for a in "$@"; do
    if [[ $a == @OW ]]; then ow+=(--overwrite); else plain+=("$a") ow+=("$a"); fi
  done
  [[ " $* " == *" @OW "* ]] || ow+=(--overwrite)
  rm -rf "$out"; echo "my notes" >"$out"; guard "$out"
  case_tool "$name: my file at $out" "$out|not a file ddp_train wrote|--overwrite" 2 -- "${plain[@]}"
  case_runs "$name --overwrite: my $out replaced" "replacing $out (--overwrite)" 0 -- "${ow[@]}"
  case_runs "$name again: its own $out replaced, said" "replacing $out (written by $writer at" 0 -- "${plain[@]}"
  echo "my edit" >>"$out"; guard "$out"
  case_tool "$name: its $out, edited since" "$out|not a file ddp_train wrote" 2 -- "${plain[@]}"
}

pt_owned_outputs() {
  local py=/usr/bin/python3 trial=(-- --data synthetic --steps 3 --device cpu --threads 1)
  pt_owned "merge_traces" own.json "merge_traces.py --output" -- $py "$HERE/merge_traces.py" t2.json -o own.json
  pt_owned "scaling_model --csv" own.csv "scaling_model.py --csv" -- $py "$HERE/scaling_model.py" --trace tr.rank0.json --ranks 1,2 --csv own.csv
  pt_owned "scaling_model --png" own.png "scaling_model.py --png" -- $py "$HERE/scaling_model.py" --synthetic gpt2-124m --ranks 1,2 --png own.png
  pt_owned "validate_scaling_model --out" own.md "validate_scaling_model.py --out" -- $py "$HERE/validate_scaling_model.py" --from-traces tr.rank0.json t2.rank0.json --out own.md
  rm -rf opm; mkdir opm
  pt_owned "plot_metrics" opm/lr.png "plot_metrics.py -o" -- $py "$HERE/plot_metrics.py" m.jsonl -o opm --panels lr
  rm -rf ops; mkdir ops
  pt_owned "plot_sweep" ops/sweep_efficiency.png "plot_sweep.py -o" -- $py "$HERE/plot_sweep.py" sweep.csv -o ops
  pt_owned "zero_table --out" own-zero.md "zero_table.py --out" -- $py "$HERE/zero_table.py" --binary "$BIN" --models mlp --ranks 1 --stages 0 --steps 1 --warmup 0 --out own-zero.md
  rm -rf osw; mkdir osw
  pt_owned "scaling_sweep" osw/sweep.md "scaling_sweep.py --out-dir" -- $py "$HERE/scaling_sweep.py" --ranks 1 --steps 3 --data synthetic --global-batch 8 --trainer "$BIN" --no-mpirun-for-1 --out-dir osw @OW -- --threads 1
  rm -rf ost; mkdir ost
  pt_owned "tune.py" ost/trials.md "tune.py --study-dir" -- $py "$HERE/tune.py" --trainer "$BIN" --study-dir ost --trials 1 --objective test_loss --param lr=log:1e-3:1e-1 @OW "${trial[@]}"
  # An empty file holds nothing to lose; an unwritable registry is one note, and the output is written.
  : >empty-out.json
  case_runs "merge_traces: -o an empty file of mine" "1 ranks|-> empty-out.json" 0 -- $py "$HERE/merge_traces.py" tr.rank0.json -o empty-out.json
  echo "not a directory" >state-file
  case_runs "merge_traces: the registry cannot be written (XDG_STATE_HOME a file)" "note: cannot record|a later run will ask for --overwrite|-> unrecorded.json" 0 -- \
    env XDG_STATE_HOME="$PWD/state-file" $py "$HERE/merge_traces.py" tr.rank0.json -o unrecorded.json
  guard unrecorded.json
  case_tool "merge_traces: … so its output is not known as ours" "unrecorded.json|not a file ddp_train wrote" 2 -- $py "$HERE/merge_traces.py" tr.rank0.json -o unrecorded.json
}

python_tools() {
  rm -rf "$T/pt" "$T/pt-state"
  # What the tools (and ddp_train) write is recorded in a registry of this section's own.
  local -x XDG_STATE_HOME=$T/pt-state
  mkdir "$T/pt" && cd "$T/pt" || return
  if ! pt_fixtures; then
    check "python tools: fixtures" "traces, metrics and files made" "not made" "the fixture runs of $BIN failed"
    cd "$T" || return
    return
  fi
  pt_merge_traces
  pt_scaling_model
  pt_validate_scaling_model
  pt_plot_metrics
  pt_plot_sweep
  pt_metrics_to_tensorboard
  pt_tune
  pt_scaling_sweep
  pt_zero_table
  pt_torch_load_weights
  pt_owned_outputs
  cd "$T" || return
}
