// grove::optim's wrappers (masked, multi_steps, apply_if_finite) and optimizers (sgd, adam,
// adamw, rmsprop, adagrad, lion) against optax's formulas evaluated here by hand, and the errors
// every constructor raises.
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <grove/optim.hpp>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "optim_fixtures.hpp"

namespace optim = grove::optim;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using optim_test::close;
using optim_test::flat;
using optim_test::grads_at;
using optim_test::params0;
using optim_test::Tree;
using Vec = Eigen::VectorXd;

namespace {
// Leaf order of Tree: w (6), b (3), s (1), then the dict's "a" (4) and "b" (2).
constexpr Eigen::Index layer_elements = 10;
}  // namespace

TEST_CASE("masked: the transformation on the masked-in leaves only", "[optim][wrappers]") {
  // A prefix mask: the struct (all its leaves) in, the dict out.
  const std::tuple<bool, bool> mask{true, false};
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  const auto tx = optim::masked(optim::scale_by_adam(b1, b2, eps), mask);
  Tree params = params0();
  auto state = tx.init(params);
  CHECK(std::get<0>(state.mask).get<2>() == true);
  CHECK(std::get<1>(state.mask).at("a") == false);
  Vec m = Vec::Zero(layer_elements), v = m;
  for (int t = 0; t < 4; ++t) {
    const Tree g = grads_at(t);
    auto [updates, next] = tx.update(g, state, params);
    const Vec u = flat(updates), gv = flat(g);
    m = (1 - b1) * gv.head(layer_elements) + b1 * m;
    v = (1 - b2) * gv.head(layer_elements).array().square().matrix() + b2 * v;
    const Vec m_hat = m / (1 - std::pow(b1, t + 1)), v_hat = v / (1 - std::pow(b2, t + 1));
    CHECK(close(u.head(layer_elements), (m_hat.array() / (v_hat.array().sqrt() + eps)).matrix()));
    // Masked-out updates pass through unchanged, bit for bit; their moments stay zero.
    CHECK(u.tail(6) == gv.tail(6));
    CHECK(std::get<1>(next.inner_state.mu).at("a").isZero(0));
    CHECK(std::get<1>(next.inner_state.nu).at("b").isZero(0));
    state = std::move(next);
  }
  CHECK(state.inner_state.count == 4);
}

TEST_CASE("masked weight decay from a callable mask, inside adamw", "[optim][wrappers]") {
  // Decay on matrices only (as on a network's weights, not its biases).
  auto weights_only = [](const Tree& p) {
    return grove::tree_map([](const auto& leaf) { return grove::shape(leaf).size() == 2; }, p);
  };
  const double lr = 0.05, wd = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  const auto tx = optim::adamw(lr, b1, b2, eps, 0.0, wd, weights_only);
  Tree params = params0();
  auto state = tx.init(params);
  Vec m = Vec::Zero(optim_test::tree_elements), v = m;
  Vec decays = Vec::Zero(optim_test::tree_elements);
  decays.head(6).setOnes();  // only w is a matrix
  for (int t = 0; t < 4; ++t) {
    const Tree g = grads_at(t);
    const Vec gv = flat(g), p = flat(params);
    m = (1 - b1) * gv + b1 * m;
    v = (1 - b2) * gv.array().square().matrix() + b2 * v;
    const Vec m_hat = m / (1 - std::pow(b1, t + 1)), v_hat = v / (1 - std::pow(b2, t + 1));
    const Vec adam = (m_hat.array() / (v_hat.array().sqrt() + eps)).matrix();
    const Vec expected = p - lr * (adam + wd * decays.cwiseProduct(p));
    tx.step(params, g, state);
    CHECK(close(flat(params), expected));
  }
}

TEST_CASE("masked: a mask that is not a prefix of the parameters", "[optim][wrappers][errors]") {
  using Params = std::map<std::string, Eigen::VectorXd>;
  const Params params{{"a", Eigen::VectorXd::Ones(2)}, {"b", Eigen::VectorXd::Ones(3)}};
  const std::map<std::string, bool> mask{{"a", true}, {"c", false}};
  const auto tx = optim::masked(optim::add_decayed_weights(0.1), mask);
  CHECK_THROWS_AS(tx.init(params), grove::tree_error);
  CHECK_THROWS_WITH(tx.init(params), Contains("key") && Contains("'b'"));
  const auto adamw = optim::adamw(0.1, 0.9, 0.999, 1e-8, 0, 0.1, mask);
  CHECK_THROWS_AS(adamw.init(params), grove::tree_error);
}

TEST_CASE("multi_steps: the inner update every k-th step, with the mean gradient",
          "[optim][wrappers]") {
  const int k = 3;
  const double momentum = 0.5;
  // The inner learning rate is scheduled: its count advances once per k steps.
  const auto lr = [](std::int64_t c) { return 0.1 * double(c + 1); };
  const auto tx = optim::multi_steps(optim::sgd(lr, momentum), k);
  Tree params = params0();
  auto state = tx.init(params);
  Vec sum = Vec::Zero(optim_test::tree_elements), trace = sum;
  for (int t = 0; t < 3 * k; ++t) {
    const Tree g = grads_at(t);
    sum += flat(g);
    auto [updates, next] = tx.update(g, state, params);
    const Vec u = flat(updates);
    if (t % k == k - 1) {
      const Vec mean = sum / k;
      trace = mean + momentum * trace;
      const int inner_count = t / k;
      CHECK(close(u, -lr(inner_count) * trace));
      CHECK(next.mini_step == 0);
      CHECK(next.gradient_step == inner_count + 1);
      CHECK(flat(next.acc_grads).isZero(0));
      CHECK(optim::MultiSteps<decltype(optim::sgd(0.1, 0.5))>::has_updated(next));
      sum.setZero();
    } else {
      CHECK(u.isZero(0));
      CHECK(next.mini_step == t % k + 1);
      CHECK(close(flat(next.acc_grads), sum / double(t % k + 1)));
    }
    params = optim::apply_updates(params, updates);
    state = std::move(next);
  }
  CHECK(std::get<1>(state.inner_opt_state).count == 3);
  // step: the same numbers, in place.
  Tree a = params0(), b = params0();
  auto sa = tx.init(a), sb = tx.init(b);
  for (int t = 0; t < 2 * k + 1; ++t) {
    auto [u, next] = tx.update(grads_at(t), sa, a);
    a = optim::apply_updates(a, u);
    sa = std::move(next);
    tx.step(b, grads_at(t), sb);
    CHECK(close(flat(a), flat(b), 1e-15));
  }
  CHECK(optim_test::same_leaves(sa, sb));
}

TEST_CASE("apply_if_finite skips and counts non-finite gradients", "[optim][wrappers]") {
  const auto tx = optim::apply_if_finite(optim::adam(0.1), 2);
  Tree params = params0();
  auto state = tx.init(params);
  tx.step(params, grads_at(0), state);
  Tree bad = grads_at(1);
  std::get<1>(bad)["b"][1] = std::numeric_limits<double>::quiet_NaN();
  const Tree before = params;
  const auto inner_before = state.inner_state;
  auto [updates, next] = tx.update(bad, state, params);
  CHECK(flat(updates).isZero(0));
  CHECK(next.notfinite_count == 1);
  CHECK(next.total_notfinite == 1);
  CHECK_FALSE(next.last_finite);
  CHECK(optim_test::same_leaves(next.inner_state, inner_before));
  tx.step(params, bad, state);  // the same in place: nothing changes but the counts
  CHECK(flat(params) == flat(before));
  CHECK(state.notfinite_count == 1);
  CHECK(std::get<0>(state.inner_state).count == 1);
  std::get<0>(bad).w(1, 1) = std::numeric_limits<double>::infinity();
  tx.step(params, bad, state);
  CHECK(state.notfinite_count == 2);
  CHECK(flat(params) == flat(before));
  // A finite update resets the consecutive count, not the total.
  tx.step(params, grads_at(2), state);
  CHECK(state.notfinite_count == 0);
  CHECK(state.total_notfinite == 2);
  CHECK(state.last_finite);
  CHECK(std::get<0>(state.inner_state).count == 2);
  // More than max_consecutive_errors in a row: the inner transformation runs anyway.
  for (int i = 0; i < 3; ++i) tx.step(params, bad, state);
  CHECK(state.notfinite_count == 3);
  CHECK(std::get<0>(state.inner_state).count == 3);
  CHECK_FALSE(flat(params).allFinite());
}

TEST_CASE("The optimizers: optax's chains and defaults", "[optim][alias]") {
  auto trajectory = [](const auto& tx) {
    Tree params = params0();
    auto state = tx.init(params);
    std::vector<Vec> out;
    for (int t = 0; t < 4; ++t) {
      tx.step(params, grads_at(t), state);
      out.push_back(flat(params));
    }
    return out;
  };
  auto by_hand = [](auto&& update) {
    Vec p = flat(params0());
    std::vector<Vec> out;
    for (int t = 0; t < 4; ++t) {
      p = p + update(t, flat(grads_at(t)), p);
      out.push_back(p);
    }
    return out;
  };
  auto same = [](const std::vector<Vec>& a, const std::vector<Vec>& b) {
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!close(a[i], b[i])) return false;
    return true;
  };
  const Eigen::Index n = optim_test::tree_elements;
  SECTION("sgd") {
    CHECK(same(trajectory(optim::sgd(0.1)),
               by_hand([](int, const Vec& g, const Vec&) { return Vec(-0.1 * g); })));
    Vec tr = Vec::Zero(n);
    CHECK(same(trajectory(optim::sgd(0.1, 0.9, true)), by_hand([&](int, const Vec& g, const Vec&) {
                 tr = g + 0.9 * tr;
                 return Vec(-0.1 * (g + 0.9 * tr));
               })));
  }
  SECTION("adam and adamw with their defaults") {
    for (const double wd : {0.0, 1e-4}) {
      Vec m = Vec::Zero(n), v = m;
      auto expected = by_hand([&](int t, const Vec& g, const Vec& p) {
        m = 0.1 * g + 0.9 * m;
        v = 0.001 * g.array().square().matrix() + 0.999 * v;
        const Vec m_hat = m / (1 - std::pow(0.9, t + 1)), v_hat = v / (1 - std::pow(0.999, t + 1));
        return Vec(-0.01 * ((m_hat.array() / (v_hat.array().sqrt() + 1e-8)).matrix() + wd * p));
      });
      CHECK(
          same(wd == 0 ? trajectory(optim::adam(0.01)) : trajectory(optim::adamw(0.01)), expected));
    }
  }
  SECTION("rmsprop and adagrad") {
    Vec nu = Vec::Zero(n);
    CHECK(same(trajectory(optim::rmsprop(0.01)), by_hand([&](int, const Vec& g, const Vec&) {
                 nu = 0.1 * g.array().square().matrix() + 0.9 * nu;
                 return Vec(-0.01 * (g.array() / (nu.array() + 1e-8).sqrt()).matrix());
               })));
    Vec sum = Vec::Constant(n, 0.1);
    CHECK(same(trajectory(optim::adagrad(0.01)), by_hand([&](int, const Vec& g, const Vec&) {
                 sum += g.array().square().matrix();
                 return Vec(-0.01 * (g.array() / (sum.array() + 1e-7).sqrt()).matrix());
               })));
  }
  SECTION("lion") {
    Vec mu = Vec::Zero(n);
    CHECK(same(trajectory(optim::lion(0.01)), by_hand([&](int, const Vec& g, const Vec& p) {
                 const Vec x = 0.1 * g + 0.9 * mu;
                 mu = 0.01 * g + 0.99 * mu;
                 const Vec s = x.unaryExpr([](double e) { return double((e > 0) - (e < 0)); });
                 return Vec(-0.01 * (s + 1e-3 * p));
               })));
  }
}

TEST_CASE("Bad hyperparameters raise grove::argument_error naming the argument",
          "[optim][errors]") {
  auto throws = [](auto make, const char* message) {
    CHECK_THROWS_AS(make(), grove::argument_error);
    CHECK_THROWS_AS(make(), std::invalid_argument);
    CHECK_THROWS_WITH(make(), StartsWith(message));
  };
  throws([] { return optim::sgd(-0.1); },
         "grove::optim::sgd: learning_rate must be >= 0, got -0.1");
  throws([] { return optim::sgd(0.1, 1.0); },
         "grove::optim::sgd: momentum must be in [0, 1), got 1");
  throws([] { return optim::adam(-1e-3); }, "grove::optim::adam: learning_rate must be >= 0");
  throws([] { return optim::adam(1e-3, 1.0); }, "grove::optim::adam: b1 must be in [0, 1), got 1");
  throws([] { return optim::adam(1e-3, -0.1); }, "grove::optim::adam: b1 must be in [0, 1)");
  throws([] { return optim::adam(1e-3, 0.9, 1.5); },
         "grove::optim::adam: b2 must be in [0, 1), got 1.5");
  throws([] { return optim::adam(1e-3, 0.9, 0.999, -1.0); },
         "grove::optim::adam: eps must be >= 0");
  throws([] { return optim::adamw(1e-3, 0.9, 0.999, 1e-8, 0, -0.1); },
         "grove::optim::adamw: weight_decay must be >= 0, got -0.1");
  throws([] { return optim::adamw(1e-3, 0.9, 1.0); }, "grove::optim::adamw: b2 must be in [0, 1)");
  throws([] { return optim::add_decayed_weights(-1); },
         "grove::optim::add_decayed_weights: weight_decay must be >= 0, got -1");
  throws([] { return optim::scale_by_adam(1.2); },
         "grove::optim::scale_by_adam: b1 must be in [0, 1), got 1.2");
  throws([] { return optim::scale_by_learning_rate(-2.0); },
         "grove::optim::scale_by_learning_rate: learning_rate must be >= 0, got -2");
  throws([] { return optim::rmsprop(0.1, 1.0); }, "grove::optim::rmsprop: decay must be in [0, 1)");
  throws([] { return optim::adagrad(0.1, -0.1); },
         "grove::optim::adagrad: initial_accumulator_value must be >= 0");
  throws([] { return optim::lion(0.1, 0.9, 1.0); }, "grove::optim::lion: b2 must be in [0, 1)");
  throws([] { return optim::lion(0.1, 0.9, 0.99, -1e-3); },
         "grove::optim::lion: weight_decay must be >= 0");
  throws([] { return optim::trace(-0.5); }, "grove::optim::trace: decay must be in [0, 1)");
  throws([] { return optim::clip(-1); }, "grove::optim::clip: max_delta must be >= 0, got -1");
  throws([] { return optim::clip_by_global_norm(-1); },
         "grove::optim::clip_by_global_norm: max_norm must be >= 0, got -1");
  throws([] { return optim::multi_steps(optim::sgd(0.1), 0); },
         "grove::optim::multi_steps: every_k_schedule must be >= 1, got 0");
  throws([] { return optim::apply_if_finite(optim::sgd(0.1), -1); },
         "grove::optim::apply_if_finite: max_consecutive_errors must be >= 0, got -1");
}

TEST_CASE("Hyperparameters that are not finite raise grove::argument_error naming the argument",
          "[optim][errors]") {
  // inf passes `x >= 0`; each of these made the parameters infinite or NaN at the first step.
  auto throws = [](auto make, const std::string& message) {
    CHECK_THROWS_AS(make(), grove::argument_error);
    CHECK_THROWS_WITH(make(), Catch::Matchers::Equals("grove::optim::" + message));
  };
  const double inf = INFINITY, nan = NAN;
  throws([&] { return optim::sgd(inf); }, "sgd: learning_rate must be finite, got inf");
  throws([&] { return optim::sgd(nan); }, "sgd: learning_rate must be finite, got nan");
  throws([&] { return optim::sgd(0.1, nan); }, "sgd: momentum must be in [0, 1), got nan");
  throws([&] { return optim::adam(inf); }, "adam: learning_rate must be finite, got inf");
  throws([&] { return optim::adam(1e-3, 0.9, 0.999, inf); }, "adam: eps must be finite, got inf");
  throws([&] { return optim::adam(1e-3, 0.9, 0.999, 1e-8, inf); },
         "adam: eps_root must be finite, got inf");
  throws([&] { return optim::adamw(1e-3, 0.9, 0.999, 1e-8, 0, inf); },
         "adamw: weight_decay must be finite, got inf");
  throws([&] { return optim::adamw(1e-3, 0.9, 0.999, 1e-8, 0, inf, true); },
         "adamw: weight_decay must be finite, got inf");
  throws([&] { return optim::adamw(inf); }, "adamw: learning_rate must be finite, got inf");
  throws([&] { return optim::rmsprop(inf); }, "rmsprop: learning_rate must be finite, got inf");
  throws([&] { return optim::rmsprop(0.1, 0.9, inf); }, "rmsprop: eps must be finite, got inf");
  throws([&] { return optim::rmsprop(0.1, 0.9, 1e-8, inf); },
         "rmsprop: initial_scale must be finite, got inf");
  throws([&] { return optim::adagrad(0.1, inf); },
         "adagrad: initial_accumulator_value must be finite, got inf");
  throws([&] { return optim::adagrad(0.1, 0.1, nan); }, "adagrad: eps must be finite, got nan");
  throws([&] { return optim::lion(0.1, 0.9, 0.99, inf); },
         "lion: weight_decay must be finite, got inf");
  throws([&] { return optim::lion(0.1, inf); }, "lion: b1 must be in [0, 1), got inf");
  throws([&] { return optim::scale(inf); }, "scale: step_size must be finite, got inf");
  throws([&] { return optim::scale(-inf); }, "scale: step_size must be finite, got -inf");
  throws([&] { return optim::scale_by_schedule(optim::Schedule(nan)); },
         "scale_by_schedule: step_size_fn must be finite, got nan");
  throws([&] { return optim::scale_by_learning_rate(inf); },
         "scale_by_learning_rate: learning_rate must be finite, got inf");
  throws([&] { return optim::scale_by_learning_rate(inf, false); },
         "scale_by_learning_rate: learning_rate must be finite, got inf");
  throws([&] { return optim::scale_by_adam(0.9, 0.999, nan); },
         "scale_by_adam: eps must be finite, got nan");
  throws([&] { return optim::scale_by_rms(0.9, inf); },
         "scale_by_rms: eps must be finite, got inf");
  throws([&] { return optim::scale_by_rss(inf); },
         "scale_by_rss: initial_accumulator_value must be finite, got inf");
  throws([&] { return optim::trace(inf); }, "trace: decay must be in [0, 1), got inf");
  throws([&] { return optim::add_decayed_weights(inf); },
         "add_decayed_weights: weight_decay must be finite, got inf");
  throws([&] { return optim::add_decayed_weights(nan, true); },
         "add_decayed_weights: weight_decay must be finite, got nan");
  throws([&] { return optim::clip(inf); }, "clip: max_delta must be finite, got inf");
  throws([&] { return optim::clip_by_global_norm(inf); },
         "clip_by_global_norm: max_norm must be finite, got inf");
  throws([&] { return optim::clip_by_global_norm(nan); },
         "clip_by_global_norm: max_norm must be finite, got nan");
}

namespace {
constexpr std::int64_t wrapper_int64_max = std::numeric_limits<std::int64_t>::max();
// tx.step throws Error (a grove::argument_error) with exactly "grove::optim::step: " + message
// and leaves params and state as they were; tx.update the same with grove::optim::update.
template <class Error = grove::argument_error, class Tx, class P, class State>
void refused_state(const Tx& tx, const P& params, const P& grads, const State& state,
                   const std::string& message) {
  P p = params;
  State s = state;
  CHECK_THROWS_AS(tx.step(p, grads, s), Error);
  CHECK_THROWS_WITH(tx.step(p, grads, s),
                    Catch::Matchers::Equals("grove::optim::step: " + message));
  CHECK(optim_test::same_leaves(p, params));
  CHECK(optim_test::same_leaves(s, state));
  CHECK_THROWS_WITH(tx.update(grads, state, params),
                    Catch::Matchers::Equals("grove::optim::update: " + message));
}
}  // namespace

TEST_CASE("multi_steps and apply_if_finite refuse counts they cannot advance, changing nothing",
          "[optim][wrappers][errors]") {
  const Tree params = params0(), grads = grads_at(0);
  const std::string range = ", outside [0, 9223372036854775807): a step adds 1 to it";
  const auto ms = optim::multi_steps(optim::adam(0.1), 3);
  const auto fresh = ms.init(params);
  auto s = fresh;
  s.mini_step = 3;
  refused_state(ms, params, grads, s,
                "the optimizer state's leaf .mini_step is 3, outside [0, 3) (every_k_schedule is "
                "3)");
  s.mini_step = -1;
  refused_state(ms, params, grads, s,
                "the optimizer state's leaf .mini_step is -1, outside [0, 3) (every_k_schedule is "
                "3)");
  s = fresh;
  s.gradient_step = wrapper_int64_max;
  refused_state(ms, params, grads, s,
                "the optimizer state's leaf .gradient_step is 9223372036854775807" + range);
  // The inner state, at the mini step that runs the inner step: the accumulated gradients are
  // unchanged too.
  s = fresh;
  s.mini_step = 2;
  s.acc_grads = grads_at(5);
  std::get<0>(s.inner_opt_state).count = wrapper_int64_max;
  refused_state(
      ms, params, grads, s,
      "the optimizer state's leaf .inner_opt_state[0].count is 9223372036854775807" + range);
  // ... and a schedule's value that is not finite there.
  const auto ms_nan = optim::multi_steps(
      optim::sgd(optim::Schedule([](std::int64_t c) { return c == 0 ? NAN : 0.1; })), 2);
  auto sn = ms_nan.init(params);
  sn.mini_step = 1;
  sn.acc_grads = grads_at(5);
  refused_state(ms_nan, params, grads, sn,
                "learning_rate is nan at count 0 (the optimizer state's leaf "
                ".inner_opt_state[0].count): a step needs a finite value");

  const auto aif = optim::apply_if_finite(optim::adam(0.1), 2);
  Tree bad = grads;
  std::get<0>(bad).w(0, 0) = NAN;
  auto a = aif.init(params);
  a.notfinite_count = wrapper_int64_max;
  refused_state(aif, params, bad, a,
                "the optimizer state's leaf .notfinite_count is 9223372036854775807" + range);
  a = aif.init(params);
  a.total_notfinite = -2;
  refused_state(aif, params, bad, a, "the optimizer state's leaf .total_notfinite is -2" + range);
  a = aif.init(params);
  std::get<1>(a.inner_state).count = -1;
  refused_state(aif, params, grads, a,
                "the optimizer state's leaf .inner_state[1].count is -1" + range);
  // Inside a chain, the path is the whole state's.
  const auto chained = optim::chain(optim::clip(1.0), optim::apply_if_finite(optim::adam(0.1), 2));
  auto c = chained.init(params);
  std::get<0>(std::get<1>(c).inner_state).count = wrapper_int64_max;
  refused_state(
      chained, params, grads, c,
      "the optimizer state's leaf [1].inner_state[0].count is 9223372036854775807" + range);
}

TEST_CASE("The wrappers refuse gradients of another shape, changing nothing",
          "[optim][wrappers][errors]") {
  using Params = std::tuple<Eigen::MatrixXd>;
  const Params params{Eigen::MatrixXd::Ones(2, 3)};
  const Params grads{Eigen::MatrixXd::Ones(3, 2)};
  const std::string message =
      "leaf 0 (in tree_leaves order) at [0] has shape (3, 2) in the gradients and (2, 3) in the "
      "parameters";
  auto check = [&](const auto& tx) {
    refused_state<grove::shape_error>(tx, params, grads, tx.init(params), message);
  };
  check(optim::multi_steps(optim::adam(0.1), 2));
  check(optim::apply_if_finite(optim::adam(0.1), 2));
  check(optim::adamw(0.1, 0.9, 0.999, 1e-8, 0, 1e-2, true));
}

TEST_CASE("Trees that do not match the state", "[optim][errors]") {
  using Params = std::vector<Eigen::VectorXd>;
  const Params params{Eigen::VectorXd::Ones(3), Eigen::VectorXd::Ones(2)};
  const auto tx = optim::adam(0.1);
  auto state = tx.init(params);
  Params shorter{Eigen::VectorXd::Ones(3)};
  CHECK_THROWS_AS(tx.update(shorter, state, params), grove::tree_error);
  Params resized{Eigen::VectorXd::Ones(3), Eigen::VectorXd::Ones(4)};
  Params p = params;
  CHECK_THROWS_AS(tx.step(p, resized, state), grove::shape_error);
  CHECK_THROWS_WITH(tx.step(p, resized, state),
                    StartsWith("grove::optim::step: leaf 1 (in tree_leaves order) at [1] has "
                               "shape (4, 1) in the gradients and (2, 1) in the parameters"));
  CHECK(std::get<0>(state).count == 0);  // nothing changed
  CHECK_THROWS_AS(optim::apply_updates(params, resized), grove::shape_error);
}
