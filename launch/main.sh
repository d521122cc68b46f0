#!/usr/bin/env bash
# main.sh: the README's main job. Installs what is missing, builds, and
# trains the default MLP on Fashion-MNIST (arguments go to ddp_train).
set -euo pipefail
cd "$(dirname "$0")/.."
launch/install_deps.sh
launch/build.sh
exec build/ddp_train "$@"
