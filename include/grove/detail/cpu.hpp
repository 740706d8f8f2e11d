// grove/detail/cpu.hpp: grove's one mechanism for run-time CPU dispatch. grove compiles some
// kernels for several instruction sets and picks one at run time (grove::random's generators,
// grove::nn's float GEMM); both use the macros and the probe here. Only x86 with GCC or Clang can
// dispatch; elsewhere every feature reads false and the portable kernels run.
//
// A header-only library is usually built without -march, which on x86-64 means SSE2: dispatch is
// what gives such a build the speed of the CPU it runs on. Define GROVE_NO_DISPATCH (before any
// grove header, the same in every translation unit) to build only the portable kernels.
// GROVE_RANDOM_NO_DISPATCH and GROVE_NN_NO_DISPATCH, the former per-layer switches, mean the same.
#pragma once

#include <cstddef>
#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#endif

#if defined(GROVE_RANDOM_NO_DISPATCH) || defined(GROVE_NN_NO_DISPATCH)
#ifndef GROVE_NO_DISPATCH
#define GROVE_NO_DISPATCH 1
#endif
#endif

// GROVE_DETAIL_DISPATCH: 1 when kernels for other instruction sets are compiled in, with
// GROVE_DETAIL_TARGET_* as the function attributes that compile one for its instruction set.
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__)) && \
    !defined(GROVE_NO_DISPATCH)
#define GROVE_DETAIL_DISPATCH 1
#define GROVE_DETAIL_TARGET_AVX2_FMA __attribute__((target("avx2,fma")))
// The AVX-512 variant also asks for 512-bit vectors in the loops GCC vectorises: GCC's tuning
// for many AVX-512 CPUs (-march=native on them included) prefers 256-bit ones, which halves the
// width of every loop that is not written with intrinsics. Clang takes no such option here.
#if defined(__clang__)
#define GROVE_DETAIL_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))
#else
#define GROVE_DETAIL_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512vl,avx2,fma,prefer-vector-width=512")))
#endif
// AVX-512F alone: what grove's float GEMM kernel is compiled for (nn/detail/sgemm_avx512.hpp),
// and so what the helpers inlined into it must ask for (a function is inlined only into one
// compiled for at least its own instruction sets).
#define GROVE_DETAIL_TARGET_AVX512F __attribute__((target("avx512f")))
// AVX512-BF16 (vdpbf16ps) and the AVX-512 subsets that every CPU with it has (Intel's Cooper Lake
// and later, AMD's Zen 4 and later), with 512-bit vectors for the loops GCC vectorises, as above.
#if defined(__clang__)
#define GROVE_DETAIL_TARGET_AVX512BF16 \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx2,fma")))
#else
#define GROVE_DETAIL_TARGET_AVX512BF16                                 \
  __attribute__((                                                      \
      target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx2,fma," \
             "prefer-vector-width=512")))
#endif
#else
#define GROVE_DETAIL_DISPATCH 0
#endif

// Whether this translation unit itself is compiled for an instruction set (-march), in which case
// its portable code already runs there and needs no dispatch.
#if defined(__AVX512F__) && defined(__AVX512VL__) && defined(__FMA__)
#define GROVE_DETAIL_BUILT_FOR_AVX512 1
#else
#define GROVE_DETAIL_BUILT_FOR_AVX512 0
#endif
#if defined(__AVX2__) && defined(__FMA__)
#define GROVE_DETAIL_BUILT_FOR_AVX2_FMA 1
#else
#define GROVE_DETAIL_BUILT_FOR_AVX2_FMA 0
#endif

namespace grove::detail {

/// Who designed the CPU: where the same instruction runs at rates that differ by vendor, the
/// kernel chosen does too (nn/detail/gemm.hpp's bf16 products).
enum class cpu_vendor { other, intel, amd };

struct cpu_features {
  bool avx2_fma = false;  // AVX2 and FMA3
  bool avx512f = false;
  bool avx512vl = false;
  // AVX512-BF16 (vdpbf16ps), with AVX-512F, VL, BW and DQ, which every CPU that has it also has
  // (GROVE_DETAIL_TARGET_AVX512BF16 compiles for all of them).
  bool avx512_bf16 = false;
  cpu_vendor vendor = cpu_vendor::other;
};

inline const cpu_features& this_cpu() noexcept {
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
  static const cpu_features features = [] {
    __builtin_cpu_init();
    cpu_features f;
    f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
    // AVX512-BF16 is CPUID leaf 7, subleaf 1, EAX bit 5. It is read from CPUID rather than with
    // __builtin_cpu_supports, which not every compiler grove supports knows it by; the other
    // features' answers include the operating system's support for the AVX-512 registers.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool bf16 = __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 5)) != 0;
    f.avx512_bf16 = bf16 && f.avx512f && f.avx512vl && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512dq");
    f.vendor = __builtin_cpu_is("amd")     ? cpu_vendor::amd
               : __builtin_cpu_is("intel") ? cpu_vendor::intel
                                           : cpu_vendor::other;
    return f;
  }();
#else
  static const cpu_features features;
#endif
  return features;
}

/// The data caches one core sees, in bytes: what cache-blocked kernels size their blocks by.
struct cache_sizes {
  std::size_t l1d = 0;  // per core
  std::size_t l2 = 0;   // per core (on the CPUs grove dispatches for)
  std::size_t l3 = 0;   // shared by the cores of a package
};

/// This CPU's cache sizes as the operating system reports them (sysconf on Linux), once. A size
/// that is not reported, or not plausible (virtual machines report odd values), reads as the
/// common x86-64 figure: 32 KiB L1d, 512 KiB L2, 8 MiB L3; the L3 figure is capped at 32 MiB,
/// since a core cannot use a whole large L3 that its neighbours share.
inline const cache_sizes& this_cpu_caches() noexcept {
  static const cache_sizes sizes = [] {
    cache_sizes c{32 * 1024, 512 * 1024, 8 * 1024 * 1024};
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE) && \
    defined(_SC_LEVEL3_CACHE_SIZE)
    const auto read = [](int name, std::size_t lo, std::size_t hi, std::size_t fallback) {
      const long v = ::sysconf(name);
      if (v <= 0) return fallback;
      const auto u = static_cast<std::size_t>(v);
      return u < lo ? fallback : (u > hi ? hi : u);
    };
    c.l1d = read(_SC_LEVEL1_DCACHE_SIZE, 8 * 1024, 256 * 1024, c.l1d);
    c.l2 = read(_SC_LEVEL2_CACHE_SIZE, 64 * 1024, 16 * 1024 * 1024, c.l2);
    c.l3 = read(_SC_LEVEL3_CACHE_SIZE, 0, 32 * 1024 * 1024, c.l3);
    if (c.l3 < c.l2) c.l3 = c.l2;
#endif
    return c;
  }();
  return sizes;
}

}  // namespace grove::detail
