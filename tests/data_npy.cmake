# numpy's .npy and .npz files (grove/data/npy.hpp, npy_tensor.hpp, npz.hpp): unit tests, bad
# input and the mutation test (test_data_npy), numpy as the oracle both ways (data_npy_interop),
# the program of docs/npy.md, and (with Clang and GROVE_FUZZ=ON) a libFuzzer target.
#
# grove::grove does not depend on libzip: only the targets that read or write .npz link it
# (grove::npz), as a user who includes grove/data/npz.hpp must.
if(NOT TARGET grove::npz)
  message(STATUS "grove: skipped the .npy/.npz tests (they need libzip, Debian: libzip-dev)")
  return()
endif()

grove_test(test_data_npy test_data_npy.cpp)
target_link_libraries(test_data_npy PRIVATE grove::npz)

# --- numpy as the oracle: numpy writes, grove reads; grove writes, numpy reads ------------------
add_executable(data_npy_interop data_npy_interop.cpp)
target_link_libraries(data_npy_interop PRIVATE grove::npz grove_warnings)
if(TARGET grove_sanitize)
  target_link_libraries(data_npy_interop PRIVATE grove_sanitize)
endif()

include(numpy_python.cmake)
if(GROVE_PYTHON)
  foreach(direction IN ITEMS grove_reads_numpy numpy_reads_grove npz_both_ways refusals)
    add_test(NAME data_npy_${direction}
             COMMAND ${GROVE_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/data_npy_interop.py ${direction}
                     $<TARGET_FILE:data_npy_interop> ${CMAKE_CURRENT_BINARY_DIR}/data_npy_files)
    set_tests_properties(data_npy_${direction} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  endforeach()
else()
  message(STATUS "grove: no python3 found; the .npy interoperability tests are not added")
endif()

# --- docs/npy.md: its program compiled, run and its output compared; its other C++ blocks are in
# test_data_npy.cpp ------------------------------------------------------------------------------
grove_doc_program(TARGET npy_snippet TEST docs_npy_program_output DOC docs/npy.md
                  SNIPPETS_TEST docs_npy_snippets LIBRARIES grove::npz)

# --- libFuzzer (optional): cmake -DCMAKE_CXX_COMPILER=clang++ -DGROVE_FUZZ=ON ----------------------
if(GROVE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "GROVE_FUZZ needs Clang (libFuzzer); configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  add_executable(fuzz_npy fuzz_npy.cpp)
  target_link_libraries(fuzz_npy PRIVATE grove::npz)
  target_compile_options(fuzz_npy PRIVATE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all)
  target_link_options(fuzz_npy PRIVATE -fsanitize=fuzzer,address,undefined)
  # A short run in ctest, from a corpus seeded with a valid .npy and a valid .npz.
  set(_grove_npy_corpus ${CMAKE_CURRENT_BINARY_DIR}/npy_fuzz_corpus)
  file(MAKE_DIRECTORY ${_grove_npy_corpus})
  add_test(NAME npy_fuzz_seed COMMAND data_npy_interop seed ${_grove_npy_corpus})
  set_tests_properties(npy_fuzz_seed PROPERTIES FIXTURES_SETUP npy_fuzz_corpus)
  add_test(NAME npy_fuzz_smoke COMMAND fuzz_npy -runs=30000 -seed=1 -max_len=4096 ${_grove_npy_corpus})
  set_tests_properties(npy_fuzz_smoke PROPERTIES FIXTURES_REQUIRED npy_fuzz_corpus)
endif()
