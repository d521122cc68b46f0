#!/usr/bin/env bash
# install_hf_deps.sh: PyTorch and Hugging Face transformers for Debian's
# /usr/bin/python3, for the comparisons with them (launch/install_test_deps.sh
# runs it for the test command; launch/finetune_lm.sh for its export check).
# Idempotent and quick when both are present.
set -euo pipefail
. "$(dirname "$0")/scripts/debian_packages.sh"

# tests/python/test_hf_gpt2.py compares our Hugging Face GPT-2 import and export
# with transformers' GPT2LMHeadModel: Debian's python3-torch (1.13, for
# /usr/bin/python3) and transformers pinned at 4.46.3 from PyPI, checked with
# that torch (forward, save_pretrained, from_pretrained; generate() with one
# shim, in the test). Without recommends, python3-torch is 162 packages,
# about 25 s. The other torch comparisons (tests/python/) then run too.
install_missing_debs install_hf_deps python3-torch
if ! /usr/bin/python3 -c "import transformers" 2>/dev/null; then
  echo "install_hf_deps: installing transformers 4.46.3 (PyPI) for /usr/bin/python3"
  /usr/bin/python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "transformers==4.46.3" ||
    /usr/bin/python3 -m pip install --quiet --disable-pip-version-check "transformers==4.46.3"
fi
