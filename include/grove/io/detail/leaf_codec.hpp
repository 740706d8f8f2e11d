// grove/io/detail/leaf_codec.hpp: which leaves a checkpoint holds and how each is stored: the
// leaf kinds, the conversions between a file's dtype and a leaf's, a leaf's bytes written and
// read, and the tree's leaves named by their key paths.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "grove/io/checkpoint_types.hpp"
#include "grove/io/detail/float16.hpp"
#include "grove/io/detail/safetensors.hpp"
#include "grove/io/detail/tensor_order.hpp"
#include "grove/io/error.hpp"
#include "grove/random/key.hpp"
#include "grove/tree.hpp"
#include "grove/tree/eigen.hpp"

namespace grove::io::detail {

// --- leaves --------------------------------------------------------------------------------------

template <class S>
inline constexpr bool half_scalar =
    std::is_same_v<S, Eigen::half> || std::is_same_v<S, Eigen::bfloat16>;

template <class S>
inline constexpr bool supported_scalar = std::is_same_v<S, bool> || std::is_same_v<S, float> ||
                                         std::is_same_v<S, double> || half_scalar<S> ||
                                         (std::is_integral_v<S> && sizeof(S) <= 8 &&
                                          !std::is_same_v<S, char> && !std::is_same_v<S, wchar_t> &&
                                          !std::is_same_v<S, char8_t> &&
                                          !std::is_same_v<S, char16_t> &&
                                          !std::is_same_v<S, char32_t>);

template <class S>
constexpr dtype dtype_of() {
  static_assert(sizeof(bool) == 1 && sizeof(float) == 4 && sizeof(double) == 8,
                "grove::io: checkpoints need 1-byte bool, 4-byte float and 8-byte double");
  static_assert(sizeof(Eigen::half) == 2 && std::is_trivially_copyable_v<Eigen::half> &&
                    sizeof(Eigen::bfloat16) == 2 && std::is_trivially_copyable_v<Eigen::bfloat16>,
                "grove::io: checkpoints need Eigen::half and Eigen::bfloat16 of 2 bytes");
  if constexpr (std::is_same_v<S, bool>)
    return dtype::BOOL;
  else if constexpr (std::is_same_v<S, float>)
    return dtype::F32;
  else if constexpr (std::is_same_v<S, double>)
    return dtype::F64;
  else if constexpr (std::is_same_v<S, Eigen::half>)
    return dtype::F16;
  else if constexpr (std::is_same_v<S, Eigen::bfloat16>)
    return dtype::BF16;
  else if constexpr (std::is_signed_v<S>) {
    if constexpr (sizeof(S) == 1)
      return dtype::I8;
    else if constexpr (sizeof(S) == 2)
      return dtype::I16;
    else if constexpr (sizeof(S) == 4)
      return dtype::I32;
    else
      return dtype::I64;
  } else {
    if constexpr (sizeof(S) == 1)
      return dtype::U8;
    else if constexpr (sizeof(S) == 2)
      return dtype::U16;
    else if constexpr (sizeof(S) == 4)
      return dtype::U32;
    else
      return dtype::U64;
  }
}

template <class L>
concept key_leaf = std::is_same_v<L, random::Key>;
template <class L>
concept scalar_leaf = (std::is_arithmetic_v<L> || half_scalar<L>)&&supported_scalar<L>;
// An Eigen leaf is what the tree core takes as one (grove/tree/eigen.hpp), of a scalar a
// checkpoint can store.
template <class L>
concept eigen_leaf = grove::detail::eigen_dense<L> && supported_scalar<typename L::Scalar>;
// Loading writes into the leaf, which must own its elements: an Eigen::Matrix or Eigen::Array.
template <class L>
concept eigen_plain_leaf = eigen_leaf<L> && std::is_base_of_v<Eigen::PlainObjectBase<L>, L>;
// An N-D Eigen tensor (Eigen::Tensor, Eigen::TensorFixedSize, Eigen::TensorMap; recognised
// without Eigen's tensor header) of a scalar a checkpoint can store. Loading needs one that owns
// its elements (grove::detail::eigen_tensor_owner).
template <class L>
concept tensor_leaf = grove::detail::eigen_tensor<L> && supported_scalar<typename L::Scalar>;
// A leaf with a Scalar: an Eigen matrix, array or tensor.
template <class L>
concept array_leaf = eigen_leaf<L> || tensor_leaf<L>;

// --- conversions between a file's dtype and a leaf's ---------------------------------------------

enum class conversion : std::uint8_t { exact, widening, narrowing, impossible };

// What loading a `from` tensor into a `to` leaf takes. Widening keeps every value (F16/BF16 ->
// F32/F64, F32 -> F64, integers into a wider type of a sign that holds them); narrowing may round
// (floats) or not fit (integers, checked element by element); floats and integers never mix, and
// BOOL and the dtypes without a leaf type (F8, F4, F6, C64) load only into themselves, which has
// no leaf type.
constexpr conversion conversion_of(dtype from, dtype to) {
  if (from == to) return conversion::exact;
  const auto& f = info(from);
  const auto& t = info(to);
  if (f.kind == dtype_kind::floating && t.kind == dtype_kind::floating)
    return f.bits < t.bits ? conversion::widening : conversion::narrowing;
  const bool f_int = f.kind == dtype_kind::signed_integer || f.kind == dtype_kind::unsigned_integer;
  const bool t_int = t.kind == dtype_kind::signed_integer || t.kind == dtype_kind::unsigned_integer;
  if (f_int && t_int) {
    if (f.kind == t.kind) return f.bits < t.bits ? conversion::widening : conversion::narrowing;
    if (f.kind == dtype_kind::unsigned_integer && f.bits < t.bits) return conversion::widening;
    return conversion::narrowing;
  }
  return conversion::impossible;
}

// A leaf scalar from a double holding a file's float exactly.
template <class D>
D float_to(double x) noexcept {
  if constexpr (std::is_same_v<D, Eigen::half>)
    return std::bit_cast<Eigen::half>(round_to_f16(x));
  else if constexpr (std::is_same_v<D, Eigen::bfloat16>)
    return std::bit_cast<Eigen::bfloat16>(round_to_bf16(x));
  else
    return static_cast<D>(x);  // float: rounds to nearest even; double: exact
}

template <class T>
T load_native(const std::byte* p, std::size_t k) noexcept {
  T v;
  std::memcpy(&v, p + k * sizeof(T), sizeof(T));
  return v;
}

// Calls f(get) with get(k), the k-th element (row-major) of a tensor of dtype `from` at `p`
// (already in native byte order), as a double for floats and an int64 / uint64 for integers.
template <class F>
void with_elements(dtype from, const std::byte* p, F&& f) {
  switch (from) {
    case dtype::F16:
      return f([p](std::size_t k) { return f16_to_double(load_native<std::uint16_t>(p, k)); });
    case dtype::BF16:
      return f([p](std::size_t k) { return bf16_to_double(load_native<std::uint16_t>(p, k)); });
    case dtype::F32:
      return f([p](std::size_t k) { return static_cast<double>(load_native<float>(p, k)); });
    case dtype::F64:
      return f([p](std::size_t k) { return load_native<double>(p, k); });
    case dtype::I8:
      return f([p](std::size_t k) { return std::int64_t{load_native<std::int8_t>(p, k)}; });
    case dtype::I16:
      return f([p](std::size_t k) { return std::int64_t{load_native<std::int16_t>(p, k)}; });
    case dtype::I32:
      return f([p](std::size_t k) { return std::int64_t{load_native<std::int32_t>(p, k)}; });
    case dtype::I64:
      return f([p](std::size_t k) { return load_native<std::int64_t>(p, k); });
    case dtype::U8:
      return f([p](std::size_t k) { return std::uint64_t{load_native<std::uint8_t>(p, k)}; });
    case dtype::U16:
      return f([p](std::size_t k) { return std::uint64_t{load_native<std::uint16_t>(p, k)}; });
    case dtype::U32:
      return f([p](std::size_t k) { return std::uint64_t{load_native<std::uint32_t>(p, k)}; });
    case dtype::U64:
      return f([p](std::size_t k) { return load_native<std::uint64_t>(p, k); });
    default:
      return;  // conversion_of() refused the others before any data was read
  }
}

// A leaf's dtype and row-major shape, as the file stores it.
struct leaf_layout {
  dtype type;
  std::vector<std::uint64_t> shape;
  std::uint64_t nbytes;
};

template <class L>
constexpr bool is_vector_leaf() {
  return L::ColsAtCompileTime == 1 || L::RowsAtCompileTime == 1;
}

// The dtype a leaf of scalar S is saved as.
template <class S>
constexpr dtype stored_dtype(float_storage floats) {
  if constexpr (std::is_same_v<S, float>) {
    if (floats == float_storage::f16) return dtype::F16;
    if (floats == float_storage::bf16) return dtype::BF16;
  }
  return dtype_of<S>();
}

template <class L>
leaf_layout layout_of(const L& leaf, float_storage floats = float_storage::keep) {
  static_assert(key_leaf<L> || scalar_leaf<L> || eigen_leaf<L> || tensor_leaf<L>,
                "grove: a checkpoint leaf must be a bool, integer, Eigen::half, "
                "Eigen::bfloat16, float or double scalar, an Eigen::Matrix, Eigen::Array or "
                "Eigen::Tensor of such scalars, or a grove::random::Key");
  if constexpr (key_leaf<L>) {
    (void)leaf, (void)floats;
    return {dtype::U32, {2}, 8};
  } else if constexpr (scalar_leaf<L>) {
    (void)leaf;
    const dtype t = stored_dtype<L>(floats);
    return {t, {}, info(t).size};
  } else if constexpr (tensor_leaf<L>) {
    // Shape (d0, ..., dN-1), row-major in the file whatever the tensor's storage order; rank 0
    // is shape (), as numpy's 0-d array.
    const dtype t = stored_dtype<typename L::Scalar>(floats);
    return {t, tensor_file_shape(leaf), static_cast<std::uint64_t>(leaf.size()) * info(t).size};
  } else {
    using S = typename L::Scalar;
    const dtype t = stored_dtype<S>(floats);
    const auto bytes = static_cast<std::uint64_t>(leaf.size()) * info(t).size;
    if constexpr (is_vector_leaf<L>())
      return {t, {static_cast<std::uint64_t>(leaf.size())}, bytes};
    else
      return {t,
              {static_cast<std::uint64_t>(leaf.rows()), static_cast<std::uint64_t>(leaf.cols())},
              bytes};
  }
}

template <class S>
using row_major_map = Eigen::Map<Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
template <class S>
using column_map = Eigen::Map<Eigen::Matrix<S, Eigen::Dynamic, 1>>;

template <class X>
decltype(auto) as_matrix(const X& x) {
  if constexpr (std::is_base_of_v<Eigen::ArrayBase<X>, X>)
    return x.matrix();
  else
    return (x);
}

// Calls f(k, element) for each element of an Eigen leaf, k its row-major index.
template <class L, class F>
void for_each_row_major(const L& leaf, F&& f) {
  if constexpr (tensor_leaf<L>) {
    for_each_tensor_row_major(leaf, f);
  } else if constexpr (is_vector_leaf<L>()) {
    for (Eigen::Index k = 0; k < leaf.size(); ++k) f(static_cast<std::size_t>(k), leaf(k));
  } else {
    const Eigen::Index cols = leaf.cols();
    for (Eigen::Index i = 0; i < leaf.rows(); ++i)
      for (Eigen::Index j = 0; j < cols; ++j) f(static_cast<std::size_t>(i * cols + j), leaf(i, j));
  }
}

// out[0 .. count) = elements first .. first + count of a tensor of dtype `from` at `in` (native
// byte order, aligned), converted to S; `from` is one that conversion_of() lets S take. Templated
// on the scalar only, not on the leaf, so that a tree of many leaf types compiles the twelve
// conversions once per scalar type.
template <class S>
void convert_elements(const std::byte* in, dtype from, std::size_t first, std::size_t count,
                      S* out) noexcept {
  if constexpr (std::is_same_v<S, float>) {
    // 16-bit floats into float leaves bit by bit, not through a double: converting a double NaN
    // to float quiets a signaling one.
    if (from == dtype::F16 || from == dtype::BF16) {
      const bool f16 = from == dtype::F16;
      for (std::size_t k = 0; k < count; ++k) {
        const auto h = load_native<std::uint16_t>(in, first + k);
        out[k] = std::bit_cast<float>(f16 ? f16_to_float_bits(h) : bf16_to_float_bits(h));
      }
      return;
    }
  }
  with_elements(from, in, [&](auto get) {
    using V = decltype(get(0));
    if constexpr (std::is_same_v<V, double> == (std::is_floating_point_v<S> || half_scalar<S>)) {
      for (std::size_t k = 0; k < count; ++k) {
        if constexpr (std::is_same_v<V, double>)
          out[k] = float_to<S>(get(first + k));
        else
          out[k] = static_cast<S>(get(first + k));
      }
    }
  });
}

// Sets each element of an Eigen leaf (matrix, array or tensor) to get(k), k its row-major index;
// k runs 0, 1, 2, ... in turn.
template <class L, class Get>
void fill_row_major(L& leaf, Get&& get) noexcept {
  if constexpr (tensor_leaf<L>) {
    fill_tensor_row_major(leaf, get);
  } else if constexpr (is_vector_leaf<L>()) {
    for (Eigen::Index k = 0; k < leaf.size(); ++k)
      leaf.coeffRef(k) = get(static_cast<std::size_t>(k));
  } else {
    const Eigen::Index cols = leaf.cols();
    for (Eigen::Index i = 0; i < leaf.rows(); ++i)
      for (Eigen::Index j = 0; j < cols; ++j)
        leaf.coeffRef(i, j) = get(static_cast<std::size_t>(i * cols + j));
  }
}

// Sets each element of an Eigen leaf to element k of the tensor of dtype `from` at `in`, k the
// element's row-major index, converting runs of elements through a small buffer on the stack.
template <class L>
void convert_row_major(const std::byte* in, dtype from, L& leaf) noexcept {
  using S = typename L::Scalar;
  constexpr std::size_t run = 256;
  S buffer[run];
  const auto n = static_cast<std::size_t>(leaf.size());
  std::size_t start = 0, end = 0;  // the buffer holds elements [start, end)
  fill_row_major(leaf, [&](std::size_t k) {
    if (k >= end) {
      start = k;
      end = k + std::min(run, n - k);
      convert_elements(in, from, start, end - start, buffer);
    }
    return buffer[k - start];
  });
}

// Writes the leaf's bytes (layout_of(leaf, floats).nbytes of them) into `out`, which is aligned
// for any scalar: little-endian, row-major.
template <class L>
void encode(const L& leaf, std::byte* out, float_storage floats = float_storage::keep) {
  if constexpr (key_leaf<L>) {
    (void)floats;
    std::memcpy(out, leaf.words.data(), 8);
    to_little_endian(out, 2, 4);
  } else if constexpr (scalar_leaf<L>) {
    if constexpr (std::is_same_v<L, float>) {
      if (floats != float_storage::keep) {
        const std::uint16_t h =
            floats == float_storage::f16 ? round_to_f16(leaf) : round_to_bf16(leaf);
        std::memcpy(out, &h, 2);
        to_little_endian(out, 1, 2);
        return;
      }
    }
    std::memcpy(out, &leaf, sizeof(L));
    to_little_endian(out, 1, sizeof(L));
  } else {
    using S = typename L::Scalar;
    if constexpr (std::is_same_v<S, float>) {
      if (floats != float_storage::keep) {
        auto* dst = reinterpret_cast<std::uint16_t*>(out);
        const bool f16 = floats == float_storage::f16;
        for_each_row_major(leaf, [&](std::size_t k, float x) {
          dst[k] = f16 ? round_to_f16(x) : round_to_bf16(x);
        });
        to_little_endian(out, static_cast<std::size_t>(leaf.size()), 2);
        return;
      }
    }
    S* dst = reinterpret_cast<S*>(out);
    if constexpr (tensor_storage_row_major<L>) {
      if (leaf.size() > 0)  // an empty tensor's data() may be null, which memcpy may not take
        std::memcpy(dst, leaf.data(), static_cast<std::size_t>(leaf.size()) * sizeof(S));
    } else if constexpr (tensor_leaf<L>)
      for_each_tensor_row_major(leaf, [&](std::size_t k, const S& x) { dst[k] = x; });
    else if constexpr (L::ColsAtCompileTime == 1)
      column_map<S>(dst, leaf.size()) = as_matrix(leaf);
    else if constexpr (L::RowsAtCompileTime == 1)
      column_map<S>(dst, leaf.size()) = as_matrix(leaf).transpose();
    else
      row_major_map<S>(dst, leaf.rows(), leaf.cols()) = as_matrix(leaf);
    to_little_endian(out, static_cast<std::size_t>(leaf.size()), sizeof(S));
  }
}

template <class L, class Expr>
void assign(L& leaf, const Expr& matrix_expr) {
  if constexpr (std::is_base_of_v<Eigen::ArrayBase<L>, L>)
    leaf = matrix_expr.array();
  else
    leaf = matrix_expr;
}

// Reads a leaf back from `in`: a tensor of dtype `from`, which the caller has checked to have the
// leaf's shape and a dtype the leaf may take (conversion_of). `in` is aligned for any scalar and
// in native byte order. Allocates nothing and throws nothing.
template <class L>
void decode(const std::byte* in, dtype from, L& leaf) noexcept {
  if constexpr (key_leaf<L>) {
    (void)from;
    std::memcpy(leaf.words.data(), in, 8);
  } else if constexpr (scalar_leaf<L>) {
    if (from == dtype_of<L>()) {
      std::memcpy(&leaf, in, sizeof(L));
      return;
    }
    convert_elements(in, from, 0, 1, &leaf);
  } else {
    if constexpr (tensor_leaf<L>)
      static_assert(grove::detail::eigen_tensor_owner<L>,
                    "grove: loading needs tensor leaves that own their elements (Eigen::Tensor or "
                    "Eigen::TensorFixedSize), not an Eigen::TensorMap");
    else
      static_assert(eigen_plain_leaf<L>,
                    "grove::io: loading needs Eigen leaves that own their elements (Eigen::Matrix "
                    "or Eigen::Array), not maps, refs or expressions");
    using S = typename L::Scalar;
    if (from == dtype_of<S>()) {
      const S* src = reinterpret_cast<const S*>(in);
      using map_c = Eigen::Map<const Eigen::Matrix<S, Eigen::Dynamic, 1>>;
      using map_rm =
          Eigen::Map<const Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
      if constexpr (tensor_storage_row_major<L>) {
        if (leaf.size() > 0)  // an empty tensor's data() may be null
          std::memcpy(leaf.data(), src, static_cast<std::size_t>(leaf.size()) * sizeof(S));
      } else if constexpr (tensor_leaf<L>)
        fill_row_major(leaf, [&](std::size_t k) { return src[k]; });
      else if constexpr (L::ColsAtCompileTime == 1)
        assign(leaf, map_c(src, leaf.size()));
      else if constexpr (L::RowsAtCompileTime == 1)
        assign(leaf, map_c(src, leaf.size()).transpose());
      else
        assign(leaf, map_rm(src, leaf.rows(), leaf.cols()));
      return;
    }
    convert_row_major(in, from, leaf);
  }
}

// The first element of a tensor of integer dtype `from` at `in` (native byte order, aligned)
// that the integer type S cannot hold, or npos; for a narrowing integer load.
template <class S>
std::size_t first_out_of_range(const std::byte* in, dtype from, std::size_t n, std::string& value) {
  std::size_t bad = static_cast<std::size_t>(-1);
  if constexpr (std::is_integral_v<S> && !std::is_same_v<S, bool>) {
    with_elements(from, in, [&](auto get) {
      using V = decltype(get(0));
      if constexpr (!std::is_same_v<V, double>) {
        for (std::size_t k = 0; k < n; ++k)
          if (!std::in_range<S>(get(k))) {
            bad = k;
            value = std::to_string(get(k));
            return;
          }
      }
    });
  } else {
    (void)in, (void)from, (void)n, (void)value;
  }
  return bad;
}

// What loading needs to know of a leaf, without its type: the checks and the reads that come
// before the copy into the leaves are then compiled once, not once per leaf type of every tree.
struct leaf_facts {
  leaf_layout layout;
  bool key = false;
  // first_out_of_range for the leaf's scalar type (a key's dtype never narrows: none).
  std::size_t (*out_of_range)(const std::byte*, dtype, std::size_t, std::string&) = nullptr;
};

template <class L>
leaf_facts facts_of(const L& leaf) {
  if constexpr (key_leaf<L>)
    return {layout_of(leaf), true, nullptr};
  else if constexpr (array_leaf<L>)
    return {layout_of(leaf), false, &first_out_of_range<typename L::Scalar>};
  else
    return {layout_of(leaf), false, &first_out_of_range<L>};
}

inline std::string leaf_description(const leaf_facts& leaf) {
  if (leaf.key) return "a grove::random::Key, stored as U32 [2]";
  return std::string(info(leaf.layout.type).numpy) + shape_str(leaf.layout.shape);
}

// Calls f(leaf) on what a tree_leaves pointer (or variant of pointers) points to.
template <class P, class F>
void visit_leaf(const P& p, F&& f) {
  if constexpr (grove::detail::is_instance_v<P, std::variant>)
    std::visit([&](auto* leaf) { f(*leaf); }, p);
  else
    f(*p);
}

// --- the tree's side -----------------------------------------------------------------------------

template <class Ptr>
struct named_leaf {
  std::string name;  // the tensor name: keystr(path, "/")
  KeyPath path;
  Ptr leaf;
};

// The tree's leaves with their tensor names; two leaves may not share a name (keys holding '/'
// can make them collide), and no leaf may be called __metadata__.
template <class Tree>
auto named_leaves(Tree& tree, std::string_view function) {
  auto leaves = grove::tree_leaves_with_path(tree);
  using Ptr = typename decltype(leaves)::value_type::second_type;
  std::vector<named_leaf<Ptr>> out;
  out.reserve(leaves.size());
  std::unordered_map<std::string, std::size_t> seen;
  for (auto& [path, leaf] : leaves) {
    std::string name = keystr(path, "/");
    if (name == "__metadata__")
      throw grove::argument_error(
          std::string(function) + ": the leaf at key path " + keystr(path) +
          " would be stored as tensor \"__metadata__\", a name safetensors reserves");
    if (const auto [it, fresh] = seen.emplace(name, out.size()); !fresh)
      throw grove::argument_error(std::string(function) + ": the leaves at key paths " +
                                  keystr(out[it->second].path) + " and " + keystr(path) +
                                  " would both be stored as tensor " + json_quoted(name) +
                                  "; a dict key holding '/' makes simple key paths ambiguous");
    out.push_back({std::move(name), std::move(path), leaf});
  }
  return out;
}

inline const char* layout_name(random::key_layout l) {
  return l == random::key_layout::legacy ? "legacy" : "partitionable";
}

// The strings a JSON header can carry must be valid UTF-8; say which one is not.
inline void check_utf8(const std::string& s, std::string_view function, const std::string& what) {
  try {
    (void)nlohmann::json(s).dump();
  } catch (const nlohmann::json::type_error&) {
    throw grove::argument_error(std::string(function) + ": " + what +
                                " is not valid UTF-8, which JSON requires");
  }
}

}  // namespace grove::io::detail
