// grove/nn/layers/dropout.hpp: dropout with a key, nn::dropout(rate), as flax.linen.Dropout.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "grove/nn/detail/layer_dispatch.hpp"

namespace grove::nn {

/// flax.linen.Dropout: in a training pass with a key, each element is kept with probability
/// keep = 1 - rate and then scaled by 1 / keep, or set to 0; the identity in nn::apply and
/// whenever the pass has no key. The mask is grove::random::bernoulli<float>(key, keep, features *
/// batch) of the layer's own key (split from the step's key in layer order: see nn::sequential),
/// element i of it for element i of the batch in memory (feature f of example j at f + j *
/// features), which is flax's mask of a (batch, features) array in row-major order. A kept element
/// is x * (1 / keep), the reciprocal rounded once: flax writes x / keep, and XLA computes that
/// division by a constant as this product, so the outputs (and the vector-Jacobian product) are
/// flax's bit for bit. keep is rounded to float as JAX's default float32 has it, in double too;
/// under jax_enable_x64 flax draws its mask from float64 uniforms, and the masks differ.
struct Dropout {
  double rate = 0;

  std::string name() const { return "Dropout(" + std::to_string(rate) + ")"; }
  static constexpr bool shares_team = true;  // (its passes run on the team's first thread)
  Index saved_size(Index in, Index batch) const { return rate > 0 ? in * batch : 0; }

  template <class T>
  std::monostate init(const random::Key&) const {
    return {};
  }
  bool active(const layer_context& ctx) const { return rate > 0 && ctx.training && ctx.key; }

  template <class T>
  void forward(const std::monostate& p, ConstMatrixMap<T> x, MatrixMap<T> y, std::span<T> saved,
               const layer_context& ctx) const {
    if (ctx.threads > 1) {
      if (ctx.thread == 0)
        forward<T>(p, x, y, saved,
                   layer_context{ctx.training, ctx.key, ctx.detail, 0, 1, nullptr, ctx.policy});
      team_barrier(ctx);
      return;
    }
    if (!active(ctx)) {
      y = x;
      return;
    }
    const float keep = static_cast<float>(1.0 - rate);
    // The mask is bernoulli(key, keep), drawn on this thread (the team is the caller's).
    random::fill_bernoulli<float>(*ctx.key, keep,
                                  std::span<T>(saved.data(), static_cast<std::size_t>(x.size())),
                                  random::thread_options{1});
    const T scale = T(1) / static_cast<T>(keep);  // XLA's x / keep (see the struct's comment)
    const auto m = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(saved.data(), x.size())
                       .reshaped(x.rows(), x.cols());
    y.array() = (m > T(0)).select(x.array() * scale, T(0));
  }

  template <class T>
  void backward(const std::monostate& p, ConstMatrixMap<T> x, ConstMatrixMap<T> y,
                ConstMatrixMap<T> dy, std::monostate& g, MatrixMap<T> dx, std::span<T> saved,
                const layer_context& ctx) const {
    if (ctx.threads > 1) {
      if (ctx.thread == 0)
        backward<T>(p, x, y, dy, g, dx, saved,
                    layer_context{ctx.training, ctx.key, ctx.detail, 0, 1, nullptr, ctx.policy});
      team_barrier(ctx);
      return;
    }
    if (dx.size() == 0) return;
    if (!active(ctx)) {
      dx = dy;
      return;
    }
    const T scale = T(1) / static_cast<T>(static_cast<float>(1.0 - rate));
    const auto m = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(saved.data(), dy.size())
                       .reshaped(dy.rows(), dy.cols());
    dx.array() = (m > T(0)).select(dy.array() * scale, T(0));
  }

  template <class T>
  bool collect_chain(const std::monostate&, std::monostate*, std::vector<detail::chain_entry<T>>&,
                     bool has_key) const {
    return rate == 0 || !has_key;  // the identity then
  }
};

/// Dropout with the given rate in [0, 1) (flax's semantics: see Dropout). Throws
/// grove::argument_error for a rate outside [0, 1).
inline Dropout dropout(double rate) {
  if (!(rate >= 0 && rate < 1))
    detail::fail("dropout", "rate must be in [0, 1), got " + std::to_string(rate));
  return Dropout{rate};
}

}  // namespace grove::nn
