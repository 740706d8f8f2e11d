#!/usr/bin/env bash
# Runs grove's main job on a fresh Debian 12 machine: installs what is missing, builds the
# examples with CMake and trains the MLP on Fashion-MNIST (examples/train_mlp, its defaults).
# Extra arguments go to train_mlp (try --help; --plot run.png draws the training curves, with
# python3-matplotlib). Paths in them are relative to the repository root, where this runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-packages.sh $(grep -v '^#' scripts/packages.txt)
cmake -S . -B build/main -DCMAKE_BUILD_TYPE=Release -DGROVE_BUILD_TESTS=OFF \
  -DGROVE_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build/main -j "$(nproc)" --target train_mlp
exec build/main/examples/train_mlp "$@"
