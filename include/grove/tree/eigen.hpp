// grove/tree/eigen.hpp: Eigen arrays as first-class leaves: shape, size and ravel (JAX's
// jax.flatten_util.ravel_pytree) for trees of Eigen::Matrix / Eigen::Array / Eigen::Map leaves,
// N-D Eigen::Tensor / Eigen::TensorFixedSize / Eigen::TensorMap leaves (whose header the user
// includes, or grove/tree/tensor.hpp) and scalars.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "grove/error.hpp"
#include "grove/tree/detail/eigen_tensor.hpp"
#include "grove/tree/ops.hpp"

namespace grove {

namespace detail {
template <class T>
concept eigen_dense = std::is_base_of_v<Eigen::DenseBase<T>, T>;
template <class T>
constexpr bool eigen_vector() {
  return T::ColsAtCompileTime == 1 || T::RowsAtCompileTime == 1;
}
}  // namespace detail

/// A leaf's shape as JAX reports it: () for a scalar, (n,) for an Eigen vector (row or column),
/// (rows, cols) for a matrix or array, (d0, ..., dN-1) for a rank-N Eigen tensor (its dimensions,
/// dimension 0 first whatever its storage order: numpy's shape of the same array). A std::array,
/// so a tree of shapes is a tree of tuples, as in JAX.
template <class T>
auto shape(const T& x) {
  if constexpr (std::is_arithmetic_v<T>) {
    (void)x;
    return std::array<Eigen::Index, 0>{};
  } else if constexpr (detail::eigen_tensor<T>) {
    std::array<Eigen::Index, detail::tensor_rank<T>> out{};
    for (std::size_t d = 0; d < out.size(); ++d)
      out[d] = static_cast<Eigen::Index>(x.dimensions()[d]);
    return out;
  } else if constexpr (detail::eigen_vector<T>()) {
    return std::array<Eigen::Index, 1>{x.size()};
  } else {
    static_assert(detail::eigen_dense<T>, "grove: shape() takes a scalar or an Eigen dense object");
    return std::array<Eigen::Index, 2>{x.rows(), x.cols()};
  }
}

/// The number of elements of a leaf: 1 for a scalar (and for a rank-0 tensor). Constrained to
/// scalars, Eigen dense objects and Eigen tensors, so that it never competes with std::size in
/// an unqualified call on a container.
template <class T>
requires(std::is_arithmetic_v<T> || detail::eigen_dense<T> || detail::eigen_tensor<T>) Eigen::Index
    size(const T& x) {
  if constexpr (std::is_arithmetic_v<T>) {
    (void)x;
    return 1;
  } else {
    return static_cast<Eigen::Index>(x.size());
  }
}

/// The element type of a leaf: the scalar itself, or an Eigen object's (matrix or tensor) Scalar.
template <class T>
using scalar_t = typename detail::scalar_of<T>::type;

/// The number of elements of all leaves together.
template <class Tree>
Eigen::Index tree_size(const Tree& tree) {
  return tree_reduce([](Eigen::Index acc, const auto& leaf) { return acc + grove::size(leaf); },
                     tree, Eigen::Index{0});
}

namespace detail {
template <class Tree>
struct ravel_scalar {
  template <class... Ls>
  static auto pick(type_list<Ls...>) {
    static_assert(sizeof...(Ls) > 0, "grove: ravel needs a tree with at least one leaf type");
    using S = typename scalar_of<std::tuple_element_t<0, std::tuple<Ls...>>>::type;
    static_assert(
        !std::is_void_v<S> && (std::is_same_v<typename scalar_of<Ls>::type, S> && ...),
        "grove: ravel needs every leaf to be an Eigen array or scalar of one scalar type");
    return std::type_identity<S>{};
  }
  using type = typename decltype(pick(leaf_types_t<Tree, no_leaf_pred>{}))::type;
};

template <class Leaf, class S>
void copy_out(const Leaf& leaf, S*& out) {
  if constexpr (std::is_arithmetic_v<Leaf>) {
    *out++ = leaf;
  } else if constexpr (eigen_tensor<Leaf>) {
    // A tensor's elements are contiguous in its storage order: one copy (a memcpy).
    out = std::copy_n(leaf.data(), static_cast<std::size_t>(leaf.size()), out);
  } else {
    // Storage order (column-major unless the leaf says otherwise): one memcpy for plain objects.
    Eigen::Map<typename Leaf::PlainObject> view(out, leaf.rows(), leaf.cols());
    view = leaf;
    out += leaf.size();
  }
}

template <class Leaf, class S>
void copy_in(Leaf& leaf, const S*& in) {
  if constexpr (std::is_arithmetic_v<Leaf>) {
    leaf = *in++;
  } else if constexpr (eigen_tensor<Leaf>) {
    const auto n = static_cast<std::size_t>(leaf.size());
    std::copy_n(in, n, leaf.data());
    in += n;
  } else {
    leaf = Eigen::Map<const typename Leaf::PlainObject>(in, leaf.rows(), leaf.cols());
    in += leaf.size();
  }
}
}  // namespace detail

/// The scalar type shared by every leaf of Tree, as ravel requires.
template <class Tree>
using ravel_scalar_t = typename detail::ravel_scalar<std::remove_cvref_t<Tree>>::type;

/// Writes every leaf, in leaf order, into `out` (which must hold tree_size(tree) elements). Each
/// leaf is written in its storage order (column-major by default, for matrices and tensors
/// alike). No allocation.
template <class Tree>
void ravel_into(const Tree& tree, ravel_scalar_t<Tree>* out) {
  tree_for_each([&](const auto& leaf) { detail::copy_out(leaf, out); }, tree);
}

/// Reads every leaf back from `in`, the inverse of ravel_into. Leaves keep their shapes.
template <class Tree>
void unravel_into(const ravel_scalar_t<Tree>* in, Tree& tree) {
  tree_for_each([&](auto& leaf) { detail::copy_in(leaf, in); }, tree);
}

/// One contiguous vector holding every leaf (jax.flatten_util.ravel_pytree), and a function that
/// turns such a vector back into a tree of tree's type and shapes. Within a matrix or tensor leaf
/// the elements follow Eigen's storage order (column-major unless the leaf is RowMajor), where
/// JAX's follow row-major order: the copy is then a plain memcpy per leaf.
template <class Tree>
auto ravel(const Tree& tree) {
  using S = ravel_scalar_t<Tree>;
  using Vector = Eigen::Matrix<S, Eigen::Dynamic, 1>;
  Vector flat(tree_size(tree));
  ravel_into(tree, flat.data());
  std::function<Tree(const Vector&)> unravel = [like = tree, n = flat.size()](const Vector& v) {
    if (v.size() != n)
      throw shape_error("grove::ravel: unravel expects a vector of " + std::to_string(n) +
                        " elements, got " + std::to_string(v.size()));
    Tree out = like;
    unravel_into(v.data(), out);
    return out;
  };
  return std::pair{std::move(flat), std::move(unravel)};
}

}  // namespace grove
