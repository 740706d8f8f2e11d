// grove/detail/threads.hpp: the team helpers that grove's threaded passes share (the network's
// products and elementwise passes, the optimizers' in-place steps): how many threads grove may
// use, a team, its barrier, and each thread's contiguous share of a range. The thread counts are
// OpenMP's settings; without OpenMP every helper runs on the calling thread. With EIGEN_USE_BLAS
// the BLAS library threads the products, so grove's own passes stay on one thread.
//
// The teams are grove's own threads rather than OpenMP's: a thread that waits (at a barrier, or
// for the next team's work) spins for a bounded time far below a scheduler's time slice, then
// sleeps in the kernel (a futex, through std::atomic::wait). libgomp's waiting threads spin for
// milliseconds unless OMP_WAIT_POLICY=passive was set before the program started, which a library
// cannot do; on a machine with another busy process such a spinning thread keeps the core that
// the thread it waits for needs, and each barrier then costs up to a time slice. Workers start on
// a team's first run, one set per calling thread, so a failure to start one is an exception
// (grove::thread_error) rather than libgomp's exit.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "grove/detail/spin.hpp"
#include "grove/detail/thread_count.hpp"
#include "grove/detail/thread_limits.hpp"
#include "grove/error.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace grove::detail {

using Index = Eigen::Index;

/// The number of threads grove's loops and products may use: requested_threads() (OpenMP's and
/// Eigen's settings), and 1 without OpenMP or with EIGEN_USE_BLAS, where the BLAS library threads
/// the products.
inline int max_threads() {
#if defined(_OPENMP) && !defined(EIGEN_USE_BLAS)
  return requested_threads();
#else
  return 1;
#endif
}

/// Whether OMP_WAIT_POLICY says PASSIVE (in any case), read once: waiting threads then sleep at
/// once, as libgomp's do under that setting.
inline bool passive_wait_policy() {
  static const bool passive = [] {
    const char* v = std::getenv("OMP_WAIT_POLICY");
    if (v == nullptr) return false;
    std::string s(v);
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s == "passive";
  }();
  return passive;
}

/// How a waiting thread waits: it spins for at most `spin` (none under OMP_WAIT_POLICY=PASSIVE),
/// then sleeps in the kernel (std::atomic::wait, a futex on Linux) until it is woken. A wait on a
/// quiet machine ends while spinning, with no wake-up to pay for; a wait for a thread that another
/// process has taken the core from ends in the kernel, leaving the core to it.
class Waiter {
 public:
  explicit Waiter(std::chrono::nanoseconds spin)
      : spin_(passive_wait_policy() ? std::chrono::nanoseconds(0) : spin) {}

  /// Waits until word != old.
  void wait(const std::atomic<unsigned>& word, unsigned old) const {
    using clock = std::chrono::steady_clock;
    if (spin_.count() > 0) {
      const auto deadline = clock::now() + spin_;
      do {
        for (int i = 0; i < 32; ++i) {
          if (word.load(std::memory_order_acquire) != old) return;
          cpu_relax();
        }
      } while (clock::now() < deadline);
    }
    while (word.load(std::memory_order_acquire) == old) word.wait(old, std::memory_order_acquire);
  }

 private:
  std::chrono::nanoseconds spin_;
};

/// A reusable barrier for the nt threads of a team (a generation counter, so that a thread that
/// leaves one round cannot be counted in the next one before all have left).
class TeamBarrier {
 public:
  void wait(int nt, const Waiter& waiter) {
    const unsigned gen = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == nt) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.store(gen + 1, std::memory_order_release);
      generation_.notify_all();
      return;
    }
    waiter.wait(generation_, gen);
  }

 private:
  alignas(64) std::atomic<int> arrived_{0};
  alignas(64) std::atomic<unsigned> generation_{0};
};

/// The threads a calling thread's teams run on: thread 0 is the caller itself, the others are
/// started the first time a team needs them and then wait for the next team's work. Each thread
/// that calls parallel() has its own (a thread_local), so that devices of a LocalDevices, each
/// on its own thread, never share workers.
class Team {
 public:
  Team() = default;
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;
  ~Team() {
    // A thread that ends while its team runs (std::exit called inside a pass) cannot join the
    // workers, which wait for it at the team's end: the process is ending, so leave them.
    if (in_team()) {
      for (auto& w : workers_) w.detach();
      return;
    }
    stop_ = true;
    start_.fetch_add(1, std::memory_order_release);
    start_.notify_all();
    for (auto& w : workers_) w.join();
  }

  /// Runs body(tid, nt) on nt threads and waits for all of them; rethrows the exception of the
  /// lowest-numbered thread that threw. Throws grove::thread_error, before any body runs, when
  /// the system refuses to start a worker.
  template <class Body>
  void run(int nt, Body& body) {
    start_workers(nt - 1);
    all_ = static_cast<int>(workers_.size()) + 1;
    errors_.assign(static_cast<std::size_t>(nt), nullptr);
    job_ = [](void* b, int tid, int n) { (*static_cast<Body*>(b))(tid, n); };
    body_ = &body;
    nt_ = nt;
    start_.fetch_add(1, std::memory_order_release);
    start_.notify_all();
    execute(0);
    finish();
    for (const auto& e : errors_)
      if (e) std::rethrow_exception(e);
  }

  /// The barrier of the team that the calling thread is running in (see barrier()).
  void barrier() {
    static const Waiter waiter(barrier_spin);
    barrier_.wait(nt_, waiter);
  }

  /// The team the calling thread is running in; nullptr outside one.
  static Team*& current() {
    static thread_local Team* team = nullptr;
    return team;
  }

 private:
  // Barriers wait for a share of a product or a pass; between teams a worker waits for the
  // caller's own code (a batch's gathering, the loss), which runs longer, so it spins longer. Both
  // are far below a scheduler's time slice, and far above a quiet team's waits.
  static constexpr std::chrono::nanoseconds barrier_spin{50'000};
  static constexpr std::chrono::nanoseconds idle_spin{500'000};

  void start_workers(int count) {
    workers_.reserve(static_cast<std::size_t>(std::max(count, 0)));
    while (static_cast<int>(workers_.size()) < count) {
      const int tid = static_cast<int>(workers_.size()) + 1;
      // The count the worker waits to see change: run() increments it once the team is set.
      const unsigned seen = start_.load(std::memory_order_relaxed);
      try {
        workers_.emplace_back([this, tid, seen] { work(tid, seen); });
      } catch (const std::system_error& e) {
        throw thread_error(e.code(), "grove: a team of " + std::to_string(count + 1) +
                                         " threads (OMP_NUM_THREADS, omp_set_num_threads or "
                                         "Eigen::setNbThreads) could start only " +
                                         std::to_string(tid) + " of them (" + thread_limits() +
                                         "); use fewer threads or raise the limit");
      }
    }
  }

  void execute(int tid) {
    Team*& current_team = current();
    Team* const outer = current_team;
    current_team = this;
    in_team() = true;
    try {
      (*job_)(body_, tid, nt_);
    } catch (...) {
      errors_[static_cast<std::size_t>(tid)] = std::current_exception();
    }
    in_team() = false;
    current_team = outer;
  }

  // The team's end, met by every started thread, in the team or not (a worker beyond this team's
  // size only waits here): once it is passed, every body has returned, its exception is in
  // errors_, and no worker reads the team's settings any more, so the next run may change them.
  void finish() {
    static const Waiter waiter(barrier_spin);
    finish_.wait(all_, waiter);
  }

  void work(int tid, unsigned seen) {
    const Waiter idle(idle_spin);
    for (;;) {
      idle.wait(start_, seen);
      seen = start_.load(std::memory_order_acquire);
      if (stop_) return;
      if (tid < nt_) execute(tid);
      finish();
    }
  }

  std::vector<std::thread> workers_;
  std::vector<std::exception_ptr> errors_;
  TeamBarrier barrier_;  // the body's barriers, among the team's nt_ threads
  TeamBarrier finish_;   // the end of a run, among all all_ started threads
  alignas(64) std::atomic<unsigned> start_{0};
  void (*job_)(void*, int, int) = nullptr;
  void* body_ = nullptr;
  int nt_ = 1;
  int all_ = 1;
  bool stop_ = false;
};

/// The calling thread's team (made on first use, ended with the thread).
inline Team& calling_thread_team() {
  static thread_local Team team;
  return team;
}

/// Runs body(tid, nt) on a team of `threads` threads (tid in [0, nt)), the calling thread being
/// thread 0; with one thread, or inside a team, on the calling thread only (nt = 1); without
/// OpenMP always so.
///
/// An exception thrown by body on any thread is rethrown on the calling thread once the whole
/// team has finished: that of the lowest-numbered thread that threw. A body that meets barrier()
/// must still meet every barrier on every thread, or the others wait for the thrower forever:
/// grove's own bodies throw nothing between barriers, and the layers of a model's pass share a
/// team through nn::team_barrier, which carries a throw on one thread to the end of the pass on
/// all of them (grove/nn/layer.hpp). Throws grove::thread_error when the system refuses to start
/// a thread the team needs.
template <class Body>
void parallel(int threads, Body&& body) {
#if defined(_OPENMP)
  if (threads > 1 && !in_team()) {
    calling_thread_team().run(threads, body);
    return;
  }
#endif
  (void)threads;
  body(0, 1);
}

/// A barrier for the team of parallel(); nt is the team's size (no-op for one thread). Called
/// inside a parallel region that the caller opened rather than a grove team, OpenMP's barrier.
inline void barrier(int nt) {
#if defined(_OPENMP)
  if (nt > 1) {
    if (Team* team = Team::current()) {
      team->barrier();
    } else {
#pragma omp barrier
    }
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
