// grove/data/safetensors.hpp: a dataset from two tensors of a safetensors file, the format
// PyTorch and Hugging Face tools save arrays in.
//
//   // torch: save_file({"images": x, "labels": y}, "train.safetensors"), x (n, 28, 28) uint8,
//   //        y (n,) int64
//   auto train = grove::data::read_safetensors<float>("train.safetensors", "images", "labels");
//   // train.inputs: 784 x n (each example's values in row-major order), train.targets: n labels
//
// Needs nlohmann-json (link grove::checkpoint): it reads through grove::io's checkpoint reader,
// with its checks (the header read as an attacker's, only the two tensors read).
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <unsupported/Eigen/CXX11/Tensor>

#include "grove/data/dataset.hpp"
#include "grove/io/checkpoint.hpp"
#include "grove/io/error.hpp"

namespace grove::data {

namespace detail {

inline constexpr const char* safetensors_function = "grove::data::read_safetensors";

// The tensor `name` of a file, loaded as a row-major Eigen::Tensor of S and rank R: its elements
// in the file's order, which are an example's values one after the other.
template <class S, int R>
std::vector<S> load_tensor_rows(const std::filesystem::path& path, const io::tensor_info& t) {
  Eigen::array<Eigen::Index, R> dims;
  for (int i = 0; i < R; ++i)
    dims[i] = static_cast<Eigen::Index>(t.shape[static_cast<std::size_t>(i)]);
  std::map<std::string, Eigen::Tensor<S, R, Eigen::RowMajor>> tree{
      {"t", Eigen::Tensor<S, R, Eigen::RowMajor>(dims)}};
  const std::string wanted = t.name;
  io::load_into(
      path, tree,
      {.rename = [&](std::string_view n) { return n == wanted ? std::string("t") : std::string(); },
       .convert = true});
  const auto& loaded = tree.at("t");
  return std::vector<S>(loaded.data(), loaded.data() + loaded.size());
}

template <class S>
std::vector<S> load_tensor_rows(const std::filesystem::path& path, const io::tensor_info& t) {
  switch (t.shape.size()) {
    case 1:
      return load_tensor_rows<S, 1>(path, t);
    case 2:
      return load_tensor_rows<S, 2>(path, t);
    case 3:
      return load_tensor_rows<S, 3>(path, t);
    case 4:
      return load_tensor_rows<S, 4>(path, t);
    case 5:
      return load_tensor_rows<S, 5>(path, t);
    default:
      throw io::format_error(safetensors_function, path,
                             "tensor \"" + t.name + "\" has rank " +
                                 std::to_string(t.shape.size()) +
                                 "; a dataset's tensors have rank 1 to 5, examples first");
  }
}

// The tensor's values as T, whatever its numeric dtype: integers (images as U8, say) are loaded
// in their own type and converted, floats converted by the reader (F64 narrowed to F32 rounded
// to nearest).
template <class T>
std::vector<T> load_tensor_as(const std::filesystem::path& path, const io::tensor_info& t) {
  auto as = [&]<class S>() {
    const auto v = load_tensor_rows<S>(path, t);
    std::vector<T> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_integral_v<T> && std::is_integral_v<S> && !std::is_same_v<S, bool>) {
        if (!std::in_range<T>(v[i]))
          throw io::format_error(safetensors_function, path,
                                 "element " + std::to_string(i) + " of \"" + t.name + "\" (" +
                                     std::to_string(v[i]) + ") does not fit the target type");
      }
      out[i] = static_cast<T>(v[i]);
    }
    return out;
  };
  const std::string& d = t.dtype;
  if (d == "U8") return as.template operator()<std::uint8_t>();
  if (d == "I8") return as.template operator()<std::int8_t>();
  if (d == "U16") return as.template operator()<std::uint16_t>();
  if (d == "I16") return as.template operator()<std::int16_t>();
  if (d == "U32") return as.template operator()<std::uint32_t>();
  if (d == "I32") return as.template operator()<std::int32_t>();
  if (d == "U64") return as.template operator()<std::uint64_t>();
  if (d == "I64") return as.template operator()<std::int64_t>();
  if (d == "BOOL") return as.template operator()<bool>();
  if constexpr (std::is_floating_point_v<T>) {
    if (d == "F16" || d == "BF16" || d == "F32" || d == "F64") return load_tensor_rows<T>(path, t);
  } else {
    if (d == "F16" || d == "BF16" || d == "F32" || d == "F64")
      throw io::format_error(
          safetensors_function, path,
          "tensor \"" + t.name + "\" holds floats (" + d + "), and labels must be integers");
  }
  throw io::format_error(safetensors_function, path,
                         "tensor \"" + t.name + "\" has dtype " + d +
                             ", which a dataset cannot hold (integers, bool, F16, BF16, F32, F64)");
}

inline const io::tensor_info& find_tensor(const io::checkpoint_info& info,
                                          const std::filesystem::path& path,
                                          const std::string& name) {
  for (const auto& t : info.tensors)
    if (t.name == name) return t;
  std::string names;
  for (const auto& t : info.tensors) names += (names.empty() ? "\"" : ", \"") + t.name + "\"";
  throw io::format_error(safetensors_function, path,
                         "has no tensor \"" + name + "\" (it has " +
                             (names.empty() ? std::string("none") : names) + ")");
}

}  // namespace detail

/// The dataset of two tensors of the safetensors file `path`, examples along their first axis
/// (PyTorch's and numpy's layout): `inputs_name` of shape (n, ...) gives inputs of features x n,
/// each column an example's values in row-major order (numpy's `x.reshape(n, -1)`, transposed);
/// `targets_name` of shape (n,) gives n labels (Y = Eigen::VectorXi, the default) or a 1 x n
/// matrix, one of shape (n, k) a k x n matrix. Any numeric dtype loads: integers (U8 images,
/// I64 labels) are converted, each label checked to fit; floats into integer labels are refused.
/// Throws as io::inspect and io::load_into (file_error, format_error), and format_error naming
/// the file when a tensor is missing (listing those it has), has rank 0 or above 5, or the two
/// disagree on the number of examples.
template <class T = float, target_storage Y = Eigen::VectorXi>
Dataset<T, Y> read_safetensors(const std::filesystem::path& path, const std::string& inputs_name,
                               const std::string& targets_name) {
  const auto info = io::inspect(path);
  const auto& x = detail::find_tensor(info, path, inputs_name);
  const auto& y = detail::find_tensor(info, path, targets_name);
  for (const auto* t : {&x, &y})
    if (t->shape.empty())
      throw io::format_error(detail::safetensors_function, path,
                             "tensor \"" + t->name +
                                 "\" is a scalar; a dataset's tensors have "
                                 "examples along their first axis");
  const std::uint64_t n = x.shape[0];
  if (y.shape[0] != n)
    throw io::format_error(detail::safetensors_function, path,
                           "\"" + inputs_name + "\" holds " + std::to_string(n) +
                               " examples (its first axis) but \"" + targets_name + "\" " +
                               std::to_string(y.shape[0]));
  if constexpr (is_labels_v<Y>) {
    if (y.shape.size() != 1)
      throw io::format_error(detail::safetensors_function, path,
                             "labels \"" + targets_name + "\" must have shape (n,), not rank " +
                                 std::to_string(y.shape.size()));
  } else if (y.shape.size() > 2) {
    throw io::format_error(detail::safetensors_function, path,
                           "targets \"" + targets_name + "\" must have shape (n,) or (n, k)");
  }
  const auto values = detail::load_tensor_as<T>(path, x);
  const auto targets = detail::load_tensor_as<typename Y::Scalar>(path, y);
  const auto count = static_cast<Eigen::Index>(n);
  const Eigen::Index features = count == 0 ? 0 : static_cast<Eigen::Index>(values.size()) / count;
  Dataset<T, Y> out;
  // Row-major (n, features) is column-major (features, n): each example's values are together.
  out.inputs = Eigen::Map<const Matrix<T>>(values.data(), features, count);
  if constexpr (is_labels_v<Y>)
    out.targets = Eigen::Map<const Y>(targets.data(), count);
  else
    out.targets = Eigen::Map<const Y>(
        targets.data(), y.shape.size() == 1 ? 1 : static_cast<Eigen::Index>(y.shape[1]), count);
  return out;
}

}  // namespace grove::data
