# gpt_fixtures.sh: what the GPT's careless-user sections share: a small text
# (lm.txt, 6 KB), the flags of a tiny byte-level GPT on it ($G; $TX FILE on another text), and, made
# once by gpt_fixtures, a step-2 checkpoint (ckg/) and its weights
# (gw.safetensors). Sourced by launch/careless_user.sh.

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
