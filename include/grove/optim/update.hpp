// grove/optim/update.hpp: applying updates to parameters (optax's apply_updates), and the result
// type of every transformation's update.
#pragma once

#include <type_traits>
#include <utility>

#include "grove/optim/detail/leaf.hpp"
#include "grove/optim/detail/pass.hpp"
#include "grove/tree.hpp"

namespace grove::optim {

/// What a transformation's update returns: the updates and the new state (optax's
/// `updates, state = tx.update(...)`); structured bindings work:
/// `auto [updates, state] = tx.update(grads, state, params);`.
template <class Updates, class State>
struct update_result {
  Updates updates;
  State state;
};

/// optax.apply_updates: params + updates, leaf by leaf, a new tree of params' type. Throws
/// grove::tree_error when the structures differ, grove::shape_error when a leaf of the updates
/// has another shape than its parameter (another size, or the same size in other rows and
/// columns).
template <class P>
P apply_updates(const P& params, const P& updates) {
  detail::check_shapes("grove::optim::apply_updates", "the updates", params, updates);
  return tree_map(
      [](const auto& p, const auto& u) -> std::remove_cvref_t<decltype(p)> { return p + u; },
      params, updates);
}

/// The same in place: params += updates, without allocation. The same errors, before anything
/// changes.
template <class P>
void apply_updates_inplace(P& params, const P& updates) {
  detail::check_shapes("grove::optim::apply_updates_inplace", "the updates", params, updates);
  detail::for_each_leaf(
      [](detail::Index begin, detail::Index n, auto& p, const auto& u) {
        if constexpr (std::is_arithmetic_v<std::remove_cvref_t<decltype(p)>>)
          p += u;
        else
          detail::flat(p).segment(begin, n) += detail::flat(u).segment(begin, n);
      },
      params, updates);
}

}  // namespace grove::optim
