// grove/random/detail/split.hpp: the counters of JAX's two layouts and split(key, n) in each,
// with the portable threefry alone: a key needs no SIMD kernel (those come with the bulk
// generators, detail/layouts.hpp), so that naming a Key stays light.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "grove/config.hpp"
#include "grove/random/detail/math.hpp"  // block_size
#include "grove/random/detail/threefry.hpp"

namespace grove::random::detail {

// The counter of element base + offset in the partitionable layout: the index as a uint64, split
// into (hi, lo). Computed with 32-bit lanes and a carry, which vectorise twice as wide as 64-bit
// adds.
GROVE_ALWAYS_INLINE void partitionable_counter(std::uint64_t base, word offset, word& hi,
                                               word& lo) noexcept {
  const auto base_lo = static_cast<word>(base);
  lo = base_lo + offset;
  hi = static_cast<word>(base >> 32) + (lo < base_lo ? 1u : 0u);
}

inline void fill_partitionable_counters(std::uint64_t first, std::size_t m, word* hi, word* lo) {
  for (std::size_t l = 0; l < m; ++l)
    partitionable_counter(first, static_cast<word>(l), hi[l], lo[l]);
}

// JAX's legacy hash over the counts 0, 1, ..., count - 1 (count < 2^32): pad with one 0 if count is
// odd, pair the first half with the second half, and return all y0 followed by all y1. This gives
// the word at position `position` of that output.
inline word legacy_hash_word(key_words key, std::uint64_t count, std::uint64_t position) {
  const std::uint64_t half = (count + 1) / 2;
  if (position < half) {
    const std::uint64_t partner = half + position;
    return threefry_2x32(key, {static_cast<word>(position),
                               partner < count ? static_cast<word>(partner) : word{0}})[0];
  }
  return threefry_2x32(key, {static_cast<word>(position - half), static_cast<word>(position)})[1];
}

// split(key, n) in the legacy layout: the hash of the counts 0 .. 2n-1 (JAX builds them with a
// uint32 iota, so they wrap for n >= 2^31, and so do these); key i is (word 2i, word 2i + 1).
inline std::vector<key_words> legacy_split(key_words key, std::uint64_t n) {
  std::vector<key_words> keys(static_cast<std::size_t>(n));
  std::vector<word> out(static_cast<std::size_t>(2 * n));
  word x0[block_size], x1[block_size], y0[block_size], y1[block_size];
  for (std::uint64_t start = 0; start < n; start += block_size) {
    const std::size_t m = static_cast<std::size_t>(std::min<std::uint64_t>(block_size, n - start));
    for (std::size_t l = 0; l < m; ++l) {
      x0[l] = static_cast<word>(start + l);
      x1[l] = static_cast<word>(n + start + l);
    }
    threefry_2x32_lanes(key, x0, x1, y0, y1, m);
    std::copy(y0, y0 + m, out.begin() + static_cast<std::ptrdiff_t>(start));
    std::copy(y1, y1 + m, out.begin() + static_cast<std::ptrdiff_t>(n + start));
  }
  for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = {out[2 * i], out[2 * i + 1]};
  return keys;
}

// split(key, n) in the partitionable layout: key i = threefry_2x32(key, counter(i)), which is also
// fold_in(key, i) for i < 2^32.
inline std::vector<key_words> partitionable_split(key_words key, std::uint64_t n) {
  std::vector<key_words> keys(static_cast<std::size_t>(n));
  word x0[block_size], x1[block_size], y0[block_size], y1[block_size];
  for (std::uint64_t start = 0; start < n; start += block_size) {
    const std::size_t m = static_cast<std::size_t>(std::min<std::uint64_t>(block_size, n - start));
    fill_partitionable_counters(start, m, x0, x1);
    threefry_2x32_lanes(key, x0, x1, y0, y1, m);
    for (std::size_t l = 0; l < m; ++l) keys[static_cast<std::size_t>(start + l)] = {y0[l], y1[l]};
  }
  return keys;
}

}  // namespace grove::random::detail
