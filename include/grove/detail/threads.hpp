// grove/detail/threads.hpp: the OpenMP team helpers that grove's threaded passes share (the
// network's products and elementwise passes, the optimizers' in-place steps): how many threads
// grove may use, a team, its barrier, and each thread's contiguous share of a range. Without
// OpenMP every helper runs on the calling thread. With EIGEN_USE_BLAS the BLAS library threads
// the products, so grove's own passes stay on one thread.
#pragma once

#include <Eigen/Core>
#include <algorithm>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace grove::detail {

using Index = Eigen::Index;

/// The number of threads grove's loops and products may use: Eigen's setting (Eigen::nbThreads(),
/// which follows OMP_NUM_THREADS unless Eigen::setNbThreads was called), capped by the calling
/// thread's own OpenMP setting (omp_set_num_threads, per thread: a thread that runs one of several
/// devices sets it); 1 without OpenMP. Inside a parallel region that the caller opened, 1: grove
/// never nests teams.
inline int max_threads() {
#if defined(_OPENMP) && !defined(EIGEN_USE_BLAS)
  if (omp_in_parallel()) return 1;
  return std::max(1, std::min(Eigen::nbThreads(), omp_get_max_threads()));
#else
  return 1;
#endif
}

/// Runs body(tid, nt) on a team of `threads` threads (tid in [0, nt)); nt may come out smaller
/// than asked. With one thread, on the calling thread, without OpenMP.
template <class Body>
void parallel(int threads, Body&& body) {
#if defined(_OPENMP)
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    body(omp_get_thread_num(), omp_get_num_threads());
    return;
  }
#endif
  (void)threads;
  body(0, 1);
}

/// A barrier for the team of parallel(); nt is the team's size (no-op for one thread, so that it
/// never binds to a region the caller opened).
inline void barrier(int nt) {
#if defined(_OPENMP)
  if (nt > 1) {
#pragma omp barrier
  }
#else
  (void)nt;
#endif
}

struct Range {
  Index begin = 0, end = 0;
  Index size() const { return end - begin; }
  bool empty() const { return end <= begin; }
};

/// Thread tid's share of [0, total) in contiguous chunks of `align` (balanced to one chunk).
inline Range share(Index total, int tid, int nt, Index align = 16) {
  const Index units = (total + align - 1) / align;
  const Index per = units / nt, extra = units % nt;
  const Index first = tid * per + std::min<Index>(tid, extra);
  const Index last = first + per + (tid < extra ? 1 : 0);
  return {std::min(total, first * align), std::min(total, last * align)};
}

}  // namespace grove::detail
