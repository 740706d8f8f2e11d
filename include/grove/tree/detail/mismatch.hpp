// grove/tree/detail/mismatch.hpp: the prefix rule's checks (a node of the same kind, the same
// length, the same dict keys, None where None, equal static fields) and how a failed check is
// reported: a structure_mismatch thrown inside the walk, which collects the key path on its way
// out and becomes a tree_error in the public function.
#pragma once

#include <cstddef>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "grove/tree/detail/leaf_predicates.hpp"
#include "grove/tree/detail/node_data.hpp"
#include "grove/tree/detail/traversal.hpp"
#include "grove/tree/key_path.hpp"
#include "grove/tree/node_traits.hpp"

namespace grove::detail {

// --- structure mismatches ----------------------------------------------------------------------

// Thrown inside the walks and caught by the public functions, which turn it into a tree_error
// (mismatch_message) and add the structures. Each level of the walk adds its key on the way out.
// Both walks (the n-tree walk of tree_map, tree_for_each and tree_reduce, and flatten_up_to's walk
// of a TreeDef against a tree) throw it through the functions below, so that one check reads the
// same everywhere; only the names of the two sides differ ("tree 1" and "tree 2", or "the prefix"
// and "the tree").
struct structure_mismatch {
  KeyPath reversed_path;
  std::size_t tree_index = 0;       // which tree differs from the first (0-based)
  std::string what;                 // "different lengths of list"
  std::string first = {};           // the first tree's side: "3"
  std::string other = {};           // the other tree's side: "2"
  std::string what_in_prefix = {};  // `what` as flatten_up_to words it, where that differs
};

[[noreturn]] inline void throw_length_mismatch(const std::string& kind, std::size_t n,
                                               std::size_t m, std::size_t index) {
  throw structure_mismatch{{},
                           index,
                           "different lengths of " + kind,
                           std::to_string(n),
                           std::to_string(m),
                           "different numbers of children"};
}
[[noreturn]] inline void throw_keys_mismatch(std::string first, std::string other,
                                             std::size_t index) {
  throw structure_mismatch{
      {}, index, "different key sets of dict", std::move(first), std::move(other)};
}
[[noreturn]] inline void throw_static_fields_mismatch(const std::string& kind, std::string first,
                                                      std::string other, std::size_t index) {
  throw structure_mismatch{
      {}, index, "different static fields of " + kind, std::move(first), std::move(other)};
}
// Where one side has None and the other a value.
[[noreturn]] inline void throw_none_mismatch(bool first_is_none, std::size_t index) {
  if (first_is_none)
    throw structure_mismatch{{},     index,     "None where another tree has a value",
                             "None", "a value", "None in the prefix but a value in the tree"};
  throw structure_mismatch{{},        index,  "a value where another tree has None",
                           "a value", "None", "a value in the prefix but None in the tree"};
}
// Where the first side has a node and the other a leaf or a node of another kind (a compile-time
// error between trees; flatten_up_to finds it at run time).
[[noreturn]] inline void throw_kind_mismatch(std::string first, std::string other,
                                             std::size_t index) {
  const bool leaf = other == "leaf";
  throw structure_mismatch{
      {},
      index,
      leaf ? "a node where another tree has a leaf"
           : "a node of another kind where another tree has this one",
      std::move(first),
      std::move(other),
      leaf ? "a node in the prefix but a leaf in the tree" : "a node of another kind in the tree"};
}

// The first line of a structure error: `grove::tree_map: pytree structure error: <what> at key
// path [1]: 3 in tree 1, 2 in tree 2`; with `prefix`, as flatten_up_to reports it (`... in the
// prefix, ... in the tree`). The caller adds the structures.
inline std::string mismatch_message(const char* function, const structure_mismatch& e,
                                    bool prefix = false) {
  KeyPath path(e.reversed_path.rbegin(), e.reversed_path.rend());
  const std::string& what = prefix && !e.what_in_prefix.empty() ? e.what_in_prefix : e.what;
  std::string msg = std::string(function) + ": pytree structure error: " + what + " at " +
                    (path.empty() ? std::string("the root") : "key path " + keystr(path));
  if (!e.first.empty() || !e.other.empty()) {
    if (prefix)
      msg += ": " + e.first + " in the prefix, " + e.other + " in the tree";
    else
      msg += ": " + e.first + " in tree 1, " + e.other + " in tree " +
             std::to_string(e.tree_index + 1);
  }
  return msg;
}

template <class F>
decltype(auto) with_key(F&& body, auto&& make_key) {
  try {
    return body();
  } catch (structure_mismatch& e) {
    e.reversed_path.push_back(make_key());
    throw;
  }
}

// Whether any subtree of T is checked at run time (and may therefore throw a mismatch).
template <class T, class Pred>
constexpr bool may_mismatch() {
  if constexpr (static_leaf<T, Pred>())
    return false;
  else if constexpr (pred_mode<Pred, T>() == leaf_mode::runtime)
    return true;
  else if constexpr (has_static_fields<T>)
    return true;  // another tree's static fields may differ
  else if constexpr (static_node<T>) {
    return []<class... Cs>(type_list<Cs...>) {
      return (may_mismatch<Cs, Pred>() || ...);
    }(static_child_types_t<T>{});
  } else {
    return true;
  }
}

// What a report calls a node: tuple, list, dict, None, a custom node's name, or leaf.
inline std::string kind_name(node_kind kind, const node_info* info) {
  switch (kind) {
    case node_kind::tuple:
      return "tuple";
    case node_kind::list:
      return "list";
    case node_kind::dict:
      return "dict";
    case node_kind::none:
      return "None";
    case node_kind::custom:
      return std::string(info->name);
    default:
      return "leaf";
  }
}
template <class T>
std::string kind_name() {
  if constexpr (is_node<T>)
    return ::grove::detail::kind_name(node_traits<T>::kind, info_of<T>());
  else
    return "leaf";
}

// The prefix rule's compile-time part: at a node of the first tree, every other tree must have a
// node of the same kind (or, for optionals and None, a type that can be None).
template <class First, class Other>
constexpr bool compatible_node() {
  if constexpr (optional_node<First> || optional_node<Other>)
    return true;  // checked at run time
  else if constexpr (is_node<Other>)
    return same_node_shape<First, Other>();
  else
    return false;
}

// A dict's keys in sorted order, as Python prints a set of them: {'a', 'b'}.
inline std::string describe_keys(const auto& map) {
  std::ostringstream os;
  os << '{';
  bool first = true;
  for (const auto& kv : ::grove::detail::dict_entries(map)) {
    if (!first) os << ", ";
    first = false;
    write_dict_key(os, ::grove::detail::dict_key_of(kv.first));
  }
  os << '}';
  return os.str();
}

// The same for a TreeDef's keys.
inline std::string describe_keys(const std::vector<DictKey>& keys) {
  std::ostringstream os;
  os << '{';
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (i) os << ", ";
    write_dict_key(os, keys[i]);
  }
  os << '}';
  return os.str();
}

// Unwraps engaged optionals in the other trees where the first tree's optional is engaged. An
// engaged std::optional<std::monostate> is None, as an empty one is: against an empty optional
// it is matched with a std::monostate (stateless, so one instance serves every call).
template <class T>
decltype(auto) unwrap_other(T&& t, std::size_t index) {
  if constexpr (optional_node<std::remove_cvref_t<T>>) {
    using R = decltype(*std::forward<T>(t));
    if (!t.has_value()) {
      if constexpr (std::is_same_v<std::remove_cvref_t<R>, std::monostate>) {
        static std::monostate none;
        return static_cast<R>(none);
      } else {
        ::grove::detail::throw_none_mismatch(false, index);
      }
    }
    return static_cast<R>(*std::forward<T>(t));
  } else {
    return std::forward<T>(t);
  }
}

template <class T>
bool is_none_value(const T& t) {
  if constexpr (optional_node<T>)
    return !t.has_value() || ::grove::detail::is_none_value(*t);
  else if constexpr (is_node<T>)
    return node_traits<T>::kind == node_kind::none;
  else
    return false;
}

// Where the first tree has None (an empty optional), every other tree must have None too.
template <class... Rest>
void require_none(const Rest&... rest) {
  std::size_t index = 1;
  ((::grove::detail::is_none_value(rest) ? void()
                                         : ::grove::detail::throw_none_mismatch(true, index),
    ++index),
   ...);
  (void)index;  // unused when there is no other tree
}

template <class First, class... Rest, std::size_t... I>
void check_dynamic_children(const First& first, std::index_sequence<I...>, const Rest&... rest) {
  using traits = node_traits<First>;
  if constexpr (dict_node<First>) {
    auto check = [&](const auto& other, std::size_t index) {
      bool same = other.size() == first.size();
      if (same) {
        const auto mine = ::grove::detail::dict_entries(first);
        const auto theirs = ::grove::detail::dict_entries(other);
        auto it = theirs.begin();
        for (const auto& kv : mine) {
          if (!(it->first == kv.first)) {
            same = false;
            break;
          }
          ++it;
        }
      }
      if (!same)
        ::grove::detail::throw_keys_mismatch(::grove::detail::describe_keys(first),
                                             ::grove::detail::describe_keys(other), index);
    };
    (check(rest, I + 1), ...);
  } else {
    const std::size_t n = traits::size(first);
    auto check = [&](const auto& other, std::size_t index) {
      const std::size_t m = node_traits<std::remove_cvref_t<decltype(other)>>::size(other);
      if (m != n) ::grove::detail::throw_length_mismatch(kind_name<First>(), n, m, index);
    };
    (check(rest, I + 1), ...);
  }
}

// Where the first tree has a struct with static fields, every other tree must hold equal values
// (JAX compares node data when it flattens the other trees up to the first's structure).
template <class First, class... Rest>
void check_static_fields(const First& first, const Rest&... rest) {
  if constexpr (has_static_fields<First> && sizeof...(Rest) > 0) {
    std::size_t index = 0;
    auto check = [&](const auto& other) {
      ++index;
      if (!::grove::detail::static_values_equal(first, other))
        ::grove::detail::throw_static_fields_mismatch(
            kind_name<First>(), ::grove::detail::static_values_text(first),
            ::grove::detail::static_values_text(other), index);
    };
    (check(rest), ...);
  }
}

}  // namespace grove::detail
