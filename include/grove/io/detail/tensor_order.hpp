// grove/io/detail/tensor_order.hpp: the element order of N-D tensor leaves in checkpoints. A
// safetensors tensor is row-major (C order: numpy's a[i0, ..., iN-1] at the index with the last
// dimension fastest); an Eigen::Tensor is row-major or column-major. These helpers walk a tensor
// leaf's elements in the file's order, by index arithmetic on the leaf's own storage, so that
// saving or loading a column-major tensor needs no copy of it.
#pragma once

#include <Eigen/Core>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "grove/tree/detail/eigen_tensor.hpp"

namespace grove::io::detail {

template <class L>
concept tensor_storage_row_major = grove::detail::eigen_tensor<L> &&
    (static_cast<int>(L::Layout) == static_cast<int>(Eigen::RowMajor));

// The dimensions of a tensor leaf, dimension 0 first.
template <grove::detail::eigen_tensor L>
std::array<std::size_t, grove::detail::tensor_rank<L>> tensor_dimensions(const L& leaf) {
  std::array<std::size_t, grove::detail::tensor_rank<L>> out{};
  for (std::size_t d = 0; d < out.size(); ++d)
    out[d] = static_cast<std::size_t>(leaf.dimensions()[d]);
  return out;
}

// Calls f(offset) for each element of a column-major tensor of dimensions `dims`, in row-major
// order of the elements' indices (the last index fastest): `offset` is the element's place in the
// column-major storage. The last index, innermost, strides by the product of the other
// dimensions; the others advance as an odometer. Rank 0: one element, at offset 0.
template <std::size_t N, class F>
void for_each_column_major_offset(const std::array<std::size_t, N>& dims, F&& f) {
  if constexpr (N == 0) {
    f(std::size_t{0});
  } else {
    for (const auto d : dims)
      if (d == 0) return;
    std::array<std::size_t, N> stride{};
    stride[0] = 1;
    for (std::size_t d = 1; d < N; ++d) stride[d] = stride[d - 1] * dims[d - 1];
    std::array<std::size_t, N> index{};
    std::size_t base = 0;
    for (;;) {
      for (std::size_t j = 0; j < dims[N - 1]; ++j) f(base + j * stride[N - 1]);
      std::size_t d = N - 1;  // advance indices N-2 .. 0
      for (;;) {
        if (d == 0) return;
        --d;
        if (++index[d] < dims[d]) {
          base += stride[d];
          break;
        }
        base -= (dims[d] - 1) * stride[d];
        index[d] = 0;
      }
    }
  }
}

// Calls f(k, element) for each element of a tensor leaf, k its row-major index (the file's order).
template <grove::detail::eigen_tensor L, class F>
void for_each_tensor_row_major(const L& leaf, F&& f) {
  const auto* data = leaf.data();
  if constexpr (tensor_storage_row_major<L>) {
    const auto n = static_cast<std::size_t>(leaf.size());
    for (std::size_t k = 0; k < n; ++k) f(k, data[k]);
  } else {
    std::size_t k = 0;
    for_each_column_major_offset(tensor_dimensions(leaf),
                                 [&](std::size_t offset) { f(k++, data[offset]); });
  }
}

// Sets each element of a tensor leaf to get(k), k its row-major index.
template <grove::detail::eigen_tensor L, class Get>
void fill_tensor_row_major(L& leaf, Get&& get) noexcept {
  auto* data = leaf.data();
  if constexpr (tensor_storage_row_major<L>) {
    const auto n = static_cast<std::size_t>(leaf.size());
    for (std::size_t k = 0; k < n; ++k) data[k] = get(k);
  } else {
    std::size_t k = 0;
    for_each_column_major_offset(tensor_dimensions(leaf),
                                 [&](std::size_t offset) { data[offset] = get(k++); });
  }
}

// A tensor leaf's shape as the file stores it: its dimensions, dimension 0 first.
template <grove::detail::eigen_tensor L>
std::vector<std::uint64_t> tensor_file_shape(const L& leaf) {
  std::vector<std::uint64_t> out(grove::detail::tensor_rank<L>);
  for (std::size_t d = 0; d < out.size(); ++d)
    out[d] = static_cast<std::uint64_t>(leaf.dimensions()[d]);
  return out;
}

}  // namespace grove::io::detail
