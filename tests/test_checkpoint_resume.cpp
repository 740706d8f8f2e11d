// grove::io checkpoints of a training run: training interrupted after some epochs, saved as a
// train_state {params, opt_state, key, epoch}, loaded into a fresh state and resumed, ends with
// exactly the bits of a run that was never interrupted. The loop is train_mlp's (a permutation per
// epoch from fold_in(data_key, epoch), mini-batches, value_and_grad_into, optimizer.step) on a
// small synthetic dataset, for each optimizer.
#include <catch2/catch.hpp>

#include "checkpoint_fixture.hpp"
#include "grove/io/checkpoint.hpp"
#include "grove/nn.hpp"

using namespace ckpt_test;
namespace io = grove::io;
namespace nn = grove::nn;
namespace gr = grove::random;

namespace {

using Params = std::vector<nn::Dense<float>>;
const std::vector<Eigen::Index> sizes = {8, 16, 4};
constexpr Eigen::Index examples = 96, batch = 20;  // the last batch of an epoch is short
constexpr int epochs = 5;

struct Data {
  Eigen::MatrixXf X;
  Eigen::VectorXi y;
};

Data synthetic() {
  const auto [kx, ky] = gr::split(gr::key(2024));
  return {gr::normal<float>(kx, sizes.front(), examples),
          gr::randint(ky, examples, 0, sizes.back())};
}

// Epochs first..last (1-based, inclusive) of train_mlp's loop.
template <class Opt, class State>
void run_epochs(const Opt& optimizer, Params& params, State& state, const gr::Key& data_key,
                int first, int last, const Data& data) {
  nn::Workspace<float> ws;
  Params grads;
  Eigen::MatrixXf xb(data.X.rows(), batch);
  Eigen::VectorXi yb(batch);
  for (int epoch = first; epoch <= last; ++epoch) {
    const auto perm =
        gr::permutation(gr::fold_in(data_key, static_cast<std::uint32_t>(epoch)), examples);
    for (Eigen::Index begin = 0; begin < examples; begin += batch) {
      const Eigen::Index size = std::min(batch, examples - begin);
      for (Eigen::Index j = 0; j < size; ++j) {
        xb.col(j) = data.X.col(perm(begin + j));
        yb(j) = data.y(perm(begin + j));
      }
      nn::value_and_grad_into(params, xb.leftCols(size), yb.head(size), grads, ws);
      optimizer.step(params, grads, state);
    }
  }
}

template <class Opt>
void check_resume(const Opt& optimizer, const std::string& name) {
  INFO("optimizer " << name);
  temp_dir dir;
  const auto file = dir / "state.safetensors";
  const Data data = synthetic();
  const auto [init_key, data_key] = gr::split(gr::key(7));

  // The run that is never interrupted.
  Params uninterrupted = nn::init_network_params<float>(sizes, init_key, 0.5f);
  auto uninterrupted_state = optimizer.init(uninterrupted);
  run_epochs(optimizer, uninterrupted, uninterrupted_state, data_key, 1, epochs, data);

  // The run that stops after 2 epochs and saves its state.
  Params params = nn::init_network_params<float>(sizes, init_key, 0.5f);
  auto state = optimizer.init(params);
  run_epochs(optimizer, params, state, data_key, 1, 2, data);
  io::save(file, nn::train_state<Params, decltype(state)>{params, state, data_key, 2},
           {{"optimizer", name}});
  CHECK_FALSE(bits_equal(params, uninterrupted));

  // A new process: a state built from other values, filled from the file, resumed.
  const Params other = nn::init_network_params<float>(sizes, gr::key(999), 0.5f);
  nn::train_state<Params, decltype(state)> resumed{other, optimizer.init(other), gr::key(0), 0};
  CHECK(io::load_into(file, resumed) == io::metadata{{"optimizer", name}});
  CHECK(resumed.epoch == 2);
  CHECK(resumed.key == data_key);
  run_epochs(optimizer, resumed.params, resumed.opt_state, resumed.key,
             static_cast<int>(resumed.epoch) + 1, epochs, data);

  CHECK(bits_equal(resumed.params, uninterrupted));
  CHECK(bits_equal(resumed.opt_state, uninterrupted_state));
}

}  // namespace

TEST_CASE("checkpoint resume: an interrupted run resumed from its checkpoint is bit-identical",
          "[io][checkpoint]") {
  Eigen::setNbThreads(1);
  const double steps_per_epoch = std::ceil(static_cast<double>(examples) / batch);
  check_resume(nn::sgd(nn::exponential_decay(0.1, steps_per_epoch, 0.9)), "sgd");
  check_resume(nn::momentum(0.05, 0.9), "momentum");
  check_resume(nn::adam(1e-2), "adam");
  // train_mlp's recipe: clipping, then adamw with the decay masked to the weight matrices.
  auto matrices = [](const Params& p) {
    return grove::tree_map([](const auto& leaf) { return leaf.cols() > 1; }, p);
  };
  check_resume(grove::optim::chain(
                   grove::optim::clip_by_global_norm(1.0),
                   grove::optim::adamw(grove::optim::warmup_cosine_decay_schedule(0.0, 1e-2, 3, 25),
                                       0.9, 0.999, 1e-8, 0.0, 0.01, matrices)),
               "clipped adamw");
}

TEST_CASE(
    "checkpoint resume: a checkpoint of another optimizer's state is refused, naming what "
    "differs") {
  temp_dir dir;
  const auto file = dir / "state.safetensors";
  const Params params = nn::init_network_params<float>(sizes, gr::key(1), 0.5f);
  const auto sgd = nn::sgd(0.1);
  io::save(file, nn::train_state<Params, decltype(sgd.init(params))>{params, sgd.init(params),
                                                                     gr::key(1), 3});
  const auto adam = nn::adam(1e-3);
  nn::train_state<Params, decltype(adam.init(params))> target{params, adam.init(params), gr::key(0),
                                                              0};
  try {
    io::load_into(file, target);
    FAIL("accepted");
  } catch (const io::format_error& e) {
    CHECK_THAT(e.problem(),
               Catch::Contains(
                   "tensor \"opt_state/0/mu/0/w\" (key path .opt_state[0].mu[0].w) is missing"));
  }
  CHECK(target.epoch == 0);
}
