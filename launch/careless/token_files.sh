# token_files.sh: careless-user cases of --data text's token files: empty,
# short, lying and sparse files, llm.c headers, uint16 byte counts, ids beyond
# the vocabulary, FIFOs, directories, links, and the split's flags.

# llmc OUT COUNT_IN_HEADER VERSION TOKEN...: an llm.c .bin shard (256 int32 of
# header: magic 20240520, version, token count; then uint16 tokens).
llmc() {
  python3 - "$@" <<'PY'
import struct, sys
out, count, version = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tokens = [int(t) for t in sys.argv[4:]]
header = [20240520, version, count] + [0] * 253
open(out, "wb").write(struct.pack("<256i", *header) + struct.pack("<%dH" % len(tokens), *tokens))
PY
}

token_files() {
  gpt_fixtures
  local ok20 seq40
  seq40=$(seq 1 40 | tr '\n' ' ')
  : >empty.txt
  case_refused "--train-text: an empty file" "empty.txt" -- "$BIN" $TX empty.txt --steps 2
  printf 'a' >one.txt
  case_refused "--train-text: 1 byte" "one.txt|fewer than" -- "$BIN" $TX one.txt --steps 2
  printf 'abcdefgh' >eight.txt
  case_refused "--train-text: 8 bytes, one short of a window of T+1 = 9" "eight.txt" -- "$BIN" $TX eight.txt --steps 2
  printf 'abcdefghi' >nine.txt
  case_refused "--train-text: one window, nothing left to validate" "nine.txt|training split" -- "$BIN" $TX nine.txt --steps 2
  case_runs "--train-text: one window, --val-text of one window" "done:" 0 -- "$BIN" $TX nine.txt --val-text nine.txt --steps 2
  llmc hdr.bin 0 1
  case_refused "llm.c shard: a header, no tokens" "hdr.bin" -- "$BIN" $TX hdr.bin --steps 2
  llmc lie.bin 1000 1 $seq40
  guard lie.bin
  case_refused "llm.c shard: header says 1000 tokens, file holds 40" "lie.bin|1000" -- "$BIN" $TX lie.bin --steps 2
  llmc few.bin 10 1 $seq40
  case_refused "llm.c shard: header says 10 tokens, file holds 40" "few.bin|10" -- "$BIN" $TX few.bin --steps 2
  llmc v2.bin 40 2 $seq40
  case_refused "llm.c shard: version 2" "v2.bin|version" -- "$BIN" $TX v2.bin --steps 2
  llmc odd.bin 40 1 $seq40
  printf 'x' >>odd.bin
  case_refused "llm.c shard: an odd byte after the tokens" "odd.bin" -- "$BIN" $TX odd.bin --steps 2
  llmc cut.bin 40 1 $seq40
  head -c 600 cut.bin >cut600.bin
  case_refused "llm.c shard: cut inside its header (600 bytes)" "cut600.bin" -- "$BIN" $TX cut600.bin --steps 2
  llmc big.bin 40 1 $(seq 50250 50289 | tr '\n' ' ')
  case_refused "llm.c shard: ids 50250..50289, GPT-2 has 50257" "big.bin|50257" -- "$BIN" $TX big.bin --steps 2
  llmc neg.bin -40 1 $seq40
  case_refused "llm.c shard: token count -40" "neg.bin" -- "$BIN" $TX neg.bin --steps 2
  # A 2 GiB shard of 2^30 tokens is a real data set's size (it fits here):
  # loading it takes a while, and a SIGTERM meanwhile must end it at once.
  llmc huge.bin 1073741824 1 $seq40
  truncate -s $((1024 + 2 * 1073741824)) huge.bin
  run_term_after 3 "$BIN" $TX huge.bin --steps 2
  WHY=""
  ((RC == 143)) || WHY+="exit $RC; "
  grep -q 'during start-up; nothing was trained' "$T/.err" || WHY+="no start-up line; "
  check "llm.c shard of 2 GiB (2^30 tokens): SIGTERM 3 s into loading" "143, start-up line" "exit $RC: $(tail -1 "$T/.err" | cut -c1-100)" "$WHY"
  rm -f huge.bin
  python3 -c "import struct; open('u16.bin','wb').write(struct.pack('<41H', *range(41)) + b'x')"
  case_refused "raw-u16: an odd byte count" "u16.bin|odd" -- "$BIN" $TX u16.bin --token-format raw-u16 --steps 2
  python3 -c "import struct; open('u16big.bin','wb').write(struct.pack('<40H', *([60000] + list(range(39)))))"
  case_refused "raw-u16: id 60000 at position 0, beyond 50257" "u16big.bin|60000" -- "$BIN" $TX u16big.bin --token-format raw-u16 --steps 2
  python3 -c "import struct; open('u16v.bin','wb').write(struct.pack('<40H', *([1] * 39 + [400])))"
  case_refused "raw-u16 --vocab-size 300: id 400 at position 39" "u16v.bin|400" -- "$BIN" $TX u16v.bin --token-format raw-u16 --vocab-size 300 --steps 2
  case_refused "bytes with --vocab-size 100 (text has bytes up to 104)" "lm.txt|vocab" -- "$BIN" $G --vocab-size 100 --steps 2
  case_refused "--token-format u16" "--token-format|u16" -- "$BIN" $G --token-format u16 --steps 2
  truncate -s 100G sparse100.txt
  case_refused "--train-text: a 100 GiB sparse file" "sparse100.txt|limit" -- "$BIN" $TX sparse100.txt --steps 2
  truncate -s 8G sparse8.txt
  case_refused "--train-text: an 8 GiB sparse text (80 GiB once loaded)" "sparse8.txt|limit" -- "$BIN" $TX sparse8.txt --steps 2
  truncate -s 8G sparse8.u16
  case_refused "--train-text raw-u16: an 8 GiB sparse file (40 GiB once loaded)" "sparse8.u16|limit" -- "$BIN" $TX sparse8.u16 --token-format raw-u16 --steps 2
  mkfifo tok.fifo
  case_refused "--train-text: a FIFO" "tok.fifo|FIFO" -- "$BIN" $TX tok.fifo --steps 2
  case_refused "--val-text: a FIFO" "tok.fifo|FIFO" -- "$BIN" $G --val-text tok.fifo --steps 2
  mkdir -p tokdir
  case_refused "--train-text: a directory" "tokdir|directory" -- "$BIN" $TX tokdir --steps 2
  ln -sfn loop1 loop2
  ln -sfn loop2 loop1
  case_refused "--train-text: a symlink loop" "loop1" -- "$BIN" $TX loop1 --steps 2
  case_refused "--train-text /dev/zero" "/dev/zero" -- "$BIN" $TX /dev/zero --steps 2
  case_refused "--train-text: missing file" "nofile.txt" -- "$BIN" $TX nofile.txt --steps 2
  case_refused "--train-text: empty path" "--train-text" -- "$BIN" $TX "" --steps 2
  case_refused "--val-text: an empty file" "empty.txt" -- "$BIN" $G --val-text empty.txt --steps 2
  llmc ok.bin 40 1 $seq40
  case_refused "--val-text: an llm.c shard beside a byte text" "ok.bin|one tokenizer" -- "$BIN" $G --val-text ok.bin --steps 2
  case_refused "--val-fraction 0" "--val-fraction" -- "$BIN" $G --val-fraction 0 --steps 2
  case_refused "--val-fraction 1" "--val-fraction" -- "$BIN" $G --val-fraction 1 --steps 2
  case_refused "--val-fraction nan" "--val-fraction" -- "$BIN" $G --val-fraction nan --steps 2
  case_refused "--val-fraction 0.999 (no window left to train)" "lm.txt" -- "$BIN" $G --val-fraction 0.9999 --steps 2
  case_refused "--train-text with --data csv" "--train-text" -- "$BIN" $D --train-text lm.txt --steps 2
  case_refused "--data text with the MLP" "MLP|token ids" -- "$BIN" --device cpu --threads 1 --data text --train-text lm.txt --steps 2
  case_refused "--data text without --train-text" "--train-text" -- "$BIN" --device cpu --threads 1 --data text $G_MODEL --steps 2
  guard lm.txt
  case_refused "--metrics = --train-text" "--metrics lm.txt|refusing" -- "$BIN" $G --steps 2 --metrics lm.txt
  ln -sf lm.txt lmlink.txt
  guard lm.txt
  case_refused "--save-weights: a link to --train-text" "--save-weights lmlink.txt" -- "$BIN" $G --steps 2 --save-weights lmlink.txt
  ok20=$(printf 'abcdefghijklmnopqrst')
  printf '%s' "$ok20" >twenty.txt
  case_refused "--block-size 64 on a 20-byte text" "twenty.txt" -- "$BIN" ${TX/--block-size 8/--block-size 64} twenty.txt --steps 2
}
