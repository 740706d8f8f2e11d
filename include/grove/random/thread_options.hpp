// grove/random/thread_options.hpp: how a large random request may be spread over threads.
#pragma once

#include <cstdint>

namespace grove::random {

/// How a large request may be spread over threads. This is a per-call argument rather than a
/// global setting so that no hidden state can change what a call does; and the numbers never depend
/// on it, only the speed.
struct thread_options {
  // Threads a request may use, the calling thread included. 0: automatic (for requests of at
  // least 2^18 elements, the threads the program asked for: OpenMP's and Eigen's settings in a
  // program built with OpenMP, else OMP_NUM_THREADS, else every hardware thread; the calling
  // thread alone below). 1: the calling thread only.
  int threads = 0;
  // Elements (or, for the legacy layout's 32-bit words, element pairs) per task; 0: 2^16.
  std::int64_t chunk = 0;
};

/// The former name of thread_options.
using options [[deprecated("grove: use grove::random::thread_options")]] = thread_options;

}  // namespace grove::random
