// grove/optim/schedule.hpp: schedules, optax's functions of the step count
// (optax/_src/schedule.py): constant, linear and polynomial, exponential decay, cosine decay,
// warmup + cosine decay, piecewise constant, and join_schedules to run several one after the other.
//
// Where optax logs a message and falls back to a constant schedule (a non-positive
// transition_steps, a zero decay_rate, a negative transition_begin), grove throws
// grove::argument_error instead: a schedule that silently never changes hides a typo for a whole
// training run, and a C++ program has no log to read it from. Every value, rate, power and scale
// must be finite as well (a NaN or infinite one gives NaN or infinite learning rates, or, as an
// infinite transition_steps, a schedule that never changes), and every power positive.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <functional>
#include <numbers>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "grove/error.hpp"
#include "grove/optim/detail/check.hpp"

namespace grove::optim {

/// A value as a function of the step count (optax's Schedule). A number converts to a constant
/// schedule, so that every learning-rate argument takes a number or a schedule. Calling it does
/// not allocate.
class Schedule {
 public:
  /// The constant schedule `value`.
  Schedule(double value)  // NOLINT: implicit on purpose
      : f_([value](std::int64_t) { return value; }), constant_(value) {}
  /// A schedule from any callable taking the count (std::int64_t) and returning a double.
  template <class F>
  requires(std::is_invocable_r_v<double, const F&, std::int64_t> &&
           !std::same_as<std::remove_cvref_t<F>, Schedule>)
      Schedule(F f)  // NOLINT: implicit on purpose
      : f_(std::move(f)) {}

  /// The value at step `count`.
  double operator()(std::int64_t count) const { return f_(count); }
  /// The value, when the schedule was made from a number; empty for a function.
  std::optional<double> constant_value() const { return constant_; }

 private:
  std::function<double(std::int64_t)> f_;
  std::optional<double> constant_;
};

namespace detail {
[[noreturn]] inline void schedule_error(const char* who, const std::string& what) {
  fail(who, what);
}
inline std::string number(double x) {
  return format(x);
}
}  // namespace detail

/// optax.constant_schedule(value). Throws grove::argument_error for a value that is not finite
/// (a Schedule converted from a number is checked by the function it is given to).
inline Schedule constant_schedule(double value) {
  detail::check_finite("constant_schedule", "value", value);
  return Schedule(value);
}

/// optax.polynomial_schedule: (init_value - end_value) * (1 - c / transition_steps)^power +
/// end_value with c = clip(count - transition_begin, 0, transition_steps). Throws
/// grove::argument_error for transition_steps <= 0 or transition_begin < 0 (optax falls back to a
/// constant schedule and to 0), an init_value or end_value that is not finite, a power that is
/// not finite and positive (a negative one is infinite at the end, 0 never changes).
inline Schedule polynomial_schedule(double init_value, double end_value, double power,
                                    std::int64_t transition_steps,
                                    std::int64_t transition_begin = 0) {
  detail::check_finite("polynomial_schedule", "init_value", init_value);
  detail::check_finite("polynomial_schedule", "end_value", end_value);
  detail::check_positive("polynomial_schedule", "power", power);
  if (transition_steps <= 0)
    detail::schedule_error("polynomial_schedule", "transition_steps must be positive, got " +
                                                      std::to_string(transition_steps));
  if (transition_begin < 0)
    detail::schedule_error("polynomial_schedule", "transition_begin must be >= 0, got " +
                                                      std::to_string(transition_begin));
  return Schedule([=](std::int64_t count) {
    const double c = static_cast<double>(
        std::clamp<std::int64_t>(count - transition_begin, 0, transition_steps));
    const double frac = 1 - c / static_cast<double>(transition_steps);
    return (init_value - end_value) * std::pow(frac, power) + end_value;
  });
}

/// optax.linear_schedule: polynomial_schedule with power 1, from init_value to end_value over
/// transition_steps steps after transition_begin. Same errors as polynomial_schedule (named
/// linear_schedule).
inline Schedule linear_schedule(double init_value, double end_value, std::int64_t transition_steps,
                                std::int64_t transition_begin = 0) {
  detail::check_finite("linear_schedule", "init_value", init_value);
  detail::check_finite("linear_schedule", "end_value", end_value);
  if (transition_steps <= 0)
    detail::schedule_error("linear_schedule", "transition_steps must be positive, got " +
                                                  std::to_string(transition_steps));
  if (transition_begin < 0)
    detail::schedule_error("linear_schedule", "transition_begin must be >= 0, got " +
                                                  std::to_string(transition_begin));
  return polynomial_schedule(init_value, end_value, 1.0, transition_steps, transition_begin);
}

/// optax.exponential_decay: init_value * decay_rate^p with p = (count - transition_begin) /
/// transition_steps (floored when staircase), init_value while count <= transition_begin; with an
/// end_value, the value is clipped at it (a lower bound when decay_rate < 1, else an upper
/// bound). The JAX MLP walk-through's `init_lr * decay_rate ** (step / decay_steps)` is
/// exponential_decay(init_lr, decay_steps, decay_rate). Throws grove::argument_error for
/// transition_steps <= 0, decay_rate <= 0 (optax: constant init_value for 0; a negative rate
/// gives NaN at fractional powers) or transition_begin < 0 (optax: 0), and for an init_value,
/// transition_steps (an infinite one never changes), decay_rate or end_value that is not finite.
inline Schedule exponential_decay(double init_value, double transition_steps, double decay_rate,
                                  std::int64_t transition_begin = 0, bool staircase = false,
                                  std::optional<double> end_value = std::nullopt) {
  detail::check_finite("exponential_decay", "init_value", init_value);
  detail::check_positive("exponential_decay", "transition_steps", transition_steps);
  detail::check_positive("exponential_decay", "decay_rate", decay_rate);
  if (end_value) detail::check_finite("exponential_decay", "end_value", *end_value);
  if (transition_begin < 0)
    detail::schedule_error("exponential_decay", "transition_begin must be >= 0, got " +
                                                    std::to_string(transition_begin));
  return Schedule([=](std::int64_t count) {
    const double decreased = static_cast<double>(count - transition_begin);
    double p = decreased / transition_steps;
    if (staircase) p = std::floor(p);
    double value = decreased <= 0 ? init_value : init_value * std::pow(decay_rate, p);
    if (end_value)
      value = decay_rate < 1 ? std::max(value, *end_value) : std::min(value, *end_value);
    return value;
  });
}

/// optax.cosine_decay_schedule: init_value * ((1 - alpha) * c^exponent + alpha) with
/// c = (1 + cos(pi * min(count, decay_steps) / decay_steps)) / 2; constant after decay_steps.
/// Throws grove::argument_error for decay_steps <= 0 (as optax raises), an init_value or alpha
/// that is not finite, an exponent that is not finite and positive (a negative one is infinite
/// at the end, 0 never changes).
inline Schedule cosine_decay_schedule(double init_value, std::int64_t decay_steps,
                                      double alpha = 0.0, double exponent = 1.0) {
  detail::check_finite("cosine_decay_schedule", "init_value", init_value);
  detail::check_finite("cosine_decay_schedule", "alpha", alpha);
  detail::check_positive("cosine_decay_schedule", "exponent", exponent);
  if (decay_steps <= 0)
    detail::schedule_error("cosine_decay_schedule",
                           "decay_steps must be positive, got " + std::to_string(decay_steps));
  return Schedule([=](std::int64_t count) {
    const double c = static_cast<double>(std::min(count, decay_steps));
    const double cosine =
        0.5 * (1 + std::cos(std::numbers::pi * c / static_cast<double>(decay_steps)));
    return init_value * ((1 - alpha) * std::pow(cosine, exponent) + alpha);
  });
}

/// optax.join_schedules: schedules[0] until boundaries[0], then schedules[1] counted from
/// boundaries[0], and so on (each schedule sees the steps since its boundary). Throws
/// grove::argument_error unless there is one boundary fewer than schedules, or for a schedule
/// converted from a number that is not finite.
inline Schedule join_schedules(std::vector<Schedule> schedules,
                               std::vector<std::int64_t> boundaries) {
  if (schedules.empty() || boundaries.size() + 1 != schedules.size())
    detail::schedule_error("join_schedules", "expects one boundary fewer than schedules, got " +
                                                 std::to_string(schedules.size()) +
                                                 " schedules and " +
                                                 std::to_string(boundaries.size()) + " boundaries");
  for (std::size_t i = 0; i < schedules.size(); ++i)
    if (const auto v = schedules[i].constant_value(); v && !std::isfinite(*v))
      detail::schedule_error("join_schedules", "schedules[" + std::to_string(i) +
                                                   "] must be finite, got " + detail::number(*v));
  return Schedule(
      [schedules = std::move(schedules), boundaries = std::move(boundaries)](std::int64_t count) {
        double value = schedules[0](count);
        for (std::size_t i = 0; i < boundaries.size(); ++i)
          if (count >= boundaries[i]) value = schedules[i + 1](count - boundaries[i]);
        return value;
      });
}

/// optax.warmup_cosine_decay_schedule: linear from init_value to peak_value over warmup_steps,
/// then cosine decay from peak_value to end_value over decay_steps - warmup_steps (decay_steps
/// counts the warmup, as in optax). warmup_steps = 0 means no warmup. Throws
/// grove::argument_error for warmup_steps < 0 or decay_steps <= warmup_steps, an init_value,
/// peak_value or end_value that is not finite (or end_value / peak_value, the cosine's alpha), an
/// exponent that is not finite and positive.
inline Schedule warmup_cosine_decay_schedule(double init_value, double peak_value,
                                             std::int64_t warmup_steps, std::int64_t decay_steps,
                                             double end_value = 0.0, double exponent = 1.0) {
  constexpr const char* who = "warmup_cosine_decay_schedule";
  detail::check_finite(who, "init_value", init_value);
  detail::check_finite(who, "peak_value", peak_value);
  detail::check_finite(who, "end_value", end_value);
  detail::check_positive(who, "exponent", exponent);
  if (warmup_steps < 0)
    detail::schedule_error("warmup_cosine_decay_schedule",
                           "warmup_steps must be >= 0, got " + std::to_string(warmup_steps));
  if (decay_steps <= warmup_steps)
    detail::schedule_error("warmup_cosine_decay_schedule",
                           "decay_steps must be greater than warmup_steps, got " +
                               std::to_string(decay_steps) + " and " +
                               std::to_string(warmup_steps));
  const double alpha = peak_value == 0 ? 0.0 : end_value / peak_value;
  if (!std::isfinite(alpha))
    detail::schedule_error(who, "end_value / peak_value must be finite, got " +
                                    detail::number(end_value) + " / " + detail::number(peak_value));
  Schedule decay = cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent);
  if (warmup_steps == 0) return decay;
  return join_schedules({linear_schedule(init_value, peak_value, warmup_steps), std::move(decay)},
                        {warmup_steps});
}

/// optax.piecewise_constant_schedule: init_value times the product of the scales of every
/// boundary that count has reached (count >= boundary, as optax computes it), e.g.
/// piecewise_constant_schedule(0.1, {{1000, 0.1}, {2000, 0.5}}). The pairs may come in any
/// order. Throws grove::argument_error for a negative scale (as optax raises) or a boundary given
/// twice (a Python dict cannot hold it twice), an init_value or scale that is not finite, or
/// scales whose product overflows (the value from some boundary on would be infinite).
inline Schedule piecewise_constant_schedule(
    double init_value, std::vector<std::pair<std::int64_t, double>> boundaries_and_scales = {}) {
  detail::check_finite("piecewise_constant_schedule", "init_value", init_value);
  std::sort(boundaries_and_scales.begin(), boundaries_and_scales.end());
  double value = init_value;
  for (std::size_t i = 0; i < boundaries_and_scales.size(); ++i) {
    const auto& [boundary, scale] = boundaries_and_scales[i];
    if (!std::isfinite(scale))
      detail::schedule_error("piecewise_constant_schedule",
                             "scales must be finite, got " + detail::number(scale) +
                                 " at boundary " + std::to_string(boundary));
    if (!(scale >= 0))
      detail::schedule_error("piecewise_constant_schedule",
                             "scales must be non-negative, got " + detail::number(scale) +
                                 " at boundary " + std::to_string(boundary));
    if (i > 0 && boundaries_and_scales[i - 1].first == boundary)
      detail::schedule_error("piecewise_constant_schedule",
                             "boundary " + std::to_string(boundary) + " is given twice");
    value *= scale;
    if (!std::isfinite(value))
      detail::schedule_error("piecewise_constant_schedule",
                             "the value from boundary " + std::to_string(boundary) +
                                 " on, init_value times the scales so far, overflows to " +
                                 detail::number(value));
  }
  return Schedule([=, bs = std::move(boundaries_and_scales)](std::int64_t count) {
    double value = init_value;
    for (const auto& [boundary, scale] : bs)
      if (count >= boundary) value *= scale;
    return value;
  });
}

}  // namespace grove::optim
