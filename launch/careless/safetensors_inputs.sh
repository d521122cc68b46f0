# safetensors_inputs.sh: careless-user cases of safetensors weights given to
# --init-weights (and --eval-only): wrong dtypes, missing and extra tensors,
# shapes, overlapping, out-of-order and gapped offsets, headers that are not
# JSON or repeat a key, non-finite values, files written by PyPI's
# safetensors, empty, sparse and special files, another model's weights, and
# --save-weights onto them. Files are made by launch/careless/st_fixture.py.

safetensors_inputs() {
  gpt_fixtures
  local st="/usr/bin/python3 $HERE/careless/st_fixture.py" writer
  timeout -k 2 30 "$BIN" $D --steps 2 --save-weights wst.safetensors >/dev/null 2>&1
  mut() { $st wst.safetensors "$@"; }
  # mutation|case|what the line must name: each refused, the file named.
  local row m name words
  for row in "dtype I32|a tensor labelled I32|I32" "dtype Q8|a tensor labelled Q8 (no such dtype)|Q8" \
    "f64|a tensor stored as F64|F64" "drop|a tensor missing|missing" "extra|a tensor the model lacks|extra.weight" \
    "shape|a tensor of another shape|shape" "overlap|overlapping offsets|overlap" \
    "gap|8 unused bytes between two tensors|belong to no tensor" "beyond|the last tensor ends past the file|past the end" \
    "nonjson|a header that is not JSON|JSON" "dupkey|a header naming a tensor twice|twice" \
    "nan|a NaN weight|non-finite value (nan)" "inf|an Inf weight|non-finite value (inf)" \
    "neg|a negative dimension|non-negative" "huge|a shape of 2^124 elements|more bytes than a file can" \
    "meta|__metadata__ with a number value|__metadata__" "zerolen|header length 0|JSON" \
    "longlen|header length 2^40|header size"; do
    IFS='|' read -r m name words <<<"$row"
    mut bad.safetensors $m
    case_refused "$name" "bad.safetensors|$words" -- "$BIN" $D --steps 2 --init-weights bad.safetensors
  done
  mut f16.safetensors f16
  case_runs "every tensor F16 (widened exactly)" "done:" 0 -- "$BIN" $D --steps 2 --init-weights f16.safetensors
  mut bf16.safetensors bf16
  case_runs "every tensor BF16 (widened exactly)" "done:" 0 -- "$BIN" $D --steps 2 --init-weights bf16.safetensors
  mut reorder.safetensors reorder
  case_runs "header keys in another order than the bytes (valid)" "done:" 0 -- "$BIN" $D --steps 2 --init-weights reorder.safetensors
  writer=$(mut ref.safetensors reference 2>&1)
  case_runs "written by PyPI's safetensors ($writer), F32" "done:" 0 -- "$BIN" $D --steps 2 --init-weights ref.safetensors
  : >empty.safetensors
  case_refused "an empty file" "empty.safetensors" -- "$BIN" $D --steps 2 --init-weights empty.safetensors
  head -c 7 wst.safetensors >seven.safetensors
  case_refused "7 bytes" "seven.safetensors" -- "$BIN" $D --steps 2 --init-weights seven.safetensors
  truncate -s 8G sparse.safetensors
  case_refused "an 8 GiB sparse file of zeros" "sparse.safetensors" -- "$BIN" $D --steps 2 --init-weights sparse.safetensors
  cp wst.safetensors tail.safetensors
  truncate -s 8G tail.safetensors
  case_refused "our file with 8 GiB of zeros after it" "tail.safetensors" -- "$BIN" $D --steps 2 --init-weights tail.safetensors
  mkdir -p dir.safetensors
  case_refused "a directory named x.safetensors" "dir.safetensors" -- "$BIN" $D --steps 2 --init-weights dir.safetensors
  mkfifo fifo.safetensors
  case_refused "a FIFO named x.safetensors" "fifo.safetensors|FIFO" -- "$BIN" $D --steps 2 --init-weights fifo.safetensors
  ln -sfn stloop2.safetensors stloop1.safetensors
  ln -sfn stloop1.safetensors stloop2.safetensors
  case_refused "a symlink loop" "stloop1.safetensors" -- "$BIN" $D --steps 2 --init-weights stloop1.safetensors
  case_refused "the GPT's weights given to the MLP" "gw.safetensors|tensor" -- "$BIN" $D --steps 2 --init-weights gw.safetensors
  case_refused "the MLP's weights given to the GPT" "wst.safetensors|tensor" -- "$BIN" $G --steps 2 --init-weights wst.safetensors
  case_refused "a 1-block GPT's weights given to --n-layer 2" "gw.safetensors|transformer.h.1" -- "$BIN" ${G/--n-layer 1/--n-layer 2} --steps 2 --init-weights gw.safetensors
  case_refused "a 16-wide GPT's weights given to --n-embd 32" "gw.safetensors|shape" -- "$BIN" ${G/--n-embd 16/--n-embd 32} --steps 2 --init-weights gw.safetensors
  $st gw.safetensors gnan.safetensors nan
  case_refused "the GPT's weights with a NaN" "gnan.safetensors|non-finite" -- "$BIN" $G --steps 2 --init-weights gnan.safetensors
  $st gw.safetensors gf16.safetensors f16
  case_runs "the GPT's weights in F16" "done:" 0 -- "$BIN" $G --steps 2 --init-weights gf16.safetensors
  guard wst.safetensors
  case_refused "--save-weights = --init-weights" "--save-weights|input" -- "$BIN" $D --steps 2 --init-weights wst.safetensors --save-weights wst.safetensors
  ln -sf wst.safetensors stlink.safetensors
  guard wst.safetensors
  case_refused "--save-weights: a link to --init-weights" "--save-weights|input" -- "$BIN" $D --steps 2 --init-weights wst.safetensors --save-weights stlink.safetensors
  echo "my notes" >notes.safetensors
  guard notes.safetensors
  case_refused "--save-weights: my text file named x.safetensors" "--save-weights|notes.safetensors" -- "$BIN" $D --steps 2 --save-weights notes.safetensors
  absent nodir
  case_refused "--save-weights in a missing directory" "--save-weights|nodir" -- "$BIN" $D --steps 2 --save-weights nodir/w.safetensors
  mut bad.safetensors dtype I32
  case_refused "--eval-only of a tensor labelled I32" "bad.safetensors|I32" -- "$BIN" $D --eval-only --init-weights bad.safetensors
  rm -f sparse.safetensors tail.safetensors
}
