# bench_parallel: data-parallel training of the MLP on LocalDevices and MPI ranks, and the pytree
# allreduce of its gradients against a bare MPI_Allreduce (see bench_parallel.cpp for how to run
# it). The MPI benchmarks need MPI (GROVE_MPI, ON by default; Debian: libopenmpi-dev openmpi-bin);
# with -DGROVE_MPI=OFF it has the local ones only.
grove_benchmark(bench_parallel bench_parallel.cpp)
grove_nn_target(bench_parallel)
if(GROVE_MPI)
  target_link_libraries(bench_parallel PRIVATE MPI::MPI_CXX)
  target_compile_definitions(bench_parallel PRIVATE GROVE_BENCH_MPI=1)
endif()
