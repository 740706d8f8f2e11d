# Checkpoints (grove/io/checkpoint.hpp): unit tests, the mutation test, Python interoperability,
# the README snippet, and (with Clang and GROVE_FUZZ=ON) a libFuzzer target.
#
# grove::grove does not depend on nlohmann-json: only the targets here link it, as a user who
# includes grove/io/checkpoint.hpp must.
find_package(nlohmann_json 3 REQUIRED)

# One executable for the checkpoint suites (a unity build): each file would otherwise parse
# nlohmann-json and io/checkpoint.hpp and instantiate the codec again.
#   test_checkpoint*.cpp       save / load / inspect, errors, the mutation test, N-D tensors
#   test_checkpoint_options    load_options, load_report, dtype conversions and the 16-bit floats
#   test_checkpoint_shards     Hugging Face's model.safetensors.index.json and its shard files
#   test_checkpoint_layouts    PyTorch's and Flax's layouts and the C++ blocks of docs/checkpoint.md
#                              after its program, which must appear in this file
#   test_tree_checkpoint       trees of users' structs, fields in any order
#   test_checkpoint_resume     resuming a training run bit for bit (train_mlp's loop, grove::nn)
#   test_optim_checkpoint      optimizer states saved and resumed
#   test_io_atomic_write       io::write_atomically, which save() writes through
grove_test(test_checkpoint test_checkpoint.cpp test_checkpoint_errors.cpp test_checkpoint_mutation.cpp
           test_checkpoint_tensor.cpp test_checkpoint_options.cpp test_checkpoint_shards.cpp
           test_checkpoint_layouts.cpp test_tree_checkpoint.cpp test_checkpoint_resume.cpp
           test_optim_checkpoint.cpp test_io_atomic_write.cpp)
target_link_libraries(test_checkpoint PRIVATE nlohmann_json::nlohmann_json)
target_compile_definitions(test_checkpoint PRIVATE GROVE_PROJECT_VERSION="${PROJECT_VERSION}")
# The index read in time and memory linear in its size, near the 100 MB cap (a counting allocator
# replaces operator new in this executable).
grove_test(test_checkpoint_index_cost test_checkpoint_index_cost.cpp)
target_link_libraries(test_checkpoint_index_cost PRIVATE nlohmann_json::nlohmann_json)
if(NOT GROVE_SANITIZE)
    add_test(NAME docs_checkpoint_snippets
             COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                     -P ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint_doc_snippets.cmake)
endif()

# --- Python interoperability: numpy reads grove's files, grove reads numpy's ---------------------
add_executable(checkpoint_interop checkpoint_interop.cpp)
target_link_libraries(checkpoint_interop PRIVATE grove::grove grove_warnings nlohmann_json::nlohmann_json)
if(TARGET grove_sanitize)
  target_link_libraries(checkpoint_interop PRIVATE grove_sanitize)
endif()

add_executable(checkpoint_world checkpoint_world.cpp)
target_link_libraries(checkpoint_world PRIVATE grove::grove grove_warnings nlohmann_json::nlohmann_json)
if(TARGET grove_sanitize)
  target_link_libraries(checkpoint_world PRIVATE grove_sanitize)
endif()

include(numpy_python.cmake)
if(GROVE_PYTHON)
  foreach(direction IN ITEMS python_reads_grove grove_reads_python python_doc_snippet)
    add_test(NAME checkpoint_${direction}
             COMMAND ${GROVE_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint_interop.py ${direction}
                     $<TARGET_FILE:checkpoint_interop> ${CMAKE_CURRENT_BINARY_DIR}/checkpoint_interop_files)
    set_tests_properties(checkpoint_${direction} PROPERTIES SKIP_RETURN_CODE 77)
  endforeach()
  # Files as other tools write them (torch-style names, F16/BF16, unaligned and scattered data,
  # dtypes grove cannot load), from an independent writer; and grove's F16/BF16 read by numpy.
  # N-D tensors both ways (numpy arrays into Eigen tensors of either storage order, and back).
  foreach(direction IN ITEMS world half layouts tensors)
    add_test(NAME checkpoint_python_${direction}
             COMMAND ${GROVE_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint_world.py ${direction}
                     $<TARGET_FILE:checkpoint_world> ${CMAKE_CURRENT_BINARY_DIR}/checkpoint_world_files)
    set_tests_properties(checkpoint_python_${direction} PROPERTIES SKIP_RETURN_CODE 77)
  endforeach()
else()
  message(STATUS "grove: no python3 found; the checkpoint interoperability tests are not added")
endif()

# --- a PyTorch model with LayerNorms (Debian's python3-torch) ------------------------------------
# nn.Sequential of Linear and LayerNorm layers loaded with io::torch_sequential_names(params), and
# grove's output against torch's forward. torch is in scripts/packages.txt, so its absence fails
# the test instead of skipping it.
if(NOT GROVE_SANITIZE)
  add_executable(checkpoint_torch_layernorm checkpoint_torch_layernorm.cpp)
  target_link_libraries(checkpoint_torch_layernorm PRIVATE grove::grove grove_warnings
                                                           nlohmann_json::nlohmann_json)
  set(GROVE_TORCH_PYTHON /usr/bin/python3 CACHE FILEPATH
      "Python 3 with PyTorch (Debian's python3-torch), for checkpoint_torch_layernorm_model")
  add_test(NAME checkpoint_torch_layernorm_model
           COMMAND ${GROVE_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint_torch_layernorm.py
                   $<TARGET_FILE:checkpoint_torch_layernorm>
                   ${CMAKE_CURRENT_BINARY_DIR}/checkpoint_torch_layernorm_files)
  set_tests_properties(checkpoint_torch_layernorm_model PROPERTIES TIMEOUT 120)
endif()

# --- the program of docs/checkpoint.md: compiled, run, and its output compared -------------------
grove_doc_program(TARGET checkpoint_snippet TEST docs_checkpoint_program_output DOC docs/checkpoint.md
                  LIBRARIES nlohmann_json::nlohmann_json)

# --- libFuzzer (optional): cmake -DCMAKE_CXX_COMPILER=clang++ -DGROVE_FUZZ=ON ----------------------
if(GROVE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "GROVE_FUZZ needs Clang (libFuzzer); configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  add_executable(fuzz_checkpoint fuzz_checkpoint.cpp)
  target_link_libraries(fuzz_checkpoint PRIVATE grove::grove nlohmann_json::nlohmann_json)
  target_compile_options(fuzz_checkpoint PRIVATE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all)
  target_link_options(fuzz_checkpoint PRIVATE -fsanitize=fuzzer,address,undefined)
  # A short run in ctest, from a corpus seeded with a valid checkpoint of the same tree.
  set(_grove_corpus ${CMAKE_CURRENT_BINARY_DIR}/checkpoint_fuzz_corpus)
  file(MAKE_DIRECTORY ${_grove_corpus})
  add_test(NAME checkpoint_fuzz_seed COMMAND checkpoint_interop write ${_grove_corpus}/seed.safetensors)
  set_tests_properties(checkpoint_fuzz_seed PROPERTIES FIXTURES_SETUP checkpoint_fuzz_corpus)
  add_test(NAME checkpoint_fuzz_smoke COMMAND fuzz_checkpoint -runs=30000 -seed=1 -max_len=8192 ${_grove_corpus})
  set_tests_properties(checkpoint_fuzz_smoke PROPERTIES FIXTURES_REQUIRED checkpoint_fuzz_corpus)
endif()

# --- hostile input: special files, cut or padded gzip, claims larger than the file, JSON bombs ----
# test_hostile runs every case but the [bomb] ones; test_hostile_bombs runs those under
# `ulimit -v` (virtual memory, in KiB), so that allocating what a header claims, rather than what
# the file holds, fails the test. AddressSanitizer reserves terabytes of address space, so a
# sanitized build runs the bombs without the ceiling (still checking their messages and times).
find_package(ZLIB REQUIRED)
add_executable(test_hostile test_hostile.cpp $<TARGET_OBJECTS:grove_catch_main>)
target_link_libraries(test_hostile PRIVATE grove::grove grove_warnings grove_catch_main
                                           nlohmann_json::nlohmann_json ZLIB::ZLIB)
add_test(NAME test_hostile COMMAND test_hostile "~[bomb]")
set_tests_properties(test_hostile PROPERTIES TIMEOUT 300)
if(GROVE_SANITIZE)
  target_compile_definitions(test_hostile PRIVATE GROVE_HOSTILE_TIME_SCALE=8)
endif()
set(GROVE_HOSTILE_MEMORY_KIB 900000 CACHE STRING
    "The virtual memory ceiling (KiB) of the hostile-input bomb tests")
if(GROVE_SANITIZE)
  add_test(NAME test_hostile_bombs COMMAND test_hostile "[bomb]")
else()
  add_test(NAME test_hostile_bombs
           COMMAND sh -c "ulimit -v ${GROVE_HOSTILE_MEMORY_KIB} && exec \"$0\" \"[bomb]\""
                   $<TARGET_FILE:test_hostile>)
endif()
set_tests_properties(test_hostile_bombs PROPERTIES TIMEOUT 300)
