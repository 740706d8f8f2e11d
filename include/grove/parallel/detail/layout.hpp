// grove/parallel/detail/layout.hpp: where each device's piece lies in a gathered array, and the
// leaf types of all_gather's and psum_scatter's results.
//
// all_gather puts the devices' pieces side by side along an axis of a larger array, and
// psum_scatter takes such an array apart again. In the larger array's storage, the pieces
// interleave in chunks: for a piece of `outer` chunks of `chunk` contiguous elements, element i of
// chunk o of device r's piece sits at (o * n + r) * chunk + i, n devices. Stacking along axis a
// (a new axis of length n) and tiling along axis a (an existing axis, n times longer) differ only
// in `chunk`, which is the product of the piece's dimensions that vary faster in storage than
// the axis (and, tiled, the axis itself).
#pragma once

#include <Eigen/Core>
#include <array>
#include <cstddef>
#include <span>
#include <type_traits>

#include "grove/parallel/detail/agree.hpp"
#include "grove/tree/eigen.hpp"

// Eigen's tensor class, named without its module (declared with the same parameters as in
// <unsupported/Eigen/CXX11/Tensor>): the result types of tensor leaves are written in templates
// that are only instantiated for a tensor leaf, whose program has the module.
namespace Eigen {
template <typename Scalar_, int NumIndices_, int Options_, typename IndexType>
class Tensor;
}  // namespace Eigen

namespace grove::parallel::detail {

// numpy's ndim of a leaf: 0 for a number, 1 for an Eigen vector, 2 for an Eigen matrix, the rank
// of a tensor.
template <class L>
constexpr int leaf_ndim() {
  if constexpr (byte_element<L>)  // a number: arithmetic, 16-bit float or complex
    return 0;
  else if constexpr (tensor_leaf<L>)
    return static_cast<int>(L::NumDimensions);
  else if constexpr (::grove::detail::eigen_vector<L>())
    return 1;
  else
    return 2;
}

// Whether a leaf's last dimension varies fastest in storage (a row-major matrix or tensor).
template <class L>
constexpr bool leaf_row_major() {
  if constexpr (tensor_leaf<L>)
    return static_cast<int>(L::Layout) == static_cast<int>(Eigen::RowMajor);
  else if constexpr (leaf_ndim<L>() == 2)
    return L::IsRowMajor;
  else
    return false;
}

// A leaf's dimensions (numpy's shape), its number of elements and their type, numbers of every
// element type broadcast takes included (a 16-bit float or complex number is a leaf of shape ()).
template <class L>
auto leaf_dims(const L& leaf) {
  if constexpr (byte_element<L>) {
    (void)leaf;
    return std::array<Eigen::Index, 0>{};
  } else {
    return ::grove::shape(leaf);
  }
}
template <class L>
std::size_t leaf_elements(const L& leaf) {
  if constexpr (byte_element<L>) {
    (void)leaf;
    return 1;
  } else {
    return static_cast<std::size_t>(::grove::size(leaf));
  }
}
template <class L>
struct element_of {
  using type = typename L::Scalar;
};
template <class L>
requires byte_element<L>
struct element_of<L> {
  using type = L;
};
template <class L>
using element_t = typename element_of<L>::type;

// An axis in [-ndim, ndim) as numpy counts it, or -1 when it is out of range.
inline int normalize_axis(int axis, int ndim) {
  if (axis < -ndim || axis >= ndim) return -1;
  return axis < 0 ? axis + ndim : axis;
}

// How a device's piece lies in the gathered array: `outer` chunks of `chunk` elements.
struct interleave {
  std::size_t chunk = 0;
  std::size_t outer = 0;
};

// The piece's dimensions `dims` (numpy order), the storage order of the gathered array, the axis
// of the gathered array along which the pieces lie, and whether it is a new axis (stacked) or
// one of the piece's (tiled).
inline interleave interleave_of(std::span<const Eigen::Index> dims, bool row_major, int axis,
                                bool stacked) {
  auto product = [&](std::size_t b, std::size_t e) {
    std::size_t p = 1;
    for (std::size_t d = b; d < e; ++d) p *= static_cast<std::size_t>(dims[d]);
    return p;
  };
  const auto a = static_cast<std::size_t>(axis), D = dims.size();
  if (row_major) return {product(a, D), product(0, a)};
  const std::size_t fast = stacked ? a : a + 1;  // the dimensions before the axis, and it tiled
  return {product(0, fast), product(fast, D)};
}

// --- result leaf types ---------------------------------------------------------------------------

template <class L, class S, int Rows, int Cols, int Options>
using dense_like_t =
    std::conditional_t<std::is_base_of_v<Eigen::ArrayBase<L>, L>,
                       Eigen::Array<S, Rows, Cols, Options>, Eigen::Matrix<S, Rows, Cols, Options>>;

// A dynamic vector of L's kind (Matrix or Array) and orientation.
template <class L>
using vector_like_t =
    std::conditional_t<L::ColsAtCompileTime == 1,
                       dense_like_t<L, typename L::Scalar, Eigen::Dynamic, 1, Eigen::ColMajor>,
                       dense_like_t<L, typename L::Scalar, 1, Eigen::Dynamic, Eigen::RowMajor>>;

template <class L, int Rank>
using tensor_like_t = Eigen::Tensor<typename L::Scalar, Rank, L::Layout, typename L::Index>;

// The leaf type all_gather gives for a leaf of type L (not for a matrix stacked, nor a number
// tiled, which the caller refuses).
template <class L, bool Tiled>
auto gathered_type() {
  if constexpr (byte_element<L>)
    return std::type_identity<Eigen::Matrix<L, Eigen::Dynamic, 1>>{};
  else if constexpr (tensor_leaf<L>)
    return std::type_identity<tensor_like_t<L, leaf_ndim<L>() + (Tiled ? 0 : 1)>>{};
  else if constexpr (leaf_ndim<L>() == 1 && Tiled)
    return std::type_identity<vector_like_t<L>>{};
  else if constexpr (leaf_ndim<L>() == 1)
    return std::type_identity<
        dense_like_t<L, typename L::Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>>{};
  else
    return std::type_identity<dense_like_t<L, typename L::Scalar, Eigen::Dynamic, Eigen::Dynamic,
                                           L::IsRowMajor ? Eigen::RowMajor : Eigen::ColMajor>>{};
}
template <class L, bool Tiled>
using gathered_t = typename decltype(gathered_type<L, Tiled>())::type;

// The leaf type psum_scatter gives for a leaf of type L (not for a number, which the caller
// refuses).
template <class L, bool Tiled>
auto scattered_type() {
  if constexpr (tensor_leaf<L>)
    return std::type_identity<tensor_like_t<L, leaf_ndim<L>() - (Tiled ? 0 : 1)>>{};
  else if constexpr (leaf_ndim<L>() == 1 && Tiled)
    return std::type_identity<vector_like_t<L>>{};
  else if constexpr (leaf_ndim<L>() == 1)
    return std::type_identity<typename L::Scalar>{};
  else if constexpr (Tiled)
    return std::type_identity<dense_like_t<L, typename L::Scalar, Eigen::Dynamic, Eigen::Dynamic,
                                           L::IsRowMajor ? Eigen::RowMajor : Eigen::ColMajor>>{};
  else
    return std::type_identity<
        dense_like_t<L, typename L::Scalar, Eigen::Dynamic, 1, Eigen::ColMajor>>{};
}
template <class L, bool Tiled>
using scattered_t = typename decltype(scattered_type<L, Tiled>())::type;

// A leaf of type Out with the dimensions `dims` (numpy order), its elements not yet set.
template <class Out, std::size_t D>
Out sized_leaf(const std::array<Eigen::Index, D>& dims) {
  Out out{};
  if constexpr (std::is_arithmetic_v<Out> || half_element<Out>) {
    static_assert(D == 0);
  } else if constexpr (tensor_leaf<Out>) {
    static_assert(D == static_cast<std::size_t>(Out::NumDimensions));
    typename Out::Dimensions d;
    for (std::size_t i = 0; i < D; ++i) d[i] = static_cast<typename Out::Index>(dims[i]);
    out.resize(d);
  } else if constexpr (D == 1) {
    out.resize(dims[0]);
  } else {
    static_assert(D == 2);
    out.resize(dims[0], dims[1]);
  }
  return out;
}

// The address of a result leaf's elements (a number's own address).
template <class Out>
auto* elements_of(Out& out) {
  if constexpr (std::is_arithmetic_v<Out> || half_element<Out>)
    return &out;
  else
    return out.data();
}

}  // namespace grove::parallel::detail
