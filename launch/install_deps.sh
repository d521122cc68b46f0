#!/usr/bin/env bash
# install_deps.sh: the Debian packages ddp_train builds and runs with.
# Idempotent and quick: apt-get runs only when a package is missing.
# The CUDA toolkit (nvcc, cuBLAS, NCCL) is not a Debian package here: when
# /usr/local/cuda exists the build uses it, otherwise it builds CPU-only.
set -euo pipefail
packages=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin libboost-program-options-dev
          libgtest-dev libgmock-dev libopenblas-dev zlib1g-dev dataset-fashion-mnist)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} Debian packages present"
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
