#!/usr/bin/env bash
# Installs everything memscript needs to build and test, skipping what is already there.
#
#   scripts/bootstrap.sh                 install what is missing, say what was done
#   scripts/bootstrap.sh --print-python  also install, then print only the path of the
#                                        Python that carries libtorch (for CMake)
#   scripts/bootstrap.sh --slurm         also install Slurm and munge (Debian slurm-wlm, munge)
#                                        for the test that runs a sweep on a local cluster
#
# libtorch comes from the PyPI `torch` wheel, pinned in scripts/torch-version (the one place
# the version is written). It goes into a per-user cache outside the clone, so every fresh
# clone reuses it: ${MEMSCRIPT_CACHE:-${XDG_CACHE_HOME:-~/.cache}/memscript}/torch-<version>.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
torch_version=$(tr -d '[:space:]' <"$root/scripts/torch-version")
cache=${MEMSCRIPT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memscript}
venv=$cache/torch-$torch_version
print_python=0
with_slurm=0
for argument in "$@"; do
  case $argument in
    --print-python) print_python=1 ;;
    --slurm) with_slurm=1 ;;
    *) die "unknown option $argument (known: --print-python, --slurm)" ;;
  esac
done

# With --print-python stdout carries the path alone, so progress goes to stderr.
say() { printf 'bootstrap: %s\n' "$*" >&2; }
die() {
  printf 'bootstrap: error: %s\n' "$*" >&2
  exit 1
}

as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null; then
    sudo "$@"
  else
    die "need root to run: $* (install those packages, then run this again)"
  fi
}

apt_updated=0
apt_install() {
  if [[ $apt_updated -eq 0 ]]; then
    say "apt-get update"
    as_root apt-get update -qq >&2
    apt_updated=1
  fi
  say "apt-get install $*"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

package_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

# install_missing WHAT PACKAGE...: installs the packages not installed yet.
install_missing() {
  local what=$1
  shift
  local missing=()
  for p in "$@"; do
    package_installed "$p" || missing+=("$p")
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    say "$what present ($*)"
  else
    apt_install "${missing[@]}"
  fi
}

install_debian_packages() {
  local wanted=(liblua5.4-dev libcxxopts-dev catch2 nlohmann-json3-dev ccache)
  command -v cmake >/dev/null || wanted+=(cmake)
  command -v g++ >/dev/null || wanted+=(g++)
  command -v make >/dev/null || wanted+=(make)
  python3 -m venv --help >/dev/null 2>&1 || wanted+=(python3 python3-venv)
  install_missing "Debian packages" "${wanted[@]}"
}

install_torch() {
  if [[ -f $venv/.complete ]]; then
    say "torch $torch_version present in $venv"
    return
  fi
  mkdir -p "$cache"
  # Two clones bootstrapping at once must not both write the same cache.
  exec 9>"$cache/.lock"
  flock 9
  if [[ -f $venv/.complete ]]; then
    say "torch $torch_version present in $venv"
    return
  fi
  say "installing torch==$torch_version into $venv (a few GB, once per user)"
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir \
    "torch==$torch_version" numpy >&2 || die "pip could not install torch==$torch_version"
  "$venv/bin/python" -c 'import torch.utils' >&2 || die "torch installed but does not import"
  touch "$venv/.complete"
  say "torch $torch_version installed"
}

install_debian_packages
# Optional: the Slurm test (tests/slurm/) is skipped, loudly, where these are missing.
[[ $with_slurm -eq 1 ]] && install_missing "Slurm packages" slurm-wlm munge
install_torch
if [[ $print_python -eq 1 ]]; then
  echo "$venv/bin/python"
fi
