// grove/nn.hpp: the MLP layer. Dense layers as pytrees initialised from random keys, activations,
// predict / batched_predict (and grove::vmap), log-softmax cross-entropy, gradients by hand-written
// backprop, optax-style optimizers and accuracy. Everything works for float and double; batches
// are matrices whose columns are examples.
//
// Threads: the batched passes and the optimizers' in-place steps use Eigen::nbThreads() threads
// (OMP_NUM_THREADS, or Eigen::setNbThreads) when compiled with OpenMP, one thread otherwise.
#pragma once

#include "grove/nn/activations.hpp"
#include "grove/nn/backprop.hpp"
#include "grove/nn/dense.hpp"
#include "grove/nn/loss.hpp"
#include "grove/nn/metrics.hpp"
#include "grove/nn/optim.hpp"
#include "grove/nn/predict.hpp"
#include "grove/nn/workspace.hpp"
#include "grove/random.hpp"
#include "grove/tree.hpp"
#include "grove/tree/eigen.hpp"
#include "grove/vmap.hpp"
