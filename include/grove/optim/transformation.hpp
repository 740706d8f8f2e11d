// grove/optim/transformation.hpp: what a gradient transformation is (optax's
// GradientTransformation), and the fused machinery the elementwise ones share.
//
// A transformation `tx` has
//   tx.init(params) -> state                               a pytree (checkpoints save it)
//   tx.update(grads, state, params) -> {updates, state}    pure: grove::optim::update_result
//   tx.step(params, grads, state)                          in place: update + apply_updates
// Elementwise transformations (and chains of them) also expose the hooks of the fused pass:
// their step reads each element of the gradients, parameters and state once, writes the
// parameters and state once, and allocates nothing; their update is the same pass writing into a
// copy, so step is update + apply_updates_inplace up to the rounding of a fused multiply-add
// (and bit for bit in the state).
//
// The hooks, for a transformation T with `static constexpr bool fusable = true`:
//   T::needs_norm                 whether context needs the global norm of the incoming updates
//   tx.context(state, norm)       the per-step values (a schedule's value, bias corrections)
//   T::buffers(state)             a std::tuple of references to the state's params-shaped trees
//   tx.apply(ctx, u, p, at, scratch, b...)
//                                 the updates of one chunk of one leaf, as an Eigen expression of
//                                 u, the incoming updates (an expression too); p is the same chunk
//                                 of the parameters, `at` its offset in the leaf, scratch an array
//                                 of the chunk's size for a result that must be stored, b... the
//                                 matching leaves of the buffers (written in place). Once scratch
//                                 is written, u must not be read again (it may be scratch).
//   tx.advance(state)             the state changes that are not per element (counts)
// context is called before anything changes, and checks what the step will use of the state: a
// count it cannot advance, a schedule's value that is not finite (detail::state_leaf_error, which
// the entry point turns into grove::argument_error naming the leaf).
#pragma once

#include <Eigen/Core>
#include <cmath>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "grove/optim/detail/leaf.hpp"
#include "grove/optim/detail/pass.hpp"
#include "grove/optim/detail/state.hpp"
#include "grove/optim/update.hpp"
#include "grove/tree.hpp"

namespace grove::optim {

/// Element counts and offsets (Eigen's index type).
using Index = Eigen::Index;

/// optax.EmptyState: the state of a stateless transformation, an empty tuple (JAX's `()`).
using EmptyState = std::tuple<>;

namespace detail {

template <class T>
concept fusable = std::remove_cvref_t<T>::fusable;

/// Whether T's context needs the global norm of its incoming updates (false for a user's
/// transformation that does not say).
template <class T>
constexpr bool needs_norm() {
  if constexpr (requires { std::remove_cvref_t<T>::needs_norm; })
    return std::remove_cvref_t<T>::needs_norm;
  else
    return false;
}

template <class T, class State>
using buffers_t = decltype(std::remove_cvref_t<T>::buffers(std::declval<State&>()));

template <class T, class State>
inline constexpr std::size_t buffer_count = std::tuple_size_v<buffers_t<T, State>>;

/// t.step when t has one, else update + apply_updates_inplace (a user's transformation may offer
/// init and update only).
template <class T, class P, class State>
void step_of(const T& t, P& params, const P& grads, State& state) {
  if constexpr (requires { t.step(params, grads, state); }) {
    t.step(params, grads, state);
  } else {
    auto r = t.update(grads, state, params);
    ::grove::optim::apply_updates_inplace(params, r.updates);
    state = std::move(r.state);
  }
}

/// Checks what a step of t would check of its state, without changing anything: a
/// transformation's own check_state when it has one (the wrappers, a chain), else the context a
/// fused one computes from its state (counts, a schedule's value); nothing for a user's
/// transformation. Throws detail::state_leaf_error. The wrappers call it before they change their
/// own state, so that a refused inner step leaves the whole state as it was.
template <class T, class State>
void check_state(const T& t, const State& state) {
  if constexpr (requires { t.check_state(state); })
    t.check_state(state);
  else if constexpr (fusable<T>)
    (void)t.context(state, 0.0);
}

/// One fused pass of t: out = (or +=) the transformed grads; the state advances. Everything is
/// checked before anything changes: the trees' structures and shapes, then the state (context).
template <bool InPlace, class T, class Out, class P, class G, class State>
void run_fused(const T& t, const char* who, Out& out, const P& params, const G& grads,
               State& state) {
  std::apply([&](auto&... b) { check_shapes(who, "the gradients", params, grads, b...); },
             T::buffers(state));
  double norm = 0;
  if constexpr (T::needs_norm) norm = std::sqrt(sum_of_squares(grads));
  const auto ctx = naming_state_leaf(who, state, [&] { return t.context(state, norm); });
  std::apply([&](auto&... b) { fused_pass<InPlace>(t, ctx, out, params, grads, b...); },
             T::buffers(state));
  t.advance(state);
}

}  // namespace detail

/// The base of grove's elementwise transformations: update and step from the fused hooks
/// (Derived provides init, context, apply and, if it has them, buffers and advance).
template <class Derived>
class FusedTransformation {
 public:
  static constexpr bool fusable = true;
  static constexpr bool needs_norm = false;

  /// optax's update(updates, state, params): the transformed updates and the new state, in one
  /// pass; `state` is not changed. Throws grove::tree_error / grove::shape_error when the trees
  /// do not match the state (a leaf of another shape), grove::argument_error for a state a step
  /// cannot advance (a count < 0 or INT64_MAX) or a schedule's value that is not finite.
  template <class P, class State>
  update_result<P, State> update(const P& grads, const State& state, const P& params) const {
    update_result<P, State> result{grads, state};
    detail::run_fused<false>(self(), "grove::optim::update", result.updates, params, result.updates,
                             result.state);
    return result;
  }

  /// update + apply_updates in place: params and state change in one pass, with no allocation.
  /// The errors of update, thrown before anything changes.
  template <class P, class State>
  void step(P& params, const P& grads, State& state) const {
    detail::run_fused<true>(self(), "grove::optim::step", params, params, grads, state);
  }

  /// No params-shaped state (the default).
  template <class State>
  static std::tuple<> buffers(State&) {
    return {};
  }
  /// Nothing but the elements changes (the default).
  template <class State>
  void advance(State&) const {}

 private:
  const Derived& self() const { return static_cast<const Derived&>(*this); }
};

}  // namespace grove::optim
