// grove/optim/combine.hpp: optax.chain, transformations applied one after the other.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "grove/optim/transformation.hpp"
#include "grove/optim/update.hpp"

namespace grove::optim {

namespace detail {
template <class... Ts>
constexpr bool chain_fusable() {
  if constexpr (sizeof...(Ts) == 0) {
    return false;
  } else {
    constexpr bool all = (fusable<Ts> && ...);
    if constexpr (!all) {
      return false;
    } else {
      // Only the first may need the norm of its incoming updates: those are the gradients.
      constexpr bool norms[] = {needs_norm<Ts>()...};
      for (std::size_t i = 1; i < sizeof...(Ts); ++i)
        if (norms[i]) return false;
      return true;
    }
  }
}

template <class State, class Contexts>
struct chain_context {
  using state_type = State;
  Contexts contexts;
};
}  // namespace detail

/// optax.chain: the transformations applied in order, each to the updates the previous one
/// returned. The state is a std::tuple of the states (optax's tuple). When every transformation
/// is elementwise (and only the first needs the global norm, as clip_by_global_norm does), the
/// chain is fused: step makes one pass over the parameters (plus one read of the gradients for
/// the norm) and allocates nothing. Otherwise update runs them one by one and step is update +
/// apply_updates_inplace (or the single transformation's own step). A user's transformation
/// needs only init and update(grads, state, params) returning an update_result.
template <class... Ts>
class Chain {
  static_assert(sizeof...(Ts) > 0, "grove: chain needs at least one transformation");

 public:
  static constexpr bool fusable = detail::chain_fusable<Ts...>();
  static constexpr bool needs_norm =
      detail::needs_norm<std::tuple_element_t<0, std::tuple<Ts...>>>();

  explicit Chain(Ts... ts) : ts_(std::move(ts)...) {}

  /// A tuple of the transformations' initial states.
  template <class P>
  auto init(const P& params) const {
    return std::apply([&](const auto&... t) { return std::make_tuple(t.init(params)...); }, ts_);
  }

  /// The updates of the whole chain and the new states.
  template <class P, class State>
  update_result<P, State> update(const P& grads, const State& state, const P& params) const {
    if constexpr (fusable) {
      update_result<P, State> result{grads, state};
      detail::run_fused<false>(*this, "grove::optim::update", result.updates, params,
                               result.updates, result.state);
      return result;
    } else {
      return unfused_update("grove::optim::update", grads, state, params);
    }
  }

  /// update + apply_updates in place (fused when the chain is, see above).
  template <class P, class State>
  void step(P& params, const P& grads, State& state) const {
    if constexpr (fusable) {
      detail::run_fused<true>(*this, "grove::optim::step", params, params, grads, state);
    } else if constexpr (sizeof...(Ts) == 1) {
      check_unfused("grove::optim::step", params, grads, state);
      detail::step_of(std::get<0>(ts_), params, grads, std::get<0>(state));
    } else {
      auto r = unfused_update("grove::optim::step", grads, state, params);
      ::grove::optim::apply_updates_inplace(params, r.updates);
      state = std::move(r.state);
    }
  }

  /// The transformations.
  const std::tuple<Ts...>& transformations() const { return ts_; }

  /// What a step checks of the state before it changes anything (see detail::check_state):
  /// every transformation's part. Throws detail::state_leaf_error.
  template <class State>
  void check_state(const State& state) const {
    each([&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      detail::check_state(std::get<I>(ts_), std::get<I>(state));
    });
  }

  // --- the fused hooks (see grove/optim/transformation.hpp) ---
  template <class State>
  auto context(const State& state, double norm) const {
    auto contexts = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::make_tuple(std::get<I>(ts_).context(std::get<I>(state), I == 0 ? norm : 0.0)...);
    }
    (std::index_sequence_for<Ts...>{});
    return detail::chain_context<State, decltype(contexts)>{std::move(contexts)};
  }
  template <class State>
  static auto buffers(State& state) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple_cat(
          std::remove_cvref_t<std::tuple_element_t<I, std::tuple<Ts...>>>::buffers(
              std::get<I>(state))...);
    }
    (std::index_sequence_for<Ts...>{});
  }
  template <class Ctx, class U, class Pc, class Scratch, class... B>
  auto apply(const Ctx& c, const U& u, const Pc& p, Index at, Scratch& scratch, B&... b) const {
    auto all = std::forward_as_tuple(b...);
    return apply_from<0>(c, u, p, at, scratch, all);
  }
  template <class State>
  void advance(State& state) const {
    each([&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      std::get<I>(ts_).advance(std::get<I>(state));
    });
  }

 private:
  // What the transformations of a chain that is not fused would refuse, checked before the first
  // runs, so that the errors name the function the user called and the leaf in the whole state:
  // the gradients' shapes, those of the fused transformations' states, then every state.
  template <class P, class State>
  void check_unfused(const char* who, const P& params, const P& grads, State& state) const {
    detail::check_shapes(who, "the gradients", params, grads);
    each([&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      using T = std::tuple_element_t<I, std::tuple<Ts...>>;
      if constexpr (detail::fusable<T>)
        std::apply(
            [&](auto&... b) { detail::check_shapes(who, "the optimizer state", params, b...); },
            T::buffers(std::get<I>(state)));
    });
    detail::naming_state_leaf(who, state, [&] { check_state(state); });
  }
  template <class P, class State>
  update_result<P, State> unfused_update(const char* who, const P& grads, const State& state,
                                         const P& params) const {
    update_result<P, State> result{grads, state};
    check_unfused(who, params, grads, result.state);
    each([&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      auto r = std::get<I>(ts_).update(result.updates, std::get<I>(result.state), params);
      result.updates = std::move(r.updates);
      std::get<I>(result.state) = std::move(r.state);
    });
    return result;
  }

  template <class F>
  static void each(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(std::integral_constant<std::size_t, I>{}), ...);
    }
    (std::index_sequence_for<Ts...>{});
  }
  // Element I applied to u, then the rest of the chain to its result (an expression: the chain's
  // elementwise work composes into one expression).
  template <std::size_t I, class Ctx, class U, class Pc, class Scratch, class All>
  auto apply_from(const Ctx& c, const U& u, const Pc& p, Index at, Scratch& scratch,
                  All& all) const {
    if constexpr (I == sizeof...(Ts)) {
      return u;
    } else {
      using State = typename Ctx::state_type;
      using T = std::tuple_element_t<I, std::tuple<Ts...>>;
      constexpr std::size_t first = offset<State, I>();
      constexpr std::size_t count = detail::buffer_count<T, std::tuple_element_t<I, State>>;
      auto next = [&]<std::size_t... J>(std::index_sequence<J...>) {
        return std::get<I>(ts_).apply(std::get<I>(c.contexts), u, p, at, scratch,
                                      std::get<first + J>(all)...);
      }
      (std::make_index_sequence<count>{});
      return apply_from<I + 1>(c, next, p, at, scratch, all);
    }
  }
  template <class State, std::size_t I>
  static constexpr std::size_t offset() {
    return [&]<std::size_t... J>(std::index_sequence<J...>) {
      return (std::size_t{0} + ... +
              detail::buffer_count<std::tuple_element_t<J, std::tuple<Ts...>>,
                                   std::tuple_element_t<J, State>>);
    }
    (std::make_index_sequence<I>{});
  }

  std::tuple<Ts...> ts_;
};

/// optax.chain(t1, t2, ...).
template <class... Ts>
Chain<std::remove_cvref_t<Ts>...> chain(Ts&&... ts) {
  return Chain<std::remove_cvref_t<Ts>...>(std::forward<Ts>(ts)...);
}

}  // namespace grove::optim
