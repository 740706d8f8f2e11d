// grove/random/detail/math_avx2.hpp: the single-precision erf_inv of math.hpp written with AVX2
// intrinsics, for the AVX2 variant of grove::random's kernels (see streams.hpp).
//
// Why: erf_inv is two polynomials of eight dependent fused multiply-adds plus a logarithm, and the
// compiler's vectorised loop issues one vector's chain after another; with AVX2 a core then waits
// on the chains' latency. Here four vectors go through each step together. Every operation is the
// one math.hpp performs, in the same order and with the same rounding (an explicit fma where
// math.hpp has std::fma, a plain product or sum where it has one), so the bits are those of
// math.hpp's functions; tests/test_random_determinism.cpp compares the two.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "grove/config.hpp"
#include "grove/detail/cpu.hpp"
#include "grove/random/detail/math.hpp"

#if GROVE_DETAIL_DISPATCH
#include <immintrin.h>

namespace grove::random::detail::avx2 {

inline constexpr std::size_t float_lanes = 8;
inline constexpr std::size_t float_streams = 4;

template <std::size_t S>
using floats = __m256[S];

// p = c[0]; p = fma(p, t, c[k]) for k = 1 .. N-1, on every stream (horner in math.hpp).
template <std::size_t N, std::size_t S>
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX2_FMA void horner(const float (&c)[N],
                                                             const floats<S>& t,
                                                             floats<S>& p) noexcept {
#pragma GCC unroll 4
  for (std::size_t s = 0; s < S; ++s) p[s] = _mm256_set1_ps(c[0]);
#pragma GCC unroll 16
  for (std::size_t k = 1; k < N; ++k) {
    const __m256 ck = _mm256_set1_ps(c[k]);
#pragma GCC unroll 4
    for (std::size_t s = 0; s < S; ++s) p[s] = _mm256_fmadd_ps(p[s], t[s], ck);
  }
}

// log_f32 of math.hpp, step for step; x is replaced by its logarithm.
template <std::size_t S>
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX2_FMA void log_f32(floats<S>& x) noexcept {
  const __m256 ln2_hi = _mm256_set1_ps(log_f32_ln2_hi);
  const __m256 ln2_lo = _mm256_set1_ps(log_f32_ln2_lo);
  const __m256i shift = _mm256_set1_epi32(static_cast<int>(0x3f800000u - 0x3f3504f3u));
  const __m256i bias = _mm256_set1_epi32(0x7f);
  const __m256i mantissa = _mm256_set1_epi32(0x007fffff);
  const __m256i sqrt_half = _mm256_set1_epi32(0x3f3504f3);
  const __m256 one = _mm256_set1_ps(1.0f);
  floats<S> f;
  floats<S> kf;
#pragma GCC unroll 4
  for (std::size_t s = 0; s < S; ++s) {
    const __m256i bits = _mm256_add_epi32(_mm256_castps_si256(x[s]), shift);
    kf[s] = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23), bias));
    const __m256i m = _mm256_add_epi32(_mm256_and_si256(bits, mantissa), sqrt_half);
    f[s] = _mm256_sub_ps(_mm256_castsi256_ps(m), one);
  }
  floats<S> poly;
  horner(log_f32_polynomial, f, poly);
  const __m256 minus_half = _mm256_set1_ps(-0.5f);
#pragma GCC unroll 4
  for (std::size_t s = 0; s < S; ++s) {
    const __m256 f2 = _mm256_mul_ps(f[s], f[s]);
    const __m256 small = _mm256_fmadd_ps(
        minus_half, f2,
        _mm256_fmadd_ps(_mm256_mul_ps(f[s], f2), poly[s], _mm256_mul_ps(kf[s], ln2_lo)));
    x[s] = _mm256_fmadd_ps(kf[s], ln2_hi, _mm256_add_ps(f[s], small));
  }
}

// S vectors of erf_inv_scaled(float) (math.hpp) from x + i to out + i. Returns a bit mask of the
// lanes whose w is not below 5 (or NaN), whose value the caller computes again with the tail
// polynomial; w is left in `w` for them.
template <std::size_t S>
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX2_FMA unsigned erf_inv_main(const float* x, float* out,
                                                                       std::size_t i, float scale,
                                                                       float* w) noexcept {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 two = _mm256_set1_ps(2.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  floats<S> xs;
  floats<S> y;
  floats<S> u;
#pragma GCC unroll 4
  for (std::size_t s = 0; s < S; ++s) {
    xs[s] = _mm256_loadu_ps(x + i + s * float_lanes);
    // fma(-x, x, 0): -(x * x) rounded once.
    y[s] = _mm256_fnmadd_ps(xs[s], xs[s], _mm256_setzero_ps());
    u[s] = _mm256_add_ps(one, y[s]);
  }
  // log1p_f32(y) = fma(y - (u - 1), 2 - u, log_f32(u)); w = -log1p_f32(y).
  floats<S> log_u;
#pragma GCC unroll 4
  for (std::size_t s = 0; s < S; ++s) log_u[s] = u[s];
  log_f32(log_u);
  floats<S> t;
  unsigned tail = 0;
#pragma GCC unroll 4
  for (std::size_t s = 0; s < S; ++s) {
    const __m256 correction = _mm256_sub_ps(y[s], _mm256_sub_ps(u[s], one));
    const __m256 ws =
        _mm256_xor_ps(_mm256_fmadd_ps(correction, _mm256_sub_ps(two, u[s]), log_u[s]), sign);
    const int lanes_in_tail =
        _mm256_movemask_ps(_mm256_cmp_ps(ws, _mm256_set1_ps(erf_inv_tail_from), _CMP_NLT_UQ));
    if (lanes_in_tail != 0) _mm256_storeu_ps(w + s * float_lanes, ws);
    tail |= static_cast<unsigned>(lanes_in_tail) << (s * float_lanes);
    t[s] = _mm256_sub_ps(ws, _mm256_set1_ps(erf_inv_centre));
  }
  floats<S> p;
  horner(erf_inv_polynomial, t, p);
  const __m256 infinity = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  const __m256 scale_v = _mm256_set1_ps(scale);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
#pragma GCC unroll 4
  for (std::size_t s = 0; s < S; ++s) {
    const __m256 at_one = _mm256_mul_ps(xs[s], infinity);
    const __m256 inside = _mm256_mul_ps(p[s], xs[s]);
    const __m256 is_one = _mm256_cmp_ps(_mm256_and_ps(xs[s], abs_mask), one, _CMP_EQ_OQ);
    _mm256_storeu_ps(out + i + s * float_lanes,
                     _mm256_mul_ps(scale_v, _mm256_blendv_ps(inside, at_one, is_one)));
  }
  return tail;
}

// out[i] = scale * erf_inv(x[i]) for i < n, the same bits as erf_inv_scaled(float) of math.hpp.
GROVE_DETAIL_TARGET_AVX2_FMA inline void erf_inv_scaled(const float* GROVE_RESTRICT x,
                                                        float* GROVE_RESTRICT out, std::size_t n,
                                                        float scale) noexcept {
  constexpr std::size_t step = float_lanes * float_streams;
  float w[step];
  std::size_t i = 0;
  auto redo_tail = [&](unsigned tail) GROVE_INLINE_LAMBDA {
    // Rare (w >= 5 means |x| > 0.9966): the tail polynomial, in math.hpp's scalar code.
    constexpr float infinity = std::numeric_limits<float>::infinity();
    for (; tail != 0; tail &= tail - 1) {
      const auto lane = static_cast<std::size_t>(__builtin_ctz(tail));
      const float xl = x[i + lane];
      const float pl = erf_inv_tail_polynomial(w[lane]);
      out[i + lane] = scale * (std::fabs(xl) == 1.0f ? xl * infinity : pl * xl);
    }
  };
  for (; i + step <= n; i += step) {
    const unsigned tail = erf_inv_main<float_streams>(x, out, i, scale, w);
    if (tail != 0) redo_tail(tail);
  }
  for (; i + float_lanes <= n; i += float_lanes) {
    const unsigned tail = erf_inv_main<1>(x, out, i, scale, w);
    if (tail != 0) redo_tail(tail);
  }
  if (i < n) grove::random::detail::erf_inv_scaled(x + i, out + i, n - i, scale);
}

}  // namespace grove::random::detail::avx2

#endif  // GROVE_DETAIL_DISPATCH
