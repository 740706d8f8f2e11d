#!/usr/bin/env bash
# Runs grove's whole test suite on a fresh Debian 12 machine: installs what is missing, builds
# with CMake and Ninja, runs ctest in a normal build and, for the suites where memory errors can
# hide (tests/CMakeLists.txt, GROVE_SANITIZED_SUITES), again under AddressSanitizer + UBSan.
#
# Usage: scripts/test.sh [all|release|sanitize|fast]
#   all       (the default) the release build and its tests, then the sanitizer build and its
#   release   the release build and every test of it (the JAX oracles included)
#   sanitize  the sanitizer build and its tests
#   fast      the edit-compile loop: the release build, and its tests but those labelled build
#             (compile-fail cases, consumer projects) and oracle (the real JAX stack)
#
# Compile time is most of this script's time on a 2-core machine, so both builds use the cheapest
# flags that still test what matters: the normal build at -O2 (the optimiser's code paths, as
# Debian builds packages; the main job and the benchmarks build at -O3 in build dirs of their
# own), the sanitizer build with line tables only (-g1: stack traces keep functions, files and
# lines; local variables are not needed to read a sanitizer's report). Both modes of the library
# are tested: the normal build in the compiled mode (GROVE_COMPILED: grove::nn's products compiled
# once, in grove::compiled, for every suite and example), the sanitizer build header-only. Ninja
# records each unit's compile time in build/*/.ninja_log (docs/CONVENTIONS.md lists the slowest).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
case "$mode" in
  all | release | sanitize | fast) ;;
  *)
    echo "usage: scripts/test.sh [all|release|sanitize|fast] (got '$mode')" >&2
    exit 2
    ;;
esac
scripts/ensure-packages.sh $(grep -v '^#' scripts/packages.txt)
jobs=$(nproc)

# A build directory that an older version of this script configured for Make is started afresh:
# CMake cannot switch an existing build tree to another generator.
fresh_for_ninja() {
  if [ -f "$1/CMakeCache.txt" ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$1/CMakeCache.txt"; then
    echo "== grove: $1 was configured for another generator; starting it afresh for Ninja"
    rm -rf "$1"
  fi
}

# The tests against the real JAX stack (tests/oracle/) need its Python packages, from the Python
# Package Index; GROVE_OFFLINE=1 leaves them out, and says so at the start and at the end.
oracle_python=
skipped_oracles() {
  echo "== grove: SKIPPED (GROVE_OFFLINE=1): the tests against the real jax, optax, flax, optree" \
       "and safetensors (tests/oracle/)"
}
if [ "$mode" = all ] || [ "$mode" = release ]; then
  if [ "${GROVE_OFFLINE:-0}" = 1 ]; then
    skipped_oracles
  else
    echo "== grove: the test oracles' Python environment (build/oracle-venv)"
    oracle_python=$(scripts/oracle-env.sh build/oracle-venv)
  fi
fi

if [ "$mode" != sanitize ]; then
  echo "== grove: release build + tests"
  fresh_for_ninja build/release
  cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
    -DGROVE_WERROR=ON -DGROVE_BUILD_BENCHMARKS=OFF -DGROVE_COMPILED=ON \
    -DGROVE_ORACLE_PYTHON="$oracle_python" >/dev/null
  cmake --build build/release -j "$jobs"
  if [ "$mode" = fast ]; then
    ctest --test-dir build/release --output-on-failure -j "$jobs" -LE 'build|oracle'
  else
    ctest --test-dir build/release --output-on-failure -j "$jobs"
  fi
fi

if [ "$mode" = all ] || [ "$mode" = sanitize ]; then
  echo "== grove: AddressSanitizer + UndefinedBehaviorSanitizer build + tests"
  fresh_for_ninja build/sanitize
  cmake -S . -B build/sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
    -DGROVE_SANITIZE=ON -DGROVE_WERROR=ON -DGROVE_BUILD_EXAMPLES=OFF -DGROVE_BUILD_BENCHMARKS=OFF >/dev/null
  cmake --build build/sanitize -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build/sanitize --output-on-failure -j "$jobs" -LE build
fi
if [ "${GROVE_OFFLINE:-0}" = 1 ] && { [ "$mode" = all ] || [ "$mode" = release ]; }; then
  skipped_oracles
fi
