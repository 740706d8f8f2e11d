// grove/random/fill.hpp: jax.random's distributions written into storage the caller owns,
// without allocating: fill_bits, fill_uniform, fill_normal, fill_bernoulli, fill_truncated_normal.
#pragma once

#include <span>
#include <type_traits>

#include "grove/random/detail/checks.hpp"
#include "grove/random/detail/fill.hpp"
#include "grove/random/key.hpp"
#include "grove/random/thread_options.hpp"

namespace grove::random {

// --- filling storage the caller owns ------------------------------------------------------------
//
/// fill_* write exactly what the functions above return into storage the caller owns, without
/// allocating (a training step can draw its noise into the same buffer every time). out.size()
/// values in JAX's row-major order: fill a vector to get f(k, n), or a row-major matrix's data() to
/// get f(k, rows, cols). Example: grove::random::fill_normal(k, std::span(buffer)).

/// The values of bits<U>(k, out.size()).
template <class U>
void fill_bits(const Key& k, std::span<U> out, const thread_options& opt = {}) {
  detail::require_unsigned<U>();
  detail::fill_bits<U>(k, out.size(), detail::schedule_of("fill_bits", opt), out.data());
}

/// The values of uniform<T>(k, out.size(), minval, maxval).
template <class T>
void fill_uniform(const Key& k, std::span<T> out, std::type_identity_t<T> minval,
                  std::type_identity_t<T> maxval, const thread_options& opt = {}) {
  detail::require_real<T>();
  detail::check_range("fill_uniform", minval, maxval);
  detail::fill_uniform<T>(k, out.size(), minval, maxval, detail::schedule_of("fill_uniform", opt),
                          out.data());
}

/// The values of uniform<T>(k, out.size()).
template <class T>
void fill_uniform(const Key& k, std::span<T> out, const thread_options& opt = {}) {
  fill_uniform<T>(k, out, T(0), T(1), opt);
}

/// The values of normal<T>(k, out.size()).
template <class T>
void fill_normal(const Key& k, std::span<T> out, const thread_options& opt = {}) {
  detail::require_real<T>();
  detail::fill_normal<T>(k, out.size(), detail::schedule_of("fill_normal", opt), out.data());
}

/// The values of bernoulli<T>(k, p, out.size()) written as Out(1) and Out(0): a mask of any
/// arithmetic type (bool, float, an integer) without a second pass. Dropout's mask is
/// fill_bernoulli(key, keep, mask).
template <class T = float, class Out>
void fill_bernoulli(const Key& k, std::type_identity_t<T> p, std::span<Out> out,
                    const thread_options& opt = {}) {
  detail::require_real<T>();
  static_assert(std::is_arithmetic_v<Out>,
                "grove::random::fill_bernoulli: the output must be bool, an integer or a float");
  detail::check_probability(p, "fill_bernoulli");
  detail::bernoulli_values<T, Out> sink{out.data(), p};
  detail::generate<detail::bits_of<T>>(k, out.size(), detail::schedule_of("fill_bernoulli", opt),
                                       sink);
}

/// The values of truncated_normal<T>(k, lower, upper, out.size()).
template <class T>
void fill_truncated_normal(const Key& k, std::type_identity_t<T> lower,
                           std::type_identity_t<T> upper, std::span<T> out,
                           const thread_options& opt = {}) {
  detail::require_real<T>();
  detail::check_bounds("fill_truncated_normal", lower, upper);
  detail::fill_truncated_normal<T>(k, lower, upper, out.size(),
                                   detail::schedule_of("fill_truncated_normal", opt), out.data());
}

}  // namespace grove::random
