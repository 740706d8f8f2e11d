# bench_nn: one training step of the [784, 512, 512, 10] MLP next to its bare GEMMs, at batch 128
# and 1024, 1 and 2 threads (see bench_nn.cpp); compare_pytorch.py times the same step in PyTorch.
grove_benchmark(bench_nn bench_nn.cpp)
grove_nn_target(bench_nn)

