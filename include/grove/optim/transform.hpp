// grove/optim/transform.hpp: optax's elementwise gradient transformations
// (optax/_src/transform.py): scale, scale_by_schedule, scale_by_learning_rate, scale_by_adam,
// scale_by_rms, scale_by_rss, scale_by_lion, trace and add_decayed_weights. Each is fused (see
// grove/optim/transformation.hpp): its step is one pass without allocation, and so is a chain of
// them.
//
// Hyperparameters are doubles, rounded once per step to each leaf's scalar type, as JAX treats
// Python floats; every constructor refuses a NaN or infinite one. Counts are std::int64_t (optax:
// int32); a step refuses a count it cannot advance (negative, or INT64_MAX).
#pragma once

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "grove/optim/detail/check.hpp"
#include "grove/optim/detail/leaf.hpp"
#include "grove/optim/detail/state.hpp"
#include "grove/optim/schedule.hpp"
#include "grove/optim/transformation.hpp"
#include "grove/optim/tree_utils.hpp"
#include "grove/tree.hpp"

namespace grove::optim {

namespace detail {
template <class U>
using scalar_of_chunk = typename std::remove_cvref_t<U>::Scalar;
}  // namespace detail

// --- scale ---------------------------------------------------------------------------------------

/// optax.scale: updates * step_size. State: EmptyState.
class Scale : public FusedTransformation<Scale> {
 public:
  explicit Scale(double step_size) : step_size_(step_size) {
    detail::check_finite("scale", "step_size", step_size);
  }
  template <class P>
  EmptyState init(const P&) const {
    return {};
  }
  double context(const EmptyState&, double) const { return step_size_; }
  template <class U, class Pc, class Scratch>
  auto apply(double step_size, const U& u, const Pc&, Index, Scratch&) const {
    return u * detail::scalar_of_chunk<U>(step_size);
  }

 private:
  double step_size_;
};

/// optax.scale(step_size). Throws grove::argument_error for a step_size that is not finite.
inline Scale scale(double step_size) {
  return Scale(step_size);
}

// --- scale_by_schedule ---------------------------------------------------------------------------

/// optax.ScaleByScheduleState: the number of updates so far, the schedule's argument.
struct ScaleByScheduleState {
  std::int64_t count = 0;
};
GROVE_NODE(ScaleByScheduleState, count);

/// optax.scale_by_schedule: updates * step_size_fn(count); count += 1. A step refuses a count it
/// cannot advance and a value of the schedule that is not finite, before anything changes (a
/// constant one is refused here).
class ScaleBySchedule : public FusedTransformation<ScaleBySchedule> {
 public:
  /// who and name are the function and argument the errors name; the errors report the
  /// schedule's value times `reported` (scale_by_learning_rate's schedule is -learning_rate).
  explicit ScaleBySchedule(Schedule step_size_fn, const char* who = "scale_by_schedule",
                           const char* name = "step_size_fn", double reported = 1.0)
      : fn_(std::move(step_size_fn)), name_(name), reported_(reported) {
    if (const auto v = fn_.constant_value()) detail::check_finite(who, name, reported * *v);
  }
  template <class P>
  ScaleByScheduleState init(const P&) const {
    return {};
  }
  /// step_size_fn(count), after checking the count and the value. Throws
  /// detail::state_leaf_error (step and update turn it into grove::argument_error).
  double context(const ScaleByScheduleState& s, double) const {
    detail::check_count(s.count);
    const double value = fn_(s.count);
    if (!std::isfinite(value))
      throw detail::state_leaf_error{&s.count,
                                     std::string(name_) + " is " +
                                         detail::format(reported_ * value) + " at count " +
                                         std::to_string(s.count) + " (the optimizer state's leaf ",
                                     "): a step needs a finite value"};
    return value;
  }
  template <class U, class Pc, class Scratch>
  auto apply(double step_size, const U& u, const Pc&, Index, Scratch&) const {
    return u * detail::scalar_of_chunk<U>(step_size);
  }
  void advance(ScaleByScheduleState& s) const { ++s.count; }
  /// The schedule.
  const Schedule& schedule() const { return fn_; }

 private:
  Schedule fn_;
  const char* name_;
  double reported_;
};

/// optax.scale_by_schedule(step_size_fn). Throws grove::argument_error for a constant
/// step_size_fn that is not finite.
inline ScaleBySchedule scale_by_schedule(Schedule step_size_fn) {
  return ScaleBySchedule(std::move(step_size_fn));
}

namespace detail {
inline ScaleBySchedule scale_by_learning_rate(const char* who, Schedule learning_rate,
                                              bool flip_sign) {
  if (const auto lr = learning_rate.constant_value()) check_non_negative(who, "learning_rate", *lr);
  const double m = flip_sign ? -1.0 : 1.0;
  if (const auto lr = learning_rate.constant_value())
    return ScaleBySchedule(m * *lr, who, "learning_rate", m);
  return ScaleBySchedule(
      [m, lr = std::move(learning_rate)](std::int64_t count) { return m * lr(count); }, who,
      "learning_rate", m);
}
}  // namespace detail

/// optax.scale_by_learning_rate: updates * -learning_rate(count) (without the minus sign when
/// flip_sign is false). grove keeps a count for a constant learning rate too (optax's state is
/// then empty), so that the state's type does not depend on the kind of argument. Throws
/// grove::argument_error for a constant learning rate that is negative or not finite; a step
/// throws it for a schedule's value that is not finite (see ScaleBySchedule).
inline ScaleBySchedule scale_by_learning_rate(Schedule learning_rate, bool flip_sign = true) {
  return detail::scale_by_learning_rate("scale_by_learning_rate", std::move(learning_rate),
                                        flip_sign);
}

// --- scale_by_adam -------------------------------------------------------------------------------

/// optax.ScaleByAdamState: the count and the first and second moments, trees shaped like params.
template <class P>
struct ScaleByAdamState {
  std::int64_t count = 0;
  P mu;
  P nu;
};
GROVE_NODE(ScaleByAdamState, count, mu, nu);

namespace detail {
struct adam_context {
  // 1 / (1 - b^t), computed in each scalar type as optax computes 1 - b^t.
  float inv_c1_f, inv_c2_f;
  double inv_c1_d, inv_c2_d;
  template <class S>
  S inv_c1() const {
    if constexpr (std::is_same_v<S, float>)
      return inv_c1_f;
    else
      return static_cast<S>(inv_c1_d);
  }
  template <class S>
  S inv_c2() const {
    if constexpr (std::is_same_v<S, float>)
      return inv_c2_f;
    else
      return static_cast<S>(inv_c2_d);
  }
};
template <class S>
S inverse_correction(double b, std::int64_t t) {
  return S(1) / (S(1) - std::pow(static_cast<S>(b), static_cast<S>(t)));
}
}  // namespace detail

/// optax.scale_by_adam: mu = (1 - b1) g + b1 mu, nu = (1 - b2) g^2 + b2 nu, t = count + 1,
/// updates = (mu / (1 - b1^t)) / (sqrt(nu / (1 - b2^t) + eps_root) + eps). grove multiplies by
/// the reciprocals of the bias corrections (within an ulp of optax's quotients), which leaves one
/// division and one square root per element.
class ScaleByAdam : public FusedTransformation<ScaleByAdam> {
 public:
  ScaleByAdam(double b1, double b2, double eps, double eps_root, const char* who = "scale_by_adam")
      : b1_(b1), b2_(b2), eps_(eps), eps_root_(eps_root) {
    detail::check_decay(who, "b1", b1);
    detail::check_decay(who, "b2", b2);
    detail::check_non_negative(who, "eps", eps);
    detail::check_non_negative(who, "eps_root", eps_root);
  }
  template <class P>
  ScaleByAdamState<P> init(const P& params) const {
    P zeros = ::grove::optim::tree_zeros_like(params);
    return {0, zeros, zeros};
  }
  template <class P>
  static auto buffers(ScaleByAdamState<P>& s) {
    return std::tie(s.mu, s.nu);
  }
  template <class P>
  detail::adam_context context(const ScaleByAdamState<P>& s, double) const {
    detail::check_count(s.count);
    const std::int64_t t = s.count + 1;
    return {detail::inverse_correction<float>(b1_, t), detail::inverse_correction<float>(b2_, t),
            detail::inverse_correction<double>(b1_, t), detail::inverse_correction<double>(b2_, t)};
  }
  template <class U, class Pc, class Scratch, class M, class V>
  auto apply(const detail::adam_context& c, const U& u_in, const Pc&, Index at, Scratch& scratch,
             M& mu, V& nu) const {
    using S = detail::scalar_of_chunk<U>;
    const Index n = u_in.size();
    const auto& u = detail::reusable(u_in, scratch);
    auto m = detail::flat(mu).segment(at, n);
    auto v = detail::flat(nu).segment(at, n);
    // 1 - b in double, then rounded, as optax's `(1 - decay) * g` computes it from a Python float
    // (in float, 1 - 0.999f is 1.3e-5 away from 0.001f).
    const S b1 = S(b1_), b2 = S(b2_), eps = S(eps_), eps_root = S(eps_root_);
    const S one_minus_b1 = S(1.0 - b1_), one_minus_b2 = S(1.0 - b2_);
    const S inv_c1 = c.inv_c1<S>(), inv_c2 = c.inv_c2<S>();
    m = one_minus_b1 * u + b1 * m;
    v = one_minus_b2 * u.square() + b2 * v;
    return (m * inv_c1) / (((v * inv_c2) + eps_root).sqrt() + eps);
  }
  template <class P>
  void advance(ScaleByAdamState<P>& s) const {
    ++s.count;
  }

 private:
  double b1_, b2_, eps_, eps_root_;
};

/// optax.scale_by_adam(b1=0.9, b2=0.999, eps=1e-8, eps_root=0). Throws grove::argument_error for
/// b1 or b2 outside [0, 1), or an eps or eps_root that is negative or not finite.
inline ScaleByAdam scale_by_adam(double b1 = 0.9, double b2 = 0.999, double eps = 1e-8,
                                 double eps_root = 0.0) {
  return ScaleByAdam(b1, b2, eps, eps_root);
}

// --- scale_by_rms --------------------------------------------------------------------------------

/// optax.ScaleByRmsState: the moving average of the squared updates.
template <class P>
struct ScaleByRmsState {
  P nu;
};
GROVE_NODE(ScaleByRmsState, nu);

/// optax.scale_by_rms: nu = (1 - decay) g^2 + decay nu, updates = g / sqrt(nu + eps) (optax:
/// g * rsqrt(nu + eps); eps inside the root, where torch.optim.RMSprop adds it outside).
class ScaleByRms : public FusedTransformation<ScaleByRms> {
 public:
  ScaleByRms(double decay, double eps, double initial_scale, const char* who = "scale_by_rms")
      : decay_(decay), eps_(eps), initial_scale_(initial_scale) {
    detail::check_decay(who, "decay", decay);
    detail::check_non_negative(who, "eps", eps);
    detail::check_non_negative(who, "initial_scale", initial_scale);
  }
  template <class P>
  ScaleByRmsState<P> init(const P& params) const {
    return {::grove::optim::tree_full_like(params, initial_scale_)};
  }
  template <class P>
  static auto buffers(ScaleByRmsState<P>& s) {
    return std::tie(s.nu);
  }
  template <class P>
  int context(const ScaleByRmsState<P>&, double) const {
    return 0;
  }
  template <class U, class Pc, class Scratch, class V>
  auto apply(int, const U& u_in, const Pc&, Index at, Scratch& scratch, V& nu) const {
    using S = detail::scalar_of_chunk<U>;
    const auto& u = detail::reusable(u_in, scratch);
    auto v = detail::flat(nu).segment(at, u.size());
    const S decay = S(decay_), one_minus_decay = S(1.0 - decay_), eps = S(eps_);
    v = one_minus_decay * u.square() + decay * v;
    // Returned by value: u may be a reference to an expression of this frame's caller.
    return std::remove_cvref_t<decltype(u)>(u) / (v + eps).sqrt();
  }

 private:
  double decay_, eps_, initial_scale_;
};

/// optax.scale_by_rms(decay=0.9, eps=1e-8, initial_scale=0). Throws grove::argument_error for
/// decay outside [0, 1), an eps or initial_scale that is negative or not finite.
inline ScaleByRms scale_by_rms(double decay = 0.9, double eps = 1e-8, double initial_scale = 0.0) {
  return ScaleByRms(decay, eps, initial_scale);
}

// --- scale_by_rss --------------------------------------------------------------------------------

/// optax.ScaleByRssState: the sum of the squared updates so far.
template <class P>
struct ScaleByRssState {
  P sum_of_squares;
};
GROVE_NODE(ScaleByRssState, sum_of_squares);

/// optax.scale_by_rss (adagrad's scaling): sum_of_squares += g^2, updates = g /
/// sqrt(sum_of_squares + eps) where sum_of_squares > 0, else 0.
class ScaleByRss : public FusedTransformation<ScaleByRss> {
 public:
  ScaleByRss(double initial_accumulator_value, double eps, const char* who = "scale_by_rss")
      : initial_(initial_accumulator_value), eps_(eps) {
    detail::check_non_negative(who, "initial_accumulator_value", initial_accumulator_value);
    detail::check_non_negative(who, "eps", eps);
  }
  template <class P>
  ScaleByRssState<P> init(const P& params) const {
    return {::grove::optim::tree_full_like(params, initial_)};
  }
  template <class P>
  static auto buffers(ScaleByRssState<P>& s) {
    return std::tie(s.sum_of_squares);
  }
  template <class P>
  int context(const ScaleByRssState<P>&, double) const {
    return 0;
  }
  template <class U, class Pc, class Scratch, class A>
  auto apply(int, const U& u_in, const Pc&, Index at, Scratch& scratch, A& sum) const {
    using S = detail::scalar_of_chunk<U>;
    const auto& u = detail::reusable(u_in, scratch);
    auto s = detail::flat(sum).segment(at, u.size());
    s += u.square();
    return (s > S(0)).select(std::remove_cvref_t<decltype(u)>(u) / (s + S(eps_)).sqrt(), S(0));
  }

 private:
  double initial_, eps_;
};

/// optax.scale_by_rss(initial_accumulator_value=0.1, eps=1e-7). Throws grove::argument_error for
/// an initial_accumulator_value or eps that is negative or not finite.
inline ScaleByRss scale_by_rss(double initial_accumulator_value = 0.1, double eps = 1e-7) {
  return ScaleByRss(initial_accumulator_value, eps);
}

// --- scale_by_lion -------------------------------------------------------------------------------

/// optax.ScaleByLionState: the count and the moving average of the updates.
template <class P>
struct ScaleByLionState {
  std::int64_t count = 0;
  P mu;
};
GROVE_NODE(ScaleByLionState, count, mu);

/// optax.scale_by_lion: updates = sign((1 - b1) g + b1 mu), then mu = (1 - b2) g + b2 mu.
class ScaleByLion : public FusedTransformation<ScaleByLion> {
 public:
  ScaleByLion(double b1, double b2, const char* who = "scale_by_lion") : b1_(b1), b2_(b2) {
    detail::check_decay(who, "b1", b1);
    detail::check_decay(who, "b2", b2);
  }
  template <class P>
  ScaleByLionState<P> init(const P& params) const {
    return {0, ::grove::optim::tree_zeros_like(params)};
  }
  template <class P>
  static auto buffers(ScaleByLionState<P>& s) {
    return std::tie(s.mu);
  }
  template <class P>
  int context(const ScaleByLionState<P>& s, double) const {
    detail::check_count(s.count);
    return 0;
  }
  template <class U, class Pc, class Scratch, class M>
  auto apply(int, const U& u_in, const Pc&, Index at, Scratch& scratch, M& mu) const {
    using S = detail::scalar_of_chunk<U>;
    scratch = u_in;
    auto m = detail::flat(mu).segment(at, scratch.size());
    const S b1 = S(b1_), b2 = S(b2_), one_minus_b1 = S(1.0 - b1_), one_minus_b2 = S(1.0 - b2_);
    for (Index i = 0; i < scratch.size(); ++i) {
      const S g = scratch[i];
      const S x = one_minus_b1 * g + b1 * m[i];
      scratch[i] = static_cast<S>((x > 0) - (x < 0));
      m[i] = one_minus_b2 * g + b2 * m[i];
    }
    return detail::chunk_map<S>(scratch.data(), scratch.size());
  }
  template <class P>
  void advance(ScaleByLionState<P>& s) const {
    ++s.count;
  }

 private:
  double b1_, b2_;
};

/// optax.scale_by_lion(b1=0.9, b2=0.99). Throws grove::argument_error for b1 or b2 outside
/// [0, 1).
inline ScaleByLion scale_by_lion(double b1 = 0.9, double b2 = 0.99) {
  return ScaleByLion(b1, b2);
}

// --- trace ---------------------------------------------------------------------------------------

/// optax.TraceState: the trace (momentum), a tree shaped like params.
template <class P>
struct TraceState {
  P trace;
};
GROVE_NODE(TraceState, trace);

/// optax.trace: trace = g + decay * trace; updates = trace, or with nesterov g + decay * trace
/// (the new trace).
class Trace : public FusedTransformation<Trace> {
 public:
  Trace(double decay, bool nesterov, const char* who = "trace", const char* name = "decay")
      : decay_(decay), nesterov_(nesterov) {
    detail::check_decay(who, name, decay);
  }
  template <class P>
  TraceState<P> init(const P& params) const {
    return {::grove::optim::tree_zeros_like(params)};
  }
  template <class P>
  static auto buffers(TraceState<P>& s) {
    return std::tie(s.trace);
  }
  template <class P>
  int context(const TraceState<P>&, double) const {
    return 0;
  }
  template <class U, class Pc, class Scratch, class T>
  auto apply(int, const U& u, const Pc&, Index at, Scratch& scratch, T& trace) const {
    using S = detail::scalar_of_chunk<U>;
    auto t = detail::flat(trace).segment(at, u.size());
    const S decay = S(decay_);
    if (nesterov_) {
      scratch = u;
      t = scratch + decay * t;
      scratch = scratch + decay * t;
    } else {
      t = u + decay * t;
      scratch = t;
    }
    return detail::chunk_map<S>(scratch.data(), scratch.size());
  }

 private:
  double decay_;
  bool nesterov_;
};

/// optax.trace(decay, nesterov=false). Throws grove::argument_error for decay outside [0, 1).
inline Trace trace(double decay, bool nesterov = false) {
  return Trace(decay, nesterov);
}

// --- add_decayed_weights -------------------------------------------------------------------------

/// optax.add_decayed_weights: updates + weight_decay * params. State: EmptyState.
class AddDecayedWeights : public FusedTransformation<AddDecayedWeights> {
 public:
  explicit AddDecayedWeights(double weight_decay, const char* who = "add_decayed_weights")
      : weight_decay_(weight_decay) {
    detail::check_non_negative(who, "weight_decay", weight_decay);
  }
  template <class P>
  EmptyState init(const P&) const {
    return {};
  }
  double context(const EmptyState&, double) const { return weight_decay_; }
  template <class U, class Pc, class Scratch>
  auto apply(double weight_decay, const U& u, const Pc& p, Index, Scratch&) const {
    return u + detail::scalar_of_chunk<U>(weight_decay) * p;
  }

 private:
  double weight_decay_;
};

/// optax.add_decayed_weights(weight_decay=0) without a mask; with one it is
/// masked(add_decayed_weights(weight_decay), mask) (grove/optim/wrappers.hpp). Throws
/// grove::argument_error for a weight_decay that is negative or not finite.
inline AddDecayedWeights add_decayed_weights(double weight_decay = 0.0) {
  return AddDecayedWeights(weight_decay);
}

}  // namespace grove::optim
