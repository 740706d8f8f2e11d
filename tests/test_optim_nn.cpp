// grove::optim on the MLP's parameters: its global norm and a clipped step do not depend on the
// thread count, and README's optimizer snippet.
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
Params network_grads_at(int t) {
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
}  // namespace

TEST_CASE("global_norm and a clipped step are the same for every thread count", "[optim][nn]") {
  const Params g = network_grads_at(2);
  double norms[2];
  Params stepped[2];
  for (const int threads : {1, 2}) {
    nn_test::ThreadCount scope(threads);
    norms[threads - 1] = optim::global_norm(g);
    const auto tx = optim::chain(optim::clip_by_global_norm(0.5), optim::adamw(1e-3));
    stepped[threads - 1] = start();
    auto state = tx.init(stepped[threads - 1]);
    for (int t = 0; t < 3; ++t) tx.step(stepped[threads - 1], network_grads_at(t), state);
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
  const Params grads = network_grads_at(0);
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
