# bench_nn: one training step of the [784, 512, 512, 10] MLP next to its bare GEMMs, at batch 128
# and 1024, 1 and 2 threads (see bench_nn.cpp); compare_pytorch.py times the same step in PyTorch.
grove_benchmark(bench_nn bench_nn.cpp)
grove_nn_target(bench_nn)

# The baseline of bench_nn's sequential_* benchmarks: grove::nn's headers at the commit before the
# composable models, read from git and renamed to grove::old_nn (grove/old_nn/...), so that the
# old engine and the new API run in the same binary. Without git or that commit (an exported
# tarball, a shallow clone), bench_nn builds without them and says so.
set(GROVE_NN_BASELINE_COMMIT 9ce7c74 CACHE STRING "grove commit whose nn headers bench_nn compares against")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${PROJECT_SOURCE_DIR} rev-parse -q --verify
                          "${GROVE_NN_BASELINE_COMMIT}^{commit}"
                  RESULT_VARIABLE _grove_rc OUTPUT_QUIET ERROR_QUIET)
  if(_grove_rc EQUAL 0)
    set(_grove_base ${CMAKE_CURRENT_BINARY_DIR}/nn_baseline)
    foreach(_grove_h activations backprop dense loss metrics optim predict workspace detail/gemm
                     detail/sgemm_avx512)
      execute_process(COMMAND ${GIT_EXECUTABLE} -C ${PROJECT_SOURCE_DIR} show
                              "${GROVE_NN_BASELINE_COMMIT}:include/grove/nn/${_grove_h}.hpp"
                      OUTPUT_VARIABLE _grove_text RESULT_VARIABLE _grove_rc)
      string(REPLACE "grove::nn" "grove::old_nn" _grove_text "${_grove_text}")
      string(REPLACE "grove/nn/" "grove/old_nn/" _grove_text "${_grove_text}")
      # Written only when different, so that reconfiguring (scripts/bench.sh does on each run)
      # does not make bench_nn compile again.
      file(WRITE ${_grove_base}/grove/old_nn/${_grove_h}.hpp.new "${_grove_text}")
      file(COPY_FILE ${_grove_base}/grove/old_nn/${_grove_h}.hpp.new
           ${_grove_base}/grove/old_nn/${_grove_h}.hpp ONLY_IF_DIFFERENT)
    endforeach()
    target_include_directories(bench_nn PRIVATE ${_grove_base})
    target_compile_definitions(bench_nn PRIVATE GROVE_BENCH_BASELINE=1)
  endif()
endif()
