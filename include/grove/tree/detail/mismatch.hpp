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

#include "grove/tree/detail/leaf_predicates.hpp"
#include "grove/tree/detail/node_data.hpp"
#include "grove/tree/detail/traversal.hpp"
#include "grove/tree/key_path.hpp"
#include "grove/tree/node_traits.hpp"

namespace grove::detail {

// --- structure mismatches ----------------------------------------------------------------------

// Thrown inside the recursions and caught by the public functions, which add both structures to
// the message. Each level of the recursion adds its key on the way out.
struct structure_mismatch {
  KeyPath reversed_path;
  std::size_t tree_index = 0;  // which tree differs from the first (0-based)
  std::string what;            // "different lengths of list"
  std::string detail = {};     // "3 in tree 1, 2 in tree 2"
};

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
  else if constexpr (num_static_v<T> > 0)
    return true;  // another tree's static fields may differ
  else if constexpr (static_node<T>) {
    return []<class... Cs>(type_list<Cs...>) {
      return (may_mismatch<Cs, Pred>() || ...);
    }(static_child_types_t<T>{});
  } else {
    return true;
  }
}

template <class T>
std::string kind_name() {
  switch (node_traits<T>::kind) {
    case node_kind::tuple:
      return "tuple";
    case node_kind::list:
      return "list";
    case node_kind::dict:
      return "dict";
    case node_kind::none:
      return "None";
    case node_kind::custom:
      return std::string(info_of<T>()->name);
    default:
      return "leaf";
  }
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

// Unwraps engaged optionals in the other trees where the first tree's optional is engaged.
template <class T>
decltype(auto) unwrap_other(T&& t, std::size_t index) {
  if constexpr (optional_node<std::remove_cvref_t<T>>) {
    if (!t.has_value())
      throw structure_mismatch{{},
                               index,
                               "a value where another tree has None",
                               "a value in tree 1, None in tree " + std::to_string(index + 1)};
    return *std::forward<T>(t);
  } else {
    return std::forward<T>(t);
  }
}

template <class T>
bool is_none_value(const T& t) {
  if constexpr (optional_node<T>)
    return !t.has_value();
  else if constexpr (is_node<T>)
    return node_traits<T>::kind == node_kind::none;
  else
    return false;
}

// Where the first tree has None (an empty optional), every other tree must have None too.
template <class... Rest>
void require_none(const Rest&... rest) {
  std::size_t index = 1;
  ((::grove::detail::is_none_value(rest)
        ? void()
        : throw structure_mismatch{{},
                                   index,
                                   "None where another tree has a value",
                                   "None in tree 1, a value in tree " + std::to_string(index + 1)},
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
        throw structure_mismatch{{},
                                 index,
                                 "different key sets of dict",
                                 ::grove::detail::describe_keys(first) + " in tree 1, " +
                                     ::grove::detail::describe_keys(other) + " in tree " +
                                     std::to_string(index + 1)};
    };
    (check(rest, I + 1), ...);
  } else {
    const std::size_t n = traits::size(first);
    auto check = [&](const auto& other, std::size_t index) {
      const std::size_t m = node_traits<std::remove_cvref_t<decltype(other)>>::size(other);
      if (m != n)
        throw structure_mismatch{{},
                                 index,
                                 "different lengths of " + kind_name<First>(),
                                 std::to_string(n) + " in tree 1, " + std::to_string(m) +
                                     " in tree " + std::to_string(index + 1)};
    };
    (check(rest, I + 1), ...);
  }
}

// Where the first tree has a struct with static fields, every other tree must hold equal values
// (JAX compares node data when it flattens the other trees up to the first's structure).
template <class First, class... Rest>
void check_static_fields(const First& first, const Rest&... rest) {
  if constexpr (num_static_v < First >> 0 && sizeof...(Rest) > 0) {
    std::size_t index = 0;
    auto check = [&](const auto& other) {
      ++index;
      if (!::grove::detail::static_values_equal(first, other))
        throw structure_mismatch{{},
                                 index,
                                 "different static fields of " + kind_name<First>(),
                                 ::grove::detail::static_values_text(first) + " in tree 1, " +
                                     ::grove::detail::static_values_text(other) + " in tree " +
                                     std::to_string(index + 1)};
    };
    (check(rest), ...);
  }
}

// The first line of a structure error: `grove::tree_map: pytree structure error: <what> at key
// path [1]: <detail>`. The caller adds the structures.
inline std::string mismatch_message(const char* function, const structure_mismatch& e) {
  KeyPath path(e.reversed_path.rbegin(), e.reversed_path.rend());
  std::string msg = std::string(function) + ": pytree structure error: " + e.what + " at " +
                    (path.empty() ? std::string("the root") : "key path " + keystr(path));
  if (!e.detail.empty()) msg += ": " + e.detail;
  return msg;
}

}  // namespace grove::detail
