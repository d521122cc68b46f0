#!/usr/bin/env bash
# fuzz.sh: fuzzes the file parsers (IDX, .npy, CSV, checkpoint, --config INI,
# safetensors, token files)
# with libFuzzer + ASan + UBSan, one harness after another.
#
#   launch/fuzz.sh [SECONDS_PER_HARNESS=60] [HARNESS...]     e.g. launch/fuzz.sh 300 npy csv
#
# Installs clang when it cannot build a libFuzzer binary, configures and
# builds build-fuzz/ (clang, -DDDP_FUZZ=ON, CPU-only, no MPI, no tests),
# writes the seeds (tests/fuzz/fuzz_seeds.cpp, plus a checkpoint and weights
# from build/ddp_train when that binary exists) and runs each harness for the
# given time on its corpus in build-fuzz/work/corpus/<harness> (kept between
# runs, so a second run starts where the first ended). Prints per harness:
# executions, exec/s, coverage (cov = edges, ft = features, from libFuzzer's
# final stats) and the findings, i.e. the crash-/leak-/timeout-/oom- files
# libFuzzer wrote into build-fuzz/work/artifacts/<harness>/. Exits 1 when any
# harness found something. A finding reproduces with
#   build-fuzz/tests/fuzz/fuzz_<harness> <artifact file>
# and shrinks with
#   build-fuzz/tests/fuzz/fuzz_<harness> -minimize_crash=1 -runs=10000 <artifact file>
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(idx npy csv checkpoint config safetensors token_file)
build=build-fuzz
work=$build/work
jobs=${DDP_FUZZ_BUILD_JOBS:-$(nproc)}

# ---- toolchain ---------------------------------------------------------------------
launch/install_deps.sh
can_fuzz() {
  command -v clang++ >/dev/null || return 1
  local dir
  dir=$(mktemp -d)
  printf '#include <cstdint>\n#include <cstddef>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n' >"$dir/t.cpp"
  clang++ -fsanitize=fuzzer,address,undefined "$dir/t.cpp" -o "$dir/t" >/dev/null 2>&1
  local rc=$?
  rm -rf "$dir"
  return $rc
}
if ! can_fuzz; then
  echo "fuzz: installing clang (libFuzzer comes with Debian's clang runtime, libclang-rt-*-dev)"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends clang libclang-rt-dev
  can_fuzz || { echo "fuzz: clang++ -fsanitize=fuzzer still fails to link; install libclang-rt-<version>-dev" >&2; exit 2; }
fi

# ---- build -------------------------------------------------------------------------
mkdir -p "$work"
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDDP_FUZZ=ON -DDDP_CUDA=OFF -DDDP_MPI=OFF -DDDP_BUILD_TESTS=OFF >"$work/configure.log" 2>&1 ||
    { cat "$work/configure.log"; exit 2; }
fi
cmake --build "$build" --target fuzzers -j "$jobs"
bin=$build/tests/fuzz

# ---- seeds -------------------------------------------------------------------------
seeds=$work/seeds
rm -rf "$seeds"
"$bin/fuzz_seeds" "$seeds"
cp -r tests/fuzz/seeds/. "$seeds/"  # inputs of past findings: each run re-checks them
if [ -x build/ddp_train ]; then  # real files as the trainer writes them (not rebuilt here)
  real=$(mktemp -d)
  if build/ddp_train --device cpu --data synthetic --synthetic-samples 64 --batch-size 16 --steps 2 --threads 1 \
      --checkpoint-dir "$real/ck" --save-weights "$real/w" >"$real/log" 2>&1; then
    cp "$real"/ck/*.safetensors "$seeds/checkpoint/" 2>/dev/null || true
    for f in "$real"/w/*.npy; do [ -f "$f" ] && cp "$f" "$seeds/npy/ddp_train-$(basename "$f")"; done
  fi
  if build/ddp_train --device cpu --data synthetic --synthetic-samples 64 --batch-size 16 --steps 2 --threads 1 \
      --save-weights "$real/w.safetensors" >>"$real/log" 2>&1 && [ -f "$real/w.safetensors" ]; then
    cp "$real/w.safetensors" "$seeds/safetensors/ddp_train-weights.safetensors"
  fi
  rm -rf "$real"
fi

# ---- fuzz --------------------------------------------------------------------------
declare -A max_len=([idx]=65536 [npy]=65536 [csv]=65536 [checkpoint]=262144 [config]=16384 [safetensors]=65536
                   [token_file]=16384)
declare -A dict=([npy]=tests/fuzz/npy.dict [csv]=tests/fuzz/csv.dict [config]=$seeds/config.dict
                 [safetensors]=tests/fuzz/safetensors.dict)
summary=()
failed=0
for h in "${harnesses[@]}"; do
  [ -x "$bin/fuzz_$h" ] || { echo "fuzz: no harness '$h' (have: idx npy csv checkpoint config safetensors token_file)" >&2; exit 2; }
  corpus=$work/corpus/$h
  artifacts=$work/artifacts/$h
  mkdir -p "$corpus" "$artifacts"
  log=$work/fuzz_$h.log
  args=(-max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -max_len="${max_len[$h]}"
        -print_final_stats=1 -artifact_prefix="$artifacts/")
  [ -n "${dict[$h]:-}" ] && args+=(-dict="${dict[$h]}")
  stamp=$work/.start_$h
  touch "$stamp"  # findings are the artifacts newer than this (older ones stay for reference)
  echo "fuzz: $h for ${seconds}s (log $log)"
  # libFuzzer stops at the first finding and exits non-zero; the summary
  # below counts what it left in the artifacts directory.
  "$bin/fuzz_$h" "${args[@]}" "$corpus" "$seeds/$h" >"$log" 2>&1 || true

  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || true)
  units=$(find "$corpus" -type f | wc -l)
  new_findings() {
    find "$artifacts" -type f -newer "$stamp" \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \)
  }
  findings=$(new_findings | wc -l)
  line=$(printf '%-10s %10s execs %7s exec/s  %-22s corpus %5s  findings %s' \
         "$h" "${execs:-?}" "${rate:-?}" "${cov:-cov: ?}" "$units" "$findings")
  summary+=("$line")
  if [ "$findings" -gt 0 ]; then
    failed=1
    grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|FINDING' "$log" | sed 's/^/    /' || true
    new_findings | sed 's/^/    artifact: /'
  fi
done

echo
echo "fuzz summary (${seconds}s per harness; coverage from libFuzzer's last status line):"
printf '  %s\n' "${summary[@]}"
if [ "$failed" -ne 0 ]; then
  echo "fuzz: FINDINGS above; reproduce with $bin/fuzz_<harness> <artifact>" >&2
  exit 1
fi
echo "fuzz: no findings"
