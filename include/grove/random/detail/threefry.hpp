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

// The key schedule: before the rounds and after each group of four, injection i (0 to 5) adds
// (k[i % 3], k[(i + 1) % 3] + i) to the pair, where k = (key[0], key[1], key_parity(key)). Every
// form of the rounds (here and threefry_avx2.hpp) takes its injections from this one table.
struct key_schedule {
  word x0[6];
  word x1[6];
};

constexpr key_schedule schedule_of(key_words key) noexcept {
  const word k[3] = {key[0], key[1], key_parity(key[0], key[1])};
  key_schedule s{};
  for (word i = 0; i < 6; ++i) {
    s.x0[i] = k[i % 3];
    s.x1[i] = k[(i + 1) % 3] + i;
  }
  return s;
}

// One counter through all 20 rounds: five groups of four rounds between the six key injections.
// Kept as straight-line code on two scalars so that a loop over many counters around it is
// vectorised across counters (see threefry_2x32_lanes).
GROVE_ALWAYS_INLINE constexpr void threefry_2x32_rounds(const key_schedule& k, word& x0,
                                                        word& x1) noexcept {
  x0 += k.x0[0];
  x1 += k.x1[0];
  four_rounds<13, 15, 26, 6>(x0, x1);
  x0 += k.x0[1];
  x1 += k.x1[1];
  four_rounds<17, 29, 16, 24>(x0, x1);
  x0 += k.x0[2];
  x1 += k.x1[2];
  four_rounds<13, 15, 26, 6>(x0, x1);
  x0 += k.x0[3];
  x1 += k.x1[3];
  four_rounds<17, 29, 16, 24>(x0, x1);
  x0 += k.x0[4];
  x1 += k.x1[4];
  four_rounds<13, 15, 26, 6>(x0, x1);
  x0 += k.x0[5];
  x1 += k.x1[5];
}

// threefry_2x32(key, counter) for a single counter.
constexpr key_words threefry_2x32(key_words key, key_words counter) noexcept {
  word x0 = counter[0];
  word x1 = counter[1];
  threefry_2x32_rounds(schedule_of(key), x0, x1);
  return {x0, x1};
}

// (y0[i], y1[i]) = threefry_2x32(key, (x0[i], x1[i])) for i < n. Every counter is independent, so
// the compiler turns this loop into SIMD code across counters: 16 per instruction with AVX-512,
// 8 with AVX2, 4 with SSE2/NEON, and plain scalar code where there is no SIMD. The arrays must not
// overlap (the callers pass distinct local buffers).
inline void threefry_2x32_lanes(key_words key, const word* GROVE_RESTRICT x0,
                                const word* GROVE_RESTRICT x1, word* GROVE_RESTRICT y0,
                                word* GROVE_RESTRICT y1, std::size_t n) noexcept {
  const key_schedule k = schedule_of(key);
  for (std::size_t i = 0; i < n; ++i) {
    word a = x0[i];
    word b = x1[i];
    threefry_2x32_rounds(k, a, b);
    y0[i] = a;
    y1[i] = b;
  }
}

}  // namespace grove::random::detail
