// grove/nn/losses.hpp: the losses a model trains with, as function objects usable both as
// functions and as the `loss` argument of value_and_grad:
//
//   float l = nn::mse(predictions, targets);                          // the mean
//   Eigen::VectorXf each = nn::mse.per_example(predictions, targets);   // one value per column
//   auto [l, g] = nn::mse.value_and_grad(predictions, targets);         // g = dl / dpredictions
//   auto [loss, grads] = nn::value_and_grad(model, params, X, Y, nn::mse);
//
// Predictions and targets are (outputs x batch) matrices, one column per example;
// softmax_cross_entropy also takes integer labels (one per example). Every loss is the mean over
// the batch of a per-example value, and per_example returns those values: for
// softmax_cross_entropy each example's cross-entropy (what optax.softmax_cross_entropy returns);
// for the elementwise losses (mse, huber, sigmoid_binary_cross_entropy) the mean over that
// example's outputs, so that the loss is the mean over all elements, as torch's MSELoss and
// optax's losses followed by .mean() compute it (optax returns the elements unreduced; their
// mean over axis 0 of a (batch, outputs) array is per_example).
//
// A loss of one's own needs the two members the passes call: check(function, targets, outputs,
// batch), which throws for targets that do not fit, and column(targets, j, z, outputs, grad,
// scale), which returns example j's value and, with grad, overwrites its predictions z with
// scale * d value / dz (scale = 1 / batch).
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <concepts>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include "grove/nn/dense.hpp"
#include "grove/nn/workspace.hpp"

namespace grove::nn {

/// The loss and its gradient with respect to the predictions (outputs x batch).
template <class T>
struct LossAndGrad {
  T loss;
  Matrix<T> grad;
};

/// What value_and_grad accepts as a loss.
template <class L>
concept loss_function = requires(const L& l, float* z, const detail::dense_targets<float>& t) {
  { l.column(t, Index{}, z, Index{}, bool{}, float{}) } -> std::convertible_to<float>;
  l.check("", t, Index{}, Index{});
};

namespace detail {

template <class Derived>
struct loss_base {
  /// The mean loss over the batch.
  template <class DZ, class DY>
  typename DZ::Scalar operator()(const Eigen::MatrixBase<DZ>& predictions,
                                 const Eigen::DenseBase<DY>& Y) const {
    using T = typename DZ::Scalar;
    Matrix<T> z = predictions;
    return run(z, Y, false, static_cast<Vector<T>*>(nullptr));
  }
  /// Each example's value (see the top of grove/nn/losses.hpp); their mean is the loss.
  template <class DZ, class DY>
  Vector<typename DZ::Scalar> per_example(const Eigen::MatrixBase<DZ>& predictions,
                                          const Eigen::DenseBase<DY>& Y) const {
    using T = typename DZ::Scalar;
    Matrix<T> z = predictions;
    Vector<T> each(z.cols());
    run(z, Y, false, &each);
    return each;
  }
  /// {loss, d loss / d predictions}.
  template <class DZ, class DY>
  LossAndGrad<typename DZ::Scalar> value_and_grad(const Eigen::MatrixBase<DZ>& predictions,
                                                  const Eigen::DenseBase<DY>& Y) const {
    using T = typename DZ::Scalar;
    LossAndGrad<T> out{T(0), predictions};
    out.loss = run(out.grad, Y, true, static_cast<Vector<T>*>(nullptr));
    return out;
  }

 private:
  template <class T, class DY>
  T run(Matrix<T>& z, const Eigen::DenseBase<DY>& Y, bool grad, Vector<T>* each) const {
    const Derived& self = static_cast<const Derived&>(*this);
    const Index batch = z.cols(), rows = z.rows();
    return with_targets<T>(Derived::function, Y, batch, [&](const auto& targets) {
      self.check(Derived::function, targets, rows, batch);
      if (batch == 0) return std::numeric_limits<T>::quiet_NaN();
      const T scale = T(1) / static_cast<T>(batch);
      T total = 0;
      for (Index j = 0; j < batch; ++j) {
        const T v = self.column(targets, j, z.col(j).data(), rows, grad, scale);
        if (each) (*each)(j) = v;
        total += v;
      }
      return total / static_cast<T>(batch);
    });
  }
};

template <class Targets>
inline constexpr bool is_labels_v = false;
template <class I>
inline constexpr bool is_labels_v<label_targets<I>> = true;

// The elementwise losses take a matrix of targets, never labels.
template <class Targets>
void require_matrix_targets(const char* function, const Targets& t, Index rows, Index batch) {
  if constexpr (is_labels_v<Targets>) {
    (void)t;
    (void)rows;
    (void)batch;
    fail(function, "takes a matrix of targets (outputs x batch), not integer labels");
  } else {
    check_targets(function, t, rows, batch);
  }
}

// What the elementwise losses share: a matrix of targets (never labels), and each example's
// value the mean over its outputs of Derived's elementwise terms. Derived::sum_and_grad(z, y, n,
// grad, scale) gets the column's predictions z and targets y (arrays of n elements), returns the
// sum of its terms and, with grad, overwrites z with scale * d value / dz (the value being that
// sum / n).
template <class Derived>
struct elementwise_loss : loss_base<Derived> {
  template <class Targets>
  void check(const char* fn, const Targets& t, Index rows, Index batch) const {
    require_matrix_targets(fn, t, rows, batch);
  }
  template <class Targets, class T>
  T column(const Targets& t, Index j, T* z, Index rows, bool grad, T scale) const {
    if constexpr (is_labels_v<Targets>) {
      return T(0);  // refused by check
    } else {
      Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> zc(z, rows);
      Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> y(t.y.col(j), rows);
      const T n = static_cast<T>(rows);
      return static_cast<const Derived&>(*this).sum_and_grad(zc, y, n, grad, scale) / n;
    }
  }
};

}  // namespace detail

/// optax.softmax_cross_entropy (with integer labels: softmax_cross_entropy_with_integer_labels)
/// of logits (classes x batch): per example -sum_i y_i log softmax(z)_i, the log-softmax stable
/// for huge logits; the loss is the mean over the batch. Y: integer labels in [0, classes) or a
/// (classes x batch) matrix of targets (one-hot or any probabilities). Its gradient per column
/// is (softmax(z) * sum(y) - y) / batch.
struct SoftmaxCrossEntropy : detail::loss_base<SoftmaxCrossEntropy> {
  static constexpr const char* function = "softmax_cross_entropy";
  template <class Targets>
  void check(const char* fn, const Targets& t, Index rows, Index batch) const {
    detail::check_targets(fn, t, rows, batch);
  }
  template <class Targets, class T>
  T column(const Targets& t, Index j, T* z, Index rows, bool grad, T scale) const {
    return detail::softmax_ce_columns{}.column(t, j, z, rows, grad, scale);
  }
};

/// optax.sigmoid_binary_cross_entropy of logits z and targets y in [0, 1] (outputs x batch),
/// elementwise -y log sigmoid(z) - (1 - y) log(1 - sigmoid(z)), computed as
/// max(z, 0) - z y + log1p(exp(-|z|)); the loss is the mean over all elements. Its gradient is
/// (sigmoid(z) - y) / (outputs * batch). Unlike optax, which computes the formula for any y,
/// throws grove::argument_error for a target outside [0, 1] or NaN, naming its output and example,
/// before any work: such a y is no probability, and the loss is then unbounded below (a model
/// trained on it diverges).
struct SigmoidBinaryCrossEntropy : detail::elementwise_loss<SigmoidBinaryCrossEntropy> {
  static constexpr const char* function = "sigmoid_binary_cross_entropy";
  template <class Targets>
  void check(const char* fn, const Targets& t, Index rows, Index batch) const {
    detail::require_matrix_targets(fn, t, rows, batch);
    if constexpr (!detail::is_labels_v<Targets>) {
      for (Index j = 0; j < batch; ++j) {
        const auto* y = t.y.col(j);
        for (Index i = 0; i < rows; ++i)
          if (!(y[i] >= 0 && y[i] <= 1))
            detail::fail(fn, std::string(fn == std::string_view(function)
                                             ? "target "
                                             : "sigmoid_binary_cross_entropy's target ") +
                                 std::to_string(y[i]) + " at output " + std::to_string(i) +
                                 " of example " + std::to_string(j) +
                                 " is outside [0, 1] (targets are probabilities)");
      }
    }
  }
  /// One example's elementwise terms, summed (see detail::elementwise_loss).
  template <class Z, class Y, class T>
  T sum_and_grad(Z& zc, const Y& y, T n, bool grad, T scale) const {
    const T sum = (zc.max(T(0)) - zc * y + (-zc.abs()).exp().log1p()).sum();
    if (grad) zc = (zc.logistic() - y) * (scale / n);
    return sum;
  }
};

/// The mean squared error, as torch.nn.MSELoss: the mean over all elements of (z - y)^2
/// (optax.squared_error, then the mean). Its gradient is 2 (z - y) / (outputs * batch).
struct Mse : detail::elementwise_loss<Mse> {
  static constexpr const char* function = "mse";
  /// One example's elementwise terms, summed (see detail::elementwise_loss).
  template <class Z, class Y, class T>
  T sum_and_grad(Z& zc, const Y& y, T n, bool grad, T scale) const {
    const T sum = (zc - y).square().sum();
    if (grad) zc = (zc - y) * (T(2) * scale / n);
    return sum;
  }
};

/// optax.huber_loss(z, y, delta), then the mean over all elements: with r = z - y,
/// 0.5 r^2 where |r| <= delta and delta (|r| - 0.5 delta) elsewhere. Its gradient is r clipped to
/// [-delta, delta], divided by outputs * batch.
struct Huber : detail::elementwise_loss<Huber> {
  static constexpr const char* function = "huber";
  double delta = 1.0;

  /// One example's elementwise terms, summed (see detail::elementwise_loss).
  template <class Z, class Y, class T>
  T sum_and_grad(Z& zc, const Y& y, T n, bool grad, T scale) const {
    const T d = static_cast<T>(delta);
    T sum = 0;
    for (Index i = 0; i < zc.size(); ++i) {
      const T r = zc(i) - y(i), a = std::abs(r);
      const T quadratic = std::min(a, d);
      sum += T(0.5) * quadratic * quadratic + d * (a - quadratic);
      if (grad) zc(i) = std::clamp(r, -d, d) * (scale / n);
    }
    return sum;
  }
  /// huber with another delta: nn::huber(0.5).
  Huber operator()(double new_delta) const {
    if (!(new_delta > 0))
      detail::fail("huber", "delta must be positive, got " + std::to_string(new_delta));
    Huber h;
    h.delta = new_delta;
    return h;
  }
  using detail::loss_base<Huber>::operator();
};

inline constexpr SoftmaxCrossEntropy softmax_cross_entropy{};
inline constexpr SigmoidBinaryCrossEntropy sigmoid_binary_cross_entropy{};
inline constexpr Mse mse{};
/// huber with delta 1 (optax's default); huber(delta) for another.
inline constexpr Huber huber{};

}  // namespace grove::nn
