#!/usr/bin/env bash
# install_deps.sh: the Debian packages ddp_train builds and runs with (and its
# tests: matplotlib, a local Slurm), and the PyPI packages its tests need.
# Idempotent and quick: apt-get (and pip, for PyPI's safetensors and tensorboard) runs only
# when something is missing.
# The CUDA toolkit (nvcc, cuBLAS, NCCL) is not a Debian package here: when
# /usr/local/cuda exists the build uses it, otherwise it builds CPU-only.
set -euo pipefail
packages=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin libboost-program-options-dev
          libgtest-dev libgmock-dev libopenblas-dev zlib1g-dev nlohmann-json3-dev dataset-fashion-mnist
          python3 python3-numpy python3-pip
          # Plots (launch/scaling_sweep.py, plot_sweep.py) with Debian's /usr/bin/python3.
          python3-matplotlib
          # The one-node Slurm of tests/slurm/test_local_slurm.sh (it skips without them).
          # srun --mpi=pmix's plugin dlopens pmix2/lib/libpmix.so, which only
          # libpmix-dev ships (slurm-wlm-basic-plugins does not depend on it).
          slurm-wlm munge libpmix-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} Debian packages present"
else
  echo "install_deps: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The safetensors interop tests (tests/python/) use Debian's python3, which
# sees python3-numpy and python3-torch, with the reference implementation
# from PyPI (Debian does not package it). pip needs --break-system-packages
# to add to Debian's python (PEP 668) from pip 23 on; older pips lack it.
# TensorBoard's own event writer (launch/metrics_to_tensorboard.py and its
# test) is PyPI's tensorboard package: Debian has none.
# launch/tune.py's search (and its test) uses PyPI's optuna.
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
