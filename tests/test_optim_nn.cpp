// grove::optim reproduces grove::nn's optimizers on the MLP's parameters (the swap of nn's
// optimizers to grove::optim keeps training runs' numbers), and its global norm does not depend on
// the thread count.
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <grove/nn.hpp>
#include <grove/optim.hpp>
#include <vector>

#include "nn_fixtures.hpp"

namespace nn = grove::nn;
namespace optim = grove::optim;
namespace rnd = grove::random;

namespace {
using Params = std::vector<nn::Dense<float>>;

Params start() {
  return nn::init_network_params<float>({300, 256, 10}, rnd::key(4), 0.05f);
}
Params grads_at(int t) {
  return grove::tree_map(
      [t](const auto& p) -> std::remove_cvref_t<decltype(p)> {
        using M = std::remove_cvref_t<decltype(p)>;
        return M::NullaryExpr(p.rows(), p.cols(), [t](Eigen::Index i, Eigen::Index j) {
          return 0.1f * std::sin(0.37f * float(i) + 1.3f * float(j) + 0.9f * float(t));
        });
      },
      start());
}

// Largest difference between the trees, in units of the larger element's float epsilon.
double max_ulps(const Params& a, const Params& b) {
  const Eigen::VectorXf x = grove::ravel(a).first, y = grove::ravel(b).first;
  double worst = 0;
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    const double scale =
        std::max(std::abs(x[i]), std::abs(y[i])) * std::numeric_limits<float>::epsilon();
    if (x[i] != y[i]) worst = std::max(worst, std::abs(double(x[i]) - y[i]) / scale);
  }
  return worst;
}

// Runs both optimizers' steps for 6 steps and returns the parameters of each.
template <class A, class B>
std::pair<Params, Params> both(const A& ours, const B& theirs, int threads) {
  nn_test::ThreadCount scope(threads);
  Params a = start(), b = start();
  auto sa = ours.init(a);
  auto sb = theirs.init(b);
  for (int t = 0; t < 6; ++t) {
    const Params g = grads_at(t);
    ours.step(a, g, sa);
    theirs.step(b, g, sb);
  }
  return {a, b};
}
}  // namespace

TEST_CASE("optim::sgd, sgd with momentum and adam step as nn's do", "[optim][nn]") {
  // The same operations in the same order per element: equal up to the one rounding a fused
  // multiply-add in nn's step may save (nn adds -lr * x to the parameter in one expression, grove
  // after its chain has produced the update).
  for (const int threads : {1, 2}) {
    INFO("threads " << threads);
    {
      auto [a, b] = both(optim::sgd(optim::exponential_decay(0.1, 3, 0.5)),
                         nn::sgd(nn::exponential_decay(0.1, 3, 0.5)), threads);
      CHECK(max_ulps(a, b) <= 2);
    }
    for (const bool nesterov : {false, true}) {
      auto [a, b] =
          both(optim::sgd(0.05, 0.9, nesterov), nn::momentum(0.05, 0.9, nesterov), threads);
      CHECK(max_ulps(a, b) <= 2);
    }
    {
      auto [a, b] = both(optim::adam(1e-3), nn::adam(1e-3), threads);
      CHECK(max_ulps(a, b) <= 2);
    }
  }
  // And the pure updates, which nn computes without that fusion: bit for bit.
  const auto ours = optim::adam(1e-3);
  const auto theirs = nn::adam(1e-3);
  Params p = start();
  auto so = ours.init(p);
  auto st = theirs.init(p);
  for (int t = 0; t < 3; ++t) {
    const Params g = grads_at(t);
    auto [u, next] = ours.update(g, so, p);
    auto [v, next2] = theirs.update(g, st, p);
    CHECK(max_ulps(u, v) == 0);
    so = std::move(next);
    st = std::move(next2);
  }
  CHECK(grove::ravel(std::get<0>(so).mu).first == grove::ravel(st.mu).first);
  CHECK(grove::ravel(std::get<0>(so).nu).first == grove::ravel(st.nu).first);
}

TEST_CASE("global_norm and a clipped step are the same for every thread count", "[optim][nn]") {
  const Params g = grads_at(2);
  double norms[2];
  Params stepped[2];
  for (const int threads : {1, 2}) {
    nn_test::ThreadCount scope(threads);
    norms[threads - 1] = optim::global_norm(g);
    const auto tx = optim::chain(optim::clip_by_global_norm(0.5), optim::adamw(1e-3));
    stepped[threads - 1] = start();
    auto state = tx.init(stepped[threads - 1]);
    for (int t = 0; t < 3; ++t) tx.step(stepped[threads - 1], grads_at(t), state);
  }
  CHECK(norms[0] == norms[1]);
  CHECK(max_ulps(stepped[0], stepped[1]) == 0);
  // Against a plain double sum of squares.
  const Eigen::VectorXf flat = grove::ravel(g).first;
  const double expected = std::sqrt(flat.cast<double>().squaredNorm());
  CHECK(std::abs(norms[0] - expected) <= 1e-12 * expected);
}

TEST_CASE("README's optimizer snippet", "[optim][nn]") {
  auto params = start();
  const Params grads = grads_at(0);
  // README.md, "Optimizers":
  // Weight decay on the weight matrices only: a mask tree with the parameters' structure.
  auto weights_only = [](const auto& p) {
    return grove::tree_map([](const auto& leaf) { return leaf.cols() > 1; }, p);
  };
  const auto schedule = optim::warmup_cosine_decay_schedule(0.0, 1e-3, 100, 10000);
  const auto tx = optim::chain(optim::clip_by_global_norm(1.0),
                               optim::adamw(schedule, 0.9, 0.999, 1e-8, 0.0, 1e-4, weights_only));
  auto state = tx.init(params);   // a pytree: std::tuple of the transformations' states
  tx.step(params, grads, state);  // one fused pass over the parameters, no allocation
  auto [updates, next] = tx.update(grads, state, params);  // or the pure form
  params = optim::apply_updates(params, updates);
  CHECK(std::get<2>(std::get<1>(next)).count == 2);
  CHECK(std::get<1>(std::get<1>(next)).mask[0].get<0>());
  CHECK_FALSE(std::get<1>(std::get<1>(next)).mask[0].get<1>());
}
