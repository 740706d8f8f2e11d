// grove/random/detail/threefry_avx2.hpp: threefry2x32 over many counters, written with AVX2
// intrinsics for the AVX2 variant of grove::random's kernels (see streams.hpp).
//
// Why not the vectorised loop of threefry.hpp: with AVX2 every rotation is two shifts and an OR,
// and the compiler's loop keeps one or two vectors of counters going through twenty dependent
// rounds, so a core waits on each round's latency. Here three vectors of eight counters go through
// the rounds together, and the rotations by 16 and 24 bits are one byte shuffle each; on the
// AVX2 CPUs measured this is about twice as fast. AVX-512 has a vector rotate and a kernel of its
// own (threefry_avx512.hpp). The bits are those of threefry_2x32: integer arithmetic only.
#pragma once

#include <cstddef>

#include "grove/config.hpp"
#include "grove/detail/cpu.hpp"
#include "grove/random/detail/threefry.hpp"

#if GROVE_DETAIL_DISPATCH
#include <immintrin.h>

namespace grove::random::detail::avx2 {

// Counters per vector, and vectors that go through the rounds together.
inline constexpr std::size_t lanes = 8;
inline constexpr std::size_t streams = 3;

template <std::size_t S>
using vectors = __m256i[S];

template <int R>
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX2_FMA __m256i rotl(__m256i x) noexcept {
  static_assert(R > 0 && R < 32);
  if constexpr (R == 16) {
    return _mm256_shuffle_epi8(
        x, _mm256_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13, 2, 3, 0, 1, 6, 7,
                            4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
  } else if constexpr (R == 24) {
    return _mm256_shuffle_epi8(
        x, _mm256_setr_epi8(1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12, 1, 2, 3, 0, 5, 6,
                            7, 4, 9, 10, 11, 8, 13, 14, 15, 12));
  } else {
    return _mm256_or_si256(_mm256_slli_epi32(x, R), _mm256_srli_epi32(x, 32 - R));
  }
}

// One round of the mix function on every stream.
template <int R, std::size_t S>
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX2_FMA void mix(vectors<S>& x0, vectors<S>& x1) noexcept {
#pragma GCC unroll 4
  for (std::size_t s = 0; s < S; ++s) {
    x0[s] = _mm256_add_epi32(x0[s], x1[s]);
    x1[s] = _mm256_xor_si256(rotl<R>(x1[s]), x0[s]);
  }
}

template <int R0, int R1, int R2, int R3, std::size_t S>
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX2_FMA void four_rounds(vectors<S>& x0,
                                                                  vectors<S>& x1) noexcept {
  mix<R0>(x0, x1);
  mix<R1>(x0, x1);
  mix<R2>(x0, x1);
  mix<R3>(x0, x1);
}

template <std::size_t S>
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX2_FMA void inject(vectors<S>& x0, vectors<S>& x1,
                                                             __m256i a, __m256i b) noexcept {
#pragma GCC unroll 4
  for (std::size_t s = 0; s < S; ++s) {
    x0[s] = _mm256_add_epi32(x0[s], a);
    x1[s] = _mm256_add_epi32(x1[s], b);
  }
}

// The key schedule (threefry.hpp's schedule_of), each word broadcast to a vector.
struct schedule_vectors {
  __m256i x0[6];
  __m256i x1[6];
};

GROVE_DETAIL_TARGET_AVX2_FMA inline schedule_vectors broadcast_schedule(
    const key_schedule& k) noexcept {
  schedule_vectors v;
  for (int i = 0; i < 6; ++i) {
    v.x0[i] = _mm256_set1_epi32(static_cast<int>(k.x0[i]));
    v.x1[i] = _mm256_set1_epi32(static_cast<int>(k.x1[i]));
  }
  return v;
}

// S vectors of counters, from x0 + i and x1 + i, through all 20 rounds, to y0 + i and y1 + i.
template <std::size_t S>
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX2_FMA void rounds(const schedule_vectors& k,
                                                             const word* x0, const word* x1,
                                                             word* y0, word* y1,
                                                             std::size_t i) noexcept {
  vectors<S> a;
  vectors<S> b;
#pragma GCC unroll 4
  for (std::size_t s = 0; s < S; ++s) {
    a[s] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x0 + i + s * lanes));
    b[s] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x1 + i + s * lanes));
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
#pragma GCC unroll 4
  for (std::size_t s = 0; s < S; ++s) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y0 + i + s * lanes), a[s]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y1 + i + s * lanes), b[s]);
  }
}

// (y0[i], y1[i]) = threefry_2x32(key, (x0[i], x1[i])) for i < n, as threefry_2x32_lanes. Each
// element is read before its result is written, so y0 may be x0 and y1 may be x1 (in place).
GROVE_DETAIL_TARGET_AVX2_FMA inline void threefry_2x32_lanes(key_words key, const word* x0,
                                                             const word* x1, word* y0, word* y1,
                                                             std::size_t n) noexcept {
  const key_schedule schedule = schedule_of(key);
  const schedule_vectors k = broadcast_schedule(schedule);
  std::size_t i = 0;
  for (; i + streams * lanes <= n; i += streams * lanes) rounds<streams>(k, x0, x1, y0, y1, i);
  for (; i + lanes <= n; i += lanes) rounds<1>(k, x0, x1, y0, y1, i);
  // The last n % 8 counters, one at a time (in place too, unlike threefry.hpp's loop).
  for (; i < n; ++i) {
    word a = x0[i];
    word b = x1[i];
    threefry_2x32_rounds(schedule, a, b);
    y0[i] = a;
    y1[i] = b;
  }
}

}  // namespace grove::random::detail::avx2

#endif  // GROVE_DETAIL_DISPATCH
