// grove/random/distributions.hpp: jax.random's distributions as Eigen vectors and matrices:
// bits, uniform, normal, truncated_normal, gumbel, bernoulli, randint, permutation, categorical.
// Each throws grove::argument_error (message `grove::random::FUNCTION: ...`) for an argument JAX
// would reject: a negative size, a range or bound that is empty or not finite, a probability
// outside [0, 1], negative thread_options.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "grove/random/arrays.hpp"
#include "grove/random/detail/checks.hpp"
#include "grove/random/detail/fill.hpp"
#include "grove/random/detail/values.hpp"
#include "grove/random/key.hpp"
#include "grove/random/thread_options.hpp"

namespace grove::random {

// --- random bits ---------------------------------------------------------------------------------

/// jax.random.bits(k, (n,), dtype): uniformly random unsigned integers; U = std::uint32_t is JAX's
/// default, std::uint64_t its 64-bit mode; std::uint8_t and std::uint16_t are also JAX's.
template <class U = std::uint32_t>
Vector<U> bits(const Key& k, Index n, const thread_options& opt = {}) {
  detail::require_unsigned<U>();
  detail::check_size("bits", "n", n);
  const auto plan = detail::schedule_of("bits", opt);
  Vector<U> result(n);
  detail::fill_bits<U>(k, static_cast<std::uint64_t>(n), plan, result.data());
  return result;
}

/// jax.random.bits(k, (rows, cols), dtype).
template <class U = std::uint32_t>
Matrix<U> bits(const Key& k, Index rows, Index cols, const thread_options& opt = {}) {
  detail::require_unsigned<U>();
  const std::uint64_t n = detail::element_count("bits", rows, cols);
  const auto plan = detail::schedule_of("bits", opt);
  return detail::row_major_result<U>(rows, cols,
                                     [&](U* data) { detail::fill_bits<U>(k, n, plan, data); });
}

// --- uniform -------------------------------------------------------------------------------------

/// jax.random.uniform(k, (n,), dtype, minval, maxval): values in [minval, maxval).
template <class T = float>
Vector<T> uniform(const Key& k, Index n, std::type_identity_t<T> minval,
                  std::type_identity_t<T> maxval, const thread_options& opt = {}) {
  detail::require_real<T>();
  detail::check_size("uniform", "n", n);
  detail::check_range("uniform", minval, maxval);
  Vector<T> result(n);
  detail::fill_uniform<T>(k, static_cast<std::uint64_t>(n), minval, maxval,
                          detail::schedule_of("uniform", opt), result.data());
  return result;
}

/// jax.random.uniform(k, (n,), dtype): values in [0, 1).
template <class T = float>
Vector<T> uniform(const Key& k, Index n, const thread_options& opt = {}) {
  return uniform<T>(k, n, T(0), T(1), opt);
}

/// jax.random.uniform(k, (rows, cols), dtype, minval, maxval).
template <class T = float>
Matrix<T> uniform(const Key& k, Index rows, Index cols, std::type_identity_t<T> minval,
                  std::type_identity_t<T> maxval, const thread_options& opt = {}) {
  detail::require_real<T>();
  const std::uint64_t n = detail::element_count("uniform", rows, cols);
  detail::check_range("uniform", minval, maxval);
  const auto plan = detail::schedule_of("uniform", opt);
  return detail::row_major_result<T>(
      rows, cols, [&](T* data) { detail::fill_uniform<T>(k, n, minval, maxval, plan, data); });
}

/// jax.random.uniform(k, (rows, cols), dtype).
template <class T = float>
Matrix<T> uniform(const Key& k, Index rows, Index cols, const thread_options& opt = {}) {
  return uniform<T>(k, rows, cols, T(0), T(1), opt);
}

// --- normal and truncated normal -----------------------------------------------------------------

/// jax.random.normal(k, (n,), dtype): standard normal values.
template <class T = float>
Vector<T> normal(const Key& k, Index n, const thread_options& opt = {}) {
  detail::require_real<T>();
  detail::check_size("normal", "n", n);
  Vector<T> result(n);
  detail::fill_normal<T>(k, static_cast<std::uint64_t>(n), detail::schedule_of("normal", opt),
                         result.data());
  return result;
}

/// jax.random.normal(k, (rows, cols), dtype).
template <class T = float>
Matrix<T> normal(const Key& k, Index rows, Index cols, const thread_options& opt = {}) {
  detail::require_real<T>();
  const std::uint64_t n = detail::element_count("normal", rows, cols);
  const auto plan = detail::schedule_of("normal", opt);
  return detail::row_major_result<T>(rows, cols,
                                     [&](T* data) { detail::fill_normal<T>(k, n, plan, data); });
}

/// jax.random.truncated_normal(k, lower, upper, (n,), dtype): standard normal values conditioned on
/// lower < x < upper (infinite bounds allowed).
template <class T = float>
Vector<T> truncated_normal(const Key& k, std::type_identity_t<T> lower,
                           std::type_identity_t<T> upper, Index n, const thread_options& opt = {}) {
  detail::require_real<T>();
  detail::check_size("truncated_normal", "n", n);
  detail::check_bounds("truncated_normal", lower, upper);
  Vector<T> result(n);
  detail::fill_truncated_normal<T>(k, lower, upper, static_cast<std::uint64_t>(n),
                                   detail::schedule_of("truncated_normal", opt), result.data());
  return result;
}

/// jax.random.truncated_normal(k, lower, upper, (rows, cols), dtype).
template <class T = float>
Matrix<T> truncated_normal(const Key& k, std::type_identity_t<T> lower,
                           std::type_identity_t<T> upper, Index rows, Index cols,
                           const thread_options& opt = {}) {
  detail::require_real<T>();
  const std::uint64_t n = detail::element_count("truncated_normal", rows, cols);
  detail::check_bounds("truncated_normal", lower, upper);
  const auto plan = detail::schedule_of("truncated_normal", opt);
  return detail::row_major_result<T>(rows, cols, [&](T* data) {
    detail::fill_truncated_normal<T>(k, lower, upper, n, plan, data);
  });
}

// --- gumbel, bernoulli ---------------------------------------------------------------------------

/// jax.random.gumbel(k, (n,), dtype) (mode "low", JAX's default):
/// -log(-log(uniform(k, (n,), dtype, finfo.tiny, 1))).
template <class T = float>
Vector<T> gumbel(const Key& k, Index n, const thread_options& opt = {}) {
  detail::require_real<T>();
  detail::check_size("gumbel", "n", n);
  Vector<T> result(n);
  detail::gumbel_values<T> sink{result.data()};
  detail::generate<detail::bits_of<T>>(k, static_cast<std::uint64_t>(n),
                                       detail::schedule_of("gumbel", opt), sink);
  return result;
}

/// jax.random.gumbel(k, (rows, cols), dtype).
template <class T = float>
Matrix<T> gumbel(const Key& k, Index rows, Index cols, const thread_options& opt = {}) {
  detail::require_real<T>();
  const std::uint64_t n = detail::element_count("gumbel", rows, cols);
  const auto plan = detail::schedule_of("gumbel", opt);
  return detail::row_major_result<T>(rows, cols, [&](T* data) {
    detail::gumbel_values<T> sink{data};
    detail::generate<detail::bits_of<T>>(k, n, plan, sink);
  });
}

/// jax.random.bernoulli(k, p, (n,)): uniform(k, (n,), T) < p, with T = float as for a Python float
/// p in JAX's default 32-bit mode.
template <class T = float>
Vector<bool> bernoulli(const Key& k, std::type_identity_t<T> p, Index n,
                       const thread_options& opt = {}) {
  detail::require_real<T>();
  detail::check_size("bernoulli", "n", n);
  detail::check_probability(p);
  Vector<bool> result(n);
  detail::bernoulli_values<T> sink{result.data(), p};
  detail::generate<detail::bits_of<T>>(k, static_cast<std::uint64_t>(n),
                                       detail::schedule_of("bernoulli", opt), sink);
  return result;
}

/// jax.random.bernoulli(k, p, (rows, cols)).
template <class T = float>
Matrix<bool> bernoulli(const Key& k, std::type_identity_t<T> p, Index rows, Index cols,
                       const thread_options& opt = {}) {
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

/// jax.random.randint(k, (n,), low, high, dtype): integers in [low, high). I = std::int32_t is
/// JAX's default dtype; std::int64_t its 64-bit mode.
template <class I = std::int32_t>
Vector<I> randint(const Key& k, Index n, std::type_identity_t<I> low, std::type_identity_t<I> high,
                  const thread_options& opt = {}) {
  detail::require_integer<I>();
  detail::check_size("randint", "n", n);
  const auto plan = detail::schedule_of("randint", opt);
  Vector<I> result(n);
  detail::fill_randint<I>(k, static_cast<std::uint64_t>(n), low, high, plan, result.data());
  return result;
}

/// jax.random.randint(k, (rows, cols), low, high, dtype).
template <class I = std::int32_t>
Matrix<I> randint(const Key& k, Index rows, Index cols, std::type_identity_t<I> low,
                  std::type_identity_t<I> high, const thread_options& opt = {}) {
  detail::require_integer<I>();
  const std::uint64_t n = detail::element_count("randint", rows, cols);
  const auto plan = detail::schedule_of("randint", opt);
  if (low >= high) {
    detail::fail("randint", "low (" + detail::show(low) + ") >= high (" + detail::show(high) + ")");
  }
  return detail::row_major_result<I>(
      rows, cols, [&](I* data) { detail::fill_randint<I>(k, n, low, high, plan, data); });
}

/// jax.random.permutation(k, n): a random ordering of 0 .. n-1 (int32, as in JAX), e.g. to shuffle
/// the columns of a data matrix with X(Eigen::all, p). JAX's algorithm exactly:
/// ceil(3 ln(n) / ln(2^32 - 1)) rounds, each a stable sort by fresh 32-bit random keys drawn with a
/// key split off the previous one.
inline Vector<std::int32_t> permutation(const Key& k, Index n, const thread_options& opt = {}) {
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

// --- categorical ---------------------------------------------------------------------------------

/// jax.random.categorical(k, logits) for 1-D logits: argmax(gumbel(k, logits.shape) + logits), an
/// index drawn with probabilities softmax(logits).
template <class T>
std::int32_t categorical(const Key& k, const Vector<T>& logits, const thread_options& opt = {}) {
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

/// jax.random.categorical(k, logits, axis) for 2-D logits of shape (rows, cols): one draw per row
/// (axis = 1 or -1, JAX's default) or per column (axis = 0 or -2). The Gumbel noise has the logits'
/// shape, in JAX's row-major order.
template <class T>
Vector<std::int32_t> categorical(const Key& k, const Matrix<T>& logits, int axis = -1,
                                 const thread_options& opt = {}) {
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
