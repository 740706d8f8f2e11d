// grove/nn/dense.hpp: the dense layer as a pytree node, and its initialisation the JAX way:
// random_layer_params / init_network_params from the MLP walk-through, and the variance-scaling
// initializers of jax.nn.initializers (Glorot, He, LeCun).
#pragma once

#include <Eigen/Core>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <ranges>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "grove/error.hpp"
#include "grove/random.hpp"
#include "grove/tree.hpp"
#include "grove/tree/eigen.hpp"

namespace grove::nn {

using Index = Eigen::Index;
template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
template <class T>
using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;

/// A dense (fully connected) layer: z = w x + b, with w of shape (out, in) and b of shape (out,),
/// as in JAX's MLP walk-through. A pytree node with key paths `.w` and `.b`; a network is a
/// std::vector<Dense<T>> (a list of CustomNode(Dense[()], [*, *])).
template <class T>
struct Dense {
  Matrix<T> w;  ///< (out, in)
  Vector<T> b;  ///< (out,)

  Index in_features() const { return w.cols(); }
  Index out_features() const { return w.rows(); }

  /// Same shapes and the same values.
  friend bool operator==(const Dense& x, const Dense& y) {
    return x.w.rows() == y.w.rows() && x.w.cols() == y.w.cols() && x.b.size() == y.b.size() &&
           x.w == y.w && x.b == y.b;
  }
};
GROVE_NODE(Dense, w, b);

namespace detail {
template <class L>
inline constexpr bool is_dense_v = false;
template <class T>
inline constexpr bool is_dense_v<Dense<T>> = true;

template <class T>
constexpr void require_real() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "grove::nn: the scalar type must be float or double");
}

// grove::nn::<function>: <what>, as an argument_error (a bad value) or a shape_error (shapes that
// must agree do not).
[[noreturn]] inline void fail(const char* function, const std::string& what) {
  throw argument_error(std::string("grove::nn::") + function + ": " + what);
}
[[noreturn]] inline void fail_shape(const char* function, const std::string& what) {
  throw shape_error(std::string("grove::nn::") + function + ": " + what);
}

template <class R>
std::vector<Index> to_sizes(const char* function, const R& sizes) {
  std::vector<Index> out;
  for (const auto& s : sizes) {
    if (s <= 0) fail(function, "layer sizes must be positive, got " + std::to_string(s));
    out.push_back(static_cast<Index>(s));
  }
  if (out.size() < 2)
    fail(function,
         "need at least two layer sizes (inputs and outputs), got " + std::to_string(out.size()));
  return out;
}
}  // namespace detail

/// A network: a random-access range of Dense<T> layers (std::vector<Dense<T>>, std::array, ...).
template <class P>
concept network = std::ranges::random_access_range<const P> && std::ranges::sized_range<const P> &&
    detail::is_dense_v<std::remove_cvref_t<std::ranges::range_value_t<const P>>>;

/// The scalar type of a network's parameters.
template <network P>
using network_scalar_t =
    typename decltype(std::declval<std::ranges::range_value_t<const P>>().b)::Scalar;

// --- the walk-through's initialisation ---------------------------------------------------------

/// One dense layer from m inputs to n outputs, exactly as JAX's walk-through builds it:
/// `w_key, b_key = random.split(key); return scale * random.normal(w_key, (n, m)),
/// scale * random.normal(b_key, (n,))`, with the same numbers (grove::random is JAX's).
template <class T = float>
Dense<T> random_layer_params(Index m, Index n, const random::Key& key,
                             std::type_identity_t<T> scale = T(0.01)) {
  detail::require_real<T>();
  if (m <= 0 || n <= 0)
    detail::fail("random_layer_params", "sizes must be positive, got m = " + std::to_string(m) +
                                            ", n = " + std::to_string(n));
  const auto [w_key, b_key] = random::split(key);
  Dense<T> layer{random::normal<T>(w_key, n, m), random::normal<T>(b_key, n)};
  layer.w *= scale;  // JAX: scale * normal(...) in T (a Python float is weakly typed)
  layer.b *= scale;
  return layer;
}

/// All layers of an MLP with the given sizes (inputs first, outputs last), the JAX way:
/// `keys = random.split(key, len(sizes) - 1)`, and layer i is
/// `random_layer_params(sizes[i], sizes[i + 1], keys[i], scale)`.
///
///   auto params = grove::nn::init_network_params<float>({784, 512, 512, 10}, key, 0.01f);
///
/// (JAX's MLP tutorial splits len(sizes) keys and zips away the last one. With the default key
/// layout split(key, n)[i] == fold_in(key, i) whatever n is, so both give the same network; only
/// legacy-layout keys tell them apart.)
template <class T = float>
std::vector<Dense<T>> init_network_params(const std::vector<Index>& sizes, const random::Key& key,
                                          std::type_identity_t<T> scale = T(0.01)) {
  const auto n = detail::to_sizes("init_network_params", sizes);
  const auto keys = random::split(key, static_cast<Index>(n.size() - 1));
  std::vector<Dense<T>> params;
  params.reserve(n.size() - 1);
  for (std::size_t i = 0; i + 1 < n.size(); ++i)
    params.push_back(random_layer_params<T>(n[i], n[i + 1], keys[i], scale));
  return params;
}

/// The same from any range of integer sizes (std::vector<int>, std::array, a span...).
template <class T = float, std::ranges::input_range R>
requires std::integral<std::ranges::range_value_t<R>> &&
    (!std::same_as<std::remove_cvref_t<R>, std::vector<Index>>)
        std::vector<Dense<T>> init_network_params(const R& sizes, const random::Key& key,
                                                  std::type_identity_t<T> scale = T(0.01)) {
  return init_network_params<T>(detail::to_sizes("init_network_params", sizes), key, scale);
}

// --- jax.nn.initializers' variance scaling ----------------------------------------------------

/// Which fan the variance is divided by (jax.nn.initializers.variance_scaling's `mode`).
enum class FanMode : std::uint8_t { fan_in, fan_out, fan_avg };
/// The distribution an initializer draws from (variance_scaling's `distribution`).
enum class InitDistribution : std::uint8_t { truncated_normal, normal, uniform };
/// The former name of InitDistribution.
using Distribution [[deprecated("grove: use grove::nn::InitDistribution")]] = InitDistribution;

/// jax.nn.initializers.variance_scaling(scale, mode, distribution) for a dense layer's weight of
/// shape (out, in), i.e. with JAX's in_axis=-1, out_axis=-2: fan_in = in = cols, fan_out = out =
/// rows. Element (i, j) of `sample(key, rows, cols)` is JAX's `init(key, (rows, cols),
/// dtype)[i, j]`, including JAX's constants: variance = scale / fan (rounded to T),
///   truncated_normal: truncated_normal(key, -2, 2) * (sqrt(variance) / .87962566103423978),
///   normal:           normal(key) * sqrt(variance),
///   uniform:          uniform(key, -1, 1) * sqrt(3 * variance).
/// The uniform ones bit for bit; the normal and truncated normal ones within the few ulps by which
/// grove::random's normals may differ from XLA's (docs/random.md; tests/oracle/flax_oracle.py
/// measures them). (JAX's own default for a 2-D shape is in_axis=-2, out_axis=-1, the layout of a
/// flax kernel of shape (in, out); grove's weights are (out, in), as in the walk-through. From the
/// same key, flax's kernel holds the same numbers in the same flat order: w, row-major, is
/// kernel.reshape(out, in), not kernel.T.)
template <class T>
struct VarianceScaling {
  double scale = 1.0;
  FanMode mode = FanMode::fan_in;
  InitDistribution distribution = InitDistribution::truncated_normal;

  Matrix<T> sample(const random::Key& key, Index rows, Index cols) const {
    detail::require_real<T>();
    if (rows <= 0 || cols <= 0)
      detail::fail("VarianceScaling::sample", "the shape must be positive, got (" +
                                                  std::to_string(rows) + ", " +
                                                  std::to_string(cols) + ")");
    if (!(scale > 0))
      detail::fail("VarianceScaling::sample",
                   "scale must be positive, got " + std::to_string(scale));
    const double fan_in = static_cast<double>(cols), fan_out = static_cast<double>(rows);
    const double denominator = mode == FanMode::fan_in    ? fan_in
                               : mode == FanMode::fan_out ? fan_out
                                                          : (fan_in + fan_out) / 2;
    const T variance =
        static_cast<T>(scale / denominator);  // jnp.array(scale / denominator, dtype)
    switch (distribution) {
      case InitDistribution::truncated_normal: {
        const T stddev = std::sqrt(variance) / static_cast<T>(.87962566103423978);
        Matrix<T> w = random::truncated_normal<T>(key, T(-2), T(2), rows, cols);
        w *= stddev;
        return w;
      }
      case InitDistribution::normal: {
        Matrix<T> w = random::normal<T>(key, rows, cols);
        w *= std::sqrt(variance);
        return w;
      }
      case InitDistribution::uniform: {
        Matrix<T> w = random::uniform<T>(key, rows, cols, T(-1), T(1));
        w *= std::sqrt(T(3) * variance);
        return w;
      }
    }
    detail::fail("VarianceScaling::sample", "unknown distribution");
  }
  Matrix<T> operator()(const random::Key& key, Index rows, Index cols) const {
    return sample(key, rows, cols);
  }
};

/// variance_scaling with JAX's string arguments: mode "fan_in" | "fan_out" | "fan_avg",
/// distribution "truncated_normal" | "normal" | "uniform" (jax.nn.initializers.variance_scaling's
/// three; JAX refuses Keras's "untruncated_normal", and so does grove). Throws
/// std::invalid_argument for anything else.
template <class T>
VarianceScaling<T> variance_scaling(double scale, std::string_view mode,
                                    std::string_view distribution) {
  VarianceScaling<T> v;
  v.scale = scale;
  if (mode == "fan_in")
    v.mode = FanMode::fan_in;
  else if (mode == "fan_out")
    v.mode = FanMode::fan_out;
  else if (mode == "fan_avg")
    v.mode = FanMode::fan_avg;
  else
    detail::fail("variance_scaling",
                 "mode must be fan_in, fan_out or fan_avg, got '" + std::string(mode) + "'");
  if (distribution == "truncated_normal")
    v.distribution = InitDistribution::truncated_normal;
  else if (distribution == "normal")
    v.distribution = InitDistribution::normal;
  else if (distribution == "uniform")
    v.distribution = InitDistribution::uniform;
  else
    detail::fail("variance_scaling",
                 "distribution must be truncated_normal, normal or uniform, got '" +
                     std::string(distribution) + "'");
  if (!(scale > 0))
    detail::fail("variance_scaling", "scale must be positive, got " + std::to_string(scale));
  return v;
}

/// jax.nn.initializers.glorot_normal (= xavier_normal): variance_scaling(1, fan_avg,
/// truncated_normal).
template <class T>
inline constexpr VarianceScaling<T> glorot_normal{1.0, FanMode::fan_avg,
                                                  InitDistribution::truncated_normal};
/// jax.nn.initializers.glorot_uniform (= xavier_uniform): variance_scaling(1, fan_avg, uniform).
template <class T>
inline constexpr VarianceScaling<T> glorot_uniform{1.0, FanMode::fan_avg,
                                                   InitDistribution::uniform};
/// jax.nn.initializers.he_normal (= kaiming_normal): variance_scaling(2, fan_in, truncated_normal).
template <class T>
inline constexpr VarianceScaling<T> he_normal{2.0, FanMode::fan_in,
                                              InitDistribution::truncated_normal};
/// jax.nn.initializers.he_uniform (= kaiming_uniform): variance_scaling(2, fan_in, uniform).
template <class T>
inline constexpr VarianceScaling<T> he_uniform{2.0, FanMode::fan_in, InitDistribution::uniform};
/// jax.nn.initializers.lecun_normal: variance_scaling(1, fan_in, truncated_normal).
template <class T>
inline constexpr VarianceScaling<T> lecun_normal{1.0, FanMode::fan_in,
                                                 InitDistribution::truncated_normal};
/// jax.nn.initializers.lecun_uniform: variance_scaling(1, fan_in, uniform).
template <class T>
inline constexpr VarianceScaling<T> lecun_uniform{1.0, FanMode::fan_in, InitDistribution::uniform};

/// An MLP whose weights come from a variance-scaling initializer and whose biases are zero (the
/// default of flax's Dense). Layer i uses split(key, sizes.size() - 1)[i] as the scale version
/// does, and within it (w_key, b_key) = split(layer_key); w = init(w_key, (out, in)).
///
///   auto params = grove::nn::init_network_params({784, 512, 512, 10}, key,
///   grove::nn::he_normal<float>);
template <class T>
std::vector<Dense<T>> init_network_params(const std::vector<Index>& sizes, const random::Key& key,
                                          const VarianceScaling<T>& init) {
  const auto n = detail::to_sizes("init_network_params", sizes);
  const auto keys = random::split(key, static_cast<Index>(n.size() - 1));
  std::vector<Dense<T>> params;
  params.reserve(n.size() - 1);
  for (std::size_t i = 0; i + 1 < n.size(); ++i) {
    const auto [w_key, b_key] = random::split(keys[i]);
    (void)b_key;
    params.push_back(Dense<T>{init.sample(w_key, n[i + 1], n[i]), Vector<T>::Zero(n[i + 1])});
  }
  return params;
}

template <class T, std::ranges::input_range R>
requires std::integral<std::ranges::range_value_t<R>> &&
    (!std::same_as<std::remove_cvref_t<R>, std::vector<Index>>)
        std::vector<Dense<T>> init_network_params(const R& sizes, const random::Key& key,
                                                  const VarianceScaling<T>& init) {
  return init_network_params<T>(detail::to_sizes("init_network_params", sizes), key, init);
}

}  // namespace grove::nn
