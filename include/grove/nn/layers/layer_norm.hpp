// grove/nn/layers/layer_norm.hpp: layer normalisation over each example's features,
// nn::layer_norm(features), as flax.linen.LayerNorm.
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

/// The parameters of a layer norm: one scale and one bias per feature (key paths .scale, .bias).
template <class T>
struct LayerNormParams {
  Vector<T> scale;
  Vector<T> bias;
};
GROVE_NODE(LayerNormParams, scale, bias);

/// flax.linen.LayerNorm over the features of each example (column): with mean m and variance v
/// of the column (v = mean((x - m)^2), computed in two passes), y = (x - m) / sqrt(v + eps) *
/// scale + bias. Parameters: scale (ones), bias (zeros).
struct LayerNorm {
  Index features = 0;
  double eps = 1e-6;

  std::string name() const { return "LayerNorm(" + std::to_string(features) + ")"; }
  Index input_features() const { return features; }
  static constexpr bool shares_team = true;
  /// The normalised input and each column's 1 / sqrt(v + eps), for the backward pass.
  Index saved_size(Index in, Index batch) const {
    return detail::aligned(in * batch) + detail::aligned(batch);
  }

  template <class T>
  LayerNormParams<T> init(const random::Key&) const {
    return {Vector<T>::Ones(features), Vector<T>::Zero(features)};
  }

  template <class T>
  void check_params(const char* function, const LayerNormParams<T>& p,
                    const detail::layer_path& path) const {
    if (p.scale.size() != features || p.bias.size() != features)
      detail::fail_shape(function, "layer " + path.str() + " (" + name() +
                                       ") has parameters scale (" + std::to_string(p.scale.size()) +
                                       ") and bias (" + std::to_string(p.bias.size()) +
                                       "), expected (" + std::to_string(features) + ") each");
  }

  template <class T>
  void forward(const LayerNormParams<T>& p, ConstMatrixMap<T> x, MatrixMap<T> y, std::span<T> saved,
               const layer_context& ctx) const {
    const Index n = x.rows(), batch = x.cols();
    const T e = static_cast<T>(eps);
    T* xhat = saved.data();
    T* rstd = saved.data() + detail::aligned(n * batch);
    // Each thread its own examples (columns).
    const detail::Range cols = detail::share(batch, ctx.thread, ctx.threads, 1);
    for (Index j = cols.begin; j < cols.end; ++j) {
      const auto xj = x.col(j).array();
      const T mean = xj.sum() / static_cast<T>(n);
      const T var = (xj - mean).square().sum() / static_cast<T>(n);
      const T r = T(1) / std::sqrt(var + e);
      auto yj = y.col(j).array();
      yj = (xj - mean) * r;
      if (ctx.training) {
        Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(xhat + j * n, n) = yj;
        rstd[j] = r;
      }
      yj = yj * p.scale.array() + p.bias.array();
    }
    team_barrier(ctx);
  }

  /// dscale = sum over examples of dy xhat, dbias = sum of dy; with g = dy scale,
  /// dx = rstd (g - mean(g) - xhat mean(g xhat)) per column.
  template <class T>
  void backward(const LayerNormParams<T>& p, ConstMatrixMap<T> x, ConstMatrixMap<T>,
                ConstMatrixMap<T> dy, LayerNormParams<T>& g, MatrixMap<T> dx, std::span<T> saved,
                const layer_context& ctx) const {
    const Index n = x.rows(), batch = x.cols();
    const T* xhat = saved.data();
    const T* rstd = saved.data() + detail::aligned(n * batch);
    // The parameters' gradients, sums over the examples: each thread its own features, summed in
    // example order (as one thread sums them).
    const detail::Range rows = detail::share(n, ctx.thread, ctx.threads);
    if (!rows.empty()) {
      auto gs = g.scale.segment(rows.begin, rows.size()).array();
      auto gb = g.bias.segment(rows.begin, rows.size()).array();
      gs.setZero();
      gb.setZero();
      for (Index j = 0; j < batch; ++j) {
        const auto dyj = dy.col(j).segment(rows.begin, rows.size()).array();
        gs += dyj * Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(xhat + j * n + rows.begin,
                                                                         rows.size());
        gb += dyj;
      }
    }
    // The input's gradient, per example: each thread its own examples.
    if (dx.size() != 0) {
      const detail::Range cols = detail::share(batch, ctx.thread, ctx.threads, 1);
      for (Index j = cols.begin; j < cols.end; ++j) {
        const Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> xh(xhat + j * n, n);
        const auto gj = dy.col(j).array() * p.scale.array();
        const T mean_g = gj.sum() / static_cast<T>(n);
        const T mean_gx = (gj * xh).sum() / static_cast<T>(n);
        dx.col(j).array() = rstd[j] * (gj - mean_g - xh * mean_gx);
      }
    }
    team_barrier(ctx);
  }
};

/// A layer norm over `features` features with epsilon eps (flax's default 1e-6). Throws
/// grove::argument_error for features <= 0 or eps < 0.
inline LayerNorm layer_norm(Index features, double eps = 1e-6) {
  if (features <= 0)
    detail::fail("layer_norm", "features must be positive, got " + std::to_string(features));
  if (!(eps >= 0)) detail::fail("layer_norm", "eps must be >= 0, got " + std::to_string(eps));
  return LayerNorm{features, eps};
}

}  // namespace grove::nn
