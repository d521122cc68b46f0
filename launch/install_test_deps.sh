#!/usr/bin/env bash
# install_test_deps.sh: what only the test command needs beyond
# launch/install_deps.sh: Debian's slurm-wlm and munge (and libpmix-dev) for
# the one-node Slurm of tests/slurm/test_local_slurm.sh, which starts and
# stops its own munged, slurmctld and slurmd.
#
# The packages ship services that Debian enables and starts at install. This
# script installs them with the services kept from starting (a policy-rc.d
# answering 101, "action forbidden", for the length of the install, which
# invoke-rc.d and deb-systemd-invoke both obey), then disables the services
# whose packages it installed (systemctl disable, which on a SysV host also
# turns the rc.d links off) and, on a running systemd, stops and masks them,
# so no cluster service stays enabled or running. It does so on the way out
# whether or not apt-get succeeded, so a failed install leaves nothing
# enabled either. A service whose package the host already had (a real
# cluster node's munge or slurmd) keeps its set-up: only what this script
# installed is touched. Idempotent: quick when everything is present.
set -euo pipefail
. "$(dirname "$0")/scripts/debian_packages.sh"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
# slurm-wlm is a metapackage: the services come with slurmctld, slurmd and
# munge, each recorded on its own.
new_services=()
for s in munge slurmctld slurmd; do
  installed "$s" || new_services+=("$s")
done
policy=/usr/sbin/policy-rc.d
own_policy=""
finish() {
  if [ -n "$own_policy" ]; then $sudo rm -f "$own_policy"; fi
  local touched=()
  for s in "${new_services[@]}"; do
    installed "$s" || continue
    command -v systemctl >/dev/null || continue
    $sudo systemctl disable "$s" >/dev/null 2>&1 || true
    if [ -d /run/systemd/system ]; then
      $sudo systemctl stop "$s" >/dev/null 2>&1 || true
      $sudo systemctl mask "$s" >/dev/null 2>&1 || true
    fi
    touched+=("$s")
  done
  if [ ${#touched[@]} -gt 0 ]; then
    echo "install_test_deps: ${touched[*]} disabled$([ -d /run/systemd/system ] && echo ", stopped and masked")" \
      "(the Slurm test starts its own; systemctl unmask/enable them to run a real node)"
  fi
}
trap finish EXIT
if [ ${#new_services[@]} -gt 0 ] && [ ! -e "$policy" ]; then
  own_policy=$policy
  printf '#!/bin/sh\n# launch/install_test_deps.sh: no service starts while it installs Slurm and munge\nexit 101\n' |
    $sudo tee "$policy" >/dev/null
  $sudo chmod 755 "$policy"
fi
# srun --mpi=pmix's plugin dlopens pmix2/lib/libpmix.so, which only
# libpmix-dev ships (slurm-wlm-basic-plugins does not depend on it).
install_missing_debs install_test_deps slurm-wlm munge libpmix-dev

# The comparisons with PyTorch and Hugging Face (tests/python/test_hf_gpt2.py and the others).
"$(dirname "$0")/install_hf_deps.sh"
