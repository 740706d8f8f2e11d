// grove/optim/alias.hpp: optax's optimizers (optax/_src/alias.py), each a chain of the
// transformations in grove/optim/transform.hpp with optax's defaults: sgd, adam, adamw, rmsprop,
// adagrad and lion. Every learning rate is a number or a Schedule; each optimizer's step is one
// fused pass without allocation.
#pragma once

#include <tuple>
#include <type_traits>
#include <utility>

#include "grove/optim/combine.hpp"
#include "grove/optim/schedule.hpp"
#include "grove/optim/transform.hpp"
#include "grove/optim/wrappers.hpp"

namespace grove::optim {

/// optax.sgd(learning_rate): updates = -learning_rate(count) * grads. State:
/// std::tuple<ScaleByScheduleState>. Throws grove::argument_error for a negative learning rate.
inline auto sgd(Schedule learning_rate) {
  return chain(detail::scale_by_learning_rate("sgd", std::move(learning_rate), true));
}

/// Whether an optimizer (and its state) is plain SGD, sgd(learning_rate) without momentum: its
/// step is params -= learning_rate(count) * grads, which code that already writes the parameters
/// in a pass may fuse into it (nn::train_step does, in the backward pass). optim answers this, not
/// its users, so that a change in how sgd is built cannot silently turn such a fusion off.
template <class Opt, class State>
inline constexpr bool is_plain_sgd_v = std::conjunction_v<
    std::is_same<std::remove_cvref_t<Opt>, decltype(sgd(std::declval<Schedule>()))>,
    std::is_same<std::remove_cvref_t<State>, std::tuple<ScaleByScheduleState>>>;

/// The step size that plain SGD's next step takes (learning_rate(count)), checked as its step
/// checks it: grove::argument_error for a count that cannot advance or a learning rate that is not
/// finite, naming the state's leaf. Call plain_sgd_advance(state) once the fused step is done.
template <class Opt, class State>
requires is_plain_sgd_v<Opt, State>
double plain_sgd_learning_rate(const Opt& opt, const State& state) {
  return -detail::naming_state_leaf("grove::optim::step", state, [&] {
    return std::get<0>(opt.transformations()).context(std::get<0>(state), 0.0);
  });
}

/// Plain SGD's state after a step that fused its update: the count advanced.
template <class State>
requires is_plain_sgd_v<decltype(sgd(std::declval<Schedule>())), State>
void plain_sgd_advance(State& state) {
  ++std::get<0>(state).count;
}

/// optax.sgd(learning_rate, momentum, nesterov): trace(momentum, nesterov) then
/// scale_by_learning_rate. State: std::tuple<TraceState<P>, ScaleByScheduleState>. Throws
/// grove::argument_error for a negative learning rate or momentum outside [0, 1).
inline auto sgd(Schedule learning_rate, double momentum, bool nesterov = false) {
  return chain(Trace(momentum, nesterov, "sgd", "momentum"),
               detail::scale_by_learning_rate("sgd", std::move(learning_rate), true));
}

/// optax.adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0): scale_by_adam then
/// scale_by_learning_rate. State: std::tuple<ScaleByAdamState<P>, ScaleByScheduleState>. Throws
/// grove::argument_error for a negative learning rate, b1 or b2 outside [0, 1), a negative eps.
inline auto adam(Schedule learning_rate, double b1 = 0.9, double b2 = 0.999, double eps = 1e-8,
                 double eps_root = 0.0) {
  return chain(ScaleByAdam(b1, b2, eps, eps_root, "adam"),
               detail::scale_by_learning_rate("adam", std::move(learning_rate), true));
}

/// optax.adamw(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0, weight_decay=1e-4):
/// scale_by_adam, add_decayed_weights(weight_decay), scale_by_learning_rate: decoupled weight
/// decay (Loshchilov & Hutter), the formula of torch.optim.AdamW. Same errors as adam, and for a
/// negative weight_decay.
inline auto adamw(Schedule learning_rate, double b1 = 0.9, double b2 = 0.999, double eps = 1e-8,
                  double eps_root = 0.0, double weight_decay = 1e-4) {
  return chain(ScaleByAdam(b1, b2, eps, eps_root, "adamw"),
               AddDecayedWeights(weight_decay, "adamw"),
               detail::scale_by_learning_rate("adamw", std::move(learning_rate), true));
}

/// optax.adamw(..., weight_decay, mask): the weight decay only on the leaves the mask selects (a
/// tree of bools that is a prefix of the parameters, or a callable returning one), e.g. on the
/// weight matrices and not on the biases.
template <class MaskOrFn>
auto adamw(Schedule learning_rate, double b1, double b2, double eps, double eps_root,
           double weight_decay, MaskOrFn&& mask) {
  return chain(ScaleByAdam(b1, b2, eps, eps_root, "adamw"),
               masked(AddDecayedWeights(weight_decay, "adamw"), std::forward<MaskOrFn>(mask)),
               detail::scale_by_learning_rate("adamw", std::move(learning_rate), true));
}

/// optax.rmsprop(learning_rate, decay=0.9, eps=1e-8, initial_scale=0): scale_by_rms then
/// scale_by_learning_rate (optax's centered and momentum options are not offered). Throws
/// grove::argument_error for a negative learning rate, decay outside [0, 1), a negative eps.
inline auto rmsprop(Schedule learning_rate, double decay = 0.9, double eps = 1e-8,
                    double initial_scale = 0.0) {
  return chain(ScaleByRms(decay, eps, initial_scale, "rmsprop"),
               detail::scale_by_learning_rate("rmsprop", std::move(learning_rate), true));
}

/// optax.adagrad(learning_rate, initial_accumulator_value=0.1, eps=1e-7): scale_by_rss then
/// scale_by_learning_rate. Throws grove::argument_error for a negative learning rate,
/// initial_accumulator_value or eps.
inline auto adagrad(Schedule learning_rate, double initial_accumulator_value = 0.1,
                    double eps = 1e-7) {
  return chain(ScaleByRss(initial_accumulator_value, eps, "adagrad"),
               detail::scale_by_learning_rate("adagrad", std::move(learning_rate), true));
}

/// optax.lion(learning_rate, b1=0.9, b2=0.99, weight_decay=1e-3): scale_by_lion,
/// add_decayed_weights, scale_by_learning_rate. Throws grove::argument_error for a negative
/// learning rate or weight_decay, b1 or b2 outside [0, 1).
inline auto lion(Schedule learning_rate, double b1 = 0.9, double b2 = 0.99,
                 double weight_decay = 1e-3) {
  return chain(ScaleByLion(b1, b2, "lion"), AddDecayedWeights(weight_decay, "lion"),
               detail::scale_by_learning_rate("lion", std::move(learning_rate), true));
}

}  // namespace grove::optim
