// grove::nn's layer-by-layer passes on one team of threads: a model of layer norms, residual
// blocks, dropout and dense layers fused with their activations gives the same loss, parameter
// gradients and input gradient with 1 and 2 threads (to rounding) as with the activations run as
// layers of their own, and as central finite differences; a user's layer that opts in to sharing
// the team is called by every thread, one that does not still works (and is called on one thread).
#include <atomic>
#include <catch2/catch.hpp>
#include <grove/nn.hpp>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "nn_fixtures.hpp"

namespace nn = grove::nn;
namespace rnd = grove::random;
using Eigen::MatrixXd;

namespace user_team {

// y = 2 x, written by whichever threads call it: records the largest team it was called by.
struct Doubling {
  static inline std::atomic<int> widest_team{0};
  static inline std::atomic<int> calls{0};
  std::string name() const { return "Doubling"; }
  template <class T>
  std::monostate init(const grove::random::Key&) const {
    return {};
  }
  static void seen(const nn::layer_context& ctx) {
    ++calls;
    int w = widest_team.load();
    while (ctx.threads > w && !widest_team.compare_exchange_weak(w, ctx.threads)) {
    }
  }
  template <class T>
  void forward(const std::monostate&, nn::ConstMatrixMap<T> x, nn::MatrixMap<T> y, std::span<T>,
               const nn::layer_context& ctx) const {
    seen(ctx);
    // Each thread its own columns, then the barrier that the protocol asks for.
    for (Eigen::Index j = ctx.thread; j < x.cols(); j += ctx.threads) y.col(j) = 2 * x.col(j);
    nn::team_barrier(ctx);
  }
  template <class T>
  void backward(const std::monostate&, nn::ConstMatrixMap<T>, nn::ConstMatrixMap<T>,
                nn::ConstMatrixMap<T> dy, std::monostate&, nn::MatrixMap<T> dx, std::span<T>,
                const nn::layer_context& ctx) const {
    seen(ctx);
    if (dx.size() != 0)
      for (Eigen::Index j = ctx.thread; j < dy.cols(); j += ctx.threads) dx.col(j) = 2 * dy.col(j);
    nn::team_barrier(ctx);
  }
};

struct SharingDoubling : Doubling {
  static constexpr bool shares_team = true;
};

// The same layer without the opt-in: grove must call it on one thread only.
struct PlainDoubling : Doubling {};

}  // namespace user_team

namespace {

// Loss, gradients and input gradient of a model at a thread count, keyed (dropout on).
template <class M, class P, class DY, class Loss>
auto run_at(int threads, const M& model, const P& params, const MatrixXd& X, const DY& Y,
            const Loss& loss) {
  nn_test::ThreadCount scope(threads);
  const auto key = rnd::key(7);
  return nn::value_and_grad_with_input(model, params, X, Y, loss, &key);
}

// Every leaf's elements in leaf order (the fused and unfused models' parameters have the same
// leaves in different trees).
template <class P>
Eigen::VectorXd flat(const P& tree) {
  std::vector<double> out;
  grove::tree_for_each(
      [&](const auto& leaf) { out.insert(out.end(), leaf.data(), leaf.data() + leaf.size()); },
      tree);
  return Eigen::Map<const Eigen::VectorXd>(out.data(), static_cast<Eigen::Index>(out.size()));
}

template <class A, class B>
void check_same(const A& a, const B& b, double tolerance) {
  CHECK(a.loss == Approx(b.loss).epsilon(tolerance));
  const Eigen::VectorXd ga = flat(a.grads), gb = flat(b.grads);
  REQUIRE(ga.size() == gb.size());
  CHECK(ga.isApprox(gb, tolerance));
  CHECK(a.input_grad.isApprox(b.input_grad, tolerance));
}

}  // namespace

TEST_CASE("One team for the layer-by-layer pass: 1 and 2 threads agree, fused or not",
          "[nn][model][team]") {
  // Shapes large enough that the products are split between two threads.
  const Eigen::Index in = 70, width = 96, batch = 80;
  auto block = [&](auto act) {
    return nn::residual(nn::sequential(nn::layer_norm(width), nn::dense(width, width), act));
  };
  // The same computation with every activation wrapped in a sequence of its own, which keeps the
  // dense layer before it from fusing with it.
  auto unfused_block = [&](auto act) {
    return nn::residual(
        nn::sequential(nn::layer_norm(width), nn::dense(width, width), nn::sequential(act)));
  };
  const auto fused = nn::sequential(nn::dense(in, width), nn::swish, block(nn::gelu),
                                    nn::dropout(0.25), block(nn::tanh), nn::dense(width, 10));
  const auto unfused =
      nn::sequential(nn::dense(in, width), nn::sequential(nn::swish), unfused_block(nn::gelu),
                     nn::dropout(0.25), unfused_block(nn::tanh), nn::dense(width, 10));
  const auto params = nn::init<double>(fused, rnd::key(0));
  const auto other = nn::init<double>(unfused, rnd::key(0));  // the same numbers, other types
  const MatrixXd X = nn_test::random_matrix<double>(rnd::key(1), in, batch);
  const Eigen::VectorXi y = nn_test::random_labels(rnd::key(2), batch, 10);

  const auto one = run_at(1, fused, params, X, y, nn::softmax_cross_entropy);
  const auto two = run_at(2, fused, params, X, y, nn::softmax_cross_entropy);
  const auto one_unfused = run_at(1, unfused, other, X, y, nn::softmax_cross_entropy);
  const auto two_unfused = run_at(2, unfused, other, X, y, nn::softmax_cross_entropy);
  check_same(one, two, 1e-12);
  check_same(one, two_unfused, 1e-12);
  CHECK(one.loss == one_unfused.loss);  // one thread: the same sums in the same order
  CHECK(flat(one.grads) == flat(one_unfused.grads));
  CHECK(flat(params) == flat(other));

  // The loss alone and apply run on the team too.
  nn::Workspace<double> ws;
  for (const int threads : {1, 2}) {
    nn_test::ThreadCount scope(threads);
    CHECK(nn::loss(fused, params, X, y, nn::softmax_cross_entropy, ws) ==
          Approx(nn::loss(unfused, other, X, y, nn::softmax_cross_entropy, ws)).epsilon(1e-12));
    CHECK(nn::apply(fused, params, X).isApprox(nn::apply(unfused, other, X), 1e-12));
  }

  // And the two-thread gradients against central finite differences (dropout's masks fixed by
  // the key).
  nn_test::ThreadCount scope(2);
  const auto key = rnd::key(7);
  const MatrixXd Xs = X.leftCols(6);
  const auto small =
      nn::sequential(nn::dense(in, 12), nn::swish,
                     nn::residual(nn::sequential(nn::layer_norm(12), nn::dense(12, 12), nn::gelu)),
                     nn::dropout(0.25), nn::dense(12, 3), nn::tanh);
  const auto small_params = nn::init<double>(small, rnd::key(3));
  const Eigen::VectorXi ys3 = nn_test::random_labels(rnd::key(4), 6, 3);
  for (const auto& leaf :
       nn::check_grads(small, small_params, Xs, ys3, nn::softmax_cross_entropy, &key)) {
    INFO(leaf.path);
    CHECK(leaf.relative_error < 1e-6);
  }
}

TEST_CASE("A user's layer may share the team; one that does not runs on one thread",
          "[nn][model][team][user]") {
  using user_team::Doubling;
  const Eigen::Index width = 64, batch = 96;
  auto model_with = [&](auto layer) {
    return nn::sequential(nn::dense(width, width), nn::gelu, layer, nn::layer_norm(width),
                          nn::dense(width, 5));
  };
  const auto sharing = model_with(user_team::SharingDoubling{});
  const auto plain = model_with(user_team::PlainDoubling{});
  // The reference: the model split in two around the user's layer, the doubling done by hand.
  const auto params = nn::init<double>(sharing, rnd::key(0));
  const MatrixXd X = nn_test::random_matrix<double>(rnd::key(1), width, batch);
  const MatrixXd Y = nn_test::random_matrix<double>(rnd::key(2), 5, batch);
  const auto head = nn::sequential(nn::dense(width, width), nn::gelu);
  const auto tail = nn::sequential(nn::layer_norm(width), nn::dense(width, 5));
  const auto head_params = std::make_tuple(std::get<0>(params), std::monostate{});
  const auto tail_params = std::make_tuple(std::get<3>(params), std::get<4>(params));
  const MatrixXd expected = nn::apply(tail, tail_params, 2 * nn::apply(head, head_params, X));

  for (const int threads : {1, 2}) {
    INFO("threads " << threads);
    nn_test::ThreadCount scope(threads);
    Doubling::widest_team = 0;
    Doubling::calls = 0;
    CHECK(nn::apply(sharing, params, X).isApprox(expected, 1e-12));
    const auto shared = nn::value_and_grad(sharing, params, X, Y, nn::mse);
    CHECK(Doubling::widest_team == threads);
    CHECK(Doubling::calls == 3 * threads);  // apply, forward, backward, on every thread

    Doubling::widest_team = 0;
    Doubling::calls = 0;
    CHECK(nn::apply(plain, params, X).isApprox(expected, 1e-12));
    const auto alone = nn::value_and_grad(plain, params, X, Y, nn::mse);
    CHECK(Doubling::widest_team == 1);
    CHECK(Doubling::calls == 3);
    CHECK(shared.loss == Approx(alone.loss).epsilon(1e-12));
    grove::tree_for_each([](const auto& a, const auto& b) { CHECK(a.isApprox(b, 1e-12)); },
                         shared.grads, alone.grads);
  }
  for (const auto& leaf : nn::check_grads(sharing, params, MatrixXd(X.leftCols(4)),
                                          MatrixXd(Y.leftCols(4)), nn::mse)) {
    INFO(leaf.path);
    CHECK(leaf.relative_error < 1e-6);
  }
}
