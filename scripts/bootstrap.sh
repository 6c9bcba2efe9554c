#!/usr/bin/env bash
# Installs everything memscript needs to build and test, skipping what is already there.
#
#   scripts/bootstrap.sh                 install what is missing, say what was done
#   scripts/bootstrap.sh --print-python  also install, then print only the path of the
#                                        Python that carries libtorch (for CMake)
#   scripts/bootstrap.sh --print-lua     also install, then print only the path of the Lua
#                                        source tree that CMake builds (cmake/Lua.cmake)
#   scripts/bootstrap.sh --slurm         also install Slurm and munge (Debian slurm-wlm, munge)
#                                        for the test that runs a sweep on a local cluster
#
# libtorch comes from the PyPI `torch` wheel, pinned in scripts/torch-version (the one place
# the version is written). It goes into a per-user cache outside the clone, so every fresh
# clone reuses it: ${MEMSCRIPT_CACHE:-${XDG_CACHE_HOME:-~/.cache}/memscript}/torch-<version>.
#
# Lua is built with memscript (cmake/Lua.cmake), not taken from Debian 12: its liblua5.4 is
# 5.4.4, where nested coroutine.close calls overflow the C stack and crash the process
# (https://www.lua.org/bugs.html#5.4.4-9, tests/scripts/coroutine_close_nesting.lua). The
# source is the upstream release tarball, fetched with apt as the orig tarball of Debian 13
# (trixie)'s lua5.4 source package, checked against lua_sha256 below, and unpacked into the
# same cache: .../memscript/lua-<version>.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
torch_version=$(tr -d '[:space:]' <"$root/scripts/torch-version")
cache=${MEMSCRIPT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memscript}
venv=$cache/torch-$torch_version
# lua_sha256 is lua.org's published sha256 of lua-5.4.7.tar.gz: trixie's orig tarball is that file.
lua_version=5.4.7
lua_sha256=9fbf5e28ef86c69858f6d3d34eccc32e911c1a28b4120ff3e84aaa70cfbf1e30
lua_dir=$cache/lua-$lua_version

# With --print-python or --print-lua stdout carries the path alone, so progress goes to stderr.
say() { printf 'bootstrap: %s\n' "$*" >&2; }
die() {
  printf 'bootstrap: error: %s\n' "$*" >&2
  exit 1
}

print_python=0
print_lua=0
with_slurm=0
for argument in "$@"; do
  case $argument in
    --print-python) print_python=1 ;;
    --print-lua) print_lua=1 ;;
    --slurm) with_slurm=1 ;;
    *) die "unknown option $argument (known: --print-python, --print-lua, --slurm)" ;;
  esac
done

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
  local wanted=(libcxxopts-dev catch2 nlohmann-json3-dev ccache)
  command -v cmake >/dev/null || wanted+=(cmake)
  command -v g++ >/dev/null || wanted+=(g++)
  command -v make >/dev/null || wanted+=(make)
  python3 -m venv --help >/dev/null 2>&1 || wanted+=(python3 python3-venv)
  install_missing "Debian packages" "${wanted[@]}"
}

# cache_missing DIR WHAT: false (saying so) when DIR is complete; otherwise takes the cache's
# lock, since two clones bootstrapping at once must not both write it, and looks again.
cache_missing() {
  local dir=$1 what=$2
  if [[ ! -f $dir/.complete ]]; then
    mkdir -p "$cache"
    exec 9>"$cache/.lock"
    flock 9
    [[ -f $dir/.complete ]] || return 0
  fi
  say "$what present in $dir"
  return 1
}

install_torch() {
  cache_missing "$venv" "torch $torch_version" || return 0
  say "installing torch==$torch_version into $venv (a few GB, once per user)"
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir \
    "torch==$torch_version" numpy >&2 || die "pip could not install torch==$torch_version"
  "$venv/bin/python" -c 'import torch.utils' >&2 || die "torch installed but does not import"
  touch "$venv/.complete"
  say "torch $torch_version installed"
}

# The Lua source, from Debian's archive through apt-get source with a throwaway configuration
# in a temporary folder: the system's sources, lists and caches stay as they are, and no root
# is needed. apt checks trixie's signed Release and the package's hashes; lua_sha256 pins the
# tarball itself, so a changed upload fails here instead of building something else.
fetch_lua() {
  cache_missing "$lua_dir" "Lua $lua_version source" || return 0
  say "fetching the Lua $lua_version source (Debian trixie's lua5.4 source package) into $lua_dir"
  work=$(mktemp -d "$cache/.lua-XXXXXX")
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/lists/partial" "$work/archives/partial" "$work/parts" "$work/download"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]" \
    "http://deb.debian.org/debian trixie main" >"$work/sources.list"
  local apt=(-qq -o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/parts"
    -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work"
    -o "Dir::Cache::Archives=$work/archives" -o APT::Sandbox::User="$(id -un)")
  apt-get "${apt[@]}" update >&2 || die "apt-get update of trixie's sources failed (see above)"
  (cd "$work/download" && apt-get "${apt[@]}" source --download-only lua5.4 >&2) ||
    die "apt-get source lua5.4 (trixie) failed (see above)"
  local tarball=$work/download/lua5.4_$lua_version.orig.tar.gz
  [[ -f $tarball ]] || die "trixie's lua5.4 source package does not hold Lua $lua_version" \
    "(got: $(cd "$work/download" && echo *)); update lua_version and lua_sha256"
  echo "$lua_sha256  $tarball" | sha256sum --check --quiet >&2 ||
    die "$tarball does not have the expected sha256 $lua_sha256"
  tar -xzf "$tarball" -C "$work" --no-same-owner || die "could not unpack $tarball"
  [[ -f $work/lua-$lua_version/src/lua.hpp ]] || die "$tarball does not hold lua-$lua_version/src"
  rm -rf "$lua_dir"
  mv "$work/lua-$lua_version" "$lua_dir"
  rm -rf "$work"
  trap - EXIT
  touch "$lua_dir/.complete"
  say "Lua $lua_version source unpacked"
}

install_debian_packages
# Optional: the Slurm test (tests/slurm/) is skipped, loudly, where these are missing.
[[ $with_slurm -eq 1 ]] && install_missing "Slurm packages" slurm-wlm munge
install_torch
fetch_lua
if [[ $print_python -eq 1 ]]; then
  echo "$venv/bin/python"
fi
if [[ $print_lua -eq 1 ]]; then
  echo "$lua_dir"
fi
