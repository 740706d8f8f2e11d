// grove/io/checkpoint.hpp: checkpoints of pytrees as safetensors files, the format PyTorch,
// JAX/Flax and Hugging Face exchange weights in.
//
//   grove::io::save("model.safetensors", params, {{"epoch", "3"}});
//   auto params2 = grove::io::load("model.safetensors", params);  // the file's values
//   grove::io::load_into("model.safetensors", params);  // in place, all or nothing
//   auto report = grove::io::load_into("torch.safetensors", params,
//                                      {.strict = false, .rename = torch_to_grove});
//
// Each leaf is one tensor, named by its key path in the simple form (`0/w`, `opt_state/mu/0/b`),
// little-endian and row-major (a (rows, cols) Eigen matrix reads as the same (rows, cols) array
// in numpy, whatever Eigen's storage order; so does an N-D Eigen::Tensor, element (i0, ..., iN-1)
// being numpy's a[i0, ..., iN-1]). `__metadata__` holds the tree's TreeDef, grove's
// version, the layout of each grove::random::Key and the user's string metadata.
//
// save() never leaves a half-written file behind: it writes a temporary file in the same
// directory, fsyncs it, renames it over the target and fsyncs the directory. load() and
// load_into() validate the header against the safetensors rules and against the tree, then read
// (pread) only the tensors they load and check their values, before they produce or touch
// anything, and report every problem as grove::io::format_error.
//
// A sharded checkpoint (Hugging Face's model.safetensors.index.json and its shard files) loads by
// passing the index's path to load, load_into or inspect.
//
// Needs nlohmann-json (Debian: nlohmann-json3-dev) and a POSIX system.
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

#include "grove/io/detail/file.hpp"
#include "grove/io/detail/safetensors.hpp"
#include "grove/io/detail/shards.hpp"
#include "grove/io/detail/tensor_order.hpp"
#include "grove/io/error.hpp"
#include "grove/random.hpp"
#include "grove/tree.hpp"
#include "grove/tree/eigen.hpp"
#include "grove/version.hpp"

namespace grove::io {

/// A checkpoint's user metadata: string keys and string values (safetensors allows no others).
/// Keys that start with "grove." are grove's own.
using metadata = std::map<std::string, std::string>;

/// One tensor of a checkpoint, as its header describes it.
struct tensor_info {
  std::string name;                  // the leaf's key path in the simple form: "0/w"
  std::string dtype;                 // "F32", "I64", "U32", ... (safetensors' spelling)
  std::vector<std::uint64_t> shape;  // row-major: (rows, cols) for a matrix, (n,) for a vector
  std::uint64_t data_begin = 0;      // data_offsets, relative to the data after the header
  std::uint64_t data_end = 0;
  /// The shard that holds the tensor, as the index names it; empty for a single file.
  std::string file = {};
};

/// What inspect() finds in a checkpoint's header.
struct checkpoint_info {
  std::vector<tensor_info> tensors;  // in the header's order: leaf order for files grove wrote
  io::metadata metadata;             // the user's metadata (without grove's own entries)
  std::string treedef;        // the saved tree's TreeDef; empty if grove did not write the file
  std::string grove_version;  // the grove that wrote it; empty if grove did not
  std::map<std::string, random::key_layout> key_layouts;  // tensor name -> layout, for keys
};

/// How load() and load_into() match a file's tensors to a tree's leaves, following PyTorch's
/// `load_state_dict(strict=...)`. With designated initialisers:
/// `load_into(path, tree, {.strict = false, .rename = torch_names})`.
struct load_options {
  /// Every leaf must find a tensor and every tensor a leaf (today's behaviour, and torch's
  /// default). With false, leaves without a tensor keep their values and tensors without a leaf
  /// are skipped; both are listed in the load_report. A tensor found with another shape, or with
  /// a dtype the leaf cannot take, fails either way.
  bool strict = true;
  /// Applied to each tensor name in the file before matching it with the leaves' names (grove's
  /// key paths in the simple form, "0/w"); an empty result skips that tensor (it is then neither
  /// matched nor unexpected). Empty: names are matched as they are.
  std::function<std::string(std::string_view file_name)> rename = {};
  /// Allow narrowing dtype conversions: F64 -> F32, F32 -> F16/BF16, F16 <-> BF16 (rounding to
  /// nearest, ties to even; overflow gives infinity), and integers into a narrower type or one of
  /// another sign (a value that does not fit fails the load, naming the tensor and the element).
  /// Widening conversions (F16/BF16 -> F32/F64, F32 -> F64, integers into a wider type that holds
  /// every value) keep every value and always happen. Floats and integers never mix.
  bool convert = false;
  /// Which 2-D tensors load transposed, by their names in the file (before rename): a file's
  /// (r, c) tensor for which it returns true fills a (c, r) leaf, leaf(i, j) = file[j, i]. For
  /// Flax/JAX kernels, which are (in, out) where grove's w is (out, in): io::flax_kernels().
  /// True for a tensor that is not 2-D fails the load, naming it. Empty: nothing is transposed.
  std::function<bool(std::string_view file_name)> transpose = {};
};

/// What a load did beyond filling leaves (torch's `_IncompatibleKeys` vocabulary).
struct load_report {
  /// The tensor names (grove's simple key paths) of the leaves the file had no tensor for, in the
  /// tree's leaf order; their leaves kept their values. Empty after a strict load.
  std::vector<std::string> missing;
  /// The file's tensors (their names in the file, before rename) that matched no leaf, in the
  /// header's order. Tensors that rename skipped are not listed. Empty after a strict load.
  std::vector<std::string> unexpected;
  /// The file's user metadata (without grove's own "grove." entries).
  io::metadata metadata;
};

/// What load() with options returns: the tree and the report.
template <class Tree>
struct load_result {
  Tree tree;
  load_report report;
};

/// How save() stores the leaves' floats.
enum class float_storage : std::uint8_t {
  keep,  ///< each leaf's own dtype (float: F32)
  f16,   ///< float leaves as F16, rounded to nearest, ties to even (overflow: infinity)
  bf16   ///< float leaves as BF16, rounded to nearest, ties to even
};

/// Settings of save() beyond the metadata.
struct save_options {
  /// The dtype of float (not double) leaves; Eigen::half and Eigen::bfloat16 leaves are always
  /// F16 and BF16, double leaves always F64.
  float_storage floats = float_storage::keep;
};

namespace detail {

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

// --- 16-bit floats, bit by bit (independent of the compiler's and Eigen's conversions) ----------

// A binary floating-point format's bits (`from_mantissa` stored mantissa bits, `from_exponent`
// exponent bits) widened exactly to a wider format's, in integer arithmetic only, as numpy's
// npy_halfbits_to_floatbits and npy_halfbits_to_doublebits widen float16: a NaN keeps its sign,
// its payload (shifted to the top of the wider mantissa) and its quiet bit, so a signaling NaN
// stays signaling (a conversion through the FPU would quiet it, and whether the compiler folds
// such a round trip away depends on the optimisation level); -0 keeps its sign; a subnormal
// becomes the normal number of the same value. The wider format must have more exponent bits.
template <int from_mantissa, int from_exponent, int to_mantissa, int to_exponent>
constexpr std::uint64_t widen_float_bits(std::uint64_t bits) noexcept {
  static_assert(to_mantissa >= from_mantissa && to_exponent > from_exponent);
  constexpr std::uint64_t mantissa_mask = (std::uint64_t{1} << from_mantissa) - 1;
  constexpr std::uint64_t exponent_all = (std::uint64_t{1} << from_exponent) - 1;
  constexpr std::int64_t from_bias = (std::int64_t{1} << (from_exponent - 1)) - 1;
  constexpr std::int64_t to_bias = (std::int64_t{1} << (to_exponent - 1)) - 1;
  const std::uint64_t sign = (bits >> (from_mantissa + from_exponent)) & 1u;
  const std::uint64_t exponent = (bits >> from_mantissa) & exponent_all;
  std::uint64_t mantissa = bits & mantissa_mask;
  std::uint64_t out_exponent = 0;
  if (exponent == exponent_all) {  // infinity or NaN: all ones, and the payload as it is
    out_exponent = (std::uint64_t{1} << to_exponent) - 1;
  } else if (exponent != 0) {
    out_exponent =
        static_cast<std::uint64_t>(static_cast<std::int64_t>(exponent) - from_bias + to_bias);
  } else if (mantissa != 0) {  // subnormal: normalise, moving the leading 1 out of the field
    std::int64_t e = 1 - from_bias;
    while ((mantissa & (mantissa_mask + 1)) == 0) {
      mantissa <<= 1;
      --e;
    }
    mantissa &= mantissa_mask;
    out_exponent = static_cast<std::uint64_t>(e + to_bias);
  }
  return (sign << (to_mantissa + to_exponent)) | (out_exponent << to_mantissa) |
         (mantissa << (to_mantissa - from_mantissa));
}

// An F16 value's F32 bits, exactly (numpy's npy_halfbits_to_floatbits).
constexpr std::uint32_t f16_to_float_bits(std::uint16_t h) noexcept {
  return static_cast<std::uint32_t>(widen_float_bits<10, 5, 23, 8>(h));
}
// A BF16 value's F32 bits: BF16 is the upper half of an F32.
constexpr std::uint32_t bf16_to_float_bits(std::uint16_t b) noexcept {
  return std::uint32_t{b} << 16;
}

// An F16 value, exactly, as a double (numpy's npy_halfbits_to_doublebits): NaN keeps its sign,
// payload and quiet bit, -0 its sign, subnormals their value.
inline double f16_to_double(std::uint16_t h) noexcept {
  return std::bit_cast<double>(widen_float_bits<10, 5, 52, 11>(h));
}

// A BF16 value, exactly, as a double, widened as F16 is (a signaling NaN stays signaling).
inline double bf16_to_double(std::uint16_t b) noexcept {
  return std::bit_cast<double>(widen_float_bits<7, 8, 52, 11>(b));
}

// `x` rounded to the nearest value of a binary format with `mantissa_bits` stored mantissa bits,
// exponent bias `bias` and `exponent_bits` exponent bits, ties to even (IEEE's default), as that
// format's bits. Overflow gives infinity; NaN gives a quiet NaN with x's sign and the top of its
// payload. One rounding from double, so no double-rounding error for float or double inputs.
inline std::uint16_t round_to_binary16(double x, int mantissa_bits, int exponent_bits) noexcept {
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const std::uint16_t sign = std::signbit(x) ? static_cast<std::uint16_t>(1u << 15) : 0;
  const std::uint16_t exponent_mask =
      static_cast<std::uint16_t>(((1u << exponent_bits) - 1) << mantissa_bits);
  if (std::isnan(x)) {
    const std::uint64_t payload = std::bit_cast<std::uint64_t>(x) & ((std::uint64_t{1} << 52) - 1);
    const auto top = static_cast<std::uint16_t>(payload >> (52 - mantissa_bits));
    return static_cast<std::uint16_t>(sign | exponent_mask | top |
                                      (1u << (mantissa_bits - 1)));  // quiet
  }
  const double magnitude = std::fabs(x);
  if (magnitude == 0) return sign;
  if (std::isinf(magnitude)) return sign | exponent_mask;
  const int min_exponent = 1 - bias;  // of the normal numbers
  int e = std::max(std::ilogb(magnitude), min_exponent);
  const double quantum = std::ldexp(1.0, e - mantissa_bits);
  const double rounded = std::nearbyint(magnitude / quantum) * quantum;   // exact scaling
  if (rounded >= std::ldexp(1.0, bias + 1)) return sign | exponent_mask;  // infinity
  e = std::ilogb(rounded);
  if (e < min_exponent)  // subnormal: the exponent field is 0
    return static_cast<std::uint16_t>(
        sign | static_cast<std::uint16_t>(std::ldexp(rounded, bias - 1 + mantissa_bits)));
  const auto mantissa = static_cast<std::uint16_t>(
      static_cast<std::uint32_t>(std::ldexp(rounded, mantissa_bits - e)) - (1u << mantissa_bits));
  return static_cast<std::uint16_t>(sign | ((e + bias) << mantissa_bits) | mantissa);
}
inline std::uint16_t round_to_f16(double x) noexcept {
  return round_to_binary16(x, 10, 5);
}
inline std::uint16_t round_to_bf16(double x) noexcept {
  return round_to_binary16(x, 7, 8);
}

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

// --- loading into a tree -------------------------------------------------------------------------

// Transposes the row-major (rows, cols) array of `size`-byte elements at `data` in place (into
// row-major (cols, rows)), through `scratch` of as many bytes.
inline void transpose_bytes(std::byte* data, std::byte* scratch, std::uint64_t rows,
                            std::uint64_t cols, std::size_t size) noexcept {
  for (std::uint64_t i = 0; i < rows; ++i)
    for (std::uint64_t j = 0; j < cols; ++j)
      std::memcpy(scratch + (j * rows + i) * size, data + (i * cols + j) * size, size);
  std::memcpy(data, scratch, static_cast<std::size_t>(rows * cols * size));
}

// Copies a tensor's data bytes [begin, end) to `out`.
using tensor_reader = std::function<void(const tensor_entry&, std::byte*)>;

// A leaf's tensor name (keystr(path, "/")) and key path.
struct leaf_key {
  std::string name;
  KeyPath path;
};

// What read_matching leaves for the copy into the leaves: the matched tensors' bytes, in native
// byte order, each leaf's at buffer + place[k].
struct loaded_tensors {
  load_report report;
  std::vector<std::size_t> order;  // the leaves to write, in file order
  std::vector<const tensor_entry*> match;
  std::vector<std::uint64_t> place;
  std::vector<std::uint8_t> layout;  // a key leaf's: 0 keep the tree's, 1 partitionable, 2 legacy
  std::unique_ptr<std::uint64_t[]> buffer;
};

// Checks the file's header against the leaves (names after options.rename, dtypes, shapes) before
// any data is read, then reads only the tensors that match a leaf and checks their values: nothing
// is written into the tree here, so that it changes completely or not at all, and memory is
// proportional to what is loaded, not to the file. Not a template: the leaves come as their facts.
inline loaded_tensors read_matching(const reading& ctx, const header& head,
                                    const tensor_reader& read, const std::vector<leaf_key>& leaves,
                                    const std::vector<leaf_facts>& facts,
                                    const load_options& options) {
  // The file's names after rename: name -> position in head.tensors.
  std::unordered_map<std::string, std::size_t> by_name;
  std::vector<bool> skipped(head.tensors.size(), false);
  if (options.rename) {
    by_name.reserve(head.tensors.size());
    for (std::size_t i = 0; i < head.tensors.size(); ++i) {
      std::string renamed = options.rename(head.tensors[i].name);
      if (renamed.empty()) {
        skipped[i] = true;
        continue;
      }
      const auto [it, fresh] = by_name.emplace(std::move(renamed), i);
      if (!fresh)
        ctx.fail("tensors " + json_quoted(head.tensors[it->second].name) + " and " +
                 json_quoted(head.tensors[i].name) + " both rename to " + json_quoted(it->first));
    }
  }
  auto find = [&](const std::string& name) -> const std::size_t* {
    if (options.rename) {
      const auto it = by_name.find(name);
      return it == by_name.end() ? nullptr : &it->second;
    }
    const auto it = head.index.find(name);
    return it == head.index.end() ? nullptr : &it->second;
  };

  load_report report;
  std::vector<std::string> problems;
  std::vector<const tensor_entry*> match(leaves.size(), nullptr);
  std::vector<bool> transposed(leaves.size(), false);
  std::vector<bool> used(head.tensors.size(), false);
  for (std::size_t k = 0; k < leaves.size(); ++k) {
    const auto& nl = leaves[k];
    const auto& leaf = facts[k];
    {
      const auto* position = find(nl.name);
      const auto* t = position ? &head.tensors[*position] : nullptr;
      const std::string who =
          "tensor " + json_quoted(t ? t->name : nl.name) +
          (t && t->name != nl.name ? " (renamed " + json_quoted(nl.name) + ")" : std::string()) +
          " (key path " + keystr(nl.path) + ")";
      if (!t) {
        if (options.strict)
          problems.push_back(who + " is missing from the file; the tree has " +
                             leaf_description(leaf) + " there");
        else
          report.missing.push_back(nl.name);
        continue;
      }
      used[*position] = true;
      const auto& want = leaf.layout;
      const auto how = conversion_of(t->type, want.type);
      const std::string types = "dtype " + std::string(info(t->type).name) + " in the file, " +
                                std::string(info(want.type).name) + " (" +
                                std::string(info(want.type).numpy) + ") in the tree";
      if (how == conversion::impossible || (how != conversion::exact && leaf.key))
        problems.push_back(who + ": " + types + "; grove does not convert " +
                           std::string(info(t->type).name) + " to " +
                           std::string(info(want.type).name));
      else if (how == conversion::narrowing && !options.convert)
        problems.push_back(who + ": " + types + "; " + std::string(info(t->type).name) + " to " +
                           std::string(info(want.type).name) +
                           " narrows, which load_options::convert allows");
      else if (options.transpose && options.transpose(t->name)) {
        if (t->shape.size() != 2)
          problems.push_back(who +
                             ": load_options::transpose asks to transpose it, but its shape " +
                             shape_str(t->shape) + " is not 2-D");
        else if (std::vector<std::uint64_t>{t->shape[1], t->shape[0]} != want.shape)
          problems.push_back(who + ": shape " + shape_str(t->shape) + " in the file, transposed " +
                             shape_str({t->shape[1], t->shape[0]}) + ", " + shape_str(want.shape) +
                             " in the tree");
        else {
          match[k] = t;
          transposed[k] = true;
        }
      } else if (t->shape != want.shape)
        problems.push_back(who + ": shape " + shape_str(t->shape) + " in the file, " +
                           shape_str(want.shape) + " in the tree");
      else
        match[k] = t;
    }
  }
  for (std::size_t i = 0; i < head.tensors.size(); ++i) {
    if (used[i] || skipped[i]) continue;
    if (options.strict)
      problems.push_back("the file has tensor " + json_quoted(head.tensors[i].name) + " (" +
                         std::string(info(head.tensors[i].type).name) + " " +
                         shape_str(head.tensors[i].shape) + "), which the tree does not have");
    else
      report.unexpected.push_back(head.tensors[i].name);
  }
  auto fail_all = [&] {
    constexpr std::size_t shown = 20;
    if (problems.size() == 1) ctx.fail(problems.front());
    std::string msg =
        "the file does not match the tree (" + std::to_string(problems.size()) + " problems):";
    for (std::size_t i = 0; i < problems.size() && i < shown; ++i) msg += "\n  " + problems[i];
    if (problems.size() > shown)
      msg += "\n  ... and " + std::to_string(problems.size() - shown) + " more";
    ctx.fail(msg);
  };
  if (!problems.empty()) fail_all();

  // Only now is data read: the matched tensors, each at an 8-byte aligned place of one buffer (so
  // that data unaligned in the file is aligned here), in file order.
  std::vector<std::uint64_t> place(leaves.size(), 0);
  std::uint64_t total = 0;
  std::vector<std::size_t> order;
  for (std::size_t k = 0; k < leaves.size(); ++k) {
    if (!match[k]) continue;
    order.push_back(k);
    place[k] = total;
    total += (match[k]->end - match[k]->begin + 7) / 8 * 8;
  }
  std::unique_ptr<std::uint64_t[]> buffer(new std::uint64_t[total / 8 + 1]);
  auto* data = reinterpret_cast<std::byte*>(buffer.get());
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::tie(match[a]->shard, match[a]->begin) < std::tie(match[b]->shard, match[b]->begin);
  });
  for (const auto k : order) read(*match[k], data + place[k]);

  // The tensors to transpose, in place through one scratch buffer as large as the largest.
  std::uint64_t scratch_size = 0;
  for (const auto k : order)
    if (transposed[k]) scratch_size = std::max(scratch_size, match[k]->end - match[k]->begin);
  if (scratch_size > 0) {
    std::vector<std::byte> scratch(static_cast<std::size_t>(scratch_size));
    for (const auto k : order)
      if (transposed[k])
        transpose_bytes(data + place[k], scratch.data(), match[k]->shape[0], match[k]->shape[1],
                        info(match[k]->type).size);
  }

  // The values: a BOOL tensor may hold only 0 and 1, and a narrowing integer load needs every
  // value to fit.
  for (const auto k : order) {
    const auto* t = match[k];
    std::byte* in = data + place[k];
    const std::uint64_t n = t->end - t->begin;
    if (t->type == dtype::BOOL) {
      for (std::uint64_t b = 0; b < n; ++b)
        if (in[b] != std::byte{0} && in[b] != std::byte{1})
          ctx.fail("tensor " + json_quoted(t->name) + " is BOOL, but its byte at file offset " +
                   (head.shards.empty()
                        ? std::to_string(head.data_start + t->begin + b)
                        : std::to_string(head.shards[t->shard].data_start + t->begin + b) +
                              " of shard " + json_quoted(head.shards[t->shard].name)) +
                   " is " + std::to_string(static_cast<int>(in[b])) + ", neither 0 nor 1");
    }
    from_little_endian(in, static_cast<std::size_t>(n / info(t->type).size), info(t->type).size);
    const dtype want = facts[k].layout.type;
    if (conversion_of(t->type, want) != conversion::narrowing || !facts[k].out_of_range) continue;
    std::string value;
    const std::size_t bad = facts[k].out_of_range(in, t->type, n / info(t->type).size, value);
    if (bad != static_cast<std::size_t>(-1))
      ctx.fail("tensor " + json_quoted(t->name) + " (key path " + keystr(leaves[k].path) +
               "): element " + std::to_string(bad) + " (row-major) is " + value + ", which " +
               std::string(info(want).numpy) + " cannot hold");
  }

  // Everything is checked. Prepare what the copy needs (the user's metadata, the keys' layouts),
  // so that the copy itself can neither fail nor allocate.
  for (const auto& [key, value] : head.metadata)
    if (!key.starts_with(reserved_prefix)) report.metadata.emplace(key, value);
  std::vector<std::uint8_t> layout(leaves.size(),
                                   0);  // 0: keep the tree's, 1: partitionable, 2: legacy
  for (const auto k : order) {
    if (!facts[k].key) continue;
    // The file's layout wins; a file that does not say (one written outside grove) keeps the
    // tree's.
    const auto it = head.metadata.find(std::string(key_layout_prefix) + match[k]->name);
    if (it != head.metadata.end()) layout[k] = it->second == "legacy" ? 2 : 1;
  }
  return {std::move(report), std::move(order),  std::move(match),
          std::move(place),  std::move(layout), std::move(buffer)};
}

// Checks the file's header against the tree's leaves and reads what matches (read_matching), then
// writes the values into the leaves, which can neither fail nor allocate.
template <class Tree>
load_report fill_tree(const reading& ctx, const header& head, const tensor_reader& read, Tree& tree,
                      const load_options& options) {
  auto leaves = named_leaves(tree, ctx.function);
  std::vector<leaf_key> keys;
  std::vector<leaf_facts> facts;
  keys.reserve(leaves.size());
  facts.reserve(leaves.size());
  for (auto& nl : leaves) {
    visit_leaf(nl.leaf, [&](const auto& leaf) { facts.push_back(facts_of(leaf)); });
    keys.push_back({std::move(nl.name), std::move(nl.path)});
  }
  loaded_tensors got = read_matching(ctx, head, read, keys, facts, options);
  std::byte* data = reinterpret_cast<std::byte*>(got.buffer.get());
  for (const auto k : got.order) {
    visit_leaf(leaves[k].leaf, [&](auto& leaf) noexcept {
      decode(data + got.place[k], got.match[k]->type, leaf);
      if constexpr (key_leaf<std::remove_cvref_t<decltype(leaf)>>) {
        if (got.layout[k] != 0)
          leaf.layout =
              got.layout[k] == 2 ? random::key_layout::legacy : random::key_layout::partitionable;
      }
    });
  }
  return std::move(got.report);
}

// Validates and loads a checkpoint held in memory (a whole file's bytes), as load_into does with
// a file. For the fuzzer and for tests.
template <class Tree>
load_report load_bytes_into(const std::byte* bytes, std::size_t size, Tree& tree,
                            const reading& ctx, const load_options& options = {}) {
  if (size == 0)
    ctx.fail("the file is empty; a safetensors file starts with an 8-byte header length");
  if (size < 8)
    ctx.fail("the file has " + std::to_string(size) +
             " bytes, fewer than the 8 of a header length");
  const std::uint64_t n = load_u64_le(bytes);
  if (n > size - 8)
    ctx.fail("the header length (file bytes 0 to 8) is " + std::to_string(n) +
             ", past the end of the file: only " + std::to_string(size - 8) + " bytes follow it");
  if (n > max_header_size)
    ctx.fail("the header length is " + std::to_string(n) + ", more than safetensors' limit");
  const header head = parse_header(std::string_view(reinterpret_cast<const char*>(bytes) + 8, n),
                                   8 + n, size - 8 - n, ctx);
  const std::byte* data = bytes + 8 + n;
  return fill_tree(
      ctx, head,
      [&](const tensor_entry& t, std::byte* out) {
        std::memcpy(out, data + t.begin, static_cast<std::size_t>(t.end - t.begin));
      },
      tree, options);
}

template <class Tree>
load_report load_into(std::string_view function, const std::filesystem::path& path, Tree& tree,
                      const load_options& options) {
  const reading ctx{function, path};
  if (is_index_path(path)) {
    auto set = read_sharded(ctx);
    return fill_tree(
        ctx, set.head, [&](const tensor_entry& t, std::byte* out) { set.read(t, out); }, tree,
        options);
  }
  auto file = read_checkpoint(ctx);
  return fill_tree(
      ctx, file.head,
      [&](const tensor_entry& t, std::byte* out) {
        read_checkpoint_range(ctx, file, t.begin, t.end - t.begin, out);
      },
      tree, options);
}

// Appends `s` to `out` as a JSON string (checked to be valid UTF-8 before).
inline void append_json_string(std::string& out, const std::string& s) {
  out += nlohmann::json(s).dump();
}

}  // namespace detail

/// Saves `tree` to `path` as a safetensors file: one tensor per leaf, named by the leaf's key path
/// in the simple form (`0/w`), little-endian and row-major. `__metadata__` holds `user_metadata`
/// together with grove's entries: "grove.version", "grove.treedef" (the TreeDef as it prints) and,
/// for each grove::random::Key leaf, "grove.key_layout:NAME" ("partitionable" or "legacy").
///
/// Atomic: the file is written under a temporary name in the same directory (`.NAME.tmp-...`),
/// fsync'ed, renamed over `path` and the directory fsync'ed. If anything fails, `path` keeps its
/// previous contents (or stays absent) and the temporary file is removed.
///
/// Leaves: bool, integer, float and double scalars; Eigen::Matrix and Eigen::Array (any size,
/// any storage order; also maps and other dense expressions) of those; N-D Eigen::Tensor,
/// Eigen::TensorFixedSize and Eigen::TensorMap of those (either storage order), stored with shape
/// (d0, ..., dN-1) and their elements in row-major order, so that numpy's a[i0, ..., iN-1] is the
/// tensor's element (i0, ..., iN-1) (rank 0: shape ()); grove::random::Key.
///
/// `options.floats` stores float leaves as F16 or BF16 (rounded to nearest, ties to even), as
/// PyTorch's `model.half()` / `model.bfloat16()` would; Eigen::half and Eigen::bfloat16 leaves are
/// always stored as F16 and BF16.
///
/// Throws std::invalid_argument for a tree or metadata that cannot be saved (two leaves with the
/// same simple key path, a user key starting with "grove.", a string that is not UTF-8), before
/// creating any file; std::system_error when the file cannot be written (its code() says why:
/// no such directory, permission denied, no space left...).
template <class Tree>
void save(const std::filesystem::path& path, const Tree& tree, const metadata& user_metadata = {},
          const save_options& options = {}) {
  constexpr std::string_view function = "grove::io::save";
  using namespace detail;
  const auto leaves = named_leaves(tree, function);

  struct planned {
    leaf_layout layout;
    std::uint64_t begin = 0;
  };
  std::vector<planned> plan;
  plan.reserve(leaves.size());
  for (const auto& nl : leaves) {
    visit_leaf(nl.leaf,
               [&](const auto& leaf) { plan.push_back({layout_of(leaf, options.floats)}); });
    check_utf8(nl.name, function, "the tensor name of key path " + keystr(nl.path));
  }
  // The data is laid out by decreasing element size (leaf order within a size), as safetensors'
  // own writer does: with the header padded to a multiple of 8, every tensor is then aligned for
  // its element type in the file, for readers that map it.
  std::vector<std::size_t> order(leaves.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return info(plan[a].layout.type).size > info(plan[b].layout.type).size;
  });
  std::uint64_t offset = 0;
  for (const auto i : order) {
    plan[i].begin = offset;
    offset += plan[i].layout.nbytes;
  }

  // The header is written as text, in one pass: a JSON document of 100,000 leaves would cost
  // time quadratic in their number (nlohmann's ordered objects find keys by linear search).
  // The same bytes nlohmann's dump() of the same ordered object gives.
  for (const auto& [key, value] : user_metadata) {
    if (key.starts_with(reserved_prefix))
      throw grove::argument_error(
          std::string(function) + ": metadata key " + json_quoted(key) +
          " starts with \"grove.\", which grove reserves for its own entries");
    check_utf8(key, function, "metadata key " + json_quoted(key));
    check_utf8(value, function, "the value of metadata key " + json_quoted(key));
  }
  std::string text = "{\"__metadata__\":{";
  auto meta_entry = [&](const std::string& key, const std::string& value) {
    if (text.back() != '{') text += ',';
    append_json_string(text, key);
    text += ':';
    append_json_string(text, value);
  };
  meta_entry(std::string(version_key), std::string(grove::version));
  meta_entry(std::string(treedef_key), grove::tree_structure(tree).str());
  for (std::size_t i = 0; i < leaves.size(); ++i)
    visit_leaf(leaves[i].leaf, [&](const auto& leaf) {
      if constexpr (key_leaf<std::remove_cvref_t<decltype(leaf)>>)
        meta_entry(std::string(key_layout_prefix) + leaves[i].name, layout_name(leaf.layout));
    });
  for (const auto& [key, value] : user_metadata) meta_entry(key, value);
  text += '}';
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const auto& p = plan[i];
    text += ',';
    append_json_string(text, leaves[i].name);
    text += ":{\"dtype\":\"";
    text += info(p.layout.type).name;
    text += "\",\"shape\":[";
    for (std::size_t d = 0; d < p.layout.shape.size(); ++d) {
      if (d) text += ',';
      text += std::to_string(p.layout.shape[d]);
    }
    text += "],\"data_offsets\":[";
    text += std::to_string(p.begin);
    text += ',';
    text += std::to_string(p.begin + p.layout.nbytes);
    text += "]}";
  }
  text += '}';
  text.append((8 - text.size() % 8) % 8, ' ');  // the data then starts 8-byte aligned

  atomic_file file(path, function);
  std::byte length[8];
  store_u64_le(text.size(), length);
  file.write(length, 8);
  file.write(text.data(), text.size());
  std::vector<std::uint64_t> scratch;  // 8-byte aligned, so any scalar can be encoded into it
  for (const auto i : order) {
    scratch.resize((plan[i].layout.nbytes + 7) / 8);
    auto* bytes = reinterpret_cast<std::byte*>(scratch.data());
    visit_leaf(leaves[i].leaf, [&](const auto& leaf) { encode(leaf, bytes, options.floats); });
    file.write(bytes, plan[i].layout.nbytes);
  }
  file.commit();
}

/// Reads the checkpoint at `path` into `tree`, whose structure, dtypes and shapes must match the
/// file's tensors exactly (F16/BF16 -> F32/F64, F32 -> F64 and integer widening excepted). The
/// header is checked before any data is read, and only the tensors that fill a leaf are read; on
/// any error `tree` keeps its values.
///
/// A `path` whose name ends in ".json" is a sharded checkpoint's index, as Hugging Face writes
/// it (`model.safetensors.index.json`: {"metadata": {...}, "weight_map": {"tensor name":
/// "shard file", ...}}): the tensors of all its shards load as one file's would, and the index's
/// "metadata" is the checkpoint's metadata (a value that is not a string as its JSON text:
/// "total_size" -> "4920052736"). Shard names are relative to the index's directory and must stay
/// inside it: an absolute name or a "." or ".." component is a format_error naming the weight_map
/// entry, as are a tensor a shard holds that the weight_map does not give to it and a weight_map
/// entry its shard lacks. Symbolic links in the directory are followed wherever they lead (they
/// are the directory's, not the index's: Hugging Face's hub cache is made of them). Each shard is
/// opened once, its header checked as a single file's is. A grove::random::Key leaf takes the
/// layout the file records (a file that records none, say one written by Python, leaves the tree's
/// layout).
///
/// Returns the file's user metadata (without grove's own "grove." entries).
///
/// Throws grove::io::format_error for a malformed file or one that does not match `tree` (every
/// missing, extra or mismatched tensor is listed, with its key path and both dtypes or shapes);
/// std::system_error when the file cannot be opened or read; std::invalid_argument for a tree
/// whose leaves would share a tensor name.
template <class Tree>
metadata load_into(const std::filesystem::path& path, Tree& tree) {
  return detail::load_into("grove::io::load_into", path, tree, {}).metadata;
}

/// Reads the checkpoint at `path` into `tree` as `options` say (PyTorch's
/// `load_state_dict(state_dict, strict)`, with renaming and dtype conversion): tensor names pass
/// through `options.rename` before they are matched with the leaves' simple key paths; with
/// `options.strict` false, leaves the file lacks keep their values and tensors the tree lacks are
/// skipped, and the report lists both; `options.convert` allows narrowing dtype conversions;
/// `options.transpose` loads the 2-D tensors it names transposed (Flax kernels: flax_kernels()).
///
/// Returns the report: missing leaves, unexpected tensors, the user metadata.
///
/// Throws as load_into(path, tree) does; with `options.strict`, a missing or unexpected tensor is
/// a format_error that lists them all, and `tree` is untouched. Either way a tensor with another
/// shape, a dtype the leaf cannot take (F8_E4M3 into a float, F32 into an int, F64 into a float
/// without `convert`), an integer that does not fit, or two tensors renamed to one name is a
/// format_error naming the tensor, as is a transposed tensor that is not 2-D. An exception
/// thrown by `options.rename` or `options.transpose` propagates, with `tree` untouched.
template <class Tree>
load_report load_into(const std::filesystem::path& path, Tree& tree, const load_options& options) {
  return detail::load_into("grove::io::load_into", path, tree, options);
}

/// A tree with `like`'s structure (C++ type, dtypes and shapes) and the file's values; see
/// load_into for what is checked and thrown.
template <class Tree>
Tree load(const std::filesystem::path& path, const Tree& like) {
  Tree out = like;
  detail::load_into("grove::io::load", path, out, {});
  return out;
}

/// A copy of `like` loaded from `path` as `options` say, with the report; see
/// load_into(path, tree, options). `auto [params, report] = load(path, like, {.strict = false});`
template <class Tree>
load_result<Tree> load(const std::filesystem::path& path, const Tree& like,
                       const load_options& options) {
  load_result<Tree> out{like, {}};
  out.report = detail::load_into("grove::io::load", path, out.tree, options);
  return out;
}

namespace detail {

// The leaves' simple key paths, for the name maps that follow the tree's structure.
template <class Tree>
std::unordered_set<std::string> leaf_names(const Tree& like, std::string_view function) {
  std::unordered_set<std::string> out;
  for (auto& leaf : named_leaves(like, function)) out.insert(std::move(leaf.name));
  return out;
}

// The layers of `like` that have a leaf called `field`, in leaf order: "0" and "3" for the "w"
// of nn::sequential(dense, layer_norm, relu, dense), "1" for its "scale" ("" for a top-level
// leaf).
template <class Tree>
std::vector<std::string> layers_with(const Tree& like, std::string_view field,
                                     std::string_view function) {
  std::vector<std::string> out;
  for (const auto& leaf : named_leaves(like, function)) {
    const auto slash = leaf.name.rfind('/');
    const std::string_view name(leaf.name);
    if (name.substr(slash == std::string::npos ? 0 : slash + 1) != field) continue;
    std::string layer(name.substr(0, slash == std::string::npos ? 0 : slash));
    if (std::find(out.begin(), out.end(), layer) == out.end()) out.push_back(std::move(layer));
  }
  return out;
}

// The first of `candidates` that, after `layer` + "/", names a leaf; the first candidate when
// none does (or when there are no leaves to ask), so that a strict load lists the tensor.
inline std::string leaf_among(std::string_view layer,
                              std::initializer_list<std::string_view> fields,
                              const std::unordered_set<std::string>* leaves) {
  const std::string base = layer.empty() ? std::string() : std::string(layer) + "/";
  if (leaves)
    for (const std::string_view field : fields)
      if (std::string name = base + std::string(field); leaves->contains(name)) return name;
  return base + std::string(*fields.begin());
}

// torch_sequential_names' mapping; `leaves` null: every "weight" is a Linear's.
inline std::string torch_name(std::string_view name, std::string_view prefix,
                              const std::unordered_set<std::string>* leaves) {
  if (!name.starts_with(prefix)) return std::string(name);
  std::string out(name.substr(prefix.size()));
  std::replace(out.begin(), out.end(), '.', '/');
  const auto slash = out.rfind('/');
  const std::string_view layer =
      std::string_view(out).substr(0, slash == std::string::npos ? 0 : slash);
  const std::string_view last =
      std::string_view(out).substr(slash == std::string::npos ? 0 : slash + 1);
  // nn.Linear's weight and bias are grove's Dense w and b, nn.LayerNorm's grove's scale and bias.
  if (last == "weight") return leaf_among(layer, {"w", "scale"}, leaves);
  if (last == "bias") return leaf_among(layer, {"b", "bias"}, leaves);
  return out;
}

// The K of a Flax module name "KIND_K/..." at the start of `rest` (decimal, no leading zero, at
// most 9 digits), and the rest after the '/'; nothing if `rest` is not one.
inline std::optional<std::pair<std::size_t, std::string_view>> flax_module(std::string_view rest,
                                                                           std::string_view kind) {
  if (!rest.starts_with(kind) || rest.substr(kind.size()).substr(0, 1) != "_") return std::nullopt;
  rest.remove_prefix(kind.size() + 1);
  const auto slash = rest.find('/');
  const std::string_view digits = rest.substr(0, slash);
  if (slash == std::string_view::npos || digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      (digits.size() > 1 && digits[0] == '0'))
    return std::nullopt;
  std::size_t k = 0;
  for (const char c : digits) k = k * 10 + static_cast<std::size_t>(c - '0');
  return std::pair{k, rest.substr(slash + 1)};
}

}  // namespace detail

/// A load_options::rename for a PyTorch state_dict of an `nn.Sequential` of `nn.Linear` layers
/// (and activations), loaded into grove's parameters of the same sequence: the params of
/// `nn::sequential(nn::dense(4, 3), nn::relu, nn::dense(3, 2))`, or the std::vector<nn::Dense>
/// of nn::init_network_params. torch's "0.weight" (out, in) is grove's "0/w" (out, in), "0.bias"
/// its "0/b": the indices are the same, since torch numbers activations as grove does.
///
/// `prefix` ("model.", "net.") is removed from the names that start with it; then each '.' becomes
/// '/', and a last component "weight" becomes "w", "bias" "b" ("encoder.2.bias" with prefix
/// "encoder." is "2/b"). Names without the prefix are kept as they are, so that a strict load
/// lists them; other buffers ("1.running_mean") pass through the same way.
///
/// Without the tree it cannot tell an `nn.LayerNorm`'s weight from a Linear's: for a model with
/// norm layers use torch_sequential_names(params, prefix).
inline std::function<std::string(std::string_view)> torch_sequential_names(
    std::string prefix = {}) {
  return [prefix = std::move(prefix)](std::string_view name) {
    return detail::torch_name(name, prefix, nullptr);
  };
}

/// The same for a state_dict of `nn.Linear` and `nn.LayerNorm` layers (and activations), told
/// apart by the tree they load into, `like` (the params of `nn::sequential(nn::dense(4, 3),
/// nn::layer_norm(3, 1e-5), nn::relu, nn::dense(3, 2))`): "K.weight" becomes "K/w" where `like`
/// has a leaf "K/w" (grove's Dense), else "K/scale" where it has "K/scale" (grove's LayerNorm),
/// and "K.bias" "K/b" or "K/bias" likewise; where `like` has neither, "K/w" and "K/b", so that a
/// strict load lists the tensor. The rest is as for torch_sequential_names(prefix). Only the
/// names of `like`'s leaves are kept, not the tree. (PyTorch's LayerNorm defaults to eps = 1e-5,
/// flax's and grove's to 1e-6: give grove's layer_norm torch's eps.)
///
/// Throws grove::argument_error if two of `like`'s leaves share a simple key path.
template <class Tree>
requires(!std::is_convertible_v<const Tree&, std::string_view>)
    std::function<std::string(std::string_view)> torch_sequential_names(const Tree& like,
                                                                        std::string prefix = {}) {
  return [prefix = std::move(prefix),
          leaves = detail::leaf_names(like, "grove::io::torch_sequential_names")](
             std::string_view name) { return detail::torch_name(name, prefix, &leaves); };
}

/// A load_options::rename for Flax/Orbax-style trees of `nn.Dense` modules
/// ("params/Dense_0/kernel", "params/Dense_0/bias"), into grove's dense parameters: Dense_k's
/// kernel is grove's "L/w" and its bias "L/b", where L is `layers[k]` (grove's index of the k-th
/// dense layer: {0, 2} for `nn::sequential(nn::dense(4, 3), nn::relu, nn::dense(3, 2))`, where
/// Flax counts only the Dense modules), or k itself when `layers` is empty (the
/// std::vector<nn::Dense> of nn::init_network_params). Load with `.transpose = flax_kernels()`:
/// a Flax kernel is (in, out), grove's w (out, in).
///
/// Names that are not `prefix` + "Dense_K/kernel" or "Dense_K/bias", and Dense modules beyond
/// `layers`, are kept as they are, so that a strict load lists them. For a model with
/// `nn.LayerNorm` modules use flax_dense_names(params, prefix).
inline std::function<std::string(std::string_view)> flax_dense_names(
    std::vector<std::size_t> layers = {}, std::string prefix = "params/") {
  return [layers = std::move(layers), prefix = std::move(prefix)](std::string_view name) {
    if (!name.starts_with(prefix)) return std::string(name);
    const auto module = detail::flax_module(name.substr(prefix.size()), "Dense");
    if (!module || (module->second != "kernel" && module->second != "bias"))
      return std::string(name);
    const std::size_t k = module->first;
    if (!layers.empty() && k >= layers.size()) return std::string(name);
    const std::size_t layer = layers.empty() ? k : layers[k];
    return std::to_string(layer) + (module->second == "kernel" ? "/w" : "/b");
  };
}

/// The same for Flax trees of `nn.Dense` and `nn.LayerNorm` modules, placed by the tree they load
/// into, `like` (grove's params of a sequence of layers, such as those of
/// `nn::sequential(nn::dense(4, 3), nn::layer_norm(3), nn::relu, nn::dense(3, 2))`):
/// - "Dense_k/kernel" and "Dense_k/bias" are the "w" and "b" of the k-th layer of `like` that has
///   a leaf "w" (in leaf order: layer 3 for Dense_1 above);
/// - "LayerNorm_k/scale" and "LayerNorm_k/bias" are the "scale" and "bias" of the k-th layer that
///   has a leaf "scale" (layer 1 for LayerNorm_0);
/// - "layers_K/kernel", "layers_K/scale" and "layers_K/bias", the names `flax.linen.Sequential`
///   gives its K-th layer (activations counted, as grove counts them), are grove's layer K's
///   "w", "scale", and "b" or "bias" (whichever `like`'s layer K has).
/// Flax numbers a compact module's submodules per kind (Dense_0, LayerNorm_0, Dense_1), so the
/// k-th Dense is the k-th dense layer in `like`. Load with `.transpose = flax_kernels()`. Names
/// that are none of these after `prefix`, and a Dense_k or LayerNorm_k beyond `like`'s layers of
/// its kind, are kept as they are, so that a strict load lists them (as it lists a layers_K that
/// `like` lacks). Only the names of `like`'s leaves are kept, not the tree.
///
/// Throws grove::argument_error if two of `like`'s leaves share a simple key path.
template <class Tree>
requires(!std::is_convertible_v<const Tree&, std::vector<std::size_t>>)
    std::function<std::string(std::string_view)> flax_dense_names(const Tree& like,
                                                                  std::string prefix = "params/") {
  constexpr const char* function = "grove::io::flax_dense_names";
  return [prefix = std::move(prefix), dense = detail::layers_with(like, "w", function),
          norms = detail::layers_with(like, "scale", function),
          leaves = detail::leaf_names(like, function)](std::string_view name) {
    if (!name.starts_with(prefix)) return std::string(name);
    const std::string_view rest = name.substr(prefix.size());
    if (const auto m = detail::flax_module(rest, "Dense"); m && m->first < dense.size()) {
      if (m->second == "kernel") return detail::leaf_among(dense[m->first], {"w"}, nullptr);
      if (m->second == "bias") return detail::leaf_among(dense[m->first], {"b"}, nullptr);
    } else if (const auto n = detail::flax_module(rest, "LayerNorm");
               n && n->first < norms.size()) {
      if (n->second == "scale") return detail::leaf_among(norms[n->first], {"scale"}, nullptr);
      if (n->second == "bias") return detail::leaf_among(norms[n->first], {"bias"}, nullptr);
    } else if (const auto s = detail::flax_module(rest, "layers")) {
      const std::string layer = std::to_string(s->first);
      if (s->second == "kernel") return detail::leaf_among(layer, {"w"}, nullptr);
      if (s->second == "scale") return detail::leaf_among(layer, {"scale"}, nullptr);
      if (s->second == "bias") return detail::leaf_among(layer, {"b", "bias"}, &leaves);
    }
    return std::string(name);
  };
}

/// A load_options::transpose for Flax/JAX dense kernels: true for the names whose last component
/// is "kernel" ("params/Dense_0/kernel"), which are (in, out) where grove's w is (out, in).
inline std::function<bool(std::string_view)> flax_kernels() {
  return [](std::string_view name) { return name == "kernel" || name.ends_with("/kernel"); };
}

/// Reads and validates a checkpoint's header (not its data): tensor names, dtypes, shapes,
/// metadata. Every dtype the safetensors specification names is listed (F8_E4M3, F4, C64, ...),
/// including those grove cannot load into a leaf. Given a sharded checkpoint's index (a path
/// ending in ".json"), lists the tensors of all its shards (shard by shard, each tensor's
/// tensor_info::file naming its shard) and the index's metadata, after the checks load makes.
/// Throws as load does.
inline checkpoint_info inspect(const std::filesystem::path& path) {
  const detail::reading ctx{"grove::io::inspect", path};
  detail::header head;
  if (detail::is_index_path(path))
    head = std::move(detail::read_sharded(ctx).head);
  else
    head = std::move(detail::read_checkpoint(ctx).head);
  checkpoint_info out;
  out.tensors.reserve(head.tensors.size());
  for (auto& t : head.tensors)
    out.tensors.push_back({std::move(t.name), std::string(detail::info(t.type).name),
                           std::move(t.shape), t.begin, t.end,
                           head.shards.empty() ? std::string() : head.shards[t.shard].name});
  // Moved, not copied: a header of a million entries is held once.
  auto& entries = head.metadata;
  while (!entries.empty()) {
    auto node = entries.extract(entries.begin());
    const std::string& key = node.key();
    if (key == detail::version_key)
      out.grove_version = std::move(node.mapped());
    else if (key == detail::treedef_key)
      out.treedef = std::move(node.mapped());
    else if (key.starts_with(detail::key_layout_prefix))
      out.key_layouts.emplace(key.substr(detail::key_layout_prefix.size()),
                              node.mapped() == "legacy" ? random::key_layout::legacy
                                                        : random::key_layout::partitionable);
    else if (!key.starts_with(detail::reserved_prefix))
      out.metadata.insert(out.metadata.end(), std::move(node));
  }
  return out;
}

}  // namespace grove::io
