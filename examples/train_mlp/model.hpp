// examples/train_mlp/model.hpp: the model the flags describe (grove::nn::sequential), its
// parameters and its description. Part of train_mlp (main.cpp includes it; one translation unit).
#pragma once

#include "options.hpp"

namespace {

// --- the model -----------------------------------------------------------------------------------
//
// One type for every choice of flags: each hidden layer is a block [layer_norm] dense activation
// [dropout], the blocks are a run-time sequence of plain blocks followed by one of residual blocks
// (x + block(x), --residual), and a dense layer gives the logits. The optional layer norm is a
// sequence of zero or one; a dropout of rate 0 is the identity. Without --layer-norm, --residual
// and --dropout the model is a chain of dense layers and activations, which grove runs on its
// fused engine (the same passes as the walk-through's MLP).

using Block =
    nn::Sequential<nn::Stack<nn::LayerNorm>, nn::DenseLayer, nn::AnyActivation, nn::Dropout>;
using Net = nn::Sequential<nn::Stack<Block>, nn::Stack<nn::Residual<Block>>, nn::DenseLayer>;
// Under --precision: the same network and parameters, its products in float32 or from inputs
// rounded to bfloat16.
using Model = nn::WithPolicy<Net>;
using Params = nn::params_t<Model, float>;

nn::precision_policy policy_of(const Options& o) {
  return o.precision == "bf16" ? nn::precision_policy::mixed_bf16() : nn::precision_policy::full();
}

Block hidden_block(const Options& o, Eigen::Index in, Eigen::Index out, bool first) {
  std::vector<nn::LayerNorm> norm;
  if (o.layer_norm && !first) norm.push_back(nn::layer_norm(in));
  return nn::sequential(nn::sequential(norm), nn::dense(in, out),
                        nn::activation_named(o.activation.c_str()), nn::dropout(o.dropout));
}

Model build_model(const Options& o) {
  std::vector<Block> plain;
  std::vector<nn::Residual<Block>> residual;
  for (std::size_t l = 0; l + 2 < o.layers.size(); ++l) {
    const Eigen::Index in = o.layers[l], out = o.layers[l + 1];
    if (o.residual && l > 0)
      residual.push_back(nn::residual(hidden_block(o, in, out, false)));
    else
      plain.push_back(hidden_block(o, in, out, l == 0));
  }
  return nn::with_policy(nn::sequential(nn::sequential(plain), nn::sequential(residual),
                                        nn::dense(o.layers[o.layers.size() - 2], o.layers.back())),
                         policy_of(o));
}

// The parameters: nn::init's, with every dense layer's weights from the walk-through's
// init_network_params (split(key, layers)[i] for dense layer i, lecun_normal), so that the
// default model starts from the numbers train_mlp always started from.
Params initial_params(const Model& model, const Options& o, const grove::random::Key& key) {
  Params params = nn::init<float>(model, key);
  auto dense = nn::init_network_params(o.layers, key, nn::lecun_normal<float>);
  std::size_t next = 0;
  for (auto& block : std::get<0>(params)) std::get<1>(block) = std::move(dense[next++]);
  for (auto& block : std::get<1>(params)) std::get<1>(block) = std::move(dense[next++]);
  std::get<2>(params) = std::move(dense[next]);
  return params;
}

std::string model_text(const Options& o) {
  std::string s = layers_text(o.layers) + " (" + o.activation;
  if (o.layer_norm) s += ", layer norm";
  if (o.residual) s += ", residual";
  if (o.precision == "bf16") s += ", bf16 products";
  if (o.dropout > 0) {
    char rate[32];
    std::snprintf(rate, sizeof rate, "%g", o.dropout);
    s += ", dropout " + std::string(rate);
  }
  return s + ")";
}

}  // namespace
