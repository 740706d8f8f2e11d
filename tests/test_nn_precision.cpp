// grove::nn's precision policies (grove/nn/precision_policy.hpp, grove/nn/precision.hpp): jmp's
// policy grammar; the policies grove refuses; the default policy bit for bit as no policy; a dense
// layer's products under bf16 compute against a double-precision product of the rounded inputs;
// the gradients of a model under bf16 compute against its float32 gradients; the output dtype;
// train_step and its fused SGD under a policy.
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <grove/nn.hpp>
#include <grove/optim.hpp>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "nn_fixtures.hpp"

namespace nn = grove::nn;
namespace rnd = grove::random;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using Eigen::Index;
using Eigen::MatrixXd;
using Eigen::MatrixXf;

namespace {

bool is_bf16(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return (bits & 0xffffu) == 0;
}

MatrixXf rounded(const MatrixXf& m) {
  return m.unaryExpr([](float x) { return grove::detail::round_to_bf16(x); });
}

// The bound on a float sum of k products, from the rounded operands: (k + 2) eps sum |a| |b|.
MatrixXd sum_bound(const MatrixXd& abs_product, Index k) {
  return abs_product * ((static_cast<double>(k) + 2) * std::numeric_limits<float>::epsilon());
}

void check_within(const MatrixXf& got, const MatrixXd& want, const MatrixXd& bound,
                  const char* what) {
  INFO(what);
  REQUIRE(got.rows() == want.rows());
  REQUIRE(got.cols() == want.cols());
  double worst = 0;
  for (Index j = 0; j < want.cols(); ++j)
    for (Index i = 0; i < want.rows(); ++i) {
      const double err = std::abs(static_cast<double>(got(i, j)) - want(i, j));
      worst = std::max(worst, err / (bound(i, j) + 1e-300));
      if (err > bound(i, j)) {
        INFO("element (" << i << ", " << j << "): " << got(i, j) << " vs " << want(i, j)
                         << ", bound " << bound(i, j));
        CHECK(err <= bound(i, j));
        return;
      }
    }
  INFO("largest error / bound " << worst);
  CHECK(worst <= 1.0);
}

// The relative distance of two trees' leaves, as one vector: |a - b| / |b|.
template <class P>
double tree_distance(const P& a, const P& b) {
  double diff = 0, norm = 0;
  grove::tree_for_each(
      [&](const auto& x, const auto& y) {
        diff += (x.template cast<double>() - y.template cast<double>()).squaredNorm();
        norm += y.template cast<double>().squaredNorm();
      },
      a, b);
  return std::sqrt(diff / norm);
}

}  // namespace

TEST_CASE("get_policy reads jmp's grammar", "[nn][precision]") {
  using nn::dtype;
  const nn::precision_policy mixed =
      nn::get_policy("params=float32,compute=bfloat16,output=float32");
  CHECK(mixed == nn::precision_policy::mixed_bf16());
  CHECK(mixed.str() == "p=f32,c=bf16,o=f32");
  CHECK(nn::get_policy("p=f32,c=bf16,o=f32") == mixed);
  CHECK(nn::get_policy(" p = full , c = bf16 , o = full ") == mixed);
  // What is left out follows jmp: params float32, compute the params', output the compute's.
  CHECK(nn::get_policy("c=bf16") ==
        nn::precision_policy{dtype::float32, dtype::bfloat16, dtype::bfloat16});
  CHECK(nn::get_policy("p=f64") ==
        nn::precision_policy{dtype::float64, dtype::float64, dtype::float64});
  CHECK(nn::get_policy("o=bf16") ==
        nn::precision_policy{dtype::float32, dtype::float32, dtype::bfloat16});
  // One dtype is all three; jmp's "half" is float16 on a CPU.
  CHECK(nn::get_policy("bf16") ==
        nn::precision_policy{dtype::bfloat16, dtype::bfloat16, dtype::bfloat16});
  CHECK(nn::get_policy("full") == nn::precision_policy::full());
  CHECK(nn::get_policy("float32") == nn::precision_policy{});
  CHECK(nn::get_policy("half").compute == dtype::float16);
  CHECK(nn::get_policy("float64").str() == "p=f64,c=f64,o=f64");

  CHECK_THROWS_AS(nn::get_policy("c=bf17"), grove::argument_error);
  CHECK_THROWS_WITH(nn::get_policy("c=bf17"),
                    StartsWith("grove::nn::get_policy: unknown dtype 'bf17' in policy 'c=bf17'"));
  CHECK_THROWS_WITH(nn::get_policy("q=f32"), Contains("unknown key 'q'"));
  CHECK_THROWS_WITH(nn::get_policy("c=f32,c=bf16"), Contains("gives 'c' twice"));
  CHECK_THROWS_WITH(nn::get_policy("c=bf16,,o=f32"), Contains("not key=dtype"));
  CHECK_THROWS_WITH(nn::get_policy("c=bf16,"), Contains("not key=dtype"));
  CHECK_THROWS_WITH(nn::get_policy(""), Contains("unknown dtype ''"));
}

TEST_CASE("with_policy refuses what grove cannot compute in, saying why", "[nn][precision]") {
  const auto net = nn::sequential(nn::dense(4, 3), nn::relu, nn::dense(3, 2));
  auto refused = [&](const char* policy, const char* why) {
    INFO(policy);
    CHECK_THROWS_AS(nn::with_policy(net, nn::get_policy(policy)), grove::argument_error);
    CHECK_THROWS_WITH(nn::with_policy(net, nn::get_policy(policy)),
                      StartsWith("grove::nn::with_policy: policy ") && Contains(why));
  };
  refused("bf16", "parameters must be float32 or float64");
  refused("p=f16", "parameters must be float32 or float64");
  refused("c=f16,o=f32", "does not compute in float16");
  refused("half", "parameters must be float32 or float64");
  refused("p=f64,c=f32", "compute must be the parameters' dtype, or bfloat16 with float32");
  refused("p=f64,c=bf16", "compute must be the parameters' dtype, or bfloat16 with float32");
  refused("p=f64,c=f64,o=f32", "output must be the parameters' dtype");
  CHECK_NOTHROW(nn::with_policy(net, nn::get_policy("p=f64")));
  CHECK_NOTHROW(nn::with_policy(net, nn::get_policy("c=bf16")));

  // The parameters' dtype against the policy, before any work, naming both.
  const auto mixed = nn::with_policy(net, nn::precision_policy::mixed_bf16());
  const auto params = nn::init<double>(mixed, rnd::key(0));
  const MatrixXd X = MatrixXd::Ones(4, 3);
  CHECK_THROWS_AS(nn::apply(mixed, params, X), grove::argument_error);
  CHECK_THROWS_WITH(nn::apply(mixed, params, X),
                    StartsWith("grove::nn::apply: layer (the model) has the policy p=f32,c=bf16,"
                               "o=f32 but its parameters are float64"));
  CHECK_THROWS_WITH(nn::value_and_grad(mixed, params, X, MatrixXd::Zero(2, 3), nn::mse),
                    StartsWith("grove::nn::value_and_grad: layer (the model) has the policy"));
}

TEST_CASE("The full policy computes what no policy does, bit for bit", "[nn][precision]") {
  const auto net = nn::sequential(nn::dense(13, 21), nn::gelu, nn::layer_norm(21), nn::dense(21, 7),
                                  nn::relu, nn::dense(7, 5));
  const auto chain = nn::sequential(nn::dense(13, 21), nn::tanh, nn::dense(21, 5));
  const MatrixXf X = nn_test::random_matrix<float>(rnd::key(1), 13, 37);
  const Eigen::VectorXi labels = nn_test::random_labels(rnd::key(2), 37, 5);
  auto same = [&](const auto& model) {
    const auto full = nn::with_policy(model, nn::precision_policy::full());
    const auto params = nn::init<float>(model, rnd::key(3));
    static_assert(
        std::is_same_v<decltype(params), const decltype(nn::init<float>(full, rnd::key(3)))>,
        "a policy keeps the parameters' tree");
    CHECK(nn::apply(full, params, X) == nn::apply(model, params, X));
    CHECK(nn::apply(full, params, X.col(0)) == nn::apply(model, params, X.col(0)));
    const auto a = nn::value_and_grad(full, params, X, labels, nn::softmax_cross_entropy);
    const auto b = nn::value_and_grad(model, params, X, labels, nn::softmax_cross_entropy);
    CHECK(a.loss == b.loss);
    grove::tree_for_each([](const auto& x, const auto& y) { CHECK(x == y); }, a.grads, b.grads);
  };
  same(net);    // layer by layer
  same(chain);  // the fused engine
}

TEST_CASE("A dense layer's products under bf16 compute: rounded inputs, float sums",
          "[nn][precision][gemm]") {
  INFO("bf16 products: " << grove::nn::detail::kernel_name<float>());
  const nn::precision_policy mixed = nn::precision_policy::mixed_bf16();
  // Shapes around the kernels' blocks: thin outputs, odd inner dimensions, one example.
  struct Shape {
    Index in, out, batch;
  };
  const Shape shapes[] = {{1, 3, 5},    {7, 10, 1},     {31, 17, 9},
                          {33, 40, 70}, {129, 10, 128}, {300, 70, 33}};
  for (const Shape& s : shapes) {
    for (const int threads : {1, 2}) {
      nn_test::ThreadCount team(threads);
      INFO("in " << s.in << ", out " << s.out << ", batch " << s.batch << ", threads " << threads);
      const auto layer = nn::dense(s.in, s.out);
      nn::Dense<float> p = layer.init<float>(rnd::key(4));
      p.b = nn_test::random_matrix<float>(rnd::key(5), s.out, 1);
      const MatrixXf x = nn_test::random_matrix<float>(rnd::key(6), s.in, s.batch);
      const MatrixXf dy = nn_test::random_matrix<float>(rnd::key(7), s.out, s.batch);
      MatrixXf y(s.out, s.batch), dx(s.in, s.batch);
      nn::Dense<float> g{MatrixXf(s.out, s.in), Eigen::VectorXf(s.out)};
      nn::Workspace<float> ws;  // the pass's memory, as model.hpp's passes hand it to a layer
      nn::layer_context ctx{true, nullptr, &nn::detail::memory_of(ws)};
      ctx.policy = &mixed;
      layer.forward<float>(p, nn::ConstMatrixMap<float>(x.data(), s.in, s.batch),
                           nn::MatrixMap<float>(y.data(), s.out, s.batch), {}, ctx);
      layer.backward<float>(p, nn::ConstMatrixMap<float>(x.data(), s.in, s.batch),
                            nn::ConstMatrixMap<float>(y.data(), s.out, s.batch),
                            nn::ConstMatrixMap<float>(dy.data(), s.out, s.batch), g,
                            nn::MatrixMap<float>(dx.data(), s.in, s.batch), {}, ctx);

      const MatrixXd w = rounded(p.w).cast<double>(), xr = rounded(x).cast<double>(),
                     dyr = rounded(dy).cast<double>();
      const MatrixXd wa = w.cwiseAbs(), xa = xr.cwiseAbs(), dya = dyr.cwiseAbs();
      const MatrixXd y_want = (w * xr).colwise() + p.b.cast<double>();
      const MatrixXd y_bound =
          sum_bound(wa * xa, s.in + 1) + (p.b.cast<double>().cwiseAbs().replicate(1, s.batch)) *
                                             std::numeric_limits<float>::epsilon();
      check_within(y, y_want, y_bound, "y = w x + b");
      check_within(g.w, dyr * xr.transpose(), sum_bound(dya * xa.transpose(), s.batch), "dw");
      check_within(dx, w.transpose() * dyr, sum_bound(wa.transpose() * dya, s.out), "dx");
      // The bias gradient is no product: the sum of dy, unrounded.
      check_within(g.b, dy.cast<double>().rowwise().sum(),
                   sum_bound(dy.cast<double>().cwiseAbs().rowwise().sum(), s.batch), "db");
    }
  }
}

TEST_CASE("A model's gradients under bf16 compute against its float32 gradients",
          "[nn][precision][grad]") {
  // Documented in docs/nn.md. bfloat16 keeps 8 significant bits: each product's input moves by
  // up to 2^-9 of itself. The loss moves by far less than 1%; a gradient, which is a sum over the
  // batch of terms that mostly cancel (random labels at initialisation), by a few percent of its
  // size: here 3-4% for the whole tree and up to 6% for a leaf.
  constexpr double loss_tolerance = 1e-2, tree_tolerance = 5e-2, leaf_tolerance = 1e-1;
  const auto chain =
      nn::sequential(nn::dense(64, 48), nn::relu, nn::dense(48, 32), nn::tanh, nn::dense(32, 10));
  const auto layered =
      nn::sequential(nn::dense(64, 48), nn::relu, nn::layer_norm(48),
                     nn::residual(nn::sequential(nn::dense(48, 48), nn::gelu)), nn::dense(48, 10));
  const MatrixXf X = nn_test::random_matrix<float>(rnd::key(8), 64, 96);
  const Eigen::VectorXi labels = nn_test::random_labels(rnd::key(9), 96, 10);
  auto compare = [&](const auto& model, const char* what) {
    INFO(what);
    const auto mixed = nn::with_policy(model, nn::precision_policy::mixed_bf16());
    const auto params = nn::init<float>(model, rnd::key(10));
    for (const int threads : {1, 2}) {
      nn_test::ThreadCount team(threads);
      INFO("threads " << threads);
      const auto f32 = nn::value_and_grad(model, params, X, labels, nn::softmax_cross_entropy);
      const auto bf16 = nn::value_and_grad(mixed, params, X, labels, nn::softmax_cross_entropy);
      CHECK(bf16.loss == Approx(f32.loss).epsilon(loss_tolerance));
      CHECK(bf16.loss != f32.loss);  // the products did round
      const double d = tree_distance(bf16.grads, f32.grads);
      INFO("gradients' relative distance " << d);
      CHECK(d < tree_tolerance);
      CHECK(d > 0);
      grove::tree_for_each(
          [&](const auto& b, const auto& f) {
            const double leaf = (b - f).norm() / (f.norm() + 1e-30);
            INFO("leaf distance " << leaf);
            CHECK(leaf < leaf_tolerance);
          },
          bf16.grads, f32.grads);
      const MatrixXf out32 = nn::apply(model, params, X), out16 = nn::apply(mixed, params, X);
      CHECK((out16 - out32).norm() <= loss_tolerance * out32.norm());
    }
  };
  compare(chain, "a chain of dense layers (the fused engine)");
  compare(layered, "layer by layer");
}

TEST_CASE("The fused engine and the layers agree under bf16 compute", "[nn][precision][engine]") {
  const auto chain = nn::sequential(nn::dense(40, 33), nn::swish, nn::dense(33, 6));
  const auto mixed = nn::with_policy(chain, nn::precision_policy::mixed_bf16());
  // A policy nested in a sequence runs layer by layer (the engine runs a top-level chain only).
  const auto nested = nn::sequential(mixed);
  const auto params = nn::init<float>(mixed, rnd::key(11));
  const auto nested_params = std::make_tuple(params);
  const MatrixXf X = nn_test::random_matrix<float>(rnd::key(12), 40, 50);
  const MatrixXf Y = nn_test::random_matrix<float>(rnd::key(13), 6, 50);
  const auto engine = nn::value_and_grad(mixed, params, X, Y, nn::mse);
  const auto layers = nn::value_and_grad(nested, nested_params, X, Y, nn::mse);
  const auto f32 = nn::value_and_grad(chain, params, X, Y, nn::mse);
  CHECK(engine.loss == Approx(layers.loss).epsilon(1e-4));
  CHECK(engine.loss != f32.loss);
  CHECK(layers.loss != f32.loss);
  CHECK(tree_distance(std::make_tuple(engine.grads), layers.grads) < 1e-3);
  CHECK((nn::apply(mixed, params, X) - nn::apply(nested, nested_params, X)).norm() <
        1e-4 * nn::apply(chain, params, X).norm());
  // One example runs matrix-vector products that round as they read (not the GEMM kernels).
  const MatrixXf one = nn::apply(mixed, params, X.col(3));
  CHECK((one - nn::apply(mixed, params, X).col(3)).norm() < 1e-4 * one.norm());
  CHECK(one != nn::apply(chain, params, X.col(3)));
}

TEST_CASE("One example under bf16 compute: rounded inputs, float sums", "[nn][precision]") {
  for (const auto& [in, out] : {std::pair<Index, Index>{37, 45}, {5, 3}, {64, 8}, {9, 77}}) {
    INFO("in " << in << ", out " << out);
    const auto model =
        nn::with_policy(nn::sequential(nn::dense(in, out)), nn::precision_policy::mixed_bf16());
    auto params = nn::init<float>(model, rnd::key(20));
    std::get<0>(params).b = nn_test::random_matrix<float>(rnd::key(21), out, 1);
    const MatrixXf x = nn_test::random_matrix<float>(rnd::key(22), in, 1);
    const MatrixXf y = nn::apply(model, params, x);
    const MatrixXd w = rounded(std::get<0>(params).w).cast<double>(),
                   xr = rounded(x).cast<double>();
    const MatrixXd b = std::get<0>(params).b.cast<double>();
    check_within(y, w * xr + b,
                 sum_bound(w.cwiseAbs() * xr.cwiseAbs(), in + 1) +
                     b.cwiseAbs() * std::numeric_limits<float>::epsilon(),
                 "y = w x + b");
    // The batch's way (the GEMM kernels) agrees within the same bound.
    MatrixXf two(in, 2);
    two << x, x;
    check_within(nn::apply(model, params, two).col(1), w * xr + b,
                 sum_bound(w.cwiseAbs() * xr.cwiseAbs(), in + 1) +
                     b.cwiseAbs() * std::numeric_limits<float>::epsilon(),
                 "the same column of a batch");
  }
}

TEST_CASE("The output dtype rounds the model's output; the gradient passes through",
          "[nn][precision]") {
  const auto chain = nn::sequential(nn::dense(9, 12), nn::relu, nn::dense(12, 4));
  const auto layered =
      nn::sequential(nn::dense(9, 12), nn::relu, nn::layer_norm(12), nn::dense(12, 4));
  const MatrixXf X = nn_test::random_matrix<float>(rnd::key(14), 9, 20);
  const Eigen::VectorXi labels = nn_test::random_labels(rnd::key(15), 20, 4);
  auto check = [&](const auto& model) {
    const auto out16 = nn::with_policy(model, nn::get_policy("o=bf16"));
    const auto params = nn::init<float>(model, rnd::key(16));
    const MatrixXf y = nn::apply(out16, params, X), y32 = nn::apply(model, params, X);
    CHECK(y == rounded(y32));
    CHECK(y.unaryExpr([](float v) { return is_bf16(v) ? 1.0f : 0.0f; }).sum() == y.size());
    CHECK(nn::apply(out16, params, X.col(2)) == rounded(y32.col(2)));
    // The loss of the rounded logits; the gradient of the loss with respect to them flows back
    // through the rounding as if it were not there.
    const auto vg = nn::value_and_grad(out16, params, X, labels, nn::softmax_cross_entropy);
    double want = 0;
    for (Index j = 0; j < X.cols(); ++j) {
      const Eigen::VectorXd z = y.col(j).cast<double>();
      want += std::log((z.array() - z.maxCoeff()).exp().sum()) + z.maxCoeff() - z(labels(j));
    }
    CHECK(vg.loss == Approx(want / static_cast<double>(X.cols())).epsilon(1e-6));
    const auto vg32 = nn::value_and_grad(model, params, X, labels, nn::softmax_cross_entropy);
    const double d = tree_distance(vg.grads, vg32.grads);
    CHECK(d > 0);
    CHECK(d < 1e-2);
  };
  check(chain);
  check(layered);
}

TEST_CASE("train_step under a policy: every optimizer, and the fused SGD",
          "[nn][precision][step]") {
  const auto chain = nn::sequential(nn::dense(30, 24), nn::relu, nn::dense(24, 5));
  const auto mixed = nn::with_policy(chain, nn::precision_policy::mixed_bf16());
  const MatrixXf X = nn_test::random_matrix<float>(rnd::key(17), 30, 40);
  const Eigen::VectorXi labels = nn_test::random_labels(rnd::key(18), 40, 5);
  const auto start = nn::init<float>(mixed, rnd::key(19));

  // adam: train_step is value_and_grad under the policy, then the optimizer's step, bit for bit.
  {
    const auto tx = grove::optim::adam(1e-3f);
    auto params = start, separate = start;
    auto state = tx.init(params), separate_state = tx.init(separate);
    nn::StepWorkspace<decltype(params)> ws;
    for (int step = 0; step < 3; ++step) {
      const float loss = nn::train_step(mixed, params, X, labels, nn::softmax_cross_entropy,
                                        nullptr, tx, state, ws);
      auto vg = nn::value_and_grad(mixed, separate, X, labels, nn::softmax_cross_entropy);
      CHECK(loss == vg.loss);
      tx.step(separate, vg.grads, separate_state);
    }
    grove::tree_for_each([](const auto& a, const auto& b) { CHECK(a == b); }, params, separate);
  }
  // sgd: the fused step (the update inside the backward products, from the same rounded inputs)
  // against value_and_grad and sgd's own step.
  {
    const auto tx = grove::optim::sgd(0.05f);
    auto params = start, separate = start;
    auto state = tx.init(params), separate_state = tx.init(separate);
    nn::StepWorkspace<decltype(params)> ws;
    for (int step = 0; step < 3; ++step) {
      nn::train_step(mixed, params, X, labels, nn::softmax_cross_entropy, nullptr, tx, state, ws);
      auto vg = nn::value_and_grad(mixed, separate, X, labels, nn::softmax_cross_entropy);
      tx.step(separate, vg.grads, separate_state);
    }
    CHECK(tree_distance(params, separate) < 1e-5);
    CHECK(tree_distance(params, start) > 1e-3);
    // And the policy made a difference to the step.
    auto plain = start;
    auto plain_state = tx.init(plain);
    nn::StepWorkspace<decltype(plain)> plain_ws;
    for (int step = 0; step < 3; ++step)
      nn::train_step(chain, plain, X, labels, nn::softmax_cross_entropy, nullptr, tx, plain_state,
                     plain_ws);
    CHECK(tree_distance(params, plain) > 0);
    CHECK(tree_distance(params, plain) < 1e-2);
  }
}
