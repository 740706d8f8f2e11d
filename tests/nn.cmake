# grove::nn (grove/nn.hpp): initialisation, activations, predict / vmap, loss, gradients against
# finite differences, optimizers against hand-computed steps, a short training run; a separate
# executable that counts heap allocations in training steps (it replaces malloc and operator new);
# the matrix products against a double-precision product, twice: as built (grove's AVX-512 kernel
# wherever the CPU has AVX-512) and with GROVE_NO_DISPATCH (Eigen's kernel); and the README
# snippet of docs/nn.md, compiled, run and its output compared.
#
# grove's batched passes use OpenMP threads when the code is compiled with OpenMP: the tests are,
# so that the threaded paths are the ones tested (grove::grove itself does not require OpenMP).
find_package(OpenMP COMPONENTS CXX)

grove_test(test_nn test_nn.cpp test_nn_optim.cpp test_nn_model.cpp test_nn_team.cpp)
grove_test(test_nn_alloc test_nn_alloc.cpp)
foreach(_grove_nn_test IN ITEMS test_nn test_nn_alloc)
  if(OpenMP_CXX_FOUND)
    target_link_libraries(${_grove_nn_test} PRIVATE OpenMP::OpenMP_CXX)
  endif()
  # The tests choose their thread counts themselves (1 and 2); keep libgomp from spinning a
  # waiting thread for long after each team, so that tests running side by side do not starve.
  grove_test_properties(${_grove_nn_test} ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
endforeach()

grove_test(test_nn_gemm test_nn_gemm.cpp)
grove_test(test_nn_gemm_eigen test_nn_gemm.cpp)
target_compile_definitions(test_nn_gemm_eigen PRIVATE GROVE_NO_DISPATCH)
foreach(_grove_nn_test IN ITEMS test_nn_gemm test_nn_gemm_eigen)
  grove_nn_target(${_grove_nn_test})
  grove_test_properties(${_grove_nn_test} ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
endforeach()

# --- the program of docs/nn.md: compiled, run, and its output compared ---------------------------
grove_doc_program(TARGET nn_snippet TEST docs_nn_program_output DOC docs/nn.md)
