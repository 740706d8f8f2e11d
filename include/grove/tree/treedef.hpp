// grove/tree/treedef.hpp: TreeDef, the structure of a pytree without its leaves (JAX's
// PyTreeDef). TreeDef<> is the structure alone; TreeDef<T> also remembers the C++ type T it was
// taken from, so that unflatten gives back a T.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "grove/tree/detail/map.hpp"
#include "grove/tree/detail/node_data.hpp"
#include "grove/tree/error.hpp"
#include "grove/tree/key_path.hpp"
#include "grove/tree/node_traits.hpp"

namespace grove {

template <class T = void>
class TreeDef;

namespace detail {

struct treedef_builder;

// One node of a TreeDef. Nodes are stored in pre-order, so a node's children follow it and a
// subtree is the contiguous range [i, i + num_nodes).
struct node_record {
  node_kind kind = node_kind::leaf;
  std::uint32_t arity = 0;          // number of children
  std::uint32_t num_leaves = 0;     // leaves in this subtree
  std::uint32_t num_nodes = 0;      // nodes in this subtree, itself and None nodes included
  const node_info* info = nullptr;  // identity of custom nodes; nullptr for built-in kinds
  std::uint32_t key_offset = 0;     // dict: where its keys start in the key arena
  std::uint32_t data = 0;           // 1 + index of its node data (static fields); 0 for none
};

// Dict keys live in one byte arena per TreeDef: for each key a tag byte ('s' or 'i'), then for a
// string its 4-byte length and bytes, for an integer its 8 bytes.
inline void append_key(std::string& arena, const std::string& key) {
  const auto n = static_cast<std::uint32_t>(key.size());
  arena.push_back('s');
  arena.append(reinterpret_cast<const char*>(&n), sizeof n);
  arena.append(key);
}
template <class K>
requires std::is_integral_v<K>
void append_key(std::string& arena, K key) {
  const auto v = static_cast<std::int64_t>(key);
  arena.push_back('i');
  arena.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Reads one key at `pos` and advances it.
inline DictKey read_key(std::string_view arena, std::size_t& pos) {
  const char tag = arena[pos++];
  if (tag == 's') {
    std::uint32_t n = 0;
    std::memcpy(&n, arena.data() + pos, sizeof n);
    pos += sizeof n;
    DictKey key{std::string(arena.substr(pos, n))};
    pos += n;
    return key;
  }
  std::int64_t v = 0;
  std::memcpy(&v, arena.data() + pos, sizeof v);
  pos += sizeof v;
  return DictKey{v};
}

// The hashed form of one node record and of one dict key: TreeDef::hash and the allocation-free
// structure hash of a tree (flatten.hpp) mix the same words in the same order.
inline void hash_node(structure_hasher& h, node_kind kind, std::size_t arity,
                      const node_info* info) {
  h.mix(hash_mark_node | static_cast<std::uint64_t>(kind));
  h.mix(static_cast<std::uint64_t>(arity));
  if (info != nullptr) h.mix(info->name);
}
inline void hash_dict_key(structure_hasher& h, const DictKey& key) {
  if (const auto* s = std::get_if<std::string>(&key.key)) {
    h.mix(hash_mark_key | 's');
    h.mix(std::string_view(*s));
  } else {
    h.mix(hash_mark_key | 'i');
    h.mix(static_cast<std::uint64_t>(std::get<std::int64_t>(key.key)));
  }
}
template <class K>
void hash_dict_key(structure_hasher& h, const K& key) {
  if constexpr (std::is_same_v<K, std::string>) {
    h.mix(hash_mark_key | 's');
    h.mix(std::string_view(key));
  } else {
    h.mix(hash_mark_key | 'i');
    h.mix(static_cast<std::uint64_t>(static_cast<std::int64_t>(key)));
  }
}

inline std::size_t skip_keys(std::string_view arena, std::size_t pos, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    if (arena[pos++] == 's') {
      std::uint32_t n = 0;
      std::memcpy(&n, arena.data() + pos, sizeof n);
      pos += sizeof n + n;
    } else {
      pos += sizeof(std::int64_t);
    }
  }
  return pos;
}

}  // namespace detail

/// The structure of a pytree: node kinds, arities, dict keys, custom node types and the static
/// fields of registered structs (JAX's node data), in JAX's leaf order. Cheap to compare and hash;
/// prints exactly as JAX prints a PyTreeDef. Built only by tree_structure and tree_flatten (and
/// children, subtree, compose from another TreeDef): its counts come from the walk that built it.
template <>
class TreeDef<void> {
 public:
  /// The structure of a single leaf, `PyTreeDef(*)`.
  TreeDef() { nodes_.push_back(detail::node_record{node_kind::leaf, 0, 1, 1, nullptr, 0, 0}); }

  std::size_t num_leaves() const { return nodes_.front().num_leaves; }
  /// Nodes and leaves, None included, as JAX counts them.
  std::size_t num_nodes() const { return nodes_.size(); }
  /// JAX's treedef_is_leaf: true when the structure is one node, a leaf or a node without
  /// children (None, `()`, `[]`, `{}`), since `treedef_is_leaf(t)` is `t.num_nodes == 1`.
  bool is_leaf() const { return nodes_.size() == 1; }
  node_kind kind() const { return nodes_.front().kind; }

  /// The structures of the root's children, in order.
  std::vector<TreeDef<>> children() const {
    std::vector<TreeDef<>> out;
    std::size_t i = 1;
    for (std::uint32_t c = 0; c < nodes_.front().arity; ++c) {
      out.push_back(subtree(i));
      i += nodes_[i].num_nodes;
    }
    return out;
  }

  /// The structure obtained by putting `inner` at every leaf of this one (JAX's compose).
  TreeDef<> compose(const TreeDef<>& inner) const;

  /// Whether two structures are the same: the same node kinds, arities and custom node types in
  /// the same places, the same dict keys and equal static fields. std::pair and std::tuple are
  /// both tuples, and every instance of a registered class template is the same node type, as in
  /// JAX.
  friend bool operator==(const TreeDef<>& a, const TreeDef<>& b) {
    if (a.nodes_.size() != b.nodes_.size()) return false;
    for (std::size_t i = 0; i < a.nodes_.size(); ++i) {
      const auto& x = a.nodes_[i];
      const auto& y = b.nodes_[i];
      if (x.kind != y.kind || x.arity != y.arity || x.info != y.info) return false;
      if (x.kind == node_kind::dict && a.keys_of(x) != b.keys_of(y)) return false;
      const detail::node_data* dx = a.node_data_at(i);
      const detail::node_data* dy = b.node_data_at(i);
      if ((dx == nullptr) != (dy == nullptr) || (dx && !dx->equals(*dy))) return false;
    }
    return true;
  }

  /// A hash of everything operator== compares. It mixes the registered names of custom nodes
  /// (never addresses), dict keys and static values, so it is the same in every process and on
  /// every machine for arithmetic and string static fields; other static types that have a
  /// std::hash contribute it, the rest only their presence.
  std::size_t hash() const {
    detail::structure_hasher h;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      const auto& rec = nodes_[i];
      detail::hash_node(h, rec.kind, rec.arity, rec.info);
      if (rec.kind == node_kind::dict) {
        std::size_t pos = rec.key_offset;
        for (std::uint32_t k = 0; k < rec.arity; ++k)
          detail::hash_dict_key(h, detail::read_key(keys_, pos));
      }
      if (const auto* data = node_data_at(i)) data->hash(h);
    }
    return static_cast<std::size_t>(h.value());
  }

  /// What JAX prints: `PyTreeDef([*, (*, None)])`.
  std::string str() const {
    std::ostringstream os;
    os << *this;
    return os.str();
  }

  friend std::ostream& operator<<(std::ostream& os, const TreeDef<>& def) {
    os << "PyTreeDef(";
    def.print(os, 0);
    return os << ')';
  }

  /// The dict keys of the root (empty unless the root is a dict).
  std::vector<DictKey> dict_keys() const { return dict_keys_at(0); }

  // --- read by grove's algorithms ---------------------------------------------------------------
  const std::vector<detail::node_record>& nodes() const { return nodes_; }
  const std::string& key_arena() const { return keys_; }
  std::vector<DictKey> dict_keys_at(std::size_t i) const {
    std::vector<DictKey> out;
    if (nodes_[i].kind != node_kind::dict) return out;
    std::size_t pos = nodes_[i].key_offset;
    for (std::uint32_t k = 0; k < nodes_[i].arity; ++k) out.push_back(detail::read_key(keys_, pos));
    return out;
  }
  /// The static fields of node i (a registered struct with static fields), else nullptr.
  const detail::node_data* node_data_at(std::size_t i) const {
    const auto d = nodes_[i].data;
    return d == 0 ? nullptr : data_[d - 1].get();
  }
  /// The structure of the subtree whose root is node i.
  TreeDef<> subtree(std::size_t i) const;

 private:
  friend struct detail::treedef_builder;
  using builder = detail::treedef_builder;

  std::string_view keys_of(const detail::node_record& rec) const {
    const std::size_t end = detail::skip_keys(keys_, rec.key_offset, rec.arity);
    return std::string_view(keys_).substr(rec.key_offset, end - rec.key_offset);
  }

  void compose_into(builder& b, const TreeDef<>& inner, std::size_t& i) const;

  void print(std::ostream& os, std::size_t i) const {
    const auto& rec = nodes_[i];
    auto print_children = [&](const char* open, const char* close, bool one_tuple) {
      os << open;
      std::size_t c = i + 1;
      for (std::uint32_t k = 0; k < rec.arity; ++k) {
        if (k) os << ", ";
        print(os, c);
        c += nodes_[c].num_nodes;
      }
      if (one_tuple && rec.arity == 1) os << ',';
      os << close;
    };
    switch (rec.kind) {
      case node_kind::leaf:
        os << '*';
        break;
      case node_kind::none:
        os << "None";
        break;
      case node_kind::tuple:
        print_children("(", ")", true);
        break;
      case node_kind::list:
        print_children("[", "]", false);
        break;
      case node_kind::dict: {
        os << '{';
        std::size_t pos = rec.key_offset;
        std::size_t c = i + 1;
        for (std::uint32_t k = 0; k < rec.arity; ++k) {
          if (k) os << ", ";
          detail::write_dict_key(os, detail::read_key(keys_, pos));
          os << ": ";
          print(os, c);
          c += nodes_[c].num_nodes;
        }
        os << '}';
        break;
      }
      case node_kind::custom:
        // A registered struct prints like a JAX dataclass, its node data the tuple of its static
        // fields' values (`()` without any); a custom container like a node whose aux data is None.
        os << "CustomNode(" << rec.info->name << '[';
        if (const auto* data = node_data_at(i))
          data->print(os);
        else
          os << (rec.info->is_struct ? "()" : "None");
        os << "], ";
        print_children("[", "]", false);
        os << ')';
        break;
    }
  }

  std::vector<detail::node_record> nodes_;
  std::string keys_;
  std::vector<std::shared_ptr<const detail::node_data>> data_;
};

namespace detail {

// Builds a TreeDef in pre-order, the one way a TreeDef's records are written (flatten.hpp walks a
// tree with it; compose and subtree copy TreeDefs with it). A node's leaf and node counts come
// from what was appended between its open() and its close(): never computed by hand.
struct treedef_builder {
  TreeDef<>& def;
  std::uint32_t leaves = 0;  // leaves appended so far

  explicit treedef_builder(TreeDef<>& d) : def(d) {
    def.nodes_.clear();
    def.keys_.clear();
    def.data_.clear();
  }
  void reserve(std::size_t nodes) { def.nodes_.reserve(nodes); }
  void add_leaf() {
    def.nodes_.push_back(node_record{node_kind::leaf, 0, 1, 1, nullptr, 0, 0});
    ++leaves;
  }
  // Opens a node with `arity` children; its dict keys and node data follow, then its children.
  std::size_t open(node_kind kind, const node_info* info, std::size_t arity) {
    // num_leaves holds the leaves before the node until close() turns it into a difference.
    def.nodes_.push_back(node_record{kind, static_cast<std::uint32_t>(arity), leaves, 0, info,
                                     static_cast<std::uint32_t>(def.keys_.size()), 0});
    return def.nodes_.size() - 1;
  }
  template <class K>
  void add_key(const K& key) {
    append_key(def.keys_, key);
  }
  void set_data(std::size_t index, std::shared_ptr<const node_data> data) {
    if (!data) return;
    def.data_.push_back(std::move(data));
    def.nodes_[index].data = static_cast<std::uint32_t>(def.data_.size());
  }
  void close(std::size_t index) {
    auto& rec = def.nodes_[index];
    rec.num_nodes = static_cast<std::uint32_t>(def.nodes_.size() - index);
    rec.num_leaves = leaves - rec.num_leaves;
  }
  // Copies the subtree rooted at node i of src, its keys and node data re-based.
  void append_subtree(const TreeDef<>& src, std::size_t i) {
    const std::size_t end = i + src.nodes_[i].num_nodes;
    for (std::size_t k = i; k < end; ++k) {
      node_record rec = src.nodes_[k];
      if (rec.kind == node_kind::dict) {
        const std::string_view keys = src.keys_of(rec);
        rec.key_offset = static_cast<std::uint32_t>(def.keys_.size());
        def.keys_.append(keys);
      }
      if (rec.data != 0) {
        def.data_.push_back(src.data_[rec.data - 1]);
        rec.data = static_cast<std::uint32_t>(def.data_.size());
      }
      def.nodes_.push_back(rec);
    }
    leaves += src.nodes_[i].num_leaves;
  }
};

}  // namespace detail

inline TreeDef<> TreeDef<void>::compose(const TreeDef<>& inner) const {
  TreeDef<> out;
  out.nodes_.clear();
  out.nodes_.reserve(nodes_.size() + num_leaves() * inner.nodes_.size());
  builder b(out);
  std::size_t i = 0;
  compose_into(b, inner, i);
  return out;
}

inline TreeDef<> TreeDef<void>::subtree(std::size_t i) const {
  TreeDef<> out;
  builder b(out);
  b.append_subtree(*this, i);
  return out;
}

inline void TreeDef<void>::compose_into(builder& b, const TreeDef<>& inner, std::size_t& i) const {
  const auto& rec = nodes_[i];
  if (rec.kind == node_kind::leaf) {
    b.append_subtree(inner, 0);
    ++i;
    return;
  }
  const std::size_t index = b.open(rec.kind, rec.info, rec.arity);
  if (rec.kind == node_kind::dict) {
    b.def.keys_.append(keys_of(rec));
  }
  if (rec.data != 0) b.set_data(index, data_[rec.data - 1]);
  ++i;
  for (std::uint32_t c = 0; c < rec.arity; ++c) compose_into(b, inner, i);
  b.close(index);
}

template <class T, class Leaves>
auto tree_unflatten(const TreeDef<T>& def, const Leaves& leaves);
template <class T, class Tree>
auto tree_flatten_up_to(const TreeDef<T>& def, Tree& tree);

/// A TreeDef that remembers the C++ type T it describes, so that unflatten gives back a T.
template <class T>
class TreeDef : public TreeDef<> {
 public:
  TreeDef() = default;
  explicit TreeDef(TreeDef<> structure) : TreeDef<>(std::move(structure)) {}

  /// tree_unflatten(*this, leaves).
  template <class Leaves>
  auto unflatten(const Leaves& leaves) const {
    return tree_unflatten(*this, leaves);
  }
  /// tree_flatten_up_to(*this, tree).
  template <class Tree>
  auto flatten_up_to(Tree& tree) const {
    return tree_flatten_up_to(*this, tree);
  }
  /// inner put at every leaf of this structure, typed: rebind_leaves_t<T, U>.
  template <class U>
  auto compose(const TreeDef<U>& inner) const {
    return TreeDef<detail::rebind_leaves_t<T, U>>(TreeDef<>::compose(inner));
  }
  using TreeDef<>::compose;
};

}  // namespace grove

template <class T>
struct std::hash<grove::TreeDef<T>> {
  std::size_t operator()(const grove::TreeDef<T>& def) const { return def.hash(); }
};
