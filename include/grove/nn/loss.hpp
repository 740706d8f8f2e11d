// grove/nn/loss.hpp: log-softmax and categorical cross-entropy, per example (per column), stable
// for huge logits; and the network's loss on a batch.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "grove/nn/activations.hpp"
#include "grove/nn/dense.hpp"
#include "grove/nn/losses.hpp"
#include "grove/nn/predict.hpp"
#include "grove/nn/workspace.hpp"

namespace grove::nn {

/// log(softmax(z)) of every column of z (each column is one example's logits): z - m - log(sum(
/// exp(z - m))) with m the column's maximum, finite for logits of any finite size. A vector is one
/// example.
template <class D>
typename D::PlainObject log_softmax(const Eigen::MatrixBase<D>& logits) {
  using T = typename D::Scalar;
  typename D::PlainObject out = logits;
  for (Index j = 0; j < out.cols(); ++j) {
    auto c = out.col(j).array();
    c -= detail::log_sum_exp<T>(out.col(j).data(), out.rows());
  }
  return out;
}

/// softmax of every column: exp(log_softmax(z)).
template <class D>
typename D::PlainObject softmax(const Eigen::MatrixBase<D>& logits) {
  typename D::PlainObject out = log_softmax(logits);
  out.array() = out.array().exp();
  return out;
}

/// The vector-Jacobian product of log_softmax (per column): given the logits z and the gradient g
/// with respect to log_softmax(z), returns g - softmax(z) * sum(g) for each column.
template <class DZ, class DG>
typename DZ::PlainObject log_softmax_vjp(const Eigen::MatrixBase<DZ>& logits,
                                         const Eigen::MatrixBase<DG>& g) {
  if (logits.rows() != g.rows() || logits.cols() != g.cols())
    detail::fail("log_softmax_vjp", "the logits are " + std::to_string(logits.rows()) + "x" +
                                        std::to_string(logits.cols()) + " but g is " +
                                        std::to_string(g.rows()) + "x" + std::to_string(g.cols()));
  typename DZ::PlainObject out = softmax(logits);
  for (Index j = 0; j < out.cols(); ++j) out.col(j) = g.col(j) - out.col(j) * g.col(j).sum();
  return out;
}

/// Categorical cross-entropy of log-probabilities (classes x batch, e.g. log_softmax's result):
/// the mean over the batch of each example's -sum_i y_i log p_i. Y is a vector of integer labels
/// (one per column) or a (classes x batch) matrix of targets (one-hot, or any probabilities).
template <class DL, class DY>
typename DL::Scalar cross_entropy(const Eigen::MatrixBase<DL>& log_probs,
                                  const Eigen::DenseBase<DY>& Y) {
  using T = typename DL::Scalar;
  const Index batch = log_probs.cols();
  return detail::with_targets<T>("cross_entropy", Y, batch, [&](const auto& targets) {
    detail::engine<T>::check("cross_entropy", targets, log_probs.rows(), batch);
    T total = 0;
    for (Index j = 0; j < batch; ++j) {
      if constexpr (requires { targets[j]; }) {
        total -= log_probs(targets[j], j);
      } else {
        total -= (targets.y.map().col(j).array() * log_probs.col(j).array()).sum();
      }
    }
    return batch == 0 ? std::numeric_limits<T>::quiet_NaN() : total / static_cast<T>(batch);
  });
}

/// The vector-Jacobian product of cross_entropy with respect to the log-probabilities: -y / batch
/// (for labels, -1 / batch at each example's label and 0 elsewhere).
template <class DL, class DY>
typename DL::PlainObject cross_entropy_vjp(const Eigen::MatrixBase<DL>& log_probs,
                                           const Eigen::DenseBase<DY>& Y) {
  using T = typename DL::Scalar;
  const Index batch = log_probs.cols();
  typename DL::PlainObject g = DL::PlainObject::Zero(log_probs.rows(), batch);
  detail::with_targets<T>("cross_entropy_vjp", Y, batch, [&](const auto& targets) {
    detail::engine<T>::check("cross_entropy_vjp", targets, log_probs.rows(), batch);
    const T scale = T(-1) / static_cast<T>(batch);
    for (Index j = 0; j < batch; ++j) {
      if constexpr (requires { targets[j]; })
        g(targets[j], j) = scale;
      else
        g.col(j) = scale * targets.y.map().col(j);
    }
    return 0;
  });
  return g;
}

/// The network's loss on a batch: the mean over the examples (columns of X) of the categorical
/// cross-entropy of each example's logits, the log-softmax taken per example. Y: a vector of
/// integer labels, or a (classes x batch) matrix of targets. The same number value_and_grad
/// reports, up to rounding (it is computed in chunks of columns).
template <network P, class DX, class DY, activation Act = Swish>
network_scalar_t<P> loss(const P& params, const Eigen::MatrixBase<DX>& X,
                         const Eigen::DenseBase<DY>& Y, Workspace<network_scalar_t<P>>& ws,
                         const Act& act = {}) {
  using T = network_scalar_t<P>;
  using E = detail::engine<T>;
  detail::require_scalar<T, DX>();
  const Eigen::Ref<const Matrix<T>, 0, Eigen::OuterStride<>> x(X.derived());
  const Index batch = x.cols();
  return detail::with_targets<T>("loss", Y, batch, [&](const auto& targets) {
    using Tg = std::remove_cvref_t<decltype(targets)>;
    // The widths and targets are checked on the whole batch before any chunk runs.
    E::check("loss", targets, E::outputs("loss", params, x.rows(), ws), batch);
    if (batch == 0) return std::numeric_limits<T>::quiet_NaN();
    T total = 0;
    for (Index c = 0; c < batch; c += detail::inference_chunk) {
      const Index n = std::min(detail::inference_chunk, batch - c);
      Tg chunk = targets;
      if constexpr (requires { chunk.stride; })
        chunk.data += c * chunk.stride;
      else
        chunk.y = {targets.y.col(c), targets.y.rows, n, targets.y.ld};
      E::template run<E::mode::loss>(
          "loss", detail::uniform_net<const P, Act, P>{&params, nullptr, &act},
          detail::View<const T>{x.data() + c * x.outerStride(), x.rows(), n, x.outerStride()},
          chunk, detail::softmax_ce_columns{}, detail::View<T>{}, ws);
      total += E::column_loss_sum(ws, n);
    }
    return total / static_cast<T>(batch);
  });
}

template <network P, class DX, class DY, activation Act = Swish>
network_scalar_t<P> loss(const P& params, const Eigen::MatrixBase<DX>& X,
                         const Eigen::DenseBase<DY>& Y, const Act& act = {}) {
  Workspace<network_scalar_t<P>> ws;
  return loss(params, X, Y, ws, act);
}

}  // namespace grove::nn
