// grove::optim's steps allocate nothing once the state exists: this executable counts every
// allocation (alloc_counter.hpp: malloc and its kin, and operator new; under AddressSanitizer,
// which owns malloc, operator new only).
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <grove/nn.hpp>
#include <grove/optim.hpp>
#include <vector>

#include "alloc_counter.hpp"
#include "nn_fixtures.hpp"

namespace nn = grove::nn;
namespace optim = grove::optim;
namespace rnd = grove::random;

namespace {
template <class Tx>
long allocations_per_steps(const Tx& tx, int threads) {
  nn_test::ThreadCount scope(threads);
  // Leaves large enough for the pass to use every thread.
  auto params = nn::init_network_params<float>({300, 256, 128, 10}, rnd::key(1), 0.05f);
  auto grads = grove::tree_map([](const auto& p) { return (p * 0.5f).eval(); }, params);
  auto state = tx.init(params);
  tx.step(params, grads, state);  // warm-up: the thread team
  return allocations_during([&] {
    for (int i = 0; i < 4; ++i) tx.step(params, grads, state);
  });
}
}  // namespace

TEST_CASE("optim steps allocate nothing", "[optim][alloc]") {
  if (!GROVE_COUNTS_MALLOC)
    WARN("AddressSanitizer build: malloc is not counted, only operator new");
  auto weights = [](const std::vector<nn::Dense<float>>& p) {
    return grove::tree_map([](const auto& leaf) { return leaf.cols() > 1; }, p);
  };
  for (const int threads : {1, 2}) {
    INFO("threads " << threads);
    CHECK(allocations_per_steps(optim::sgd(optim::exponential_decay(0.1, 100, 0.5)), threads) == 0);
    CHECK(allocations_per_steps(optim::sgd(0.01, 0.9, true), threads) == 0);
    CHECK(allocations_per_steps(optim::adam(1e-3), threads) == 0);
    CHECK(allocations_per_steps(
              optim::chain(optim::clip_by_global_norm(1.0),
                           optim::adamw(optim::warmup_cosine_decay_schedule(0, 1e-3, 2, 100), 0.9,
                                        0.999, 1e-8, 0, 1e-4, weights)),
              threads) == 0);
    CHECK(allocations_per_steps(optim::rmsprop(1e-3), threads) == 0);
    CHECK(allocations_per_steps(optim::adagrad(1e-3), threads) == 0);
    CHECK(allocations_per_steps(optim::lion(1e-4), threads) == 0);
    CHECK(allocations_per_steps(optim::multi_steps(optim::adam(1e-3), 2), threads) == 0);
    CHECK(allocations_per_steps(optim::apply_if_finite(optim::adam(1e-3), 3), threads) == 0);
  }
}

TEST_CASE("The allocation counter counts an optimizer's update", "[optim][alloc]") {
  std::vector<Eigen::VectorXf> params{Eigen::VectorXf::Ones(100)};
  const auto tx = optim::adam(1e-3);
  auto state = tx.init(params);
  std::size_t updates = 0;
  CHECK(allocations_during([&] {
          const auto result = tx.update(params, state, params);  // copies: allocates
          updates = result.updates.size();
        }) > 0);
  CHECK(updates == 1);
}
