// grove/parallel/detail/agree.hpp: before any collective moves a tree, the devices agree that
// they hold the same thing. Each hashes what it is about to do (the operation, its root, the
// tree's structure, every leaf's element type, shape and memory layout, the staging settings)
// without allocating, and one small allreduce_max of (hash, ~hash, bytes, ~bytes) tells every
// device at once whether all the hashes are equal (max(x) == ~max(~x) == min(x)). Every device
// reaches the same verdict, so either all go on, or all take the error path: there they exchange
// descriptions of their trees (only then, allocating) and raise the same tree_error naming the
// first difference.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <complex>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "grove/parallel/communicator.hpp"
#include "grove/tree.hpp"
#include "grove/tree/eigen.hpp"

namespace grove::parallel::detail {

// --- leaves ------------------------------------------------------------------------------------

// The element type of a leaf the collectives accept (grove::scalar_t, cv and references removed).
template <class L>
using leaf_scalar_t = ::grove::scalar_t<std::remove_cvref_t<L>>;

// An Eigen tensor with its own contiguous memory (Tensor, TensorFixedSize, TensorMap): the tree
// core's recognition of one, which needs no tensor module.
template <class T>
concept tensor_leaf = ::grove::detail::eigen_tensor<T>;

// A number, an Eigen dense object with direct access to its memory (Matrix, Array, Map, Ref) or
// an Eigen tensor: a leaf whose elements leaf_runs walks.
template <class T>
constexpr bool memory_leaf() {
  if constexpr (std::is_arithmetic_v<T>)
    return true;
  else if constexpr (::grove::detail::eigen_dense<T>)
    return (T::Flags & Eigen::DirectAccessBit) != 0;
  else
    return tensor_leaf<T>;
}

// The 16-bit floating-point element types, which the sums and extrema take in float.
template <class S>
inline constexpr bool half_element =
    std::is_same_v<S, Eigen::half> || std::is_same_v<S, Eigen::bfloat16>;

// A leaf the reductions (psum, pmean, psum_scatter) take: a memory leaf of `reducible` elements,
// or of 16-bit floats (Eigen dense objects and tensors), which are summed in float.
template <class L>
constexpr bool collective_leaf() {
  using T = std::remove_cvref_t<L>;
  if constexpr (!memory_leaf<T>())
    return false;
  else if constexpr (std::is_arithmetic_v<T>)
    return reducible<T>;
  else
    return reducible<typename T::Scalar> || half_element<typename T::Scalar>;
}

// Calls fn(ptr, n) for each contiguous run of the leaf's elements, in storage order (column-major
// unless the leaf says otherwise); a plain object is one run. The reductions walk their leaves
// with it, and broadcast its numbers and Eigen objects (bool and 16-bit float elements too).
template <class Leaf, class Fn>
void leaf_runs(Leaf& leaf, Fn&& fn) {
  using T = std::remove_const_t<Leaf>;
  static_assert(memory_leaf<T>(),
                "grove::parallel: leaf_runs takes numbers, Eigen dense objects with memory and "
                "Eigen tensors");
  if constexpr (std::is_arithmetic_v<T>) {
    fn(&leaf, Eigen::Index{1});
  } else if constexpr (tensor_leaf<T>) {
    if (leaf.size() > 0) fn(leaf.data(), static_cast<Eigen::Index>(leaf.size()));
  } else {
    const Eigen::Index inner = leaf.innerSize(), outer = leaf.outerSize();
    if (leaf.size() == 0) return;
    if (leaf.innerStride() == 1 && (outer == 1 || leaf.outerStride() == inner)) {
      fn(leaf.data(), leaf.size());
    } else if (leaf.innerStride() == 1) {
      for (Eigen::Index o = 0; o < outer; ++o) fn(leaf.data() + o * leaf.outerStride(), inner);
    } else {
      for (Eigen::Index o = 0; o < outer; ++o)
        for (Eigen::Index i = 0; i < inner; ++i)
          fn(leaf.data() + o * leaf.outerStride() + i * leaf.innerStride(), Eigen::Index{1});
    }
  }
}

// --- leaves that broadcast moves as bytes --------------------------------------------------------
//
// broadcast copies bits, so it takes more than the reductions: bool and 16-bit float elements,
// Eigen tensors, and any trivially copyable value the tree core keeps as a leaf (a
// random::Key is its two words and its layout).

// An element type broadcast copies: arithmetic (bool too), Eigen::half, Eigen::bfloat16,
// std::complex.
template <class S>
inline constexpr bool byte_element =
    std::is_arithmetic_v<S> || std::is_same_v<S, Eigen::half> ||
    std::is_same_v<S, Eigen::bfloat16> || std::is_same_v<S, std::complex<float>> ||
    std::is_same_v<S, std::complex<double>>;

// A leaf that is neither a number nor an Eigen object: copied as the bytes of its object.
template <class T>
concept value_leaf = std::is_trivially_copyable_v<T> && !std::is_arithmetic_v<T> &&
                     !::grove::detail::eigen_dense<T> && !tensor_leaf<T>;

template <class L>
constexpr bool broadcast_leaf() {
  using T = std::remove_cvref_t<L>;
  if constexpr (collective_leaf<T>() || std::is_same_v<T, bool>)
    return true;
  else if constexpr (::grove::detail::eigen_dense<T>)
    return byte_element<typename T::Scalar> && (T::Flags & Eigen::DirectAccessBit) != 0;
  else if constexpr (tensor_leaf<T>)
    return byte_element<typename T::Scalar>;
  else
    return value_leaf<T>;
}

template <class L>
constexpr void require_broadcast_leaf() {
  static_assert(broadcast_leaf<L>(),
                "grove::parallel::broadcast: every leaf must be a number (bool too), an Eigen "
                "dense object with its own memory or an Eigen tensor, of numbers, Eigen::half, "
                "Eigen::bfloat16 or std::complex elements, or a trivially copyable value");
}

// Calls fn(bytes, n) for each contiguous run of the leaf's memory, in storage order.
template <class Leaf, class Fn>
void byte_runs(Leaf& leaf, Fn&& fn) {
  using T = std::remove_const_t<Leaf>;
  using Byte = std::conditional_t<std::is_const_v<Leaf>, const std::byte, std::byte>;
  require_broadcast_leaf<T>();
  if constexpr (!broadcast_leaf<T>()) {
    (void)leaf;  // refused above; nothing more to report
    (void)fn;
  } else if constexpr (value_leaf<T>) {
    fn(reinterpret_cast<Byte*>(&leaf), sizeof(T));
  } else if constexpr (tensor_leaf<T>) {
    if (leaf.size() > 0)
      fn(reinterpret_cast<Byte*>(leaf.data()),
         static_cast<std::size_t>(leaf.size()) * sizeof(typename T::Scalar));
  } else {
    leaf_runs(leaf, [&](auto* p, Eigen::Index n) {
      fn(reinterpret_cast<Byte*>(p), static_cast<std::size_t>(n) * sizeof(*p));
    });
  }
}

// A code for a type that is the same in every process of one program: a hash of the compiler's
// name for it (the agreement check compares leaves that are neither numbers nor Eigen objects by
// it, and by their size).
template <class T>
constexpr std::uint64_t type_code() {
  const std::string_view name = __PRETTY_FUNCTION__;
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// The element type's code and name for a broadcast leaf's element.
template <class S>
constexpr std::uint64_t element_code() {
  if constexpr (std::is_same_v<S, bool>)
    return ('b' << 8) | 1;
  else if constexpr (std::is_arithmetic_v<S>)
    return scalar_code<S>();
  else
    return type_code<S>();
}
template <class S>
std::string element_name() {
  if constexpr (std::is_same_v<S, bool>)
    return "bool";
  else if constexpr (std::is_same_v<S, Eigen::half>)
    return "float16";
  else if constexpr (std::is_same_v<S, Eigen::bfloat16>)
    return "bfloat16";
  else if constexpr (std::is_same_v<S, std::complex<float>>)
    return "complex64";
  else if constexpr (std::is_same_v<S, std::complex<double>>)
    return "complex128";
  else
    return ::grove::dtype_name<S>();
}

template <class Leaf>
Eigen::Index leaf_size(const Leaf& leaf) {
  if constexpr (std::is_arithmetic_v<Leaf>)
    return 1;
  else
    return leaf.size();
}

// --- hashing -------------------------------------------------------------------------------------

// The tree core's structure hasher (FNV-1a over words with a murmur3 finish): cheap, no
// allocation, the same on every machine (it hashes names and numbers, never addresses).
using Hasher = grove::detail::structure_hasher;

enum : std::uint64_t {
  mark_leaf = 0x4c45'4146'0000'0000ull,
};

// The length of the leaf's contiguous runs when they are not the whole leaf (a Map or Ref with
// strides), 0 when the leaf is one run: the collectives' messages depend on it.
template <class L>
std::uint64_t run_length(const L& leaf) {
  if constexpr (std::is_arithmetic_v<L>) {
    (void)leaf;
    return 0;
  } else {
    const Eigen::Index inner = leaf.innerSize(), outer = leaf.outerSize();
    if (leaf.size() == 0 ||
        (leaf.innerStride() == 1 && (outer == 1 || leaf.outerStride() == inner)))
      return 0;
    return leaf.innerStride() == 1 ? static_cast<std::uint64_t>(inner) : 1;
  }
}

template <class L>
void hash_leaf(Hasher& h, const L& leaf) {
  require_broadcast_leaf<L>();
  if constexpr (!broadcast_leaf<L>()) {
    (void)h;  // refused above
    (void)leaf;
  } else if constexpr (value_leaf<L>) {
    h.mix(mark_leaf | type_code<L>());
    h.mix(sizeof(L));
  } else if constexpr (tensor_leaf<L>) {
    h.mix(mark_leaf | element_code<typename L::Scalar>());
    h.mix(static_cast<std::uint64_t>(L::NumDimensions));
    for (std::size_t d = 0; d < static_cast<std::size_t>(L::NumDimensions); ++d)
      h.mix(static_cast<std::uint64_t>(leaf.dimensions()[d]));  // Eigen::Sizes has no begin()
    h.mix(static_cast<int>(L::Layout) == static_cast<int>(Eigen::RowMajor) ? 1 : 0);
  } else if constexpr (std::is_arithmetic_v<L>) {
    h.mix(mark_leaf | element_code<L>());
    h.mix(0);
  } else {
    h.mix(mark_leaf | element_code<typename L::Scalar>());
    const auto s = grove::shape(leaf);
    h.mix(s.size());
    for (auto d : s) h.mix(static_cast<std::uint64_t>(d));
    if (s.size() == 2) h.mix(L::IsRowMajor ? 1 : 0);
    h.mix(run_length(leaf));
  }
}

// The structure (TreeDef::hash of the tree's structure: kinds, arities, registered names, dict
// keys, None, static fields), then every leaf's type and shape in leaf order.
template <class T>
void hash_tree(Hasher& h, const T& t) {
  h.mix(grove::detail::structure_hash(t));
  grove::tree_for_each([&](const auto& leaf) { hash_leaf(h, leaf); }, t);
}

// --- what the devices agree on -------------------------------------------------------------------

enum class op : std::uint64_t {
  psum = 1,
  pmean,
  broadcast,
  train_step,
  in_sync,
  all_gather,
  psum_scatter,
  pmax,
  pmin,
  ppermute
};

inline std::string op_text(op o, int root) {
  switch (o) {
    case op::psum:
      return "psum";
    case op::pmean:
      return "pmean";
    case op::broadcast:
      return "broadcast from rank " + std::to_string(root);
    case op::train_step:
      return "train_step";
    case op::in_sync:
      return "in_sync";
    case op::all_gather:
      return "all_gather";
    case op::psum_scatter:
      return "psum_scatter";
    case op::pmax:
      return "pmax";
    case op::pmin:
      return "pmin";
    case op::ppermute:
      return "ppermute";
  }
  return "?";
}

// How a device moves trees (Staging's settings): part of what the devices agree on.
struct Moves {
  std::size_t bucket;
  std::size_t inplace;
};

// A description of one device's call, line by line: the operation (`call` when the operation
// has options to show), the staging settings, the tree's structure, then one line per leaf
// ("[1].w: float32 (512, 784)").
template <class Tree>
std::string describe(op o, int root, Moves moves, const Tree& tree, std::string_view call = {}) {
  std::string out = (call.empty() ? op_text(o, root) : std::string(call)) + "\n";
  out += "buckets of " + std::to_string(moves.bucket) + " bytes, runs of " +
         std::to_string(moves.inplace) + " bytes or more in place\n";
  out += grove::tree_structure(tree).str() + "\n";
  const auto paths = grove::tree_leaves_with_path(tree);
  std::size_t i = 0;
  grove::tree_for_each(
      [&](const auto& leaf) {
        using L = std::remove_cvref_t<decltype(leaf)>;
        out += i < paths.size() ? grove::keystr(paths[i].first) : std::string("?");
        if constexpr (!broadcast_leaf<L>()) {
          (void)leaf;  // refused when the tree was hashed
        } else if constexpr (value_leaf<L>) {
          out += ": a value of " + std::to_string(sizeof(L)) + " bytes (type code " +
                 std::to_string(type_code<L>());
        } else if constexpr (tensor_leaf<L>) {
          out += ": " + element_name<typename L::Scalar>() + " tensor (";
          for (std::size_t d = 0; d < static_cast<std::size_t>(L::NumDimensions); ++d)
            out += (d ? ", " : "") + std::to_string(leaf.dimensions()[d]);
          if (L::NumDimensions == 1) out += ',';
          if (static_cast<int>(L::Layout) == static_cast<int>(Eigen::RowMajor))
            out += ", row-major";
        } else if constexpr (std::is_arithmetic_v<L>) {
          out += ": " + element_name<L>() + " (";
        } else {
          out += ": " + element_name<typename L::Scalar>() + " (";
          const auto s = grove::shape(leaf);
          for (std::size_t d = 0; d < s.size(); ++d) {
            if (d) out += ", ";
            out += std::to_string(s[d]);
          }
          if (s.size() == 1) out += ',';
          if (s.size() == 2 && L::IsRowMajor) out += ", row-major";
          if (const auto run = run_length(leaf)) out += ", strided: runs of " + std::to_string(run);
        }
        out += ")\n";
        ++i;
      },
      tree);
  return out;
}

inline std::vector<std::string_view> split_lines(std::string_view s) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    const std::size_t nl = s.find('\n');
    out.push_back(s.substr(0, nl));
    if (nl == std::string_view::npos) break;
    s.remove_prefix(nl + 1);
  }
  return out;
}

inline std::string clip(std::string_view s, std::size_t n = 400) {
  if (s.size() <= n) return std::string(s);
  return std::string(s.substr(0, n)) + "...";
}

// The first difference between rank a's description and rank b's.
inline std::string first_difference(std::string_view da, int a, std::string_view db, int b) {
  const auto la = split_lines(da), lb = split_lines(db);
  const std::string ra = "rank " + std::to_string(a), rb = "rank " + std::to_string(b);
  auto line = [](const std::vector<std::string_view>& l, std::size_t i) {
    return i < l.size() ? l[i] : std::string_view{};
  };
  if (line(la, 0) != line(lb, 0))
    return ra + " called " + std::string(line(la, 0)) + " but " + rb + " called " +
           std::string(line(lb, 0));
  if (line(la, 1) != line(lb, 1))
    return ra + " moves trees in " + std::string(line(la, 1)) + " but " + rb + " in " +
           std::string(line(lb, 1)) + " (see Staging::set_bucket_bytes, set_inplace_bytes)";
  if (line(la, 2) != line(lb, 2))
    return "the structures differ: " + ra + " has " + clip(line(la, 2)) + " but " + rb + " has " +
           clip(line(lb, 2));
  for (std::size_t i = 3; i < std::max(la.size(), lb.size()); ++i) {
    if (line(la, i) == line(lb, i)) continue;
    const auto x = line(la, i), y = line(lb, i);
    const auto cx = x.find(": "), cy = y.find(": ");
    if (cx != std::string_view::npos && cx == cy && x.substr(0, cx) == y.substr(0, cy))
      return "at " + std::string(x.substr(0, cx)) + " " + ra + " has " +
             std::string(x.substr(cx + 2)) + " but " + rb + " has " + std::string(y.substr(cy + 2));
    return ra + " has leaf " + std::string(x) + " where " + rb + " has " + std::string(y);
  }
  return "their hashes differ, though their descriptions agree";
}

template <device_group C>
std::string broadcast_string(C& comm, const std::string& mine, std::size_t length, int root) {
  std::string s = comm.rank() == root ? mine : std::string(length, '\0');
  comm.broadcast(std::span<std::byte>(reinterpret_cast<std::byte*>(s.data()), s.size()), root);
  return s;
}

// The error path: every device is here (all saw that the hashes differ). They gather every rank's
// hash, pick rank 0 and the first rank that differs from it, exchange those two descriptions and
// throw the same tree_error.
template <device_group C, class Tree>
[[noreturn]] void disagree(C& comm, const char* function, op o, int root, Moves moves,
                           const Tree& tree, std::uint64_t hash, std::uint64_t bytes,
                           std::string_view call = {}) {
  const int n = comm.size(), me = comm.rank();
  const std::string mine = describe(o, root, moves, tree, call);
  // An allgather through allreduce_max: each rank fills its own row, the others are zeros.
  std::vector<std::uint64_t> rows(static_cast<std::size_t>(n) * 3, 0);
  rows[static_cast<std::size_t>(me) * 3 + 0] = hash;
  rows[static_cast<std::size_t>(me) * 3 + 1] = bytes;
  rows[static_cast<std::size_t>(me) * 3 + 2] = mine.size();
  comm.allreduce_max(std::span<std::uint64_t>(rows));
  auto row = [&](int r, int k) { return rows[static_cast<std::size_t>(r) * 3 + k]; };
  int other = -1;
  std::string differing;
  for (int r = 1; r < n; ++r) {
    if (row(r, 0) == row(0, 0) && row(r, 1) == row(0, 1)) continue;
    if (other < 0) other = r;
    if (!differing.empty()) differing += ", ";
    differing += std::to_string(r);
  }
  if (other < 0) other = 1;  // cannot happen: some rank differs from rank 0
  const std::string d0 = broadcast_string(comm, mine, row(0, 2), 0);
  const std::string dk = broadcast_string(comm, mine, row(other, 2), other);
  std::string msg = std::string("grove::parallel::") + function +
                    ": the devices disagree on the tree, so nothing was moved (" +
                    (differing.find(',') == std::string::npos ? "rank " : "ranks ") + differing +
                    " of " + std::to_string(n) + " differ" +
                    (differing.find(',') == std::string::npos ? "s" : "") +
                    " from rank 0): " + first_difference(d0, 0, dk, other);
  if (row(0, 1) != row(other, 1))
    msg += " (" + std::to_string(row(0, 1)) + " bytes on rank 0, " + std::to_string(row(other, 1)) +
           " on rank " + std::to_string(other) + ")";
  throw grove::tree_error(msg);
}

// Every device calls this with its tree before moving it; returns when all agree, throws the same
// tree_error on every device when they do not. No allocation unless they disagree. `call`, when
// given, is the operation with its options ("all_gather(axis=1, tiled=true)"): the devices agree
// on it too.
template <device_group C, class Tree>
void agree(C& comm, const char* function, op o, int root, Moves moves, const Tree& tree,
           std::uint64_t bytes, std::string_view call = {}) {
  Hasher h;
  h.mix(static_cast<std::uint64_t>(o));
  h.mix(static_cast<std::uint64_t>(root));
  h.mix(call);
  h.mix(static_cast<std::uint64_t>(moves.bucket));
  h.mix(static_cast<std::uint64_t>(moves.inplace));
  hash_tree(h, tree);
  const std::uint64_t hash = h.value();
  std::array<std::uint64_t, 4> v{hash, ~hash, bytes, ~bytes};
  comm.allreduce_max(std::span<std::uint64_t>(v));
  if (v[0] == hash && ~v[1] == hash && v[2] == bytes && ~v[3] == bytes) return;
  disagree(comm, function, o, root, moves, tree, hash, bytes, call);
}

}  // namespace grove::parallel::detail
