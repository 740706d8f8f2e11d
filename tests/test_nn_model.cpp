// grove::nn's composable models: every layer, activation and loss against central finite
// differences in double; the fused engine against the layer-by-layer passes; the classic MLP
// written with nn::sequential against the walk-through's value_and_grad and sgd_step; train_step
// against value_and_grad and each optimizer's own step; dropout's masks; a user's own layer;
// errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <grove/nn.hpp>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "nn_fixtures.hpp"
#include "optim_fixtures.hpp"

namespace nn = grove::nn;
namespace rnd = grove::random;
using Catch::Matchers::StartsWith;

// --- a user's own layers, outside grove's namespace ---------------------------------------------

namespace user {

// y = a * tanh(x), with one learnable a per feature (a pytree of one leaf: key path .a).
template <class T>
struct ScaledTanhParams {
  Eigen::Matrix<T, Eigen::Dynamic, 1> a;
};
GROVE_NODE(ScaledTanhParams, a);

struct ScaledTanh {
  Eigen::Index features;
  std::string name() const { return "ScaledTanh"; }
  Eigen::Index input_features() const { return features; }
  // tanh(x), kept for the backward pass.
  Eigen::Index saved_size(Eigen::Index in, Eigen::Index batch) const { return in * batch; }
  template <class T>
  ScaledTanhParams<T> init(const grove::random::Key&) const {
    return {Eigen::Matrix<T, Eigen::Dynamic, 1>::Constant(features, T(1.5))};
  }
  template <class T>
  void forward(const ScaledTanhParams<T>& p, nn::ConstMatrixMap<T> x, nn::MatrixMap<T> y,
               std::span<T> saved, const nn::layer_context&) const {
    nn::MatrixMap<T> t(saved.data(), x.rows(), x.cols());
    t = x.array().tanh().matrix();
    y = p.a.asDiagonal() * t;
  }
  template <class T>
  void backward(const ScaledTanhParams<T>& p, nn::ConstMatrixMap<T> x, nn::ConstMatrixMap<T>,
                nn::ConstMatrixMap<T> dy, ScaledTanhParams<T>& g, nn::MatrixMap<T> dx,
                std::span<T> saved, const nn::layer_context&) const {
    nn::ConstMatrixMap<T> t(saved.data(), x.rows(), x.cols());
    g.a = (dy.array() * t.array()).rowwise().sum().matrix();
    if (dx.size() != 0) dx = (p.a.asDiagonal() * (dy.array() * (1 - t.array().square())).matrix());
  }
};

// A linear layer without bias whose parameters are one matrix (a leaf as the whole tree), and
// whose backward pass forgets a factor: check_grads must see it.
struct BrokenLinear {
  Eigen::Index in, out;
  Eigen::Index input_features() const { return in; }
  Eigen::Index output_features(Eigen::Index) const { return out; }
  template <class T>
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> init(const grove::random::Key& key) const {
    return grove::random::normal<T>(key, out, in);
  }
  template <class T>
  void forward(const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>& w, nn::ConstMatrixMap<T> x,
               nn::MatrixMap<T> y, std::span<T>, const nn::layer_context&) const {
    y.noalias() = w * x;
  }
  template <class T>
  void backward(const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>& w, nn::ConstMatrixMap<T> x,
                nn::ConstMatrixMap<T>, nn::ConstMatrixMap<T> dy,
                Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>& g, nn::MatrixMap<T> dx,
                std::span<T>, const nn::layer_context&) const {
    g.noalias() = T(0.5) * dy * x.transpose();  // wrong: the factor 0.5
    if (dx.size() != 0) dx.noalias() = w.transpose() * dy;
  }
};

}  // namespace user

namespace {

using MatrixXd = Eigen::MatrixXd;

// The worst relative error check_grads reports, with each leaf printed when it fails.
template <class M, class P, class DY, class Loss>
double worst_error(const M& model, const P& params, const MatrixXd& X, const DY& Y,
                   const Loss& loss, const rnd::Key* key = nullptr) {
  double worst = 0;
  for (const auto& c : nn::check_grads(model, params, X, Y, loss, key)) {
    INFO(c.path << ": " << c.relative_error);
    CHECK(c.relative_error < 1e-6);
    worst = std::max(worst, c.relative_error);
  }
  return worst;
}

MatrixXd random_input(std::uint32_t seed, Eigen::Index rows, Eigen::Index cols) {
  return nn_test::random_matrix<double>(rnd::key(seed), rows, cols);
}

// Targets in (0, 1), for the binary cross-entropy.
MatrixXd probabilities(std::uint32_t seed, Eigen::Index rows, Eigen::Index cols) {
  return rnd::uniform<double>(rnd::key(seed), rows, cols, 0.05, 0.95);
}

template <class A>
void check_activation(const A& act) {
  INFO(A::name);
  for (const auto& [in, hidden, batch] :
       {std::array<Eigen::Index, 3>{3, 4, 2}, std::array<Eigen::Index, 3>{5, 7, 6}}) {
    auto model = nn::sequential(nn::dense(in, hidden), act, nn::dense(hidden, 2));
    const auto params = nn::init<double>(model, rnd::key(7));
    const MatrixXd X = random_input(1, in, batch);
    const MatrixXd Y = random_input(2, 2, batch);
    worst_error(model, params, X, Y, nn::mse);
    // The activation alone: its input gradient.
    const auto none = nn::init<double>(act, rnd::key(0));
    worst_error(act, none, X, random_input(3, in, batch), nn::mse);
  }
}

}  // namespace

TEST_CASE("Every activation's VJP against finite differences", "[nn][model][grad]") {
  check_activation(nn::swish);
  check_activation(nn::relu);
  check_activation(nn::tanh);
  check_activation(nn::gelu);
  check_activation(nn::Gelu{.approximate = false});
  check_activation(nn::sigmoid);
  check_activation(nn::softplus);
  check_activation(nn::elu);
  check_activation(nn::leaky_relu);
  check_activation(nn::identity);
}

TEST_CASE("The new activations' values", "[nn][model][activations]") {
  CHECK(nn::sigmoid(0.5) == Approx(1 / (1 + std::exp(-0.5))));
  CHECK(nn::softplus(2.0) == Approx(std::log1p(std::exp(2.0))));
  CHECK(nn::softplus(-800.0) == 0.0);
  CHECK(nn::softplus(800.0) == 800.0);
  CHECK(nn::elu(-1.0) == Approx(std::exp(-1.0) - 1));
  CHECK(nn::elu(2.0) == 2.0);
  CHECK(nn::leaky_relu(-2.0) == Approx(-0.02));
  CHECK(nn::leaky_relu(3.0) == 3.0);
  CHECK(nn::identity(-4.0) == -4.0);
  CHECK(nn::elu.derivative(-1.0) == Approx(std::exp(-1.0)));
  CHECK(nn::leaky_relu.derivative(-1.0) == Approx(0.01));
}

TEST_CASE("Every loss against its formula and finite differences", "[nn][model][loss]") {
  const MatrixXd Z = random_input(4, 3, 5);
  const MatrixXd T = random_input(5, 3, 5);
  const MatrixXd P = probabilities(6, 3, 5);
  const Eigen::VectorXi labels = nn_test::random_labels(rnd::key(7), 5, 3);
  SECTION("values from the documented formulas") {
    CHECK(nn::mse(Z, T) == Approx((Z - T).array().square().mean()));
    const Eigen::ArrayXXd r = (Z - T).array();
    const double delta = 0.5;
    const Eigen::ArrayXXd q = r.abs().min(delta);
    CHECK(nn::huber(delta)(Z, T) == Approx((0.5 * q.square() + delta * (r.abs() - q)).mean()));
    const Eigen::ArrayXXd s = 1 / (1 + (-Z.array()).exp());
    CHECK(nn::sigmoid_binary_cross_entropy(Z, P) ==
          Approx((-P.array() * s.log() - (1 - P.array()) * (1 - s).log()).mean()));
    double ce = 0;
    for (Eigen::Index j = 0; j < 5; ++j)
      ce += std::log(Z.col(j).array().exp().sum()) - Z(labels(j), j);
    CHECK(nn::softmax_cross_entropy(Z, labels) == Approx(ce / 5));
    // per_example: one value per column, whose mean is the loss.
    const Eigen::VectorXd each = nn::mse.per_example(Z, T);
    REQUIRE(each.size() == 5);
    CHECK(each(2) == Approx((Z.col(2) - T.col(2)).squaredNorm() / 3));
    CHECK(each.mean() == Approx(nn::mse(Z, T)));
    CHECK(nn::softmax_cross_entropy.per_example(Z, labels).mean() == Approx(ce / 5));
  }
  SECTION("gradients through a dense layer, several shapes") {
    for (const auto& [in, out, batch] :
         {std::array<Eigen::Index, 3>{4, 3, 5}, std::array<Eigen::Index, 3>{2, 6, 9}}) {
      const auto model = nn::dense(in, out);
      const auto params = nn::init<double>(model, rnd::key(1));
      const MatrixXd X = 3 * random_input(8, in, batch);
      worst_error(model, params, X, random_input(9, out, batch), nn::mse);
      worst_error(model, params, X, random_input(9, out, batch), nn::huber);
      worst_error(model, params, X, random_input(9, out, batch), nn::huber(0.3));
      worst_error(model, params, X, probabilities(10, out, batch),
                  nn::sigmoid_binary_cross_entropy);
      worst_error(model, params, X,
                  nn_test::random_labels(rnd::key(11), batch, static_cast<int>(out)),
                  nn::softmax_cross_entropy);
      MatrixXd soft = probabilities(12, out, batch);
      soft.array().rowwise() /= soft.colwise().sum().array();
      worst_error(model, params, X, soft, nn::softmax_cross_entropy);
    }
  }
}

TEST_CASE("layer_norm, residual, dropout and nested sequences against finite differences",
          "[nn][model][grad]") {
  const auto model = nn::sequential(
      nn::dense(6, 5), nn::swish,
      nn::residual(nn::sequential(nn::layer_norm(5, 1e-6), nn::dense(5, 5), nn::gelu)),
      nn::dropout(0.25),
      nn::residual(nn::sequential(nn::residual(nn::sequential(nn::tanh, nn::dense(5, 5))),
                                  nn::layer_norm(5, 1e-3))),
      nn::dense(5, 3));
  const auto params = nn::init<double>(model, rnd::key(0));
  const MatrixXd X = random_input(1, 6, 7);
  const Eigen::VectorXi y = nn_test::random_labels(rnd::key(2), 7, 3);
  const rnd::Key key = rnd::key(3);
  worst_error(model, params, X, y, nn::softmax_cross_entropy);
  worst_error(model, params, X, y, nn::softmax_cross_entropy, &key);
  // layer_norm alone, on a batch of one and of several.
  const auto ln = nn::layer_norm(4);
  nn::LayerNormParams<double> lp{random_input(4, 4, 1), random_input(5, 4, 1)};
  worst_error(ln, lp, random_input(6, 4, 1), random_input(7, 4, 1), nn::mse);
  worst_error(ln, lp, random_input(6, 4, 8), random_input(7, 4, 8), nn::mse);
}

TEST_CASE("A run-time sequence (nn::sequential of a vector) is a model too", "[nn][model]") {
  std::vector<decltype(nn::sequential(nn::dense(4, 4), nn::elu))> blocks;
  for (int i = 0; i < 3; ++i) blocks.push_back(nn::sequential(nn::dense(4, 4), nn::elu));
  const auto model = nn::sequential(nn::sequential(blocks), nn::dense(4, 2));
  const auto params = nn::init<double>(model, rnd::key(0));
  REQUIRE(std::get<0>(params).size() == 3);
  worst_error(model, params, random_input(1, 4, 5), random_input(2, 2, 5), nn::mse);
  const auto paths = grove::tree_leaves_with_path(params);
  CHECK(grove::keystr(paths[2].first) == "[0][1][0].w");
}

TEST_CASE("evaluate of a model: the mean cross-entropy and the accuracy of its outputs",
          "[nn][model][metrics]") {
  // Both ways a model runs (the fused chain, the layer-by-layer pass), over more than one chunk
  // of examples, against the formulas evaluated here in double on apply's outputs.
  const auto chain = nn::sequential(nn::dense(6, 5), nn::tanh, nn::dense(5, 4));
  const auto generic =
      nn::sequential(nn::dense(6, 5), nn::swish,
                     nn::residual(nn::sequential(nn::layer_norm(5), nn::gelu)), nn::dense(5, 4));
  const Eigen::Index batch = 2100;
  const Eigen::MatrixXf X = nn_test::random_matrix<float>(rnd::key(7), 6, batch) * 2.0f;
  const Eigen::VectorXi y = nn_test::random_labels(rnd::key(8), batch, 4);
  auto check = [&](const auto& model) {
    const auto params = nn::init<float>(model, rnd::key(9));
    const Eigen::MatrixXd logits = nn::apply(model, params, X).template cast<double>();
    auto oracle = [&](Eigen::Index k) {  // {mean cross-entropy, accuracy} of the first k examples
      double total = 0, correct = 0;
      for (Eigen::Index j = 0; j < k; ++j) {
        const double m = logits.col(j).maxCoeff();
        total += m + std::log((logits.col(j).array() - m).exp().sum()) - logits(y(j), j);
        Eigen::Index best = 0;
        logits.col(j).maxCoeff(&best);
        correct += best == y(j) ? 1 : 0;
      }
      return std::pair{total / static_cast<double>(k), correct / static_cast<double>(k)};
    };
    nn::Workspace<float> ws;
    const auto [loss, accuracy] = nn::evaluate(model, params, X, y, ws);
    const auto [want_loss, want_accuracy] = oracle(batch);
    CHECK(loss == Approx(want_loss).epsilon(1e-5));
    // (apply ran the whole set at once, evaluate in chunks: a near tie may round the other way)
    CHECK(accuracy == Approx(want_accuracy).margin(1.5 / static_cast<double>(batch)));
    CHECK(accuracy > 0.05);
    // A smaller set through the same workspace.
    const auto small = nn::evaluate(model, params, X.leftCols(3), y.head(3), ws);
    CHECK(small.loss == Approx(oracle(3).first).epsilon(1e-5));
    CHECK(small.accuracy == oracle(3).second);
    CHECK(std::isnan(nn::evaluate(model, params, X.leftCols(0), y.head(0), ws).loss));
    CHECK_THROWS_AS(nn::evaluate(model, params, X.leftCols(2), Eigen::Vector2i(0, 4), ws),
                    grove::argument_error);
    CHECK_THROWS_WITH(nn::evaluate(model, params, X.leftCols(2), Eigen::Vector2i(0, 4), ws),
                      StartsWith("grove::nn::evaluate: label 4 of example 1 is outside [0, 4)"));
  };
  SECTION("the fused chain") {
    check(chain);
  }
  SECTION("layer by layer") {
    check(generic);
  }
}

TEST_CASE("A user's own layer works inside sequential and residual", "[nn][model][user]") {
  const auto model = nn::sequential(nn::dense(3, 4), user::ScaledTanh{4},
                                    nn::residual(user::ScaledTanh{4}), nn::dense(4, 2));
  auto params = nn::init<double>(model, rnd::key(0));
  std::get<1>(params).a << 0.5, 1.0, 1.5, 2.0;
  worst_error(model, params, random_input(1, 3, 6), random_input(2, 2, 6), nn::mse);
  const auto paths = grove::tree_leaves_with_path(params);
  CHECK(grove::keystr(paths[2].first) == "[1].a");
  // Its input width is checked like grove's layers'.
  const MatrixXd X5 = random_input(1, 3, 6);
  const auto wrong = nn::sequential(nn::dense(3, 5), user::ScaledTanh{4});
  const auto wp = nn::init<double>(wrong, rnd::key(0));
  CHECK_THROWS_AS(nn::apply(wrong, wp, X5), grove::shape_error);
  CHECK_THROWS_WITH(nn::apply(wrong, wp, X5),
                    "grove::nn::apply: layer [1] (ScaledTanh) expects 4 features, the input has 5");
}

TEST_CASE("check_grads finds a wrong VJP", "[nn][model][check_grads]") {
  const auto model = nn::sequential(user::BrokenLinear{3, 2}, nn::tanh);
  const auto params = nn::init<double>(model, rnd::key(0));
  const auto report =
      nn::check_grads(model, params, random_input(1, 3, 4), random_input(2, 2, 4), nn::mse);
  REQUIRE(report.size() == 2);
  CHECK(report[0].path == "[0]");
  CHECK(report[0].relative_error > 0.1);  // half the gradient
  CHECK(report[1].path == "input");
  CHECK(report[1].relative_error < 1e-6);  // its input gradient is right
}

TEST_CASE("The input gradient", "[nn][model][grad]") {
  const auto model = nn::sequential(nn::dense(3, 4), nn::softplus, nn::dense(4, 1));
  const auto params = nn::init<double>(model, rnd::key(0));
  const MatrixXd X = random_input(1, 3, 5);
  const MatrixXd Y = random_input(2, 1, 5);
  const auto r = nn::value_and_grad_with_input(model, params, X, Y, nn::mse);
  REQUIRE(r.input_grad.rows() == 3);
  REQUIRE(r.input_grad.cols() == 5);
  // Central differences on each input element.
  MatrixXd x = X;
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    const double v = x.data()[i], h = 1e-6;
    x.data()[i] = v + h;
    const double up = nn::mse(nn::apply(model, params, x), Y);
    x.data()[i] = v - h;
    const double down = nn::mse(nn::apply(model, params, x), Y);
    x.data()[i] = v;
    CHECK(r.input_grad.data()[i] == Approx((up - down) / (2 * h)).epsilon(1e-6).margin(1e-9));
  }
  // The same loss and parameter gradients as without it.
  const auto plain = nn::value_and_grad(model, params, X, Y, nn::mse);
  CHECK(plain.loss == Approx(r.loss).epsilon(1e-14));
  CHECK(std::get<0>(plain.grads).w.isApprox(std::get<0>(r.grads).w, 1e-12));
}

TEST_CASE("init: flax's Dense and LayerNorm, keys split in layer order", "[nn][model][init]") {
  const auto model = nn::sequential(nn::dense(5, 4), nn::relu, nn::layer_norm(4),
                                    nn::dense(4, 3, nn::he_uniform<float>));
  const rnd::Key key = rnd::key(42);
  const auto params = nn::init<float>(model, key);
  const auto keys = rnd::split(key, 4);
  const auto w0 = nn::lecun_normal<float>.sample(rnd::split(keys[0])[0], 4, 5);
  CHECK(std::get<0>(params).w == w0);
  CHECK(std::get<0>(params).b == Eigen::VectorXf::Zero(4));
  CHECK(std::get<2>(params).scale == Eigen::VectorXf::Ones(4));
  CHECK(std::get<2>(params).bias == Eigen::VectorXf::Zero(4));
  CHECK(std::get<3>(params).w == nn::he_uniform<float>.sample(rnd::split(keys[3])[0], 3, 4));
  std::vector<std::string> paths;
  for (const auto& [path, leaf] : grove::tree_leaves_with_path(params)) {
    (void)leaf;
    paths.push_back(grove::keystr(path));
  }
  CHECK(paths ==
        std::vector<std::string>{"[0].w", "[0].b", "[2].scale", "[2].bias", "[3].w", "[3].b"});
  // A layer without parameters is an empty node (JAX's None).
  static_assert(std::is_same_v<std::tuple_element_t<1, std::remove_cvref_t<decltype(params)>>,
                               std::monostate>);
}

namespace {
// The classic MLP: the walk-through's parameters (a vector of Dense) in the sequential model's
// tuple, so that both APIs see the same numbers.
template <class T>
auto classic(const std::vector<nn::Dense<T>>& layers) {
  return std::tuple<nn::Dense<T>, std::monostate, nn::Dense<T>, std::monostate, nn::Dense<T>>{
      layers[0], {}, layers[1], {}, layers[2]};
}
const auto classic_model =
    nn::sequential(nn::dense(20, 16), nn::swish, nn::dense(16, 12), nn::swish, nn::dense(12, 5));
}  // namespace

TEST_CASE("The classic MLP via sequential: today's loss, gradients and sgd_step",
          "[nn][model][classic]") {
  for (const int threads : {1, 2}) {
    nn_test::ThreadCount scope(threads);
    const auto layers = nn::init_network_params<float>({20, 16, 12, 5}, rnd::key(0), 0.3f);
    const auto params = classic(layers);
    const Eigen::MatrixXf X = nn_test::random_matrix<float>(rnd::key(1), 20, 33);
    const Eigen::VectorXi y = nn_test::random_labels(rnd::key(2), 33, 5);
    const auto old = nn::value_and_grad(layers, X, y);
    const auto now = nn::value_and_grad(classic_model, params, X, y, nn::softmax_cross_entropy);
    // The same engine, the same passes: the same bits.
    CHECK(now.loss == old.loss);
    CHECK(std::get<0>(now.grads).w == old.grads[0].w);
    CHECK(std::get<2>(now.grads).b == old.grads[1].b);
    CHECK(std::get<4>(now.grads).w == old.grads[2].w);
    // The layer-by-layer passes (asking for the input gradient takes them) run the dense layers
    // and the activations after them with the engine's own code (detail/dense_slices.hpp): the
    // same bits as well.
    const auto generic =
        nn::value_and_grad_with_input(classic_model, params, X, y, nn::softmax_cross_entropy);
    CHECK(generic.loss == old.loss);
    CHECK(std::get<0>(generic.grads).w == old.grads[0].w);
    CHECK(std::get<0>(generic.grads).b == old.grads[0].b);
    CHECK(std::get<2>(generic.grads).w == old.grads[1].w);
    CHECK(std::get<4>(generic.grads).b == old.grads[2].b);
    // apply == batched_predict, and for one example == predict.
    CHECK(nn::apply(classic_model, params, X) == nn::batched_predict(layers, X));
    const Eigen::VectorXf one = nn::apply(classic_model, params, X.col(3));
    CHECK(one == nn::predict(layers, X.col(3)));
    // train_step with sgd is sgd_step; with adam, value_and_grad and adam's step.
    auto a = layers;
    auto b = params;
    nn::Workspace<float> ws;
    nn::StepWorkspace<decltype(b)> sws;
    auto opt = nn::sgd(0.1);
    auto state = opt.init(b);
    for (int step = 0; step < 3; ++step) {
      const float la = nn::sgd_step(a, X, y, 0.1f, ws);
      const float lb =
          nn::train_step(classic_model, b, X, y, nn::softmax_cross_entropy, opt, state, sws);
      CHECK(la == lb);
    }
    CHECK(std::get<0>(state).count == 3);
    CHECK(std::get<2>(b).w == a[1].w);
    // The fused step reads the schedule at the state's count and the chain's sign: a scheduled
    // sgd, and a step size of +lr (gradient ascent), each as value_and_grad + the optimizer's step.
    const auto schedule = grove::optim::exponential_decay(0.2, 1, 0.5);
    for (const auto& tx : {grove::optim::sgd(schedule),
                           grove::optim::chain(grove::optim::scale_by_learning_rate(0.1, false))}) {
      auto fused = params;
      auto separate = params;
      auto s_fused = tx.init(fused);
      auto s_separate = tx.init(separate);
      nn::StepWorkspace<decltype(fused)> fws;
      for (int step = 0; step < 3; ++step) {
        nn::train_step(classic_model, fused, X, y, nn::softmax_cross_entropy, tx, s_fused, fws);
        const auto [l, g] =
            nn::value_and_grad(classic_model, separate, X, y, nn::softmax_cross_entropy);
        tx.step(separate, g, s_separate);
      }
      CHECK(std::get<0>(s_fused).count == 3);
      CHECK(std::get<0>(fused).w.isApprox(std::get<0>(separate).w, 1e-5f));
      CHECK(std::get<4>(fused).b.isApprox(std::get<4>(separate).b, 1e-5f));
      CHECK_FALSE(std::get<0>(fused).w.isApprox(std::get<0>(params).w, 1e-3f));
    }
    auto adam = nn::adam(1e-2);
    auto sa = adam.init(a);
    auto sb = adam.init(b);
    std::vector<nn::Dense<float>> grads;
    for (int step = 0; step < 2; ++step) {
      nn::value_and_grad_into(a, X, y, grads, ws);
      adam.step(a, grads, sa);
      nn::train_step(classic_model, b, X, y, nn::softmax_cross_entropy, adam, sb, sws);
    }
    CHECK(std::get<4>(b).w == a[2].w);
    CHECK(std::get<0>(b).b == a[0].b);
  }
}

TEST_CASE("train_step with every optimizer is value_and_grad and the optimizer's step, bit for bit",
          "[nn][model][optim]") {
  namespace optim = grove::optim;
  const auto layers = nn::init_network_params<float>({20, 16, 12, 5}, rnd::key(0), 0.3f);
  const auto params = classic(layers);
  using P = std::remove_cvref_t<decltype(params)>;
  const Eigen::MatrixXf X = nn_test::random_matrix<float>(rnd::key(1), 20, 33);
  const Eigen::VectorXi y = nn_test::random_labels(rnd::key(2), 33, 5);
  const auto weights = [](const P& p) {
    return grove::tree_map([](const auto& leaf) { return leaf.cols() > 1; }, p);
  };
  for (const int threads : {1, 2}) {
    nn_test::ThreadCount scope(threads);
    // Three steps of train_step against value_and_grad and the optimizer's own step: the same
    // engine's gradients and the same step, so parameters and states agree exactly (any update
    // train_step folds into its passes must keep that).
    auto against_step = [&](const char* name, const auto& tx) {
      INFO(name << ", threads " << threads);
      auto stepped = params;
      auto separate = params;
      auto s_stepped = tx.init(stepped);
      auto s_separate = tx.init(separate);
      nn::StepWorkspace<P> ws;
      for (int step = 0; step < 3; ++step) {
        const float l = nn::train_step(classic_model, stepped, X, y, nn::softmax_cross_entropy, tx,
                                       s_stepped, ws);
        const auto [want, g] =
            nn::value_and_grad(classic_model, separate, X, y, nn::softmax_cross_entropy);
        tx.step(separate, g, s_separate);
        CHECK(l == want);
      }
      CHECK(optim_test::same_leaves(stepped, separate));
      CHECK(optim_test::same_leaves(s_stepped, s_separate));
      CHECK_FALSE(optim_test::same_leaves(stepped, params));
      return s_stepped;
    };
    const auto s_adam = against_step("adam", nn::adam(1e-2));
    CHECK(std::get<0>(s_adam).count == 3);
    CHECK(std::get<1>(s_adam).count == 3);
    against_step("momentum", nn::momentum(0.1, 0.9));
    against_step("nesterov", optim::sgd(optim::exponential_decay(0.1, 1, 0.5), 0.9, true));
    against_step("adamw", optim::adamw(1e-2, 0.9, 0.999, 1e-8, 0.0, 0.1));
    against_step("masked adamw", optim::adamw(1e-2, 0.9, 0.999, 1e-8, 0.0, 0.1, weights));
    against_step("rmsprop", optim::rmsprop(1e-2));
    against_step("adagrad", optim::adagrad(1e-2));
    against_step("lion", optim::lion(1e-3));
    against_step("clip, adam", optim::chain(optim::clip(0.05), optim::adam(1e-2)));
    against_step("clip_by_global_norm, adam",
                 optim::chain(optim::clip_by_global_norm(0.5), optim::adam(1e-2)));
    against_step("multi_steps", optim::multi_steps(optim::adam(1e-2), 2));
  }
  // A model the fused engine cannot run (layer_norm).
  const auto model = nn::sequential(nn::dense(5, 6), nn::tanh, nn::layer_norm(6), nn::dense(6, 3));
  const auto norm_params = nn::init<double>(model, rnd::key(3));
  const MatrixXd Xd = random_input(4, 5, 9);
  const Eigen::VectorXi yd = nn_test::random_labels(rnd::key(5), 9, 3);
  const auto adam = nn::adam(1e-2);
  auto stepped = norm_params;
  auto separate = norm_params;
  auto s_stepped = adam.init(stepped);
  auto s_separate = adam.init(separate);
  nn::StepWorkspace<std::remove_cvref_t<decltype(norm_params)>> nws;
  for (int step = 0; step < 3; ++step) {
    nn::train_step(model, stepped, Xd, yd, nn::softmax_cross_entropy, adam, s_stepped, nws);
    const auto [l, g] = nn::value_and_grad(model, separate, Xd, yd, nn::softmax_cross_entropy);
    adam.step(separate, g, s_separate);
  }
  CHECK(optim_test::same_leaves(stepped, separate));
  CHECK(std::get<0>(s_stepped).count == 3);
  // A state of other parameters: the optimizer's error, before anything changes.
  const auto adam_f = nn::adam(1e-2);
  auto wrong =
      adam_f.init(classic(nn::init_network_params<float>({20, 16, 12, 4}, rnd::key(0), 0.3f)));
  auto kept = params;
  nn::StepWorkspace<P> ws;
  CHECK_THROWS_AS(
      nn::train_step(classic_model, kept, X, y, nn::softmax_cross_entropy, adam_f, wrong, ws),
      grove::shape_error);
  CHECK_THROWS_WITH(
      nn::train_step(classic_model, kept, X, y, nn::softmax_cross_entropy, adam_f, wrong, ws),
      StartsWith("grove::optim::step: leaf 4"));
  CHECK(optim_test::same_leaves(kept, params));
  CHECK(std::get<0>(wrong).count == 0);
}

TEST_CASE("train_step fuses plain sgd into the backward pass, and only plain sgd",
          "[nn][model][optim]") {
  namespace optim = grove::optim;
  // optim says which optimizers are plain SGD; nn's fusion asks it.
  const auto sgd = optim::sgd(0.1);
  using SgdState = decltype(sgd.init(std::declval<const std::vector<nn::Dense<float>>&>()));
  static_assert(optim::is_plain_sgd_v<decltype(sgd), SgdState>);
  static_assert(
      optim::is_plain_sgd_v<decltype(optim::sgd([](std::int64_t) { return 0.1; })), SgdState>);
  const auto momentum = optim::sgd(0.1, 0.9);
  static_assert(!optim::is_plain_sgd_v<decltype(momentum),
                                       decltype(momentum.init(
                                           std::declval<const std::vector<nn::Dense<float>>&>()))>);
  const auto adam = optim::adam(0.1);
  static_assert(!optim::is_plain_sgd_v<decltype(adam),
                                       decltype(adam.init(
                                           std::declval<const std::vector<nn::Dense<float>>&>()))>);

  // The fused step updates the parameters in the backward pass and never writes the gradients:
  // gradients poisoned with NaN stay NaN after a step of plain sgd, while an optimizer that is not
  // plain sgd (momentum 0 computes the same numbers) gets them written.
  const auto params = classic(nn::init_network_params<float>({6, 5, 4, 3}, rnd::key(0), 0.3f));
  using P = std::remove_cvref_t<decltype(params)>;
  const Eigen::MatrixXf X = nn_test::random_matrix<float>(rnd::key(1), 6, 7);
  const Eigen::VectorXi y = nn_test::random_labels(rnd::key(2), 7, 3);
  const auto model =
      nn::sequential(nn::dense(6, 5), nn::swish, nn::dense(5, 4), nn::swish, nn::dense(4, 3));
  auto poisoned = [](P& grads) {
    grove::tree_for_each([](auto& g) { g.setConstant(std::numeric_limits<float>::quiet_NaN()); },
                         grads);
  };
  auto all_nan = [](const P& grads) {
    bool all = true;
    grove::tree_for_each([&](const auto& g) { all = all && g.array().isNaN().all(); }, grads);
    return all;
  };
  auto fused = params;
  auto fused_state = sgd.init(fused);
  nn::StepWorkspace<P> fws;
  nn::shape_like(fws.grads, fused);
  poisoned(fws.grads);
  nn::train_step(model, fused, X, y, nn::softmax_cross_entropy, sgd, fused_state, fws);
  CHECK(all_nan(fws.grads));
  CHECK(std::get<0>(fused_state).count == 1);

  const auto zero_momentum = optim::sgd(0.1, 0.0);
  auto separate = params;
  auto separate_state = zero_momentum.init(separate);
  nn::StepWorkspace<P> sws;
  nn::shape_like(sws.grads, separate);
  poisoned(sws.grads);
  nn::train_step(model, separate, X, y, nn::softmax_cross_entropy, zero_momentum, separate_state,
                 sws);
  CHECK_FALSE(all_nan(sws.grads));
  CHECK(std::get<0>(fused).w.isApprox(std::get<0>(separate).w, 1e-5f));
  CHECK(std::get<4>(fused).b.isApprox(std::get<4>(separate).b, 1e-5f));
}

TEST_CASE("train_step's fused sgd checks the count and the learning rate as sgd's step does",
          "[nn][model][optim]") {
  namespace optim = grove::optim;
  const auto params = classic(nn::init_network_params<float>({6, 5, 4, 3}, rnd::key(0), 0.3f));
  using P = std::remove_cvref_t<decltype(params)>;
  const auto model =
      nn::sequential(nn::dense(6, 5), nn::swish, nn::dense(5, 4), nn::swish, nn::dense(4, 3));
  const Eigen::MatrixXf X = nn_test::random_matrix<float>(rnd::key(1), 6, 7);
  const Eigen::VectorXi y = nn_test::random_labels(rnd::key(2), 7, 3);
  nn::StepWorkspace<P> ws;
  // A crafted state whose count cannot be advanced: refused, nothing changed (without the check
  // the fused path adds one to INT64_MAX).
  const auto sgd = optim::sgd(0.1);
  for (const std::int64_t count : {std::numeric_limits<std::int64_t>::max(), std::int64_t{-2}}) {
    auto kept = params;
    auto state = sgd.init(kept);
    std::get<0>(state).count = count;
    CHECK_THROWS_AS(nn::train_step(model, kept, X, y, nn::softmax_cross_entropy, sgd, state, ws),
                    grove::argument_error);
    CHECK_THROWS_WITH(nn::train_step(model, kept, X, y, nn::softmax_cross_entropy, sgd, state, ws),
                      StartsWith("grove::optim::step: the optimizer state's leaf [0].count is " +
                                 std::to_string(count)));
    CHECK(optim_test::same_leaves(kept, params));
    CHECK(std::get<0>(state).count == count);
  }
  // A user's schedule that turns NaN at its third step: two steps, then refused.
  const auto nan_later =
      optim::sgd([](std::int64_t step) { return step < 2 ? 0.1 : std::nan(""); });
  auto stepped = params;
  auto state = nan_later.init(stepped);
  nn::train_step(model, stepped, X, y, nn::softmax_cross_entropy, nan_later, state, ws);
  nn::train_step(model, stepped, X, y, nn::softmax_cross_entropy, nan_later, state, ws);
  const auto after_two = stepped;
  CHECK_THROWS_WITH(
      nn::train_step(model, stepped, X, y, nn::softmax_cross_entropy, nan_later, state, ws),
      StartsWith("grove::optim::step: learning_rate is nan at count 2"));
  CHECK(optim_test::same_leaves(stepped, after_two));
  CHECK(std::get<0>(state).count == 2);
}

TEST_CASE("train_step with sgd on a model the engine cannot fuse: value_and_grad, then the step",
          "[nn][model][optim]") {
  const auto model = nn::sequential(nn::dense(5, 6), nn::tanh, nn::layer_norm(6), nn::dense(6, 3));
  const auto params = nn::init<double>(model, rnd::key(3));
  const MatrixXd X = random_input(4, 5, 9);
  const Eigen::VectorXi y = nn_test::random_labels(rnd::key(5), 9, 3);
  const auto tx = nn::sgd(grove::optim::exponential_decay(0.3, 1, 0.5));
  auto stepped = params;
  auto separate = params;
  auto s_stepped = tx.init(stepped);
  auto s_separate = tx.init(separate);
  nn::StepWorkspace<std::remove_cvref_t<decltype(params)>> ws;
  for (int step = 0; step < 3; ++step) {
    const double l =
        nn::train_step(model, stepped, X, y, nn::softmax_cross_entropy, tx, s_stepped, ws);
    const auto [want, g] = nn::value_and_grad(model, separate, X, y, nn::softmax_cross_entropy);
    tx.step(separate, g, s_separate);
    CHECK(l == Approx(want).epsilon(1e-12));
  }
  CHECK(std::get<0>(s_stepped).count == 3);
  CHECK(std::get<0>(stepped).w.isApprox(std::get<0>(separate).w, 1e-12));
  CHECK(std::get<2>(stepped).scale.isApprox(std::get<2>(separate).scale, 1e-12));
  CHECK_FALSE(std::get<0>(stepped).w.isApprox(std::get<0>(params).w, 1e-3));
  // Its errors name train_step, from the one check.
  CHECK_THROWS_WITH(nn::train_step(model, stepped, X.leftCols(2), Eigen::Vector2i(0, 3),
                                   nn::softmax_cross_entropy, tx, s_stepped, ws),
                    StartsWith("grove::nn::train_step: label 3 of example 1"));
  CHECK(std::get<0>(s_stepped).count == 3);
}

TEST_CASE("The fused engine and the layer-by-layer passes agree for every loss",
          "[nn][model][engine]") {
  const auto model = nn::sequential(nn::dense(7, 9), nn::tanh, nn::dropout(0.5), nn::dense(9, 9),
                                    nn::identity, nn::dense(9, 4));
  const auto params = nn::init<double>(model, rnd::key(0));
  const MatrixXd X = random_input(1, 7, 11);
  const MatrixXd Y = random_input(2, 4, 11);
  auto compare = [&](const auto& targets, const auto& loss) {
    const auto fused = nn::value_and_grad(model, params, X, targets, loss);  // no key: no dropout
    const auto layered = nn::value_and_grad_with_input(model, params, X, targets, loss);
    CHECK(fused.loss == layered.loss);
    grove::tree_for_each([](const auto& f, const auto& l) { CHECK(f == l); }, fused.grads,
                         layered.grads);
  };
  compare(Y, nn::mse);
  compare(Y, nn::huber(0.2));
  compare(probabilities(3, 4, 11), nn::sigmoid_binary_cross_entropy);
  compare(nn_test::random_labels(rnd::key(4), 11, 4), nn::softmax_cross_entropy);
  worst_error(model, params, X, Y, nn::mse);
}

TEST_CASE("Dropout: flax's masks, from the layer's own key", "[nn][model][dropout]") {
  const auto drop = nn::dropout(0.3);
  const Eigen::Index rows = 1000, cols = 1000;
  const Eigen::MatrixXf x = Eigen::MatrixXf::Constant(rows, cols, 2.0f);
  Eigen::MatrixXf y(rows, cols), y2(rows, cols);
  std::vector<float> saved(static_cast<std::size_t>(rows * cols));
  auto run = [&](const rnd::Key& key, Eigen::MatrixXf& out) {
    nn::layer_context ctx{true, &key, nullptr};
    drop.forward<float>(std::monostate{}, nn::ConstMatrixMap<float>(x.data(), rows, cols),
                        nn::MatrixMap<float>(out.data(), rows, cols), std::span<float>(saved), ctx);
  };
  const rnd::Key k1 = rnd::key(1), k2 = rnd::key(2);
  run(k1, y);
  // Kept elements are x * (1 / keep), the others 0; the mask is bernoulli(key, keep) in memory
  // order.
  const auto mask = rnd::bernoulli<float>(k1, 0.7f, rows * cols);
  Eigen::Index kept = 0, mismatches = 0;
  for (Eigen::Index i = 0; i < rows * cols; ++i) {
    const float expected = mask(i) ? 2.0f / 0.7f : 0.0f;
    mismatches += y.data()[i] == expected ? 0 : 1;
    kept += mask(i) ? 1 : 0;
  }
  CHECK(mismatches == 0);
  // The keep rate: 0.7 within five standard deviations of a binomial over 10^6 draws.
  const double rate = static_cast<double>(kept) / static_cast<double>(rows * cols);
  CHECK(std::abs(rate - 0.7) < 5 * std::sqrt(0.7 * 0.3 / 1e6));
  // Reproducible from the key, different across keys.
  run(k1, y2);
  CHECK(y2 == y);
  run(k2, y2);
  CHECK((y2.array() != y.array()).count() > rows * cols / 4);
  // No key, or apply: the identity.
  nn::layer_context off{true, nullptr, nullptr};
  drop.forward<float>(std::monostate{}, nn::ConstMatrixMap<float>(x.data(), rows, cols),
                      nn::MatrixMap<float>(y2.data(), rows, cols), std::span<float>(saved), off);
  CHECK(y2 == x);
  // Inside a sequence, layer i draws from fold_in(key, i) == split(key, n)[i].
  const auto model = nn::sequential(nn::identity, nn::dropout(0.5));
  const Eigen::MatrixXd X = Eigen::MatrixXd::Ones(6, 50);
  const rnd::Key key = rnd::key(9);
  const auto r = nn::value_and_grad_with_input(model, nn::init<double>(model, key), X,
                                               Eigen::MatrixXd::Zero(6, 50), nn::mse, &key);
  // d mse / dx = 2 y mask / (keep n) with y = x mask / keep.
  const auto m = rnd::bernoulli<float>(rnd::split(key, 2)[1], 0.5f, 300);
  for (Eigen::Index i = 0; i < 300; ++i)
    CHECK(r.input_grad.data()[i] == Approx(m(i) ? 2 * 2.0 * 2.0 / 300 : 0.0));
  CHECK(nn::apply(model, nn::init<double>(model, key), X) == X);
  CHECK_THROWS_AS(nn::dropout(1.0), grove::argument_error);
  CHECK_THROWS_WITH(nn::dropout(-0.1), StartsWith("grove::nn::dropout: rate must be in [0, 1)"));
}

TEST_CASE("Bad input throws before any work, naming the layer and both shapes",
          "[nn][model][errors]") {
  const auto model = nn::sequential(
      nn::dense(8, 6), nn::swish,
      nn::residual(nn::sequential(nn::layer_norm(6), nn::dense(6, 6), nn::gelu)), nn::dense(6, 3));
  const auto params = nn::init<double>(model, rnd::key(0));
  const MatrixXd X = random_input(1, 8, 4);
  const Eigen::VectorXi y = nn_test::random_labels(rnd::key(2), 4, 3);
  auto grads = params;
  std::get<0>(grads).w.setConstant(7);
  nn::Workspace<double> ws;
  using Catch::Matchers::Equals;
  SECTION("the input's features") {
    const MatrixXd X7 = random_input(1, 7, 4);
    CHECK_THROWS_AS(
        nn::value_and_grad_into(model, params, X7, y, nn::softmax_cross_entropy, grads, ws),
        grove::shape_error);
    CHECK_THROWS_WITH(
        nn::value_and_grad_into(model, params, X7, y, nn::softmax_cross_entropy, grads, ws),
        Equals("grove::nn::value_and_grad: layer [0] (Dense(8, 6)) expects 8 features, the input "
               "has 7"));
  }
  SECTION("a nested layer") {
    const auto bad =
        nn::sequential(nn::dense(8, 5), nn::swish,
                       nn::residual(nn::sequential(nn::layer_norm(6), nn::dense(6, 6), nn::gelu)));
    const auto bp = nn::init<double>(bad, rnd::key(0));
    CHECK_THROWS_WITH(nn::apply(bad, bp, X),
                      Equals("grove::nn::apply: layer [2][0] (LayerNorm(6)) expects 6 features, "
                             "the input has 5"));
  }
  SECTION("a residual block that changes the width") {
    const auto bad = nn::sequential(nn::dense(8, 6), nn::residual(nn::dense(6, 4)));
    const auto bp = nn::init<double>(bad, rnd::key(0));
    CHECK_THROWS_AS(nn::apply(bad, bp, X), grove::shape_error);
    CHECK_THROWS_WITH(nn::apply(bad, bp, X),
                      Equals("grove::nn::apply: layer [1] (Residual): its block maps 6 features "
                             "to 4; a residual block must keep the width"));
  }
  SECTION("parameters of the wrong shape") {
    auto wrong = params;
    std::get<0>(std::get<2>(wrong)) =
        nn::LayerNormParams<double>{Eigen::VectorXd::Ones(5), Eigen::VectorXd::Zero(6)};
    CHECK_THROWS_AS(nn::apply(model, wrong, X), grove::shape_error);
    CHECK_THROWS_WITH(nn::apply(model, wrong, X),
                      Equals("grove::nn::apply: layer [2][0] (LayerNorm(6)) has parameters scale "
                             "(5) and bias (6), expected (6) each"));
  }
  SECTION("targets of the wrong shape") {
    const MatrixXd Y = random_input(3, 2, 4);
    CHECK_THROWS_AS(nn::value_and_grad_into(model, params, X, Y, nn::mse, grads, ws),
                    grove::shape_error);
    CHECK_THROWS_WITH(nn::value_and_grad_into(model, params, X, Y, nn::mse, grads, ws),
                      Equals("grove::nn::value_and_grad: the targets are 2x4 but the outputs are "
                             "3x4 (outputs x batch)"));
    CHECK_THROWS_WITH(nn::value_and_grad_into(model, params, X, y, nn::mse, grads, ws),
                      Equals("grove::nn::value_and_grad: takes a matrix of targets (outputs x "
                             "batch), not integer labels"));
    const Eigen::VectorXi three = y.head(3);
    CHECK_THROWS_WITH(
        nn::value_and_grad_into(model, params, X, three, nn::softmax_cross_entropy, grads, ws),
        Equals("grove::nn::value_and_grad: got 3 labels for a batch of 4 examples"));
  }
  // Nothing was written.
  CHECK((std::get<0>(grads).w.array() == 7).all());
}
