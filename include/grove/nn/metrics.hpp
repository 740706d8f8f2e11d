// grove/nn/metrics.hpp: classification accuracy.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstddef>
#include <limits>
#include <string>
#include <type_traits>

#include "grove/nn/activations.hpp"
#include "grove/nn/dense.hpp"
#include "grove/nn/predict.hpp"
#include "grove/nn/workspace.hpp"

namespace grove::nn {

/// The index of each column's largest entry (the first one on ties, as jnp.argmax).
template <class D>
Eigen::Matrix<Index, Eigen::Dynamic, 1> argmax(const Eigen::MatrixBase<D>& logits) {
  Eigen::Matrix<Index, Eigen::Dynamic, 1> out(logits.cols());
  for (Index j = 0; j < logits.cols(); ++j) {
    Index best = 0;
    logits.col(j).maxCoeff(&best);
    out(j) = best;
  }
  return out;
}

/// The fraction of examples (columns of X) whose largest logit is at their label (in [0, 1]).
/// labels: one integer per example. Computed in chunks through `ws`.
template <network P, class DX, class DL, activation Act = Swish>
double accuracy(const P& params, const Eigen::MatrixBase<DX>& X, const Eigen::DenseBase<DL>& labels,
                Workspace<network_scalar_t<P>>& ws, const Act& act = {}) {
  using T = network_scalar_t<P>;
  static_assert(std::is_integral_v<typename DL::Scalar>,
                "grove::nn::accuracy: labels must be integers");
  detail::require_scalar<T, DX>();
  const Eigen::Ref<const Matrix<T>, 0, Eigen::OuterStride<>> x(X.derived());
  const Index batch = x.cols();
  return detail::with_targets<T>("accuracy", labels, batch, [&](const auto& targets) {
    detail::engine<T>::check("accuracy", targets,
                             detail::engine<T>::outputs("accuracy", params, x.rows(), ws), batch);
    if (batch == 0) return 0.0;
    std::size_t correct = 0;
    for (Index c = 0; c < batch; c += detail::inference_chunk) {
      const Index n = std::min(detail::inference_chunk, batch - c);
      const Matrix<T> logits = batched_predict(params, x.middleCols(c, n), ws, act);
      for (Index j = 0; j < n; ++j) {
        Index best = 0;
        logits.col(j).maxCoeff(&best);
        correct += best == targets[c + j] ? 1 : 0;
      }
    }
    return static_cast<double>(correct) / static_cast<double>(batch);
  });
}

/// What evaluate returns.
struct Evaluation {
  double loss;      ///< the mean cross-entropy, as loss() computes it
  double accuracy;  ///< as accuracy() computes it
};

/// loss and accuracy on a labelled set in one forward pass (in chunks, through `ws`).
template <network P, class DX, class DL, activation Act = Swish>
Evaluation evaluate(const P& params, const Eigen::MatrixBase<DX>& X,
                    const Eigen::DenseBase<DL>& labels, Workspace<network_scalar_t<P>>& ws,
                    const Act& act = {}) {
  using T = network_scalar_t<P>;
  static_assert(std::is_integral_v<typename DL::Scalar>,
                "grove::nn::evaluate: labels must be integers");
  detail::require_scalar<T, DX>();
  const Eigen::Ref<const Matrix<T>, 0, Eigen::OuterStride<>> x(X.derived());
  const Index batch = x.cols();
  return detail::with_targets<T>("evaluate", labels, batch, [&](const auto& targets) {
    const Index classes = detail::engine<T>::outputs("evaluate", params, x.rows(), ws);
    detail::engine<T>::check("evaluate", targets, classes, batch);
    if (batch == 0) return Evaluation{std::numeric_limits<double>::quiet_NaN(), 0.0};
    T total = 0;
    std::size_t correct = 0;
    for (Index c = 0; c < batch; c += detail::inference_chunk) {
      const Index n = std::min(detail::inference_chunk, batch - c);
      Matrix<T> logits = batched_predict(params, x.middleCols(c, n), ws, act);
      T chunk_total = 0;  // summed as loss() sums, so that both give the same number
      for (Index j = 0; j < n; ++j) {
        Index best = 0;
        logits.col(j).maxCoeff(&best);
        const Index label = targets[c + j];
        correct += best == label ? 1 : 0;
        chunk_total += detail::log_sum_exp(logits.col(j).data(), classes) - logits(label, j);
      }
      total += chunk_total;
    }
    return Evaluation{static_cast<double>(total / static_cast<T>(batch)),
                      static_cast<double>(correct) / static_cast<double>(batch)};
  });
}

template <network P, class DX, class DL, activation Act = Swish>
double accuracy(const P& params, const Eigen::MatrixBase<DX>& X, const Eigen::DenseBase<DL>& labels,
                const Act& act = {}) {
  Workspace<network_scalar_t<P>> ws;
  return accuracy(params, X, labels, ws, act);
}

}  // namespace grove::nn
