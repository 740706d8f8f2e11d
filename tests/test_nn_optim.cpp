// grove::nn: schedules and optimizers against steps computed by hand, the workspace, and a short
// deterministic training run.
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

TEST_CASE("exponential_decay is optax's", "[nn][optim]") {
  const auto lr = nn::exponential_decay(0.1, 4, 0.5);
  CHECK(lr(0) == 0.1);
  CHECK(lr(2) == Approx(0.1 * std::pow(0.5, 0.5)));
  CHECK(lr(8) == Approx(0.025));
  const auto stairs = nn::exponential_decay(0.1, 4, 0.5, 0, true);
  CHECK(stairs(3) == 0.1);
  CHECK(stairs(4) == Approx(0.05));
  const auto delayed = nn::exponential_decay(1.0, 10, 0.1, 5, false, 0.05);
  CHECK(delayed(5) == 1.0);
  CHECK(delayed(15) == Approx(0.1));
  CHECK(delayed(100) == 0.05);  // clipped at end_value
  CHECK_THROWS_WITH(nn::exponential_decay(0.1, 0, 0.5),
                    Contains("transition_steps must be positive"));
  CHECK(nn::constant_schedule(0.3)(1000) == 0.3);
  const nn::Schedule custom = [](std::int64_t step) { return 1.0 / static_cast<double>(step + 1); };
  CHECK(custom(3) == 0.25);
}

TEST_CASE("sgd with an exponential-decay schedule, step by step", "[nn][optim]") {
  const auto opt = nn::sgd(nn::exponential_decay(0.1, 2, 0.5));
  Tree params = make_tree(1, 2, 3);
  auto state = opt.init(params);
  CHECK(grove::tree_structure(state).str() == "PyTreeDef(CustomNode(SgdState[()], [*]))");
  Eigen::VectorXd expected = flat(params);
  for (int k = 0; k < 3; ++k) {
    const double lr = 0.1 * std::pow(0.5, k / 2.0);
    expected -= lr * flat(grads_seq[static_cast<std::size_t>(k)]);
    auto [updates, next] = opt.update(grads_seq[static_cast<std::size_t>(k)], state, params);
    CHECK(flat(updates).isApprox(-lr * flat(grads_seq[static_cast<std::size_t>(k)]), 1e-15));
    params = nn::apply_updates(params, updates);
    state = next;
    CHECK(state.count == k + 1);
  }
  CHECK(flat(params).isApprox(expected, 1e-15));
}

TEST_CASE("momentum and nesterov, step by step", "[nn][optim]") {
  for (const bool nesterov : {false, true}) {
    const auto opt = nn::momentum(0.05, 0.9, nesterov);
    Tree params = make_tree(1, 2, 3);
    auto state = opt.init(params);
    Eigen::VectorXd p = flat(params), trace = Eigen::VectorXd::Zero(p.size());
    for (const auto& g : grads_seq) {
      trace = flat(g) + 0.9 * trace;
      p -= 0.05 * (nesterov ? Eigen::VectorXd(flat(g) + 0.9 * trace) : trace);
      auto [updates, next] = opt.update(g, state, params);
      params = nn::apply_updates(params, updates);
      state = next;
    }
    INFO("nesterov " << nesterov);
    CHECK(flat(params).isApprox(p, 1e-15));
    CHECK(flat(state.trace).isApprox(trace, 1e-15));
    CHECK(state.count == 3);
  }
}

TEST_CASE("adam, step by step", "[nn][optim]") {
  const double lr = 0.01, b1 = 0.8, b2 = 0.95, eps = 1e-3, eps_root = 1e-4;
  const auto opt = nn::adam(lr, b1, b2, eps, eps_root);
  Tree params = make_tree(1, 2, 3);
  auto state = opt.init(params);
  CHECK(grove::tree_structure(state).str() ==
        "PyTreeDef(CustomNode(AdamState[()], [*, {'layer': (*, *, *)}, {'layer': (*, *, *)}]))");
  Eigen::VectorXd p = flat(params);
  const Eigen::Index n = p.size();
  Eigen::VectorXd m = Eigen::VectorXd::Zero(n), v = Eigen::VectorXd::Zero(n);
  int t = 0;
  for (const auto& gt : grads_seq) {
    const Eigen::VectorXd g = flat(gt);
    ++t;
    for (Eigen::Index i = 0; i < n; ++i) {
      m(i) = (1 - b1) * g(i) + b1 * m(i);
      v(i) = (1 - b2) * g(i) * g(i) + b2 * v(i);
      const double m_hat = m(i) / (1 - std::pow(b1, t)), v_hat = v(i) / (1 - std::pow(b2, t));
      p(i) -= lr * m_hat / (std::sqrt(v_hat + eps_root) + eps);
    }
    auto [updates, next] = opt.update(gt, state, params);
    params = nn::apply_updates(params, updates);
    state = next;
  }
  CHECK(flat(params).isApprox(p, 1e-14));
  CHECK(flat(state.mu).isApprox(m, 1e-15));
  CHECK(flat(state.nu).isApprox(v, 1e-15));
  CHECK(state.count == 3);
  CHECK_THROWS_WITH(nn::adam(0.1, 1.0), Contains("b1 must be in [0, 1)"));
  CHECK_THROWS_WITH(nn::momentum(0.1, -0.5), Contains("beta must be in [0, 1)"));
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
    CHECK(s_pure.count == s_fused.count);
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
