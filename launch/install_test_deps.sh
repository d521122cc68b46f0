#!/usr/bin/env bash
# install_test_deps.sh: what only the test command needs beyond
# launch/install_deps.sh: Debian's slurm-wlm and munge (and libpmix-dev) for
# the one-node Slurm of tests/slurm/test_local_slurm.sh, which starts and
# stops its own munged, slurmctld and slurmd.
#
# The packages ship services that Debian enables and starts at install. This
# script installs them with the services kept from starting (a policy-rc.d
# answering 101, "action forbidden", for the length of the install, which
# invoke-rc.d and deb-systemd-invoke both obey), then disables the units it
# installed (systemctl disable, which on a SysV host also turns the rc.d
# links off) and, on a running systemd, stops and masks them, so no cluster
# service stays enabled or running. A host that already had these packages
# keeps its own set-up: only what this script installed is touched.
# Idempotent: quick when everything is present.
set -euo pipefail
. "$(dirname "$0")/debian_packages.sh"
services=(munge slurmctld slurmd)
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
policy=/usr/sbin/policy-rc.d
own_policy=""
need=()
for p in slurm-wlm munge libpmix-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ] && [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# launch/install_test_deps.sh: no service starts while it installs Slurm and munge\nexit 101\n' |
    $sudo tee "$policy" >/dev/null
  $sudo chmod 755 "$policy"
  own_policy=$policy
fi
cleanup() { if [ -n "$own_policy" ]; then $sudo rm -f "$own_policy"; fi; }
trap cleanup EXIT
# srun --mpi=pmix's plugin dlopens pmix2/lib/libpmix.so, which only
# libpmix-dev ships (slurm-wlm-basic-plugins does not depend on it).
install_missing_debs install_test_deps slurm-wlm munge libpmix-dev
installed=" ${INSTALLED_DEBS[*]} "
if [[ $installed == *" slurm-wlm "* || $installed == *" munge "* ]] && command -v systemctl >/dev/null; then
  for s in "${services[@]}"; do
    $sudo systemctl disable "$s" >/dev/null 2>&1 || true
    if [ -d /run/systemd/system ]; then
      $sudo systemctl stop "$s" >/dev/null 2>&1 || true
      $sudo systemctl mask "$s" >/dev/null 2>&1 || true
    fi
  done
  echo "install_test_deps: ${services[*]} disabled$([ -d /run/systemd/system ] && echo ", stopped and masked") (the Slurm test starts its own; systemctl unmask/enable them to run a real node)"
fi
