// grove/io/checkpoint.hpp: checkpoints of pytrees as safetensors files, the format PyTorch,
// JAX/Flax and Hugging Face exchange weights in.
//
//   grove::io::save("model.safetensors", params, {{"epoch", "3"}});
//   auto params2 = grove::io::load("model.safetensors", params);   // params' structure, file's
//   values grove::io::load_into("model.safetensors", params);             // in place, all or
//   nothing
//
// Each leaf is one tensor, named by its key path in the simple form (`0/w`, `opt_state/mu/0/b`),
// little-endian and row-major (a (rows, cols) Eigen matrix reads as the same (rows, cols) array
// in numpy, whatever Eigen's storage order). `__metadata__` holds the tree's TreeDef, grove's
// version, the layout of each grove::random::Key and the user's string metadata.
//
// save() never leaves a half-written file behind: it writes a temporary file in the same
// directory, fsyncs it, renames it over the target and fsyncs the directory. load() and
// load_into() validate the whole file against the safetensors rules and against the tree before
// they produce or touch anything, and report every problem as grove::io::format_error.
//
// Needs nlohmann-json (Debian: nlohmann-json3-dev) and a POSIX system.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "grove/io/detail/file.hpp"
#include "grove/io/detail/safetensors.hpp"
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
};

/// What inspect() finds in a checkpoint's header.
struct checkpoint_info {
  std::vector<tensor_info> tensors;  // in the header's order: leaf order for files grove wrote
  io::metadata metadata;             // the user's metadata (without grove's own entries)
  std::string treedef;        // the saved tree's TreeDef; empty if grove did not write the file
  std::string grove_version;  // the grove that wrote it; empty if grove did not
  std::map<std::string, random::key_layout> key_layouts;  // tensor name -> layout, for keys
};

/// The state of a training run, saved for --resume: parameters, optimizer state, the random key
/// the next epoch starts from, and the number of epochs done. A pytree node with key paths
/// `params/...`, `opt_state/...`, `key`, `epoch`.
template <class Params, class OptState>
struct train_state {
  Params params;
  OptState opt_state;
  random::Key key;
  std::int64_t epoch = 0;
};
GROVE_NODE(train_state, params, opt_state, key, epoch);

namespace detail {

// --- leaves --------------------------------------------------------------------------------------

template <class S>
inline constexpr bool supported_scalar = std::is_same_v<S, bool> || std::is_same_v<S, float> ||
                                         std::is_same_v<S, double> ||
                                         (std::is_integral_v<S> && sizeof(S) <= 8 &&
                                          !std::is_same_v<S, char> && !std::is_same_v<S, wchar_t> &&
                                          !std::is_same_v<S, char8_t> &&
                                          !std::is_same_v<S, char16_t> &&
                                          !std::is_same_v<S, char32_t>);

template <class S>
constexpr dtype dtype_of() {
  static_assert(sizeof(bool) == 1 && sizeof(float) == 4 && sizeof(double) == 8,
                "grove::io: checkpoints need 1-byte bool, 4-byte float and 8-byte double");
  if constexpr (std::is_same_v<S, bool>)
    return dtype::BOOL;
  else if constexpr (std::is_same_v<S, float>)
    return dtype::F32;
  else if constexpr (std::is_same_v<S, double>)
    return dtype::F64;
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
concept scalar_leaf = std::is_arithmetic_v<L> && supported_scalar<L>;
template <class L>
concept eigen_leaf =
    std::is_base_of_v<Eigen::DenseBase<L>, L> && supported_scalar<typename L::Scalar>;
// Loading writes into the leaf, which must own its elements: an Eigen::Matrix or Eigen::Array.
template <class L>
concept eigen_plain_leaf = eigen_leaf<L> && std::is_base_of_v<Eigen::PlainObjectBase<L>, L>;

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

template <class L>
leaf_layout layout_of(const L& leaf) {
  static_assert(key_leaf<L> || scalar_leaf<L> || eigen_leaf<L>,
                "grove::io: a checkpoint leaf must be a bool, integer, float or double scalar, an "
                "Eigen::Matrix "
                "or Eigen::Array of such scalars, or a grove::random::Key");
  if constexpr (key_leaf<L>) {
    (void)leaf;
    return {dtype::U32, {2}, 8};
  } else if constexpr (scalar_leaf<L>) {
    (void)leaf;
    return {dtype_of<L>(), {}, sizeof(L)};
  } else {
    using S = typename L::Scalar;
    const auto bytes = static_cast<std::uint64_t>(leaf.size()) * sizeof(S);
    if constexpr (is_vector_leaf<L>())
      return {dtype_of<S>(), {static_cast<std::uint64_t>(leaf.size())}, bytes};
    else
      return {dtype_of<S>(),
              {static_cast<std::uint64_t>(leaf.rows()), static_cast<std::uint64_t>(leaf.cols())},
              bytes};
  }
}

template <class S>
using row_major_map = Eigen::Map<Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
template <class S>
using column_map = Eigen::Map<Eigen::Matrix<S, Eigen::Dynamic, 1>>;

// Whether decode must copy a tensor at `in` before Eigen reads it as S.
template <class S>
bool needs_scratch(const std::byte* in) noexcept {
  return std::endian::native != std::endian::little ||
         reinterpret_cast<std::uintptr_t>(in) % alignof(S) != 0;
}

template <class X>
decltype(auto) as_matrix(const X& x) {
  if constexpr (std::is_base_of_v<Eigen::ArrayBase<X>, X>)
    return x.matrix();
  else
    return (x);
}

// Writes the leaf's bytes (layout_of(leaf).nbytes of them) into `out`, which is aligned for any
// scalar: little-endian, row-major.
template <class L>
void encode(const L& leaf, std::byte* out) {
  if constexpr (key_leaf<L>) {
    std::memcpy(out, leaf.words.data(), 8);
    to_little_endian(out, 2, 4);
  } else if constexpr (scalar_leaf<L>) {
    std::memcpy(out, &leaf, sizeof(L));
    to_little_endian(out, 1, sizeof(L));
  } else {
    using S = typename L::Scalar;
    S* dst = reinterpret_cast<S*>(out);
    if constexpr (L::ColsAtCompileTime == 1)
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

// Reads the leaf's bytes back from `in`, which the caller has checked to have the leaf's dtype
// and shape. `in` may have any alignment; `scratch` (8-byte aligned, as large as the tensor) is
// used when it is not aligned for the scalar type, or to swap bytes on a big-endian machine.
// Allocates nothing and throws nothing.
template <class L>
void decode(const std::byte* in, std::byte* scratch, L& leaf) noexcept {
  if constexpr (key_leaf<L>) {
    std::byte words[8];
    std::memcpy(words, in, 8);
    from_little_endian(words, 2, 4);
    std::memcpy(leaf.words.data(), words, 8);
  } else if constexpr (scalar_leaf<L>) {
    std::byte value[sizeof(L)];
    std::memcpy(value, in, sizeof(L));
    from_little_endian(value, 1, sizeof(L));
    std::memcpy(&leaf, value, sizeof(L));
  } else {
    static_assert(eigen_plain_leaf<L>,
                  "grove::io: loading needs Eigen leaves that own their elements (Eigen::Matrix or "
                  "Eigen::Array), not maps, refs or expressions");
    using S = typename L::Scalar;
    const auto n = static_cast<std::size_t>(leaf.size());
    const S* src = reinterpret_cast<const S*>(in);
    if (needs_scratch<S>(in)) {
      std::memcpy(scratch, in, n * sizeof(S));
      from_little_endian(scratch, n, sizeof(S));
      src = reinterpret_cast<const S*>(scratch);
    }
    using map_c = Eigen::Map<const Eigen::Matrix<S, Eigen::Dynamic, 1>>;
    using map_rm =
        Eigen::Map<const Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
    if constexpr (L::ColsAtCompileTime == 1)
      assign(leaf, map_c(src, leaf.size()));
    else if constexpr (L::RowsAtCompileTime == 1)
      assign(leaf, map_c(src, leaf.size()).transpose());
    else
      assign(leaf, map_rm(src, leaf.rows(), leaf.cols()));
  }
}

template <class L>
std::string leaf_description(const L& leaf) {
  const auto l = layout_of(leaf);
  if constexpr (key_leaf<L>)
    return "a grove::random::Key, stored as U32 [2]";
  else
    return std::string(info(l.type).numpy) + shape_str(l.shape);
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

// Checks the file's header against the tree's leaves (names, dtypes, shapes) before any data is
// read, then reads the data (`get_data()`, called once, returns head.data_size bytes) and, only if
// everything matches, writes the values into the leaves. Returns the user's metadata.
template <class Tree, class GetData>
metadata fill_tree(const reading& ctx, const header& head, GetData&& get_data, Tree& tree) {
  const auto leaves = named_leaves(tree, ctx.function);
  const auto& by_name = head.index;

  std::vector<std::string> problems;
  std::vector<const tensor_entry*> match(leaves.size(), nullptr);
  std::vector<bool> used(head.tensors.size(), false);
  for (std::size_t k = 0; k < leaves.size(); ++k) {
    const auto& nl = leaves[k];
    visit_leaf(nl.leaf, [&](const auto& leaf) {
      const std::string who =
          "tensor " + json_quoted(nl.name) + " (key path " + keystr(nl.path) + ")";
      const auto it = by_name.find(nl.name);
      if (it == by_name.end()) {
        problems.push_back(who + " is missing from the file; the tree has " +
                           leaf_description(leaf) + " there");
        return;
      }
      used[it->second] = true;
      const auto& t = head.tensors[it->second];
      const auto want = layout_of(leaf);
      if (t.type != want.type)
        problems.push_back(who + ": dtype " + std::string(info(t.type).name) + " in the file, " +
                           std::string(info(want.type).name) + " (" +
                           std::string(info(want.type).numpy) +
                           ") in the tree; grove does not convert");
      else if (t.shape != want.shape)
        problems.push_back(who + ": shape " + shape_str(t.shape) + " in the file, " +
                           shape_str(want.shape) + " in the tree");
      else
        match[k] = &t;
    });
  }
  for (std::size_t i = 0; i < head.tensors.size(); ++i)
    if (!used[i])
      problems.push_back("the file has tensor " + json_quoted(head.tensors[i].name) + " (" +
                         std::string(info(head.tensors[i].type).name) + " " +
                         shape_str(head.tensors[i].shape) + "), which the tree does not have");
  if (!problems.empty()) {
    constexpr std::size_t shown = 20;
    if (problems.size() == 1) ctx.fail(problems.front());
    std::string msg =
        "the file does not match the tree (" + std::to_string(problems.size()) + " problems):";
    for (std::size_t i = 0; i < problems.size() && i < shown; ++i) msg += "\n  " + problems[i];
    if (problems.size() > shown)
      msg += "\n  ... and " + std::to_string(problems.size() - shown) + " more";
    ctx.fail(msg);
  }

  // The structure matches, so the data is exactly as large as the tree's leaves: only now is it
  // read (a file of a terabyte of data fails above, without being read).
  const std::byte* data = get_data();

  // A BOOL tensor may hold only 0 and 1: any other byte is not a bool.
  for (const auto* t : match) {
    if (t->type != dtype::BOOL) continue;
    for (std::uint64_t b = t->begin; b < t->end; ++b)
      if (data[b] != std::byte{0} && data[b] != std::byte{1})
        ctx.fail("tensor " + json_quoted(t->name) + " is BOOL, but its byte at file offset " +
                 std::to_string(head.data_start + b) + " is " +
                 std::to_string(static_cast<int>(data[b])) + ", neither 0 nor 1");
  }

  // Everything is checked. Prepare what the copy needs (the user's metadata, the keys' layouts,
  // scratch space for tensors that are not aligned in memory), so that the copy itself can
  // neither fail nor allocate: the tree changes completely or not at all.
  metadata user;
  for (const auto& [key, value] : head.metadata)
    if (!key.starts_with(reserved_prefix)) user.emplace(key, value);
  std::vector<std::uint8_t> layout(leaves.size(),
                                   0);  // 0: keep the tree's, 1: partitionable, 2: legacy
  std::uint64_t scratch_bytes = 0;
  for (std::size_t k = 0; k < leaves.size(); ++k) {
    visit_leaf(leaves[k].leaf, [&](const auto& leaf) {
      using L = std::remove_cvref_t<decltype(leaf)>;
      if constexpr (key_leaf<L>) {
        // The file's layout wins; a file that does not say (one written outside grove) keeps
        // the tree's.
        const auto it = head.metadata.find(std::string(key_layout_prefix) + leaves[k].name);
        if (it != head.metadata.end()) layout[k] = it->second == "legacy" ? 2 : 1;
      } else if constexpr (eigen_leaf<L>) {
        if (needs_scratch<typename L::Scalar>(data + match[k]->begin))
          scratch_bytes = std::max(scratch_bytes, match[k]->end - match[k]->begin);
      }
    });
  }
  std::unique_ptr<std::uint64_t[]> scratch(new std::uint64_t[(scratch_bytes + 7) / 8]);
  auto* scratch_ptr = reinterpret_cast<std::byte*>(scratch.get());
  for (std::size_t k = 0; k < leaves.size(); ++k) {
    visit_leaf(leaves[k].leaf, [&](auto& leaf) noexcept {
      decode(data + match[k]->begin, scratch_ptr, leaf);
      if constexpr (key_leaf<std::remove_cvref_t<decltype(leaf)>>) {
        if (layout[k] != 0)
          leaf.layout =
              layout[k] == 2 ? random::key_layout::legacy : random::key_layout::partitionable;
      }
    });
  }
  return user;
}

// Validates and loads a checkpoint held in memory (a whole file's bytes), as load_into does with
// a file. For the fuzzer and for tests.
template <class Tree>
metadata load_bytes_into(const std::byte* bytes, std::size_t size, Tree& tree, const reading& ctx) {
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
  return fill_tree(
      ctx, head, [&] { return bytes + 8 + n; }, tree);
}

template <class Tree>
metadata load_into(std::string_view function, const std::filesystem::path& path, Tree& tree) {
  const reading ctx{function, path};
  auto file = read_checkpoint(ctx);
  return fill_tree(
      ctx, file.head,
      [&] {
        read_checkpoint_data(ctx, file);
        return static_cast<const std::byte*>(file.data.get());
      },
      tree);
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
/// any storage order; also maps and other dense expressions) of those; grove::random::Key.
///
/// Throws std::invalid_argument for a tree or metadata that cannot be saved (two leaves with the
/// same simple key path, a user key starting with "grove.", a string that is not UTF-8), before
/// creating any file; std::system_error when the file cannot be written (its code() says why:
/// no such directory, permission denied, no space left...).
template <class Tree>
void save(const std::filesystem::path& path, const Tree& tree, const metadata& user_metadata = {}) {
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
    visit_leaf(nl.leaf, [&](const auto& leaf) { plan.push_back({layout_of(leaf)}); });
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
    visit_leaf(leaves[i].leaf, [&](const auto& leaf) { encode(leaf, bytes); });
    file.write(bytes, plan[i].layout.nbytes);
  }
  file.commit();
}

/// Reads the checkpoint at `path` into `tree`, whose structure, dtypes and shapes must match the
/// file's tensors exactly. The whole file is read and checked before `tree` is touched: on any
/// error `tree` keeps its values. A grove::random::Key leaf takes the layout the file records
/// (a file that records none, say one written by Python, leaves the tree's layout).
///
/// Returns the file's user metadata (without grove's own "grove." entries).
///
/// Throws grove::io::format_error for a malformed file or one that does not match `tree` (every
/// missing, extra or mismatched tensor is listed, with its key path and both dtypes or shapes);
/// std::system_error when the file cannot be opened or read; std::invalid_argument for a tree
/// whose leaves would share a tensor name.
template <class Tree>
metadata load_into(const std::filesystem::path& path, Tree& tree) {
  return detail::load_into("grove::io::load_into", path, tree);
}

/// A tree with `like`'s structure (C++ type, dtypes and shapes) and the file's values; see
/// load_into for what is checked and thrown.
template <class Tree>
Tree load(const std::filesystem::path& path, const Tree& like) {
  Tree out = like;
  detail::load_into("grove::io::load", path, out);
  return out;
}

/// Reads and validates a checkpoint's header (not its data): tensor names, dtypes, shapes,
/// metadata. Throws as load does.
inline checkpoint_info inspect(const std::filesystem::path& path) {
  const detail::reading ctx{"grove::io::inspect", path};
  auto file = detail::read_checkpoint(ctx);
  checkpoint_info out;
  out.tensors.reserve(file.head.tensors.size());
  for (auto& t : file.head.tensors)
    out.tensors.push_back({std::move(t.name), std::string(detail::info(t.type).name),
                           std::move(t.shape), t.begin, t.end});
  // Moved, not copied: a header of a million entries is held once.
  auto& entries = file.head.metadata;
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
