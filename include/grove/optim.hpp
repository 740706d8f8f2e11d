// grove/optim.hpp: optax's composable gradient transformations for any pytree whose leaves are
// Eigen matrices / arrays or float / double scalars: schedules, the transformations, chain, the
// wrappers (masked, multi_steps, apply_if_finite), the optimizers (sgd, adam, adamw, rmsprop,
// adagrad, lion), apply_updates and global_norm. Needs the tree core and Eigen only.
//
//   auto tx = grove::optim::chain(grove::optim::clip_by_global_norm(1.0),
//                                 grove::optim::adamw(schedule, 0.9, 0.999, 1e-8, 0, 1e-4));
//   auto state = tx.init(params);                                  // a pytree
//   auto [updates, new_state] = tx.update(grads, state, params);   // pure
//   params = grove::optim::apply_updates(params, updates);
//   tx.step(params, grads, state);                                 // in place, fused
#pragma once

#include "grove/optim/alias.hpp"
#include "grove/optim/clipping.hpp"
#include "grove/optim/combine.hpp"
#include "grove/optim/schedule.hpp"
#include "grove/optim/transform.hpp"
#include "grove/optim/transformation.hpp"
#include "grove/optim/tree_utils.hpp"
#include "grove/optim/update.hpp"
#include "grove/optim/wrappers.hpp"
