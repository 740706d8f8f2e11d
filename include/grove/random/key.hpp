// grove/random/key.hpp: threefry2x32 keys as JAX has them: key(seed), split, fold_in, key_data,
// in both of JAX's counter layouts.
#pragma once

#include <array>
#include <cstdint>
#include <ostream>
#include <vector>

#include "grove/random/arrays.hpp"
#include "grove/random/detail/checks.hpp"
#include "grove/random/detail/split.hpp"
#include "grove/random/detail/threefry.hpp"

namespace grove::random {

/// JAX has two ways of assigning threefry counters to output elements. They agree on fold_in and
/// differ for split and for every random array.
enum class key_layout : std::uint8_t {
  /// jax_threefry_partitionable=True, the default since JAX 0.5.0 (January 2025).
  partitionable,
  /// jax_threefry_partitionable=False, the default before JAX 0.5.0.
  legacy,
};

/// A threefry2x32 key: two uint32 words and the counter layout that every function given this key
/// follows. A plain value: copy it, compare it, store it; as a pytree it is a leaf.
struct Key {
  std::array<std::uint32_t, 2> words{};
  key_layout layout = key_layout::partitionable;

  friend constexpr bool operator==(const Key&, const Key&) = default;
};

/// Prints the words, like JAX prints key_data: `Key([0, 42])`, or `Key([0, 42], legacy)`.
inline std::ostream& operator<<(std::ostream& os, const Key& k) {
  os << "Key([" << k.words[0] << ", " << k.words[1] << ']';
  if (k.layout == key_layout::legacy) os << ", legacy";
  return os << ')';
}

// --- keys ----------------------------------------------------------------------------------------

/// jax.random.key(seed) with the current (partitionable) layout: words (seed >> 32, seed & 2^32-1).
/// A negative seed converted to uint64 gives JAX's 64-bit-mode answer (key(-1) is [2^32-1,
/// 2^32-1]).
inline Key key(std::uint64_t seed) noexcept {
  return {{static_cast<std::uint32_t>(seed >> 32), static_cast<std::uint32_t>(seed)},
          key_layout::partitionable};
}

/// The same key for the layout of JAX before 0.5.0, to reproduce numbers from older JAX code.
inline Key legacy_key(std::uint64_t seed) noexcept {
  Key k = key(seed);
  k.layout = key_layout::legacy;
  return k;
}

/// jax.random.key_data(k).
inline std::array<std::uint32_t, 2> key_data(const Key& k) noexcept {
  return k.words;
}

/// jax.random.wrap_key_data(words): a key from two raw words, e.g. saved key_data.
inline Key wrap_key_data(std::array<std::uint32_t, 2> words,
                         key_layout layout = key_layout::partitionable) noexcept {
  return {words, layout};
}

/// jax.random.fold_in(k, data) = threefry2x32(k, (0, data)), the same in both layouts.
inline Key fold_in(const Key& k, std::uint32_t data) noexcept {
  return {detail::threefry_2x32(k.words, {0u, data}), k.layout};
}

/// jax.random.split(k, n): n new keys of k's layout. In the partitionable layout,
/// split(k, n)[i] == fold_in(k, i).
inline std::vector<Key> split(const Key& k, Index n) {
  detail::check_size("split", "n", n);
  const auto count = static_cast<std::uint64_t>(n);
  const auto words = k.layout == key_layout::legacy ? detail::legacy_split(k.words, count)
                                                    : detail::partitionable_split(k.words, count);
  std::vector<Key> keys;
  keys.reserve(words.size());
  for (const auto& w : words) keys.push_back({w, k.layout});
  return keys;
}

/// jax.random.split(k), ready for `auto [a, b] = split(k);`.
inline std::array<Key, 2> split(const Key& k) {
  const auto keys = split(k, 2);
  return {keys[0], keys[1]};
}

}  // namespace grove::random
