# trace.sh: careless-user cases of --trace: windows that are empty,
# reversed or out of range, trace files that would land on inputs, on the
# metrics or in missing directories, and modes with no steps to trace.

trace() {
  local R="$D --steps 4"
  case_refused "--trace-steps 5:2 (reversed)" "--trace-steps" -- "$BIN" $R --trace t.json --trace-steps 5:2
  case_refused "--trace-steps 0:3 (steps count from 1)" "--trace-steps" -- "$BIN" $R --trace t.json --trace-steps 0:3
  case_refused "--trace-steps -1:3" "--trace-steps" -- "$BIN" $R --trace t.json --trace-steps -1:3
  case_refused "--trace-steps abc" "--trace-steps" -- "$BIN" $R --trace t.json --trace-steps abc
  case_refused "--trace-steps 2:" "--trace-steps" -- "$BIN" $R --trace t.json --trace-steps 2:
  case_refused "--trace-steps 1:2:3" "--trace-steps" -- "$BIN" $R --trace t.json --trace-steps 1:2:3
  case_refused "--trace-steps without --trace" "--trace-steps|--trace" -- "$BIN" $R --trace-steps 1:2
  case_runs "--trace-steps 3:3 (one step)" "done:" 0 -- "$BIN" $R --trace t1.json --trace-steps 3:3
  check "… its file" "t1.rank0.json, JSON" "$(ls t1.rank0.json 2>&1)" "$(python3 -c 'import json; json.load(open("t1.rank0.json"))' 2>&1 | tail -1)"
  absent t2.rank0.json
  case_runs "--trace-steps 100:200, the run has 4 steps" "trace" 0 -- "$BIN" $R --trace t2.json --trace-steps 100:200
  case_runs "--trace-steps 1:1000000000 (a window past the end)" "done:" 0 -- "$BIN" $R --trace t3.json --trace-steps 1:1000000000
  cp train.csv tin.rank0.json
  guard tin.rank0.json train.csv
  case_refused "--trace tin.json: tin.rank0.json is my file" "tin.rank0.json" -- "$BIN" $R --trace tin.json
  ln -sf train.csv tcsv.rank0.json
  guard train.csv
  case_refused "--trace: its rank file links to --train-csv" "tcsv.rank0.json|input" -- "$BIN" $R --trace tcsv.json
  cp train.csv train.rank0.csv
  guard train.rank0.csv
  case_refused "--trace train.csv: its rank file train.rank0.csv is --train-csv" "train.rank0.csv|input" -- "$BIN" ${R/train.csv/train.rank0.csv} --trace "$T/train.csv"
  absent nodir
  case_refused "--trace in a missing directory" "--trace|nodir" -- "$BIN" $R --trace nodir/t.json
  mkdir -p tdir.rank0.json
  case_refused "--trace: its rank file is a directory" "tdir.rank0.json|directory" -- "$BIN" $R --trace tdir.json
  case_refused "--trace with --metrics on the rank file" "--metrics|--trace" -- "$BIN" $R --trace tm.json --metrics tm.rank0.json
  case_refused "--trace with --eval-only" "--trace" -- "$BIN" $D --eval-only --init-weights w0 --trace t.json
  case_refused "--trace with --predict" "--trace" -- "$BIN" --device cpu --threads 1 --layers 4,8,3 --init-weights w0 --predict x.npy --predictions p.npy --trace t.json
  case_refused "--trace with --generate" "--trace" -- "$BIN" --device cpu --threads 1 --model gpt --resume "$T/$(ck ckg 2)" --generate 5 --prompt ab --trace t.json
  case_refused "--trace with --cuda-graph" "--trace|--cuda-graph" -- "$BIN" $R --trace t.json --cuda-graph
  case_refused "--trace ''" "--trace" -- "$BIN" $R --trace ''
  case_runs "--trace of an earlier trace (replaced)" "done:" 0 -- "$BIN" $R --trace t1.json
}
