// grove/tree/detail/key_paths.hpp: the walk that gives every leaf with its key path (the
// *_with_path functions). The path is one vector, pushed and popped on the way.
#pragma once

#include <type_traits>
#include <utility>

#include "grove/tree/detail/leaf_predicates.hpp"
#include "grove/tree/detail/prefix.hpp"
#include "grove/tree/key_path.hpp"
#include "grove/tree/node_traits.hpp"

namespace grove::detail {

template <class Pred, class T, class F>
void leaves_with_path(const Pred& pred, T&& t, KeyPath& path, F& f) {
  using U = std::remove_cvref_t<T>;
  if constexpr (static_leaf<U, Pred>()) {
    f(std::as_const(path), std::forward<T>(t));
  } else {
    if constexpr (pred_mode<Pred, U>() == leaf_mode::runtime) {
      if (pred(std::as_const(t))) {
        f(std::as_const(path), std::forward<T>(t));
        return;
      }
    }
    if constexpr (optional_node<U>) {
      if (t.has_value()) ::grove::detail::leaves_with_path(pred, *std::forward<T>(t), path, f);
    } else {
      ::grove::detail::zip_children(
          [&](auto make_key, auto&& child) {
            path.push_back(make_key());
            ::grove::detail::leaves_with_path(pred, std::forward<decltype(child)>(child), path, f);
            path.pop_back();
          },
          std::forward<T>(t));
    }
  }
}

}  // namespace grove::detail
