// grove/optim/tree_utils.hpp: the tree utilities the transformations use, public (optax's
// global_norm and optax.tree_utils): norms, zeros, constants and finiteness of whole pytrees.
#pragma once

#include <cmath>

#include "grove/optim/detail/leaf.hpp"
#include "grove/optim/detail/pass.hpp"
#include "grove/tree.hpp"

namespace grove::optim {

/// The squared L2 norm of every element of the tree together (optax.tree_utils.tree_l2_norm with
/// squared=True), accumulated in double whatever the leaves' scalar types, in a fixed order of
/// blocks: the same value for every thread count. Allocates nothing.
template <class Tree>
double squared_global_norm(const Tree& tree) {
  return detail::sum_of_squares(tree);
}

/// optax.global_norm: the L2 norm of all the tree's elements together, sqrt of the sum of
/// squares, accumulated in double (optax sums in the leaves' type). Allocates nothing.
template <class Tree>
double global_norm(const Tree& tree) {
  return std::sqrt(detail::sum_of_squares(tree));
}

/// optax.tree_utils.tree_zeros_like: a tree of tree's type with every element 0.
template <class Tree>
Tree tree_zeros_like(const Tree& tree) {
  return tree_map([](const auto& leaf) { return detail::full_like(leaf, 0.0); }, tree);
}

/// optax.tree_utils.tree_full_like: a tree of tree's type with every element `value` (rounded
/// once to each leaf's scalar type).
template <class Tree>
Tree tree_full_like(const Tree& tree, double value) {
  return tree_map([value](const auto& leaf) { return detail::full_like(leaf, value); }, tree);
}

/// Whether every element of the tree is finite (no NaN, no infinity), as apply_if_finite checks
/// the updates. Allocates nothing.
template <class Tree>
bool tree_all_finite(const Tree& tree) {
  return detail::all_finite(tree);
}

}  // namespace grove::optim
