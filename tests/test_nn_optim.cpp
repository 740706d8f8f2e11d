// grove::nn with grove::optim's optimizers: nn's names for them, their in-place steps on a
// network, the fused SGD step, the workspace, and a short deterministic training run.
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <cmath>
#include <grove/nn.hpp>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "nn_fixtures.hpp"

namespace nn = grove::nn;
namespace optim = grove::optim;
namespace rnd = grove::random;
using Catch::Matchers::Contains;
using nn_test::random_labels;
using nn_test::random_matrix;

namespace {
// A pytree that is not a network: a dict with a matrix, an array and a scalar leaf.
using Tree = std::map<std::string, std::tuple<Eigen::MatrixXd, Eigen::ArrayXd, double>>;

Tree make_tree(double a, double b, double c) {
  Eigen::MatrixXd m(2, 2);
  m << a, -b, c, 0.5;
  Eigen::ArrayXd v(3);
  v << b, c, -a;
  return {{"layer", {m, v, a * c}}};
}

// The leaves of a Tree in leaf order, as one vector.
Eigen::VectorXd flat(const Tree& t) {
  return grove::ravel(t).first;
}

const std::vector<Tree> grads_seq{make_tree(0.3, -1.2, 2.0), make_tree(-0.7, 0.4, 1.5),
                                  make_tree(1.1, 0.9, -0.2)};
}  // namespace

TEST_CASE("nn's optimizers are grove::optim's", "[nn][optim]") {
  // One implementation: the names grove::nn has always offered are grove::optim's objects.
  STATIC_REQUIRE(std::is_same_v<decltype(nn::sgd(0.1)), decltype(optim::sgd(0.1))>);
  STATIC_REQUIRE(
      std::is_same_v<decltype(nn::momentum(0.1, 0.9)), decltype(optim::sgd(0.1, 0.9, false))>);
  STATIC_REQUIRE(std::is_same_v<decltype(nn::adam(0.1)), decltype(optim::adam(0.1))>);
  STATIC_REQUIRE(std::is_same_v<nn::Schedule, optim::Schedule>);
  // nn::momentum's defaults are optax.sgd(lr, momentum=0.9, nesterov=False)'s.
  Tree params = make_tree(1, 2, 3), expected = params;
  const auto ours = nn::momentum(0.05);
  const auto reference = optim::sgd(0.05, 0.9, false);
  auto s_ours = ours.init(params);
  auto s_reference = reference.init(expected);
  for (const auto& g : grads_seq) {
    ours.step(params, g, s_ours);
    reference.step(expected, g, s_reference);
  }
  CHECK(flat(params) == flat(expected));
  CHECK_THROWS_WITH(nn::momentum(0.1, -0.5), Contains("momentum must be in [0, 1)"));
}

TEMPLATE_TEST_CASE("step() in place equals update() + apply_updates()", "[nn][optim]", float,
                   double) {
  using T = TestType;
  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-15;
  // Large enough leaves for the in-place step to share them among threads.
  const auto params0 = nn::init_network_params<T>({300, 200, 10}, rnd::key(61), T(0.1));
  auto grads = grove::tree_map([](const auto& p) { return (p * T(3)).eval(); }, params0);
  auto check = [&](const auto& opt) {
    auto pure = params0, fused = params0;
    auto s_pure = opt.init(pure);
    auto s_fused = opt.init(fused);
    for (int k = 0; k < 3; ++k) {
      auto [updates, next] = opt.update(grads, s_pure, pure);
      pure = nn::apply_updates(pure, updates);
      s_pure = next;
      opt.step(fused, grads, s_fused);
    }
    CHECK(std::get<std::tuple_size_v<decltype(s_pure)> - 1>(s_pure).count ==
          std::get<std::tuple_size_v<decltype(s_fused)> - 1>(s_fused).count);
    const auto a = grove::ravel(pure).first, b = grove::ravel(fused).first;
    CHECK(a.isApprox(b, static_cast<T>(tol)));
  };
  check(nn::sgd(nn::exponential_decay(0.1, 1, 0.9)));
  check(nn::momentum(0.1, 0.9, true));
  check(nn::adam(1e-3));
  // apply_updates_inplace too.
  auto p = params0;
  nn::apply_updates_inplace(p, grads);
  CHECK(grove::ravel(p).first.isApprox(grove::ravel(nn::apply_updates(params0, grads)).first));
}

TEMPLATE_TEST_CASE("sgd_step equals value_and_grad and an SGD update", "[nn][optim][sgd_step]",
                   float, double) {
  using T = TestType;
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-13;
  auto params = nn::init_network_params<T>({40, 48, 24, 6}, rnd::key(81), T(0.3));
  const nn::Matrix<T> X = random_matrix<T>(rnd::key(82), 40, 50);
  const Eigen::VectorXi y = random_labels(rnd::key(83), 50, 6);
  for (const auto& act : {nn::Gelu{}, nn::Gelu{.approximate = false}}) {
    const auto [loss, grads] = nn::value_and_grad(params, X, y, act);
    const auto opt = nn::sgd(0.25);
    auto state = opt.init(params);
    auto [updates, next] = opt.update(grads, state, params);
    const auto expected = nn::apply_updates(params, updates);
    nn::Workspace<T> ws;
    const T fused_loss = nn::sgd_step(params, X, y, T(0.25), ws, act);
    CHECK(fused_loss == Approx(loss).epsilon(tol));
    CHECK(grove::ravel(params).first.isApprox(grove::ravel(expected).first, static_cast<T>(tol)));
  }
}

TEST_CASE("A Workspace grows once and is reused for smaller batches", "[nn][workspace]") {
  const auto params = nn::init_network_params<float>({30, 40, 5}, rnd::key(71), 0.2f);
  const Eigen::MatrixXf X = random_matrix<float>(rnd::key(72), 30, 64);
  const Eigen::VectorXi y = random_labels(rnd::key(73), 64, 5);
  nn::Workspace<float> ws;
  std::vector<nn::Dense<float>> grads;
  const float big = nn::value_and_grad_into(params, X, y, grads, ws);
  CHECK(ws.capacity() == 64);
  const std::size_t bytes = ws.bytes();
  const float small = nn::value_and_grad_into(params, X.leftCols(32), y.head(32), grads, ws);
  CHECK(ws.capacity() == 64);
  CHECK(ws.bytes() == bytes);
  const auto [ref_loss, ref_grads] =
      nn::value_and_grad(params, Eigen::MatrixXf(X.leftCols(32)), Eigen::VectorXi(y.head(32)));
  CHECK(small == ref_loss);
  CHECK(grads == ref_grads);
  CHECK(big == nn::value_and_grad(params, X, y).loss);
  CHECK_THROWS_WITH(
      nn::value_and_grad_into(params, X, y, const_cast<std::vector<nn::Dense<float>>&>(params), ws),
      Contains("grads must not be params itself"));
}

namespace {
// Four Gaussian blobs in 16 dimensions; examples are columns.
struct Blobs {
  Eigen::MatrixXf X;
  Eigen::VectorXi y;
};
Blobs make_blobs(const rnd::Key& key, Eigen::Index n) {
  const auto [k_labels, k_noise] = rnd::split(key);
  // Class means at a distance of about 2.5 standard deviations: the classes overlap, so accuracy
  // is earned (an untrained network scores about 0.25, knowing the means gives 0.88).
  const Eigen::MatrixXf means = 0.6f * rnd::normal<float>(rnd::key(999), 16, 4);
  Blobs b{rnd::normal<float>(k_noise, 16, n), random_labels(k_labels, n, 4)};
  for (Eigen::Index j = 0; j < n; ++j) b.X.col(j) += means.col(b.y(j));
  return b;
}

template <class Opt>
std::pair<double, std::vector<nn::Dense<float>>> train(const Opt& opt, int epochs) {
  const Blobs train_set = make_blobs(rnd::key(1), 1024), test_set = make_blobs(rnd::key(2), 256);
  auto [init_key, data_key] = rnd::split(rnd::key(0));
  auto params = nn::init_network_params({16, 32, 4}, init_key, nn::he_normal<float>);
  auto state = opt.init(params);
  nn::Workspace<float> ws;
  std::vector<nn::Dense<float>> grads;
  const Eigen::Index batch = 32;
  Eigen::MatrixXf xb(16, batch);
  Eigen::VectorXi yb(batch);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    const auto perm =
        rnd::permutation(rnd::fold_in(data_key, static_cast<std::uint32_t>(epoch)), 1024);
    for (Eigen::Index start = 0; start < 1024; start += batch) {
      for (Eigen::Index j = 0; j < batch; ++j) {
        xb.col(j) = train_set.X.col(perm(start + j));
        yb(j) = train_set.y(perm(start + j));
      }
      nn::value_and_grad_into(params, xb, yb, grads, ws);
      opt.step(params, grads, state);
    }
  }
  return {nn::accuracy(params, test_set.X, test_set.y), params};
}
}  // namespace

namespace {
// The accuracy of the classifier that knows the class means (the best a model can expect here).
double nearest_mean_accuracy() {
  const Blobs test_set = make_blobs(rnd::key(2), 256);
  const Eigen::MatrixXf means = 0.6f * rnd::normal<float>(rnd::key(999), 16, 4);
  int correct = 0;
  for (Eigen::Index j = 0; j < 256; ++j) {
    Eigen::Index best = 0;
    (means.colwise() - test_set.X.col(j)).colwise().squaredNorm().minCoeff(&best);
    correct += best == test_set.y(j);
  }
  return correct / 256.0;
}
}  // namespace

TEST_CASE("A short training run on synthetic data reaches its accuracy, deterministically",
          "[nn][train]") {
  const double best = nearest_mean_accuracy();
  INFO("nearest-mean accuracy " << best);
  const auto [acc0, params0] = train(nn::adam(1e-2), 0);
  INFO("untrained accuracy " << acc0);
  CHECK(acc0 < 0.5);
  const auto [acc, params] = train(nn::adam(1e-2), 4);
  INFO("adam test accuracy " << acc);
  CHECK(acc >= best - 0.05);
  const auto [acc2, params2] = train(nn::adam(1e-2), 4);
  CHECK(acc2 == acc);
  CHECK(params2 == params);
  // The walk-through's SGD with a decaying learning rate, and momentum.
  const auto [acc_sgd, p_sgd] = train(nn::sgd(nn::exponential_decay(0.5, 16, 0.9)), 4);
  INFO("sgd test accuracy " << acc_sgd);
  CHECK(acc_sgd >= best - 0.05);
  const auto [acc_m, p_m] = train(nn::momentum(0.05, 0.9), 4);
  INFO("momentum test accuracy " << acc_m);
  CHECK(acc_m >= best - 0.05);
}
