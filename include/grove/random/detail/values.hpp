// grove/random/detail/values.hpp: how grove::random turns random words into values as JAX does:
// a float in [0, 1) from a word's top bits, the uniform, normal, Gumbel, Bernoulli and randint
// transforms as sinks over runs of words, and JAX's permutation and argmax rules.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "grove/config.hpp"
#include "grove/random/arrays.hpp"
#include "grove/random/detail/layouts.hpp"
#include "grove/random/detail/math.hpp"
#include "grove/random/detail/math_avx2.hpp"
#include "grove/random/detail/math_avx512.hpp"
#include "grove/random/key.hpp"

namespace grove::random::detail {

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
    // The members as locals: stores through o could otherwise change them, as far as the
    // compiler knows, which keeps the loop from vectorising.
    const T lo = minval, width = span;
    T* o = out + first;
    for_each_in_block(m, [&](std::size_t l) GROVE_INLINE_LAMBDA {
      o[l] = scale_unit(unit_from_bits<T>(words[l]), lo, width);
    });
  }
};

// erf_inv_scaled (math.hpp) in the kernel variant for instruction set I: the AVX2 and AVX-512
// variants have float kernels of their own (math_avx2.hpp, math_avx512.hpp), with the same bits.
template <instruction_set I, class T>
GROVE_ALWAYS_INLINE void erf_inv_scaled_on(const T* x, T* out, std::size_t n, T scale) noexcept {
#if GROVE_DETAIL_DISPATCH
  if constexpr (std::is_same_v<T, float> && I == instruction_set::avx2_fma) {
    avx2::erf_inv_scaled(x, out, n, scale);
    return;
  }
  if constexpr (std::is_same_v<T, float> && I == instruction_set::avx512) {
    avx512::erf_inv_scaled(x, out, n, scale);
    return;
  }
#endif
  erf_inv_scaled(x, out, n, scale);
}

// sqrt(2) * erf_inv(uniform(minval, maxval)), as JAX's normal and truncated_normal compute it,
// clipped to [low, high] (truncated_normal's clip; infinite bounds for normal).
template <class T>
struct inverse_erf_values {
  T* out;
  T minval;
  T span;
  T low = -std::numeric_limits<T>::infinity();
  T high = std::numeric_limits<T>::infinity();
  // Called by each kernel variant with its instruction set (see deliver in layouts.hpp).
  template <instruction_set I>
  GROVE_ALWAYS_INLINE void operator()(std::uint64_t first, const bits_of<T>* words, std::size_t m,
                                      instruction_set_tag<I>) const noexcept {
    T u[block_size];
    // The members as locals, as in uniform_values.
    const T lo = minval, width = span, clip_low = low, clip_high = high;
    for_each_in_block(m, [&](std::size_t l) GROVE_INLINE_LAMBDA {
      u[l] = scale_unit(unit_from_bits<T>(words[l]), lo, width);
    });
    T* o = out + first;
    erf_inv_scaled_on<I>(u, o, m, sqrt2<T>);
    for_each_in_block(m, [&](std::size_t l) GROVE_INLINE_LAMBDA {
      const T clipped = o[l] < clip_low ? clip_low : o[l];
      o[l] = clipped > clip_high ? clip_high : clipped;
    });
  }
  GROVE_ALWAYS_INLINE void operator()(std::uint64_t first, const bits_of<T>* words,
                                      std::size_t m) const noexcept {
    (*this)(first, words, m, instruction_set_tag<instruction_set::baseline>{});
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
    for_each_in_block(m, [&](std::size_t l) GROVE_INLINE_LAMBDA {
      const T u = scale_unit(unit_from_bits<T>(words[l]), tiny, span);
      o[l] = -log_of(-log_of(u));
    });
  }
};

// uniform < p, written as Out: bool for bernoulli, a 0/1 mask of any arithmetic type for
// fill_bernoulli.
template <class T, class Out = bool>
struct bernoulli_values {
  Out* out;
  T p;
  GROVE_ALWAYS_INLINE void operator()(std::uint64_t first, const bits_of<T>* words,
                                      std::size_t m) const noexcept {
    Out* o = out + first;
    const T threshold = p;  // a local, as in uniform_values
    for_each_in_block(m, [&](std::size_t l) GROVE_INLINE_LAMBDA {
      o[l] = unit_from_bits<T>(words[l]) < threshold ? Out(1) : Out(0);
    });
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

}  // namespace grove::random::detail
