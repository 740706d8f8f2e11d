// grove/random/detail/fill.hpp: each distribution's n values in JAX's order, written to memory
// that the public functions (random/distributions.hpp, random/fill.hpp) provide.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "grove/random/detail/checks.hpp"
#include "grove/random/detail/values.hpp"
#include "grove/random/key.hpp"

namespace grove::random::detail {

// n random U values in JAX's order. 8- and 16-bit values come from 32-bit words: in the
// partitionable layout, the low bits of element i's word; in the legacy layout, the words are
// unpacked like numpy's view (word j holds elements j*k .. j*k + k-1, lowest bits first).
template <class U>
void fill_bits(const Key& k, std::uint64_t n, const schedule& plan, U* out) {
  if constexpr (sizeof(U) >= 4) {
    copy_words<U> sink{out};
    generate<U>(k, n, plan, sink);
  } else {
    constexpr std::uint64_t per_word = 4 / sizeof(U);
    const bool legacy = k.layout == key_layout::legacy;
    const std::uint64_t words = legacy ? (n + per_word - 1) / per_word : n;
    std::vector<std::uint32_t> buffer(static_cast<std::size_t>(words));
    copy_words<std::uint32_t> sink{buffer.data()};
    generate<std::uint32_t>(k, words, plan, sink);
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint32_t w =
          legacy ? buffer[i / per_word] >> (8 * sizeof(U) * (i % per_word)) : buffer[i];
      out[i] = static_cast<U>(w);
    }
  }
}

template <class T>
void fill_uniform(const Key& k, std::uint64_t n, T minval, T maxval, const schedule& plan, T* out) {
  uniform_values<T> sink{out, minval, static_cast<T>(maxval - minval)};
  generate<bits_of<T>>(k, n, plan, sink);
}

template <class T>
void fill_normal(const Key& k, std::uint64_t n, const schedule& plan, T* out) {
  // u in [nextafter(-1, 0), 1): the width 1 - nextafter(-1, 0) rounds to exactly 2.
  constexpr T lo = -1 + std::numeric_limits<T>::epsilon() / 2;
  inverse_erf_values<T> sink{out, lo, static_cast<T>(T(1) - lo)};
  generate<bits_of<T>>(k, n, plan, sink);
}

template <class T>
void fill_truncated_normal(const Key& k, T lower, T upper, std::uint64_t n, const schedule& plan,
                           T* out) {
  // XLA's algebraic simplifier turns JAX's lower / sqrt2 into lower * (1 / sqrt2), the reciprocal
  // rounded to T; so does this (x / sqrt2 and x * (1 / sqrt2) differ in the last bit for some x,
  // e.g. -1.5f, and an erf one ulp off near +-1 moves the tail values by many ulps).
  constexpr T inv_sqrt2 = T(1) / sqrt2<T>;
  const T a = erf_of(static_cast<T>(lower * inv_sqrt2));
  const T b = erf_of(static_cast<T>(upper * inv_sqrt2));
  // Clipped to the open interval (lower, upper): rounding, or u == a, can land on or past a bound.
  inverse_erf_values<T> sink{out, a, static_cast<T>(b - a),
                             std::nextafter(lower, std::numeric_limits<T>::infinity()),
                             std::nextafter(upper, -std::numeric_limits<T>::infinity())};
  generate<bits_of<T>>(k, n, plan, sink);
}

template <class I>
void fill_randint(const Key& k, std::uint64_t n, I low, I high, const schedule& plan, I* out) {
  using U = std::make_unsigned_t<I>;
  if (low >= high) fail("randint", "low (" + show(low) + ") >= high (" + show(high) + ")");
  const auto [k1, k2] = split(k);
  std::vector<U> higher(static_cast<std::size_t>(n));
  copy_words<U> high_sink{higher.data()};
  generate<U>(k1, n, plan, high_sink);
  const auto [span, multiplier] = randint_span(low, high);
  randint_values<I> sink{out, higher.data(), static_cast<U>(low), span, multiplier};
  generate<U>(k2, n, plan, sink);
}

}  // namespace grove::random::detail
