#!/usr/bin/env bash
# build.sh: configure and build into build/ (CMake options pass through,
# e.g. launch/build.sh -DDDP_CUDA=OFF). Quick when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then export PATH=/usr/local/cuda/bin:$PATH; fi
cmake -S . -B build "$@" >build-configure.log || { cat build-configure.log; exit 1; }
grep "ddp_train:" build-configure.log | sed 's/^-- //'
cmake --build build -j"$(nproc)"
