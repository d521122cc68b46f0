# inputs_kind.sh: careless-user cases of inputs of the wrong kind and
# outputs that cannot be written: ddp_tokenize given an llm.c .bin token
# shard (its own, renamed .txt, beside a text, made by llm.c's layout, with
# --overwrite) refuses in one line and creates nothing (a text holding the
# magic past its start is text); a --metrics file whose first write fails
# (no room: `ulimit -f 0`) is not left behind empty, while a metrics file
# that existed before (appended to by --resume, or the user's empty file) is
# kept as it was.

# tok_refused NAME WORDS -- CMD...: ddp_tokenize refuses: exit 1, exactly one
# line on stderr, "ddp_tokenize: error: ..." naming the words.
tok_refused() {
  local name=$1 words=$2 lines n
  shift 3
  run_bin "$@"
  WHY=""
  ((RC == 1)) || WHY+="exit $RC; "
  lines=$(grep -a . "$T/.err")
  n=$(grep -c . <<<"$lines")
  [[ $n == 1 ]] || WHY+="$n stderr lines; "
  [[ $lines == "ddp_tokenize: error: "* ]] || WHY+="not 'ddp_tokenize: error: '; "
  want_words "$lines" "$words"
  common_checks
  row "$name" "refused: ${words//|/, }" "exit $RC: $(head -1 <<<"$lines" | cut -c1-170 | tr '|' '/')" "$(verdict "$WHY")"
}

inputs_kind() {
  local TOK R M NOROOM
  TOK="$(dirname "$BIN")/ddp_tokenize"
  R="--tokenizer gpt2 --ranks $(realpath "$HERE/../data/gpt2.tiktoken")"
  M=$(quick_mpi)
  rm -f ik-*.bin ik-*.txt ik-*.jsonl

  # ddp_tokenize.
  printf 'Hello world. A small text, tokenized once.\n' >ik-hello.txt
  case_runs "ddp_tokenize: a text" "" 0 -- "$TOK" $R ik-hello.txt -o ik-hello.bin
  check "… its output is an llm.c shard" "magic 20240520" "$(od -An -tu4 -N4 ik-hello.bin 2>&1 | tr -d ' ')" \
    "$([[ $(od -An -tu4 -N4 ik-hello.bin 2>/dev/null | tr -d ' ') == 20240520 ]] || echo 'no magic')"
  local SHARD="is already an llm.c .bin token shard (its magic 20240520)|not text"
  guard ik-hello.bin; rm -f ik-again.bin; absent ik-again.bin
  tok_refused "ddp_tokenize: its own shard as input" "ik-hello.bin|$SHARD" -- "$TOK" $R ik-hello.bin -o ik-again.bin
  cp ik-hello.bin ik-shard.txt
  rm -f ik-again.bin; absent ik-again.bin
  tok_refused "ddp_tokenize: a shard renamed .txt" "ik-shard.txt|$SHARD" -- "$TOK" $R ik-shard.txt -o ik-again.bin
  rm -f ik-again.bin; absent ik-again.bin
  tok_refused "ddp_tokenize: a text, then a shard" "ik-hello.bin|$SHARD" -- "$TOK" $R ik-hello.txt ik-hello.bin -o ik-again.bin
  llmc ik-llmc.bin 40 1 $(seq 1 40 | tr '\n' ' ')
  rm -f ik-again.bin; absent ik-again.bin
  tok_refused "ddp_tokenize: an llm.c shard (40 tokens, llm.c's layout)" "ik-llmc.bin|$SHARD" -- "$TOK" $R ik-llmc.bin -o ik-again.bin
  cp ik-hello.bin ik-out.bin
  guard ik-out.bin
  tok_refused "ddp_tokenize --overwrite: a shard as input, another shard as output" "ik-llmc.bin|$SHARD" -- \
    "$TOK" $R ik-llmc.bin -o ik-out.bin --overwrite
  python3 -c "import struct; open('ik-mid.txt', 'wb').write(b'text first, then ' + struct.pack('<i', 20240520) + b' and more text\n')"
  case_runs "ddp_tokenize: a text holding the magic past its start (text)" "" 0 -- "$TOK" $R ik-mid.txt -o ik-mid.bin

  # --metrics with no room: the rank under `ulimit -f 0` (its output is a
  # pipe to mpirun; a singleton's own orted would need room for its files).
  NOROOM=(bash -c 'trap "" XFSZ; ulimit -f 0; exec "$0" "$@"')
  absent ik-m.jsonl
  case_refused "--metrics: no room for its first line" "--metrics ik-m.jsonl|cannot write" -- $M -np 1 "${NOROOM[@]}" "$BIN" $D --steps 2 --metrics ik-m.jsonl
  absent ik-em.jsonl
  case_refused "--eval-only --metrics: no room" "--metrics ik-em.jsonl|cannot write" -- \
    $M -np 1 "${NOROOM[@]}" "$BIN" $D --eval-only --init-weights "$T/w0" --metrics ik-em.jsonl
  rm -rf ik-ck
  timeout -k 2 30 "$BIN" $D --steps 4 --checkpoint-dir ik-ck --stop-after-steps 2 --metrics ik-r.jsonl >/dev/null 2>&1
  guard ik-r.jsonl
  case_refused "--resume appending to its --metrics, no room" "--metrics ik-r.jsonl|cannot write" -- \
    $M -np 1 "${NOROOM[@]}" "$BIN" $D --steps 4 --resume "$(ck ik-ck 2)" --metrics ik-r.jsonl
  : >ik-empty.jsonl
  guard ik-empty.jsonl
  case_refused "--metrics: my empty file, no room (kept)" "--metrics ik-empty.jsonl|cannot write" -- \
    $M -np 1 "${NOROOM[@]}" "$BIN" $D --steps 2 --metrics ik-empty.jsonl
  case_runs "--metrics with room" "done:" 0 -- $M -np 1 "$BIN" $D --steps 2 --metrics ik-m.jsonl
  check "… ik-m.jsonl written" "a non-empty file" "$(wc -c <ik-m.jsonl 2>&1) bytes" "$([[ -s ik-m.jsonl ]] || echo 'empty or missing')"
}
