// grove/nn/optim.hpp: the optimizers under the names grove::nn has always used them, as
// grove::optim's transformations (grove/optim.hpp: one implementation for nn and for any pytree).
//
//   auto opt = grove::nn::adam(1e-3);                              // grove::optim::adam
//   auto state = opt.init(params);                                 // a pytree
//   auto [updates, new_state] = opt.update(grads, state, params);  // pure
//   params = grove::nn::apply_updates(params, updates);
//   opt.step(params, grads, state);                                // or in place, fused
//
// nn::train_step recognises plain sgd (a chain of one scale_by_learning_rate) and folds its update
// into the backward products of the fused engine.
#pragma once

#include <utility>

#include "grove/optim.hpp"

namespace grove::nn {

using optim::adam;
using optim::apply_updates;
using optim::apply_updates_inplace;
using optim::constant_schedule;
using optim::exponential_decay;
using optim::Schedule;
using optim::sgd;

/// SGD with momentum: grove::optim::sgd(learning_rate, beta, nesterov), optax.sgd(learning_rate,
/// momentum=beta, nesterov=nesterov). Throws grove::argument_error for a negative learning rate or
/// beta outside [0, 1).
inline auto momentum(Schedule learning_rate, double beta = 0.9, bool nesterov = false) {
  return optim::sgd(std::move(learning_rate), beta, nesterov);
}

}  // namespace grove::nn
