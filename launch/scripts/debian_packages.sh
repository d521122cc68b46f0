# debian_packages.sh: install_missing_debs LABEL PACKAGE... installs, with
# apt-get, those of the Debian packages that are not installed yet (sudo when
# not root), and says which; quick when nothing is missing. Sourced by
# launch/install_deps.sh, launch/install_test_deps.sh and
# launch/install_bench_deps.sh.
install_missing_debs() {
  local label=$1 p sudo=""
  shift
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "$label: all $# Debian packages present"
    return 0
  fi
  echo "$label: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  # env: sudo does not pass the caller's environment on.
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
