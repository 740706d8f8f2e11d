# grove::parallel (grove/parallel.hpp, grove/mpi.hpp): collectives on trees over LocalDevices
# (1 to 4 threads as devices), over MPI (2 and 3 ranks, through mpirun) and over MPI ranks ×
# local devices (grove::mpi::GlobalDevice, test_parallel_global.cpp), the agreement check
# (mismatched trees: the same error on every device, no hang), the data-parallel training step
# against the single-process step, determinism, allocation counts, LocalDevices under real limits
# on threads (a process limit, an address-space limit), and the docs/parallel.md
# program (tests/parallel_snippet.cpp), compiled, run and its output compared.
#
# MPI: GROVE_MPI (ON by default) builds the MPI tests; it needs an MPI implementation (Debian:
# libopenmpi-dev openmpi-bin). Turn it OFF to build grove without MPI.
find_package(OpenMP COMPONENTS CXX)
find_package(Threads REQUIRED)

# Threads for the devices, OpenMP so that each device's own team size is exercised.
function(grove_parallel_target target)
  target_link_libraries(${target} PRIVATE Threads::Threads)
  if(OpenMP_CXX_FOUND)
    target_link_libraries(${target} PRIVATE OpenMP::OpenMP_CXX)
  endif()
endfunction()

grove_test(test_parallel test_parallel.cpp test_parallel_train.cpp test_parallel_leaves.cpp
           test_parallel_zero.cpp)
# JAX's other collectives against element-by-element references: a suite of its own, so that its
# long translation unit builds beside test_parallel's.
grove_test(test_parallel_collectives test_parallel_collectives.cpp)
grove_test(test_parallel_alloc test_parallel_alloc.cpp)
foreach(_grove_par IN ITEMS test_parallel test_parallel_collectives test_parallel_alloc)
  grove_parallel_target(${_grove_par})
  # A collective that waited forever would fail the test here, not hang it.
  grove_test_properties(${_grove_par} TIMEOUT 300 ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
endforeach()

# --- LocalDevices under a real limit on threads: a thread_error, never a hang ---------------------
# (tests/parallel_thread_limit.cmake runs the program: as an unprivileged user under `ulimit -u`,
# and under `ulimit -v`, which AddressSanitizer's reserved address space rules out.)
add_executable(test_parallel_thread_limit test_parallel_thread_limit.cpp)
target_link_libraries(test_parallel_thread_limit PRIVATE grove::grove grove_warnings
                                                         Threads::Threads)
set(_grove_limits processes)
if(TARGET grove_sanitize)
  target_link_libraries(test_parallel_thread_limit PRIVATE grove_sanitize)
else()
  list(APPEND _grove_limits address_space)
endif()
# The team mode (a threaded pass's own workers) needs OpenMP's thread settings.
set(_grove_limit_modes devices)
if(OpenMP_CXX_FOUND)
  target_link_libraries(test_parallel_thread_limit PRIVATE OpenMP::OpenMP_CXX)
  list(APPEND _grove_limit_modes team)
endif()
foreach(_grove_limit IN LISTS _grove_limits)
  foreach(_grove_mode IN LISTS _grove_limit_modes)
    set(_grove_name parallel_thread_limit_${_grove_limit})
    if(_grove_mode STREQUAL "team")
      set(_grove_name parallel_thread_limit_team_${_grove_limit})
    endif()
    add_test(NAME ${_grove_name}
             COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:test_parallel_thread_limit>
                     -DLIMIT=${_grove_limit} -DMODE=${_grove_mode}
                     -P ${CMAKE_CURRENT_SOURCE_DIR}/parallel_thread_limit.cmake)
    set_tests_properties(${_grove_name} PROPERTIES TIMEOUT 120 SKIP_REGULAR_EXPRESSION "SKIPPED:")
  endforeach()
endforeach()

# --- MPI: the same checks across processes, run by mpirun ---------------------------------------
if(GROVE_MPI)
  # The shared Catch2 main; the test file initializes MPI itself (a static mpi::Environment).
  add_executable(test_parallel_mpi test_parallel_mpi.cpp test_parallel_global.cpp
                                   test_parallel_mpi_resume.cpp test_parallel_mpi_zero.cpp
                                   $<TARGET_OBJECTS:grove_catch_main>)
  # One translation unit, as grove_test makes of a suite of several files.
  set_target_properties(test_parallel_mpi PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0)
  target_link_libraries(test_parallel_mpi PRIVATE grove::grove grove_warnings grove_catch_main
                                                  MPI::MPI_CXX)
  grove_parallel_target(test_parallel_mpi)

  # Under the sanitizers the MPI tests keep AddressSanitizer's and UBSan's checks but not
  # LeakSanitizer's: Open MPI's plugins, unloaded by MPI_Finalize, leave allocations that
  # LeakSanitizer can neither attribute (<unknown module>) nor so suppress. grove's own memory on
  # these paths is leak-checked by test_parallel (the same collectives over LocalDevices).
  set(_grove_mpi_asan)
  if(GROVE_SANITIZE)
    set(_grove_mpi_asan "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
  endif()
  function(grove_mpi_test name ranks)
    add_test(NAME ${name}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks} ${GROVE_MPIEXEC_FLAGS}
                     ${MPIEXEC_PREFLAGS} $<TARGET_FILE:test_parallel_mpi> ${MPIEXEC_POSTFLAGS}
                     ${ARGN})
    set_tests_properties(${name} PROPERTIES
      TIMEOUT 300
      PROCESSORS ${ranks}
      ENVIRONMENT "${GROVE_MPI_TEST_ENV};OMP_WAIT_POLICY=PASSIVE;${_grove_mpi_asan}")
  endfunction()
  grove_mpi_test(test_parallel_mpi 2 "~[mismatch]")
  grove_mpi_test(test_parallel_mpi_3ranks 3 "~[mismatch]")
  # Mismatched trees across processes: every rank raises the same error and the job ends; the
  # timeouts above turn a hang into a failure.
  grove_mpi_test(test_parallel_mpi_mismatch 2 "[mismatch]")
endif()

# --- the docs/parallel.md program: tests/parallel_snippet.cpp, the same text, compiled and run,
# its output compared with the documented one --------------------------------------------------
if(NOT GROVE_SANITIZE)
  add_executable(parallel_snippet parallel_snippet.cpp)
  target_link_libraries(parallel_snippet PRIVATE grove::grove grove_warnings)
  grove_parallel_target(parallel_snippet)
  add_test(NAME docs_parallel_program_output
           COMMAND ${CMAKE_COMMAND} -DDOC=${PROJECT_SOURCE_DIR}/docs/parallel.md
                   -DSOURCE=${CMAKE_CURRENT_SOURCE_DIR}/parallel_snippet.cpp
                   -DPROGRAM=$<TARGET_FILE:parallel_snippet>
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/parallel_docs.cmake)
  set_tests_properties(docs_parallel_program_output PROPERTIES TIMEOUT 120 ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
  # The page's later C++ blocks are in compiled sources.
  add_test(NAME docs_parallel_snippets
           COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DDOC=docs/parallel.md
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/doc_snippets.cmake)
endif()
