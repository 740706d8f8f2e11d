# bench_optim: grove::optim's steps over the MLP's parameters next to plain adam in the same
# iterations (see bench_optim.cpp), at 1 and 2 threads.
grove_benchmark(bench_optim bench_optim.cpp)
grove_nn_target(bench_optim)
