// grove::optim's schedules against optax's formulas, evaluated by hand here in double, and their
// argument errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <grove/optim.hpp>
#include <numbers>
#include <string>

namespace optim = grove::optim;
using Catch::Matchers::StartsWith;

namespace {
constexpr double pi = std::numbers::pi;
void check_close(double actual, double expected) {
  CHECK(std::abs(actual - expected) <= 1e-12 * std::max(1.0, std::abs(expected)));
}
}  // namespace

TEST_CASE("constant_schedule and a number are constant", "[optim][schedule]") {
  const optim::Schedule s = optim::constant_schedule(0.25);
  const optim::Schedule n = 0.5;
  for (std::int64_t c : {0, 1, 7, 1000000}) {
    CHECK(s(c) == 0.25);
    CHECK(n(c) == 0.5);
  }
  CHECK(n.constant_value() == 0.5);
  CHECK_FALSE(optim::Schedule([](std::int64_t c) { return double(c); }).constant_value());
}

TEST_CASE("linear_schedule and polynomial_schedule", "[optim][schedule]") {
  // optax: c = clip(count - begin, 0, steps); (init - end) * (1 - c / steps)^power + end.
  const auto lin = optim::linear_schedule(1.0, 0.2, 5, 2);
  const auto poly = optim::polynomial_schedule(1.0, 0.2, 2.0, 5, 2);
  for (std::int64_t count = 0; count <= 10; ++count) {
    const double c = std::clamp<double>(count - 2, 0, 5);
    check_close(lin(count), 0.8 * (1 - c / 5) + 0.2);
    check_close(poly(count), 0.8 * std::pow(1 - c / 5, 2) + 0.2);
  }
  CHECK(lin(0) == 1.0);
  CHECK(lin(2) == 1.0);
  check_close(lin(7), 0.2);
  check_close(lin(100), 0.2);
}

TEST_CASE("exponential_decay: continuous, staircase, transition_begin, end_value",
          "[optim][schedule]") {
  const auto cont = optim::exponential_decay(2.0, 4, 0.5);
  const auto stair = optim::exponential_decay(2.0, 4, 0.5, 3, true);
  const auto floor = optim::exponential_decay(2.0, 4, 0.5, 0, false, 0.7);
  const auto grow = optim::exponential_decay(1.0, 2, 3.0, 0, false, 5.0);
  for (std::int64_t count = 0; count <= 12; ++count) {
    check_close(cont(count), count <= 0 ? 2.0 : 2.0 * std::pow(0.5, count / 4.0));
    const double d = count - 3.0;
    check_close(stair(count), d <= 0 ? 2.0 : 2.0 * std::pow(0.5, std::floor(d / 4)));
    check_close(floor(count), std::max(0.7, 2.0 * std::pow(0.5, count / 4.0)));
    check_close(grow(count), std::min(5.0, std::pow(3.0, count / 2.0)));
  }
  CHECK(stair(3) == 2.0);
  CHECK(stair(6) == 2.0);
  CHECK(stair(7) == 1.0);
  CHECK(floor(12) == 0.7);
  CHECK(grow(12) == 5.0);
}

TEST_CASE("cosine_decay_schedule", "[optim][schedule]") {
  const auto s = optim::cosine_decay_schedule(0.5, 10, 0.1);
  const auto e = optim::cosine_decay_schedule(0.5, 10, 0.1, 2.0);
  for (std::int64_t count = 0; count <= 14; ++count) {
    const double c = std::min<double>(count, 10);
    const double cosine = 0.5 * (1 + std::cos(pi * c / 10));
    check_close(s(count), 0.5 * (0.9 * cosine + 0.1));
    check_close(e(count), 0.5 * (0.9 * cosine * cosine + 0.1));
  }
  CHECK(s(0) == 0.5);
  check_close(s(10), 0.05);
  check_close(s(1000), 0.05);
}

TEST_CASE("warmup_cosine_decay_schedule", "[optim][schedule]") {
  // Linear 0.1 -> 1.0 over 4 steps, then cosine from 1.0 to 0.2 over 10 - 4 = 6 steps.
  const auto s = optim::warmup_cosine_decay_schedule(0.1, 1.0, 4, 10, 0.2);
  for (std::int64_t count = 0; count <= 12; ++count) {
    double expected;
    if (count < 4) {
      expected = 0.1 + (1.0 - 0.1) * count / 4.0;
    } else {
      const double c = std::min<double>(count - 4, 6);
      const double alpha = 0.2 / 1.0;
      expected = 1.0 * ((1 - alpha) * 0.5 * (1 + std::cos(pi * c / 6)) + alpha);
    }
    check_close(s(count), expected);
  }
  check_close(s(0), 0.1);
  CHECK(s(4) == 1.0);
  check_close(s(10), 0.2);
  check_close(s(50), 0.2);
  // No warmup: the cosine part from the first step.
  const auto no_warmup = optim::warmup_cosine_decay_schedule(0.0, 1.0, 0, 5);
  CHECK(no_warmup(0) == 1.0);
  check_close(no_warmup(5), 0.0);
}

TEST_CASE("piecewise_constant_schedule: scales from each boundary on", "[optim][schedule]") {
  // Given out of order; optax sorts them. At count == boundary the scale applies (count >= b).
  const auto s = optim::piecewise_constant_schedule(1.0, {{6, 0.5}, {3, 0.1}});
  CHECK(s(0) == 1.0);
  CHECK(s(2) == 1.0);
  check_close(s(3), 0.1);
  check_close(s(5), 0.1);
  check_close(s(6), 0.05);
  check_close(s(100), 0.05);
  CHECK(optim::piecewise_constant_schedule(0.3)(10) == 0.3);
}

TEST_CASE("join_schedules counts each schedule from its boundary", "[optim][schedule]") {
  const auto s =
      optim::join_schedules({optim::Schedule([](std::int64_t c) { return 100.0 + double(c); }),
                             optim::Schedule([](std::int64_t c) { return 200.0 + double(c); }),
                             optim::constant_schedule(7.0)},
                            {3, 5});
  CHECK(s(0) == 100);
  CHECK(s(2) == 102);
  CHECK(s(3) == 200);
  CHECK(s(4) == 201);
  CHECK(s(5) == 7);
  CHECK(s(50) == 7);
}

TEST_CASE("Schedules reject what optax falls back from", "[optim][schedule][errors]") {
  auto throws = [](auto make, const char* message) {
    CHECK_THROWS_AS(make(), grove::argument_error);
    CHECK_THROWS_AS(make(), std::invalid_argument);
    CHECK_THROWS_WITH(make(), StartsWith(message));
  };
  throws([] { return optim::linear_schedule(1, 0, 0); },
         "grove::optim::linear_schedule: transition_steps must be positive, got 0");
  throws([] { return optim::linear_schedule(1, 0, 5, -1); },
         "grove::optim::linear_schedule: transition_begin must be >= 0, got -1");
  throws([] { return optim::polynomial_schedule(1, 0, 2, -3); },
         "grove::optim::polynomial_schedule: transition_steps must be positive, got -3");
  throws([] { return optim::exponential_decay(1, 0, 0.5); },
         "grove::optim::exponential_decay: transition_steps must be positive");
  throws([] { return optim::exponential_decay(1, 10, 0); },
         "grove::optim::exponential_decay: decay_rate must be positive");
  throws([] { return optim::exponential_decay(1, 10, 0.5, -2); },
         "grove::optim::exponential_decay: transition_begin must be >= 0, got -2");
  throws([] { return optim::cosine_decay_schedule(1, 0); },
         "grove::optim::cosine_decay_schedule: decay_steps must be positive, got 0");
  throws([] { return optim::warmup_cosine_decay_schedule(0, 1, 10, 10); },
         "grove::optim::warmup_cosine_decay_schedule: decay_steps must be greater than "
         "warmup_steps, got 10 and 10");
  throws([] { return optim::warmup_cosine_decay_schedule(0, 1, -1, 10); },
         "grove::optim::warmup_cosine_decay_schedule: warmup_steps must be >= 0, got -1");
  throws(
      [] {
        return optim::piecewise_constant_schedule(1, {{3, -0.5}});
      },
      "grove::optim::piecewise_constant_schedule: scales must be non-negative");
  throws(
      [] {
        return optim::piecewise_constant_schedule(1, {{3, 0.5}, {3, 0.2}});
      },
      "grove::optim::piecewise_constant_schedule: boundary 3 is given twice");
  throws([] { return optim::join_schedules({optim::Schedule(1.0)}, {3}); },
         "grove::optim::join_schedules: expects one boundary fewer than schedules, got 1 "
         "schedules and 1 boundaries");
}

TEST_CASE("Schedules refuse values that are not finite and powers that are not positive",
          "[optim][schedule][errors]") {
  // Each of these gave NaN or infinite learning rates, or (an infinite transition_steps) a
  // schedule that never changes.
  auto throws = [](auto make, const std::string& message) {
    CHECK_THROWS_AS(make(), grove::argument_error);
    CHECK_THROWS_WITH(make(), Catch::Matchers::Equals("grove::optim::" + message));
  };
  const double inf = INFINITY, nan = NAN;
  throws([&] { return optim::constant_schedule(nan); },
         "constant_schedule: value must be finite, got nan");
  throws([&] { return optim::linear_schedule(inf, 0, 5); },
         "linear_schedule: init_value must be finite, got inf");
  throws([&] { return optim::linear_schedule(1, -inf, 5); },
         "linear_schedule: end_value must be finite, got -inf");
  throws([&] { return optim::polynomial_schedule(nan, 0, 2, 5); },
         "polynomial_schedule: init_value must be finite, got nan");
  throws([&] { return optim::polynomial_schedule(1, nan, 2, 5); },
         "polynomial_schedule: end_value must be finite, got nan");
  throws([&] { return optim::polynomial_schedule(1, 0, -1, 5); },
         "polynomial_schedule: power must be positive, got -1");
  throws([&] { return optim::polynomial_schedule(1, 0, 0, 5); },
         "polynomial_schedule: power must be positive, got 0");
  throws([&] { return optim::polynomial_schedule(1, 0, inf, 5); },
         "polynomial_schedule: power must be finite, got inf");
  throws([&] { return optim::exponential_decay(nan, 10, 0.9); },
         "exponential_decay: init_value must be finite, got nan");
  throws([&] { return optim::exponential_decay(1e-3, inf, 0.5); },
         "exponential_decay: transition_steps must be finite, got inf");
  throws([&] { return optim::exponential_decay(1e-3, 10, inf); },
         "exponential_decay: decay_rate must be finite, got inf");
  throws([&] { return optim::exponential_decay(1e-3, 10, nan); },
         "exponential_decay: decay_rate must be finite, got nan");
  throws([&] { return optim::exponential_decay(1e-3, 10, 0.5, 0, false, nan); },
         "exponential_decay: end_value must be finite, got nan");
  throws([&] { return optim::cosine_decay_schedule(inf, 10); },
         "cosine_decay_schedule: init_value must be finite, got inf");
  throws([&] { return optim::cosine_decay_schedule(1, 10, nan); },
         "cosine_decay_schedule: alpha must be finite, got nan");
  throws([&] { return optim::cosine_decay_schedule(1, 10, 0, -2); },
         "cosine_decay_schedule: exponent must be positive, got -2");
  throws([&] { return optim::warmup_cosine_decay_schedule(nan, 1, 2, 10); },
         "warmup_cosine_decay_schedule: init_value must be finite, got nan");
  throws([&] { return optim::warmup_cosine_decay_schedule(0, inf, 2, 10); },
         "warmup_cosine_decay_schedule: peak_value must be finite, got inf");
  throws([&] { return optim::warmup_cosine_decay_schedule(0, 1, 2, 10, -inf); },
         "warmup_cosine_decay_schedule: end_value must be finite, got -inf");
  throws([&] { return optim::warmup_cosine_decay_schedule(0, 1, 2, 10, 0, -1); },
         "warmup_cosine_decay_schedule: exponent must be positive, got -1");
  throws([&] { return optim::warmup_cosine_decay_schedule(0, 1e-300, 2, 10, 1e300); },
         "warmup_cosine_decay_schedule: end_value / peak_value must be finite, got 1e+300 / "
         "1e-300");
  throws(
      [&] {
        return optim::piecewise_constant_schedule(nan, {{3, 0.5}});
      },
      "piecewise_constant_schedule: init_value must be finite, got nan");
  throws(
      [&] {
        return optim::piecewise_constant_schedule(1, {{3, inf}});
      },
      "piecewise_constant_schedule: scales must be finite, got inf at boundary 3");
  throws(
      [&] {
        return optim::piecewise_constant_schedule(1, {{5, 1e200}, {3, 1e200}});
      },
      "piecewise_constant_schedule: the value from boundary 5 on, init_value times the scales "
      "so far, overflows to inf");
  throws(
      [&] {
        return optim::join_schedules({0.1, optim::Schedule(nan)}, {3});
      },
      "join_schedules: schedules[1] must be finite, got nan");
  // The largest finite values are fine.
  CHECK(optim::exponential_decay(1e-3, 1e6, 0.5)(10) < 1e-3);
  check_close(optim::piecewise_constant_schedule(1, {{3, 1e200}, {5, 1e-200}})(6), 1.0);
}
