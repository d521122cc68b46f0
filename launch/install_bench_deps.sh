#!/usr/bin/env bash
# install_bench_deps.sh: the optional Debian packages for the PyTorch
# comparison (launch/compare_torch.py, launch/torch_reference.py) on a CPU
# machine. Kept out of install_deps.sh so that CI and the README's two
# commands do not pull in PyTorch. Debian's python3-torch is seen by
# /usr/bin/python3 only (not by a pyenv or venv python3 earlier on PATH);
# compare_torch.py picks /usr/bin/python3 when it imports torch.
# Idempotent and quick: apt-get runs only when a package is missing.
set -euo pipefail
packages=(python3-torch)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_bench_deps: all ${#packages[@]} Debian packages present"
  exit 0
fi
echo "install_bench_deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
