// grove/nn.hpp: neural networks. Models composed of layers (nn::sequential of dense, the
// activations, layer_norm, dropout, residual, and users' own layers), their parameters as pytrees
// initialised from random keys, apply / value_and_grad with hand-written VJPs and the fused fast
// passes, losses (softmax cross-entropy, sigmoid binary cross-entropy, mse, huber), check_grads,
// optax-style optimizers; and the JAX walk-through's MLP functions (init_network_params, predict,
// batched_predict and grove::vmap, value_and_grad of a std::vector<Dense>). Everything works for
// float and double; batches are matrices whose columns are examples.
//
// Threads: the batched passes and the optimizers' in-place steps use Eigen::nbThreads() threads
// (OMP_NUM_THREADS, or Eigen::setNbThreads) when compiled with OpenMP, one thread otherwise.
#pragma once

#include "grove/nn/activations.hpp"
#include "grove/nn/backprop.hpp"
#include "grove/nn/check_grads.hpp"
#include "grove/nn/dense.hpp"
#include "grove/nn/layer.hpp"
#include "grove/nn/layers.hpp"
#include "grove/nn/loss.hpp"
#include "grove/nn/losses.hpp"
#include "grove/nn/metrics.hpp"
#include "grove/nn/model.hpp"
#include "grove/nn/optim.hpp"
#include "grove/nn/precision.hpp"
#include "grove/nn/precision_policy.hpp"
#include "grove/nn/predict.hpp"
#include "grove/nn/train_state.hpp"
#include "grove/nn/value_and_grad_result.hpp"
#include "grove/nn/workspace.hpp"
#include "grove/random.hpp"
#include "grove/tree.hpp"
#include "grove/tree/eigen.hpp"
#include "grove/vmap.hpp"
