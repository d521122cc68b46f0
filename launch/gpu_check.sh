#!/usr/bin/env bash
# gpu_check.sh: the one GPU run a task may get (about 15 minutes of device
# time, start-up and transfers included: one command of at most 600 s), made
# to count. Every CUDA path runs once, in order of value per second:
#   0  the machine; the carried build (.gpu-carry, made here by
#      launch/make_gpu_carry.sh): unpacked, its sources' hash against the
#      tree's, its binaries start. Only when they cannot be used: 0-build
#      builds here from .gpu-kit, on the time of the speed stages (4a-4d).
#   1  the CUDA tests against the CPU backend (ddp_cuda_tests, the GPU suites
#      only): the newest kernels first (GPT, AdamW, fused attention, BF16,
#      step state and capture, ZeRO's shard collectives), then the rest.
#   2  compute-sanitizer memcheck on the newest kernels' tests, and on short
#      GPT trainings at --zero 1 (captured) and --zero 3.
#   3  short trainings: the MLP on Fashion-MNIST eager and --cuda-graph; the
#      GPT (its loss falls; --cuda-graph); --zero 0..3 and --zero 0/1 under
#      --cuda-graph (one final loss); a checkpoint and resume at --zero 1
#      (and into --zero 3); --trace at --zero 0 and 1; the GPT against the CPU
#      at T = 1024 and 2048; an LM head over 2^31 logits; the GPT in BF16
#      (--precision bf16: its loss falls, --cuda-graph ends where eager does,
#      its final loss beside FP16's).
#   4  ours against PyTorch (AMP eager, torch.compile): the MLP models, the
#      MLP with --cuda-graph, GPT-2 124M with MFU; GPT-2 124M in BF16 against
#      torch.autocast(bfloat16) eager, and ours BF16 against ours FP16.
#   9  summary.md and gpu-logs.tar.gz.
# Each stage has a fixed budget (the table below; their sum is at most
# LIMIT_S = 540 s, nine minutes, or the script refuses to run) and runs under
# `timeout` with it: a stage that overruns is cut and marked TIMEOUT, and the
# stages after it run with their own budgets. As each stage ends, its output
# is in $OUT/stages.log (streamed as it runs) and its verdict line in
# $OUT/verdicts.txt, so a run cut short still returns what it did.
#
#   OUT=DIR bash launch/gpu_check.sh             on the GPU host (the device
#        tool: carry [".gpu-carry"], timeout_s 600; add ".gpu-kit" only for
#        the fallback build)
#   OUT=DIR bash launch/gpu_check.sh --dry-run   here, without a GPU: the same
#        plumbing (budgets checked, the carry unpacked and started when there
#        is one, every GPU stage "skipped (no GPU)" with its gtest filter
#        counted against the carried test binary, the files under $OUT) in
#        seconds; tests/launch/test_gpu_check_dry_run.sh runs it in the suite
#   bash launch/gpu_check.sh --budgets           the stage table and its sum
# Environment:
#   GPU_CHECK_SKIP=2,3f       leave out stages: names or prefixes
#   GPU_CHECK_BUDGETS=1a-cuda-new=60,4c-compare-gpt2=90   other budgets (the
#        sum is checked after them)
#   GPU_CHECK_CARRY=DIR       the carried build's folder (default .gpu-carry)
#   GPU_CHECK_USE_STALE=1     use a carried build whose sources differ
#   GPU_CHECK_WORK=DIR        scratch: unpacked carry, full logs (/tmp/gpu-check)
#   GPU_CHECK_TEST_HANG=NAME  test hook: that stage sleeps instead (its timeout)
#
# What comes back ($OUT; the device tool returns at most 8 files):
#   verdicts.txt   one line per stage: name | verdict | seconds of budget | figure
#   stages.log     every stage's output, as it runs (a stage's first 1500
#                  lines, and its last 200 when cut)
#   summary.md     the verdicts as a table, with the comparisons' tables
#   gpu-logs.tar.gz  full logs, metrics, gtest XML, traces, comparison CSVs
#   compare_torch_mlp.md, compare_torch_mlp_graph.md, compare_torch_gpt2.md,
#   compare_torch_gpt2_bf16.md
# Exit status: 0 when no stage FAILED or ran out of time, 1 otherwise, 2 when
# the script refuses (budgets, arguments).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# shellcheck source=scripts/gpu_carry.sh
source launch/scripts/gpu_carry.sh

DRY=0 LIST=0
case "${1:-}" in
  "") ;;
  --dry-run) DRY=1 ;;
  --budgets) LIST=1 ;;
  -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "gpu_check: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac

# ---- the stages and their budgets ------------------------------------------------
# One row per stage, in run order: name, budget in seconds (the stage's whole
# time, its kill included), what it needs, what it does. Needs: "-" nothing;
# build: runs only when the carried build cannot be used; tests: a GPU and
# ddp_cuda_tests; san: those and compute-sanitizer; san-bin: a GPU, ddp_train
# and compute-sanitizer; bin: a GPU and ddp_train.
# The estimates behind the budgets: 1a/1b, 110 tests (an H200 ran 33 of
# them in 8 s on 2026-11-30) whose CPU references run on 16 cores, the
# CPU-only harness tests (*Harness*, also in CI) in 1b; 2x, a few tests each at memcheck's
# 10-100x; 3x, 2 to 6 ddp_train processes of 2-5 s each (CUDA context,
# cuBLAS, NCCL) on tiny shapes; 4c, torch.compile of GPT-2's step (about a
# minute) after ours and eager.
LIMIT_S=540
STAGE_TABLE='
0-env                   8  -        the machine: GPU, driver, toolkit, compute-sanitizer, PyTorch
0-carry                12  -        the carried build: unpacked, its sources against the tree, its binaries start
0-build               150  build    only when the carried build cannot be used: build here from .gpu-kit (on the time of 4a-4d)
1a-cuda-new            60  tests    CUDA tests of the newest kernels against the CPU (GPT, AdamW, fused attention, BF16, capture, ZeRO shards)
1b-cuda-rest           35  tests    the other CUDA tests (Cuda*, Nccl* and the FP16 Precisions/* instances)
2a-memcheck-kernels    30  san      compute-sanitizer memcheck: the GPT, AdamW, FP32-output GEMM, cross-entropy rows and step-state tests
2b-memcheck-attention  30  san      compute-sanitizer memcheck: fused attention, recompute through the whole GPT
2c-memcheck-train      25  san-bin  compute-sanitizer memcheck: a GPT training at --zero 1 under --cuda-graph, and at --zero 3
3a-train-mlp           22  bin      Fashion-MNIST (20000 images, 10 epochs) eager and --cuda-graph: accuracy bar, graph = eager
3b-train-gpt           20  bin      a tiny GPT, 60 AdamW steps: the loss falls; --cuda-graph ends where eager does
3c-gpt-zero-graph      25  bin      --zero 0, 1, 2, 3 eager and --zero 0, 1 under --cuda-graph: one final loss
3d-gpt-resume          15  bin      --zero 1: stop at step 10 (async checkpoint), resume at --zero 1 and 3: the straight run final loss
3e-gpt-trace           10  bin      --trace at --zero 0 and 1: merged, every layer and bucket within its step
3f-gpt-long-t          20  bin      the GPT at T = 1024 and 2048, explicit and fused attention, against the CPU, step by step
3g-lmhead-2g           25  bin      GPT-2 124M at batch 44, T 1024 (2.27e9 logits > 2^31) against --classifier-chunk 4096
3h-gpt-bf16            20  bin      the tiny GPT in --precision bf16, 60 steps: the loss falls; --cuda-graph ends where eager does; beside the FP16 of 3b
4a-compare-mlp         30  bin      ours against PyTorch AMP eager and torch.compile: MLP models b, a, c
4b-compare-mlp-graph   15  bin      ours with --cuda-graph against PyTorch eager: MLP models b, a
4c-compare-gpt2        90  bin      GPT-2 124M ours against PyTorch AMP eager and torch.compile, tokens/s and MFU
4d-compare-gpt2-bf16   40  bin      GPT-2 124M ours --precision bf16 against torch.autocast(bfloat16) eager; ours BF16 / ours FP16 (4c)
9-summary               8  -        summary.md and gpu-logs.tar.gz under $OUT
'
# 0-build runs on the time of these, which then do not run.
LENDERS=(4c-compare-gpt2 4d-compare-gpt2-bf16 4a-compare-mlp 4b-compare-mlp-graph)

ORDER=()
declare -A BUDGET NEEDS WHAT STATUS FIGURE USED
while read -r name budget needs what; do
  [ -n "$name" ] || continue
  ORDER+=("$name"); BUDGET[$name]=$budget; NEEDS[$name]=$needs; WHAT[$name]=$what
done <<<"$STAGE_TABLE"

refuse() { echo "gpu_check: refusing to run: $*" >&2; exit 2; }
IFS=, read -ra overrides <<<"${GPU_CHECK_BUDGETS:-}"
for o in "${overrides[@]}"; do
  [ -n "$o" ] || continue
  [[ $o =~ ^([0-9a-z-]+)=([0-9]+)$ ]] || refuse "GPU_CHECK_BUDGETS: '$o' is not NAME=SECONDS"
  [ -n "${BUDGET[${BASH_REMATCH[1]}]:-}" ] || refuse "GPU_CHECK_BUDGETS: no stage ${BASH_REMATCH[1]}"
  BUDGET[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
done
SUM_S=0
for s in "${ORDER[@]}"; do
  [ "${BUDGET[$s]}" -ge 5 ] || refuse "stage $s has ${BUDGET[$s]} s: at least 5 (its kill takes 3)"
  [ "$s" = 0-build ] || SUM_S=$((SUM_S + BUDGET[$s]))
done
LENT_S=0
for s in "${LENDERS[@]}"; do LENT_S=$((LENT_S + BUDGET[$s])); done
budget_table() {
  printf '%-22s %6s  %s\n' stage budget what
  for s in "${ORDER[@]}"; do printf '%-22s %5ss  %s\n' "$s" "${BUDGET[$s]}" "${WHAT[$s]}"; done
  echo "sum ${SUM_S} s of ${LIMIT_S} s (0-build not counted: it runs on the ${LENT_S} s of ${LENDERS[*]})"
}
[ $LIST = 1 ] && { budget_table; [ "$SUM_S" -le "$LIMIT_S" ] && [ "${BUDGET[0-build]}" -le "$LENT_S" ]; exit $?; }
[ "$SUM_S" -le "$LIMIT_S" ] || { budget_table >&2; refuse "the stages' budgets sum to ${SUM_S} s, over ${LIMIT_S} s"; }
[ "${BUDGET[0-build]}" -le "$LENT_S" ] ||
  refuse "0-build's ${BUDGET[0-build]} s are more than the ${LENT_S} s of ${LENDERS[*]} it runs on"

# ---- where things go -----------------------------------------------------------------
: "${OUT:?set OUT to an output folder}"
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
WORK=${GPU_CHECK_WORK:-/tmp/gpu-check}
LOGS=$WORK/logs
CARRY=${GPU_CHECK_CARRY:-$ROOT/$GPU_CARRY_DIR}
KIT=${GPU_CHECK_KIT:-/tmp/kit}
K=$KIT/usr
rm -rf "$LOGS" && mkdir -p "$LOGS"
VERDICTS=$OUT/verdicts.txt
STAGES_LOG=$OUT/stages.log
START_S=$(date +%s)
[ -x /usr/local/cuda/bin/nvcc ] && export PATH=/usr/local/cuda/bin:$PATH
export PYTHONUNBUFFERED=1
MODE=$([ $DRY = 1 ] && echo "dry run (no GPU stage runs)" || echo "GPU run")
note() { echo "gpu_check: $*" | tee -a "$STAGES_LOG"; }
{
  echo "# gpu_check $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname), $MODE"
  echo "# budgets: sum ${SUM_S} s of ${LIMIT_S} s; 0-build ${BUDGET[0-build]} s on the time of ${LENDERS[*]}"
  echo "# stage | verdict | seconds used of budget | figure"
} >"$VERDICTS"
: >"$STAGES_LOG"
note "$MODE; budgets sum to ${SUM_S} s of ${LIMIT_S} s; scratch $WORK; carry $CARRY"
budget_table >>"$STAGES_LOG"

# ---- running a stage ----------------------------------------------------------------
# run_cmd NAME COMMAND...: COMMAND under `timeout` (TERM at the budget less 3
# s, KILL 3 s later, to its whole process group), its output to
# $LOGS/NAME.log and, up to 1500 lines, streamed to stages.log (the last 200
# lines follow when it was cut); STATUS[NAME] ok, FAILED (exit N) or TIMEOUT.
# Returns the command's exit status.
LOG_HEAD=1500 LOG_TAIL=200
run_cmd() {
  local name=$1 rc; shift
  local limit=$((BUDGET[$name] - 3))
  timeout -k 3 "$limit" "$@" </dev/null 2>&1 | tee "$LOGS/$name.log" |
    awk -v max=$LOG_HEAD 'NR <= max {print; fflush()}
      NR == max + 1 {print "[... cut at " max " lines; its end follows, the whole log is in gpu-logs.tar.gz]"; fflush()}' \
    >>"$STAGES_LOG"
  rc=${PIPESTATUS[0]}
  [ "$(wc -l <"$LOGS/$name.log")" -gt $LOG_HEAD ] && tail -n $LOG_TAIL "$LOGS/$name.log" >>"$STAGES_LOG"
  case $rc in
    0) STATUS[$name]=ok ;;
    124|137) STATUS[$name]="TIMEOUT (cut at ${BUDGET[$name]} s)" ;;
    *) STATUS[$name]="FAILED (exit $rc)" ;;
  esac
  return "$rc"
}
# verdict NAME: its line in verdicts.txt, now.
verdict() {
  local s=$1
  printf '%s | %s | %s s of %s s | %s\n' "$s" "${STATUS[$s]}" "${USED[$s]:-0}" "${BUDGET[$s]}" \
    "$(tr '\n|' ' /' <<<"${FIGURE[$s]:-}" | sed 's/ *$//')" >>"$VERDICTS"
  if [[ ${STATUS[$s]} == skipped* ]]; then note "$s: ${STATUS[$s]}${FIGURE[$s]:+: ${FIGURE[$s]}}"
  else note "$s: ${STATUS[$s]} after ${USED[$s]:-0} s of ${BUDGET[$s]} s${FIGURE[$s]:+: ${FIGURE[$s]}}"; fi
}
failed() { [[ "${STATUS[$1]}" == FAILED* || "${STATUS[$1]}" == TIMEOUT* ]]; }
# gtest's count lines, e.g. "12 passed, 0 failed, 3 skipped".
gtest_counts() {
  local log=$1 p f s
  p=$(grep -oE '^\[  PASSED  \] [0-9]+' "$log" | grep -oE '[0-9]+$' | awk '{n += $1} END {print n + 0}')
  f=$(grep -oE '^\[  FAILED  \] [0-9]+ test' "$log" | grep -oE '[0-9]+' | awk '{n += $1} END {print n + 0}')
  s=$(grep -oE '^\[  SKIPPED \] [0-9]+ test' "$log" | grep -oE '[0-9]+' | awk '{n += $1} END {print n + 0}')
  echo "$p passed, $f failed, $s skipped"
}
# The figures read from the runs' metrics (JSON Lines): `metric summary F KEY`
# the last summary record's KEY; `metric losses F` the step records' losses.
metric() {
  python3 - "$@" <<'PY' 2>/dev/null
import json, sys
what, path = sys.argv[1], sys.argv[2]
try:
    recs = [json.loads(l) for l in open(path) if l.strip()]
except (OSError, ValueError):
    sys.exit(0)
if what == "summary":
    s = [r for r in recs if r.get("event") == "summary"]
    v = s[-1].get(sys.argv[3]) if s else None
    print("" if v is None else repr(v))
else:
    print(" ".join(repr(r["loss"]) for r in recs if r.get("event") == "step" and r.get("loss") is not None))
PY
}

# ---- the state the stages share ----------------------------------------------------------
HAVE_GPU=0 SAN="" BIN="" TESTS="" FMNIST="" NEED_BUILD=0 OURS_LD=""
TEXT=$WORK/gpt-text.txt TOKENS=$WORK/random-u16.bin
# The stages' bodies run in child shells (under `timeout`): what they read.
export BIN OURS_LD TEXT TOKENS

# The library path of our binaries alone (PyTorch never sees it): the carried
# libraries or the kit's, then CUDA's (cuBLAS, cuBLASLt, NCCL) from the
# toolkit and from PyTorch's nvidia-* wheels.
ours_ld_path() {
  local p=$1 d sp
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && p="$p:$d"
  done
  for sp in $(python3 -c 'import site, sys; print("\n".join(site.getsitepackages() + sys.path))' 2>/dev/null | sort -u); do
    [ -d "$sp/nvidia" ] || continue
    for d in $(find "$sp/nvidia" -maxdepth 3 -type d -name lib 2>/dev/null | sort); do
      ls "$d"/lib*.so* >/dev/null 2>&1 && p="$p:$d"
    done
  done
  echo "${p#:}"
}

# ---- 0: the machine ---------------------------------------------------------------------------
body_env() {
  date -u; uname -a; echo "cores $(nproc)"; free -g | head -2
  grep PRETTY_NAME /etc/os-release; ldd --version | head -1
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  else
    echo "no nvidia-smi"
  fi
  command -v nvcc >/dev/null && nvcc --version | tail -2
  echo "compute-sanitizer: ${1:-none}"; [ -n "${1:-}" ] && "$1" --version | head -2
  cmake --version 2>/dev/null | head -1; g++ --version 2>/dev/null | head -1
  timeout 20 python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -1
  ls -l /usr/local/cuda/lib64/libcublas.so* /usr/local/cuda/lib64/libnccl.so* 2>&1 | head -4
  true
}
# The GPU (nvidia-smi's list; never in a dry run) and compute-sanitizer,
# looked for before the stages, whichever of them run.
find_gpu_and_sanitizer() {
  SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/compute-sanitizer/compute-sanitizer \
        /opt/nvidia/*/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)
  local gpus=0
  command -v nvidia-smi >/dev/null && gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  if [ $DRY = 0 ] && [ "${gpus:-0}" -ge 1 ]; then HAVE_GPU=1; fi
}
stage_0_env() {
  run_cmd 0-env bash -c 'body_env "$@"' _ "$SAN"
  # On the GPU host a GPU must be seen: without one every later stage skips.
  [ $DRY = 0 ] && [ $HAVE_GPU = 0 ] && STATUS[0-env]="FAILED (no GPU seen: nvidia-smi -L lists none)"
  FIGURE[0-env]="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || true)"
  [ -n "${FIGURE[0-env]}" ] || FIGURE[0-env]="no GPU seen (nvidia-smi)"
  FIGURE[0-env]="${FIGURE[0-env]}; $(grep -m1 -oE '^python [0-9.]+ torch [^ ]+' "$LOGS/0-env.log" || echo 'no torch')"
  FIGURE[0-env]="${FIGURE[0-env]}; compute-sanitizer: ${SAN:-none}"
  [ $DRY = 1 ] && FIGURE[0-env]="${FIGURE[0-env]}; dry run: the GPU stages skip"
}

# ---- 0: the carried build -----------------------------------------------------------------------
# Exit 10: no carried build; 11: built from other sources; 12: a library or
# symbol does not resolve; 13: a binary does not start.
body_carry() {
  local dest=$2 root=$3 use_stale=$4 tarball=$1/$GPU_CARRY_TARBALL
  [ -f "$tarball" ] || { echo "no carried build: $tarball (make it with launch/make_gpu_carry.sh; carry .gpu-carry)"; exit 10; }
  rm -rf "$dest" && mkdir -p "$dest"
  if command -v xz >/dev/null; then tar -xJf "$tarball" -C "$dest" || exit 13
  else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$tarball" "$dest" || exit 13; fi
  echo "unpacked $(du -sh "$dest" | cut -f1) into $dest:"; cat "$dest/$GPU_CARRY_STAMP"
  local want have
  want=$(gpu_carry_source_hash "$root"); have=$(awk '$1 == "sources" {print $2}' "$dest/$GPU_CARRY_STAMP")
  if [ "$want" != "$have" ]; then
    echo "STALE: built from sources $have, this tree's are $want"
    [ "$use_stale" = 1 ] || exit 11
    echo "used all the same (GPU_CHECK_USE_STALE=1)"
  else
    echo "sources: $want, the tree's"
  fi
  local ld b bad
  ld=$(ours_ld_path "$dest/lib")
  echo "library path: $ld"
  for b in "$dest"/bin/*; do
    bad=$(LD_LIBRARY_PATH=$ld ldd -r "$b" 2>&1 | grep -E 'not found|undefined symbol')
    [ -z "$bad" ] || { echo "$(basename "$b") does not resolve: $bad"; exit 12; }
    LD_LIBRARY_PATH=$ld ldd "$b" 2>/dev/null | grep -E 'libcudart|libcublas|libnccl|libopenblas' | sed "s|^|  $(basename "$b"): |"
  done
  LD_LIBRARY_PATH=$ld "$dest/bin/ddp_train" --help >/dev/null || { echo "ddp_train --help fails"; exit 13; }
  echo "ddp_train --help: ok"
  local n
  n=$(LD_LIBRARY_PATH=$ld "$dest/bin/ddp_cuda_tests" --gtest_list_tests | grep -c '^  ') ||
    { echo "ddp_cuda_tests --gtest_list_tests lists no test"; exit 13; }
  echo "cuda tests listed: $n"
}
stage_0_carry() {
  local rc=0
  run_cmd 0-carry bash -c 'body_carry "$@"' _ "$CARRY" "$WORK/carry" "$ROOT" "${GPU_CHECK_USE_STALE:-0}" || rc=$?
  case $rc in
    0) BIN=$WORK/carry/bin; TESTS=$BIN/ddp_cuda_tests; FMNIST=$WORK/carry/data/fashion-mnist
       OURS_LD=$(ours_ld_path "$WORK/carry/lib")
       FIGURE[0-carry]="$(awk '$1 == "commit" {print "commit " $2}' "$WORK/carry/$GPU_CARRY_STAMP"), $(grep -m1 -oE '^(sources: [0-9a-f]+|STALE.*)' "$LOGS/0-carry.log"); $(grep -m1 -oE 'cuda tests listed: [0-9]+' "$LOGS/0-carry.log")" ;;
    10) STATUS[0-carry]="none (no $GPU_CARRY_DIR/$GPU_CARRY_TARBALL)"; NEED_BUILD=1 ;;
    11) STATUS[0-carry]="STALE (built from other sources)"; NEED_BUILD=1 ;;
    12|13) STATUS[0-carry]="FAILED (the carried binaries do not start)"; NEED_BUILD=1
       FIGURE[0-carry]=$(grep -m1 -E 'does not resolve|fails' "$LOGS/0-carry.log") ;;
    *) NEED_BUILD=1 ;;
  esac
}

# ---- 0: the fallback build ------------------------------------------------------------------------
# From the Debian packages in .gpu-kit (../shared/gpu-kit/make-kit.sh) and
# NCCL from the toolkit or PyTorch's wheel, as the carried build is made, with
# 16 jobs. Prints what is missing and exits 20 where it cannot start.
unpack_kit() {
  rm -rf "$KIT" && mkdir -p "$KIT"
  ls "$ROOT"/.gpu-kit/*.deb >/dev/null 2>&1 || { echo "no .gpu-kit/*.deb (carry .gpu-kit)"; return 1; }
  local f d
  for f in "$ROOT"/.gpu-kit/*.deb; do
    if command -v dpkg-deb >/dev/null; then dpkg-deb -x "$f" "$KIT"
    else  # a .deb is an ar archive holding data.tar.{xz,zst,gz}
      d=$(ar t "$f" | grep '^data\.tar') || return 1
      case $d in
        *.xz) ar p "$f" "$d" | tar -xJ -C "$KIT" ;;
        *.zst) ar p "$f" "$d" | zstd -dc | tar -x -C "$KIT" ;;
        *) ar p "$f" "$d" | tar -xz -C "$KIT" ;;
      esac || return 1
    fi
  done
  # Debian links some files by absolute path: point those into the kit.
  find "$KIT" -type l | while read -r l; do
    local t; t=$(readlink "$l")
    case $t in /*) [ -e "$KIT$t" ] && ln -sfn "$KIT$t" "$l" ;; esac
  done
  echo "kit: $(ls "$ROOT"/.gpu-kit/*.deb | wc -l) packages unpacked into $KIT"
}
find_nccl() {  # prints a folder with include/nccl.h and lib/libnccl.so for FindNCCL
  local inc="" lib="" d sp h l
  for d in /usr/local/cuda/include /usr/include; do [ -f "$d/nccl.h" ] && { inc=$d; break; }; done
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu; do
    ls "$d"/libnccl.so* >/dev/null 2>&1 && { lib=$d; break; }; done
  if [ -z "$inc" ] || [ -z "$lib" ]; then
    inc="" lib=""
    for sp in $(python3 -c 'import site, sys; print("\n".join(site.getsitepackages() + sys.path))' 2>/dev/null | sort -u); do
      [ -d "$sp/nvidia" ] || continue
      h=$(find "$sp/nvidia" -maxdepth 4 -name nccl.h -path '*include*' 2>/dev/null | head -1)
      l=$(find "$sp/nvidia" -maxdepth 4 -name 'libnccl.so*' 2>/dev/null | head -1)
      if [ -n "$h" ] && [ -n "$l" ]; then inc=$(dirname "$h"); lib=$(dirname "$l"); break; fi
    done
  fi
  [ -n "$inc" ] && [ -n "$lib" ] || return 1
  local shim=$WORK/nccl real
  rm -rf "$shim" && mkdir -p "$shim/lib"
  ln -s "$inc" "$shim/include"
  real=$(ls "$lib"/libnccl.so.2* "$lib"/libnccl.so 2>/dev/null | head -1)
  ln -s "$real" "$shim/lib/libnccl.so"; ln -s "$real" "$shim/lib/libnccl.so.2"
  echo "$shim"
}
body_build() {
  set -e
  local missing=() t
  for t in cmake nvcc c++ pkg-config; do command -v $t >/dev/null || missing+=("$t"); done
  unpack_kit || missing+=(".gpu-kit")
  # The tokenizer needs PCRE2 and OpenSSL's headers, which the kit does not hold.
  for t in pcre2.h openssl/sha.h; do
    [ -f "/usr/include/$t" ] || [ -f "$K/include/$t" ] || missing+=("$t")
  done
  [ ${#missing[@]} = 0 ] || { echo "cannot build here: missing ${missing[*]}"; exit 20; }
  local nccl_args=() nccl_root gen=()
  if nccl_root=$(find_nccl); then nccl_args=(-DNCCL_ROOT="$nccl_root"); else echo "NCCL: not found"; fi
  export LD_LIBRARY_PATH="$K/lib/x86_64-linux-gnu/openblas-pthread:$K/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  command -v ninja >/dev/null && gen=(-G Ninja)
  set -x
  cmake -S "$ROOT" -B "$WORK/build-gpu" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DDDP_CUDA=ON -DDDP_MPI=OFF -DDDP_BUILD_TESTS=ON -DCMAKE_PREFIX_PATH="$K" \
    -DCMAKE_LIBRARY_PATH="$K/lib/x86_64-linux-gnu/openblas-pthread" \
    -DCMAKE_INCLUDE_PATH="$K/include/x86_64-linux-gnu/openblas-pthread" "${nccl_args[@]}"
  cmake --build "$WORK/build-gpu" -j 16 --target ddp_train ddp_cuda_tests bench_kernels
}
stage_0_build() {
  if run_cmd 0-build bash -c body_build; then
    BIN=$WORK/build-gpu; TESTS=$BIN/tests/ddp_cuda_tests
    local kitld="$K/lib/x86_64-linux-gnu/openblas-pthread:$K/lib/x86_64-linux-gnu"
    [ -d "$WORK/nccl/lib" ] && kitld="$WORK/nccl/lib:$kitld"
    OURS_LD=$(ours_ld_path "$kitld")
    [ -d "$FMNIST" ] || FMNIST=$K/share/datasets/fashion-mnist
    FIGURE[0-build]=$(grep -m1 -oE 'ddp_train: NCCL [A-Z]+( \([0-9.]+)?' "$LOGS/0-build.log" | sed 's/ddp_train: //; s/(//')
  else
    FIGURE[0-build]=$(grep -m1 -E 'cannot build here|error' "$LOGS/0-build.log")
  fi
}

# ---- 1: the CUDA tests ---------------------------------------------------------------------------------
# The newest kernels' tests (1a, and the sanitizer's 2a/2b below) by name:
# the precision-generic suites run as Precisions/CudaLowpKernels.<test>/fp16
# and /bf16, and every BF16 instance (*/bf16, never run on a GPU before) is
# new. 1b is every other test of the GPU suites: 1a and 1b together are the
# whole of ddp_cuda_tests (the dry run checks this against the carried
# binary's list).
LOWP='Precisions/CudaLowpKernels'
NEW_FILTER="$LOWP.TransformerOperationsMatchCpu/fp16:$LOWP.BatchedGemm*/fp16:$LOWP.FusedAttention*/fp16:CudaKernels.FusedAttention*:$LOWP.FusedCrossEntropyRows*/fp16:$LOWP.AdamW*/fp16:$LOWP.GemmToFp32*/fp16:$LOWP.AddFp32IntoFp16*/fp16:CudaKernels.UnscaleFp32*:CudaKernels.StepState*:CudaKernels.CapturedStep*:CudaKernels.BufferGrowthAroundACaptureIsRefused:CudaKernels.EmptyRange*:CudaKernels.MissingBuffers*:*CudaGptRecompute.*:*CudaGraphTraining.*:NcclShards1Rank.*:NcclCapture.*:NcclCommunicator1Rank.AllreduceFp32*:CudaUpload.BatchLoaderPrefetchesIntactTokenBatches:*/bf16:*Bf16*:*BF16*"
REST_FILTER="Cuda*:Nccl*:Precisions/*:-$NEW_FILTER"
# Under memcheck (10-100x) the newest kernels in FP16 (the indexing is the
# same code in both), and a few small BF16 ones: the fallback GEMM and its
# epilogues, the unscale.
MEMCHECK_KERNELS="$LOWP.TransformerOperationsMatchCpu/fp16:$LOWP.BatchedGemmOnSimpleFallbackKernel/*:$LOWP.AdamWOnARangeMatchesCpu/fp16:$LOWP.FusedCrossEntropyRowsMatchTheCpu/fp16:$LOWP.GemmToFp32*/fp16:$LOWP.AddFp32IntoFp16RoundsAsTheCpu/fp16:CudaKernels.StepStatePrepareAndFinishMatchTheCpu:CudaKernels.CapturedStepReadsTheStepStateOnEveryReplay:CudaKernels.EmptyRangeWithNullBuffersIsANoOpOnBothBackends:$LOWP.GemmEpiloguesOnSimpleFallbackKernel/bf16:$LOWP.UnscaleFlagsInfAndNanAnywhere/bf16"
MEMCHECK_ATTENTION="$LOWP.FusedAttentionMatchesCpu/fp16:CudaKernels.FusedAttentionRefusesHeadSizesPastTheKernelsLimit:*CudaGptRecompute.GradientsAreTheKeptActivationsBits/fp16"
declare -A FILTER=([1a-cuda-new]=$NEW_FILTER [1b-cuda-rest]=$REST_FILTER
                   [2a-memcheck-kernels]=$MEMCHECK_KERNELS [2b-memcheck-attention]=$MEMCHECK_ATTENTION)

# listed FILTER: how many of the test binary's tests a filter takes.
listed() { env LD_LIBRARY_PATH="$OURS_LD" "$TESTS" --gtest_list_tests --gtest_filter="$1" 2>/dev/null | grep -c '^  '; }

stage_cuda_tests() {
  local name=$1
  run_cmd "$name" env LD_LIBRARY_PATH="$OURS_LD" "$TESTS" --gtest_filter="${FILTER[$name]}" \
    --gtest_output="xml:$LOGS/gtest-$name.xml"
  FIGURE[$name]=$(gtest_counts "$LOGS/$name.log")
  if [[ "${FIGURE[$name]}" == "0 passed, 0 failed, 0 skipped" ]]; then STATUS[$name]="FAILED (no test ran)"
  elif [ "${STATUS[$name]}" = ok ] && ! grep -q ', 0 skipped' <<<"${FIGURE[$name]}"; then
    STATUS[$name]="WARN (tests skipped on a GPU host: their reasons are in the log)"
  fi
}

# ---- 2: compute-sanitizer ------------------------------------------------------------------------
san_figure() {
  local name=$1 summary
  summary=$(grep -oE '(ERROR|RACECHECK) SUMMARY: [0-9]+ [a-z]+' "$LOGS/$name.log" | sort | uniq -c | awk '{$1 = $1 "x"; print}' | paste -sd ';')
  FIGURE[$name]="${summary:-no summary line}"
  grep -q '^\[  PASSED  \]' "$LOGS/$name.log" && FIGURE[$name]="${FIGURE[$name]}; $(gtest_counts "$LOGS/$name.log")"
  if grep -qiE 'Device not supported|not supported on this' "$LOGS/$name.log"; then STATUS[$name]="unsupported (compute-sanitizer: device not supported)"; fi
}
stage_memcheck_tests() {
  local name=$1
  run_cmd "$name" env LD_LIBRARY_PATH="$OURS_LD" "$SAN" --tool memcheck --error-exitcode 3 --print-limit 50 \
    "$TESTS" --gtest_filter="${FILTER[$name]}"
  san_figure "$name"
  if [ "${STATUS[$name]}" = ok ]; then
    local counts; counts=$(gtest_counts "$LOGS/$name.log")
    if [[ $counts == "0 passed, 0 failed, 0 skipped" ]]; then STATUS[$name]="FAILED (no test ran)"
    elif [[ $counts != *", 0 skipped" ]]; then STATUS[$name]="WARN (tests skipped on a GPU host: their reasons are in the log)"; fi
  fi
}
# A tiny GPT (2 layers, 2 heads, 64 wide, T 64, bytes) on the generated text,
# AdamW; the shape of every short GPT training below.
gpt_tiny() {
  echo --device cuda --data text --train-text "$TEXT" --model gpt --n-layer 2 --n-head 2 --n-embd 64 \
    --block-size 64 --batch-size 16 --optimizer adamw --lr 3e-3 --weight-decay 0.1
}
body_memcheck_train() {  # SAN BIN TINY...
  local san=$1 bin=$2; shift 2
  set -x
  "$san" --tool memcheck --error-exitcode 3 --print-limit 50 "$bin/ddp_train" "$@" --steps 6 --log-every 3 --zero 1 --cuda-graph || exit
  "$san" --tool memcheck --error-exitcode 3 --print-limit 50 "$bin/ddp_train" "$@" --steps 4 --log-every 2 --zero 3
}
stage_memcheck_train() {
  # shellcheck disable=SC2046
  run_cmd 2c-memcheck-train env LD_LIBRARY_PATH="$OURS_LD" bash -c 'body_memcheck_train "$@"' _ "$SAN" "$BIN" $(gpt_tiny)
  san_figure 2c-memcheck-train
}

# ---- 3: short trainings -------------------------------------------------------------------------------
make_inputs() {  # the generated text and random GPT-2 token ids the GPT stages read
  [ -s "$TEXT" ] && [ -s "$TOKENS" ] && return 0
  python3 - "$TEXT" "$TOKENS" <<'PY'
import random, struct, sys
# Sentences over a small fixed vocabulary (seeded, 200 KB): structure a tiny
# GPT picks up in a few dozen steps.
words = ("the a one every some model rank step token layer head batch loss scale gradient weight data "
         "reads writes learns trains sums checks moves holds keeps sends takes gives makes finds "
         "fast small large first last next each other same new old good true").split()
rng = random.Random(15)
lines, size = [], 0
while size < 200_000:
    lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(4, 10))).capitalize() + ".\n")
    size += len(lines[-1])
open(sys.argv[1], "w").write("".join(lines))
# 400,000 uniform GPT-2 token ids (raw uint16) for the LM-head stage.
open(sys.argv[2], "wb").write(struct.pack("<400000H", *(rng.randrange(50257) for _ in range(400000))))
PY
}
ours() { env LD_LIBRARY_PATH="$OURS_LD" "$BIN/ddp_train" "$@"; }
write_wrapper() {  # $WORK/ddp_train: our binary with its library path, for compare_torch.py
  printf '#!/usr/bin/env bash\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "$OURS_LD" "$BIN/ddp_train" >"$WORK/ddp_train"
  chmod +x "$WORK/ddp_train"
}
same() { [ -n "$1" ] && [ "$1" = "$2" ]; }
replays() { grep -oE '[0-9]+ steps replayed' "$LOGS/$1.log" | tail -1 | grep . || echo "no replays seen"; }

# 3a: the README's MLP on the carried Fashion-MNIST subset (the first 20000
# training images, all 10000 test images), 10 epochs. The bar: 85.5% (the
# CPU reached 86.90% on it, 2026-12-06); --cuda-graph must end as eager did.
MLP_MIN_ACC=${MLP_MIN_ACC:-0.855}
body_train_mlp() {  # WORK FMNIST
  local d=$2 args
  args=(--device cuda --data idx --train-images "$d/train-images-idx3-ubyte" --train-labels "$d/train-labels-idx1-ubyte"
        --test-images "$d/t10k-images-idx3-ubyte" --test-labels "$d/t10k-labels-idx1-ubyte" --epochs 10 --log-every 500)
  set -x
  ours "${args[@]}" --metrics "$1/logs/mlp-eager.jsonl" || exit
  ours "${args[@]}" --cuda-graph --metrics "$1/logs/mlp-graph.jsonl"
}
stage_train_mlp() {
  if [ ! -f "$FMNIST/train-images-idx3-ubyte" ] && [ ! -f "$FMNIST/train-images-idx3-ubyte.gz" ]; then
    STATUS[3a-train-mlp]="skipped (no Fashion-MNIST in $FMNIST)"; return
  fi
  run_cmd 3a-train-mlp bash -c 'body_train_mlp "$@"' _ "$WORK" "$FMNIST"
  local acc gacc loss gloss
  acc=$(metric summary "$LOGS/mlp-eager.jsonl" test_accuracy); loss=$(metric summary "$LOGS/mlp-eager.jsonl" test_loss)
  gacc=$(metric summary "$LOGS/mlp-graph.jsonl" test_accuracy); gloss=$(metric summary "$LOGS/mlp-graph.jsonl" test_loss)
  FIGURE[3a-train-mlp]="test accuracy and loss: eager ${acc:-?}, ${loss:-?}; --cuda-graph ${gacc:-?}, ${gloss:-?} ($(replays 3a-train-mlp)); bar $MLP_MIN_ACC"
  [ "${STATUS[3a-train-mlp]}" = ok ] || return
  if ! python3 -c "import sys; sys.exit(not ($acc >= $MLP_MIN_ACC and $gacc >= $MLP_MIN_ACC))" 2>/dev/null; then
    STATUS[3a-train-mlp]="FAILED (below the bar)"
  elif ! same "$loss" "$gloss"; then
    STATUS[3a-train-mlp]="WARN (--cuda-graph's test loss is not eager's)"
  fi
}

# 3b: the GPT's loss falls (last step <= 0.7 x first, as on the CPU); the same
# run with --cuda-graph (log steps eager, the others replayed) ends with
# eager's test loss.
GPT_TRAIN_MAX_RATIO=${GPT_TRAIN_MAX_RATIO:-0.7}
body_train_gpt() {  # LOGS TINY...
  local logs=$1; shift
  set -x
  ours "$@" --steps 60 --warmup-steps 5 --log-every 1 --metrics "$logs/gpt-eager.jsonl" || exit
  ours "$@" --steps 60 --warmup-steps 5 --log-every 20 --cuda-graph --metrics "$logs/gpt-graph.jsonl"
}
stage_train_gpt() {
  # shellcheck disable=SC2046
  run_cmd 3b-train-gpt bash -c 'body_train_gpt "$@"' _ "$LOGS" $(gpt_tiny)
  local losses first last tl gtl
  losses=$(metric losses "$LOGS/gpt-eager.jsonl"); first=${losses%% *}; last=${losses##* }
  tl=$(metric summary "$LOGS/gpt-eager.jsonl" test_loss); gtl=$(metric summary "$LOGS/gpt-graph.jsonl" test_loss)
  FIGURE[3b-train-gpt]="loss ${first:-?} -> ${last:-?} (bar ${GPT_TRAIN_MAX_RATIO} x first); test loss eager ${tl:-?}, --cuda-graph ${gtl:-?} ($(replays 3b-train-gpt))"
  [ "${STATUS[3b-train-gpt]}" = ok ] || return
  if [ -z "$first" ] || ! python3 -c "import sys; sys.exit(not $last <= $GPT_TRAIN_MAX_RATIO * $first)"; then
    STATUS[3b-train-gpt]="FAILED (the loss did not fall)"
  elif ! same "$tl" "$gtl"; then
    STATUS[3b-train-gpt]="WARN (--cuda-graph's test loss is not eager's)"
  fi
}

# 3c: at one rank every --zero stage ends with --zero 0's test loss exactly,
# and --cuda-graph (stages 0 and 1: 2 and 3 re-point per step) with eager's.
body_gpt_zero_graph() {  # LOGS TINY...
  local logs=$1 z; shift
  set -x
  for z in 0 1 2 3; do ours "$@" --steps 12 --log-every 4 --zero $z --metrics "$logs/zero$z-eager.jsonl" || exit; done
  for z in 0 1; do ours "$@" --steps 12 --log-every 4 --zero $z --cuda-graph --metrics "$logs/zero$z-graph.jsonl" || exit; done
}
stage_gpt_zero_graph() {
  # shellcheck disable=SC2046
  run_cmd 3c-gpt-zero-graph bash -c 'body_gpt_zero_graph "$@"' _ "$LOGS" $(gpt_tiny)
  local z e g eager=() graph=()
  for z in 0 1 2 3; do eager+=("$(metric summary "$LOGS/zero$z-eager.jsonl" test_loss)"); done
  for z in 0 1; do graph+=("$(metric summary "$LOGS/zero$z-graph.jsonl" test_loss)"); done
  e=$(printf '%s\n' "${eager[@]}" | sort -u | grep -c .); g=$(printf '%s\n' "${eager[@]}" "${graph[@]}" | sort -u | grep -c .)
  FIGURE[3c-gpt-zero-graph]="test loss at --zero 0..3: ${eager[*]}; --cuda-graph at 0, 1: ${graph[*]}"
  [ "${STATUS[3c-gpt-zero-graph]}" = ok ] || return
  if printf '%s\n' "${eager[@]}" "${graph[@]}" | grep -qx ''; then STATUS[3c-gpt-zero-graph]="FAILED (a run wrote no summary)"
  elif [ "$e" != 1 ]; then STATUS[3c-gpt-zero-graph]="FAILED (the --zero stages differ at one rank)"
  elif [ "$g" != 1 ]; then STATUS[3c-gpt-zero-graph]="FAILED (--cuda-graph differs from eager)"; fi
}

# 3d: --zero 1 for 20 steps straight, and stopped at step 10 (its checkpoint
# written by --async-checkpoint, gathered from the device) then resumed at
# --zero 1 and, from the same file, at --zero 3: three equal final losses.
body_gpt_resume() {  # WORK TINY...
  local w=$1; shift
  rm -rf "$w/ck"
  set -x
  ours "$@" --steps 20 --log-every 5 --zero 1 --metrics "$w/logs/resume-straight.jsonl" || exit
  ours "$@" --steps 20 --log-every 5 --zero 1 --stop-after-steps 10 --checkpoint-dir "$w/ck" --async-checkpoint || exit
  ls -l "$w/ck"
  ours "$@" --steps 20 --log-every 5 --zero 1 --checkpoint-dir "$w/ck" --resume --metrics "$w/logs/resume-z1.jsonl" || exit
  ours "$@" --steps 20 --log-every 5 --zero 3 --resume "$w/ck/ckpt-step000000000010.safetensors" \
    --metrics "$w/logs/resume-z3.jsonl"
}
stage_gpt_resume() {
  # shellcheck disable=SC2046
  run_cmd 3d-gpt-resume bash -c 'body_gpt_resume "$@"' _ "$WORK" $(gpt_tiny)
  local s r1 r3
  s=$(metric summary "$LOGS/resume-straight.jsonl" test_loss)
  r1=$(metric summary "$LOGS/resume-z1.jsonl" test_loss); r3=$(metric summary "$LOGS/resume-z3.jsonl" test_loss)
  FIGURE[3d-gpt-resume]="test loss straight ${s:-?}, resumed at --zero 1 ${r1:-?}, at --zero 3 ${r3:-?}"
  [ "${STATUS[3d-gpt-resume]}" = ok ] || return
  same "$s" "$r1" && same "$s" "$r3" || STATUS[3d-gpt-resume]="FAILED (a resumed run ends elsewhere)"
}

# 3e: --trace on the device (CUDA events on the compute stream, NCCL's
# stream's for the collectives): every traced step holds each layer's forward
# and backward with positive, ordered times and, NCCL's world of one, every
# bucket's collective once, within the step.
body_gpt_trace() {  # LOGS ROOT TINY...
  local logs=$1 root=$2 z; shift 2
  for z in 0 1; do
    (set -x; ours "$@" --steps 12 --log-every 4 --zero $z --trace "$logs/trace-z$z.json" --trace-steps 3:10) || exit
    python3 "$root/launch/merge_traces.py" "$logs/trace-z$z.json" -o "$logs/trace-z$z-merged.json" || exit
    python3 - "$logs/trace-z$z-merged.json" "$z" <<'PY' || exit
import json, sys
d = json.load(open(sys.argv[1])); o = d["otherData"]["ranks"][0]
x = [e for e in d["traceEvents"] if e.get("ph") == "X"]
layers, buckets, bad = len(o["layers"]), len(o["buckets"]), []
for s in range(3, 11):
    st = [e for e in x if e["args"].get("step") == s]
    steps = [e for e in st if e["cat"] == "step"]
    if len(steps) != 1:
        bad.append(f"step {s}: {len(steps)} step spans")
        continue
    step = steps[0]
    f = sorted((e for e in st if e["cat"] == "forward"), key=lambda e: e["ts"])
    b = sorted((e for e in st if e["cat"] == "backward"), key=lambda e: e["ts"])
    c = [e for e in st if e["cat"] == "comm" and "bucket" in e["args"]]
    if [e["args"]["layer"] for e in f] != list(range(layers)) or [e["args"]["layer"] for e in b] != list(range(layers))[::-1]:
        bad.append(f"step {s}: layers out of order")
    if any(e["dur"] <= 0 for e in f + b) or not all(step["ts"] <= e["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"] + 50 for e in f + b + c):
        bad.append(f"step {s}: a span outside its step or of no length")
    if o["transport"].startswith("NCCL") and sorted(e["args"]["bucket"] for e in c) != list(range(buckets)):
        bad.append(f"step {s}: buckets {sorted(e['args']['bucket'] for e in c)} of {buckets}")
print(f"--zero {sys.argv[2]}: " + ("ok" if not bad else "BAD: " + "; ".join(bad[:3])) + f": {len(x)} spans, {layers} layers, {buckets} buckets, transport {o['transport']}")
sys.exit(1 if bad else 0)
PY
  done
}
stage_gpt_trace() {
  # shellcheck disable=SC2046
  run_cmd 3e-gpt-trace bash -c 'body_gpt_trace "$@"' _ "$LOGS" "$ROOT" $(gpt_tiny)
  FIGURE[3e-gpt-trace]="$(grep -E '^--zero [01]: (ok|BAD)' "$LOGS/3e-gpt-trace.log" | paste -sd ';')"
}

# 3f: the GPT kernels at long contexts against the CPU backend: 2 layers, 2
# heads, 64 wide, batch 2, 3 AdamW steps at T = 1024 and 2048, the GPU with
# explicit and with fused attention: every step's loss within LONG_T_RTOL of
# the CPU's (explicit attention; FP16 on both sides, sums in other orders).
LONG_T_RTOL=${LONG_T_RTOL:-0.02}
body_gpt_long_t() {  # LOGS TEXT
  local logs=$1 t dev att
  for t in 1024 2048; do
    for dev in cpu cuda-explicit cuda-fused; do
      att=explicit; [ $dev = cuda-fused ] && att=fused
      (set -x; ours --device "${dev%%-*}" --data text --train-text "$2" --model gpt --n-layer 2 --n-head 2 --n-embd 64 \
        --block-size $t --batch-size 2 --steps 3 --log-every 1 --optimizer adamw --lr 1e-3 --attention $att \
        --val-fraction 0.05 --metrics "$logs/long-t$t-$dev.jsonl") || exit
    done
  done
}
stage_gpt_long_t() {
  run_cmd 3f-gpt-long-t bash -c 'body_gpt_long_t "$@"' _ "$LOGS" "$TEXT"
  local fig
  fig=$(python3 - "$LOGS" "$LONG_T_RTOL" <<'PY'
import json, sys
logs, rtol, parts, worst = sys.argv[1], float(sys.argv[2]), [], 0.0
def losses(path):
    try:
        return [json.loads(l)["loss"] for l in open(path) if '"step"' in l and '"loss"' in l]
    except (OSError, ValueError, KeyError):
        return []
for t in (1024, 2048):
    cpu = losses(f"{logs}/long-t{t}-cpu.jsonl")
    for dev in ("cuda-explicit", "cuda-fused"):
        gpu = losses(f"{logs}/long-t{t}-{dev}.jsonl")
        if not cpu or len(gpu) != len(cpu):
            parts.append(f"T {t} {dev}: no steps to compare"); worst = float("inf"); continue
        r = max(abs(g - c) / abs(c) for g, c in zip(gpu, cpu))
        worst = max(worst, r)
        parts.append(f"T {t} {dev[5:]}: {r:.1e}")
print(("ok" if worst <= rtol else "OFF") + f": largest relative loss difference from the CPU, rtol {rtol}: " + ", ".join(parts))
PY
)
  FIGURE[3f-gpt-long-t]=$fig
  [ "${STATUS[3f-gpt-long-t]}" = ok ] && [[ "$fig" != ok:* ]] && STATUS[3f-gpt-long-t]="FAILED (off the CPU)"
}

# 3g: the tied LM head's GEMMs over more than 2^31 elements: GPT-2 124M at
# batch 44, T 1024 (44 x 1024 x 50304 = 2.27e9 logits), 2 AdamW steps on
# random tokens, unchunked and in chunks of 4096 rows (206M logits each):
# the same losses (relative 1e-3) near ln(50304) = 10.83 (random tokens).
# --recompute block and fused attention keep the activations small.
body_lmhead() {  # LOGS TOKENS
  local logs=$1 chunk
  for chunk in 0 4096; do
    (set -x; ours --device cuda --data text --train-text "$2" --token-format raw-u16 --vocab-size 50304 --model gpt \
      --n-layer 12 --n-head 12 --n-embd 768 --block-size 1024 --batch-size 44 --optimizer adamw --lr 6e-4 \
      --steps 2 --log-every 1 --recompute block --attention fused --classifier-chunk $chunk --val-fraction 0.05 \
      --metrics "$logs/lmhead-chunk$chunk.jsonl") || exit
  done
}
stage_lmhead() {
  run_cmd 3g-lmhead-2g bash -c 'body_lmhead "$@"' _ "$LOGS" "$TOKENS"
  local fig
  fig=$(python3 - "$LOGS" <<'PY'
import json, math, sys
def losses(path):
    try:
        return [json.loads(l)["loss"] for l in open(path) if '"step"' in l and '"loss"' in l]
    except (OSError, ValueError, KeyError):
        return []
whole, chunked = losses(sys.argv[1] + "/lmhead-chunk0.jsonl"), losses(sys.argv[1] + "/lmhead-chunk4096.jsonl")
if not whole or len(whole) != len(chunked):
    print(f"no losses to compare: unchunked {whole}, chunked {chunked}"); sys.exit()
r = max(abs(a - b) / abs(b) for a, b in zip(whole, chunked))
near = all(abs(a - math.log(50304)) < 1.0 for a in whole)
print(("ok" if r <= 1e-3 and near else "OFF") + f": losses unchunked {', '.join(f'{a:.4f}' for a in whole)}, "
      f"chunked {', '.join(f'{b:.4f}' for b in chunked)} (largest relative difference {r:.1e}; ln 50304 = 10.83)")
PY
)
  FIGURE[3g-lmhead-2g]=$fig
  [ "${STATUS[3g-lmhead-2g]}" = ok ] && [[ "$fig" != ok:* ]] && STATUS[3g-lmhead-2g]="FAILED (the 2^31-element head is off)"
}

# 3h: 3b's run in BF16 (no loss scaling): the loss falls by the same bar,
# --cuda-graph ends with eager's test loss, and the final losses of BF16 and
# FP16 are set side by side (a figure, not a bar: 60 steps of a tiny model).
body_train_gpt_bf16() {  # LOGS TINY...
  local logs=$1; shift
  set -x
  ours "$@" --precision bf16 --steps 60 --warmup-steps 5 --log-every 1 --metrics "$logs/gpt-bf16-eager.jsonl" || exit
  ours "$@" --precision bf16 --steps 60 --warmup-steps 5 --log-every 20 --cuda-graph \
    --metrics "$logs/gpt-bf16-graph.jsonl"
}
stage_train_gpt_bf16() {
  # shellcheck disable=SC2046
  run_cmd 3h-gpt-bf16 bash -c 'body_train_gpt_bf16 "$@"' _ "$LOGS" $(gpt_tiny)
  local losses first last tl gtl fp16_tl
  losses=$(metric losses "$LOGS/gpt-bf16-eager.jsonl"); first=${losses%% *}; last=${losses##* }
  tl=$(metric summary "$LOGS/gpt-bf16-eager.jsonl" test_loss); gtl=$(metric summary "$LOGS/gpt-bf16-graph.jsonl" test_loss)
  fp16_tl=$(metric summary "$LOGS/gpt-eager.jsonl" test_loss)
  FIGURE[3h-gpt-bf16]="loss ${first:-?} -> ${last:-?}; test loss bf16 ${tl:-?} (fp16, 3b: ${fp16_tl:-?}), --cuda-graph ${gtl:-?} ($(replays 3h-gpt-bf16))"
  [ "${STATUS[3h-gpt-bf16]}" = ok ] || return
  if [ -z "$first" ] || ! python3 -c "import sys; sys.exit(not $last <= $GPT_TRAIN_MAX_RATIO * $first)"; then
    STATUS[3h-gpt-bf16]="FAILED (the loss did not fall)"
  elif ! same "$tl" "$gtl"; then
    STATUS[3h-gpt-bf16]="WARN (--cuda-graph's test loss is not eager's)"
  fi
}

# ---- 4: ours against PyTorch ------------------------------------------------------------------------
# compare_torch.py rewrites its table after every run and stops starting runs
# at --budget-s (the stage's budget less what its last run and the table
# need), so a cut stage still leaves a table.
stage_compare() {
  local name=$1 out=$2; shift 2
  local b=${BUDGET[$name]}
  mkdir -p "$LOGS/$name"
  run_cmd "$name" python3 "$ROOT/launch/compare_torch.py" --device cuda --ddp-train "$WORK/ddp_train" \
    --budget-s $((b - 12)) --out "$LOGS/$name/compare_torch.md" "$@"
  [ -f "$LOGS/$name/compare_torch.md" ] && cp "$LOGS/$name/compare_torch.md" "$OUT/$out"
  local fig
  fig=$(python3 - "$LOGS/$name/compare_torch.csv" <<'PY' 2>/dev/null
import csv, sys
f = lambda r, k, spec: format(float(r[k]), spec) if r.get(k) else "-"
rows, ours, torch = [], 0, 0
for r in csv.DictReader(open(sys.argv[1])):
    unit = "tokens" if "ours_tokens_per_s" in r else "samples"
    ours += bool(r.get(f"ours_{unit}_per_s"))
    torch += bool(r.get(f"torch_eager_{unit}_per_s") or r.get(f"torch_compile_{unit}_per_s"))
    mfu = f" (MFU {f(r, 'ours_mfu', '.1%')})" if r.get("ours_mfu") else ""
    rows.append(f"{r['model']}: ours {f(r, f'ours_{unit}_per_s', ',.0f')} {unit}/s{mfu}, "
                f"ours/eager {f(r, 'ratio_eager', '.2f')}, ours/compile {f(r, 'ratio_compile', '.2f')}")
print("ok" if ours and torch else "no-ours" if not ours else "no-torch")
print("; ".join(rows))
PY
)
  FIGURE[$name]=$(tail -n +2 <<<"$fig")
  [ "${STATUS[$name]}" = ok ] || return
  case $(head -1 <<<"$fig") in
    ok) ;;
    no-torch) STATUS[$name]="WARN (no PyTorch result: see the log)" ;;
    *) STATUS[$name]="FAILED (no result of ours)" ;;
  esac
}

# 4d's figure gains ours BF16 over ours FP16 (4c's run of the same model and
# batch on the same GPU, minutes apart).
bf16_over_fp16() {
  local ratio
  ratio=$(python3 - "$LOGS/4c-compare-gpt2/compare_torch.csv" "$LOGS/4d-compare-gpt2-bf16/compare_torch.csv" <<'PY' 2>/dev/null
import csv, sys
def ours(path):
    rows = [r for r in csv.DictReader(open(path)) if r.get("ours_tokens_per_s")]
    return float(rows[0]["ours_tokens_per_s"]) if rows else None
fp16, bf16 = ours(sys.argv[1]), ours(sys.argv[2])
print(f"{bf16 / fp16:.2f} ({bf16:,.0f} / {fp16:,.0f} tokens/s)")
PY
)
  FIGURE[4d-compare-gpt2-bf16]="${FIGURE[4d-compare-gpt2-bf16]:-}; ours bf16/fp16 ${ratio:-? (no FP16 or BF16 result)}"
}

# ---- 9: summary ---------------------------------------------------------------------------------------
body_summary() {  # WORK OUT
  tar -C "$1" -czf "$2/gpu-logs.tar.gz" logs && ls -l "$2"
}
write_summary() {
  local s f
  {
    echo "# gpu_check $(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname), $MODE"
    echo
    echo "${FIGURE[0-env]:-}"
    echo
    echo "$(elapsed) s in all; the stages' budgets sum to ${SUM_S} s of ${LIMIT_S} s"
    echo
    echo "| stage | verdict | s used of budget | figure |"
    echo "| --- | --- | ---: | --- |"
    for s in "${ORDER[@]}"; do
      [ "$s" = 9-summary ] && continue
      echo "| $s | ${STATUS[$s]:-} | ${USED[$s]:-0} of ${BUDGET[$s]} | $(tr '|' '/' <<<"${FIGURE[$s]:-}") |"
    done
    for f in compare_torch_mlp.md compare_torch_mlp_graph.md compare_torch_gpt2.md compare_torch_gpt2_bf16.md; do
      [ -f "$OUT/$f" ] && { echo; echo "$f:"; grep -E '^\|' "$OUT/$f"; }
    done
  } >"$OUT/summary.md"
}
elapsed() { echo $(($(date +%s) - START_S)); }

# ---- the run ----------------------------------------------------------------------------------------------
export ROOT WORK LOGS KIT K GPU_CARRY_TARBALL GPU_CARRY_STAMP
for f in $(declare -F | awk '{print $3}'); do export -f "${f?}"; done

# skip_reason NAME: why NAME does not run here, or nothing.
skip_reason() {
  local s=$1 p
  IFS=, read -ra p <<<"${GPU_CHECK_SKIP:-}"
  for x in "${p[@]}"; do [ -n "$x" ] && [[ $s == "$x"* ]] && { echo "skipped (GPU_CHECK_SKIP)"; return; }; done
  for x in "${LENDERS[@]}"; do
    [ "$s" = "$x" ] && [ "${STATUS[0-build]:-}" != "" ] && [[ "${STATUS[0-build]}" != skipped* ]] &&
      { echo "skipped (its time went to 0-build)"; return; }
  done
  case ${NEEDS[$s]} in
    -) ;;
    build)
      if [ $NEED_BUILD = 0 ]; then echo "skipped (the carried build is in use)"
      elif [ $DRY = 1 ]; then echo "skipped (dry run: a GPU run would build here)"; fi ;;
    *)
      if [ $HAVE_GPU = 0 ]; then echo "skipped (no GPU$([ $DRY = 1 ] && echo ': dry run'))"; return; fi
      case ${NEEDS[$s]} in
        tests|san) [ -x "$TESTS" ] || { echo "skipped (no ddp_cuda_tests: see 0-carry, 0-build)"; return; } ;;
        bin|san-bin) [ -x "$BIN/ddp_train" ] || { echo "skipped (no ddp_train: see 0-carry, 0-build)"; return; } ;;
      esac
      case ${NEEDS[$s]} in
        san|san-bin) [ -n "$SAN" ] || echo "skipped (no compute-sanitizer)" ;;
      esac ;;
  esac
}

find_gpu_and_sanitizer
for s in "${ORDER[@]}"; do
  [ "$s" = 9-summary ] && break
  why=$(skip_reason "$s")
  if [ -n "$why" ]; then
    STATUS[$s]=$why
    # Without a GPU, a gtest stage still counts its filter against the
    # carried test binary: a filter that takes no test names a renamed one.
    if [ -n "${FILTER[$s]:-}" ] && [ -x "$TESTS" ] && [[ $why == "skipped (no GPU"* ]]; then
      n=$(listed "${FILTER[$s]}")
      FIGURE[$s]="its filter takes $n of $(listed '*') tests"
      [ "$n" -gt 0 ] || STATUS[$s]="FAILED (its gtest filter takes no test)"
      if [ "$s" = 1b-cuda-rest ]; then
        total=$(listed '*'); new=$(listed "$NEW_FILTER")
        [ $((n + new)) = "$total" ] || STATUS[$s]="FAILED (1a and 1b take $((n + new)) of $total tests)"
      fi
    fi
    verdict "$s"
    continue
  fi
  note "$s: start (budget ${BUDGET[$s]} s, $(elapsed) s into the run): ${WHAT[$s]}"
  echo "===== $s: ${WHAT[$s]} =====" >>"$STAGES_LOG"
  t0=$(date +%s)
  if [ "${GPU_CHECK_TEST_HANG:-}" = "$s" ]; then
    run_cmd "$s" sleep 600
  else
    case $s in
      0-env) stage_0_env ;;
      0-carry) stage_0_carry ;;
      0-build) stage_0_build ;;
      1a-cuda-new|1b-cuda-rest) stage_cuda_tests "$s" ;;
      2a-memcheck-kernels|2b-memcheck-attention) stage_memcheck_tests "$s" ;;
      2c-memcheck-train) make_inputs; stage_memcheck_train ;;
      3a-train-mlp) stage_train_mlp ;;
      3b-train-gpt) make_inputs; stage_train_gpt ;;
      3c-gpt-zero-graph) make_inputs; stage_gpt_zero_graph ;;
      3d-gpt-resume) make_inputs; stage_gpt_resume ;;
      3e-gpt-trace) make_inputs; stage_gpt_trace ;;
      3f-gpt-long-t) make_inputs; stage_gpt_long_t ;;
      3g-lmhead-2g) make_inputs; stage_lmhead ;;
      3h-gpt-bf16) make_inputs; stage_train_gpt_bf16 ;;
      4a-compare-mlp) write_wrapper
        stage_compare 4a-compare-mlp compare_torch_mlp.md --models b,a,c --repeats 1 --modes eager,compile --run-timeout 40 ;;
      4b-compare-mlp-graph) write_wrapper
        stage_compare 4b-compare-mlp-graph compare_torch_mlp_graph.md --models b,a --repeats 1 --modes eager \
          --ours-flags=--cuda-graph --run-timeout 15 ;;
      4c-compare-gpt2) write_wrapper
        stage_compare 4c-compare-gpt2 compare_torch_gpt2.md --models gpt2 --repeats 1 --modes eager,compile \
          --run-timeout $((BUDGET[4c-compare-gpt2] - 15)) ;;
      4d-compare-gpt2-bf16) write_wrapper
        stage_compare 4d-compare-gpt2-bf16 compare_torch_gpt2_bf16.md --models gpt2 --precision bf16 --repeats 1 \
          --modes eager --run-timeout $((BUDGET[4d-compare-gpt2-bf16] - 15))
        bf16_over_fp16 ;;
    esac
  fi
  USED[$s]=$(($(date +%s) - t0))
  verdict "$s"
done

# 9: the summary and the tarball, whatever happened above.
t0=$(date +%s)
write_summary
echo "===== 9-summary =====" >>"$STAGES_LOG"
run_cmd 9-summary bash -c 'body_summary "$@"' _ "$WORK" "$OUT"
FIGURE[9-summary]="$(ls "$OUT" | wc -l) files under \$OUT: $(ls "$OUT" | tr '\n' ' ')"
USED[9-summary]=$(($(date +%s) - t0))
verdict 9-summary
note "done in $(elapsed) s"
echo
cat "$OUT/summary.md"
rc=0
for s in "${ORDER[@]}"; do failed "$s" && rc=1; done
exit $rc
