// grove::optim's states are pytrees: a checkpoint saves them (counts, moments, a mask's bools,
// apply_if_finite's flag) and a run resumed from one continues bit for bit.
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <cmath>
#include <grove/io/checkpoint.hpp>
#include <grove/nn.hpp>
#include <grove/optim.hpp>
#include <limits>
#include <utility>
#include <vector>

#include "checkpoint_fixture.hpp"

namespace io = grove::io;
namespace nn = grove::nn;
namespace optim = grove::optim;
using Params = std::vector<nn::Dense<float>>;

namespace {
Params grads_at(const Params& like, int t) {
  Params g = like;
  grove::tree_for_each(
      [t](auto& leaf) {
        for (Eigen::Index i = 0; i < leaf.size(); ++i)
          leaf.data()[i] = 0.2f * std::sin(0.3f * float(i) + 1.1f * float(t));
      },
      g);
  // A non-finite gradient at step 3, for apply_if_finite's counts.
  if (t == 3) g[0].b[0] = std::numeric_limits<float>::quiet_NaN();
  return g;
}

template <class Tx>
void steps(const Tx& tx, Params& params, auto& state, int from, int to) {
  for (int t = from; t < to; ++t) tx.step(params, grads_at(params, t), state);
}

template <class Tx>
void check_resume(const Tx& tx) {
  ckpt_test::temp_dir dir;
  const auto file = dir / "optimizer.safetensors";
  const Params start = nn::init_network_params<float>({6, 5, 3}, grove::random::key(3), 0.5f);

  Params uninterrupted = start;
  auto uninterrupted_state = tx.init(uninterrupted);
  steps(tx, uninterrupted, uninterrupted_state, 0, 7);

  Params params = start;
  auto state = tx.init(params);
  steps(tx, params, state, 0, 4);
  io::save(file, std::pair{params, state});

  // A fresh state and parameters, filled from the file.
  const Params other = nn::init_network_params<float>({6, 5, 3}, grove::random::key(9), 0.5f);
  std::pair resumed{other, tx.init(other)};
  io::load_into(file, resumed);
  CHECK(ckpt_test::bits_equal(resumed.second, state));
  steps(tx, resumed.first, resumed.second, 4, 7);
  CHECK(ckpt_test::bits_equal(resumed.first, uninterrupted));
  CHECK(ckpt_test::bits_equal(resumed.second, uninterrupted_state));
}
}  // namespace

TEST_CASE("An optimizer state saves, loads and resumes bit for bit", "[io][optim][checkpoint]") {
  auto weights = [](const Params& p) {
    return grove::tree_map([](const auto& leaf) { return leaf.cols() > 1; }, p);
  };
  check_resume(optim::apply_if_finite(
      optim::chain(optim::clip_by_global_norm(0.5),
                   optim::adamw(optim::warmup_cosine_decay_schedule(0, 1e-2, 2, 20), 0.9, 0.999,
                                1e-8, 0.0, 1e-2, weights)),
      2));
  check_resume(optim::multi_steps(optim::sgd(0.1, 0.9, true), 3));
}
