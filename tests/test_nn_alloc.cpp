// A training step allocates nothing after warm-up: this executable counts every allocation
// (alloc_counter.hpp: malloc and its kin, and operator new; under AddressSanitizer, which owns
// malloc, operator new only).
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <cstdlib>
#include <grove/nn.hpp>
#include <new>
#include <vector>

#include "alloc_counter.hpp"
#include "nn_fixtures.hpp"

namespace nn = grove::nn;
namespace rnd = grove::random;

namespace {
// Steps with full batches and a smaller last batch, as an epoch has; returns the allocations made
// by the counted steps.
template <class Opt>
long allocations_per_training(const Opt& opt, int threads) {
  nn_test::ThreadCount scope(threads);
  // Leaves large enough for the products and the optimizer's pass to use every thread.
  auto params = nn::init_network_params<float>({300, 256, 128, 10}, rnd::key(1), 0.05f);
  auto state = opt.init(params);
  const Eigen::MatrixXf X = nn_test::random_matrix<float>(rnd::key(2), 300, 64);
  const Eigen::VectorXi y = nn_test::random_labels(rnd::key(3), 64, 10);
  nn::Workspace<float> ws;
  std::vector<nn::Dense<float>> grads;
  auto step = [&](Eigen::Index batch) {
    nn::value_and_grad_into(params, X.leftCols(batch), y.head(batch), grads, ws);
    opt.step(params, grads, state);
  };
  step(64);  // warm-up: the workspace, the gradients' storage, the thread team
  step(40);
  g_allocations = 0;
  g_counting = true;
  for (int i = 0; i < 3; ++i) step(64);
  step(40);
  const float l = nn::loss(params, X, y, ws);  // evaluation through the same workspace
  g_counting = false;
  CHECK(std::isfinite(l));
  return g_allocations.load();
}
}  // namespace

TEST_CASE("A training step allocates nothing after warm-up", "[nn][alloc]") {
  if (!GROVE_COUNTS_MALLOC)
    WARN("AddressSanitizer build: malloc is not counted, only operator new");
  for (const int threads : {1, 2}) {
    INFO("threads " << threads);
    CHECK(allocations_per_training(nn::sgd(nn::exponential_decay(0.1, 100, 0.5)), threads) == 0);
    CHECK(allocations_per_training(nn::momentum(0.01, 0.9), threads) == 0);
    CHECK(allocations_per_training(nn::adam(1e-3), threads) == 0);
  }
}

TEST_CASE("sgd_step allocates nothing after warm-up", "[nn][alloc]") {
  for (const int threads : {1, 2}) {
    INFO("threads " << threads);
    nn_test::ThreadCount scope(threads);
    auto params = nn::init_network_params<float>({300, 256, 128, 10}, rnd::key(1), 0.05f);
    const Eigen::MatrixXf X = nn_test::random_matrix<float>(rnd::key(2), 300, 64);
    const Eigen::VectorXi y = nn_test::random_labels(rnd::key(3), 64, 10);
    nn::Workspace<float> ws;
    nn::sgd_step(params, X, y, 0.01f, ws);
    nn::sgd_step(params, X.leftCols(40), y.head(40), 0.01f, ws);
    g_allocations = 0;
    g_counting = true;
    for (int i = 0; i < 3; ++i) nn::sgd_step(params, X, y, 0.01f, ws);
    nn::sgd_step(params, X.leftCols(40), y.head(40), 0.01f, ws);
    g_counting = false;
    CHECK(g_allocations.load() == 0);
  }
}

TEST_CASE("The allocation counter counts", "[nn][alloc]") {
  g_allocations = 0;
  g_counting = true;
  Eigen::MatrixXf m = Eigen::MatrixXf::Ones(100, 100);  // Eigen's aligned malloc
  auto* v = new std::vector<int>(10);
  g_counting = false;
  const long counted = g_allocations.load();
  CHECK(m.sum() == 10000.0f);
  CHECK(v->size() == 10);
  delete v;
  CHECK(counted >= (GROVE_COUNTS_MALLOC ? 3 : 1));  // under ASan: the operator new only
}
