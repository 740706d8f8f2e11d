// threads_used: how many threads grove::random's parallel_chunks ran a request's chunks on, for the
// tests of the automatic thread count (test_random, test_nn_model).
#pragma once

#include <cstdint>
#include <grove/random.hpp>
#include <mutex>
#include <set>
#include <thread>

namespace thread_probe {

inline std::size_t threads_used(std::uint64_t units, int threads) {
  std::mutex mutex;
  std::set<std::thread::id> ids;
  grove::random::detail::parallel_chunks(units, grove::random::detail::schedule{threads, 0},
                                         [&](std::uint64_t, std::uint64_t) {
                                           const std::lock_guard<std::mutex> lock(mutex);
                                           ids.insert(std::this_thread::get_id());
                                         });
  return ids.size();
}

}  // namespace thread_probe
