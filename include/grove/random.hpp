// grove::random: counter-based random numbers with explicit, splittable keys that reproduce
// jax.random (threefry2x32).
//
// A key is a value. The same key gives the same numbers on every machine, build and thread count,
// and those numbers are JAX's:
//
//   auto k = grove::random::key(0);                 // jax.random.key(0)
//   auto [k1, k2] = grove::random::split(k);        // jax.random.split(k)
//   Eigen::MatrixXf w = grove::random::normal(k1, 3, 4);   // jax.random.normal(k1, (3, 4))
//
// What is bit-exact with JAX, and what is not (docs/random.md says how each was checked):
//  * keys, split, fold_in, bits, uniform<float>, bernoulli<float> and randint are bit-exact in both
//    counter layouts (checked against values JAX published); permutation is JAX's algorithm;
//  * uniform computes `f * (maxval - minval) + minval` with a fused multiply-add, as XLA's CPU and
//    GPU back ends do (it matters only when maxval - minval is not a power of two);
//  * normal<float>, truncated_normal<float> and gumbel<float> use XLA's algorithms (Giles' erf_inv,
//    XLA's erf), but grove's log1p/log may differ from XLA's in the last bit, which moves a value
//    by up to a few ulp; every published JAX value checked is identical;
//  * T = double follows JAX's 64-bit path (64-bit random words, XLA's double erf_inv); its log1p,
//    erf and log are the platform's libm, so the last bit may differ from XLA's;
//  * categorical is argmax(gumbel + logits) as in JAX; it can differ only where two categories tie
//    to within an ulp.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "grove/detail/random_math.hpp"
#include "grove/detail/random_stream.hpp"
#include "grove/detail/threefry.hpp"

namespace grove::random {

using Index = Eigen::Index;

// JAX has two ways of assigning threefry counters to output elements. They agree on fold_in and
// differ for split and for every random array.
enum class key_layout : std::uint8_t {
  // jax_threefry_partitionable=True, the default since JAX 0.5.0 (January 2025).
  partitionable,
  // jax_threefry_partitionable=False, the default before JAX 0.5.0.
  legacy,
};

// A threefry2x32 key: two uint32 words and the counter layout that every function given this key
// follows. A plain value: copy it, compare it, store it; as a pytree it is a leaf.
struct Key {
  std::array<std::uint32_t, 2> words{};
  key_layout layout = key_layout::partitionable;

  friend constexpr bool operator==(const Key&, const Key&) = default;
};

// Prints the words, like JAX prints key_data: `Key([0, 42])`, or `Key([0, 42], legacy)`.
inline std::ostream& operator<<(std::ostream& os, const Key& k) {
  os << "Key([" << k.words[0] << ", " << k.words[1] << ']';
  if (k.layout == key_layout::legacy) os << ", legacy";
  return os << ')';
}

// How a large request may be spread over threads. This is a per-call argument rather than a
// global setting so that no hidden state can change what a call does; and the numbers never depend
// on it, only the speed.
struct options {
  // Threads a request may use, the calling thread included. 0: automatic (all hardware threads for
  // requests of at least 2^18 elements, the calling thread alone below). 1: the calling thread
  // only.
  int threads = 0;
  // Elements (or, for the legacy layout's 32-bit words, element pairs) per task; 0: 2^16.
  std::int64_t chunk = 0;
};

// Result types: a 1-D result is a column vector, a 2-D result a column-major matrix whose element
// (i, j) is JAX's result[i, j].
template <class T>
using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;

// The internals in grove/detail/ share this namespace.
namespace detail {

[[noreturn]] inline void fail(const char* function, const std::string& what) {
  throw std::invalid_argument(std::string("grove::random::") + function + ": " + what);
}

// A value as it appears in error messages: the shortest text that reads back as the same value.
template <class V>
std::string show(const V& value) {
  char buffer[64];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return error == std::errc{} ? std::string(buffer, end) : std::string("?");
}

inline void check_size(const char* function, const char* name, Index value) {
  if (value < 0) fail(function, std::string(name) + " (" + show(value) + ") is negative");
}

inline std::uint64_t element_count(const char* function, Index rows, Index cols) {
  check_size(function, "rows", rows);
  check_size(function, "cols", cols);
  if (cols != 0 && rows > std::numeric_limits<Index>::max() / cols) {
    fail(function, "rows (" + show(rows) + ") * cols (" + show(cols) + ") is too large");
  }
  return static_cast<std::uint64_t>(rows) * static_cast<std::uint64_t>(cols);
}

inline schedule schedule_of(const char* function, const options& opt) {
  if (opt.threads < 0) fail(function, "options.threads (" + show(opt.threads) + ") is negative");
  if (opt.chunk < 0) fail(function, "options.chunk (" + show(opt.chunk) + ") is negative");
  return {opt.threads, static_cast<std::uint64_t>(opt.chunk)};
}

template <class T>
constexpr void require_real() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "grove::random: T must be float (JAX's float32) or double (JAX's float64)");
}

template <class T>
void check_finite(const char* function, const char* name, T value) {
  if (!std::isfinite(value))
    fail(function, std::string(name) + " (" + show(value) + ") is not finite");
}

// The unsigned word type JAX draws for a float type, and how it turns one into [0, 1): keep the
// top nmant bits as the mantissa of a number in [1, 2), then subtract 1.
template <class T>
using bits_of = std::conditional_t<std::is_same_v<T, float>, std::uint32_t, std::uint64_t>;

template <class T>
GROVE_ALWAYS_INLINE T unit_from_bits(bits_of<T> b) noexcept {
  if constexpr (std::is_same_v<T, float>) {
    return std::bit_cast<float>((b >> 9) | 0x3F800000u) - 1.0f;
  } else {
    return std::bit_cast<double>((b >> 12) | 0x3FF0000000000000u) - 1.0;
  }
}

// max(minval, f * span + minval), the multiply-add fused (see random_math.hpp) and NaN
// propagating like lax.max.
template <class T>
GROVE_ALWAYS_INLINE T scale_unit(T f, T minval, T span) noexcept {
  const T value = std::fma(f, span, minval);
  return value < minval ? minval : value;
}

// float(np.sqrt(2)) or np.sqrt(2), the factor in JAX's normal and truncated_normal.
template <class T>
inline constexpr T sqrt2 = static_cast<T>(1.4142135623730951);

template <class Bits, class Sink>
void generate(const Key& k, std::uint64_t n, const schedule& plan, Sink& sink) {
  generate_words<Bits>(k.words, k.layout == key_layout::legacy, n, plan, sink);
}

// A 2-D result: JAX fills it in row-major order; grove returns column-major matrices. `fill`
// writes n = rows * cols values in row-major order to the pointer it is given.
template <class T, class Fill>
Matrix<T> row_major_result(Index rows, Index cols, Fill&& fill) {
  if (rows == 1 || cols == 1) {
    // One row or one column: row-major and column-major orders coincide.
    Matrix<T> result(rows, cols);
    fill(result.data());
    return result;
  }
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> staged(rows, cols);
  fill(staged.data());
  return Matrix<T>(staged);
}

// --- sinks: each turns a run of random words into output values ---------------------------------

template <class Bits>
struct copy_words {
  Bits* out;
  GROVE_ALWAYS_INLINE void operator()(std::uint64_t first, const Bits* words,
                                      std::size_t m) const noexcept {
    std::copy(words, words + m, out + first);
  }
};

template <class T>
struct uniform_values {
  T* out;
  T minval;
  T span;
  GROVE_ALWAYS_INLINE void operator()(std::uint64_t first, const bits_of<T>* words,
                                      std::size_t m) const noexcept {
    T* o = out + first;
    for (std::size_t l = 0; l < m; ++l)
      o[l] = scale_unit(unit_from_bits<T>(words[l]), minval, span);
  }
};

// sqrt(2) * erf_inv(uniform(minval, maxval)), as JAX's normal and truncated_normal compute it,
// clipped to [low, high] (truncated_normal's clip; infinite bounds for normal).
template <class T>
struct inverse_erf_values {
  T* out;
  T minval;
  T span;
  T low = -std::numeric_limits<T>::infinity();
  T high = std::numeric_limits<T>::infinity();
  GROVE_ALWAYS_INLINE void operator()(std::uint64_t first, const bits_of<T>* words,
                                      std::size_t m) const noexcept {
    T u[block_size];
    for (std::size_t l = 0; l < m; ++l)
      u[l] = scale_unit(unit_from_bits<T>(words[l]), minval, span);
    T* o = out + first;
    erf_inv_scaled(u, o, m, sqrt2<T>);
    for (std::size_t l = 0; l < m; ++l) {
      const T clipped = o[l] < low ? low : o[l];
      o[l] = clipped > high ? high : clipped;
    }
  }
};

template <class T>
struct gumbel_values {
  T* out;
  GROVE_ALWAYS_INLINE void operator()(std::uint64_t first, const bits_of<T>* words,
                                      std::size_t m) const noexcept {
    constexpr T tiny = std::numeric_limits<T>::min();
    constexpr T span = T(1) - tiny;  // rounds to 1
    T* o = out + first;
    for (std::size_t l = 0; l < m; ++l) {
      const T u = scale_unit(unit_from_bits<T>(words[l]), tiny, span);
      o[l] = -log_of(-log_of(u));
    }
  }
};

template <class T>
struct bernoulli_values {
  bool* out;
  T p;
  GROVE_ALWAYS_INLINE void operator()(std::uint64_t first, const bits_of<T>* words,
                                      std::size_t m) const noexcept {
    bool* o = out + first;
    for (std::size_t l = 0; l < m; ++l) o[l] = unit_from_bits<T>(words[l]) < p;
  }
};

// JAX's randint: two draws of nbits-wide words, high and low, combined modulo the span with the
// identity (a * b) % N = ((a % N) * (b % N)) % N, in wrapping unsigned arithmetic exactly as XLA
// evaluates it (the multiplications can wrap, and the result then carries JAX's bias).
template <class I>
struct randint_values {
  using U = std::make_unsigned_t<I>;
  I* out;
  const U* higher;
  U minval_bits;
  U span;
  U multiplier;
  GROVE_ALWAYS_INLINE void operator()(std::uint64_t first, const U* lower,
                                      std::size_t m) const noexcept {
    I* o = out + first;
    const U* h = higher + first;
    for (std::size_t l = 0; l < m; ++l) {
      const U offset = static_cast<U>(static_cast<U>(static_cast<U>(h[l] % span) * multiplier) +
                                      static_cast<U>(lower[l] % span)) %
                       span;
      o[l] = static_cast<I>(static_cast<U>(minval_bits + offset));
    }
  }
};

template <class I>
std::pair<std::make_unsigned_t<I>, std::make_unsigned_t<I>> randint_span(I low, I high) {
  using U = std::make_unsigned_t<I>;
  constexpr int nbits = std::numeric_limits<U>::digits;
  // span = maxval - minval in the unsigned type, 1 when maxval <= minval (unreachable here: the
  // public functions reject low >= high).
  const U span = high <= low ? U{1} : static_cast<U>(static_cast<U>(high) - static_cast<U>(low));
  U multiplier = static_cast<U>(static_cast<U>(U{1} << (nbits / 2)) % span);
  multiplier = static_cast<U>(static_cast<U>(multiplier * multiplier) % span);
  return {span, multiplier};
}

// Stable LSD radix sort of (keys, values) by the uint32 keys, as lax.sort_key_val(is_stable=True).
inline void stable_sort_by_key(std::vector<std::uint32_t>& keys,
                               std::vector<std::int32_t>& values) {
  const std::size_t n = keys.size();
  std::vector<std::uint32_t> keys_out(n);
  std::vector<std::int32_t> values_out(n);
  for (int shift = 0; shift < 32; shift += 8) {
    std::array<std::size_t, 257> start{};
    for (std::size_t i = 0; i < n; ++i) ++start[((keys[i] >> shift) & 0xFFu) + 1];
    for (std::size_t d = 0; d < 256; ++d) start[d + 1] += start[d];
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t to = start[(keys[i] >> shift) & 0xFFu]++;
      keys_out[to] = keys[i];
      values_out[to] = values[i];
    }
    keys.swap(keys_out);
    values.swap(values_out);
  }
}

// jnp.argmax's rule: the first maximum, and NaN counts as larger than everything.
template <class T>
inline bool beats(T candidate, T best) noexcept {
  if (std::isnan(best)) return false;
  return std::isnan(candidate) || candidate > best;
}

}  // namespace detail

// --- keys ----------------------------------------------------------------------------------------

// jax.random.key(seed) with the current (partitionable) layout: words (seed >> 32, seed & 2^32-1).
// A negative seed converted to uint64 gives JAX's 64-bit-mode answer (key(-1) is [2^32-1, 2^32-1]).
inline Key key(std::uint64_t seed) noexcept {
  return {{static_cast<std::uint32_t>(seed >> 32), static_cast<std::uint32_t>(seed)},
          key_layout::partitionable};
}

// The same key for the layout of JAX before 0.5.0, to reproduce numbers from older JAX code.
inline Key legacy_key(std::uint64_t seed) noexcept {
  Key k = key(seed);
  k.layout = key_layout::legacy;
  return k;
}

// jax.random.key_data(k).
inline std::array<std::uint32_t, 2> key_data(const Key& k) noexcept {
  return k.words;
}

// jax.random.wrap_key_data(words): a key from two raw words, e.g. saved key_data.
inline Key wrap_key_data(std::array<std::uint32_t, 2> words,
                         key_layout layout = key_layout::partitionable) noexcept {
  return {words, layout};
}

// jax.random.fold_in(k, data) = threefry2x32(k, (0, data)), the same in both layouts.
inline Key fold_in(const Key& k, std::uint32_t data) noexcept {
  return {detail::threefry_2x32(k.words, {0u, data}), k.layout};
}

// jax.random.split(k, n): n new keys of k's layout. In the partitionable layout,
// split(k, n)[i] == fold_in(k, i).
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

// jax.random.split(k), ready for `auto [a, b] = split(k);`.
inline std::array<Key, 2> split(const Key& k) {
  const auto keys = split(k, 2);
  return {keys[0], keys[1]};
}

// --- random bits ---------------------------------------------------------------------------------

namespace detail {
template <class U>
constexpr void require_unsigned() {
  static_assert(std::is_same_v<U, std::uint8_t> || std::is_same_v<U, std::uint16_t> ||
                    std::is_same_v<U, std::uint32_t> || std::is_same_v<U, std::uint64_t>,
                "grove::random::bits: U must be std::uint8_t, std::uint16_t, std::uint32_t or "
                "std::uint64_t");
}

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
}  // namespace detail

// jax.random.bits(k, (n,), dtype): uniformly random unsigned integers; U = std::uint32_t is JAX's
// default, std::uint64_t its 64-bit mode; std::uint8_t and std::uint16_t are also JAX's.
template <class U = std::uint32_t>
Vector<U> bits(const Key& k, Index n, const options& opt = {}) {
  detail::require_unsigned<U>();
  detail::check_size("bits", "n", n);
  const auto plan = detail::schedule_of("bits", opt);
  Vector<U> result(n);
  detail::fill_bits<U>(k, static_cast<std::uint64_t>(n), plan, result.data());
  return result;
}

// jax.random.bits(k, (rows, cols), dtype).
template <class U = std::uint32_t>
Matrix<U> bits(const Key& k, Index rows, Index cols, const options& opt = {}) {
  detail::require_unsigned<U>();
  const std::uint64_t n = detail::element_count("bits", rows, cols);
  const auto plan = detail::schedule_of("bits", opt);
  return detail::row_major_result<U>(rows, cols,
                                     [&](U* data) { detail::fill_bits<U>(k, n, plan, data); });
}

// --- uniform -------------------------------------------------------------------------------------

namespace detail {
template <class T>
void check_range(const char* function, T minval, T maxval) {
  check_finite(function, "minval", minval);
  check_finite(function, "maxval", maxval);
  if (minval > maxval) {
    fail(function, "minval (" + show(minval) + ") > maxval (" + show(maxval) + ")");
  }
}

template <class T>
void fill_uniform(const Key& k, std::uint64_t n, T minval, T maxval, const schedule& plan, T* out) {
  uniform_values<T> sink{out, minval, static_cast<T>(maxval - minval)};
  generate<bits_of<T>>(k, n, plan, sink);
}
}  // namespace detail

// jax.random.uniform(k, (n,), dtype, minval, maxval): values in [minval, maxval).
template <class T = float>
Vector<T> uniform(const Key& k, Index n, std::type_identity_t<T> minval,
                  std::type_identity_t<T> maxval, const options& opt = {}) {
  detail::require_real<T>();
  detail::check_size("uniform", "n", n);
  detail::check_range("uniform", minval, maxval);
  Vector<T> result(n);
  detail::fill_uniform<T>(k, static_cast<std::uint64_t>(n), minval, maxval,
                          detail::schedule_of("uniform", opt), result.data());
  return result;
}

// jax.random.uniform(k, (n,), dtype): values in [0, 1).
template <class T = float>
Vector<T> uniform(const Key& k, Index n, const options& opt = {}) {
  return uniform<T>(k, n, T(0), T(1), opt);
}

// jax.random.uniform(k, (rows, cols), dtype, minval, maxval).
template <class T = float>
Matrix<T> uniform(const Key& k, Index rows, Index cols, std::type_identity_t<T> minval,
                  std::type_identity_t<T> maxval, const options& opt = {}) {
  detail::require_real<T>();
  const std::uint64_t n = detail::element_count("uniform", rows, cols);
  detail::check_range("uniform", minval, maxval);
  const auto plan = detail::schedule_of("uniform", opt);
  return detail::row_major_result<T>(
      rows, cols, [&](T* data) { detail::fill_uniform<T>(k, n, minval, maxval, plan, data); });
}

// jax.random.uniform(k, (rows, cols), dtype).
template <class T = float>
Matrix<T> uniform(const Key& k, Index rows, Index cols, const options& opt = {}) {
  return uniform<T>(k, rows, cols, T(0), T(1), opt);
}

// --- normal and truncated normal -----------------------------------------------------------------

namespace detail {
template <class T>
void fill_normal(const Key& k, std::uint64_t n, const schedule& plan, T* out) {
  // u in [nextafter(-1, 0), 1): the width 1 - nextafter(-1, 0) rounds to exactly 2.
  constexpr T lo = -1 + std::numeric_limits<T>::epsilon() / 2;
  inverse_erf_values<T> sink{out, lo, static_cast<T>(T(1) - lo)};
  generate<bits_of<T>>(k, n, plan, sink);
}

template <class T>
void check_bounds(const char* function, T lower, T upper) {
  if (std::isnan(lower)) fail(function, "lower (" + show(lower) + ") is NaN");
  if (std::isnan(upper)) fail(function, "upper (" + show(upper) + ") is NaN");
  if (lower >= upper) {
    fail(function, "lower (" + show(lower) + ") >= upper (" + show(upper) + ")");
  }
}

template <class T>
void fill_truncated_normal(const Key& k, T lower, T upper, std::uint64_t n, const schedule& plan,
                           T* out) {
  const T a = erf_of(static_cast<T>(lower / sqrt2<T>));
  const T b = erf_of(static_cast<T>(upper / sqrt2<T>));
  // Clipped to the open interval (lower, upper): rounding, or u == a, can land on or past a bound.
  inverse_erf_values<T> sink{out, a, static_cast<T>(b - a),
                             std::nextafter(lower, std::numeric_limits<T>::infinity()),
                             std::nextafter(upper, -std::numeric_limits<T>::infinity())};
  generate<bits_of<T>>(k, n, plan, sink);
}
}  // namespace detail

// jax.random.normal(k, (n,), dtype): standard normal values.
template <class T = float>
Vector<T> normal(const Key& k, Index n, const options& opt = {}) {
  detail::require_real<T>();
  detail::check_size("normal", "n", n);
  Vector<T> result(n);
  detail::fill_normal<T>(k, static_cast<std::uint64_t>(n), detail::schedule_of("normal", opt),
                         result.data());
  return result;
}

// jax.random.normal(k, (rows, cols), dtype).
template <class T = float>
Matrix<T> normal(const Key& k, Index rows, Index cols, const options& opt = {}) {
  detail::require_real<T>();
  const std::uint64_t n = detail::element_count("normal", rows, cols);
  const auto plan = detail::schedule_of("normal", opt);
  return detail::row_major_result<T>(rows, cols,
                                     [&](T* data) { detail::fill_normal<T>(k, n, plan, data); });
}

// jax.random.truncated_normal(k, lower, upper, (n,), dtype): standard normal values conditioned on
// lower < x < upper (infinite bounds allowed).
template <class T = float>
Vector<T> truncated_normal(const Key& k, std::type_identity_t<T> lower,
                           std::type_identity_t<T> upper, Index n, const options& opt = {}) {
  detail::require_real<T>();
  detail::check_size("truncated_normal", "n", n);
  detail::check_bounds("truncated_normal", lower, upper);
  Vector<T> result(n);
  detail::fill_truncated_normal<T>(k, lower, upper, static_cast<std::uint64_t>(n),
                                   detail::schedule_of("truncated_normal", opt), result.data());
  return result;
}

// jax.random.truncated_normal(k, lower, upper, (rows, cols), dtype).
template <class T = float>
Matrix<T> truncated_normal(const Key& k, std::type_identity_t<T> lower,
                           std::type_identity_t<T> upper, Index rows, Index cols,
                           const options& opt = {}) {
  detail::require_real<T>();
  const std::uint64_t n = detail::element_count("truncated_normal", rows, cols);
  detail::check_bounds("truncated_normal", lower, upper);
  const auto plan = detail::schedule_of("truncated_normal", opt);
  return detail::row_major_result<T>(rows, cols, [&](T* data) {
    detail::fill_truncated_normal<T>(k, lower, upper, n, plan, data);
  });
}

// --- gumbel, bernoulli ---------------------------------------------------------------------------

// jax.random.gumbel(k, (n,), dtype) (mode "low", JAX's default):
// -log(-log(uniform(k, (n,), dtype, finfo.tiny, 1))).
template <class T = float>
Vector<T> gumbel(const Key& k, Index n, const options& opt = {}) {
  detail::require_real<T>();
  detail::check_size("gumbel", "n", n);
  Vector<T> result(n);
  detail::gumbel_values<T> sink{result.data()};
  detail::generate<detail::bits_of<T>>(k, static_cast<std::uint64_t>(n),
                                       detail::schedule_of("gumbel", opt), sink);
  return result;
}

// jax.random.gumbel(k, (rows, cols), dtype).
template <class T = float>
Matrix<T> gumbel(const Key& k, Index rows, Index cols, const options& opt = {}) {
  detail::require_real<T>();
  const std::uint64_t n = detail::element_count("gumbel", rows, cols);
  const auto plan = detail::schedule_of("gumbel", opt);
  return detail::row_major_result<T>(rows, cols, [&](T* data) {
    detail::gumbel_values<T> sink{data};
    detail::generate<detail::bits_of<T>>(k, n, plan, sink);
  });
}

namespace detail {
template <class T>
void check_probability(T p) {
  if (!(p >= T(0) && p <= T(1))) fail("bernoulli", "p (" + show(p) + ") is outside [0, 1]");
}
}  // namespace detail

// jax.random.bernoulli(k, p, (n,)): uniform(k, (n,), T) < p, with T = float as for a Python float p
// in JAX's default 32-bit mode.
template <class T = float>
Vector<bool> bernoulli(const Key& k, std::type_identity_t<T> p, Index n, const options& opt = {}) {
  detail::require_real<T>();
  detail::check_size("bernoulli", "n", n);
  detail::check_probability(p);
  Vector<bool> result(n);
  detail::bernoulli_values<T> sink{result.data(), p};
  detail::generate<detail::bits_of<T>>(k, static_cast<std::uint64_t>(n),
                                       detail::schedule_of("bernoulli", opt), sink);
  return result;
}

// jax.random.bernoulli(k, p, (rows, cols)).
template <class T = float>
Matrix<bool> bernoulli(const Key& k, std::type_identity_t<T> p, Index rows, Index cols,
                       const options& opt = {}) {
  detail::require_real<T>();
  const std::uint64_t n = detail::element_count("bernoulli", rows, cols);
  detail::check_probability(p);
  const auto plan = detail::schedule_of("bernoulli", opt);
  return detail::row_major_result<bool>(rows, cols, [&](bool* data) {
    detail::bernoulli_values<T> sink{data, p};
    detail::generate<detail::bits_of<T>>(k, n, plan, sink);
  });
}

// --- integers ------------------------------------------------------------------------------------

namespace detail {
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

template <class I>
constexpr void require_integer() {
  static_assert(std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>,
                "grove::random::randint: I must be std::int32_t (JAX's default int) or "
                "std::int64_t (JAX's 64-bit mode)");
}
}  // namespace detail

// jax.random.randint(k, (n,), low, high, dtype): integers in [low, high). I = std::int32_t is
// JAX's default dtype; std::int64_t its 64-bit mode.
template <class I = std::int32_t>
Vector<I> randint(const Key& k, Index n, std::type_identity_t<I> low, std::type_identity_t<I> high,
                  const options& opt = {}) {
  detail::require_integer<I>();
  detail::check_size("randint", "n", n);
  const auto plan = detail::schedule_of("randint", opt);
  Vector<I> result(n);
  detail::fill_randint<I>(k, static_cast<std::uint64_t>(n), low, high, plan, result.data());
  return result;
}

// jax.random.randint(k, (rows, cols), low, high, dtype).
template <class I = std::int32_t>
Matrix<I> randint(const Key& k, Index rows, Index cols, std::type_identity_t<I> low,
                  std::type_identity_t<I> high, const options& opt = {}) {
  detail::require_integer<I>();
  const std::uint64_t n = detail::element_count("randint", rows, cols);
  const auto plan = detail::schedule_of("randint", opt);
  if (low >= high) {
    detail::fail("randint", "low (" + detail::show(low) + ") >= high (" + detail::show(high) + ")");
  }
  return detail::row_major_result<I>(
      rows, cols, [&](I* data) { detail::fill_randint<I>(k, n, low, high, plan, data); });
}

// jax.random.permutation(k, n): a random ordering of 0 .. n-1 (int32, as in JAX), e.g. to shuffle
// the columns of a data matrix with X(Eigen::all, p). JAX's algorithm exactly:
// ceil(3 ln(n) / ln(2^32 - 1)) rounds, each a stable sort by fresh 32-bit random keys drawn with a
// key split off the previous one.
inline Vector<std::int32_t> permutation(const Key& k, Index n, const options& opt = {}) {
  detail::check_size("permutation", "n", n);
  if (n > std::numeric_limits<std::int32_t>::max()) {
    detail::fail("permutation", "n (" + detail::show(n) + ") does not fit JAX's int32 arange");
  }
  const auto plan = detail::schedule_of("permutation", opt);
  const auto count = static_cast<std::size_t>(n);
  std::vector<std::int32_t> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<std::int32_t>(i);
  const int rounds = static_cast<int>(std::ceil(
      3.0 * std::log(static_cast<double>(std::max<Index>(1, n))) / std::log(4294967295.0)));
  std::vector<std::uint32_t> sort_keys(count);
  Key current = k;
  for (int round = 0; round < rounds; ++round) {
    const auto [next, subkey] = split(current);
    current = next;
    detail::copy_words<std::uint32_t> sink{sort_keys.data()};
    detail::generate<std::uint32_t>(subkey, count, plan, sink);
    detail::stable_sort_by_key(sort_keys, values);
  }
  Vector<std::int32_t> result(n);
  std::copy(values.begin(), values.end(), result.data());
  return result;
}

// --- filling storage the caller owns ------------------------------------------------------------
//
// fill_* write exactly what the functions above return into storage the caller owns, without
// allocating (a training step can draw its noise into the same buffer every time). out.size()
// values in JAX's row-major order: fill a vector to get f(k, n), or a row-major matrix's data() to
// get f(k, rows, cols). Example: grove::random::fill_normal(k, std::span(buffer)).

// The values of bits<U>(k, out.size()).
template <class U>
void fill_bits(const Key& k, std::span<U> out, const options& opt = {}) {
  detail::require_unsigned<U>();
  detail::fill_bits<U>(k, out.size(), detail::schedule_of("fill_bits", opt), out.data());
}

// The values of uniform<T>(k, out.size(), minval, maxval).
template <class T>
void fill_uniform(const Key& k, std::span<T> out, std::type_identity_t<T> minval,
                  std::type_identity_t<T> maxval, const options& opt = {}) {
  detail::require_real<T>();
  detail::check_range("fill_uniform", minval, maxval);
  detail::fill_uniform<T>(k, out.size(), minval, maxval, detail::schedule_of("fill_uniform", opt),
                          out.data());
}

// The values of uniform<T>(k, out.size()).
template <class T>
void fill_uniform(const Key& k, std::span<T> out, const options& opt = {}) {
  fill_uniform<T>(k, out, T(0), T(1), opt);
}

// The values of normal<T>(k, out.size()).
template <class T>
void fill_normal(const Key& k, std::span<T> out, const options& opt = {}) {
  detail::require_real<T>();
  detail::fill_normal<T>(k, out.size(), detail::schedule_of("fill_normal", opt), out.data());
}

// The values of truncated_normal<T>(k, lower, upper, out.size()).
template <class T>
void fill_truncated_normal(const Key& k, std::type_identity_t<T> lower,
                           std::type_identity_t<T> upper, std::span<T> out,
                           const options& opt = {}) {
  detail::require_real<T>();
  detail::check_bounds("fill_truncated_normal", lower, upper);
  detail::fill_truncated_normal<T>(k, lower, upper, out.size(),
                                   detail::schedule_of("fill_truncated_normal", opt), out.data());
}

// --- categorical ---------------------------------------------------------------------------------

// jax.random.categorical(k, logits) for 1-D logits: argmax(gumbel(k, logits.shape) + logits), an
// index drawn with probabilities softmax(logits).
template <class T>
std::int32_t categorical(const Key& k, const Vector<T>& logits, const options& opt = {}) {
  detail::require_real<T>();
  if (logits.size() == 0) detail::fail("categorical", "logits is empty");
  const Vector<T> noise = gumbel<T>(k, logits.size(), opt);
  Index best = 0;
  T best_value = noise[0] + logits[0];
  for (Index i = 1; i < logits.size(); ++i) {
    const T value = noise[i] + logits[i];
    if (detail::beats(value, best_value)) {
      best = i;
      best_value = value;
    }
  }
  return static_cast<std::int32_t>(best);
}

// jax.random.categorical(k, logits, axis) for 2-D logits of shape (rows, cols): one draw per row
// (axis = 1 or -1, JAX's default) or per column (axis = 0 or -2). The Gumbel noise has the logits'
// shape, in JAX's row-major order.
template <class T>
Vector<std::int32_t> categorical(const Key& k, const Matrix<T>& logits, int axis = -1,
                                 const options& opt = {}) {
  detail::require_real<T>();
  if (axis < -2 || axis > 1)
    detail::fail("categorical", "axis (" + detail::show(axis) + ") is not 0, 1, -1 or -2");
  const bool per_row = axis == 1 || axis == -1;
  const Index categories = per_row ? logits.cols() : logits.rows();
  const Index draws = per_row ? logits.rows() : logits.cols();
  if (categories == 0)
    detail::fail("categorical", "logits has no categories along axis " + detail::show(axis));
  const Matrix<T> noise = gumbel<T>(k, logits.rows(), logits.cols(), opt);
  Vector<std::int32_t> result(draws);
  for (Index d = 0; d < draws; ++d) {
    auto value = [&](Index c) {
      return per_row ? noise(d, c) + logits(d, c) : noise(c, d) + logits(c, d);
    };
    Index best = 0;
    T best_value = value(0);
    for (Index c = 1; c < categories; ++c) {
      const T v = value(c);
      if (detail::beats(v, best_value)) {
        best = c;
        best_value = v;
      }
    }
    result[d] = static_cast<std::int32_t>(best);
  }
  return result;
}

}  // namespace grove::random
