// grove/random/detail/math_avx512.hpp: the single-precision erf_inv of math.hpp written with
// AVX-512 intrinsics, for the AVX-512 variant of grove::random's kernels (see streams.hpp).
//
// Why: as for AVX2 (math_avx2.hpp, which this follows step for step with 16-lane vectors and
// mask registers), the compiler's vectorised loop issues one vector's chain of dependent fused
// multiply-adds after another and waits on their latency, and at -O2 GCC does not vectorise it at
// all. Here four vectors go through each step together. Every operation is the one math.hpp
// performs, in the same order and with the same rounding, so the bits are those of math.hpp's
// functions; tests/test_random_determinism.cpp compares the two.
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

namespace grove::random::detail::avx512 {

inline constexpr std::size_t float_lanes = 16;
inline constexpr std::size_t float_streams = 4;

template <std::size_t S>
using floats = __m512[S];

// A right shift and a conversion to float. The masked forms with every lane selected are the plain
// ones; GCC 12's plain forms start from an undefined vector, which -Wmaybe-uninitialized reports
// at -O2.
template <unsigned R>
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX512 __m512i shift_right(__m512i x) noexcept {
  return _mm512_mask_srli_epi32(x, __mmask16{0xFFFF}, x, R);
}
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX512 __m512 to_float(__m512i x) noexcept {
  return _mm512_mask_cvtepi32_ps(_mm512_castsi512_ps(x), __mmask16{0xFFFF}, x);
}

// p = c[0]; p = fma(p, t, c[k]) for k = 1 .. N-1, on every stream (horner in math.hpp).
template <std::size_t N, std::size_t S>
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX512 void horner(const float (&c)[N], const floats<S>& t,
                                                           floats<S>& p) noexcept {
#pragma GCC unroll 4
  for (std::size_t s = 0; s < S; ++s) p[s] = _mm512_set1_ps(c[0]);
#pragma GCC unroll 16
  for (std::size_t k = 1; k < N; ++k) {
    const __m512 ck = _mm512_set1_ps(c[k]);
#pragma GCC unroll 4
    for (std::size_t s = 0; s < S; ++s) p[s] = _mm512_fmadd_ps(p[s], t[s], ck);
  }
}

// log_f32 of math.hpp, step for step; x is replaced by its logarithm.
template <std::size_t S>
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX512 void log_f32(floats<S>& x) noexcept {
  const __m512 ln2_hi = _mm512_set1_ps(log_f32_ln2_hi);
  const __m512 ln2_lo = _mm512_set1_ps(log_f32_ln2_lo);
  const __m512i shift = _mm512_set1_epi32(static_cast<int>(0x3f800000u - 0x3f3504f3u));
  const __m512i bias = _mm512_set1_epi32(0x7f);
  const __m512i mantissa = _mm512_set1_epi32(0x007fffff);
  const __m512i sqrt_half = _mm512_set1_epi32(0x3f3504f3);
  const __m512 one = _mm512_set1_ps(1.0f);
  floats<S> f;
  floats<S> kf;
#pragma GCC unroll 4
  for (std::size_t s = 0; s < S; ++s) {
    const __m512i bits = _mm512_add_epi32(_mm512_castps_si512(x[s]), shift);
    kf[s] = to_float(_mm512_sub_epi32(shift_right<23>(bits), bias));
    const __m512i m = _mm512_add_epi32(_mm512_and_si512(bits, mantissa), sqrt_half);
    f[s] = _mm512_sub_ps(_mm512_castsi512_ps(m), one);
  }
  floats<S> poly;
  horner(log_f32_polynomial, f, poly);
  const __m512 minus_half = _mm512_set1_ps(-0.5f);
#pragma GCC unroll 4
  for (std::size_t s = 0; s < S; ++s) {
    const __m512 f2 = _mm512_mul_ps(f[s], f[s]);
    const __m512 small = _mm512_fmadd_ps(
        minus_half, f2,
        _mm512_fmadd_ps(_mm512_mul_ps(f[s], f2), poly[s], _mm512_mul_ps(kf[s], ln2_lo)));
    x[s] = _mm512_fmadd_ps(kf[s], ln2_hi, _mm512_add_ps(f[s], small));
  }
}

// S vectors of erf_inv_scaled(float) (math.hpp) from x + i to out + i. Returns a bit mask of the
// lanes whose w is not below 5 (or NaN), whose value the caller computes again with the tail
// polynomial; w is left in `w` for them.
template <std::size_t S>
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX512 std::uint64_t erf_inv_main(const float* x,
                                                                          float* out, std::size_t i,
                                                                          float scale,
                                                                          float* w) noexcept {
  static_assert(S * float_lanes <= 64, "one bit per lane in the returned mask");
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 two = _mm512_set1_ps(2.0f);
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  floats<S> xs;
  floats<S> y;
  floats<S> u;
#pragma GCC unroll 4
  for (std::size_t s = 0; s < S; ++s) {
    xs[s] = _mm512_loadu_ps(x + i + s * float_lanes);
    // fma(-x, x, 0): -(x * x) rounded once.
    y[s] = _mm512_fnmadd_ps(xs[s], xs[s], _mm512_setzero_ps());
    u[s] = _mm512_add_ps(one, y[s]);
  }
  // log1p_f32(y) = fma(y - (u - 1), 2 - u, log_f32(u)); w = -log1p_f32(y).
  floats<S> log_u;
#pragma GCC unroll 4
  for (std::size_t s = 0; s < S; ++s) log_u[s] = u[s];
  log_f32(log_u);
  floats<S> t;
  std::uint64_t tail = 0;
#pragma GCC unroll 4
  for (std::size_t s = 0; s < S; ++s) {
    const __m512 correction = _mm512_sub_ps(y[s], _mm512_sub_ps(u[s], one));
    const __m512 log1p = _mm512_fmadd_ps(correction, _mm512_sub_ps(two, u[s]), log_u[s]);
    const __m512 ws = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(log1p), sign));
    const __mmask16 lanes_in_tail =
        _mm512_cmp_ps_mask(ws, _mm512_set1_ps(erf_inv_tail_from), _CMP_NLT_UQ);
    if (lanes_in_tail != 0) _mm512_storeu_ps(w + s * float_lanes, ws);
    tail |= static_cast<std::uint64_t>(lanes_in_tail) << (s * float_lanes);
    t[s] = _mm512_sub_ps(ws, _mm512_set1_ps(erf_inv_centre));
  }
  floats<S> p;
  horner(erf_inv_polynomial, t, p);
  const __m512 infinity = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  const __m512 scale_v = _mm512_set1_ps(scale);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
#pragma GCC unroll 4
  for (std::size_t s = 0; s < S; ++s) {
    const __m512 at_one = _mm512_mul_ps(xs[s], infinity);
    const __m512 inside = _mm512_mul_ps(p[s], xs[s]);
    const __m512 magnitude =
        _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(xs[s]), abs_mask));
    const __mmask16 is_one = _mm512_cmp_ps_mask(magnitude, one, _CMP_EQ_OQ);
    _mm512_storeu_ps(out + i + s * float_lanes,
                     _mm512_mul_ps(scale_v, _mm512_mask_blend_ps(is_one, inside, at_one)));
  }
  return tail;
}

// out[i] = scale * erf_inv(x[i]) for i < n, the same bits as erf_inv_scaled(float) of math.hpp.
GROVE_DETAIL_TARGET_AVX512 inline void erf_inv_scaled(const float* GROVE_RESTRICT x,
                                                      float* GROVE_RESTRICT out, std::size_t n,
                                                      float scale) noexcept {
  constexpr std::size_t step = float_lanes * float_streams;
  float w[step];
  std::size_t i = 0;
  auto redo_tail = [&](std::uint64_t tail) GROVE_INLINE_LAMBDA {
    // Rare (w >= 5 means |x| > 0.9966): the tail polynomial, in math.hpp's scalar code.
    constexpr float infinity = std::numeric_limits<float>::infinity();
    for (; tail != 0; tail &= tail - 1) {
      const auto lane = static_cast<std::size_t>(__builtin_ctzll(tail));
      const float xl = x[i + lane];
      const float pl = erf_inv_tail_polynomial(w[lane]);
      out[i + lane] = scale * (std::fabs(xl) == 1.0f ? xl * infinity : pl * xl);
    }
  };
  for (; i + step <= n; i += step) {
    const std::uint64_t tail = erf_inv_main<float_streams>(x, out, i, scale, w);
    if (tail != 0) redo_tail(tail);
  }
  for (; i + float_lanes <= n; i += float_lanes) {
    const std::uint64_t tail = erf_inv_main<1>(x, out, i, scale, w);
    if (tail != 0) redo_tail(tail);
  }
  if (i < n) grove::random::detail::erf_inv_scaled(x + i, out + i, n - i, scale);
}

}  // namespace grove::random::detail::avx512
#endif  // GROVE_DETAIL_DISPATCH
