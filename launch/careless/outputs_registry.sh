# outputs_registry.sh: careless-user cases of outputs that land on files
# ddp_train did not write (trainer/io/output_registry.h): a user's array at
# --predictions, --save-weights or --generate-logits, another tool's JSON
# Lines at --metrics, a copy of a trace, a user's .bin at ddp_tokenize's
# --output, an output of ours edited since, or copied: each refused in one
# line naming --overwrite and left as it was; with --overwrite replaced and
# said; ddp_train's own earlier outputs replaced and said; a registry that
# cannot be written, or holds garbage, or a home that is not set, never
# stops a run. The registry is $XDG_STATE_HOME/ddp_train/outputs.jsonl,
# which careless_user.sh points at the scratch directory.

outputs_registry() {
  local P="--device cpu --threads 1 --layers 4,8,3 --init-weights $T/w0 --batch-size 8" TOK R WHY
  TOK="$(dirname "$BIN")/ddp_tokenize"
  R="--tokenizer gpt2 --ranks $(realpath "$HERE/../data/gpt2.tiktoken")"
  npy or-x.npy float32 10 4
  npy or-users.npy float32 10 3
  guard or-users.npy
  case_refused "--predictions: a user's [10,3] float32 array" "--predictions or-users.npy|not a file ddp_train wrote|--overwrite" -- \
    "$BIN" $P --predict or-x.npy --predictions or-users.npy
  case_runs "… the same with --overwrite" "or-users.npy: replacing it (--overwrite)" 0 -- \
    "$BIN" $P --predict or-x.npy --predictions or-users.npy --overwrite
  case_runs "--predictions: our own earlier output (the run above's)" "or-users.npy: replacing it (written by ddp_train" 0 -- \
    "$BIN" $P --predict or-x.npy --predictions or-users.npy
  printf 'x' >>or-users.npy
  guard or-users.npy
  case_refused "--predictions: ours, one byte appended since" "or-users.npy|not a file ddp_train wrote" -- \
    "$BIN" $P --predict or-x.npy --predictions or-users.npy
  "$BIN" $P --predict or-x.npy --predictions or-ours.npy >/dev/null 2>&1
  cp or-ours.npy or-copy.npy
  guard or-copy.npy
  case_refused "--predictions: a copy of ours (cp: a new inode)" "or-copy.npy|not a file ddp_train wrote" -- \
    "$BIN" $P --predict or-x.npy --predictions or-copy.npy

  printf '{"event":"epoch","tool":"another"}\n' >or-other.jsonl
  guard or-other.jsonl
  case_refused "--metrics: another tool's JSON Lines starting {\"event\":" "--metrics or-other.jsonl|--overwrite" -- \
    "$BIN" $D --steps 2 --metrics or-other.jsonl
  case_runs "… the same with --overwrite" "or-other.jsonl: replacing it (--overwrite)" 0 -- \
    "$BIN" $D --steps 2 --metrics or-other.jsonl --overwrite
  case_runs "--metrics: our own earlier metrics" "--metrics or-other.jsonl: replacing it (written by ddp_train --metrics" 0 -- \
    "$BIN" $D --steps 2 --metrics or-other.jsonl
  printf '{"event":"mine"}\n' >or-mine.jsonl
  guard or-mine.jsonl
  case_refused "--resume appending to a user's JSON Lines" "--metrics or-mine.jsonl|not appending" -- \
    "$BIN" $D --steps 4 --resume "$BASE" --metrics or-mine.jsonl

  rm -rf or-w; mkdir -p or-w; cp w0/layer0.weight.npy or-w/layer0.weight.npy
  guard or-w/layer0.weight.npy
  case_refused "--save-weights DIR: a user's layer0.weight.npy (a copy of one)" "layer0.weight.npy|--overwrite" -- \
    "$BIN" $D --steps 2 --save-weights or-w
  case_runs "… the same with --overwrite" "replaced at the end (--overwrite)" 0 -- "$BIN" $D --steps 2 --save-weights or-w --overwrite
  case_runs "--save-weights DIR: our own earlier save" "file(s) of an earlier save in or-w will be replaced at the end" 0 -- "$BIN" $D --steps 2 --save-weights or-w
  "$BIN" $D --steps 2 --save-weights or-a.safetensors >/dev/null 2>&1
  cp or-a.safetensors or-b.safetensors
  guard or-b.safetensors
  case_refused "--save-weights X.safetensors: a copy of a save" "--save-weights or-b.safetensors|--overwrite" -- \
    "$BIN" $D --steps 2 --save-weights or-b.safetensors
  case_runs "--save-weights X.safetensors: our own earlier save" "or-a.safetensors: replacing it (written by" 0 -- \
    "$BIN" $D --steps 2 --save-weights or-a.safetensors

  "$BIN" $D --steps 2 --trace or-t.json >/dev/null 2>&1
  cp or-t.rank0.json or-c.rank0.json
  guard or-c.rank0.json
  case_refused "--trace: a copy of an earlier trace" "or-c.rank0.json|--overwrite" -- "$BIN" $D --steps 2 --trace or-c.json
  case_runs "--trace: our own earlier trace" "or-t.rank0.json: replacing it (written by" 0 -- "$BIN" $D --steps 2 --trace or-t.json

  gpt_fixtures
  npy or-logits.npy float32 2 2
  guard or-logits.npy
  case_refused "--generate-logits: a user's array" "--generate-logits or-logits.npy|--overwrite" -- \
    "$BIN" --device cpu --threads 1 --model gpt --resume "$T/$(ck ckg 2)" --generate 3 --prompt ab --generate-logits or-logits.npy

  printf 'hello\n' >or-in.txt
  printf 'not a shard of ours' >or-out.bin
  guard or-out.bin
  tok_refused "ddp_tokenize -o: a user's .bin" "--output or-out.bin|--overwrite" -- "$TOK" $R or-in.txt -o or-out.bin
  run_bin "$TOK" $R or-in.txt -o or-out.bin --overwrite
  run_bin "$TOK" $R or-in.txt -o or-out.bin
  WHY=""
  ((RC == 0)) || WHY+="exit $RC; "
  grep -q "replacing it (written by ddp_tokenize" "$T/.err" || WHY+="not said; "
  common_checks
  check "ddp_tokenize -o: its own earlier shard" "exit 0, 'replacing it (written by ddp_tokenize'" "exit $RC" "$WHY"

  # The registry itself: unwritable, garbage, no home.
  printf 'a file where the state directory goes' >or-state-file
  run_bin env XDG_STATE_HOME="$T/or-state-file" "$BIN" $P --predict or-x.npy --predictions or-new.npy
  WHY=""
  ((RC == 0)) || WHY+="exit $RC; "
  grep -q "note: cannot record .*or-new.npy" "$T/.err" || WHY+="no note; "
  common_checks
  check "a registry that cannot be written (its directory is a file)" "exit 0, one note" "exit $RC: $(grep -a note "$T/.err" | cut -c1-100)" "$WHY"
  printf '{"dev": 1, "ino": \n\xff\xfe garbage\n[1,2]\n' >>"$XDG_STATE_HOME/ddp_train/outputs.jsonl"
  case_runs "a registry with torn and garbage lines: our output still ours" "or-ours.npy: replacing it (written by" 0 -- \
    "$BIN" $P --predict or-x.npy --predictions or-ours.npy
  rm -f or-nohome.npy
  case_runs "no HOME, no XDG_STATE_HOME: the output, and a note" "note: cannot record|neither XDG_STATE_HOME nor HOME" 0 -- \
    env -u HOME -u XDG_STATE_HOME "$BIN" $P --predict or-x.npy --predictions or-nohome.npy
  guard or-nohome.npy
  case_refused "no HOME, no XDG_STATE_HOME: the second run's output is not known" "or-nohome.npy|neither XDG_STATE_HOME nor HOME" -- \
    env -u HOME -u XDG_STATE_HOME "$BIN" $P --predict or-x.npy --predictions or-nohome.npy
}
