// A data-parallel run over MPI resumed from one rank's checkpoint, in the MPI test executable (2
// and 3 ranks): rank 0 saves the whole nn::train_state (parameters, a masked adamw state with its
// bool leaves, the key, the epoch) midway; every rank then starts from other values, rank 0 reads
// the checkpoint, one broadcast gives every rank its state, and the run goes on. It must end with
// the bits of the run that was never interrupted, on every rank.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <grove/io/checkpoint.hpp>
#include <grove/nn.hpp>
#include <grove/optim.hpp>
#include <grove/parallel.hpp>
#include <grove/parallel/mpi.hpp>
#include <grove/parallel/train.hpp>
#include <string>
#include <system_error>
#include <vector>

#include "parallel_fixtures.hpp"

namespace nn = grove::nn;
namespace gr = grove::random;
namespace par = grove::parallel;
namespace optim = grove::optim;

namespace {

const auto model = nn::sequential(nn::dense(12, 10), nn::swish, nn::dropout(0.1), nn::dense(10, 4));
using Params = decltype(nn::init<float>(model, gr::key(0)));

auto make_optimizer() {
  // Weight decay on the matrices only: the state holds the mask's bool leaves.
  const auto matrices = [](const Params& p) {
    return grove::tree_map([](const auto& leaf) { return leaf.cols() > 1; }, p);
  };
  return optim::adamw(1e-2, 0.9, 0.999, 1e-8, 0.0, 0.05, matrices);
}
using Optimizer = decltype(make_optimizer());
using State = decltype(std::declval<const Optimizer&>().init(std::declval<const Params&>()));
using TrainState = nn::train_state<Params, State>;

TrainState fresh(std::uint32_t seed) {
  const Optimizer opt = make_optimizer();
  Params params = nn::init<float>(model, gr::key(seed));
  State state = opt.init(params);
  return TrainState{params, state, gr::key(seed + 1000), 0};
}

// `steps` data-parallel steps from `s`, each on its own batch and key, counted in s.epoch.
void train_resumable(TrainState& s, grove::mpi::Communicator& world, int steps) {
  const Optimizer opt = make_optimizer();
  par::StepWorkspace<Params> ws;
  for (int i = 0; i < steps; ++i) {
    const auto batch_key = gr::fold_in(s.key, static_cast<std::uint32_t>(s.epoch));
    const Eigen::MatrixXf X = gr::normal<float>(batch_key, 12, 30);
    const Eigen::VectorXi y = gr::randint(gr::fold_in(batch_key, 1), 30, 0, 4);
    const auto step_key = gr::fold_in(batch_key, 2);
    par::train_step(model, s.params, X, y, nn::softmax_cross_entropy, &step_key, opt, s.opt_state,
                    world, ws);
    ++s.epoch;
  }
}

}  // namespace

TEST_CASE("MPI: a run resumed from rank 0's checkpoint ends with the uninterrupted run's bits",
          "[mpi][checkpoint]") {
  grove::mpi::Communicator world;
  TrainState whole = fresh(1);
  train_resumable(whole, world, 6);

  // The interrupted run: 3 steps, rank 0 saves, everything is thrown away.
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("grove_mpi_resume_" + std::to_string(world.size()) + "_ranks.safetensors");
  {
    TrainState first = fresh(1);
    train_resumable(first, world, 3);
    if (world.rank() == 0) grove::io::save(path, first);
    world.barrier();
  }
  // Every rank starts from other values; rank 0 reads the checkpoint; a broadcast gives every
  // rank its state.
  TrainState resumed = fresh(100 + static_cast<std::uint32_t>(world.rank()));
  if (world.rank() == 0) grove::io::load_into(path, resumed);
  par::broadcast_inplace(resumed, world, 0);
  CHECK(par::in_sync(resumed, world));
  CHECK(resumed.epoch == 3);
  train_resumable(resumed, world, 3);

  CHECK(par_test::same_bits(resumed.params, whole.params));
  CHECK(par_test::same_bits(resumed.opt_state, whole.opt_state));
  CHECK(resumed.key == whole.key);
  CHECK(resumed.epoch == whole.epoch);
  CHECK(par::in_sync(resumed, world));
  world.barrier();
  if (world.rank() == 0) {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
}
