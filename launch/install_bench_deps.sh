#!/usr/bin/env bash
# install_bench_deps.sh: the optional Debian packages for the PyTorch
# comparison (launch/compare_torch.py, launch/torch_reference.py) on a CPU
# machine. Kept out of install_deps.sh so that CI and the README's two
# commands do not pull in PyTorch. Debian's python3-torch is seen by
# /usr/bin/python3 only (not by a pyenv or venv python3 earlier on PATH);
# compare_torch.py picks /usr/bin/python3 when it imports torch.
# Idempotent and quick: apt-get runs only when a package is missing.
set -euo pipefail
. "$(dirname "$0")/scripts/debian_packages.sh"
install_missing_debs install_bench_deps python3-torch
