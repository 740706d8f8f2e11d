// grove/nn/predict.hpp: the MLP's forward pass, for one example (the walk-through's `predict`)
// and for a batch whose columns are examples (`batched_predict`, one GEMM per layer).
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <ranges>
#include <string>

#include "grove/nn/activations.hpp"
#include "grove/nn/dense.hpp"
#include "grove/nn/workspace.hpp"

namespace grove::nn {

namespace detail {
// Batched passes that only read the network (predict, loss, accuracy) go through the workspace
// in chunks of this many columns, so that a whole test set needs no more scratch than this.
inline constexpr Index inference_chunk = 1024;
}  // namespace detail

/// A dense layer applied to one example or a batch: w x + b (b added to every column).
template <class T, class D>
Matrix<T> dense(const Dense<T>& layer, const Eigen::MatrixBase<D>& x) {
  detail::require_scalar<T, D>();
  if (x.rows() != layer.w.cols())
    detail::fail("dense", "the input has " + std::to_string(x.rows()) + " rows but w is " +
                              std::to_string(layer.w.rows()) + "x" +
                              std::to_string(layer.w.cols()));
  Matrix<T> z = layer.w * x;
  z.colwise() += layer.b;
  return z;
}

/// predict(params, x, act = swish): the logits of one example x (a column vector of the first
/// layer's inputs), as JAX's walk-through computes them: every layer but the last is followed by
/// the activation. A function object, so it can be handed to grove::vmap as it is:
///
///   auto batched = grove::vmap(grove::nn::predict, grove::in_axes(std::nullopt, 1));
///   Eigen::MatrixXf logits = batched(params, X);   // == batched_predict(params, X)
struct predict_fn {
  template <network P, class D, activation Act = Swish>
  Vector<network_scalar_t<P>> operator()(const P& params, const Eigen::MatrixBase<D>& x,
                                         const Act& act = {}) const {
    using T = network_scalar_t<P>;
    detail::require_scalar<T, D>();
    if (x.cols() != 1)
      detail::fail("predict", "x must be one example (a column vector), got a " +
                                  std::to_string(x.rows()) + "x" + std::to_string(x.cols()) +
                                  " matrix; use batched_predict for a batch");
    detail::engine<T>::widths("predict", params, x.rows());
    Vector<T> a = x;
    const auto layers = std::ranges::size(params);
    for (std::size_t l = 0; l < layers; ++l) {
      const auto& layer = params[l];
      Vector<T> z = layer.w * a + layer.b;
      if (l + 1 < layers) {
        a.resize(z.size());
        act.forward(z.data(), a.data(), z.size());
      } else {
        a = std::move(z);
      }
    }
    return a;
  }
};
inline constexpr predict_fn predict{};

/// The logits of a batch X (inputs x batch; columns are examples), out x batch: one GEMM per layer,
/// the bias and the activation fused into one pass over each layer's output. Uses `ws` for its
/// scratch memory.
template <network P, class D, activation Act = Swish>
Matrix<network_scalar_t<P>> batched_predict(const P& params, const Eigen::MatrixBase<D>& X,
                                            Workspace<network_scalar_t<P>>& ws,
                                            const Act& act = {}) {
  using T = network_scalar_t<P>;
  detail::require_scalar<T, D>();
  const auto width = detail::engine<T>::widths("batched_predict", params, X.rows());
  const Eigen::Ref<const Matrix<T>, 0, Eigen::OuterStride<>> x(X.derived());
  Matrix<T> logits(width.back(), x.cols());
  for (Index c = 0; c < x.cols(); c += detail::inference_chunk) {
    const Index n = std::min(detail::inference_chunk, x.cols() - c);
    detail::engine<T>::template run<detail::engine<T>::mode::predict>(
        "batched_predict", detail::uniform_net<const P, Act, P>{&params, nullptr, &act},
        detail::View<const T>{x.data() + c * x.outerStride(), x.rows(), n, x.outerStride()},
        nullptr, detail::softmax_ce_columns{},
        detail::View<T>{logits.data() + c * logits.rows(), logits.rows(), n, logits.rows()}, ws);
  }
  return logits;
}

/// The same with a scratch workspace of its own.
template <network P, class D, activation Act = Swish>
Matrix<network_scalar_t<P>> batched_predict(const P& params, const Eigen::MatrixBase<D>& X,
                                            const Act& act = {}) {
  Workspace<network_scalar_t<P>> ws;
  return batched_predict(params, X, ws, act);
}

}  // namespace grove::nn
