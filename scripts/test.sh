#!/usr/bin/env bash
# Runs grove's whole test suite on a fresh Debian 12 machine: installs what is missing, builds
# with CMake, runs ctest in a normal build and again under AddressSanitizer + UBSan.
# Compile time is most of this script's time on a 2-core machine, so both builds use the cheapest
# flags that still test what matters: the normal build at -O2 (the optimiser's code paths, as
# Debian builds packages; the main job and the benchmarks build at -O3 in build dirs of their
# own), the sanitizer build with line tables only (-g1: stack traces keep functions, files and
# lines; local variables are not needed to read a sanitizer's report).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-packages.sh $(grep -v '^#' scripts/packages.txt)
jobs=$(nproc)

# The tests against the real JAX stack (tests/oracle/) need its Python packages, from the Python
# Package Index; GROVE_OFFLINE=1 leaves them out, and says so at the start and at the end.
oracle_python=
skipped_oracles() {
  echo "== grove: SKIPPED (GROVE_OFFLINE=1): the tests against the real jax, optax, flax, optree" \
       "and safetensors (tests/oracle/)"
}
if [ "${GROVE_OFFLINE:-0}" = 1 ]; then
  skipped_oracles
else
  echo "== grove: the test oracles' Python environment (build/oracle-venv)"
  oracle_python=$(scripts/oracle-env.sh build/oracle-venv)
fi

echo "== grove: release build + tests"
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DGROVE_WERROR=ON -DGROVE_BUILD_BENCHMARKS=OFF \
  -DGROVE_ORACLE_PYTHON="$oracle_python" >/dev/null
cmake --build build/release -j "$jobs"
ctest --test-dir build/release --output-on-failure -j "$jobs"

echo "== grove: AddressSanitizer + UndefinedBehaviorSanitizer build + tests"
cmake -S . -B build/sanitize -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DGROVE_SANITIZE=ON -DGROVE_WERROR=ON -DGROVE_BUILD_EXAMPLES=OFF -DGROVE_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build/sanitize -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/sanitize --output-on-failure -j "$jobs" -LE build
if [ "${GROVE_OFFLINE:-0}" = 1 ]; then
  skipped_oracles
fi
