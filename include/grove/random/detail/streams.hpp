// grove/random/detail/streams.hpp: how grove spreads a large random request over threads and
// instruction sets without changing a single bit. Every output element is a pure function of
// (key, layout, request size, element index), so any split of the index range into chunks, on any
// number of threads, compiled for any instruction set, gives the same numbers.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

#include "grove/config.hpp"
#include "grove/detail/cpu.hpp"
#include "grove/detail/thread_count.hpp"

namespace grove::random::detail {

// How a request is scheduled. threads == 0 means automatic.
struct schedule {
  int threads = 0;
  std::uint64_t chunk = 0;
};

inline constexpr std::uint64_t default_chunk = std::uint64_t{1} << 16;
// Below this many work units the automatic schedule stays on the calling thread: starting threads
// costs tens of microseconds, about what generating 2^18 normals costs.
inline constexpr std::uint64_t automatic_threading_threshold = std::uint64_t{1} << 18;

// Instruction sets.
//
// The kernels are plain C++ loops that compilers vectorise for whatever instruction set the build
// targets. A header-only library is usually built without -march, which on x86-64 means SSE2: no
// vector rotate and no fused multiply-add (std::fma becomes a libm call), many times slower than
// AVX-512 (bench/bench_random.cpp measures it). So, on x86 with GCC or Clang, each chunk's kernel
// is also compiled for AVX2+FMA and for AVX-512 (function target attributes) and the best one this
// CPU supports runs. All of them compute the same bits: integer arithmetic, explicit fma and IEEE
// sqrt/division, nothing that an instruction set may round differently. grove/detail/cpu.hpp
// decides whether dispatch is compiled in (GROVE_NO_DISPATCH turns it off) and asks the CPU.

enum class instruction_set { baseline, avx2_fma, avx512 };

inline instruction_set best_instruction_set() noexcept {
#if GROVE_DETAIL_DISPATCH
  const grove::detail::cpu_features& cpu = grove::detail::this_cpu();
  if (cpu.avx2_fma && cpu.avx512f && cpu.avx512vl) return instruction_set::avx512;
  return cpu.avx2_fma ? instruction_set::avx2_fma : instruction_set::baseline;
#else
  return instruction_set::baseline;
#endif
}

// Which variant of a kernel is running: bodies receive it as a tag, so that a variant can use
// code written for its instruction set (random/detail/threefry_avx2.hpp) where the compiler's
// vectorised loop is not good enough.
template <instruction_set I>
using instruction_set_tag = std::integral_constant<instruction_set, I>;

// The instruction set this translation unit's own code is compiled for, as far as dispatch
// matters: with GROVE_NO_DISPATCH, the portable kernels run whatever -march says.
inline constexpr instruction_set compiled_instruction_set =
    !GROVE_DETAIL_DISPATCH            ? instruction_set::baseline
    : GROVE_DETAIL_BUILT_FOR_AVX512   ? instruction_set::avx512
    : GROVE_DETAIL_BUILT_FOR_AVX2_FMA ? instruction_set::avx2_fma
                                      : instruction_set::baseline;

#if GROVE_DETAIL_DISPATCH
template <class Body>
GROVE_DETAIL_TARGET_AVX512 void run_avx512(Body& body, std::uint64_t begin, std::uint64_t end) {
  body(begin, end, instruction_set_tag<instruction_set::avx512>{});
}
template <class Body>
GROVE_DETAIL_TARGET_AVX2_FMA void run_avx2_fma(Body& body, std::uint64_t begin, std::uint64_t end) {
  body(begin, end, instruction_set_tag<instruction_set::avx2_fma>{});
}
#endif

// Runs body(begin, end, tag) compiled for the best instruction set available (see above).
template <class Body>
void run_best(Body& body, std::uint64_t begin, std::uint64_t end) {
#if GROVE_DETAIL_DISPATCH
  // Also when this translation unit is built for AVX-512: the variant's attribute asks for 512-bit
  // vectors, which the build's own tuning may not (grove/detail/cpu.hpp).
  const instruction_set best = best_instruction_set();
  if (best == instruction_set::avx512) return run_avx512(body, begin, end);
#if !GROVE_DETAIL_BUILT_FOR_AVX2_FMA
  if (best == instruction_set::avx2_fma) return run_avx2_fma(body, begin, end);
#endif
#endif
  body(begin, end, instruction_set_tag<compiled_instruction_set>{});
}

// Calls task(begin, end) for consecutive chunks covering [0, units), on up to schedule.threads
// threads (the calling thread included). Chunks are claimed dynamically; the task must only touch
// the outputs of its own range. Tasks must not throw.
template <class Task>
void parallel_chunks(std::uint64_t units, const schedule& plan, Task&& task) {
  if (units == 0) return;
  const std::uint64_t chunk = plan.chunk > 0 ? plan.chunk : default_chunk;
  const std::uint64_t chunks = units / chunk + (units % chunk != 0 ? 1 : 0);
  std::uint64_t threads = 1;
  if (plan.threads > 0) {
    threads = static_cast<std::uint64_t>(plan.threads);
  } else if (units >= automatic_threading_threshold) {
    // The program's thread setting (OMP_NUM_THREADS, omp_set_num_threads, Eigen::setNbThreads),
    // as grove's other passes follow it: a program run with --threads 1 gets one thread here too.
    threads = static_cast<std::uint64_t>(grove::detail::requested_threads());
  }
  threads = std::min(threads, chunks);

  std::atomic<std::uint64_t> next{0};
  auto work = [&] {
    for (;;) {
      const std::uint64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks) return;
      const std::uint64_t begin = c * chunk;
      task(begin, std::min(units, begin + chunk));
    }
  };
  std::vector<std::thread> helpers;
  if (threads > 1) {
    helpers.reserve(static_cast<std::size_t>(threads - 1));
    try {
      for (std::uint64_t t = 1; t < threads; ++t) helpers.emplace_back(work);
    } catch (const std::system_error&) {
      // No more threads to be had: the threads already started and this one finish the work.
    }
  }
  work();
  for (auto& helper : helpers) helper.join();
}

// Splits [0, units) into chunks over threads and runs each with run_best.
template <class Body>
void parallel_kernel(std::uint64_t units, const schedule& plan, Body& body) {
  parallel_chunks(units, plan,
                  [&](std::uint64_t begin, std::uint64_t end) { run_best(body, begin, end); });
}

}  // namespace grove::random::detail
