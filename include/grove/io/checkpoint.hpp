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

#include "grove/io/checkpoint_types.hpp"
#include "grove/io/detail/file.hpp"
#include "grove/io/detail/leaf_codec.hpp"
#include "grove/io/detail/load_plan.hpp"
#include "grove/io/detail/safetensors.hpp"
#include "grove/io/detail/shards.hpp"
#include "grove/io/error.hpp"
#include "grove/io/layouts.hpp"
#include "grove/random/key.hpp"
#include "grove/tree.hpp"
#include "grove/tree/eigen.hpp"
#include "grove/version.hpp"

namespace grove::io {

namespace detail {

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
