#!/usr/bin/env bash
# Builds memscript with its CUDA kernels on a GPU machine that has nvcc, CMake and a CUDA
# PyTorch but no network (see docs/gpu.md). The Debian packages memscript needs at build time
# (catch2, libcxxopts-dev, nlohmann-json3-dev: `apt-get download` them elsewhere) are unpacked
# from MEMSCRIPT_DEBS into a private prefix, never over /.
#
#   MEMSCRIPT_DEBS=folder-of-debs MEMSCRIPT_LUA_SOURCE=lua-5.4.7 scripts/gpu-build.sh [targets...]
#
# Environment: BUILD (build-gpu), PYTHON (python3: the one whose torch provides libtorch),
# CUDA_ARCHS (native). Targets default to everything.
set -euo pipefail

build=${BUILD:-build-gpu}
python=$(command -v "${PYTHON:-python3}")
lua=${MEMSCRIPT_LUA_SOURCE:?"MEMSCRIPT_LUA_SOURCE: the Lua 5.4 source tree (scripts/bootstrap.sh --print-lua)"}
prefix_args=()
if [[ -n "${MEMSCRIPT_DEBS:-}" ]]; then
  deps=$(mktemp -d /tmp/memscript-deps.XXXXXX)
  for deb in "$MEMSCRIPT_DEBS"/*.deb; do dpkg -x "$deb" "$deps"; done
  prefix_args=(-DCMAKE_PREFIX_PATH="$deps/usr")
fi
generator=() keep_going=()
# With Ninja, one build reports every failing file (a lease is short).
command -v ninja >/dev/null && generator=(-G Ninja) keep_going=(-- -k 0)

cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DMEMSCRIPT_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-native}" -DMEMSCRIPT_TORCH_PYTHON="$python" \
  -DMEMSCRIPT_LUA_SOURCE="$(realpath "$lua")" "${prefix_args[@]}"
targets=()
for target in "$@"; do targets+=(--target "$target"); done
cmake --build "$build" -j "$(nproc)" "${targets[@]}" "${keep_going[@]}"
