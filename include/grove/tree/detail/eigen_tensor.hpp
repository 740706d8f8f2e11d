// grove/tree/detail/eigen_tensor.hpp: recognises Eigen's N-D tensors (Eigen::Tensor,
// Eigen::TensorFixedSize, Eigen::TensorMap) by what they expose, without including
// <unsupported/Eigen/CXX11/Tensor>: that header is heavy, and only users who hold tensors
// include it.
#pragma once

#include <concepts>
#include <cstddef>
#include <type_traits>

namespace grove::detail {

// A tensor that holds (or maps) its elements contiguously: Eigen::Tensor, Eigen::TensorFixedSize
// and Eigen::TensorMap have a rank (NumIndices), a storage order (Layout: Eigen::ColMajor or
// Eigen::RowMajor), their dimensions (dimension 0 first, whatever the storage order) and a data
// pointer. Eigen's lazy tensor expressions have no data() and are not matched; Eigen::Matrix has
// no NumIndices.
template <class T>
concept eigen_tensor = std::is_class_v<T> && requires(const T& x, std::size_t i) {
  typename T::Scalar;
  typename T::Dimensions;
  T::NumIndices;
  T::Layout;
  x.dimensions()[i];
  { x.data() } -> std::convertible_to<const typename T::Scalar*>;
  x.size();
};

// A tensor that owns its elements (Eigen::Tensor, Eigen::TensorFixedSize): default
// constructible and assignable, with writable data. An Eigen::TensorMap is neither default
// constructible nor the owner of what it maps.
template <class T>
concept eigen_tensor_owner = eigen_tensor<T> && std::is_default_constructible_v<T> &&
    std::is_copy_assignable_v<T> && requires(T& x) {
  { x.data() } -> std::same_as<typename T::Scalar*>;
};

// The rank of a tensor type, as a std::size_t (Eigen::Tensor declares it an int,
// Eigen::TensorFixedSize a std::size_t).
template <eigen_tensor T>
inline constexpr std::size_t tensor_rank = static_cast<std::size_t>(T::NumIndices);

}  // namespace grove::detail
