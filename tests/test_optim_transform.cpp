// grove::optim's transformations and chains against optax's formulas, evaluated element by
// element here in double over several steps; step against update + apply_updates.
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <grove/optim.hpp>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "optim_fixtures.hpp"

namespace optim = grove::optim;
using optim_test::close;
using optim_test::flat;
using optim_test::grads_at;
using optim_test::params0;
using optim_test::Tree;
using Vec = Eigen::VectorXd;

namespace {
constexpr int steps = 5;

// Runs tx.update for `steps` steps from params0 with grads_at(t), applying the updates; calls
// check(t, updates, params before the step, grads) at each step.
template <class Tx, class Check>
void run(const Tx& tx, Check&& check) {
  Tree params = params0();
  auto state = tx.init(params);
  for (int t = 0; t < steps; ++t) {
    const Tree grads = grads_at(t);
    auto [updates, next] = tx.update(grads, state, params);
    check(t, flat(updates), flat(params), flat(grads));
    params = optim::apply_updates(params, updates);
    state = std::move(next);
  }
}

double sign(double x) {
  return double((x > 0) - (x < 0));
}
}  // namespace

TEST_CASE("scale and scale_by_schedule", "[optim][transform]") {
  run(optim::scale(-0.3),
      [](int, const Vec& u, const Vec&, const Vec& g) { CHECK(close(u, -0.3 * g)); });
  // The schedule sees the count of updates so far: 0, 1, 2, ...
  run(optim::scale_by_schedule([](std::int64_t c) { return 0.5 + double(c); }),
      [](int t, const Vec& u, const Vec&, const Vec& g) { CHECK(close(u, (0.5 + t) * g)); });
  run(optim::scale_by_learning_rate(optim::linear_schedule(1.0, 0.0, 4)),
      [](int t, const Vec& u, const Vec&, const Vec& g) {
        CHECK(close(u, -(1.0 - std::min(t, 4) / 4.0) * g));
      });
  run(optim::scale_by_learning_rate(0.1, false),
      [](int, const Vec& u, const Vec&, const Vec& g) { CHECK(close(u, 0.1 * g)); });
}

TEST_CASE("scale_by_adam: moments and bias correction", "[optim][transform]") {
  const double b1 = 0.8, b2 = 0.95, eps = 1e-3, eps_root = 1e-4;
  Vec m = Vec::Zero(optim_test::tree_elements), v = m;
  run(optim::scale_by_adam(b1, b2, eps, eps_root),
      [&](int t, const Vec& u, const Vec&, const Vec& g) {
        const int count = t + 1;
        Vec expected(g.size());
        for (Eigen::Index i = 0; i < g.size(); ++i) {
          m[i] = (1 - b1) * g[i] + b1 * m[i];
          v[i] = (1 - b2) * g[i] * g[i] + b2 * v[i];
          const double m_hat = m[i] / (1 - std::pow(b1, count));
          const double v_hat = v[i] / (1 - std::pow(b2, count));
          expected[i] = m_hat / (std::sqrt(v_hat + eps_root) + eps);
        }
        CHECK(close(u, expected));
      });
  // Bias correction at step 1: mu_hat = g and nu_hat = g^2, so without eps the update is sign(g).
  run(optim::scale_by_adam(0.9, 0.999, 0.0), [](int t, const Vec& u, const Vec&, const Vec& g) {
    if (t == 0) CHECK(close(u, g.unaryExpr(&sign)));
  });
}

TEST_CASE("scale_by_rms, scale_by_rss, scale_by_lion", "[optim][transform]") {
  {
    const double decay = 0.7, eps = 1e-2, initial = 0.3;
    Vec nu = Vec::Constant(optim_test::tree_elements, initial);
    run(optim::scale_by_rms(decay, eps, initial), [&](int, const Vec& u, const Vec&, const Vec& g) {
      nu = (1 - decay) * g.array().square() + decay * nu.array();
      CHECK(close(u, (g.array() / (nu.array() + eps).sqrt()).matrix()));
    });
  }
  {
    const double initial = 0.2, eps = 1e-3;
    Vec sum = Vec::Constant(optim_test::tree_elements, initial);
    run(optim::scale_by_rss(initial, eps), [&](int, const Vec& u, const Vec&, const Vec& g) {
      sum = sum.array() + g.array().square();
      CHECK(close(u, (g.array() / (sum.array() + eps).sqrt()).matrix()));
    });
    // A zero accumulator gives a zero update (optax's where(sum > 0, ...)), not NaN.
    Tree zero = optim::tree_zeros_like(params0());
    const auto rss = optim::scale_by_rss(0.0, 0.0);
    auto [u, s] = rss.update(zero, rss.init(zero), zero);
    CHECK(flat(u).isZero(0));
  }
  {
    const double b1 = 0.6, b2 = 0.8;
    Vec mu = Vec::Zero(optim_test::tree_elements);
    run(optim::scale_by_lion(b1, b2), [&](int, const Vec& u, const Vec&, const Vec& g) {
      Vec expected = ((1 - b1) * g + b1 * mu).unaryExpr(&sign);
      mu = (1 - b2) * g + b2 * mu;
      CHECK(close(u, expected));
    });
  }
}

TEST_CASE("trace: momentum and nesterov", "[optim][transform]") {
  for (const bool nesterov : {false, true}) {
    INFO("nesterov " << nesterov);
    const double decay = 0.85;
    Vec tr = Vec::Zero(optim_test::tree_elements);
    run(optim::trace(decay, nesterov), [&](int, const Vec& u, const Vec&, const Vec& g) {
      tr = g + decay * tr;
      CHECK(close(u, nesterov ? Vec(g + decay * tr) : tr));
    });
  }
}

TEST_CASE("add_decayed_weights and clip", "[optim][transform]") {
  run(optim::add_decayed_weights(0.05),
      [](int, const Vec& u, const Vec& p, const Vec& g) { CHECK(close(u, g + 0.05 * p)); });
  run(optim::clip(0.9), [](int, const Vec& u, const Vec&, const Vec& g) {
    CHECK(close(u, g.cwiseMax(-0.9).cwiseMin(0.9)));
  });
  // Exactly at the threshold an element is kept as it is.
  Tree g = optim::tree_full_like(params0(), 0.5);
  std::get<0>(g).w(0, 0) = -0.5;
  const auto c = optim::clip(0.5);
  CHECK(flat(c.update(g, c.init(g), g).updates) == flat(g));
}

TEST_CASE("clip_by_global_norm below, at and above the threshold", "[optim][transform]") {
  const Tree g = grads_at(0);
  const Vec gv = flat(g);
  const double norm = std::sqrt(gv.squaredNorm());
  CHECK(std::abs(optim::global_norm(g) - norm) <= 1e-12 * norm);
  CHECK(std::abs(optim::squared_global_norm(g) - gv.squaredNorm()) <= 1e-12 * norm * norm);
  auto updates = [&](double max_norm) {
    const auto tx = optim::clip_by_global_norm(max_norm);
    return flat(tx.update(g, tx.init(g), g).updates);
  };
  CHECK(updates(norm * 1.01) == gv);  // below: unchanged
  CHECK(close(updates(norm), gv));    // at: t / norm * max_norm = t
  CHECK(close(updates(0.5 * norm), gv / norm * (0.5 * norm)));
  CHECK(std::abs(std::sqrt(updates(0.5 * norm).squaredNorm()) - 0.5 * norm) <= 1e-12);
  // Hand-made: (3, 4) has norm 5.
  std::tuple<double, double> v{3.0, 4.0};
  const auto tx = optim::clip_by_global_norm(5.0);
  auto at = tx.update(v, tx.init(v), v).updates;
  CHECK(std::get<0>(at) == 3.0);
  CHECK(std::get<1>(at) == 4.0);
  const auto half = optim::clip_by_global_norm(2.5);
  auto clipped = half.update(v, half.init(v), v).updates;
  CHECK(std::abs(std::get<0>(clipped) - 1.5) <= 1e-15);
  CHECK(std::abs(std::get<1>(clipped) - 2.0) <= 1e-15);
}

TEST_CASE("chain: the transformations in order, each schedule with its own count",
          "[optim][transform]") {
  // clip_by_global_norm, then adam, then weight decay, then the scheduled learning rate.
  const double b1 = 0.9, b2 = 0.99, eps = 1e-6, wd = 0.01, max_norm = 1.0;
  const auto lr = [](std::int64_t c) { return 0.1 / (1.0 + double(c)); };
  const auto tx =
      optim::chain(optim::clip_by_global_norm(max_norm), optim::scale_by_adam(b1, b2, eps),
                   optim::add_decayed_weights(wd), optim::scale_by_learning_rate(lr));
  STATIC_REQUIRE(decltype(tx)::fusable);
  Vec m = Vec::Zero(optim_test::tree_elements), v = m;
  run(tx, [&](int t, const Vec& u, const Vec& p, const Vec& g) {
    const double norm = std::sqrt(g.squaredNorm());
    const Vec gc = norm < max_norm ? g : Vec(g / norm * max_norm);
    m = (1 - b1) * gc + b1 * m;
    v = (1 - b2) * gc.array().square().matrix() + b2 * v;
    const Vec m_hat = m / (1 - std::pow(b1, t + 1));
    const Vec v_hat = v / (1 - std::pow(b2, t + 1));
    const Vec adam = (m_hat.array() / (v_hat.array().sqrt() + eps)).matrix();
    CHECK(close(u, -lr(t) * (adam + wd * p)));
  });
  // A chain whose clip is not first runs its parts one by one: same formulas.
  const auto later = optim::chain(optim::scale(2.0), optim::clip_by_global_norm(max_norm));
  STATIC_REQUIRE_FALSE(decltype(later)::fusable);
  run(later, [&](int, const Vec& u, const Vec&, const Vec& g) {
    const double norm = 2.0 * std::sqrt(g.squaredNorm());
    CHECK(close(u, norm < max_norm ? Vec(2.0 * g) : Vec(2.0 * g / norm * max_norm)));
  });
  // The state is the tuple of the states; the counts advance once per update.
  Tree params = params0();
  auto state = tx.init(params);
  for (int t = 0; t < 3; ++t) tx.step(params, grads_at(t), state);
  CHECK(std::get<1>(state).count == 3);
  CHECK(std::get<3>(state).count == 3);
}

TEST_CASE("step is update + apply_updates (the state bit for bit)", "[optim][transform]") {
  // The parameters agree to the rounding of one fused multiply-add, which the compiler may use
  // for the step's params + updates and cannot for apply_updates' sum of a stored update.
  auto check = [](const auto& tx) {
    Tree a = params0(), b = params0();
    auto sa = tx.init(a);
    auto sb = tx.init(b);
    for (int t = 0; t < steps; ++t) {
      const Tree g = grads_at(t);
      auto [u, next] = tx.update(g, sa, a);
      a = optim::apply_updates(a, u);
      sa = std::move(next);
      tx.step(b, g, sb);
      CHECK(close(flat(a), flat(b), 1e-15));
      CHECK(optim_test::same_leaves(sa, sb));
    }
  };
  check(optim::adam(0.01));
  check(optim::adamw(optim::cosine_decay_schedule(0.1, 4), 0.9, 0.99, 1e-8, 0, 0.1));
  check(optim::chain(optim::clip_by_global_norm(0.5), optim::sgd(0.1, 0.9, true)));
  check(optim::chain(optim::scale_by_rms(), optim::clip(0.3), optim::scale(-0.1)));
  check(optim::chain(optim::scale_by_adam(), optim::clip_by_global_norm(0.5),
                     optim::scale(-0.1)));  // not fused
  check(optim::lion(0.01));
  check(optim::adagrad(0.1));
}

TEST_CASE("Leaves may be float: hyperparameters round once to the leaf's type",
          "[optim][transform]") {
  std::map<std::string, Eigen::ArrayXf> params{{"w", Eigen::ArrayXf::LinSpaced(5, -1, 1)}};
  std::map<std::string, Eigen::ArrayXf> grads{{"w", Eigen::ArrayXf::LinSpaced(5, 0.5, -0.3)}};
  const auto tx = optim::sgd(0.1);
  auto state = tx.init(params);
  const Eigen::ArrayXf expected = params["w"] + (-0.1f) * grads["w"];
  tx.step(params, grads, state);
  CHECK((params["w"] == expected).all());
}

namespace {
// A user's transformation: init and update only (optax's GradientTransformation).
struct Negate {
  template <class P>
  optim::EmptyState init(const P&) const {
    return {};
  }
  template <class P>
  optim::update_result<P, optim::EmptyState> update(const P& grads, const optim::EmptyState& s,
                                                    const P&) const {
    return {grove::tree_map([](const auto& g) -> std::remove_cvref_t<decltype(g)> { return -g; },
                            grads),
            s};
  }
};
}  // namespace

TEST_CASE("A user's transformation composes with grove's", "[optim][transform]") {
  const auto tx = optim::chain(optim::scale_by_adam(), Negate{}, optim::scale(0.1));
  STATIC_REQUIRE_FALSE(decltype(tx)::fusable);
  const auto reference = optim::adam(0.1);
  Tree a = params0(), b = params0(), c = params0();
  auto sa = tx.init(a);
  auto sb = reference.init(b);
  const auto wrapped = optim::multi_steps(Negate{}, 1);
  auto sc = wrapped.init(c);
  for (int t = 0; t < steps; ++t) {
    tx.step(a, grads_at(t), sa);
    reference.step(b, grads_at(t), sb);
    wrapped.step(c, grads_at(t), sc);
  }
  CHECK(close(flat(a), flat(b), 1e-15));
  Vec expected = flat(params0());
  for (int t = 0; t < steps; ++t) expected -= flat(grads_at(t));
  CHECK(close(flat(c), expected));
}

// --- what a step refuses of its state and its trees, before anything changes -------------------

namespace {
using Catch::Matchers::Equals;
using Catch::Matchers::StartsWith;
constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();

// tx.step(params, grads, state) throws E with exactly `message`, and leaves params and state as
// they were; tx.update throws the same with grove::optim::update.
template <class E, class Tx, class P, class State>
void refused(const Tx& tx, const P& params, const P& grads, const State& state,
             const std::string& message) {
  P p = params;
  State s = state;
  CHECK_THROWS_AS(tx.step(p, grads, s), E);
  CHECK_THROWS_WITH(tx.step(p, grads, s), Equals("grove::optim::step: " + message));
  CHECK(optim_test::same_leaves(p, params));
  CHECK(optim_test::same_leaves(s, state));
  CHECK_THROWS_AS(tx.update(grads, state, params), E);
  CHECK_THROWS_WITH(tx.update(grads, state, params), Equals("grove::optim::update: " + message));
}
}  // namespace

TEST_CASE("A step refuses a count it cannot advance (INT64_MAX, negative)", "[optim][errors]") {
  // A checkpoint may hold any count: INT64_MAX + 1 is signed overflow (UBSan aborts here without
  // the check), a negative count a NaN bias correction.
  const Tree params = params0(), grads = grads_at(0);
  const std::string range = ", outside [0, 9223372036854775807): a step adds 1 to it";
  const auto adam = optim::adam(0.1);
  for (const std::int64_t bad : {int64_max, std::int64_t{-2}, std::int64_t{-1}}) {
    INFO("count " << bad);
    auto state = adam.init(params);
    std::get<0>(state).count = bad;
    refused<grove::argument_error>(
        adam, params, grads, state,
        "the optimizer state's leaf [0].count is " + std::to_string(bad) + range);
    state = adam.init(params);
    std::get<1>(state).count = bad;  // the learning rate's count
    refused<grove::argument_error>(
        adam, params, grads, state,
        "the optimizer state's leaf [1].count is " + std::to_string(bad) + range);
  }
  const auto sgd = optim::sgd(optim::exponential_decay(0.1, 10, 0.5));
  auto s = sgd.init(params);
  std::get<0>(s).count = int64_max;
  refused<grove::argument_error>(
      sgd, params, grads, s, "the optimizer state's leaf [0].count is 9223372036854775807" + range);
  const auto lion = optim::lion(0.01);
  auto ls = lion.init(params);
  std::get<0>(ls).count = -2;
  refused<grove::argument_error>(lion, params, grads, ls,
                                 "the optimizer state's leaf [0].count is -2" + range);
  // A chain that is not fused checks every state before its first transformation runs.
  const auto unfused = optim::chain(optim::scale_by_adam(), optim::clip_by_global_norm(0.5),
                                    optim::scale_by_learning_rate(0.1));
  STATIC_REQUIRE_FALSE(decltype(unfused)::fusable);
  auto us = unfused.init(params);
  std::get<2>(us).count = int64_max;
  refused<grove::argument_error>(
      unfused, params, grads, us,
      "the optimizer state's leaf [2].count is 9223372036854775807" + range);
  // The largest count a step can advance is fine, and so is the one it reaches.
  auto fine = adam.init(params);
  std::get<0>(fine).count = int64_max - 2;
  std::get<1>(fine).count = int64_max - 2;
  Tree p = params;
  adam.step(p, grads, fine);
  CHECK(std::get<0>(fine).count == int64_max - 1);
  adam.step(p, grads, fine);
  CHECK(std::get<0>(fine).count == int64_max);
  CHECK_THROWS_AS(adam.step(p, grads, fine), grove::argument_error);
}

TEST_CASE("A step refuses a schedule's value that is not finite, before anything changes",
          "[optim][errors]") {
  // A user's schedule (or one that overflows: 1e200^2 is inf) gives a NaN or an infinity at
  // count 2; the step at count 2 is refused, with the value the user's function returned.
  const Tree params = params0(), grads = grads_at(0);
  const auto user = [](double bad) {
    return optim::Schedule([bad](std::int64_t c) { return c < 2 ? 0.1 : bad; });
  };
  auto run_to_2 = [&](const auto& tx) {
    Tree p = params;
    auto s = tx.init(p);
    tx.step(p, grads, s);
    tx.step(p, grads, s);
    return std::pair{p, s};
  };
  const std::string tail =
      " at count 2 (the optimizer state's leaf [1].count): a step needs a "
      "finite value";
  {
    const auto tx = optim::adam(user(NAN));
    const auto [p, s] = run_to_2(tx);
    refused<grove::argument_error>(tx, p, grads, s, "learning_rate is nan" + tail);
  }
  {
    const auto tx = optim::adamw(user(INFINITY), 0.9, 0.999, 1e-8, 0, 1e-4);
    const auto [p, s] = run_to_2(tx);
    refused<grove::argument_error>(
        tx, p, grads, s,
        "learning_rate is inf at count 2 (the optimizer state's leaf [2].count): a step needs a "
        "finite value");
  }
  {
    const auto tx = optim::sgd(optim::exponential_decay(1.0, 1, 1e200));
    const auto [p, s] = run_to_2(tx);
    refused<grove::argument_error>(
        tx, p, grads, s,
        "learning_rate is inf at count 2 (the optimizer state's leaf [0].count): a step needs a "
        "finite value");
  }
  {
    const auto tx = optim::scale_by_schedule(user(-INFINITY));
    const auto [p, s] = run_to_2(tx);
    refused<grove::argument_error>(
        tx, p, grads, s,
        "step_size_fn is -inf at count 2 (the optimizer state's leaf .count): a step needs a "
        "finite value");
  }
}

TEST_CASE("A gradient of another shape than its parameter is refused, also of the same size",
          "[optim][errors]") {
  // A (3, 2) gradient of a (2, 3) parameter has the parameter's size: applied in memory order it
  // would update the wrong elements without a word.
  using Params = std::map<std::string, Eigen::MatrixXd>;
  const Params params{{"b", Eigen::MatrixXd::Ones(2, 1)}, {"w", Eigen::MatrixXd::Ones(2, 3)}};
  const Params grads{{"b", Eigen::MatrixXd::Ones(2, 1)}, {"w", Eigen::MatrixXd::Ones(3, 2)}};
  const std::string message =
      "leaf 1 (in tree_leaves order) at ['w'] has shape (3, 2) in the gradients and (2, 3) in the "
      "parameters";
  const auto adam = optim::adam(0.1);
  refused<grove::shape_error>(adam, params, grads, adam.init(params), message);
  const auto sgd = optim::sgd(0.1);
  refused<grove::shape_error>(sgd, params, grads, sgd.init(params), message);
  const auto unfused = optim::chain(optim::scale(2.0), optim::clip_by_global_norm(1.0));
  refused<grove::shape_error>(unfused, params, grads, unfused.init(params), message);
  // A state of other parameters of the same sizes.
  const Params transposed{{"b", Eigen::MatrixXd::Ones(2, 1)}, {"w", Eigen::MatrixXd::Ones(3, 2)}};
  refused<grove::shape_error>(
      adam, params, params, adam.init(transposed),
      "leaf 1 (in tree_leaves order) at ['w'] has shape (3, 2) in the optimizer state and (2, 3) "
      "in the parameters");
  // apply_updates, and the old case of another size.
  CHECK_THROWS_AS(optim::apply_updates(params, grads), grove::shape_error);
  CHECK_THROWS_WITH(optim::apply_updates(params, grads),
                    Equals("grove::optim::apply_updates: leaf 1 (in tree_leaves order) at ['w'] "
                           "has shape (3, 2) in the updates and (2, 3) in the parameters"));
  Params p = params;
  CHECK_THROWS_WITH(optim::apply_updates_inplace(p, grads),
                    StartsWith("grove::optim::apply_updates_inplace: leaf 1"));
  CHECK(optim_test::same_leaves(p, params));
  const Params longer{{"b", Eigen::MatrixXd::Ones(2, 1)}, {"w", Eigen::MatrixXd::Ones(2, 4)}};
  refused<grove::shape_error>(adam, params, longer, adam.init(params),
                              "leaf 1 (in tree_leaves order) at ['w'] has shape (2, 4) in the "
                              "gradients and (2, 3) in the parameters");
  // A lone matrix is the root.
  const Eigen::MatrixXd m = Eigen::MatrixXd::Ones(2, 3), g = Eigen::MatrixXd::Ones(3, 2);
  refused<grove::shape_error>(sgd, m, g, sgd.init(m),
                              "leaf 0 (in tree_leaves order) at the root has shape (3, 2) in the "
                              "gradients and (2, 3) in the parameters");
}
