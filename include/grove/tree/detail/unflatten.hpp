// grove/tree/detail/unflatten.hpp: tree_unflatten's recursion. It reads a TreeDef in pre-order
// and leaves in order, building the C++ type the TreeDef was taken from (or that type with other
// leaves); registered structs get their static fields back from the TreeDef's node data.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include "grove/tree/detail/leaf_predicates.hpp"
#include "grove/tree/detail/map.hpp"
#include "grove/tree/detail/node_data.hpp"
#include "grove/tree/error.hpp"
#include "grove/tree/node_traits.hpp"
#include "grove/tree/treedef.hpp"

namespace grove::detail {

// The child types of a static node, as a std::tuple.
template <class T>
struct children_tuple;
template <class... Cs>
struct children_tuple<type_list<Cs...>> {
  using type = std::tuple<Cs...>;
};
template <class T>
using children_of = typename children_tuple<static_child_types_t<T>>::type;

// Reads leaves in order from a range, converting each to the leaf type the position needs.
template <class It>
struct leaf_source {
  It it;
  It end;
  std::size_t taken = 0;

  template <class L>
  L take() {
    if (it == end) throw tree_error("grove::tree_unflatten: too few leaves");
    ++taken;
    return convert<L>(*it++);
  }

  template <class L, class V>
  static L convert(V&& v) {
    using VV = std::remove_cvref_t<V>;
    if constexpr (is_instance_v<VV, std::variant>) {
      return std::visit(
          [](auto&& alt) -> L { return convert<L>(std::forward<decltype(alt)>(alt)); },
          std::forward<V>(v));
    } else if constexpr (std::is_convertible_v<V, L>) {
      return L(std::forward<V>(v));
    } else if constexpr (std::is_pointer_v<VV>) {
      if constexpr (std::is_convertible_v<decltype(*v), L>)
        return L(*v);
      else
        throw tree_error(
            "grove::tree_unflatten: a leaf's type cannot fill its position in the tree");
    } else {
      throw tree_error("grove::tree_unflatten: a leaf's type cannot fill its position in the tree");
    }
  }
};

// A leaf source that gives every position a value-initialised leaf of its own type: an instance
// of a TreeDef's C++ type whose leaves do not matter (tree_transpose maps over one).
struct value_initialized_leaves {
  std::size_t taken = 0;
  template <class L>
  L take() {
    ++taken;
    return L{};
  }
};

template <class T, class Source>
T build_tree(const TreeDef<>& def, std::size_t& pos, Source& src) {
  const auto& rec = def.nodes()[pos];
  auto mismatch = [&](const std::string& what) {
    throw tree_error("grove::tree_unflatten: the TreeDef does not describe this C++ type: " + what +
                     " at node " + std::to_string(pos) + " of " + def.str());
  };
  if constexpr (!is_node<T>) {
    if (rec.kind != node_kind::leaf) mismatch("expected a leaf");
    ++pos;
    return src.template take<T>();
  } else {
    if (rec.kind == node_kind::leaf) {
      // A node type at a leaf position: an is_leaf predicate made it a leaf when flattening.
      if constexpr (std::is_constructible_v<T, T>) {
        ++pos;
        return src.template take<T>();
      }
    }
    using traits = node_traits<T>;
    if constexpr (optional_node<T>) {
      if (rec.kind == node_kind::none) {
        ++pos;
        return T{};
      }
      return T{build_tree<typename traits::child_type>(def, pos, src)};
    } else {
      if (rec.kind != traits::kind || rec.info != info_of<T>()) mismatch("node kinds differ");
      const std::size_t arity = rec.arity;
      ++pos;
      if constexpr (static_node<T>) {
        if (arity != traits::arity) mismatch("arities differ");
        if constexpr (registered_node<T>) {
          // The static fields come from the TreeDef's node data, which flattening a T-shaped
          // tree recorded with the same types.
          using stored = static_values<node_static_types_t<T>>;
          const stored* data = nullptr;
          if constexpr (traits::num_static > 0) {
            data = dynamic_cast<const stored*>(def.node_data_at(pos - 1));
            if (data == nullptr) mismatch("the static fields' types differ");
          }
          return ::grove::detail::build_struct<T>(
              [&](auto j) -> decltype(auto) { return std::get<decltype(j)::value>(data->values); },
              [&](auto i) {
                return build_tree<std::tuple_element_t<decltype(i)::value, children_of<T>>>(
                    def, pos, src);
              });
        } else {
          return [&]<class... Cs>(type_list<Cs...>) -> T {
            if constexpr (std::is_same_v<T, std::nullopt_t>)
              return std::nullopt;
            else
              return T{build_tree<Cs>(def, pos, src)...};
          }(static_child_types_t<T>{});
        }
      } else if constexpr (dict_node<T>) {
        using K = typename traits::key_type;
        T out;
        std::size_t key_pos = rec.key_offset;
        for (std::size_t k = 0; k < arity; ++k) {
          DictKey key = read_key(def.key_arena(), key_pos);
          K real_key{};
          if constexpr (std::is_same_v<K, std::string>) {
            auto* s = std::get_if<std::string>(&key.key);
            if (!s) mismatch("an integer dict key where the map has string keys");
            real_key = *s;
          } else {
            auto* v = std::get_if<std::int64_t>(&key.key);
            if (!v) mismatch("a string dict key where the map has integer keys");
            real_key = static_cast<K>(*v);
          }
          out.emplace_hint(out.end(), std::move(real_key),
                           build_tree<typename traits::child_type>(def, pos, src));
        }
        return out;
      } else {
        return traits::template build<typename traits::child_type>(arity, [&](std::size_t) {
          return build_tree<typename traits::child_type>(def, pos, src);
        });
      }
    }
  }
}

}  // namespace grove::detail
