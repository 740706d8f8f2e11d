// grove/io/checkpoint_types.hpp: the types of grove's checkpoint API: user metadata, what
// inspect() reports, the options of save() and load(), and what a load reports.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grove/io/detail/safetensors.hpp"
#include "grove/random/key.hpp"

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

}  // namespace grove::io
