// grove/tree/treedef.hpp: TreeDef, the structure of a pytree without its leaves (JAX's
// PyTreeDef). TreeDef<> is the structure alone; TreeDef<T> also remembers the C++ type T it was
// taken from, so that unflatten gives back a T.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "grove/tree/error.hpp"
#include "grove/tree/key_path.hpp"
#include "grove/tree/node_traits.hpp"

namespace grove {

template <class T = void>
class TreeDef;

namespace detail {

// One node of a TreeDef. Nodes are stored in pre-order, so a node's children follow it and a
// subtree is the contiguous range [i, i + num_nodes).
struct node_record {
  node_kind kind = node_kind::leaf;
  std::uint32_t arity = 0;          // number of children
  std::uint32_t num_leaves = 0;     // leaves in this subtree
  std::uint32_t num_nodes = 0;      // nodes in this subtree, itself and None nodes included
  const node_info* info = nullptr;  // identity of custom nodes; nullptr for built-in kinds
  std::uint32_t key_offset = 0;     // dict: where its keys start in the key arena

  friend bool operator==(const node_record& a, const node_record& b) {
    return a.kind == b.kind && a.arity == b.arity && a.num_leaves == b.num_leaves &&
           a.info == b.info;
  }
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

/// The structure of a pytree: node kinds, arities, dict keys and custom node types, in JAX's
/// leaf order. Cheap to compare and hash; prints exactly as JAX prints a PyTreeDef.
template <>
class TreeDef<void> {
 public:
  TreeDef() { nodes_.push_back(detail::node_record{node_kind::leaf, 0, 1, 1, nullptr, 0}); }

  std::size_t num_leaves() const { return nodes_.front().num_leaves; }
  /// Nodes and leaves, None included, as JAX counts them.
  std::size_t num_nodes() const { return nodes_.size(); }
  bool is_leaf() const { return nodes_.front().kind == node_kind::leaf; }
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
  TreeDef<> compose(const TreeDef<>& inner) const {
    TreeDef<> out;
    out.nodes_.clear();
    out.nodes_.reserve(nodes_.size() + num_leaves() * inner.nodes_.size());
    // Each leaf becomes a copy of inner's nodes (their dict keys re-based into the new arena);
    // each inner node's counts scale with the number of leaves below it.
    for (const auto& node : nodes_) {
      if (node.kind == node_kind::leaf) {
        const std::size_t base = out.keys_.size();
        for (auto rec : inner.nodes_) {
          rec.key_offset += static_cast<std::uint32_t>(base);
          out.nodes_.push_back(rec);
        }
        out.keys_ += inner.keys_;
      } else {
        auto rec = node;
        rec.num_leaves = static_cast<std::uint32_t>(node.num_leaves * inner.num_leaves());
        rec.num_nodes = static_cast<std::uint32_t>(node.num_nodes - node.num_leaves +
                                                   node.num_leaves * inner.nodes_.size());
        if (node.kind == node_kind::dict) {
          const std::size_t end = detail::skip_keys(keys_, node.key_offset, node.arity);
          rec.key_offset = static_cast<std::uint32_t>(out.keys_.size());
          out.keys_.append(keys_, node.key_offset, end - node.key_offset);
        }
        out.nodes_.push_back(rec);
      }
    }
    return out;
  }

  friend bool operator==(const TreeDef<>& a, const TreeDef<>& b) {
    if (a.nodes_.size() != b.nodes_.size()) return false;
    for (std::size_t i = 0; i < a.nodes_.size(); ++i) {
      const auto& x = a.nodes_[i];
      const auto& y = b.nodes_[i];
      if (!(x == y)) return false;
      if (x.kind == node_kind::dict) {
        const std::size_t xe = detail::skip_keys(a.keys_, x.key_offset, x.arity);
        const std::size_t ye = detail::skip_keys(b.keys_, y.key_offset, y.arity);
        if (std::string_view(a.keys_).substr(x.key_offset, xe - x.key_offset) !=
            std::string_view(b.keys_).substr(y.key_offset, ye - y.key_offset))
          return false;
      }
    }
    return true;
  }

  std::size_t hash() const {
    // FNV-1a over the node records and the dict keys.
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&h](std::uint64_t v) {
      for (int i = 0; i < 8; ++i) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 1099511628211ull;
      }
    };
    for (const auto& n : nodes_) {
      mix(static_cast<std::uint64_t>(n.kind) | (std::uint64_t{n.arity} << 8));
      mix(reinterpret_cast<std::uintptr_t>(n.info));
    }
    for (char c : keys_) mix(static_cast<unsigned char>(c));
    return static_cast<std::size_t>(h);
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

  // --- for grove's algorithms -------------------------------------------------------------------
  const std::vector<detail::node_record>& nodes() const { return nodes_; }
  const std::string& key_arena() const { return keys_; }
  std::vector<DictKey> dict_keys_at(std::size_t i) const {
    std::vector<DictKey> out;
    if (nodes_[i].kind != node_kind::dict) return out;
    std::size_t pos = nodes_[i].key_offset;
    for (std::uint32_t k = 0; k < nodes_[i].arity; ++k) out.push_back(detail::read_key(keys_, pos));
    return out;
  }
  /// The structure of the subtree whose root is node i.
  TreeDef<> subtree(std::size_t i) const {
    TreeDef<> out;
    out.nodes_.assign(nodes_.begin() + static_cast<std::ptrdiff_t>(i),
                      nodes_.begin() + static_cast<std::ptrdiff_t>(i + nodes_[i].num_nodes));
    // Re-base the dict keys of the subtree into a fresh arena.
    for (auto& rec : out.nodes_) {
      if (rec.kind != node_kind::dict) continue;
      const std::size_t end = detail::skip_keys(keys_, rec.key_offset, rec.arity);
      const auto start = rec.key_offset;
      rec.key_offset = static_cast<std::uint32_t>(out.keys_.size());
      out.keys_.append(keys_, start, end - start);
    }
    return out;
  }

  // Building, in pre-order: open() reserves a record and returns its index, close() fills in the
  // counts once the children are done.
  void clear() {
    nodes_.clear();
    keys_.clear();
  }
  std::size_t open(node_kind kind, const node_info* info) {
    nodes_.push_back(detail::node_record{kind, 0, 0, 0, info, 0});
    return nodes_.size() - 1;
  }
  void close(std::size_t index, std::size_t arity) {
    auto& rec = nodes_[index];
    rec.arity = static_cast<std::uint32_t>(arity);
    rec.num_nodes = static_cast<std::uint32_t>(nodes_.size() - index);
    std::uint32_t leaves = 0;
    for (std::size_t i = index + 1; i < nodes_.size(); i += nodes_[i].num_nodes)
      leaves += nodes_[i].num_leaves;
    rec.num_leaves = leaves;
  }
  void add_leaf() { nodes_.push_back(detail::node_record{node_kind::leaf, 0, 1, 1, nullptr, 0}); }
  std::string& keys_for_building() { return keys_; }
  void set_key_offset(std::size_t index, std::size_t offset) {
    nodes_[index].key_offset = static_cast<std::uint32_t>(offset);
  }
  void reserve(std::size_t nodes) { nodes_.reserve(nodes); }

 private:
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
        // A registered struct prints like a JAX dataclass without meta fields, a custom
        // container like a node registered with aux data None.
        os << "CustomNode(" << rec.info->name << (rec.info->is_struct ? "[()], " : "[None], ");
        print_children("[", "]", false);
        os << ')';
        break;
    }
  }

  std::vector<detail::node_record> nodes_;
  std::string keys_;
};

}  // namespace grove

template <class T>
struct std::hash<grove::TreeDef<T>> {
  std::size_t operator()(const grove::TreeDef<T>& def) const { return def.hash(); }
};
