// grove/detail/cpu.hpp: what the CPU running the program can execute, asked once. grove compiles
// some kernels for several instruction sets and picks one at run time (grove::random's generators,
// grove::nn's float GEMM); both ask here. Only x86 with GCC or Clang can ask; elsewhere every
// feature reads false and the portable kernels run.
#pragma once

namespace grove::detail {

struct cpu_features {
  bool avx2_fma = false;  // AVX2 and FMA3
  bool avx512f = false;
  bool avx512vl = false;
};

inline const cpu_features& this_cpu() noexcept {
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
  static const cpu_features features = [] {
    __builtin_cpu_init();
    cpu_features f;
    f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
    return f;
  }();
#else
  static const cpu_features features;
#endif
  return features;
}

}  // namespace grove::detail
