// The grove side of checkpoint_torch_layernorm_model (tests/checkpoint_torch_layernorm.py), a
// PyTorch nn.Sequential of Linear and LayerNorm layers loaded with io::torch_sequential_names:
//
//   checkpoint_torch_layernorm MODEL INPUT OUT_DIR
//
// loads MODEL, the state_dict of nn.Sequential(nn.Linear(6, 16), nn.LayerNorm(16), nn.ReLU(),
// nn.Linear(16, 8), nn.LayerNorm(8), nn.Linear(8, 4)), strictly into the params of the same
// grove::nn::sequential with torch_sequential_names(params); saves them to
// OUT_DIR/params.safetensors (grove's names: "1/scale"), and nn::apply's output for the batch
// INPUT's tensor "x" (rows are examples, as in torch) to OUT_DIR/y.safetensors as "y", rows again
// examples.
#include <Eigen/Core>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <string>

#include "grove/io/checkpoint.hpp"
#include "grove/nn.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: checkpoint_torch_layernorm MODEL INPUT OUT_DIR\n");
    return 2;
  }
  namespace nn = grove::nn;
  try {
    // PyTorch's LayerNorm defaults to eps = 1e-5 (grove's and flax's to 1e-6).
    const auto model = nn::sequential(nn::dense(6, 16), nn::layer_norm(16, 1e-5), nn::relu,
                                      nn::dense(16, 8), nn::layer_norm(8, 1e-5), nn::dense(8, 4));
    auto params = nn::init<float>(model, grove::random::key(0));
    grove::io::load_into(argv[1], params, {.rename = grove::io::torch_sequential_names(params)});

    std::map<std::string, Eigen::MatrixXf> input{{"x", Eigen::MatrixXf(32, 6)}};
    grove::io::load_into(argv[2], input);
    const Eigen::MatrixXf y = nn::apply(model, params, input.at("x").transpose());

    const std::filesystem::path out = argv[3];
    grove::io::save(out / "params.safetensors", params);
    grove::io::save(out / "y.safetensors",
                    std::map<std::string, Eigen::MatrixXf>{{"y", y.transpose()}});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint_torch_layernorm: %s\n", e.what());
    return 1;
  }
  return 0;
}
