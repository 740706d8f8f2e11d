// grove/nn/layers.hpp: grove's layers, each with a hand-written backward pass: dense,
// layer_norm, dropout, residual and sequential (the activations of grove/nn/activations.hpp are
// layers too), one family per header in grove/nn/layers/. They follow the protocol of
// grove/nn/layer.hpp, as a user's own layer does.
//
//   auto model = nn::sequential(
//       nn::dense(784, 256), nn::swish,
//       nn::residual(nn::sequential(nn::layer_norm(256), nn::dense(256, 256), nn::gelu)),
//       nn::dropout(0.1), nn::dense(256, 10));
//   auto params = nn::init<float>(model, grove::random::key(0));   // key paths [0].w, [2][0].scale
#pragma once

#include "grove/nn/layers/dense.hpp"
#include "grove/nn/layers/dropout.hpp"
#include "grove/nn/layers/layer_norm.hpp"
#include "grove/nn/layers/residual.hpp"
#include "grove/nn/layers/sequential.hpp"
