# Script mode: builds and runs the consumer project against grove (MODE = find_package or
# add_subdirectory; TREE_ONLY=ON for a consumer of the tree core on a machine without Eigen). For
# find_package, grove is first configured and installed into WORK_DIR. Under add_subdirectory,
# grove must add no install rules to its parent.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(extra)
if(MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} -S ${GROVE_SOURCE_DIR} -B ${WORK_DIR}/grove-build -DCMAKE_CXX_COMPILER=${CXX}
      -DGROVE_BUILD_TESTS=OFF -DGROVE_BUILD_EXAMPLES=OFF -DGROVE_BUILD_BENCHMARKS=OFF)
  run(${CMAKE_COMMAND} --install ${WORK_DIR}/grove-build --prefix ${WORK_DIR}/prefix)
  set(extra -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
else()
  set(extra -DGROVE_SOURCE_DIR=${GROVE_SOURCE_DIR})
endif()
if(NOT TREE_ONLY)
  set(TREE_ONLY OFF)
endif()
run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build -DCMAKE_CXX_COMPILER=${CXX} -DMODE=${MODE}
    -DTREE_ONLY=${TREE_ONLY} ${extra})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
if(MODE STREQUAL "add_subdirectory")
  run(${CMAKE_COMMAND} --install ${WORK_DIR}/build --prefix ${WORK_DIR}/parent-prefix)
  file(GLOB_RECURSE installed ${WORK_DIR}/parent-prefix/*)
  if(installed)
    message(FATAL_ERROR "add_subdirectory(grove) installed files into its parent's prefix: ${installed}")
  endif()
endif()
execute_process(COMMAND ${WORK_DIR}/build/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer exited with ${rc}")
endif()
message("${out}")
