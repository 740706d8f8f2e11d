// grove/random/detail/threefry.hpp: the threefry2x32 block function with 20 rounds (Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC'11), as JAX uses it: the same rotations, key
// schedule and round count as Random123's threefry2x32_R(20, ...).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "grove/config.hpp"

namespace grove::random::detail {

using word = std::uint32_t;
using key_words = std::array<word, 2>;

// Rotation by a compile-time amount: the shift pair below is recognised by GCC, Clang and MSVC as a
// rotate, which becomes one vprold per 16 counters with AVX-512.
template <int R>
GROVE_ALWAYS_INLINE constexpr word rotl(word x) noexcept {
  static_assert(R > 0 && R < 32);
  return static_cast<word>(x << R) | static_cast<word>(x >> (32 - R));
}

// The second key word of the schedule; 0x1BD11BDA is Threefish's key-schedule parity constant.
constexpr word key_parity(word k0, word k1) noexcept {
  return k0 ^ k1 ^ 0x1BD11BDAu;
}

// One round of the Threefish mix function on the pair (x0, x1).
template <int R>
GROVE_ALWAYS_INLINE constexpr void mix(word& x0, word& x1) noexcept {
  x0 += x1;
  x1 = rotl<R>(x1);
  x1 ^= x0;
}

// Four rounds with the rotation amounts of one half of the schedule.
template <int R0, int R1, int R2, int R3>
GROVE_ALWAYS_INLINE constexpr void four_rounds(word& x0, word& x1) noexcept {
  mix<R0>(x0, x1);
  mix<R1>(x0, x1);
  mix<R2>(x0, x1);
  mix<R3>(x0, x1);
}

// One counter through all 20 rounds: five groups of four rounds, each group followed by a key
// injection. Kept as straight-line code on two scalars so that a loop over many counters around it
// is vectorised across counters (see threefry_2x32_lanes).
GROVE_ALWAYS_INLINE constexpr void threefry_2x32_rounds(word k0, word k1, word k2, word& x0,
                                                        word& x1) noexcept {
  x0 += k0;
  x1 += k1;
  four_rounds<13, 15, 26, 6>(x0, x1);
  x0 += k1;
  x1 += k2 + 1u;
  four_rounds<17, 29, 16, 24>(x0, x1);
  x0 += k2;
  x1 += k0 + 2u;
  four_rounds<13, 15, 26, 6>(x0, x1);
  x0 += k0;
  x1 += k1 + 3u;
  four_rounds<17, 29, 16, 24>(x0, x1);
  x0 += k1;
  x1 += k2 + 4u;
  four_rounds<13, 15, 26, 6>(x0, x1);
  x0 += k2;
  x1 += k0 + 5u;
}

// threefry_2x32(key, counter) for a single counter.
constexpr key_words threefry_2x32(key_words key, key_words counter) noexcept {
  word x0 = counter[0];
  word x1 = counter[1];
  threefry_2x32_rounds(key[0], key[1], key_parity(key[0], key[1]), x0, x1);
  return {x0, x1};
}

// (y0[i], y1[i]) = threefry_2x32(key, (x0[i], x1[i])) for i < n. Every counter is independent, so
// the compiler turns this loop into SIMD code across counters: 16 per instruction with AVX-512,
// 8 with AVX2, 4 with SSE2/NEON, and plain scalar code where there is no SIMD. The arrays must not
// overlap (the callers pass distinct local buffers).
inline void threefry_2x32_lanes(key_words key, const word* GROVE_RESTRICT x0,
                                const word* GROVE_RESTRICT x1, word* GROVE_RESTRICT y0,
                                word* GROVE_RESTRICT y1, std::size_t n) noexcept {
  const word k0 = key[0];
  const word k1 = key[1];
  const word k2 = key_parity(k0, k1);
  for (std::size_t i = 0; i < n; ++i) {
    word a = x0[i];
    word b = x1[i];
    threefry_2x32_rounds(k0, k1, k2, a, b);
    y0[i] = a;
    y1[i] = b;
  }
}

}  // namespace grove::random::detail
