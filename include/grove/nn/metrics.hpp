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

/// What evaluate returns. Of a set of no examples both are NaN: each is a mean over the examples,
/// and a mean of nothing is NaN, as loss() and value_and_grad of an empty batch and jnp.mean of an
/// empty array give it (an accuracy of 0 would claim that every example was wrong).
struct Evaluation {
  double loss;      ///< the mean cross-entropy, as loss() computes it
  double accuracy;  ///< as accuracy() computes it
};

namespace detail {

// The scoring behind every evaluate and accuracy: logits_into(c, n, logits) writes the logits of
// examples [c, c + n) into `logits` (classes x n), one chunk at a time, always into the same
// memory of ws (grown once, to the first chunk); each chunk's loss is summed as loss() sums it,
// so that both give the same number.
template <class T, class Targets, class LogitsInto>
Evaluation score_in_chunks(const Targets& targets, Index classes, Index batch, Workspace<T>& ws,
                           LogitsInto&& logits_into) {
  if (batch == 0)
    return Evaluation{std::numeric_limits<double>::quiet_NaN(),
                      std::numeric_limits<double>::quiet_NaN()};
  const Index widest = std::min(inference_chunk, batch);
  if (memory_of(ws).predictions.size() < classes * widest)
    memory_of(ws).predictions.resize(classes, widest);
  T total = 0;
  std::size_t correct = 0;
  for (Index c = 0; c < batch; c += inference_chunk) {
    const Index n = std::min(inference_chunk, batch - c);
    Eigen::Map<Matrix<T>> logits(memory_of(ws).predictions.data(), classes, n);
    logits_into(c, n, logits);
    T chunk_total = 0;
    for (Index j = 0; j < n; ++j) {
      Index best = 0;
      logits.col(j).maxCoeff(&best);
      const Index label = targets[c + j];
      correct += best == label ? 1 : 0;
      chunk_total += log_sum_exp(logits.col(j).data(), classes) - logits(label, j);
    }
    total += chunk_total;
  }
  return Evaluation{static_cast<double>(total / static_cast<T>(batch)),
                    static_cast<double>(correct) / static_cast<double>(batch)};
}

// evaluate and accuracy of a network (a range of Dense layers with one activation), named
// `function` in errors.
template <network P, class DX, class DL, activation Act>
Evaluation evaluate_network(const char* function, const P& params, const Eigen::MatrixBase<DX>& X,
                            const Eigen::DenseBase<DL>& labels, Workspace<network_scalar_t<P>>& ws,
                            const Act& act) {
  using T = network_scalar_t<P>;
  require_scalar<T, DX>();
  const Eigen::Ref<const Matrix<T>, 0, Eigen::OuterStride<>> x(X.derived());
  const Index batch = x.cols();
  return with_targets<T>(function, labels, batch, [&](const auto& targets) {
    const Index classes = engine<T>::outputs(function, params, x.rows(), ws);
    engine<T>::check(function, targets, classes, batch);
    return score_in_chunks<T>(targets, classes, batch, ws, [&](Index c, Index n, auto& logits) {
      engine<T>::template run<engine<T>::mode::predict>(
          function, uniform_net<const P, Act, P>{&params, nullptr, &act},
          View<const T>{x.data() + c * x.outerStride(), x.rows(), n, x.outerStride()}, nullptr,
          softmax_ce_columns{}, View<T>{logits.data(), classes, n, classes}, ws);
    });
  });
}

}  // namespace detail

/// The fraction of examples (columns of X) whose largest logit is at their label (in [0, 1]; NaN
/// of no examples). labels: one integer per example. Computed in chunks through `ws`.
template <network P, class DX, class DL, activation Act = Swish>
double accuracy(const P& params, const Eigen::MatrixBase<DX>& X, const Eigen::DenseBase<DL>& labels,
                Workspace<network_scalar_t<P>>& ws, const Act& act = {}) {
  static_assert(std::is_integral_v<typename DL::Scalar>,
                "grove::nn::accuracy: labels must be integers");
  return detail::evaluate_network("accuracy", params, X, labels, ws, act).accuracy;
}

/// loss and accuracy on a labelled set in one forward pass (in chunks, through `ws`).
template <network P, class DX, class DL, activation Act = Swish>
Evaluation evaluate(const P& params, const Eigen::MatrixBase<DX>& X,
                    const Eigen::DenseBase<DL>& labels, Workspace<network_scalar_t<P>>& ws,
                    const Act& act = {}) {
  static_assert(std::is_integral_v<typename DL::Scalar>,
                "grove::nn::evaluate: labels must be integers");
  return detail::evaluate_network("evaluate", params, X, labels, ws, act);
}

/// The same as accuracy with a scratch workspace of its own.
template <network P, class DX, class DL, activation Act = Swish>
double accuracy(const P& params, const Eigen::MatrixBase<DX>& X, const Eigen::DenseBase<DL>& labels,
                const Act& act = {}) {
  Workspace<network_scalar_t<P>> ws;
  return accuracy(params, X, labels, ws, act);
}

}  // namespace grove::nn
