// grove/nn/detail/gemv_bf16.hpp: y += W x for one example under bf16 compute, W's elements
// rounded to bfloat16 as they are read (x is rounded already).
//
// nn::apply of one example runs matrix-vector products, not the GEMM kernels: a GEMM would pack
// the whole of W for one column of output. Under bf16 compute the product's inputs must be
// rounded, and making a rounded copy of W would read and write W once more than the product
// itself; rounding each element as it is loaded costs a few integer instructions per eight
// elements, in a loop that streams W once. The rounding is grove/detail/bf16.hpp's, so
// the inputs are those every other kernel multiplies; the sums run over x's elements in order
// for each row.
#pragma once

#include <algorithm>
#include <cstddef>
#include <grove/detail/bf16.hpp>
#include <grove/detail/cpu.hpp>

namespace grove::nn::detail::gemv_bf16 {

using Index = std::ptrdiff_t;

/// y[0:m] += round(W) x, W m x k column-major with column stride ld, portable.
inline void portable(const float* w, Index ld, Index m, Index k, const float* x, float* y) {
  for (Index j = 0; j < k; ++j) {
    const float xj = x[j];
    const float* col = w + j * ld;
    for (Index i = 0; i < m; ++i) y[i] += ::grove::detail::round_to_bf16(col[i]) * xj;
  }
}

#if defined(GROVE_DETAIL_BF16_VECTORS)

/// The same on AVX2 and FMA3. W streams through memory column after column, four at a time
/// (each row's sum still runs over x in order), with y in the L1 cache.
GROVE_DETAIL_TARGET_AVX2_FMA inline void avx2(const float* w, Index ld, Index m, Index k,
                                              const float* x, float* y) {
  using ::grove::detail::round_to_bf16;
  using ::grove::detail::round_to_bf16_avx2;
  const Index rows = m / 8 * 8;
  Index j = 0;
  for (; j + 4 <= k; j += 4) {
    const float* c0 = w + j * ld;
    const float *c1 = c0 + ld, *c2 = c1 + ld, *c3 = c2 + ld;
    const __m256 x0 = _mm256_broadcast_ss(x + j), x1 = _mm256_broadcast_ss(x + j + 1),
                 x2 = _mm256_broadcast_ss(x + j + 2), x3 = _mm256_broadcast_ss(x + j + 3);
    for (Index i = 0; i < rows; i += 8) {
      __m256 a = _mm256_loadu_ps(y + i);
      a = _mm256_fmadd_ps(round_to_bf16_avx2(_mm256_loadu_ps(c0 + i)), x0, a);
      a = _mm256_fmadd_ps(round_to_bf16_avx2(_mm256_loadu_ps(c1 + i)), x1, a);
      a = _mm256_fmadd_ps(round_to_bf16_avx2(_mm256_loadu_ps(c2 + i)), x2, a);
      a = _mm256_fmadd_ps(round_to_bf16_avx2(_mm256_loadu_ps(c3 + i)), x3, a);
      _mm256_storeu_ps(y + i, a);
    }
    for (Index i = rows; i < m; ++i) {  // the last rows with FMA too, as the lanes compute
      float a = y[i];
      a = __builtin_fmaf(round_to_bf16(c0[i]), x[j], a);
      a = __builtin_fmaf(round_to_bf16(c1[i]), x[j + 1], a);
      a = __builtin_fmaf(round_to_bf16(c2[i]), x[j + 2], a);
      y[i] = __builtin_fmaf(round_to_bf16(c3[i]), x[j + 3], a);
    }
  }
  for (; j < k; ++j) {
    const float* c = w + j * ld;
    const __m256 xj = _mm256_broadcast_ss(x + j);
    for (Index i = 0; i < rows; i += 8)
      _mm256_storeu_ps(y + i, _mm256_fmadd_ps(round_to_bf16_avx2(_mm256_loadu_ps(c + i)), xj,
                                              _mm256_loadu_ps(y + i)));
    for (Index i = rows; i < m; ++i) y[i] = __builtin_fmaf(round_to_bf16(c[i]), x[j], y[i]);
  }
}

#endif

/// y[0:m] += round(W) x (x already rounded), on the widest instructions this CPU has.
inline void add(const float* w, Index ld, Index m, Index k, const float* x, float* y) {
#if defined(GROVE_DETAIL_BF16_VECTORS)
  if (::grove::detail::this_cpu().avx2_fma) return avx2(w, ld, m, k, x, y);
#endif
  portable(w, ld, m, k, x, y);
}

}  // namespace grove::nn::detail::gemv_bf16
