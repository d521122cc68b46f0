# fs_errors.sh: careless-user cases of filesystem errors and memory: a
# symbolic-link loop or a path through a file given as an input or as an
# output's directory, each one line naming the path as the user gave it
# (not a resolved absolute path, not a bare "Permission denied"), before
# anything is trained or written; ddp_tokenize out of memory (ulimit -v)
# names the file and about what it needed.

fs_errors() {
  local TOK R WHY
  TOK="$(dirname "$BIN")/ddp_tokenize"
  R="--tokenizer gpt2 --ranks $(realpath "$HERE/../data/gpt2.tiktoken")"
  rm -f fs-loop1 fs-loop2
  ln -s fs-loop1 fs-loop2
  ln -s fs-loop2 fs-loop1
  printf 'x\n' >fs-file
  guard fs-file
  case_refused "--train-csv: a loop of symbolic links" "fs-loop1|symbolic links" -- \
    "$BIN" --device cpu --threads 1 --data csv --train-csv fs-loop1 --test-csv "$T/test.csv" --layers 4,8,3 --steps 2
  case_refused "--config: a loop of symbolic links" "--config fs-loop1|symbolic links" -- "$BIN" $D --steps 2 --config fs-loop1
  case_refused "--resume: a loop of symbolic links" "fs-loop1|symbolic links" -- "$BIN" $D --steps 2 --resume fs-loop1
  case_refused "--train-csv through a file (fs-file/x.csv)" "fs-file/x.csv|Not a directory" -- \
    "$BIN" --device cpu --threads 1 --data csv --train-csv fs-file/x.csv --test-csv "$T/test.csv" --layers 4,8,3 --steps 2
  absent fs-loop1/m.jsonl
  case_refused "--metrics in a loop of symbolic links" "--metrics fs-loop1/m.jsonl|its directory fs-loop1 is a loop" -- \
    "$BIN" $D --steps 2 --metrics fs-loop1/m.jsonl
  guard fs-file
  case_refused "--metrics through a file" "--metrics fs-file/m.jsonl|its directory fs-file is a file" -- \
    "$BIN" $D --steps 2 --metrics fs-file/m.jsonl
  guard fs-file
  case_refused "--save-weights X.safetensors through a file" "--save-weights fs-file/w.safetensors|fs-file is a file" -- \
    "$BIN" $D --steps 2 --save-weights fs-file/w.safetensors
  guard fs-file
  case_refused "--trace through a file (was: trained, then no trace)" "--trace fs-file/t.rank0.json|fs-file is a file" -- \
    "$BIN" $D --steps 2 --trace fs-file/t.json
  case_refused "--checkpoint-dir: a loop of symbolic links" "fs-loop1|symbolic links" -- "$BIN" $D --steps 2 --checkpoint-dir fs-loop1
  guard fs-file
  case_refused "--checkpoint-dir through a file" "--checkpoint-dir fs-file/ck|Not a directory" -- \
    "$BIN" $D --steps 2 --checkpoint-dir fs-file/ck
  npy fs-x.npy float32 4 4
  guard fs-file
  case_refused "--predictions through a file" "--predictions fs-file/p.npy|fs-file is a file" -- \
    "$BIN" --device cpu --threads 1 --layers 4,8,3 --init-weights "$T/w0" --predict fs-x.npy --predictions fs-file/p.npy
  printf 'hello\n' >fs-in.txt
  guard fs-file
  tok_refused "ddp_tokenize -o through a file" "--output fs-file/x.bin|fs-file is a file" -- "$TOK" $R fs-in.txt -o fs-file/x.bin
  tok_refused "ddp_tokenize: an input that is a loop of symbolic links" "fs-loop1|symbolic links" -- "$TOK" $R fs-loop1 -o fs-out.bin

  python3 -c "
import random
r = random.Random(1)
w = ['the', 'quick', 'brown', 'fox', 'jumps', 'over', 'lazy', 'dog']
open('fs-big.txt', 'w').write(''.join(' '.join(r.choice(w) for _ in range(10)) + '\n' for _ in range(400000)))"
  absent fs-big.bin
  tok_refused "ddp_tokenize out of memory (ulimit -v 70000, a 20 MB text)" "fs-big.txt|out of memory while tokenizing|needs about" -- \
    bash -c 'ulimit -v 70000; exec "$0" "$@"' "$TOK" $R fs-big.txt -o fs-big.bin --threads 1
}
