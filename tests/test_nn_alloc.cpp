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
  float l = 0;
  const long counted = allocations_during([&] {
    for (int i = 0; i < 3; ++i) step(64);
    step(40);
    l = nn::loss(params, X, y, ws);  // evaluation through the same workspace
  });
  CHECK(std::isfinite(l));
  return counted;
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
    CHECK(allocations_during([&] {
            for (int i = 0; i < 3; ++i) nn::sgd_step(params, X, y, 0.01f, ws);
            nn::sgd_step(params, X.leftCols(40), y.head(40), 0.01f, ws);
          }) == 0);
  }
}

TEST_CASE("The allocation counter counts", "[nn][alloc]") {
  Eigen::MatrixXf m;
  std::vector<int>* v = nullptr;
  const long counted = allocations_during([&] {
    m = Eigen::MatrixXf::Ones(100, 100);  // Eigen's aligned malloc
    v = new std::vector<int>(10);
  });
  CHECK(m.sum() == 10000.0f);
  CHECK(v->size() == 10);
  delete v;
  CHECK(counted >= (GROVE_COUNTS_MALLOC ? 3 : 1));  // under ASan: the operator new only
}

TEST_CASE("value_and_grad_into and train_step of composed models allocate nothing after warm-up",
          "[nn][alloc][model]") {
  const auto generic = nn::sequential(
      nn::dense(300, 128), nn::swish,
      nn::residual(nn::sequential(nn::layer_norm(128), nn::dense(128, 128), nn::gelu)),
      nn::dropout(0.2), nn::dense(128, 10));
  const auto chain = nn::sequential(nn::dense(300, 128), nn::tanh, nn::dense(128, 10));
  const Eigen::MatrixXf X = nn_test::random_matrix<float>(rnd::key(2), 300, 64);
  const Eigen::VectorXi y = nn_test::random_labels(rnd::key(3), 64, 10);
  const Eigen::MatrixXf Y = nn_test::random_matrix<float>(rnd::key(4), 10, 64);
  auto count = [&](const auto& model, int threads, auto&& step_of) {
    nn_test::ThreadCount scope(threads);
    auto params = nn::init<float>(model, rnd::key(1));
    auto step = step_of(params);
    step(64);  // warm-up
    step(40);
    return allocations_during([&] {
      for (int i = 0; i < 3; ++i) step(64);
      step(40);
    });
  };
  for (const int threads : {1, 2}) {
    INFO("threads " << threads);
    auto grads_of = [&](const auto& model, bool keyed) {
      return [&, keyed](auto& params) {
        return [&, keyed, grads = params, ws = nn::Workspace<float>{},
                key = rnd::key(5)](Eigen::Index batch) mutable {
          if (keyed)
            nn::value_and_grad_into(model, params, X.leftCols(batch), y.head(batch),
                                    nn::softmax_cross_entropy, key, grads, ws);
          else
            nn::value_and_grad_into(model, params, X.leftCols(batch), Y.leftCols(batch), nn::mse,
                                    grads, ws);
        };
      };
    };
    CHECK(count(generic, threads, grads_of(generic, true)) == 0);
    CHECK(count(generic, threads, grads_of(generic, false)) == 0);
    CHECK(count(chain, threads, grads_of(chain, false)) == 0);
    auto train_of = [&](const auto& model, const auto& opt) {
      return [&, opt](auto& params) {
        return [&, opt, state = opt.init(params),
                ws = nn::StepWorkspace<std::remove_cvref_t<decltype(params)>>{}](
                   Eigen::Index batch) mutable {
          nn::train_step(model, params, X.leftCols(batch), y.head(batch), nn::softmax_cross_entropy,
                         opt, state, ws);
        };
      };
    };
    CHECK(count(chain, threads, train_of(chain, nn::sgd(0.1))) == 0);
    CHECK(count(chain, threads, train_of(chain, nn::adam(1e-3))) == 0);
    CHECK(count(generic, threads, train_of(generic, nn::adam(1e-3))) == 0);
    // apply through a workspace.
    auto apply_of = [&](const auto& model) {
      return [&](auto& params) {
        return
            [&, out = Eigen::MatrixXf{}, ws = nn::Workspace<float>{}](Eigen::Index batch) mutable {
              (void)batch;  // apply's output keeps its size: the whole batch each time
              nn::apply_into(model, params, X, out, ws);
            };
      };
    };
    CHECK(count(generic, threads, apply_of(generic)) == 0);
    CHECK(count(chain, threads, apply_of(chain)) == 0);
  }
}

TEST_CASE("evaluate and accuracy allocate nothing after warm-up, over many chunks",
          "[nn][alloc][metrics]") {
  const Eigen::Index batch = 2500;  // three chunks, the last one shorter
  const Eigen::MatrixXf X = nn_test::random_matrix<float>(rnd::key(2), 20, batch);
  const Eigen::VectorXi y = nn_test::random_labels(rnd::key(3), batch, 5);
  for (const int threads : {1, 2}) {
    INFO("threads " << threads);
    nn_test::ThreadCount scope(threads);
    const auto params = nn::init_network_params<float>({20, 16, 5}, rnd::key(1), 0.3f);
    nn::Workspace<float> ws;
    nn::evaluate(params, X, y, ws);  // warm-up
    double seen = 0;
    CHECK(allocations_during([&] {
            seen = nn::evaluate(params, X, y, ws).loss + nn::accuracy(params, X, y, ws);
          }) == 0);
    CHECK(std::isfinite(seen));
    const auto model = nn::sequential(nn::dense(20, 16), nn::swish,
                                      nn::residual(nn::sequential(nn::layer_norm(16), nn::gelu)),
                                      nn::dense(16, 5));
    const auto model_params = nn::init<float>(model, rnd::key(4));
    nn::Workspace<float> model_ws;
    nn::evaluate(model, model_params, X, y, model_ws);  // warm-up
    CHECK(allocations_during(
              [&] { seen = nn::evaluate(model, model_params, X, y, model_ws).loss; }) == 0);
    CHECK(std::isfinite(seen));
  }
}

TEST_CASE("A run-time sequence of nested sequences trains without allocating after warm-up",
          "[nn][alloc][model]") {
  using Block =
      decltype(nn::residual(nn::sequential(nn::layer_norm(32), nn::dense(32, 32), nn::tanh)));
  std::vector<Block> blocks;
  for (int i = 0; i < 3; ++i)
    blocks.push_back(nn::residual(nn::sequential(nn::layer_norm(32), nn::dense(32, 32), nn::tanh)));
  const auto model = nn::sequential(nn::dense(300, 32), nn::sequential(blocks), nn::dense(32, 10));
  const Eigen::MatrixXf X = nn_test::random_matrix<float>(rnd::key(2), 300, 64);
  const Eigen::VectorXi y = nn_test::random_labels(rnd::key(3), 64, 10);
  for (const int threads : {1, 2}) {
    INFO("threads " << threads);
    nn_test::ThreadCount scope(threads);
    auto params = nn::init<float>(model, rnd::key(1));
    const auto opt = nn::adam(1e-3);
    auto state = opt.init(params);
    nn::StepWorkspace<decltype(params)> ws;
    auto step = [&](Eigen::Index batch) {
      return nn::train_step(model, params, X.leftCols(batch), y.head(batch),
                            nn::softmax_cross_entropy, opt, state, ws);
    };
    const float first = step(64);  // warm-up
    step(40);
    float last = 0;
    CHECK(allocations_during([&] {
            for (int i = 0; i < 3; ++i) last = step(64);
            step(40);
          }) == 0);
    CHECK(std::isfinite(first));
    CHECK(last < first);  // it trains
  }
}
