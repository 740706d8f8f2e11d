// grove/tree/detail/flatten.hpp: flattening. One pre-order walk feeds a structure sink (the
// TreeDef builder, or a hasher that computes TreeDef::hash without building the TreeDef) and a
// leaf sink (tree_leaves' pointers, or nothing).
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

#include "grove/tree/detail/leaf_predicates.hpp"
#include "grove/tree/detail/node_data.hpp"
#include "grove/tree/detail/prefix.hpp"
#include "grove/tree/node_traits.hpp"
#include "grove/tree/treedef.hpp"

namespace grove::detail {

// A structure sink with treedef_builder's interface that hashes what the builder would record, in
// the same order, so that its value equals TreeDef::hash of the same tree. Allocates nothing.
struct structure_hash_sink {
  structure_hasher h;
  void add_leaf() { ::grove::detail::hash_node(h, node_kind::leaf, 0, nullptr); }
  std::size_t open(node_kind kind, const node_info* info, std::size_t arity) {
    ::grove::detail::hash_node(h, kind, arity, info);
    return 0;
  }
  template <class K>
  void add_key(const K& key) {
    ::grove::detail::hash_dict_key(h, key);
  }
  template <class T>
  void add_static_fields(std::size_t, const T& t) {
    ::grove::detail::hash_static_values(h, t);
  }
  void close(std::size_t) {}
};

// The builder's side of add_static_fields: the node data is a copy of the values.
template <class T>
void add_static_fields(treedef_builder& b, std::size_t index, const T& t) {
  b.set_data(index, ::grove::detail::make_node_data(t));
}
template <class T>
void add_static_fields(structure_hash_sink& s, std::size_t index, const T& t) {
  s.add_static_fields(index, t);
}

template <class T>
std::size_t arity_of(const T& t) {
  if constexpr (static_node<T>)
    return node_traits<T>::arity;
  else if constexpr (dict_node<T>)
    return t.size();
  else
    return node_traits<T>::size(t);
}

template <class Pred, class T, class Structure, class Sink>
void flatten_into(const Pred& pred, T&& t, Structure& out, Sink& sink) {
  using U = std::remove_cvref_t<T>;
  if constexpr (static_leaf<U, Pred>()) {
    out.add_leaf();
    sink(std::forward<T>(t));
  } else {
    if constexpr (pred_mode<Pred, U>() == leaf_mode::runtime) {
      if (pred(std::as_const(t))) {
        out.add_leaf();
        sink(std::forward<T>(t));
        return;
      }
    }
    if constexpr (optional_node<U>) {
      if (t.has_value())
        ::grove::detail::flatten_into(pred, *std::forward<T>(t), out, sink);
      else
        out.close(out.open(node_kind::none, nullptr, 0));
    } else {
      const std::size_t index =
          out.open(node_traits<U>::kind, info_of<U>(), ::grove::detail::arity_of(t));
      if constexpr (dict_node<U>) {
        for (const auto& kv : ::grove::detail::dict_entries(t)) out.add_key(kv.first);
      }
      if constexpr (has_static_fields<U>) ::grove::detail::add_static_fields(out, index, t);
      ::grove::detail::zip_children(
          [&](auto, auto&& child) {
            ::grove::detail::flatten_into(pred, std::forward<decltype(child)>(child), out, sink);
          },
          std::forward<T>(t));
      out.close(index);
    }
  }
}

template <class Pred, class T>
TreeDef<> structure_of(const Pred& pred, const T& t) {
  TreeDef<> def;
  treedef_builder b(def);
  auto sink = [](const auto&) {};
  ::grove::detail::flatten_into(pred, t, b, sink);
  return def;
}

/// tree_structure(t).hash(), computed without building the TreeDef and without allocating
/// (except to sort the keys of unordered maps).
template <class T>
std::uint64_t structure_hash(const T& t) {
  structure_hash_sink s;
  auto sink = [](const auto&) {};
  ::grove::detail::flatten_into(no_leaf_pred{}, t, s, sink);
  return s.h.value();
}

template <class Pred, class T, bool Const>
auto collect_leaves(const Pred& pred, T&& tree, TreeDef<>* def) {
  using ptr = typename leaf_pointer<leaf_types_t<std::remove_cvref_t<T>, Pred>, Const>::type;
  std::vector<ptr> leaves;
  auto sink = [&](auto& leaf) { leaves.push_back(ptr(&leaf)); };
  if (def) {
    treedef_builder b(*def);
    ::grove::detail::flatten_into(pred, tree, b, sink);
  } else {
    auto visit = [&](auto& leaf) { sink(leaf); };
    ::grove::detail::zip_leaves(pred, visit, tree);
  }
  return leaves;
}

}  // namespace grove::detail
