// grove::nn: initialisation, activations, predict / batched_predict (against vmap), loss, and gradients
// against central finite differences.
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <array>
#include <cmath>
#include <grove/error.hpp>
#include <grove/nn.hpp>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "nn_fixtures.hpp"

namespace nn = grove::nn;
namespace rnd = grove::random;
using Catch::Matchers::Contains;
using nn_test::random_labels;
using nn_test::random_matrix;
using nn_test::ThreadCount;

// --- initialisation ----------------------------------------------------------------------------

TEST_CASE("init_network_params follows the JAX walk-through, key by key", "[nn][init]") {
  const auto key = rnd::key(0);
  // Compiles as written in the issue and in JAX's walk-through.
  const auto params = nn::init_network_params<float>({784, 512, 512, 10}, key, 0.01f);
  static_assert(std::is_same_v<decltype(params), const std::vector<nn::Dense<float>>>);
  REQUIRE(params.size() == 3);
  const std::array<std::pair<Eigen::Index, Eigen::Index>, 3> mn{
      {{784, 512}, {512, 512}, {512, 10}}};
  const auto keys = rnd::split(key, 3);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto [m, n] = mn[i];
    CHECK(keys[i] == rnd::fold_in(key, static_cast<std::uint32_t>(i)));
    // w_key, b_key = random.split(layer_key); scale * random.normal(w_key, (n, m)), ... (n,)
    const auto [w_key, b_key] = rnd::split(keys[i]);
    const Eigen::MatrixXf w = 0.01f * rnd::normal<float>(w_key, n, m);
    const Eigen::VectorXf b = 0.01f * rnd::normal<float>(b_key, n);
    REQUIRE(params[i].w.rows() == n);
    REQUIRE(params[i].w.cols() == m);
    CHECK(params[i].w == w);
    CHECK(params[i].b == b);
    CHECK(params[i] == nn::random_layer_params<float>(m, n, keys[i], 0.01f));
  }
  // The start of the first layer, as JAX prints params[0][0][0, :3] (through grove::random).
  const auto [w_key, b_key] = rnd::split(keys[0]);
  const Eigen::MatrixXf first = rnd::normal<float>(w_key, 1, 3);
  for (int j = 0; j < 3; ++j) CHECK(params[0].w(0, j) == 0.01f * first(0, j));
  // Scale 0.01 normal values.
  const Eigen::ArrayXf all = params[1].w.reshaped().array();
  CHECK(std::abs(all.mean()) < 2e-4);
  CHECK(std::sqrt((all - all.mean()).square().mean()) == Approx(0.01).epsilon(0.02));

  // The same in double, a double scale literal, and sizes from any integer range.
  const auto p64 = nn::init_network_params<double>(std::vector<int>{5, 4, 3}, rnd::key(7), 0.5);
  const auto [wk, bk] = rnd::split(rnd::split(rnd::key(7), 2)[1]);
  CHECK(p64[1].w == (0.5 * rnd::normal<double>(wk, 3, 4)).eval());
  CHECK(p64[1].b == (0.5 * rnd::normal<double>(bk, 3)).eval());
  const auto p32 = nn::init_network_params<float>({784, 512, 512, 10}, key, 0.01);
  CHECK(p32 == params);
}

TEST_CASE("init_network_params rejects bad sizes", "[nn][init]") {
  CHECK_THROWS_WITH(nn::init_network_params<float>({784}, rnd::key(0)),
                    Contains("at least two layer sizes"));
  CHECK_THROWS_WITH(nn::init_network_params<float>({784, 0, 10}, rnd::key(0)),
                    Contains("must be positive, got 0"));
  CHECK_THROWS_WITH(nn::random_layer_params<float>(3, -1, rnd::key(0)), Contains("n = -1"));
}

TEST_CASE("A network is a pytree: key paths .w / .b, tree_map keeps Dense", "[nn][init][tree]") {
  auto params = nn::init_network_params<float>({4, 3, 2}, rnd::key(1));
  CHECK(grove::tree_structure(params).str() ==
        "PyTreeDef([CustomNode(Dense[()], [*, *]), CustomNode(Dense[()], [*, *])])");
  const auto paths = grove::tree_leaves_with_path(params);
  REQUIRE(paths.size() == 4);
  CHECK(grove::keystr(paths[0].first) == "[0].w");
  CHECK(grove::keystr(paths[3].first) == "[1].b");
  const auto shapes = grove::tree_map([](const auto& p) { return grove::shape(p); }, params);
  CHECK(grove::to_string(shapes) == "[Dense(w=(3, 4), b=(3,)), Dense(w=(2, 3), b=(2,))]");
  auto scaled = grove::tree_map([](const auto& p) { return 10 * p; }, params);
  static_assert(std::is_same_v<decltype(scaled), std::vector<nn::Dense<float>>>);
  CHECK(scaled[1].b == (10 * params[1].b).eval());
  auto as_double = grove::tree_map([](const auto& p) { return p.template cast<double>(); }, params);
  static_assert(std::is_same_v<decltype(as_double), std::vector<nn::Dense<double>>>);
  CHECK(grove::tree_size(params) == 3 * 4 + 3 + 2 * 3 + 2);
}

TEST_CASE("Variance-scaling initializers follow jax.nn.initializers", "[nn][init]") {
  const auto key = rnd::key(3);
  const Eigen::Index out = 300, in = 200;
  SECTION("the exact formulas, fan_in = in (cols), fan_out = out (rows)") {
    const Eigen::MatrixXf g = nn::glorot_normal<float>.sample(key, out, in);
    const float g_std =
        std::sqrt(static_cast<float>(1.0 / 250.0)) / static_cast<float>(.87962566103423978);
    CHECK(g == (rnd::truncated_normal<float>(key, -2, 2, out, in) * g_std).eval());
    const Eigen::MatrixXf hu = nn::he_uniform<float>.sample(key, out, in);
    const float hu_scale = std::sqrt(3.0f * static_cast<float>(2.0 / 200.0));
    CHECK(hu == (rnd::uniform<float>(key, out, in, -1, 1) * hu_scale).eval());
    const Eigen::MatrixXd ln =
        nn::variance_scaling<double>(1.0, "fan_out", "normal").sample(key, out, in);
    CHECK(ln == (rnd::normal<double>(key, out, in) * std::sqrt(1.0 / 300.0)).eval());
  }
  SECTION("the variances they promise") {
    auto stddev = [](const Eigen::MatrixXd& w) {
      const Eigen::ArrayXd a = w.reshaped().array();
      return std::sqrt((a - a.mean()).square().mean());
    };
    CHECK(stddev(nn::glorot_normal<double>(key, out, in)) ==
          Approx(std::sqrt(1.0 / 250)).epsilon(0.03));
    CHECK(stddev(nn::glorot_uniform<double>(key, out, in)) ==
          Approx(std::sqrt(1.0 / 250)).epsilon(0.03));
    CHECK(stddev(nn::he_normal<double>(key, out, in)) ==
          Approx(std::sqrt(2.0 / 200)).epsilon(0.03));
    CHECK(stddev(nn::he_uniform<double>(key, out, in)) ==
          Approx(std::sqrt(2.0 / 200)).epsilon(0.03));
    CHECK(stddev(nn::lecun_normal<double>(key, out, in)) ==
          Approx(std::sqrt(1.0 / 200)).epsilon(0.03));
    CHECK(stddev(nn::lecun_uniform<double>(key, out, in)) ==
          Approx(std::sqrt(1.0 / 200)).epsilon(0.03));
    const Eigen::MatrixXd tn = nn::he_normal<double>(key, out, in);
    CHECK(tn.cwiseAbs().maxCoeff() < 2 * std::sqrt(2.0 / 200) / .87962566103423978);
  }
  SECTION("networks from an initializer: zero biases, keys as init_network_params") {
    const auto params = nn::init_network_params({6, 5, 4}, key, nn::he_normal<float>);
    const auto keys = rnd::split(key, 2);
    CHECK(params[1].w == nn::he_normal<float>(rnd::split(keys[1])[0], 4, 5));
    CHECK(params[1].b == Eigen::VectorXf::Zero(4));
  }
  SECTION("bad arguments") {
    CHECK_THROWS_WITH(nn::variance_scaling<float>(1.0, "fan_sideways", "normal"),
                      Contains("fan_sideways"));
    CHECK_THROWS_WITH(nn::variance_scaling<float>(1.0, "fan_in", "cauchy"), Contains("cauchy"));
    // jax.nn.initializers.variance_scaling refuses Keras's alias (checked against JAX 0.10).
    CHECK_THROWS_WITH(nn::variance_scaling<float>(1.0, "fan_in", "untruncated_normal"),
                      Contains("untruncated_normal"));
    CHECK_THROWS_WITH(nn::variance_scaling<float>(-1.0, "fan_in", "normal"),
                      Contains("scale must be positive"));
  }
}

// --- activations -----------------------------------------------------------------------------

TEST_CASE("Activations and their derivatives", "[nn][activations]") {
  const Eigen::ArrayXd x = Eigen::ArrayXd::LinSpaced(41, -6, 6);
  auto check_derivative = [&](const auto& act) {
    const double h = 1e-6;
    for (const double v : x) {
      if (v == 0.0) continue;  // relu's kink
      const double fd = (act(v + h) - act(v - h)) / (2 * h);
      CHECK(act.derivative(v) == Approx(fd).margin(1e-8));
    }
    // The kernels the fused passes use agree with the elementwise forms.
    Eigen::ArrayXd z = x, a(x.size());
    act.forward_train(z.data(), a.data(), z.size());
    CHECK(a.isApprox(act(x), 1e-14));
    CHECK(z.isApprox(act.derivative(x), 1e-14));
    Eigen::ArrayXd b(x.size());
    act.forward(x.data(), b.data(), x.size());
    CHECK(b.isApprox(act(x), 1e-14));
  };
  SECTION("swish") {
    for (const double v : x) CHECK(nn::swish(v) == Approx(v / (1 + std::exp(-v))).epsilon(1e-14));
    CHECK(nn::swish(0.0f) == 0.0f);
    CHECK(nn::swish(-200.0f) == Approx(0.0f).margin(1e-30));
    CHECK(nn::swish(200.0f) == 200.0f);
    check_derivative(nn::swish);
  }
  SECTION("relu: derivative 0 at 0, as JAX's") {
    CHECK(nn::relu(-2.0) == 0.0);
    CHECK(nn::relu(3.0) == 3.0);
    CHECK(nn::relu.derivative(0.0) == 0.0);
    CHECK(nn::relu.derivative(1e-300) == 1.0);
    check_derivative(nn::relu);
  }
  SECTION("tanh") {
    for (const double v : x) CHECK(nn::tanh(v) == Approx(std::tanh(v)).epsilon(1e-14));
    check_derivative(nn::tanh);
  }
  SECTION("gelu: tanh approximation (JAX's default) and exact") {
    for (const double v : x) {
      const double approx =
          0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      CHECK(nn::gelu(v) == Approx(approx).epsilon(1e-13).margin(1e-300));
      CHECK(nn::Gelu{.approximate = false}(v) ==
            Approx(0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))).margin(1e-15));
    }
    check_derivative(nn::gelu);
    check_derivative(nn::Gelu{.approximate = false});
  }
  SECTION("float arrays and matrices, and vjp") {
    const Eigen::MatrixXf m = Eigen::MatrixXf::Random(5, 3) * 4;
    const Eigen::MatrixXf s = nn::swish(m);
    for (Eigen::Index i = 0; i < m.size(); ++i)
      CHECK(s(i) == Approx(m(i) / (1 + std::exp(-m(i)))).epsilon(1e-5));
    const Eigen::MatrixXf g = Eigen::MatrixXf::Ones(5, 3) * 2;
    CHECK(nn::tanh.vjp(m, g).isApprox((2 * (1 - m.array().tanh().square())).matrix(), 1e-5f));
  }
}

// --- predict, batched_predict, vmap
// ----------------------------------------------------------------

TEMPLATE_TEST_CASE("batched_predict == vmap(predict), column by column", "[nn][predict][vmap]",
                   float, double) {
  using T = TestType;
  const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-12;
  const auto params = nn::init_network_params<T>({50, 64, 32, 10}, rnd::key(11), T(0.3));
  const auto X = random_matrix<T>(rnd::key(12), 50, 37);
  const nn::Matrix<T> batched = nn::batched_predict(params, X);
  auto mapped = grove::vmap(nn::predict, grove::in_axes(std::nullopt, 1));
  const nn::Matrix<T> by_example = mapped(params, X);
  REQUIRE(batched.rows() == 10);
  REQUIRE(batched.cols() == 37);
  REQUIRE(by_example.rows() == 10);
  REQUIRE(by_example.cols() == 37);
  for (Eigen::Index j = 0; j < X.cols(); ++j) {
    INFO("column " << j);
    const nn::Vector<T> one = nn::predict(params, X.col(j));
    CHECK((batched.col(j) - one).cwiseAbs().maxCoeff() <= tol * (1 + one.cwiseAbs().maxCoeff()));
    CHECK((by_example.col(j) - one).norm() == 0);
  }
  // Another activation, through vmap's default axes (every argument over its last axis) with
  // the network captured.
  auto relu_predict = grove::vmap([&](const auto& x) { return nn::predict(params, x, nn::relu); });
  const nn::Matrix<T> r = relu_predict(X);
  CHECK((r - nn::batched_predict(params, X, nn::relu)).cwiseAbs().maxCoeff() <=
        tol * (1 + r.cwiseAbs().maxCoeff()));
}

TEST_CASE("predict: the walk-through's loop, and its errors", "[nn][predict]") {
  const auto params = nn::init_network_params<double>({3, 4, 2}, rnd::key(5), 0.7);
  const Eigen::Vector3d x(0.5, -1.0, 2.0);
  Eigen::VectorXd a = x;
  for (std::size_t l = 0; l < params.size(); ++l) {
    Eigen::VectorXd z = params[l].w * a + params[l].b;
    a = l + 1 < params.size() ? Eigen::VectorXd(z.array() / (1 + (-z.array()).exp())) : z;
  }
  CHECK(nn::predict(params, x).isApprox(a, 1e-14));
  CHECK(nn::dense(params[0], x).isApprox(params[0].w * x + params[0].b, 1e-15));
  CHECK_THROWS_WITH(nn::predict(params, Eigen::MatrixXd::Zero(3, 2)),
                    Contains("use batched_predict"));
  CHECK_THROWS_WITH(nn::predict(params, Eigen::VectorXd::Zero(5)),
                    Contains("the input has 5 features (rows) but layer 0's w is 4x3"));
  auto broken = params;
  broken[1].w.resize(2, 5);
  CHECK_THROWS_WITH(nn::batched_predict(broken, Eigen::MatrixXd::Zero(3, 2)),
                    Contains("layer 1's w is 2x5 but layer 0 has 4 outputs"));
  broken = params;
  broken[0].b.resize(3);
  CHECK_THROWS_WITH(nn::batched_predict(broken, Eigen::MatrixXd::Zero(3, 2)),
                    Contains("its b has 3 elements"));
  CHECK(nn::batched_predict(params, Eigen::MatrixXd::Zero(3, 0)).cols() == 0);
}

// --- loss
// ------------------------------------------------------------------------------------------

namespace {
// The plain reference: loops and std::exp, in long double.
template <class T>
long double reference_loss(const std::vector<nn::Dense<T>>& params, const nn::Matrix<T>& X,
                           const Eigen::VectorXi& labels) {
  long double total = 0;
  for (Eigen::Index j = 0; j < X.cols(); ++j) {
    std::vector<long double> a(X.col(j).data(), X.col(j).data() + X.rows());
    for (std::size_t l = 0; l < params.size(); ++l) {
      std::vector<long double> z(static_cast<std::size_t>(params[l].w.rows()));
      for (Eigen::Index i = 0; i < params[l].w.rows(); ++i) {
        long double s = params[l].b(i);
        for (Eigen::Index k = 0; k < params[l].w.cols(); ++k)
          s += params[l].w(i, k) * a[static_cast<std::size_t>(k)];
        z[static_cast<std::size_t>(i)] = l + 1 < params.size() ? s / (1 + std::exp(-s)) : s;
      }
      a = z;
    }
    long double m = a[0];
    for (long double v : a) m = std::max(m, v);
    long double sum = 0;
    for (long double v : a) sum += std::exp(v - m);
    total += m + std::log(sum) - a[static_cast<std::size_t>(labels(j))];
  }
  return total / X.cols();
}
}  // namespace

TEMPLATE_TEST_CASE("loss against a plain reference; labels and one-hot agree", "[nn][loss]", float,
                   double) {
  using T = TestType;
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-13;
  const auto params = nn::init_network_params<T>({20, 16, 8, 5}, rnd::key(21), T(0.4));
  const auto X = random_matrix<T>(rnd::key(22), 20, 23);
  const Eigen::VectorXi labels = random_labels(rnd::key(23), 23, 5);
  const T l = nn::loss(params, X, labels);
  CHECK(l == Approx(static_cast<double>(reference_loss(params, X, labels))).epsilon(tol));
  nn::Matrix<T> onehot = nn::Matrix<T>::Zero(5, 23);
  for (Eigen::Index j = 0; j < 23; ++j) onehot(labels(j), j) = 1;
  CHECK(nn::loss(params, X, onehot) == Approx(l).epsilon(tol));
  // Per example: the batch's loss is the mean of the one-example losses (the log-softmax is never
  // taken over the batch).
  double mean = 0;
  for (Eigen::Index j = 0; j < 23; ++j)
    mean += nn::loss(params, X.col(j), labels.segment(j, 1)) / 23.0;
  CHECK(l == Approx(mean).epsilon(tol));
  // Other label types, and a label row vector.
  const Eigen::Matrix<std::uint8_t, Eigen::Dynamic, 1> bytes = labels.cast<std::uint8_t>();
  CHECK(nn::loss(params, X, bytes) == l);
  const Eigen::RowVectorXi row = labels.transpose();
  CHECK(nn::loss(params, X, row) == l);
  // The same through value_and_grad.
  CHECK(nn::value_and_grad(params, X, labels).loss == Approx(l).epsilon(tol));
}

TEST_CASE("log_softmax is per column and finite for logits of +-1e4", "[nn][loss]") {
  Eigen::MatrixXf z(3, 2);
  z << 1e4f, 1, -1e4f, 2, 0, 3;
  const Eigen::MatrixXf ls = nn::log_softmax(z);
  REQUIRE(ls.allFinite());
  CHECK(ls(0, 0) == 0.0f);
  CHECK(ls(1, 0) == -2e4f);
  CHECK(ls(2, 0) == -1e4f);
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  CHECK(ls(0, 1) == Approx(1 - lse).epsilon(1e-6));
  CHECK(ls(2, 1) == Approx(3 - lse).epsilon(1e-6));
  CHECK(nn::softmax(z).colwise().sum().isApprox(Eigen::RowVectorXf::Ones(2), 1e-6f));
  // The fused loss and its gradient at huge logits.
  const Eigen::Vector2i labels(1, 2);
  const auto [loss, grad] = nn::softmax_cross_entropy.value_and_grad(z, labels);
  REQUIRE(std::isfinite(loss));
  CHECK(loss == Approx((2e4 + (lse - 3)) / 2).epsilon(1e-6));
  REQUIRE(grad.allFinite());
  CHECK(grad(0, 0) == Approx(0.5f));
  CHECK(grad(1, 0) == Approx(-0.5f));
  // A network whose logits are huge.
  auto params = nn::init_network_params<float>({2, 3}, rnd::key(1));
  params[0].w.setConstant(1e4f);
  const Eigen::MatrixXf x = Eigen::MatrixXf::Ones(2, 1);
  CHECK(std::isfinite(nn::loss(params, x, Eigen::VectorXi::Zero(1))));
  auto [l2, g2] = nn::value_and_grad(params, x, Eigen::VectorXi::Zero(1));
  CHECK(std::isfinite(l2));
  CHECK(grove::tree_all(grove::tree_map([](const auto& p) { return p.allFinite(); }, g2)));
}

TEST_CASE("evaluate is loss and accuracy in one pass", "[nn][loss][metrics]") {
  const auto params = nn::init_network_params<float>({12, 9, 4}, rnd::key(24), 0.5f);
  const Eigen::MatrixXf X = random_matrix<float>(rnd::key(25), 12, 1100);  // more than one chunk
  const Eigen::VectorXi y = random_labels(rnd::key(26), 1100, 4);
  nn::Workspace<float> ws;
  const auto [loss, accuracy] = nn::evaluate(params, X, y, ws);
  CHECK(loss == nn::loss(params, X, y, ws));
  CHECK(accuracy == nn::accuracy(params, X, y, ws));
  const Eigen::MatrixXf logits = nn::batched_predict(params, X);
  const auto best = nn::argmax(logits);
  CHECK(accuracy == Approx((best.cast<int>().array() == y.array()).cast<double>().mean()));
  CHECK(accuracy > 0.1);
  // No examples: both are means of nothing, NaN (an accuracy of 0 would say all were wrong), for a
  // network and for a model.
  const auto empty = nn::evaluate(params, Eigen::MatrixXf(12, 0), Eigen::VectorXi(0), ws);
  CHECK(std::isnan(empty.loss));
  CHECK(std::isnan(empty.accuracy));
  CHECK(std::isnan(nn::accuracy(params, Eigen::MatrixXf(12, 0), Eigen::VectorXi(0), ws)));
  const auto model =
      nn::sequential(nn::dense(12, 9), nn::swish, nn::layer_norm(9), nn::dense(9, 4));
  const auto model_params = nn::init<float>(model, rnd::key(27));
  nn::Workspace<float> model_ws;
  const auto model_empty =
      nn::evaluate(model, model_params, Eigen::MatrixXf(12, 0), Eigen::VectorXi(0), model_ws);
  CHECK(std::isnan(model_empty.loss));
  CHECK(std::isnan(model_empty.accuracy));
  // And the workspace goes on as before.
  CHECK(nn::evaluate(params, X, y, ws).accuracy == accuracy);
}

TEST_CASE("sigmoid_binary_cross_entropy refuses targets outside [0, 1]", "[nn][loss][errors]") {
  // optax computes -y log s - (1 - y) log(1 - s) for any y; grove refuses a y that is no
  // probability (the loss is then unbounded below), naming it, before any work.
  const Eigen::MatrixXd z = random_matrix<double>(rnd::key(30), 3, 4);
  Eigen::MatrixXd y = Eigen::MatrixXd::Constant(3, 4, 0.25);
  y(0, 0) = 0;
  y(2, 3) = 1;  // the ends are probabilities
  const double fine = nn::sigmoid_binary_cross_entropy(z, y);
  CHECK(std::isfinite(fine));
  const auto model = nn::sequential(nn::dense(5, 3), nn::layer_norm(3));
  const auto params = nn::init<double>(model, rnd::key(31));
  const Eigen::MatrixXd X = random_matrix<double>(rnd::key(32), 5, 4);
  nn::Workspace<double> ws;
  auto grads = params;
  const double before =
      nn::value_and_grad_into(model, params, X, y, nn::sigmoid_binary_cross_entropy, grads, ws);
  for (const double bad : {1.5, -0.25, std::nan(""), std::numeric_limits<double>::infinity()}) {
    INFO("target " << bad);
    Eigen::MatrixXd wrong = y;
    wrong(2, 1) = bad;
    const std::string value = std::to_string(bad);
    CHECK_THROWS_AS(nn::sigmoid_binary_cross_entropy(z, wrong), grove::argument_error);
    CHECK_THROWS_WITH(nn::sigmoid_binary_cross_entropy(z, wrong),
                      "grove::nn::sigmoid_binary_cross_entropy: target " + value +
                          " at output 2 of example 1 is outside [0, 1] (targets are "
                          "probabilities)");
    CHECK_THROWS_WITH(nn::sigmoid_binary_cross_entropy.value_and_grad(z, wrong),
                      Contains("target " + value + " at output 2 of example 1"));
    CHECK_THROWS_WITH(
        nn::value_and_grad_into(model, params, X, wrong, nn::sigmoid_binary_cross_entropy, grads,
                                ws),
        "grove::nn::value_and_grad: sigmoid_binary_cross_entropy's target " + value +
            " at output 2 of example 1 is outside [0, 1] (targets are probabilities)");
    CHECK_THROWS_AS(nn::loss(model, params, X, wrong, nn::sigmoid_binary_cross_entropy, ws),
                    grove::argument_error);
  }
  CHECK(nn::value_and_grad_into(model, params, X, y, nn::sigmoid_binary_cross_entropy, grads, ws) ==
        before);
}

TEST_CASE("loss: clear errors for bad targets", "[nn][loss]") {
  const auto params = nn::init_network_params<float>({4, 3}, rnd::key(2));
  const Eigen::MatrixXf X = Eigen::MatrixXf::Zero(4, 3);
  CHECK_THROWS_WITH(nn::loss(params, X, Eigen::Vector3i(0, 3, 1)),
                    Contains("label 3 of example 1 is outside [0, 3)"));
  CHECK_THROWS_WITH(nn::loss(params, X, Eigen::Vector3i(0, -1, 1)),
                    Contains("label -1 of example 1"));
  CHECK_THROWS_WITH(nn::loss(params, X, Eigen::Vector2i(0, 1)),
                    Contains("got 2 labels for a batch of 3"));
  CHECK_THROWS_WITH(nn::loss(params, X, Eigen::MatrixXf::Zero(4, 3)),
                    Contains("the targets are 4x3 but the outputs are 3x3"));
  CHECK_THROWS_WITH(nn::loss(params, Eigen::MatrixXf::Zero(5, 3), Eigen::Vector3i(0, 1, 2)),
                    Contains("the input has 5 features"));
  CHECK(std::isnan(nn::loss(params, Eigen::MatrixXf::Zero(4, 0), Eigen::VectorXi(0))));
}

// --- gradients -----------------------------------------------------------------------------------

namespace {
// Central finite differences of the loss with respect to every parameter, in leaf order.
template <class P, class Y, class Act>
Eigen::VectorXd numeric_grad(P params, const Eigen::MatrixXd& X, const Y& y, const Act& act) {
  const double h = 1e-6;
  std::vector<double> out;
  nn::Workspace<double> ws;
  grove::tree_for_each(
      [&](auto& leaf) {
        for (Eigen::Index i = 0; i < leaf.size(); ++i) {
          const double saved = leaf(i);
          leaf(i) = saved + h;
          const double up = nn::loss(params, X, y, ws, act);
          leaf(i) = saved - h;
          const double down = nn::loss(params, X, y, ws, act);
          leaf(i) = saved;
          out.push_back((up - down) / (2 * h));
        }
      },
      params);
  return Eigen::Map<Eigen::VectorXd>(out.data(), static_cast<Eigen::Index>(out.size()));
}

template <class Act>
void check_gradients(const std::vector<Eigen::Index>& sizes, Eigen::Index batch, const Act& act,
                     int targets, std::uint64_t seed) {
  const auto params = nn::init_network_params<double>(sizes, rnd::key(seed), 0.6);
  const Eigen::MatrixXd X = random_matrix<double>(rnd::key(seed + 1), sizes.front(), batch);
  const Eigen::Index classes = sizes.back();
  auto run = [&](const auto& y) {
    const auto [loss, grads] = nn::value_and_grad(params, X, y, act);
    static_assert(
        std::is_same_v<std::remove_cvref_t<decltype(grads)>, std::vector<nn::Dense<double>>>);
    CHECK(grove::tree_structure(grads) == grove::tree_structure(params));
    CHECK(loss == Approx(nn::loss(params, X, y, act)).epsilon(1e-14));
    const Eigen::VectorXd analytic = grove::ravel(grads).first;
    const Eigen::VectorXd numeric = numeric_grad(params, X, y, act);
    const double rel = (analytic - numeric).norm() / std::max(analytic.norm(), numeric.norm());
    INFO("activation " << Act::name << ", batch " << batch << ", relative error " << rel);
    CHECK(rel < 1e-6);
    CHECK((analytic - numeric).cwiseAbs().maxCoeff() < 1e-7);
  };
  if (targets == 0) {
    run(random_labels(rnd::key(seed + 2), batch, classes));
  } else {
    // Soft targets: probabilities that are not one-hot.
    Eigen::MatrixXd y = random_matrix<double>(rnd::key(seed + 3), classes, batch).array().exp();
    y.array().rowwise() /= y.colwise().sum().array();
    run(y);
  }
}
}  // namespace

TEST_CASE("value_and_grad matches central finite differences (double)", "[nn][grad]") {
  // Every activation on every shape; integer labels and soft targets take turns.
  const std::vector<std::pair<std::vector<Eigen::Index>, Eigen::Index>> shapes{
      {{3, 4, 2}, 1}, {{5, 7, 6, 3}, 9}, {{4, 3}, 5}, {{6, 10, 5, 4}, 17}};
  std::uint64_t seed = 100;
  int targets = 0;
  for (const auto& [sizes, batch] : shapes) {
    check_gradients(sizes, batch, nn::swish, targets++ % 2, seed++);
    check_gradients(sizes, batch, nn::relu, targets++ % 2, seed++);
    check_gradients(sizes, batch, nn::tanh, targets++ % 2, seed++);
    check_gradients(sizes, batch, nn::gelu, targets++ % 2, seed++);
    check_gradients(sizes, batch, nn::Gelu{.approximate = false}, targets++ % 2, seed++);
  }
}

TEST_CASE("The public VJPs compose into value_and_grad", "[nn][grad]") {
  const auto params = nn::init_network_params<double>({6, 8, 7, 4}, rnd::key(31), 0.5);
  const Eigen::MatrixXd X = random_matrix<double>(rnd::key(32), 6, 11);
  const Eigen::VectorXi y = random_labels(rnd::key(33), 11, 4);
  // Forward, keeping what backprop needs.
  std::vector<Eigen::MatrixXd> inputs{X}, pre;
  for (std::size_t l = 0; l < params.size(); ++l) {
    pre.push_back(nn::dense(params[l], inputs.back()));
    if (l + 1 < params.size()) inputs.push_back(nn::swish(pre.back()));
  }
  // loss = cross_entropy(log_softmax(logits)): two VJPs, or the fused one.
  const Eigen::MatrixXd log_probs = nn::log_softmax(pre.back());
  const double loss = nn::cross_entropy(log_probs, y);
  const Eigen::MatrixXd g_logits =
      nn::log_softmax_vjp(pre.back(), nn::cross_entropy_vjp(log_probs, y));
  const auto fused = nn::softmax_cross_entropy.value_and_grad(pre.back(), y);
  CHECK(fused.loss == Approx(loss).epsilon(1e-14));
  CHECK(fused.grad.isApprox(g_logits, 1e-13));
  // Backward through the layers.
  std::vector<nn::Dense<double>> grads(params.size());
  Eigen::MatrixXd g = g_logits;
  for (std::size_t l = params.size(); l-- > 0;) {
    const auto vjp = nn::dense_vjp(params[l], inputs[l], g);
    grads[l] = vjp.grads;
    if (l > 0) g = nn::swish.vjp(pre[l - 1], vjp.dx);
  }
  const auto [engine_loss, engine_grads] = nn::value_and_grad(params, X, y);
  CHECK(engine_loss == Approx(loss).epsilon(1e-14));
  for (std::size_t l = 0; l < params.size(); ++l) {
    CHECK(engine_grads[l].w.isApprox(grads[l].w, 1e-12));
    CHECK(engine_grads[l].b.isApprox(grads[l].b, 1e-12));
  }
  CHECK_THROWS_WITH(nn::dense_vjp(params[0], X, g_logits), Contains("expected x: in x batch"));
}

TEST_CASE("Gradients of other network containers keep their type", "[nn][grad]") {
  const auto v = nn::init_network_params<float>({4, 5, 3}, rnd::key(41), 0.5f);
  const std::array<nn::Dense<float>, 2> params{v[0], v[1]};
  const Eigen::MatrixXf X = random_matrix<float>(rnd::key(42), 4, 6);
  const Eigen::VectorXi y = random_labels(rnd::key(43), 6, 3);
  auto [loss, grads] = nn::value_and_grad(params, X, y);
  static_assert(std::is_same_v<decltype(grads), std::array<nn::Dense<float>, 2>>);
  const auto from_vector = nn::value_and_grad(v, X, y);
  // One result type, whichever network: the walk-through's name is the same type.
  static_assert(std::is_same_v<std::remove_const_t<decltype(from_vector)>,
                               nn::value_and_grad_result<float, std::vector<nn::Dense<float>>>>);
  static_assert(std::is_same_v<nn::ValueAndGrad<float, std::vector<nn::Dense<float>>>,
                               nn::value_and_grad_result<float, std::vector<nn::Dense<float>>>>);
  CHECK(loss == from_vector.loss);
  CHECK(grads[1] == from_vector.grads[1]);
}

TEST_CASE("Results repeat exactly for a thread count; other thread counts agree to rounding",
          "[nn][grad][threads]") {
  const auto params = nn::init_network_params<float>({96, 160, 128, 10}, rnd::key(51), 0.1f);
  const Eigen::MatrixXf X = random_matrix<float>(rnd::key(52), 96, 80);
  const Eigen::VectorXi y = random_labels(rnd::key(53), 80, 10);
  nn::ValueAndGrad<float, std::vector<nn::Dense<float>>> one{0, {}}, two{0, {}}, again{0, {}};
  {
    ThreadCount threads(1);
    one = nn::value_and_grad(params, X, y);
    again = nn::value_and_grad(params, X, y);
  }
  {
    ThreadCount threads(2);
    two = nn::value_and_grad(params, X, y);
    const auto two_again = nn::value_and_grad(params, X, y);
    CHECK(two.loss == two_again.loss);
    CHECK(two.grads == two_again.grads);
  }
  CHECK(one.loss == again.loss);
  CHECK(one.grads == again.grads);
  CHECK(two.loss == Approx(one.loss).epsilon(1e-6));
  for (std::size_t l = 0; l < params.size(); ++l) {
    CHECK(two.grads[l].w.isApprox(one.grads[l].w, 1e-5f));
    CHECK(two.grads[l].b.isApprox(one.grads[l].b, 1e-5f));
  }
}
