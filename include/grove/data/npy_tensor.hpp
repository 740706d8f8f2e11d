// grove/data/npy_tensor.hpp: .npy arrays of any number of dimensions as Eigen tensors
// (unsupported/Eigen/CXX11/Tensor), beside grove/data/npy.hpp's matrices.
//
//   Eigen::Tensor<float, 3> t = grove::data::load_npy<float, 3>("x.npy");  // t(i, j, k) == a[i, j, k]
//   grove::data::save_npy("y.npy", t);          // np.load("y.npy")[i, j, k] == t(i, j, k)
//
// The conversion rules and errors are grove/data/npy.hpp's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <type_traits>
#include <unsupported/Eigen/CXX11/Tensor>
#include <vector>

#include "grove/data/npy.hpp"

namespace grove::data {

namespace detail {

template <class T, int Rank>
std::string npy_rank_mismatch(const NpyArray& a) {
  return "the array has " + std::to_string(a.shape.size()) + " dimensions (shape " +
         shape_string(a.shape) + "), not the " + std::to_string(Rank) + " asked for";
}

template <class T, int Rank>
Eigen::Tensor<T, Rank> npy_tensor_shape(const NpyArray& a) {
  Eigen::Tensor<T, Rank> t;
  if constexpr (Rank > 0) {
    std::array<Eigen::Index, Rank> dims;
    for (int i = 0; i < Rank; ++i) dims[i] = static_cast<Eigen::Index>(a.shape[i]);
    t.resize(dims);
  }
  return t;
}

// NpyArray::as_tensor, which npy.hpp declares without the Tensor module.
struct npy_tensor_support {
  template <class T, int Rank>
  static Eigen::Tensor<T, Rank> as_tensor(const NpyArray& a) {
    static_assert(is_npy_element<T>,
                  "grove: NpyArray::as_tensor<T, Rank>: T is bool, a signed or unsigned integer, "
                  "float, double, Eigen::half, std::complex<float> or std::complex<double>");
    static_assert(Rank >= 0, "grove: NpyArray::as_tensor<T, Rank>: Rank is at least 0");
    constexpr std::string_view function = "grove::data::NpyArray::as_tensor";
    const auto h = checked_npy_array(a, function);
    if (a.shape.size() != static_cast<std::size_t>(Rank))
      throw grove::shape_error(std::string(function) + ": " + npy_rank_mismatch<T, Rank>(a));
    auto t = npy_tensor_shape<T, Rank>(a);
    if (auto problem = npy_convert(a, h, t.data()); !problem.empty())
      throw grove::argument_error(std::string(function) + ": " + problem);
    return t;
  }
};

// Eigen tensors whose elements are contiguous in memory as they are; anything else (an
// expression, a slice) is evaluated first.
template <class T>
inline constexpr bool is_plain_tensor = false;
template <class S, int R, int O, class I>
inline constexpr bool is_plain_tensor<Eigen::Tensor<S, R, O, I>> = true;
template <class S, int R, int O, class I, int MapOptions, template <class> class P>
inline constexpr bool is_plain_tensor<Eigen::TensorMap<Eigen::Tensor<S, R, O, I>, MapOptions, P>> =
    true;

template <class Plain>
npy_view npy_tensor_view(const Plain& t) {
  using T = std::remove_const_t<typename Plain::Scalar>;
  constexpr int Rank = Plain::NumDimensions;
  npy_view v;
  v.dtype = npy_dtype_of<T>();
  v.shape.resize(Rank);
  for (int i = 0; i < Rank; ++i) v.shape[i] = static_cast<std::int64_t>(t.dimension(i));
  v.fortran_order = npy_fortran_order(static_cast<int>(Plain::Layout) == Eigen::ColMajor, v.shape);
  v.data = t.data();
  v.bytes = static_cast<std::size_t>(t.size()) * sizeof(T);
  return v;
}

// Calls f with the view of a tensor or tensor expression.
template <class Derived, class F>
void with_npy_tensor_view(const Eigen::TensorBase<Derived, Eigen::ReadOnlyAccessors>& x, F&& f) {
  const auto& d = static_cast<const Derived&>(x);
  if constexpr (is_plain_tensor<std::remove_const_t<Derived>>) {
    f(npy_tensor_view(d));
  } else {
    using Traits = Eigen::internal::traits<Derived>;
    using Plain = Eigen::Tensor<std::remove_const_t<typename Traits::Scalar>, Traits::NumDimensions,
                                Traits::Layout, typename Traits::Index>;
    const Plain plain = d;
    f(npy_tensor_view(plain));
  }
}

}  // namespace detail

/// Reads a .npy file of exactly Rank dimensions as a column-major Eigen::Tensor whose
/// t(i, j, k) is numpy's a[i, j, k], in either file order (0-D arrays as Tensor<T, 0>). T follows
/// grove/data/npy.hpp's conversion rules. Throws format_error for a malformed file, an array of
/// another number of dimensions, a dtype that cannot become T or a value that does not fit it;
/// file_error as read_npy.
template <class T, int Rank>
Eigen::Tensor<T, Rank> load_npy(const std::filesystem::path& file) {
  static_assert(detail::is_npy_element<T>,
                "grove: load_npy<T, Rank>: T is bool, a signed or unsigned integer, float, "
                "double, Eigen::half, std::complex<float> or std::complex<double>");
  static_assert(Rank >= 0, "grove: load_npy<T, Rank>: Rank is at least 0");
  constexpr std::string_view function = "grove::data::load_npy";
  const auto a = detail::read_npy_file(file, function);
  if (a.shape.size() != static_cast<std::size_t>(Rank))
    throw io::format_error(function, file, detail::npy_rank_mismatch<T, Rank>(a));
  const auto h = detail::checked_npy_array(a, function);
  auto t = detail::npy_tensor_shape<T, Rank>(a);
  if (auto problem = detail::npy_convert(a, h, t.data()); !problem.empty())
    throw io::format_error(function, file, problem);
  return t;
}

/// An Eigen tensor (or tensor expression, evaluated first) as an NpyArray of its rank and
/// dimensions: a column-major tensor with fortran_order True, a row-major one with False, its
/// bytes as Eigen stores them (no transpose; fortran_order is False, as numpy writes it, when the
/// two orders hold the same bytes).
template <class Derived>
NpyArray to_npy(const Eigen::TensorBase<Derived, Eigen::ReadOnlyAccessors>& x) {
  NpyArray out;
  detail::with_npy_tensor_view(x,
                               [&](const detail::npy_view& v) { out = detail::npy_from_view(v); });
  return out;
}

/// Writes an Eigen tensor (or tensor expression) as a .npy file laid out as to_npy says, as
/// grove/data/npy.hpp's save_npy writes matrices (atomically, numpy's header, file_error when the
/// target is not a regular file or cannot be written).
template <class Derived>
void save_npy(const std::filesystem::path& file,
              const Eigen::TensorBase<Derived, Eigen::ReadOnlyAccessors>& x) {
  detail::with_npy_tensor_view(x, [&](const detail::npy_view& v) {
    detail::write_npy_file(file, "grove::data::save_npy",
                           detail::npy_header_bytes(v.dtype.descr(), v.shape, v.fortran_order),
                           v.data, v.bytes);
  });
}

}  // namespace grove::data
