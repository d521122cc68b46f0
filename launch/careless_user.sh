#!/usr/bin/env bash
# careless_user.sh [BIN] [SECTION...]: a careless or hostile user of ddp_train
# and its tools (CPU, one thread, tiny data), checked against the README's
# "When things go wrong". Every case checks itself (launch/careless/lib.sh):
# exit status, one line naming the problem, inputs unchanged, nothing
# half-written. The cases live in launch/careless/, one file per surface;
# SECTION names run only those sections (`careless_user.sh build/ddp_train
# safetensors_inputs generate`). Prints a markdown table and a count; exits 1 if any
# case is a BUG.
set -u
BIN=$(realpath "${1:-build/ddp_train}")
shift
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d /tmp/careless.XXXXXX)
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
cd "$T" || exit 2
# The record of what ddp_train wrote (trainer/io/output_registry.h), apart
# from the user's: files made here by hand are the careless user's own.
export XDG_STATE_HOME=$T/state
MPI="mpirun --allow-run-as-root --oversubscribe --mca odls_base_sigkill_timeout 10"
D="--device cpu --threads 1 --data csv --train-csv $T/train.csv --test-csv $T/test.csv --layers 4,8,3 --batch-size 8"
S="--device cpu --threads 1 --data synthetic"
SECTION=setup
. "$HERE/careless/lib.sh"
for f in "$HERE"/careless/*.sh; do
  [[ $f == */lib.sh ]] || . "$f"
done

# ---- data and a base checkpoint (1 rank, batch 8: step 2 = sample 16 of 40) ------
python3 - <<'PY'
import random
r = random.Random(7)
for name, n in (("train.csv", 40), ("test.csv", 40), ("other.csv", 40), ("big.csv", 400)):
    with open(name, "w") as f:
        f.write("a,b,c,d,label\n")
        for _ in range(n): f.write(",".join("%.3f" % r.uniform(-1, 1) for _ in range(4)) + ",%d\n" % r.randrange(3))
PY
timeout -k 2 30 "$BIN" $D --steps 10 --checkpoint-dir ck0 --checkpoint-every 2 --stop-after-steps 4 >/dev/null 2>&1 ||
  { echo "cannot make the base checkpoint"; exit 2; }
cp "$(ck ck0 2)" base.ddpckpt
BASE=$T/base.ddpckpt
timeout -k 2 30 "$BIN" $D --steps 2 --save-weights w0 >/dev/null 2>&1
mkdir -p fm
for f in /usr/share/datasets/fashion-mnist/*.gz; do ln -sf "$f" fm/; done

SECTIONS=(outputs_overlapping outputs_existing pruning resume_elsewhere resume_flags damaged fields unbounded flags signals)
SECTIONS+=(token_files gpt_shapes safetensors_inputs generate predict zero trace python_tools python_interpreter)
SECTIONS+=(ranks_agree run_lock values mode_flags inputs_kind outputs_registry fs_errors)
RUN=("${SECTIONS[@]}")
(($#)) && RUN=("$@")
for section in "${RUN[@]}"; do
  declare -F "$section" >/dev/null || { echo "careless_user.sh: no section '$section' (sections: ${SECTIONS[*]})" >&2; exit 2; }
  SECTION=$section
  echo "careless_user: $section" >&2
  $section
done
echo "| surface | case | expected | outcome | verdict |"
echo "| --- | --- | --- | --- | --- |"
printf '%s\n' "${ROWS[@]}"
echo
echo "**$((OKS + BUGS)) cases: $OKS OK, $BUGS BUG**"
((BUGS == 0))
