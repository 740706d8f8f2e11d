// grove/random/detail/threefry_avx512.hpp: threefry2x32 over many counters, written with AVX-512
// intrinsics for the AVX-512 variant of grove::random's kernels (see streams.hpp).
//
// Why not the vectorised loop of threefry.hpp: the compiler's loop takes one vector of sixteen
// counters through the twenty dependent rounds at a time, so a core mostly waits on each round's
// latency. Here several vectors go through the rounds together, as in threefry_avx2.hpp, with
// AVX-512's one-instruction rotate. The bits are those of threefry_2x32: integer arithmetic only.
#pragma once

#include <cstddef>

#include "grove/config.hpp"
#include "grove/detail/cpu.hpp"
#include "grove/random/detail/threefry.hpp"

#if GROVE_DETAIL_DISPATCH
#include <immintrin.h>

namespace grove::random::detail::avx512 {

// Counters per vector, and vectors that go through the rounds together. Each round is a chain of
// two dependent instructions per vector (the add, then the xor that needs its result), so the
// streams are what keeps several vector ALUs busy: with four, a Zen 5 ran about 20% slower than
// with eight (presumably its integer latencies leave four chains too few). Eight streams are 16
// vector registers of state, next to the 12 of the key schedule: all of it fits in AVX-512's 32.
inline constexpr std::size_t lanes = 16;
inline constexpr std::size_t streams = 8;

template <std::size_t S>
using vectors = __m512i[S];

// x rotated left by R bits. The masked form with every lane selected is the plain rotate; GCC 12's
// plain form starts from an undefined vector, which -Wmaybe-uninitialized reports at -O2.
template <int R>
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX512 __m512i rotl(__m512i x) noexcept {
  static_assert(R > 0 && R < 32);
  return _mm512_mask_rol_epi32(x, __mmask16{0xFFFF}, x, R);
}

// One round of the mix function on every stream.
template <int R, std::size_t S>
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX512 void mix(vectors<S>& x0, vectors<S>& x1) noexcept {
#pragma GCC unroll 8
  for (std::size_t s = 0; s < S; ++s) {
    x0[s] = _mm512_add_epi32(x0[s], x1[s]);
    x1[s] = _mm512_xor_si512(rotl<R>(x1[s]), x0[s]);
  }
}

template <int R0, int R1, int R2, int R3, std::size_t S>
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX512 void four_rounds(vectors<S>& x0,
                                                                vectors<S>& x1) noexcept {
  mix<R0>(x0, x1);
  mix<R1>(x0, x1);
  mix<R2>(x0, x1);
  mix<R3>(x0, x1);
}

template <std::size_t S>
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX512 void inject(vectors<S>& x0, vectors<S>& x1,
                                                           __m512i a, __m512i b) noexcept {
#pragma GCC unroll 8
  for (std::size_t s = 0; s < S; ++s) {
    x0[s] = _mm512_add_epi32(x0[s], a);
    x1[s] = _mm512_add_epi32(x1[s], b);
  }
}

// The key schedule (threefry.hpp's schedule_of), each word broadcast to a vector.
struct schedule_vectors {
  __m512i x0[6];
  __m512i x1[6];
};

GROVE_DETAIL_TARGET_AVX512 inline schedule_vectors broadcast_schedule(
    const key_schedule& k) noexcept {
  schedule_vectors v;
  for (int i = 0; i < 6; ++i) {
    v.x0[i] = _mm512_set1_epi32(static_cast<int>(k.x0[i]));
    v.x1[i] = _mm512_set1_epi32(static_cast<int>(k.x1[i]));
  }
  return v;
}

// S vectors of counters, from x0 + i and x1 + i, through all 20 rounds, to y0 + i and y1 + i; the
// last vector takes only the lanes in `tail` (a whole vector when it is all ones).
template <std::size_t S>
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX512 void rounds(const schedule_vectors& k,
                                                           const word* x0, const word* x1, word* y0,
                                                           word* y1, std::size_t i,
                                                           __mmask16 tail) noexcept {
  vectors<S> a;
  vectors<S> b;
#pragma GCC unroll 8
  for (std::size_t s = 0; s < S; ++s) {
    const __mmask16 m = s + 1 == S ? tail : __mmask16{0xFFFF};
    a[s] = _mm512_maskz_loadu_epi32(m, x0 + i + s * lanes);
    b[s] = _mm512_maskz_loadu_epi32(m, x1 + i + s * lanes);
  }
  inject(a, b, k.x0[0], k.x1[0]);
  four_rounds<13, 15, 26, 6>(a, b);
  inject(a, b, k.x0[1], k.x1[1]);
  four_rounds<17, 29, 16, 24>(a, b);
  inject(a, b, k.x0[2], k.x1[2]);
  four_rounds<13, 15, 26, 6>(a, b);
  inject(a, b, k.x0[3], k.x1[3]);
  four_rounds<17, 29, 16, 24>(a, b);
  inject(a, b, k.x0[4], k.x1[4]);
  four_rounds<13, 15, 26, 6>(a, b);
  inject(a, b, k.x0[5], k.x1[5]);
#pragma GCC unroll 8
  for (std::size_t s = 0; s < S; ++s) {
    const __mmask16 m = s + 1 == S ? tail : __mmask16{0xFFFF};
    _mm512_mask_storeu_epi32(y0 + i + s * lanes, m, a[s]);
    _mm512_mask_storeu_epi32(y1 + i + s * lanes, m, b[s]);
  }
}

// (y0[i], y1[i]) = threefry_2x32(key, (x0[i], x1[i])) for i < n, as threefry_2x32_lanes. Each
// element is read before its result is written, so y0 may be x0 and y1 may be x1 (in place).
GROVE_DETAIL_TARGET_AVX512 inline void threefry_2x32_lanes(key_words key, const word* x0,
                                                           const word* x1, word* y0, word* y1,
                                                           std::size_t n) noexcept {
  const schedule_vectors k = broadcast_schedule(schedule_of(key));
  constexpr auto all = __mmask16{0xFFFF};
  std::size_t i = 0;
  for (; i + streams * lanes <= n; i += streams * lanes) rounds<streams>(k, x0, x1, y0, y1, i, all);
  for (; i + lanes <= n; i += lanes) rounds<1>(k, x0, x1, y0, y1, i, all);
  // The last n % 16 counters: one vector with the lanes past n masked off (neither read nor
  // written).
  if (i < n) {
    rounds<1>(k, x0, x1, y0, y1, i, static_cast<__mmask16>((1u << (n - i)) - 1u));
  }
}

}  // namespace grove::random::detail::avx512
#endif  // GROVE_DETAIL_DISPATCH
