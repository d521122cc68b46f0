# fixtures.sh: what several careless-user sections share: a small text
# (lm.txt, 6 KB), the flags of a tiny byte-level GPT on it ($G; $TX FILE on
# another text) and, made once by gpt_fixtures, a step-2 checkpoint (ckg/)
# and its weights (gw.safetensors); npy, a random .npy of any dtype and
# shape. Sourced by launch/careless_user.sh.

G_MODEL="--model gpt --n-layer 1 --n-head 2 --n-embd 16 --block-size 8"
# $TX FILE: the same run on another --train-text.
TX="--device cpu --threads 1 --data text $G_MODEL --batch-size 4 --optimizer adamw --lr 1e-3 --train-text"
G="$TX $T/lm.txt"

gpt_fixtures() {
  [[ -e $T/gw.safetensors ]] && return 0
  python3 -c "import random; r = random.Random(3); open('$T/lm.txt', 'w').write(''.join(r.choice('abcdefgh \n') for _ in range(6000)))"
  timeout -k 2 60 "$BIN" $G --steps 2 --checkpoint-dir "$T/ckg" --save-weights "$T/gw.safetensors" >/dev/null 2>&1 ||
    { echo "careless_user: cannot make the GPT fixtures" >&2; exit 2; }
}

# npy OUT DTYPE SHAPE...: an .npy of random values (numpy, Debian's python).
npy() {
  /usr/bin/python3 - "$@" <<'PY'
import sys
import numpy as np
out, dtype, shape = sys.argv[1], sys.argv[2], tuple(int(d) for d in sys.argv[3:])
rng = np.random.default_rng(5)
a = rng.uniform(-1, 1, size=shape) if dtype.startswith("float") else rng.integers(0, 255, size=shape)
np.save(out, a.astype(dtype))
PY
}
