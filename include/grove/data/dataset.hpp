// grove/data/dataset.hpp: an in-memory dataset of examples as columns, as grove::nn takes them
// (inputs features x n; targets one label per example, or targets x n), and the operations on
// whole datasets: a random split, a subset, the check that inputs and targets agree.
//
//   grove::data::Dataset<float> train{images, labels};          // labels: Eigen::VectorXi
//   grove::data::Dataset<float, Eigen::MatrixXf> fit{x, y};     // y: targets x n
//   auto [train, test] = grove::data::random_split(all, 354, key);
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "grove/error.hpp"
#include "grove/random/distributions.hpp"
#include "grove/random/key.hpp"

namespace grove::data {

/// A dynamic matrix of T, the storage of a dataset's inputs (and of its targets when they are
/// not labels).
template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;

/// What a dataset's targets may be: one label per example (a column vector of integers, as
/// grove::nn's classification losses take them), or a plain dynamic matrix with one column per
/// example (regression targets, one-hot rows...).
template <class Y>
concept target_storage = std::is_base_of_v<Eigen::PlainObjectBase<Y>, Y> &&
    ((Y::ColsAtCompileTime == 1 && std::is_integral_v<typename Y::Scalar>) ||
     (Y::RowsAtCompileTime == Eigen::Dynamic && Y::ColsAtCompileTime == Eigen::Dynamic &&
      !Y::IsRowMajor));

/// Whether a target storage holds one label per example (rather than a column).
template <target_storage Y>
inline constexpr bool is_labels_v = Y::ColsAtCompileTime == 1;

/// n examples as columns: `inputs` is features x n, `targets` one label per example
/// (Eigen::VectorXi, the default) or targets x n. A plain aggregate: build it with braces, change
/// its members freely; whatever reads it (batches, random_split, subset) first checks that the
/// two hold the same number of examples (shape_error otherwise).
template <class T = float, target_storage Y = Eigen::VectorXi>
struct Dataset {
  using scalar_type = T;
  using targets_type = Y;
  Matrix<T> inputs;
  Y targets;
  /// The number of examples (the inputs' columns).
  Eigen::Index size() const { return inputs.cols(); }
  /// The number of input features (the inputs' rows).
  Eigen::Index features() const { return inputs.rows(); }
};

/// The number of examples `targets` holds.
template <target_storage Y>
Eigen::Index example_count(const Y& targets) {
  if constexpr (is_labels_v<Y>)
    return targets.size();
  else
    return targets.cols();
}

/// shape_error naming `function` unless the dataset's inputs and targets hold as many examples.
template <class T, class Y>
void check_dataset(const Dataset<T, Y>& d, const char* function) {
  const Eigen::Index n = example_count(d.targets);
  if (n != d.inputs.cols())
    throw shape_error(std::string(function) + ": the dataset's inputs hold " +
                      std::to_string(d.inputs.cols()) + " examples (columns of a " +
                      std::to_string(d.inputs.rows()) + " x " + std::to_string(d.inputs.cols()) +
                      " matrix) but its targets " + std::to_string(n));
}

namespace detail {
// Example `from` of a dataset's targets copied to example `to` of another's.
template <class Y, class Out>
void copy_target(const Y& from, Eigen::Index i, Out& to, Eigen::Index j) {
  if constexpr (is_labels_v<Y>)
    to(j) = from(i);
  else
    to.col(j) = from.col(i);
}
}  // namespace detail

/// The examples `indices` of `d` (in that order; repeats allowed), as torch.utils.data.Subset
/// chooses them. argument_error naming the position of an index outside [0, size).
template <class T, class Y, class Indices>
Dataset<T, Y> subset(const Dataset<T, Y>& d, const Indices& indices) {
  check_dataset(d, "grove::data::subset");
  const auto m = static_cast<Eigen::Index>(indices.size());
  for (Eigen::Index j = 0; j < m; ++j) {
    const auto i = static_cast<std::int64_t>(indices[static_cast<std::size_t>(j)]);
    if (i < 0 || i >= d.size())
      throw argument_error("grove::data::subset: index " + std::to_string(i) + " (position " +
                           std::to_string(j) + ") is outside the dataset's " +
                           std::to_string(d.size()) + " examples");
  }
  Dataset<T, Y> out;
  out.inputs.resize(d.inputs.rows(), m);
  if constexpr (is_labels_v<Y>)
    out.targets.resize(m);
  else
    out.targets.resize(d.targets.rows(), m);
  for (Eigen::Index j = 0; j < m; ++j) {
    const auto i = static_cast<Eigen::Index>(indices[static_cast<std::size_t>(j)]);
    out.inputs.col(j) = d.inputs.col(i);
    detail::copy_target(d.targets, i, out.targets, j);
  }
  return out;
}

/// `d` split at random in two: the first `first_size` examples of `random::permutation(key, n)`
/// (JAX's order, so a Python program with the same key splits the same way) and the rest, as
/// torch.utils.data.random_split does with two lengths. argument_error when first_size is
/// outside [0, n].
template <class T, class Y>
std::pair<Dataset<T, Y>, Dataset<T, Y>> random_split(const Dataset<T, Y>& d,
                                                     Eigen::Index first_size,
                                                     const random::Key& key) {
  check_dataset(d, "grove::data::random_split");
  if (first_size < 0 || first_size > d.size())
    throw argument_error("grove::data::random_split: a first part of " +
                         std::to_string(first_size) + " examples does not fit a dataset of " +
                         std::to_string(d.size()));
  const auto order = random::permutation(key, d.size());
  const std::span<const std::int32_t> order_span(order.data(),
                                                 static_cast<std::size_t>(order.size()));
  return {subset(d, order_span.first(static_cast<std::size_t>(first_size))),
          subset(d, order_span.subspan(static_cast<std::size_t>(first_size)))};
}

}  // namespace grove::data
