// grove/tree/ops.hpp: jax.tree_util for C++ values: tree_map, tree_leaves, tree_flatten,
// tree_unflatten, tree_structure, tree_reduce, tree_all, tree_any, tree_transpose,
// tree_broadcast, and the *_with_path variants.
#pragma once

#include <cstddef>
#include <iterator>
#include <optional>
#include <ranges>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "grove/tree/detail/flatten.hpp"
#include "grove/tree/detail/key_paths.hpp"
#include "grove/tree/detail/leaf_predicates.hpp"
#include "grove/tree/detail/map.hpp"
#include "grove/tree/detail/mismatch.hpp"
#include "grove/tree/detail/prefix.hpp"
#include "grove/tree/detail/unflatten.hpp"
#include "grove/tree/error.hpp"
#include "grove/tree/key_path.hpp"
#include "grove/tree/node_traits.hpp"
#include "grove/tree/treedef.hpp"

namespace grove {

/// An is_leaf predicate, given as the last argument of the tree functions where JAX takes
/// `is_leaf=`: `tree_map(f, tree, grove::treat_as_leaf(pred))`. The predicate is consulted for the
/// subtree types it can be called with: one that returns std::true_type makes that type a leaf at
/// compile time, one that returns bool decides for each value. (Not to be confused with
/// TreeDef::is_leaf(), jax.tree_util.treedef_is_leaf.)
template <class P>
struct leaf_predicate {
  P pred;
};
template <class P>
constexpr leaf_predicate<std::decay_t<P>> treat_as_leaf(P&& pred) {
  return {std::forward<P>(pred)};
}
/// The former name of treat_as_leaf.
template <class P>
[[deprecated("grove: use grove::treat_as_leaf")]] constexpr leaf_predicate<std::decay_t<P>> is_leaf(
    P&& pred) {
  return {std::forward<P>(pred)};
}

/// The type tree_leaves returns one of per leaf: a pointer into the tree (`const L*`) when the
/// tree has one leaf type, else a std::variant of such pointers.
template <class T, class Pred = detail::no_leaf_pred>
using leaf_ptr_t = typename detail::leaf_pointer<detail::leaf_types_t<std::remove_cvref_t<T>, Pred>,
                                                 std::is_const_v<std::remove_reference_t<T>>>::type;

/// The type of a T-shaped tree whose leaves are all replaced by values of type V.
template <class T, class V>
using rebind_leaves_t = detail::rebind_leaves_t<std::remove_cvref_t<T>, V>;

namespace detail {

template <class T>
inline constexpr bool is_leaf_option = false;
template <class P>
inline constexpr bool is_leaf_option<leaf_predicate<P>> = true;

// Calls body(pred, args...) with the trailing is_leaf option (if any) split off the arguments.
template <class Body, class... Args>
decltype(auto) split_leaf_option(Body&& body, Args&&... args) {
  constexpr std::size_t n = sizeof...(Args);
  constexpr bool has_option = [] {
    if constexpr (n == 0)
      return false;
    else
      return is_leaf_option<std::remove_cvref_t<std::tuple_element_t<n - 1, std::tuple<Args...>>>>;
  }();
  if constexpr (has_option) {
    auto refs = std::forward_as_tuple(std::forward<Args>(args)...);
    return [&]<std::size_t... I>(std::index_sequence<I...>)->decltype(auto) {
      return body(std::get<n - 1>(refs).pred, std::get<I>(std::move(refs))...);
    }
    (std::make_index_sequence<n - 1>{});
  } else {
    return body(no_leaf_pred{}, std::forward<Args>(args)...);
  }
}

// Turns a structure_mismatch from the recursion into a tree_error that names the function, the
// key path, what differed and every tree's structure.
template <class Body, class Pred, class... Trees>
decltype(auto) reporting_mismatch(const char* function, Body&& body, const Pred& pred,
                                  const Trees&... trees) {
  try {
    return body();
  } catch (structure_mismatch& e) {
    std::ostringstream msg;
    msg << ::grove::detail::mismatch_message(function, e);
    std::size_t index = 0;
    ((msg << "\n  tree " << ++index << ": " << ::grove::detail::structure_of(pred, trees)), ...);
    throw tree_error(msg.str());
  }
}

}  // namespace detail

/// Applies f to every leaf of `tree` and returns a tree of the results (jax.tree_util.tree_map).
/// With more trees, each must have `tree` as a prefix: at each leaf of `tree`, f also receives
/// the matching subtree of every other tree. A last argument grove::treat_as_leaf(pred) stops the
/// descent where pred says so. The result keeps the input's C++ types where f keeps the leaf
/// types; std containers and registered class templates are rebuilt around new types, other
/// registered structs become grove::mapped_node. A registered struct is rebuilt field by field,
/// by name, and its static fields are copied from `tree` (the other trees must hold equal values,
/// else tree_error). Eigen expressions are evaluated. Over a tree without leaves (`[]`, `()`,
/// None) f is never called and the result is the same empty structure, as in JAX.
template <class F, class Tree, class... Rest>
auto tree_map(F&& f, const Tree& tree, const Rest&... rest) {
  return detail::split_leaf_option(
      [&](const auto& pred, const auto& first, const auto&... others) {
        return detail::reporting_mismatch(
            "grove::tree_map", [&] { return detail::map_tree(pred, f, first, others...); }, pred,
            first, others...);
      },
      tree, rest...);
}

/// Calls f on every leaf of `tree` (and the matching subtrees of the other trees, as tree_map
/// does), in leaf order, for its effects. Leaves are passed by reference, so f may change them:
/// the allocation-free way to update a tree in place.
template <class F, class Tree, class... Rest>
void tree_for_each(F&& f, Tree&& tree, Rest&&... rest) {
  detail::split_leaf_option(
      [&](const auto& pred, auto&& first, auto&&... others) {
        detail::reporting_mismatch(
            "grove::tree_for_each",
            [&] {
              detail::zip_leaves(pred, f, std::forward<decltype(first)>(first),
                                 std::forward<decltype(others)>(others)...);
            },
            pred, first, others...);
      },
      std::forward<Tree>(tree), std::forward<Rest>(rest)...);
}

/// The leaves of `tree` in JAX's order (depth first, left to right, maps by key), as pointers
/// into the tree: no leaf is copied. See leaf_ptr_t.
template <class Tree, class... Option>
auto tree_leaves(Tree& tree, const Option&... is_leaf) {
  return detail::split_leaf_option(
      [&](const auto& pred) {
        return detail::collect_leaves<std::decay_t<decltype(pred)>, Tree&, std::is_const_v<Tree>>(
            pred, tree, nullptr);
      },
      is_leaf...);
}

/// The structure of `tree`, which remembers tree's C++ type (jax.tree_util.tree_structure).
template <class Tree, class... Option>
TreeDef<std::remove_cvref_t<Tree>> tree_structure(const Tree& tree, const Option&... is_leaf) {
  return detail::split_leaf_option(
      [&](const auto& pred) {
        return TreeDef<std::remove_cvref_t<Tree>>(detail::structure_of(pred, tree));
      },
      is_leaf...);
}

/// The leaves (pointers, as tree_leaves gives them) and the structure of `tree`, in one pass
/// with no allocation per node: one buffer for the leaves, one for the TreeDef.
template <class Tree, class... Option>
auto tree_flatten(Tree& tree, const Option&... is_leaf) {
  return detail::split_leaf_option(
      [&](const auto& pred) {
        TreeDef<std::remove_cvref_t<Tree>> def;
        auto leaves =
            detail::collect_leaves<std::decay_t<decltype(pred)>, Tree&, std::is_const_v<Tree>>(
                pred, tree, &def);
        return std::pair{std::move(leaves), std::move(def)};
      },
      is_leaf...);
}

/// Each leaf with its key path, in leaf order.
template <class Tree, class... Option>
auto tree_leaves_with_path(Tree& tree, const Option&... is_leaf) {
  return detail::split_leaf_option(
      [&](const auto& pred) {
        using ptr = leaf_ptr_t<Tree&, std::decay_t<decltype(pred)>>;
        std::vector<std::pair<KeyPath, ptr>> out;
        KeyPath path;
        auto sink = [&](const KeyPath& p, auto& leaf) { out.emplace_back(p, ptr(&leaf)); };
        detail::leaves_with_path(pred, tree, path, sink);
        return out;
      },
      is_leaf...);
}

/// (vector of (key path, leaf pointer), TreeDef), like jax.tree_util.tree_flatten_with_path.
template <class Tree, class... Option>
auto tree_flatten_with_path(Tree& tree, const Option&... is_leaf) {
  return std::pair{tree_leaves_with_path(tree, is_leaf...), tree_structure(tree, is_leaf...)};
}

/// Like tree_map, but f also receives each leaf's key path first: f(path, leaf, others...).
template <class F, class Tree, class... Rest>
auto tree_map_with_path(F&& f, const Tree& tree, const Rest&... rest) {
  return detail::split_leaf_option(
      [&](const auto& pred, const auto& first, const auto&... others) {
        std::vector<KeyPath> paths;
        KeyPath path;
        auto record = [&](const KeyPath& p, const auto&) { paths.push_back(p); };
        detail::leaves_with_path(pred, first, path, record);
        std::size_t next = 0;
        auto with_path = [&](const auto& leaf, const auto&... subtrees) {
          return f(paths[next++], leaf, subtrees...);
        };
        return detail::reporting_mismatch(
            "grove::tree_map_with_path",
            [&] { return detail::map_tree(pred, with_path, first, others...); }, pred, first,
            others...);
      },
      tree, rest...);
}

/// Folds f over the leaves in order: f(f(f(init, leaf0), leaf1), ...) (jax.tree_util.tree_reduce
/// with an initializer).
template <class F, class Tree, class Init, class... Option>
requires(!detail::is_leaf_option<std::remove_cvref_t<Init>>) std::decay_t<Init> tree_reduce(
    F&& f, const Tree& tree, Init&& init, const Option&... is_leaf) {
  std::decay_t<Init> acc(std::forward<Init>(init));
  detail::split_leaf_option(
      [&](const auto& pred) {
        auto step = [&](const auto& leaf) { acc = f(std::move(acc), leaf); };
        detail::zip_leaves(pred, step, tree);
      },
      is_leaf...);
  return acc;
}

namespace detail {
template <class... Ls>
auto reduce_type(type_list<Ls...>) {
  static_assert(sizeof...(Ls) > 0,
                "grove: tree_reduce without an initial value needs a tree that can hold leaves; "
                "pass an initial value");
  if constexpr (sizeof...(Ls) > 0) {
    static_assert(
        requires { typename std::common_type<Ls...>::type; },
        "grove: tree_reduce without an initial value needs leaf types with a common "
        "type; pass an initial value");
    return std::type_identity<std::common_type_t<Ls...>>{};
  } else {
    return std::type_identity<int>{};
  }
}
}  // namespace detail

/// Folds f over the leaves in order with the first leaf as the start: f(f(leaf0, leaf1), leaf2)
/// (jax.tree_util.tree_reduce without an initializer, which is functools.reduce over the leaves).
/// The accumulator has the leaves' common type (std::common_type of the leaf types). Throws
/// tree_error when the tree has no leaves, where JAX raises TypeError.
template <class F, class Tree, class... Option>
requires(detail::is_leaf_option<Option>&&...) auto tree_reduce(F&& f, const Tree& tree,
                                                               const Option&... is_leaf) {
  return detail::split_leaf_option(
      [&](const auto& pred) {
        using leaves = detail::leaf_types_t<Tree, std::decay_t<decltype(pred)>>;
        using acc_type = typename decltype(detail::reduce_type(leaves{}))::type;
        std::optional<acc_type> acc;
        auto step = [&](const auto& leaf) {
          if (!acc) {
            acc.emplace(leaf);
          } else {
            acc_type next = f(std::move(*acc), leaf);
            *acc = std::move(next);
          }
        };
        detail::zip_leaves(pred, step, tree);
        if (!acc)
          throw tree_error(
              "grove::tree_reduce: the tree has no leaves and no initial value was given");
        return std::move(*acc);
      },
      is_leaf...);
}

/// Whether every leaf is true (jax.tree_util.tree_all). Leaves must convert to bool; map a tree of
/// arrays to bools first: tree_all(tree_map(pred, tree)).
template <class Tree, class... Option>
bool tree_all(const Tree& tree, const Option&... is_leaf) {
  return tree_reduce(
      [](bool acc, const auto& leaf) {
        static_assert(std::is_constructible_v<bool, decltype(leaf)>,
                      "grove: tree_all/tree_any need leaves that convert to bool; map the tree to "
                      "bools first");
        return acc && static_cast<bool>(leaf);
      },
      tree, true, is_leaf...);
}

/// Whether any leaf is true (jax.tree_util.tree_any).
template <class Tree, class... Option>
bool tree_any(const Tree& tree, const Option&... is_leaf) {
  return tree_reduce(
      [](bool acc, const auto& leaf) {
        static_assert(std::is_constructible_v<bool, decltype(leaf)>,
                      "grove: tree_all/tree_any need leaves that convert to bool; map the tree to "
                      "bools first");
        return acc || static_cast<bool>(leaf);
      },
      tree, false, is_leaf...);
}

/// Rebuilds a tree from a structure and leaves in leaf order. `leaves` may hold values, pointers
/// (as tree_leaves gives them) or variants. When the values have one of the tree's leaf types
/// (or are variants), the result has the TreeDef's C++ type T; values of another type V give
/// rebind_leaves_t<T, V> (a tree of V with T's structure).
template <class T, class Leaves>
auto tree_unflatten(const TreeDef<T>& def, const Leaves& leaves) {
  static_assert(
      !std::is_void_v<T>,
      "grove: tree_unflatten needs a TreeDef<T> that knows its C++ type (from tree_flatten or "
      "tree_structure), not a bare TreeDef<>");
  using element = std::remove_cvref_t<decltype(*std::ranges::begin(leaves))>;
  using value = std::conditional_t<std::is_pointer_v<element>,
                                   std::remove_cvref_t<std::remove_pointer_t<element>>, element>;
  using own_leaves = detail::leaf_types_t<T, detail::no_leaf_pred>;
  constexpr bool keeps_type =
      detail::is_instance_v<value, std::variant> ||
      std::is_same_v<typename detail::append_unique<own_leaves, value>::type, own_leaves>;
  using Result = typename decltype([] {
    if constexpr (keeps_type)
      return std::type_identity<T>{};
    else
      return std::type_identity<detail::rebind_leaves_t<T, value>>{};
  }())::type;
  const auto given = static_cast<std::size_t>(std::ranges::distance(leaves));
  if (given != def.num_leaves())
    throw tree_error("grove::tree_unflatten: the TreeDef " + def.str() + " has " +
                     std::to_string(def.num_leaves()) + " leaves but " + std::to_string(given) +
                     " were given");
  detail::leaf_source<decltype(std::ranges::begin(leaves))> src{std::ranges::begin(leaves),
                                                                std::ranges::end(leaves)};
  std::size_t pos = 0;
  return detail::build_tree<Result>(def, pos, src);
}

/// The subtrees of `tree` at the leaves of `def` (JAX's treedef.flatten_up_to), as pointers (a
/// variant of pointers when they can have several types). Throws tree_error naming the key path
/// where `tree` does not have `def` as a prefix: another node kind, length, dict keys, None, or
/// other static field values.
template <class T, class Tree>
auto tree_flatten_up_to(const TreeDef<T>& def, Tree& tree) {
  using ptr =
      typename detail::leaf_pointer<typename detail::subtree_types<std::remove_cvref_t<Tree>>::type,
                                    std::is_const_v<Tree>>::type;
  std::vector<ptr> out;
  std::size_t pos = 0;
  auto walk = [&](auto& self, auto& sub) -> void {
    using U = std::remove_cvref_t<decltype(sub)>;
    const std::size_t here = pos;
    const auto& rec = def.nodes()[here];
    if (rec.kind == node_kind::leaf) {
      ++pos;
      out.push_back(ptr(&sub));
      return;
    }
    const auto prefix_kind = [&] { return detail::kind_name(rec.kind, rec.info); };
    if constexpr (!detail::is_node<U>) {
      detail::throw_kind_mismatch(prefix_kind(), "leaf", 1);
    } else if constexpr (detail::optional_node<U>) {
      // An engaged optional is its value, which may itself be None (std::monostate, an empty
      // inner optional), so a tree always has its own structure as a prefix.
      if (rec.kind == node_kind::none) {
        if (!detail::is_none_value(sub)) detail::throw_none_mismatch(true, 1);
        ++pos;
        return;
      }
      if (!sub.has_value()) detail::throw_none_mismatch(false, 1);
      self(self, *sub);
    } else {
      if (rec.kind != node_traits<U>::kind || rec.info != detail::info_of<U>())
        detail::throw_kind_mismatch(prefix_kind(), detail::kind_name<U>(), 1);
      const std::size_t arity = detail::arity_of(sub);
      if (arity != rec.arity) detail::throw_length_mismatch(prefix_kind(), rec.arity, arity, 1);
      if constexpr (detail::dict_node<U>) {
        const auto keys = def.dict_keys_at(here);
        std::size_t k = 0;
        for (const auto& kv : detail::dict_entries(sub)) {
          if (!(keys[k++] == detail::dict_key_of(kv.first))) {
            detail::throw_keys_mismatch(detail::describe_keys(keys), detail::describe_keys(sub), 1);
          }
        }
      }
      if constexpr (detail::has_static_fields<U>) {
        if (!detail::node_data_matches(def.node_data_at(here), sub)) {
          std::ostringstream stored;
          if (const auto* data = def.node_data_at(here)) data->print(stored);
          detail::throw_static_fields_mismatch(detail::kind_name<U>(), stored.str(),
                                               detail::static_values_text(sub), 1);
        }
      }
      ++pos;
      detail::zip_children(
          [&](auto make_key, auto& child) {
            detail::with_key([&] { self(self, child); }, make_key);
          },
          sub);
    }
  };
  try {
    walk(walk, tree);
  } catch (detail::structure_mismatch& e) {
    throw tree_error(detail::mismatch_message("grove::tree_flatten_up_to", e, true) +
                     "\n  prefix: " + def.str() +
                     "\n  tree:   " + detail::structure_of(detail::no_leaf_pred{}, tree).str());
  }
  return out;
}

/// Turns a tree with structure outer.compose(inner) into one with structure inner.compose(outer)
/// (jax.tree_util.tree_transpose): a list of pairs becomes a pair of lists. When the leaves have
/// several C++ types (a list of (int, double) tuples), each inner position keeps the type that
/// inner's C++ type gives it (a tuple of a list of ints and a list of doubles), and every leaf
/// at that position must hold that type (else tree_error).
template <class O, class I, class Tree>
auto tree_transpose(const TreeDef<O>& outer, const TreeDef<I>& inner, const Tree& tree) {
  const TreeDef<> expected = outer.TreeDef<>::compose(inner);
  const TreeDef<> actual = detail::structure_of(detail::no_leaf_pred{}, tree);
  if (!(expected == actual))
    throw tree_error("grove::tree_transpose: the tree's structure " + actual.str() +
                     " is not outer.compose(inner) = " + expected.str());
  const auto leaves = tree_leaves(tree);
  const std::size_t n_outer = outer.num_leaves(), n_inner = inner.num_leaves();
  using leaf_pointer = typename decltype(leaves)::value_type;
  // Leaf (i, j) of the input (outer leaf i, inner leaf j) becomes leaf (j, i) of the output.
  if constexpr (std::is_pointer_v<leaf_pointer>) {
    using leaf = std::remove_cvref_t<std::remove_pointer_t<leaf_pointer>>;
    using outer_tree = decltype(tree_unflatten(outer, std::vector<leaf>{}));
    std::vector<outer_tree> columns;
    columns.reserve(n_inner);
    for (std::size_t j = 0; j < n_inner; ++j) {
      std::vector<leaf> column;
      column.reserve(n_outer);
      for (std::size_t i = 0; i < n_outer; ++i) column.push_back(*leaves[i * n_inner + j]);
      columns.push_back(tree_unflatten(outer, column));
    }
    return tree_unflatten(inner, columns);
  } else {
    // Leaves of several types: map over an instance of inner's C++ type (its leaves
    // value-initialised, its static fields from the TreeDef), so that each inner position's
    // column is an outer tree of that position's own leaf type.
    static_assert(!std::is_void_v<I>,
                  "grove: tree_transpose of leaves of several types needs an inner TreeDef<T> "
                  "that knows its C++ type (from tree_structure)");
    detail::value_initialized_leaves source;
    std::size_t pos = 0;
    const I shape = detail::build_tree<I>(inner, pos, source);
    std::size_t j = 0;
    return tree_map(
        [&](const auto& position) {
          using leaf = std::remove_cvref_t<decltype(position)>;
          std::vector<leaf> column;
          column.reserve(n_outer);
          for (std::size_t i = 0; i < n_outer; ++i) {
            const auto* held = std::get_if<const leaf*>(&leaves[i * n_inner + j]);
            if (held == nullptr)
              throw tree_error("grove::tree_transpose: leaf " + std::to_string(j) +
                               " of outer leaf " + std::to_string(i) +
                               " has another C++ type than the inner TreeDef's type gives that "
                               "position; the leaves at one inner position must share its type");
            column.push_back(**held);
          }
          ++j;
          return tree_unflatten(outer, column);
        },
        shape);
  }
}

/// Broadcasts a prefix tree to the structure of `full`: every leaf of `full` gets the value of
/// the prefix leaf above it (optree's broadcast_prefix, returned as a tree).
template <class Prefix, class Full, class... Option>
auto tree_broadcast(const Prefix& prefix, const Full& full, const Option&... is_leaf) {
  return tree_map(
      [&](const auto& value, const auto& subtree) {
        return tree_map([&](const auto&) { return value; }, subtree);
      },
      prefix, full, is_leaf...);
}

}  // namespace grove
