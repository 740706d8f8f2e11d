# grove against the real JAX stack: jax.random, jax.tree_util and optree, optax, flax and
# safetensors, in the pinned environment that scripts/oracle-env.sh builds (GROVE_ORACLE_PYTHON).
# Each check is a ctest case `oracle_<what it checks>`: a Python script runs a C++ driver that
# prints grove's results (tests/oracle/oracle_io.hpp's records), computes the same with the real
# library, and compares. Release build only: the drivers are grove's code paths at speed, and the
# sanitizer build checks the same code through the unit tests.

# grove_oracle_driver(NAME SOURCES src... [LIBRARIES lib...]): a driver executable.
function(grove_oracle_driver name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;LIBRARIES")
  add_executable(${name} ${arg_SOURCES})
  target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/oracle)
  target_link_libraries(${name} PRIVATE grove::grove grove_warnings ${arg_LIBRARIES})
endfunction()

# grove_oracle_test(NAME SCRIPT script.py ARGS args...): the ctest case oracle_NAME runs
# `python tests/oracle/script.py args...` in the oracle environment; its exit status is the verdict
# (no skip code: a comparison that cannot run fails).
function(grove_oracle_test name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "SCRIPT;TIMEOUT" "ARGS")
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 600)
  endif()
  add_test(NAME oracle_${name}
           COMMAND ${GROVE_ORACLE_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/oracle/${arg_SCRIPT} ${arg_ARGS})
  # XLA on the CPU only, with no warning about absent accelerators; one XLA thread pool per test
  # is enough beside ctest -j.
  set_tests_properties(oracle_${name} PROPERTIES LABELS oracle TIMEOUT ${arg_TIMEOUT}
                       ENVIRONMENT "JAX_PLATFORMS=cpu;TF_CPP_MIN_LOG_LEVEL=2;PYTHONDONTWRITEBYTECODE=1")
endfunction()

include(oracle/random.cmake)
include(oracle/trees.cmake)
include(oracle/optax.cmake)
include(oracle/flax.cmake)
include(oracle/files.cmake)
