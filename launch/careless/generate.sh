# generate.sh: careless-user cases of --generate: prompts (empty, longer
# than the context, invalid UTF-8), sampling parameters (temperature 0,
# negative, NaN; top-k 0, negative, above the vocabulary), N = 0 or huge,
# weights that are missing, damaged or of another model, and where the
# text goes (a full device, a reader that goes away, several ranks).

generate() {
  gpt_fixtures
  local GEN="--device cpu --threads 1 --model gpt --resume $T/$(ck ckg 2)" a b
  local GP="$GEN --prompt ab"
  case_refused "--prompt ''" "--prompt" -- "$BIN" $GEN --generate 5 --prompt ''
  case_refused "--prompt longer than the context (20 bytes, T = 8)" "--prompt|context" -- "$BIN" $GEN --generate 5 --prompt 'abcdefghijklmnopqrst'
  case_runs "--prompt of invalid UTF-8 (bytes 0xff 0xfe: a byte model takes any byte)" "" 0 -- "$BIN" $GEN --generate 5 --prompt $'\xff\xfe'
  run_bin "$BIN" $GEN --generate 20 --prompt 'ab' --temperature 0 --seed 1
  a=$(od -An -tx1 "$T/.out")
  run_bin "$BIN" $GEN --generate 20 --prompt 'ab' --temperature 0 --seed 2
  b=$(od -An -tx1 "$T/.out")
  check "--temperature 0 is greedy: two seeds, one text" "exit 0, same 20 bytes" "exit $RC, $(wc -c <"$T/.out") bytes" \
    "$( ((RC == 0)) || echo "exit $RC")$([[ -n $a && $a == "$b" ]] || echo 'texts differ')$( (($(wc -c <"$T/.out") == 20)) || echo ' not 20 bytes')"
  run_bin "$BIN" $GEN --generate 20 --prompt 'ab' --seed 7
  a=$(od -An -tx1 "$T/.out")
  run_bin "$BIN" $GEN --generate 20 --prompt 'ab' --seed 7
  b=$(od -An -tx1 "$T/.out")
  check "--seed 7 twice: the same text" "exit 0, same bytes" "exit $RC" "$( ((RC == 0)) || echo "exit $RC")$([[ -n $a && $a == "$b" ]] || echo 'texts differ')"
  case_runs "--temperature 1e-30 (no overflow to inf/nan)" "" 0 -- "$BIN" $GEN --generate 5 --prompt 'ab' --temperature 1e-30
  case_runs "--temperature 1e30 (near uniform)" "" 0 -- "$BIN" $GEN --generate 5 --prompt 'ab' --temperature 1e30
  case_refused "--temperature -1" "--temperature" -- "$BIN" $GP --generate 5 --temperature -1
  case_refused "--temperature nan" "--temperature" -- "$BIN" $GP --generate 5 --temperature nan
  case_refused "--temperature inf" "--temperature" -- "$BIN" $GP --generate 5 --temperature inf
  case_runs "--top-k 0 (off, as transformers' top_k=0)" "top-k off" 0 -- "$BIN" $GP --generate 5 --top-k 0
  case_refused "--top-k -3" "--top-k" -- "$BIN" $GP --generate 5 --top-k -3
  case_refused "--top-k 257 (vocabulary 256)" "--top-k|256" -- "$BIN" $GP --generate 5 --top-k 257
  case_runs "--top-k 256 (the whole vocabulary)" "" 0 -- "$BIN" $GP --generate 5 --top-k 256
  case_refused "--generate 0" "--generate" -- "$BIN" $GP --generate 0
  case_refused "--generate -5" "--generate" -- "$BIN" $GP --generate -5
  case_refused "--generate 1e3 (not an integer)" "--generate" -- "$BIN" $GP --generate 1e3
  case_refused "--generate 99999999999999999999" "--generate" -- "$BIN" $GP --generate 99999999999999999999
  # A huge N runs until stopped: SIGTERM ends it with 143 and a line, the
  # bytes so far on stdout.
  run_term_after 2 "$BIN" $GP --generate 1000000000
  WHY=""
  ((RC == 143)) || WHY+="exit $RC; "
  grep -q 'SIGTERM' "$T/.err" || WHY+="no line naming SIGTERM; "
  [[ -s $T/.out ]] || WHY+="no text before the stop; "
  check "--generate 10^9, SIGTERM after 2 s" "143, a line, the text so far" "exit $RC: $(tail -1 "$T/.err" | cut -c1-100)" "$WHY"
  run_bin bash -c "'$BIN' $GP --generate 100000 | head -c 5"
  WHY=""
  ((RC == 0)) || WHY+="pipeline exit $RC; "
  [[ $(wc -c <"$T/.out") == 5 ]] || WHY+="not 5 bytes; "
  common_checks
  check "--generate 100000 | head -c 5 (the reader goes away)" "ends at once, no hang" "exit $RC" "$WHY"
  run_bin "$BIN" $GEN --generate 50 --prompt 'ab'
  cp "$T/.out" one.txt
  case_refused "--generate to /dev/full" "stdout|No space" -- bash -c "'$BIN' $GEN --generate 50 --prompt ab >/dev/full"
  run_bin $MPI -np 2 "$BIN" $GEN --generate 50 --prompt 'ab'
  check "--generate under mpirun -np 2: one text, rank 0's" "exit 0, the 1-rank text" "exit $RC, $(wc -c <"$T/.out") bytes" \
    "$( ((RC == 0)) || echo "exit $RC")$(cmp -s one.txt "$T/.out" || echo ' not the 1-rank text')"
  case_refused "--generate with the MLP" "--generate|gpt" -- "$BIN" --device cpu --threads 1 --init-weights "$T/w0" --generate 5 --prompt ab
  case_refused "--generate without weights" "--generate|--resume" -- "$BIN" --device cpu --threads 1 --model gpt --generate 5 --prompt ab
  case_refused "--generate with --steps" "--steps" -- "$BIN" $GP --generate 5 --steps 3
  case_refused "--generate with --metrics" "--metrics" -- "$BIN" $GP --generate 5 --metrics m.jsonl
  case_refused "--generate with --save-weights" "--save-weights" -- "$BIN" $GP --generate 5 --save-weights x.safetensors
  case_refused "--generate of a checkpoint with --n-layer 3" "--n-layer|1" -- "$BIN" $GP --generate 5 --n-layer 3
  head -c 3000 "$(ck ckg 2)" >cutg.safetensors
  case_refused "--generate of a cut checkpoint" "cutg.safetensors|truncated" -- "$BIN" --device cpu --threads 1 --model gpt --resume cutg.safetensors --generate 5 --prompt ab
  case_refused "--generate of the MLP's checkpoint" "base.ddpckpt|mlp" -- "$BIN" --device cpu --threads 1 --model gpt --resume "$BASE" --generate 5 --prompt ab
  /usr/bin/python3 "$HERE/careless/st_fixture.py" gw.safetensors gnan2.safetensors nan
  case_refused "--generate --init-weights with a NaN" "gnan2.safetensors|non-finite" -- "$BIN" --device cpu --threads 1 $G_MODEL --init-weights gnan2.safetensors --generate 5 --prompt ab
  case_refused "--generate --init-weights of another width" "gw.safetensors|shape" -- "$BIN" --device cpu --threads 1 ${G_MODEL/--n-embd 16/--n-embd 32} --init-weights gw.safetensors --generate 5 --prompt ab
  case_refused "--generate --vocab-size 50304 (a token vocabulary)" "gw.safetensors|shape" -- "$BIN" --device cpu --threads 1 $G_MODEL --vocab-size 50304 --init-weights gw.safetensors --generate 5 --prompt ab
  case_refused "--sample-every with the MLP" "--sample-every" -- "$BIN" $D --steps 2 --sample-every 1
  case_runs "--sample-every 0 (off, the default)" "done:" 0 -- "$BIN" $G --steps 2 --sample-every 0
  case_refused "--sample-length 0" "--sample-length" -- "$BIN" $G --steps 2 --sample-every 1 --sample-length 0
}
