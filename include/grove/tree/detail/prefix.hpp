// grove/tree/detail/prefix.hpp: the prefix walk. zip_children visits the children of one node of
// the first tree together with the matching children of the other trees, after the prefix rule's
// checks (mismatch.hpp); zip_leaves builds tree_for_each, tree_reduce and tree_leaves on it, and
// map.hpp, flatten.hpp and key_paths.hpp use it or its checks for everything else.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "grove/tree/detail/leaf_predicates.hpp"
#include "grove/tree/detail/mismatch.hpp"
#include "grove/tree/detail/traversal.hpp"
#include "grove/tree/key_path.hpp"
#include "grove/tree/node_traits.hpp"

namespace grove::detail {

// --- visiting the children of one node --------------------------------------------------------

// Calls g(make_key, child, other_children...) for each child of `first`, with the matching
// children of the other trees (which have passed the structure checks). make_key() builds the
// child's KeyEntry on demand, so that paths cost nothing unless used.
template <class G, class First, class... Rest>
void zip_children(G&& g, First&& first, Rest&&... rest) {
  using T = std::remove_cvref_t<First>;
  using traits = node_traits<T>;
  if constexpr (static_node<T>) {
    ::grove::detail::check_static_fields(first, rest...);
    auto one = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      g([] { return traits::key(I); }, traits::template child<I>(std::forward<First>(first)),
        node_traits<std::remove_cvref_t<Rest>>::template child<I>(std::forward<Rest>(rest))...);
    };
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (one(std::integral_constant<std::size_t, I>{}), ...);
    }
    (std::make_index_sequence<traits::arity>{});
  } else if constexpr (dict_node<T>) {
    ::grove::detail::check_dynamic_children(first, std::index_sequence_for<Rest...>{}, rest...);
    const auto entries = ::grove::detail::dict_entries(first);
    auto others = std::make_tuple(::grove::detail::dict_entries(rest)...);
    auto its = std::apply([](auto&... o) { return std::make_tuple(o.begin()...); }, others);
    for (auto& kv : entries) {
      std::apply(
          [&](auto&... it) {
            g([&] { return KeyEntry{::grove::detail::dict_key_of(kv.first)}; }, kv.second,
              (it++)->second...);
          },
          its);
    }
  } else {
    ::grove::detail::check_dynamic_children(first, std::index_sequence_for<Rest...>{}, rest...);
    const std::size_t n = traits::size(first);
    sequence_cursor<std::remove_reference_t<First>> mine(first);
    std::tuple<sequence_cursor<std::remove_reference_t<Rest>>...> theirs(rest...);
    for (std::size_t i = 0; i < n; ++i) {
      std::apply(
          [&](auto&... cursor) {
            g([&] { return ::grove::detail::sequence_key(first, i); }, mine.next(),
              cursor.next()...);
          },
          theirs);
    }
  }
}

// --- for_each over leaves (with the prefix rule for the other trees) --------------------------

template <class Pred, class F, class First, class... Rest>
void zip_leaves(const Pred& pred, F& f, First&& first, Rest&&... rest) {
  using T = std::remove_cvref_t<First>;
  constexpr leaf_mode mode = pred_mode<Pred, T>();
  if constexpr (static_leaf<T, Pred>()) {
    f(std::forward<First>(first), std::forward<Rest>(rest)...);
  } else {
    if constexpr (mode == leaf_mode::runtime) {
      if (pred(std::as_const(first))) {
        f(std::forward<First>(first), std::forward<Rest>(rest)...);
        return;
      }
    }
    if constexpr (optional_node<T>) {
      if (!first.has_value()) {
        ::grove::detail::require_none(rest...);
        return;
      }
      // Tree i + 1 is numbered from the pack index (see map_node).
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        ::grove::detail::zip_leaves(
            pred, f, *std::forward<First>(first),
            ::grove::detail::unwrap_other(std::forward<Rest>(rest), I + 1)...);
      }
      (std::index_sequence_for<Rest...>{});
    } else {
      static_assert(
          (compatible_node<T, std::remove_cvref_t<Rest>>() && ...),
          "grove: the trees' structures differ: where the first tree has a node, another tree "
          "has a leaf or a node of another kind");
      auto visit = [&](auto make_key, auto&&... children) {
        if constexpr (may_mismatch<T, Pred>()) {
          ::grove::detail::with_key(
              [&] {
                ::grove::detail::zip_leaves(pred, f, std::forward<decltype(children)>(children)...);
              },
              make_key);
        } else {
          ::grove::detail::zip_leaves(pred, f, std::forward<decltype(children)>(children)...);
        }
      };
      ::grove::detail::zip_children(visit, std::forward<First>(first), std::forward<Rest>(rest)...);
    }
  }
}

}  // namespace grove::detail
