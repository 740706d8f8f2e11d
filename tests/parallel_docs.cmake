# Script mode: the first ```cpp block of docs/parallel.md must be exactly SOURCE (the program the
# build compiles, tests/parallel_snippet.cpp), and PROGRAM's standard output exactly the ```text
# block that follows it. Usage: cmake -DDOC=... -DSOURCE=... -DPROGRAM=... -P parallel_docs.cmake
include(${CMAKE_CURRENT_LIST_DIR}/doc_blocks.cmake)
grove_doc_blocks(${DOC} code expected)

file(READ ${SOURCE} source)
if(NOT code STREQUAL source)
  message(FATAL_ERROR "the program in ${DOC} differs from ${SOURCE}: copy one onto the other")
endif()
execute_process(COMMAND ${PROGRAM} RESULT_VARIABLE rc OUTPUT_VARIABLE output ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${rc}\nstdout:\n${output}\nstderr:\n${err}")
endif()
if(NOT output STREQUAL expected)
  message(FATAL_ERROR "the output differs from the documented one\n--- documented:\n${expected}\n--- actual:\n${output}")
endif()
message(STATUS "docs/parallel.md: the program is ${SOURCE}, and its output is as documented")
