#!/usr/bin/env bash
# install_deps.sh: the Debian packages ddp_train builds and runs with (and its
# tests' matplotlib), and the PyPI packages its tests and tools need.
# Idempotent and quick: apt-get (and pip, for PyPI's safetensors and tensorboard) runs only
# when something is missing.
# The CUDA toolkit (nvcc, cuBLAS, NCCL) is not a Debian package here: when
# /usr/local/cuda exists the build uses it, otherwise it builds CPU-only.
set -euo pipefail
. "$(dirname "$0")/scripts/debian_packages.sh"
# No daemons: the test command's one-node Slurm (slurm-wlm, munge) is
# launch/install_test_deps.sh's, so training needs no cluster services.
packages=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin libboost-program-options-dev
          libgtest-dev libgmock-dev libopenblas-dev zlib1g-dev nlohmann-json3-dev dataset-fashion-mnist
          # GPT-2's tokenizer (ddp_tokenize): PCRE2 for its pattern, libcrypto for a ranks table's sha256.
          libpcre2-dev libssl-dev
          # The SIMT executor (kernels/simt/): a fiber per CUDA thread, so CI runs our CUDA kernels.
          libboost-context-dev
          python3 python3-numpy python3-pip
          # Plots (launch/scaling_sweep.py, plot_sweep.py) with Debian's /usr/bin/python3.
          python3-matplotlib)
install_missing_debs install_deps "${packages[@]}"

# The safetensors interop tests (tests/python/) use Debian's python3, which
# sees python3-numpy and python3-torch, with the reference implementation
# from PyPI (Debian does not package it). pip needs --break-system-packages
# to add to Debian's python (PEP 668) from pip 23 on; older pips lack it.
# TensorBoard's own event writer (launch/metrics_to_tensorboard.py and its
# test) is PyPI's tensorboard package: Debian has none.
# launch/tune.py's search (and its test) uses PyPI's optuna.
# The tools run with this interpreter whichever python3 comes first on PATH:
# launch/ddp_tools/common/interpreter.py's PROVISIONED (change both together).
python=/usr/bin/python3
pip=("$python" -m pip install --quiet --disable-pip-version-check)
pypi_install() {  # module to import, package to install
  if ! "$python" -c "import $1" 2>/dev/null; then
    echo "install_deps: installing $2 (PyPI) for $python"
    "${pip[@]}" --break-system-packages "$2" 2>/dev/null || "${pip[@]}" "$2"
  fi
}
pypi_install safetensors.numpy safetensors
pypi_install tensorboard.summary tensorboard
pypi_install optuna optuna
# ddp_tokenize's test and benchmark compare with tiktoken (PyPI; Debian has none),
# given the local ranks file, so it downloads nothing itself.
pypi_install tiktoken tiktoken
