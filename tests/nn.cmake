# grove::nn (grove/nn.hpp): initialisation, activations, predict / vmap, loss, gradients against
# finite differences, grove::optim's optimizers on networks, a short training run; a separate
# executable that counts heap allocations in training steps (it replaces malloc and operator new);
# the matrix products against a double-precision product, twice: as built (grove's AVX-512 kernel
# wherever the CPU has AVX-512, its AVX2 kernel where it has AVX2 and FMA but not AVX-512) and
# with GROVE_NO_DISPATCH (Eigen's kernel), in float and with bf16 inputs (every bf16 kernel the
# CPU runs, and the AVX512-BF16 kernel with vdpbf16ps emulated on every CPU); and the README
# snippet of docs/nn.md, compiled, run and its output compared.
#
# test_nn and test_nn_alloc are compiled with OpenMP (grove_threaded_test), so that the threaded
# paths are the ones tested.
grove_threaded_test(test_nn test_nn.cpp test_nn_optim.cpp test_nn_model.cpp test_nn_team.cpp
                    test_nn_precision.cpp)
grove_threaded_test(test_nn_alloc test_nn_alloc.cpp)

grove_test(test_nn_gemm test_nn_gemm.cpp)
grove_test(test_nn_gemm_eigen test_nn_gemm.cpp)
target_compile_definitions(test_nn_gemm_eigen PRIVATE GROVE_NO_DISPATCH)
foreach(_grove_nn_test IN ITEMS test_nn_gemm test_nn_gemm_eigen)
  grove_nn_target(${_grove_nn_test})
  grove_test_properties(${_grove_nn_test} ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
endforeach()

# --- the program of docs/nn.md: compiled, run, and its output compared ---------------------------
grove_doc_program(TARGET nn_snippet TEST docs_nn_program_output DOC docs/nn.md)

# --- the other C++ blocks of docs/nn.md: each in a compiled source -------------------------------
add_test(NAME docs_nn_snippets
         COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DDOC=docs/nn.md
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/doc_snippets.cmake)
