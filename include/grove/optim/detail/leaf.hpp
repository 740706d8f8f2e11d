// grove/optim/detail/leaf.hpp: what the optimizers need of a leaf: its elements as one contiguous
// Eigen array (a scalar is an array of one), zeros and constants shaped like it.
#pragma once

#include <Eigen/Core>
#include <type_traits>

#include "grove/tree/eigen.hpp"

namespace grove::optim::detail {

using Index = Eigen::Index;

/// Whether L is a leaf the optimizers can update: a plain Eigen matrix / array, a float or double.
template <class L>
constexpr bool numeric_leaf() {
  if constexpr (std::is_floating_point_v<L>)
    return true;
  else if constexpr (requires { typename L::Scalar; })
    return std::is_base_of_v<Eigen::PlainObjectBase<L>, L> &&
           std::is_floating_point_v<typename L::Scalar>;
  else
    return false;
}

/// A leaf's elements as one contiguous array (a Map; a scalar is an array of one).
template <class L>
auto flat(L& leaf) {
  using Plain = std::remove_const_t<L>;
  static_assert(numeric_leaf<Plain>(),
                "grove::optim: every leaf of the parameters, gradients and optimizer states must "
                "be an Eigen::Matrix / Eigen::Array of float or double, or a float / double");
  using S = ::grove::scalar_t<Plain>;
  using A = Eigen::Array<S, Eigen::Dynamic, 1>;
  using M = Eigen::Map<std::conditional_t<std::is_const_v<L>, const A, A>>;
  if constexpr (std::is_arithmetic_v<Plain>)
    return M(&leaf, 1);
  else
    return M(leaf.data(), leaf.size());
}

/// The number of elements of a leaf.
template <class L>
Index leaf_size(const L& leaf) {
  if constexpr (std::is_arithmetic_v<L>)
    return 1;
  else
    return leaf.size();
}

/// A leaf of L's type and shape with every element equal to value (rounded to its scalar once).
template <class L>
L full_like(const L& leaf, double value) {
  static_assert(numeric_leaf<L>(),
                "grove::optim: every leaf must be an Eigen::Matrix / Eigen::Array of float or "
                "double, or a float / double");
  if constexpr (std::is_arithmetic_v<L>) {
    (void)leaf;
    return static_cast<L>(value);
  } else {
    return L::Constant(leaf.rows(), leaf.cols(), static_cast<typename L::Scalar>(value));
  }
}

}  // namespace grove::optim::detail
