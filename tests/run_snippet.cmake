# Runs PROGRAM and checks that its standard output is exactly the contents of EXPECTED.
# Usage: cmake -DPROGRAM=... -DEXPECTED=... -P run_snippet.cmake
execute_process(COMMAND ${PROGRAM} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${rc}\nstdout:\n${out}\nstderr:\n${err}")
endif()
file(READ ${EXPECTED} expected)
if(NOT out STREQUAL expected)
  message(FATAL_ERROR "the output differs from the documented one\n--- documented:\n${expected}\n--- actual:\n${out}")
endif()
message(STATUS "output as documented")
