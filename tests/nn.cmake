# grove::nn (grove/nn.hpp): initialisation, activations, predict / vmap, loss, gradients against
# finite differences, grove::optim's optimizers on networks, mixed precision and a short training
# run (test_nn); the composable models and the engine that runs them on one thread team
# (test_nn_model); a separate executable that counts heap allocations in training steps (it
# replaces malloc and operator new); the matrix products against a double-precision product, on
# grove's kernels where the CPU has them and on Eigen's (force_eigen_kernel), in float and with bf16
# inputs (every bf16 kernel the CPU runs, and the AVX512-BF16 and AMX kernels with their
# instructions emulated on every CPU); and the README snippet of docs/nn.md, compiled, run and its
# output compared.
#
# The suites are compiled with OpenMP (grove_threaded_test), so that the threaded paths are the
# ones tested.
grove_threaded_test(test_nn test_nn.cpp test_nn_optim.cpp test_nn_precision.cpp)
grove_threaded_test(test_nn_model test_nn_model.cpp test_nn_team.cpp)
grove_threaded_test(test_nn_alloc test_nn_alloc.cpp)

grove_test(test_nn_gemm test_nn_gemm.cpp)
grove_nn_target(test_nn_gemm)
grove_test_properties(test_nn_gemm ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")

# --- docs/nn.md: its program compiled, run and its output compared; its other C++ blocks each in a
# compiled source ----------------------------------------------------------------------------------
grove_doc_program(TARGET nn_snippet TEST docs_nn_program_output DOC docs/nn.md
                  SNIPPETS_TEST docs_nn_snippets)
