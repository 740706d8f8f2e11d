# grove::random throughput next to std::mt19937 + <random> distributions (see bench_random.cpp).
find_package(Threads REQUIRED)
grove_benchmark(bench_random ${CMAKE_CURRENT_LIST_DIR}/bench_random.cpp)
target_link_libraries(bench_random PRIVATE Threads::Threads)
