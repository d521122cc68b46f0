#!/usr/bin/env bash
# test_gpu_check_dry_run.sh SOURCE_DIR: launch/gpu_check.sh --dry-run, the
# plumbing of the one GPU run, without a GPU or a build (a few seconds).
# Its carried build is made of stubs: a ddp_train that answers --help, and a
# ddp_cuda_tests that lists the test names of tests/cuda/*.cpp (TEST_P ones
# once per precision, as gtest names them) and applies gtest's filter to them, so every stage's filter is counted against the
# tests as they are named today. Checks:
#   1. the dry run exits 0, every stage of the table has its verdict line in
#      order (the GPU stages "skipped (no GPU"), the budgets sum to at most
#      540 s, every gtest filter takes a test and 1a with 1b take them all,
#      and $OUT holds the few files the device tool returns, logs included;
#   2. a stage that overruns its budget is cut (TIMEOUT) and the stages after
#      it still run and give their verdicts;
#   3. a carried build of other sources is STALE and the fallback build is
#      named; a test outside the GPU suites' names fails 1b;
#   4. budgets over 540 s in all are refused before anything runs.
set -uo pipefail
SRC=$(cd "${1:?usage: test_gpu_check_dry_run.sh SOURCE_DIR}" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
check() {  # WHAT COMMAND...: one line, ok or FAIL
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; fails=$((fails + 1)); fi
}

# ---- a carried build of stubs -------------------------------------------------------
# shellcheck source=../../launch/scripts/gpu_carry.sh
source "$SRC/launch/scripts/gpu_carry.sh"
make_carry() {  # DIR SOURCES_HASH [EXTRA_TEST]
  local dir=$1 stage=$T/stage
  rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib" "$stage/data/fashion-mnist" "$dir"
  printf '#!/bin/sh\necho "ddp_train (a stub of test_gpu_check_dry_run.sh)"\n' >"$stage/bin/ddp_train"
  python3 - "$SRC/tests/cuda" "${3:-}" >"$stage/bin/tests.txt" <<'PY'
import glob, re, sys
texts = [open(f).read() for f in glob.glob(sys.argv[1] + "/*.cpp")]
names = {m.group(1) + "." + m.group(2) for t in texts
         for m in re.finditer(r"^\s*TEST(?:_F)?\(\s*(\w+)\s*,\s*(\w+)\s*\)", t, re.M)}
# TEST_P: PREFIX/FIXTURE.NAME/fp16 and /bf16 for each instantiation over
# kBothPrecisions (named by precision_test_name).
prefixes = {}
for t in texts:
    for m in re.finditer(r"INSTANTIATE_TEST_SUITE_P\(\s*(\w+)\s*,\s*(\w+)\s*,", t):
        prefixes.setdefault(m.group(2), []).append(m.group(1))
for t in texts:
    for m in re.finditer(r"^\s*TEST_P\(\s*(\w+)\s*,\s*(\w+)\s*\)", t, re.M):
        for prefix in prefixes.get(m.group(1), []):
            names |= {f"{prefix}/{m.group(1)}.{m.group(2)}/{p}" for p in ("fp16", "bf16")}
if sys.argv[2]:
    names.add(sys.argv[2])
print("\n".join(sorted(names)))
PY
  cat >"$stage/bin/ddp_cuda_tests" <<'PY'
#!/usr/bin/env python3
# A stub of ddp_cuda_tests: gtest's --gtest_list_tests and --gtest_filter
# (POSITIVE[:...][-NEGATIVE[:...]], * and ?) over tests.txt beside it.
import fnmatch, os, sys
names = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests.txt")).read().split()
filt = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--gtest_filter=")), "*")
pos, _, neg = filt.partition("-")
pos = [p for p in pos.split(":") if p] or ["*"]
neg = [p for p in neg.split(":") if p]
take = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in pos) and not any(fnmatch.fnmatchcase(n, p) for p in neg)]
if "--gtest_list_tests" in sys.argv:
    suite = None
    for n in take:
        s, c = n.split(".", 1)
        if s != suite:
            print(s + ".")
            suite = s
        print("  " + c)
else:
    print(f"[  PASSED  ] {len(take)} tests.")
PY
  printf '#!/bin/sh\nexit 0\n' >"$stage/bin/bench_kernels"
  chmod +x "$stage"/bin/*
  printf 'commit stub\nsources %s\ncuda_tests stub\n' "$2" >"$stage/$GPU_CARRY_STAMP"
  python3 -c 'import sys, tarfile
with tarfile.open(sys.argv[1], "w:xz") as t:
    t.add(sys.argv[2], arcname=".")' "$dir/$GPU_CARRY_TARBALL" "$stage"
}
HASH=$(gpu_carry_source_hash "$SRC")
make_carry "$T/carry" "$HASH"

dry_run() {  # OUT [VAR=VALUE...]: the dry run with the stub carry; its exit status
  local out=$1; shift
  env OUT="$out" GPU_CHECK_WORK="$out.work" GPU_CHECK_CARRY="$T/carry" GPU_CHECK_SKIP= GPU_CHECK_BUDGETS= \
    GPU_CHECK_TEST_HANG= "$@" timeout 120 bash "$SRC/launch/gpu_check.sh" --dry-run >"$out.stdout" 2>&1
}
verdict_of() { awk -F' [|] ' -v s="$2" '$1 == s {print $2}' "$1/verdicts.txt"; }

# ---- 1. the dry run ----------------------------------------------------------------
mapfile -t STAGES < <(bash "$SRC/launch/gpu_check.sh" --budgets | awk 'NR > 1 && $2 ~ /^[0-9]+s$/ {print $1}')
check "the stage table lists stages" [ ${#STAGES[@]} -ge 10 ]
t0=$(date +%s)
dry_run "$T/out1"; rc=$?
took=$(($(date +%s) - t0))
check "the dry run exits 0 (got $rc; its output: $T/out1.stdout)" [ $rc = 0 ]
check "the dry run takes seconds ($took s)" [ $took -le 60 ]
listed_stages=$(grep -v '^#' "$T/out1/verdicts.txt" | awk -F' [|] ' '{print $1}' | paste -sd ' ')
check "verdicts.txt has every stage, in order" [ "$listed_stages" = "${STAGES[*]}" ]
sum=$(grep -v '^#' "$T/out1/verdicts.txt" | awk -F' [|] ' '$1 != "0-build" {split($3, a, " "); n += a[4]} END {print n + 0}')
check "the budgets in verdicts.txt sum to at most 540 s (got $sum)" [ "$sum" -le 540 ]
check "the header says the sum" grep -q "^# budgets: sum $sum s of 540 s" "$T/out1/verdicts.txt"
check "0-carry used the carried build" [ "$(verdict_of "$T/out1" 0-carry)" = ok ]
check "0-build is not needed" [ "$(verdict_of "$T/out1" 0-build)" = "skipped (the carried build is in use)" ]
for s in "${STAGES[@]}"; do
  case $s in 0-*|9-*) continue ;; esac
  check "$s skips for want of a GPU" [ "$(verdict_of "$T/out1" "$s")" = "skipped (no GPU: dry run)" ]
done
for s in 1a-cuda-new 1b-cuda-rest 2a-memcheck-kernels 2b-memcheck-attention; do
  check "$s's filter takes tests" grep -qE "^$s [|].*its filter takes [1-9][0-9]* of [0-9]+ tests" "$T/out1/verdicts.txt"
done
n1a=$(grep -oP '^1a-cuda-new .*takes \K[0-9]+' "$T/out1/verdicts.txt")
n1b=$(grep -oP '^1b-cuda-rest .*takes \K[0-9]+' "$T/out1/verdicts.txt")
total=$(grep -c . "$T/stage/bin/tests.txt")
check "1a and 1b take all $total CUDA tests ($n1a + $n1b)" [ $((n1a + n1b)) = "$total" ]
for f in verdicts.txt stages.log summary.md gpu-logs.tar.gz; do check "\$OUT/$f is there" [ -s "$T/out1/$f" ]; done
nfiles=$(find "$T/out1" -type f | wc -l)
check "at most 8 files under \$OUT ($nfiles)" [ "$nfiles" -le 8 ]
check "no file under \$OUT deeper than 2 folders, names of [A-Za-z0-9._-]" \
  bash -c '! (cd "$1" && find . -mindepth 1 | grep -vE "^\./([A-Za-z0-9._-]+/){0,2}[A-Za-z0-9._-]+$")' _ "$T/out1"
check "the logs are in gpu-logs.tar.gz" bash -c 'tar -tzf "$1" | grep -q "logs/0-carry.log"' _ "$T/out1/gpu-logs.tar.gz"
check "stages.log holds the stages' output" grep -q '^ddp_train --help: ok' "$T/out1/stages.log"
check "summary.md has the table" grep -q '^| 4c-compare-gpt2 | skipped (no GPU: dry run) |' "$T/out1/summary.md"

# ---- 2. a stage over its budget ------------------------------------------------------
t0=$(date +%s)
dry_run "$T/out2" GPU_CHECK_TEST_HANG=0-env GPU_CHECK_BUDGETS=0-env=5; rc=$?
took=$(($(date +%s) - t0))
check "a TIMEOUT makes the exit status 1 (got $rc)" [ $rc = 1 ]
check "the hung stage is cut at its budget" [ "$(verdict_of "$T/out2" 0-env)" = "TIMEOUT (cut at 5 s)" ]
check "... within it ($took s in all)" [ $took -le 30 ]
check "the stage after it still runs" [ "$(verdict_of "$T/out2" 0-carry)" = ok ]
check "every stage still has its verdict" [ "$(grep -vc '^#' "$T/out2/verdicts.txt")" = ${#STAGES[@]} ]

# ---- 3. a stale carried build; a test outside the GPU suites ---------------------------
make_carry "$T/carry" "0123456789abcdef"
dry_run "$T/out3"; rc=$?
check "a stale carry is no failure of the dry run (got $rc)" [ $rc = 0 ]
check "0-carry says STALE" [ "$(verdict_of "$T/out3" 0-carry)" = "STALE (built from other sources)" ]
check "0-build is named for a GPU run" [ "$(verdict_of "$T/out3" 0-build)" = "skipped (dry run: a GPU run would build here)" ]
make_carry "$T/carry" "$HASH" "HalfKernels.NewKernelMatchesCpu"
dry_run "$T/out4"; rc=$?
check "a test outside Cuda*/Nccl* fails the dry run (got $rc)" [ $rc = 1 ]
check "... at 1b" bash -c '[[ "$(awk -F" [|] " "\$1 == \"1b-cuda-rest\" {print \$2}" "$1")" == "FAILED (1a and 1b take"* ]]' _ "$T/out4/verdicts.txt"

# ---- 4. budgets over nine minutes ----------------------------------------------------------
dry_run "$T/out5" GPU_CHECK_BUDGETS=4c-compare-gpt2=400; rc=$?
check "budgets over 540 s are refused with exit 2 (got $rc)" [ $rc = 2 ]
check "... saying so" grep -q 'refusing to run: the stages.* budgets sum to [0-9]* s, over 540 s' "$T/out5.stdout"
check "... before anything runs" [ ! -e "$T/out5/verdicts.txt" ]

echo "test_gpu_check_dry_run: $fails failed"
[ $fails = 0 ]
