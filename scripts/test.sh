#!/usr/bin/env bash
# Runs grove's whole test suite on a fresh Debian 12 machine: installs what is missing, builds
# with CMake, runs ctest in a normal build and again under AddressSanitizer + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-packages.sh $(grep -v '^#' scripts/packages.txt)
jobs=$(nproc)

echo "== grove: release build + tests"
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DGROVE_WERROR=ON -DGROVE_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build/release -j "$jobs"
ctest --test-dir build/release --output-on-failure -j "$jobs"

echo "== grove: AddressSanitizer + UndefinedBehaviorSanitizer build + tests"
cmake -S . -B build/sanitize -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
  -DGROVE_SANITIZE=ON -DGROVE_WERROR=ON -DGROVE_BUILD_EXAMPLES=OFF -DGROVE_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build/sanitize -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/sanitize --output-on-failure -j "$jobs" -LE build
