// grove/data/transforms.hpp: what programs do to their data before training: standardisation
// fitted on the training set and applied to every set, and one-hot targets.
//
//   const auto scale = grove::data::fit_standardizer(train.inputs);
//   scale.apply_inplace(train.inputs);
//   scale.apply_inplace(test.inputs);           // the training set's statistics, not its own
//   Eigen::MatrixXf y = grove::data::one_hot<float>(train.targets, 10);
#pragma once

#include <Eigen/Core>
#include <cmath>
#include <string>

#include "grove/data/dataset.hpp"
#include "grove/error.hpp"

namespace grove::data {

/// Per-feature means and standard deviations of a training set, to map every set's features to
/// mean 0 and standard deviation 1 with the same constants (scikit-learn's StandardScaler).
template <class T>
struct Standardizer {
  Eigen::Matrix<T, Eigen::Dynamic, 1> mean;
  /// The divisor of each feature: its standard deviation (population: divided by n), or 1 for a
  /// feature that is constant on the training set, so that it maps to 0 instead of NaN.
  Eigen::Matrix<T, Eigen::Dynamic, 1> scale;

  /// (x - mean) / scale, feature by feature (rows of x are features, columns examples).
  /// shape_error when x has another number of features.
  template <class Derived>
  void apply_inplace(Eigen::MatrixBase<Derived>& x) const {
    check(x.rows(), "apply_inplace");
    x.derived().array().colwise() -= mean.array();
    x.derived().array().colwise() /= scale.array();
  }
  template <class Derived>
  void apply_inplace(Eigen::MatrixBase<Derived>&& x) const {
    apply_inplace(x);
  }
  /// The inverse: x * scale + mean (predictions back in the target's own units).
  template <class Derived>
  void invert_inplace(Eigen::MatrixBase<Derived>& x) const {
    check(x.rows(), "invert_inplace");
    x.derived().array().colwise() *= scale.array();
    x.derived().array().colwise() += mean.array();
  }

 private:
  void check(Eigen::Index rows, const char* what) const {
    if (rows != mean.size())
      throw shape_error("grove::data::Standardizer::" + std::string(what) + ": " +
                        std::to_string(rows) + " features, but it was fitted on " +
                        std::to_string(mean.size()));
  }
};

/// The Standardizer of `x` (features x n): each row's mean and population standard deviation,
/// accumulated in double. argument_error for no examples; argument_error naming the feature when
/// a value is NaN or infinite.
template <class Derived>
Standardizer<typename Derived::Scalar> fit_standardizer(const Eigen::MatrixBase<Derived>& x) {
  using T = typename Derived::Scalar;
  static_assert(std::is_floating_point_v<T>, "grove::data::fit_standardizer: floating-point data");
  if (x.cols() == 0) throw argument_error("grove::data::fit_standardizer: no examples to fit on");
  Standardizer<T> s;
  s.mean.resize(x.rows());
  s.scale.resize(x.rows());
  for (Eigen::Index f = 0; f < x.rows(); ++f) {
    const auto row = x.row(f).template cast<double>();
    if (!row.allFinite())
      throw argument_error("grove::data::fit_standardizer: feature " + std::to_string(f) +
                           " has a NaN or infinite value");
    const double m = row.mean();
    const double sd = std::sqrt((row.array() - m).square().mean());
    s.mean(f) = static_cast<T>(m);
    s.scale(f) = sd > 0 && std::isfinite(static_cast<T>(sd)) && static_cast<T>(sd) > 0
                     ? static_cast<T>(sd)
                     : T(1);
  }
  return s;
}

/// Labels as one-hot columns: a classes x n matrix with a 1 in row labels(j) of column j
/// (jax.nn.one_hot, transposed to grove's examples-as-columns). argument_error naming the
/// example whose label is outside [0, classes).
template <class T = float, class Derived>
Matrix<T> one_hot(const Eigen::MatrixBase<Derived>& labels, Eigen::Index classes) {
  static_assert(Derived::ColsAtCompileTime == 1 && std::is_integral_v<typename Derived::Scalar>,
                "grove::data::one_hot: labels are a column vector of integers");
  if (classes < 1)
    throw argument_error("grove::data::one_hot: " + std::to_string(classes) +
                         " classes (at least 1)");
  Matrix<T> out = Matrix<T>::Zero(classes, labels.size());
  for (Eigen::Index j = 0; j < labels.size(); ++j) {
    const auto c = static_cast<long long>(labels(j));
    if (c < 0 || c >= classes)
      throw argument_error("grove::data::one_hot: label " + std::to_string(c) + " of example " +
                           std::to_string(j) + " is outside [0, " + std::to_string(classes) + ")");
    out(static_cast<Eigen::Index>(c), j) = T(1);
  }
  return out;
}

}  // namespace grove::data
