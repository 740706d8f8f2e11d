// grove/detail/thread_count.hpp: how many threads the program asked grove to use, read where the
// work starts (a team's size, a large random request's threads).
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstdlib>
#include <thread>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace grove::detail {

/// Whether the calling thread is running a team's body (as its thread 0 or as a worker).
inline bool& in_team() {
  static thread_local bool flag = false;
  return flag;
}

/// The threads the program asked for, the calling thread included. With OpenMP: Eigen's setting
/// (Eigen::nbThreads(), which follows OMP_NUM_THREADS unless Eigen::setNbThreads was called),
/// capped by the calling thread's own OpenMP setting (omp_set_num_threads, per thread: a thread
/// that runs one of several devices sets it). Without OpenMP, which has no such setting to call:
/// OMP_NUM_THREADS's first number when it is set, else every hardware thread. Inside a team, or a
/// parallel region that the caller opened, 1: grove never nests threads.
inline int requested_threads() {
  if (in_team()) return 1;
#if defined(_OPENMP)
  if (omp_in_parallel()) return 1;
  return std::max(1, std::min(Eigen::nbThreads(), omp_get_max_threads()));
#else
  if (const char* text = std::getenv("OMP_NUM_THREADS"); text != nullptr) {
    char* end = nullptr;
    const long n = std::strtol(text, &end, 10);
    // OpenMP's own reading: a list's first entry ("4,2"), blanks around it; anything else is
    // ignored, as libgomp ignores a value it cannot read.
    while (end != nullptr && (*end == ' ' || *end == '\t')) ++end;
    if (end != text && n >= 1 && (*end == '\0' || *end == ',')) {
      return static_cast<int>(std::min<long>(n, 1 << 16));
    }
  }
  return std::max(1u, std::thread::hardware_concurrency());
#endif
}

}  // namespace grove::detail
