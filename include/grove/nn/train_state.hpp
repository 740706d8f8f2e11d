// grove/nn/train_state.hpp: the state of a training run (parameters, optimizer state, the random
// key, the epochs done) as one pytree, to checkpoint and resume.
#pragma once

#include <cstdint>

#include "grove/random/key.hpp"
#include "grove/tree.hpp"

namespace grove::nn {

/// The state of a training run, saved to resume it: parameters, optimizer state, the random key
/// the next epoch starts from, and the number of epochs done. A pytree node with key paths
/// `params/...`, `opt_state/...`, `key`, `epoch`, so that grove::io::save / load_into checkpoint
/// it like any tree:
///
///   io::save(path, nn::train_state<Params, State>{params, state, key, epoch});
template <class Params, class OptState>
struct train_state {
  Params params;
  OptState opt_state;
  random::Key key;
  std::int64_t epoch = 0;
};
GROVE_NODE(train_state, params, opt_state, key, epoch);

}  // namespace grove::nn

namespace grove::io {
/// The former home of nn::train_state: it is a training concept, not a file format.
template <class Params, class OptState>
using train_state [[deprecated("grove: use grove::nn::train_state")]] =
    nn::train_state<Params, OptState>;
}  // namespace grove::io
