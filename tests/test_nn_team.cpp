// grove::nn's layer-by-layer passes on one team of threads: a model of layer norms, residual
// blocks, dropout and dense layers fused with their activations gives the same loss, parameter
// gradients and input gradient with 1 and 2 threads (to rounding) as with the activations run as
// layers of their own, and as central finite differences; a user's layer that opts in to sharing
// the team is called by every thread, one that does not still works (and is called on one thread);
// and one that shares the team and throws, on one thread or on both, reaches the caller with its
// exception, leaving the parameters, the optimizer state and the workspace as they were.
#include <atomic>
#include <catch2/catch.hpp>
#include <grove/nn.hpp>
#include <grove/optim.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <variant>
#include <vector>

#include "nn_fixtures.hpp"
#include "optim_fixtures.hpp"
#include "thread_probe.hpp"

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

// y = 2 x on a shared team, which throws std::runtime_error in its forward or backward pass on
// the threads whose bits are set in `forward_threads` / `backward_threads`: before its barrier,
// or, `late`, after it (the other threads are then already in the next layer).
struct Throwing {
  static constexpr bool shares_team = true;
  static inline std::atomic<int> widest_team{0};
  int forward_threads = 0, backward_threads = 0;
  bool late = false;

  std::string name() const { return "Throwing"; }
  template <class T>
  std::monostate init(const grove::random::Key&) const {
    return {};
  }
  static void maybe_throw(int threads, const nn::layer_context& ctx, const char* pass) {
    int w = widest_team.load();
    while (ctx.threads > w && !widest_team.compare_exchange_weak(w, ctx.threads)) {
    }
    if ((threads >> ctx.thread) & 1)
      throw std::runtime_error("Throwing: " + std::string(pass) + " on thread " +
                               std::to_string(ctx.thread));
  }
  template <class T>
  void forward(const std::monostate&, nn::ConstMatrixMap<T> x, nn::MatrixMap<T> y, std::span<T>,
               const nn::layer_context& ctx) const {
    for (Eigen::Index j = ctx.thread; j < x.cols(); j += ctx.threads) y.col(j) = 2 * x.col(j);
    if (!late) maybe_throw(forward_threads, ctx, "forward");
    nn::team_barrier(ctx);
    if (late) maybe_throw(forward_threads, ctx, "forward");
  }
  template <class T>
  void backward(const std::monostate&, nn::ConstMatrixMap<T>, nn::ConstMatrixMap<T>,
                nn::ConstMatrixMap<T> dy, std::monostate&, nn::MatrixMap<T> dx, std::span<T>,
                const nn::layer_context& ctx) const {
    if (dx.size() != 0)
      for (Eigen::Index j = ctx.thread; j < dy.cols(); j += ctx.threads) dx.col(j) = 2 * dy.col(j);
    if (!late) maybe_throw(backward_threads, ctx, "backward");
    nn::team_barrier(ctx);
    if (late) maybe_throw(backward_threads, ctx, "backward");
  }
};

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

TEST_CASE("A team layer that throws on one thread or on both: the caller gets the exception",
          "[nn][model][team][user][errors]") {
  using user_team::Throwing;
  const Eigen::Index width = 64, batch = 96;
  // The throwing layer inside a residual block, so that the exception leaves nested sequences
  // on every thread of the team; the same model with a layer that does not throw gives the
  // reference numbers.
  auto model_with = [&](Throwing layer) {
    return nn::sequential(
        nn::dense(width, width), nn::gelu,
        nn::residual(nn::sequential(nn::layer_norm(width), layer, nn::dense(width, width))),
        nn::layer_norm(width), nn::dense(width, 5));
  };
  const auto quiet = model_with(Throwing{});
  auto params = nn::init<double>(quiet, rnd::key(0));
  const auto params_before = params;
  const MatrixXd X = nn_test::random_matrix<double>(rnd::key(1), width, batch);
  const MatrixXd Y = nn_test::random_matrix<double>(rnd::key(2), 5, batch);
  const auto tx = grove::optim::adam(1e-3);
  auto state = tx.init(params);
  const auto state_before = state;

  nn_test::ThreadCount scope(2);
  // What a fresh workspace gives.
  nn::Workspace<double> fresh_ws;
  decltype(params) want_grads;
  MatrixXd want_dx;
  const double want_loss =
      nn::value_and_grad_into(quiet, params, X, Y, nn::mse, nullptr, want_grads, want_dx, fresh_ws);
  const MatrixXd want_y = nn::apply(quiet, params, X);
  Throwing::widest_team = 0;
  nn::apply(quiet, params, X);
  REQUIRE(Throwing::widest_team == 2);  // the layer really runs on a team of two

  struct Case {
    const char* what;
    int forward_threads, backward_threads;
    const char* message;
  };
  const Case cases[] = {
      {"forward, thread 0", 1, 0, "Throwing: forward on thread 0"},
      {"forward, thread 1", 2, 0, "Throwing: forward on thread 1"},
      {"forward, both threads (the lower thread's exception)", 3, 0,
       "Throwing: forward on thread 0"},
      {"backward, thread 0", 0, 1, "Throwing: backward on thread 0"},
      {"backward, thread 1", 0, 2, "Throwing: backward on thread 1"},
      {"backward, both threads", 0, 3, "Throwing: backward on thread 0"},
  };
  nn::Workspace<double> ws;
  grove::nn::StepWorkspace<decltype(params)> step_ws;
  for (const bool late : {false, true}) {
    for (const Case& c : cases) {
      INFO(c.what << (late ? ", after its barrier" : ", before its barrier"));
      const auto throwing = model_with(Throwing{c.forward_threads, c.backward_threads, late});
      decltype(params) grads;
      MatrixXd dx;
      CHECK_THROWS_WITH(
          nn::value_and_grad_into(throwing, params, X, Y, nn::mse, nullptr, grads, dx, ws),
          c.message);
      CHECK_THROWS_AS(nn::train_step(throwing, params, X, Y, nn::mse, tx, state, step_ws),
                      std::runtime_error);
      if (c.forward_threads != 0) {
        MatrixXd y;
        CHECK_THROWS_WITH(nn::apply_into(throwing, params, X, y, ws), c.message);
        CHECK_THROWS_WITH(nn::loss(throwing, params, X, Y, nn::mse, ws), c.message);
      }
      // Nothing was written, and the same workspaces give the fresh workspace's numbers.
      CHECK(flat(params) == flat(params_before));
      CHECK(optim_test::same_leaves(state, state_before));
      CHECK(nn::value_and_grad_into(quiet, params, X, Y, nn::mse, nullptr, grads, dx, ws) ==
            want_loss);
      CHECK(flat(grads) == flat(want_grads));
      CHECK(dx == want_dx);
      MatrixXd y;
      nn::apply_into(quiet, params, X, y, ws);
      CHECK(y == want_y);
      auto p = params;
      auto s = state;
      auto p_fresh = params;
      auto s_fresh = state;
      grove::nn::StepWorkspace<decltype(params)> fresh_step_ws;
      CHECK(nn::train_step(quiet, p, X, Y, nn::mse, tx, s, step_ws) ==
            nn::train_step(quiet, p_fresh, X, Y, nn::mse, tx, s_fresh, fresh_step_ws));
      CHECK(flat(p) == flat(p_fresh));
    }
  }

  // A throw after the pass's last barrier: in the backward pass of the model's first layer, and
  // in apply's forward pass of its last.
  const auto first = [&](Throwing layer) {
    return nn::sequential(layer, nn::dense(width, width), nn::gelu, nn::dense(width, 5));
  };
  const auto first_params = nn::init<double>(first(Throwing{}), rnd::key(3));
  const auto last = nn::sequential(nn::dense(width, width), nn::gelu, Throwing{3, 0, true});
  const auto last_params = nn::init<double>(last, rnd::key(4));
  nn::Workspace<double> first_ws, last_ws;
  for (const int threads : {1, 2, 3}) {
    INFO("throwing threads " << threads);
    auto grads = first_params;
    CHECK_THROWS_WITH(
        nn::value_and_grad_into(first(Throwing{0, threads, true}), first_params, X, Y, nn::mse,
                                grads, first_ws),
        threads == 2 ? "Throwing: backward on thread 1" : "Throwing: backward on thread 0");
    MatrixXd y;
    CHECK_THROWS_WITH(
        nn::apply_into(
            nn::sequential(nn::dense(width, width), nn::gelu, Throwing{threads, 0, true}),
            last_params, X, y, last_ws),
        threads == 2 ? "Throwing: forward on thread 1" : "Throwing: forward on thread 0");
  }
  nn::Workspace<double> fresh_first_ws;
  auto g1 = first_params, g2 = first_params;
  CHECK(
      nn::value_and_grad_into(first(Throwing{}), first_params, X, Y, nn::mse, g1, first_ws) ==
      nn::value_and_grad_into(first(Throwing{}), first_params, X, Y, nn::mse, g2, fresh_first_ws));
  CHECK(flat(g1) == flat(g2));
}

#if defined(_OPENMP)
TEST_CASE("Initialising large weights follows the program's thread setting",
          "[nn][threads][random]") {
  // A program run with --threads 1 (train_mlp: omp_set_num_threads and Eigen::setNbThreads)
  // draws its initial weights on one thread too, as random's automatic thread count follows
  // the setting that grove's passes follow.
  namespace rd = grove::random::detail;
  const int before_omp = omp_get_max_threads();
  const int before_eigen = Eigen::nbThreads();
  auto threads_used = [] {
    return thread_probe::threads_used(rd::automatic_threading_threshold, 0);
  };
  omp_set_num_threads(1);
  CHECK(grove::detail::requested_threads() == 1);
  CHECK(threads_used() == 1);
  omp_set_num_threads(2);
  Eigen::setNbThreads(1);
  CHECK(grove::detail::requested_threads() == 1);
  CHECK(threads_used() == 1);
  Eigen::setNbThreads(2);
  CHECK(grove::detail::requested_threads() == 2);
  CHECK(threads_used() <= 2);
  // The weights are the same bits whatever the count.
  const auto model = grove::nn::sequential(grove::nn::dense(784, 512), grove::nn::relu);
  const auto two = grove::nn::init<float>(model, grove::random::key(3));
  omp_set_num_threads(1);
  const auto one = grove::nn::init<float>(model, grove::random::key(3));
  CHECK(std::get<0>(one).w == std::get<0>(two).w);
  omp_set_num_threads(before_omp);
  Eigen::setNbThreads(before_eigen);
}
#endif

// --- a listener to the gradients -------------------------------------------------------------

namespace {

// Records what a grad_listener hears: each leaf's memory, its values then, and the thread.
struct heard final : nn::grad_listener<float> {
  std::vector<const float*> data;
  std::vector<std::vector<float>> values;
  std::vector<std::thread::id> threads;
  int progress_calls = 0;
  void ready(std::span<float> g) noexcept override {
    data.push_back(g.data());
    values.emplace_back(g.begin(), g.end());
    threads.push_back(std::this_thread::get_id());
  }
  void progress() noexcept override { ++progress_calls; }
};

}  // namespace

TEST_CASE("a grad_listener hears of each gradient once final, the last layer's first",
          "[nn][listener]") {
  const Eigen::MatrixXf X = rnd::normal<float>(rnd::key(1), 5, 40);
  const Eigen::VectorXi y = nn_test::random_labels(rnd::key(2), 40, 3);
  for (const int threads : {1, 2}) {
    INFO(threads << " threads");
    const nn_test::ThreadCount scope(threads);
    heard h;
    nn::Workspace<float> ws;
    CHECK(ws.set_grad_listener(&h) == nullptr);

    SECTION("the walk-through's network") {
      const auto params = nn::init_network_params<float>({5, 7, 6, 3}, rnd::key(0));
      std::vector<nn::Dense<float>> grads;
      nn::value_and_grad_into(params, X, y, grads, ws);
      const std::vector<const float*> expected{grads[2].w.data(), grads[2].b.data(),
                                               grads[1].w.data(), grads[1].b.data(),
                                               grads[0].w.data(), grads[0].b.data()};
      CHECK(h.data == expected);
      // Final when heard: the values then are the ones the call returns.
      for (std::size_t l = 0; l < 3; ++l) {
        const auto& w = h.values[2 * (2 - l)];
        const auto& b = h.values[2 * (2 - l) + 1];
        CHECK(w == std::vector<float>(grads[l].w.data(), grads[l].w.data() + grads[l].w.size()));
        CHECK(b == std::vector<float>(grads[l].b.data(), grads[l].b.data() + grads[l].b.size()));
      }
      for (const auto& id : h.threads) CHECK(id == std::this_thread::get_id());
      CHECK(h.progress_calls == 2);  // after each product of an input gradient

      // Set to none: nothing more heard.
      CHECK(ws.set_grad_listener(nullptr) == &h);
      nn::value_and_grad_into(params, X, y, grads, ws);
      CHECK(h.data.size() == 6);
    }
    SECTION("a model on the fused engine; not the loss alone") {
      const auto model = nn::sequential(nn::dense(5, 6), nn::relu, nn::dense(6, 3));
      const auto params = nn::init<float>(model, rnd::key(0));
      auto grads = params;
      nn::value_and_grad_into(model, params, X, y, nn::softmax_cross_entropy, grads, ws);
      CHECK(h.data.size() == 4);
      nn::loss(model, params, X, y, nn::softmax_cross_entropy, ws);
      CHECK(h.data.size() == 4);
    }
    SECTION("a model that runs layer by layer: nothing (its gradients are final on return)") {
      const auto model = nn::sequential(nn::dense(5, 6), nn::layer_norm(6), nn::dense(6, 3));
      const auto params = nn::init<float>(model, rnd::key(0));
      auto grads = params;
      nn::value_and_grad_into(model, params, X, y, nn::softmax_cross_entropy, grads, ws);
      CHECK(h.data.empty());
    }
  }
}
