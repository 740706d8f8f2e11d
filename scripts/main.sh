#!/usr/bin/env bash
# Runs grove's main job on a fresh Debian 12 machine: installs what is missing, builds the
# examples with CMake and runs the main example. Extra arguments go to the example.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-packages.sh $(grep -v '^#' scripts/packages.txt)
cmake -S . -B build/main -DCMAKE_BUILD_TYPE=Release -DGROVE_BUILD_TESTS=OFF \
  -DGROVE_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build/main -j "$(nproc)" --target pytree_tour
exec build/main/examples/pytree_tour "$@"
