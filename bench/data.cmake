# bench_data: grove::data's batches and prefetch against precomputed batches in the main job's
# training, and data::load_npy against dd reading the same file (see bench_data.cpp).
grove_benchmark(bench_data bench_data.cpp)
grove_nn_target(bench_data)
