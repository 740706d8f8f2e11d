// grove/detail/bf16.hpp: rounding a float to bfloat16, the one definition every kernel and pass
// of grove's mixed precision shares (so every CPU computes the same rounded inputs).
//
// bfloat16 is a float's upper 16 bits: the same sign and 8-bit exponent, 7 of the 23 fraction
// bits. Rounding keeps the value as a float whose lower 16 bits are zero, to nearest with ties to
// even, as Eigen::bfloat16's conversion does: finite values too large round to infinity,
// subnormal values round like any other (they are not flushed to zero), and a NaN becomes the
// quiet NaN of the same sign.
//
// The vector forms below (for the GEMM kernels that round their inputs while packing them) give
// the same bits as bf16_round_bits for every float, NaN included: integer arithmetic on the bits,
// never a conversion instruction, whose treatment of subnormal values and NaNs differs.
#pragma once

#include <cstdint>
#include <cstring>
#include <grove/config.hpp>
#include <grove/detail/cpu.hpp>

#if GROVE_DETAIL_DISPATCH && defined(__x86_64__)
#define GROVE_DETAIL_BF16_VECTORS 1
#include <immintrin.h>
#endif

namespace grove::detail {

/// The bits of x rounded to bfloat16, in the upper half of a float's bits (the lower half zero).
constexpr std::uint32_t bf16_round_bits(std::uint32_t bits) noexcept {
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (bits & 0x80000000u) | 0x7fc00000u;  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return bits & 0xffff0000u;
}

/// x rounded to the nearest bfloat16 (ties to even), as a float.
inline float round_to_bf16(float x) noexcept {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits = bf16_round_bits(bits);
  float r;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}

/// Rounds n floats in place.
inline void round_to_bf16(float* x, std::ptrdiff_t n) noexcept {
  for (std::ptrdiff_t i = 0; i < n; ++i) x[i] = round_to_bf16(x[i]);
}

#if defined(GROVE_DETAIL_BF16_VECTORS)

/// round_to_bf16 of each of 8 floats (bf16_round_bits' steps, lane by lane).
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX2_FMA __m256 round_to_bf16_avx2(__m256 x) noexcept {
  const __m256i bits = _mm256_castps_si256(x);
  const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), odd);
  const __m256i rounded = _mm256_and_si256(sum, _mm256_set1_epi32(static_cast<int>(0xffff0000u)));
  const __m256i quiet = _mm256_or_si256(_mm256_andnot_si256(magnitude, bits),
                                        _mm256_set1_epi32(0x7fc00000));  // sign | quiet NaN
  return _mm256_castsi256_ps(_mm256_blendv_epi8(rounded, quiet, nan));
}

// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized (GCC bug 105593) where it is inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

/// round_to_bf16 of each of 16 floats (bf16_round_bits' steps, lane by lane). Compiled for
/// AVX-512F alone, as the kernel that inlines it is.
GROVE_ALWAYS_INLINE GROVE_DETAIL_TARGET_AVX512F __m512 round_to_bf16_avx512(__m512 x) noexcept {
  const __m512i bits = _mm512_castps_si512(x);
  const __m512i magnitude = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i sum = _mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7fff)), odd);
  const __m512i rounded = _mm512_and_si512(sum, _mm512_set1_epi32(static_cast<int>(0xffff0000u)));
  const __m512i quiet = _mm512_or_si512(_mm512_andnot_si512(magnitude, bits),
                                        _mm512_set1_epi32(0x7fc00000));  // sign | quiet NaN
  return _mm512_castsi512_ps(_mm512_mask_mov_epi32(rounded, nan, quiet));
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif  // defined(GROVE_DETAIL_BF16_VECTORS)

}  // namespace grove::detail
