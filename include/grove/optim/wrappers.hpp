// grove/optim/wrappers.hpp: optax's wrappers (optax.transforms): masked (a transformation on some
// leaves only), MultiSteps / multi_steps (gradient accumulation) and apply_if_finite (skip
// updates with a NaN or an infinity).
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "grove/optim/detail/check.hpp"
#include "grove/optim/detail/pass.hpp"
#include "grove/optim/detail/state.hpp"
#include "grove/optim/transform.hpp"
#include "grove/optim/transformation.hpp"
#include "grove/optim/tree_utils.hpp"
#include "grove/optim/update.hpp"
#include "grove/tree.hpp"

namespace grove::optim {

// --- masked --------------------------------------------------------------------------------------

/// The state of masked. optax's MaskedState holds the inner state alone, computed on the
/// masked-in leaves (MaskedNode elsewhere). grove's inner state covers every leaf (the masked-out
/// ones are never touched) and `mask` is the mask broadcast to the parameters' structure, one bool
/// per leaf: the fused pass walks it with the parameters, and a checkpoint saves it.
template <class InnerState, class Mask>
struct MaskedState {
  InnerState inner_state;
  Mask mask;
};
GROVE_NODE(MaskedState, inner_state, mask);

/// optax.masked(inner, mask): inner on the leaves where the mask is true; elsewhere the updates
/// pass through unchanged and the inner state stays as init made it. The mask is a tree of bools
/// that is a prefix of the parameters (a bool covers the whole subtree below it), or a callable
/// that returns such a tree given the parameters (called by init). The inner transformation must
/// be elementwise (grove/optim/transform.hpp, clip, or a chain of those) and not need the global
/// norm.
template <class Inner, class MaskOrFn>
class Masked : public FusedTransformation<Masked<Inner, MaskOrFn>> {
  static_assert(detail::fusable<Inner> && !detail::needs_norm<Inner>(),
                "grove: masked wraps an elementwise transformation (scale_by_adam, "
                "add_decayed_weights, trace, ... or a chain of them) that does not need the "
                "global norm; wrap multi_steps / apply_if_finite / clip_by_global_norm around "
                "masked instead");

 public:
  Masked(Inner inner, MaskOrFn mask) : inner_(std::move(inner)), mask_(std::move(mask)) {}

  /// The inner state over all of params and the mask broadcast to params' structure. Throws
  /// grove::tree_error when the mask is not a prefix of params.
  template <class P>
  auto init(const P& params) const {
    auto full = tree_broadcast(mask_tree(params), params);
    using Full = decltype(full);
    return MaskedState<decltype(inner_.init(params)), Full>{inner_.init(params), std::move(full)};
  }
  template <class IS, class M>
  static auto buffers(MaskedState<IS, M>& s) {
    return std::tuple_cat(std::tie(s.mask), Inner::buffers(s.inner_state));
  }
  template <class IS, class M>
  auto context(const MaskedState<IS, M>& s, double norm) const {
    return inner_.context(s.inner_state, norm);
  }
  template <class Ctx, class U, class Pc, class Scratch, class Flag, class... B>
  auto apply(const Ctx& c, const U& u, const Pc& p, Index at, Scratch& scratch, const Flag& on,
             B&... b) const {
    static_assert(std::is_arithmetic_v<Flag>, "grove: a mask's leaves must be bools");
    using S = typename std::remove_cvref_t<U>::Scalar;
    if (static_cast<bool>(on))
      scratch = inner_.apply(c, u, p, at, scratch, b...);
    else
      scratch = u;
    return detail::chunk_map<S>(scratch.data(), scratch.size());
  }
  template <class IS, class M>
  void advance(MaskedState<IS, M>& s) const {
    inner_.advance(s.inner_state);
  }

 private:
  template <class P>
  decltype(auto) mask_tree(const P& params) const {
    if constexpr (std::is_invocable_v<const MaskOrFn&, const P&>)
      return mask_(params);
    else
      return (mask_);
  }

  Inner inner_;
  MaskOrFn mask_;
};

/// optax.masked(inner, mask).
template <class Inner, class MaskOrFn>
Masked<std::remove_cvref_t<Inner>, std::remove_cvref_t<MaskOrFn>> masked(Inner&& inner,
                                                                         MaskOrFn&& mask) {
  return {std::forward<Inner>(inner), std::forward<MaskOrFn>(mask)};
}

/// optax.add_decayed_weights(weight_decay, mask): weight decay on the leaves the mask selects,
/// e.g. only on the weight matrices. Throws grove::argument_error for a negative weight_decay.
template <class MaskOrFn>
auto add_decayed_weights(double weight_decay, MaskOrFn&& mask) {
  return masked(AddDecayedWeights(weight_decay), std::forward<MaskOrFn>(mask));
}

// --- multi_steps ---------------------------------------------------------------------------------

/// optax.MultiStepsState: the mini step within the current accumulation (0 .. k - 1), the number
/// of inner updates made, the inner state, and the mean of the gradients accumulated so far.
template <class InnerState, class P>
struct MultiStepsState {
  std::int64_t mini_step = 0;
  std::int64_t gradient_step = 0;
  InnerState inner_opt_state;
  P acc_grads;
};
GROVE_NODE(MultiStepsState, mini_step, gradient_step, inner_opt_state, acc_grads);

/// optax.MultiSteps(opt, every_k_schedule=k) (with use_grad_mean): gradient accumulation. Each
/// update adds the gradients to a running mean (acc += (g - acc) / (mini_step + 1)); the k-th
/// gives the mean to the inner transformation and returns its updates, the others return zeros
/// and leave the inner state alone. step is allocation-free when the inner step is.
template <class Inner>
class MultiSteps {
 public:
  static constexpr bool fusable = false;
  static constexpr bool needs_norm = false;

  /// Throws grove::argument_error for k < 1.
  MultiSteps(Inner inner, std::int64_t every_k_schedule)
      : inner_(std::move(inner)), k_(every_k_schedule) {
    if (k_ < 1)
      detail::fail("multi_steps",
                   "every_k_schedule must be >= 1, got " + std::to_string(every_k_schedule));
  }

  template <class P>
  auto init(const P& params) const {
    return MultiStepsState<decltype(inner_.init(params)), P>{
        0, 0, inner_.init(params), ::grove::optim::tree_zeros_like(params)};
  }

  /// The updates (zeros but at every k-th mini step) and the new state. Throws
  /// grove::tree_error / grove::shape_error for trees that do not match the state,
  /// grove::argument_error for a state a step cannot advance (mini_step outside [0, k), a count
  /// < 0 or INT64_MAX, here or in the inner state) and the inner transformation's errors.
  template <class P, class State>
  update_result<P, State> update(const P& grads, const State& state, const P& params) const {
    State next = state;
    check("grove::optim::update", params, grads, next);
    accumulate(next, grads);
    if (next.mini_step == k_ - 1) {
      auto r = inner_.update(next.acc_grads, next.inner_opt_state, params);
      next.inner_opt_state = std::move(r.state);
      finish(next);
      return {std::move(r.updates), std::move(next)};
    }
    ++next.mini_step;
    return {::grove::optim::tree_zeros_like(grads), std::move(next)};
  }

  /// update + apply_updates in place. The errors of update, thrown before anything changes
  /// (those the inner transformation raises of its own state included; not those of a user's
  /// transformation, which grove cannot check ahead).
  template <class P, class State>
  void step(P& params, const P& grads, State& state) const {
    check("grove::optim::step", params, grads, state);
    accumulate(state, grads);
    if (state.mini_step == k_ - 1) {
      detail::step_of(inner_, params, state.acc_grads, state.inner_opt_state);
      finish(state);
    } else {
      ++state.mini_step;
    }
  }

  /// The last mini step of an accumulation whose mean is already known: data parallelism's
  /// synchronised step (PyTorch DDP's no_sync), where each device accumulates its own part of the
  /// gradients for k - 1 mini steps and the devices sum their parts once. `mean` is the mean of
  /// the accumulation's k gradients (what the k-th step would have accumulated); it is given to
  /// the inner transformation and the next accumulation starts. The state must be at its last
  /// mini step (mini_step == k - 1); its accumulated gradients are not read. Throws as step does,
  /// and grove::argument_error for a state at another mini step.
  template <class P, class State>
  void step_accumulated(P& params, const P& mean, State& state) const {
    check("grove::optim::MultiSteps::step_accumulated", params, mean, state);
    if (state.mini_step != k_ - 1)
      detail::fail("MultiSteps::step_accumulated",
                   "the state is at mini step " + std::to_string(state.mini_step) +
                       ", not at the accumulation's last, " + std::to_string(k_ - 1));
    detail::step_of(inner_, params, mean, state.inner_opt_state);
    finish(state);
  }

  /// What a step checks of the state before it changes anything (see detail::check_state).
  template <class State>
  void check_state(const State& s) const {
    if (s.mini_step < 0 || s.mini_step >= k_)
      throw detail::state_leaf_error{&s.mini_step, "the optimizer state's leaf ",
                                     " is " + std::to_string(s.mini_step) + ", outside [0, " +
                                         std::to_string(k_) + ") (every_k_schedule is " +
                                         std::to_string(k_) + ")"};
    detail::check_count(s.gradient_step);
    if (s.mini_step == k_ - 1) detail::check_state(inner_, s.inner_opt_state);
  }

  /// optax's MultiSteps.has_updated: whether the last update applied the inner transformation.
  template <class State>
  static bool has_updated(const State& state) {
    return state.mini_step == 0 && state.gradient_step > 0;
  }
  /// The number of mini steps per update.
  std::int64_t every_k() const { return k_; }

 private:
  // The trees' shapes (the parameters, the gradients, the accumulated ones and the inner state's
  // when the inner transformation is fused), then the state.
  template <class P, class State>
  void check(const char* who, const P& params, const P& grads, State& s) const {
    if constexpr (detail::fusable<Inner>)
      std::apply(
          [&](auto&... b) {
            detail::check_shapes(who, "the gradients", params, grads, s.acc_grads, b...);
          },
          Inner::buffers(s.inner_opt_state));
    else
      detail::check_shapes(who, "the gradients", params, grads, s.acc_grads);
    detail::naming_state_leaf(who, s, [&] { check_state(s); });
  }
  template <class State, class P>
  void accumulate(State& s, const P& grads) const {
    const double n = static_cast<double>(s.mini_step + 1);
    detail::for_each_leaf(
        [n](detail::Index begin, detail::Index size, auto& acc, const auto& g) {
          using L = std::remove_cvref_t<decltype(acc)>;
          using S = ::grove::scalar_t<L>;
          if constexpr (std::is_arithmetic_v<L>) {
            // A scalar leaf as a scalar: GCC's bounds warnings misread a 1-element Map's
            // vectorized path.
            acc += (g - acc) / S(n);
          } else {
            auto a = detail::flat(acc).segment(begin, size);
            a += (detail::flat(g).segment(begin, size) - a) / S(n);
          }
        },
        s.acc_grads, grads);
  }
  template <class State>
  void finish(State& s) const {
    detail::for_each_leaf(
        [](detail::Index begin, detail::Index size, auto& acc) {
          using L = std::remove_cvref_t<decltype(acc)>;
          if constexpr (std::is_arithmetic_v<L>)
            acc = L(0);
          else
            detail::flat(acc).segment(begin, size).setZero();
        },
        s.acc_grads);
    s.mini_step = 0;
    ++s.gradient_step;
  }

  Inner inner_;
  std::int64_t k_;
};

/// optax.MultiSteps(inner, every_k_schedule=k).gradient_transformation(): updates every k-th
/// step with the mean of the last k gradients. Throws grove::argument_error for k < 1.
template <class Inner>
MultiSteps<std::remove_cvref_t<Inner>> multi_steps(Inner&& inner, std::int64_t k) {
  return {std::forward<Inner>(inner), k};
}

// --- apply_if_finite -----------------------------------------------------------------------------

/// optax.ApplyIfFiniteState: consecutive non-finite updates, whether the last was finite, the
/// total number of non-finite updates, the inner state.
template <class InnerState>
struct ApplyIfFiniteState {
  std::int64_t notfinite_count = 0;
  bool last_finite = true;
  std::int64_t total_notfinite = 0;
  InnerState inner_state;
};
GROVE_NODE(ApplyIfFiniteState, notfinite_count, last_finite, total_notfinite, inner_state);

/// optax.apply_if_finite(inner, max_consecutive_errors): when the incoming updates hold a NaN or
/// an infinity, zero updates and the inner state unchanged, unless this is more than
/// max_consecutive_errors such updates in a row (then inner runs anyway). step is one read of the
/// gradients, then the inner step.
template <class Inner>
class ApplyIfFinite {
 public:
  static constexpr bool fusable = false;
  static constexpr bool needs_norm = false;

  /// Throws grove::argument_error for a negative max_consecutive_errors.
  ApplyIfFinite(Inner inner, std::int64_t max_consecutive_errors)
      : inner_(std::move(inner)), max_(max_consecutive_errors) {
    if (max_ < 0)
      detail::fail("apply_if_finite", "max_consecutive_errors must be >= 0, got " +
                                          std::to_string(max_consecutive_errors));
  }

  template <class P>
  auto init(const P& params) const {
    return ApplyIfFiniteState<decltype(inner_.init(params))>{0, true, 0, inner_.init(params)};
  }

  /// The inner updates (zeros for non-finite gradients) and the new state. Throws
  /// grove::tree_error / grove::shape_error for trees that do not match the state,
  /// grove::argument_error for a count < 0 or INT64_MAX (here or in the inner state) and the
  /// inner transformation's errors.
  template <class P, class State>
  update_result<P, State> update(const P& grads, const State& state, const P& params) const {
    State next = state;
    if (count("grove::optim::update", params, grads, next)) {
      auto r = inner_.update(grads, next.inner_state, params);
      next.inner_state = std::move(r.state);
      return {std::move(r.updates), std::move(next)};
    }
    return {::grove::optim::tree_zeros_like(grads), std::move(next)};
  }

  /// update + apply_updates in place. The errors of update, thrown before anything changes (but
  /// those of a user's inner transformation, which grove cannot check ahead).
  template <class P, class State>
  void step(P& params, const P& grads, State& state) const {
    if (count("grove::optim::step", params, grads, state))
      detail::step_of(inner_, params, grads, state.inner_state);
  }

  /// What a step checks of the state before it changes anything (see detail::check_state): the
  /// counts, and the inner state's when the inner transformation will run.
  template <class State>
  void check_state(const State& s) const {
    detail::check_count(s.notfinite_count);
    detail::check_count(s.total_notfinite);
    detail::check_state(inner_, s.inner_state);
  }

 private:
  // Checks the trees and the state, then counts the gradients' finiteness into the state;
  // whether inner runs.
  template <class P, class State>
  bool count(const char* who, const P& params, const P& grads, State& s) const {
    if constexpr (detail::fusable<Inner>)
      std::apply(
          [&](auto&... b) { detail::check_shapes(who, "the gradients", params, grads, b...); },
          Inner::buffers(s.inner_state));
    else
      detail::check_shapes(who, "the gradients", params, grads);
    detail::naming_state_leaf(who, s, [&] {
      detail::check_count(s.notfinite_count);
      detail::check_count(s.total_notfinite);
    });
    const bool finite = ::grove::optim::tree_all_finite(grads);
    const bool runs = finite || s.notfinite_count + 1 > max_;
    if (runs)
      detail::naming_state_leaf(who, s, [&] { detail::check_state(inner_, s.inner_state); });
    s.notfinite_count = finite ? 0 : s.notfinite_count + 1;
    s.last_finite = finite;
    if (!finite) ++s.total_notfinite;
    return runs;
  }

  Inner inner_;
  std::int64_t max_;
};

/// optax.apply_if_finite(inner, max_consecutive_errors).
template <class Inner>
ApplyIfFinite<std::remove_cvref_t<Inner>> apply_if_finite(Inner&& inner,
                                                          std::int64_t max_consecutive_errors) {
  return {std::forward<Inner>(inner), max_consecutive_errors};
}

}  // namespace grove::optim
