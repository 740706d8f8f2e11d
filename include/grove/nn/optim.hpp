// grove/nn/optim.hpp: optimizers as pytree transformations, in optax's style.
//
//   auto opt = grove::nn::adam(1e-3);
//   auto state = opt.init(params);                                  // a pytree
//   auto [updates, new_state] = opt.update(grads, state, params);   // pure
//   params = grove::nn::apply_updates(params, updates);
//
// or, in a training loop, the same step in place, fused into one pass over the parameters and
// without allocation:
//
//   opt.step(params, grads, state);
//
// The optimizers work on any pytree whose leaves are Eigen matrices / arrays or float / double
// scalars (a network, a std::map of arrays, ...). Hyperparameters and schedules are doubles,
// rounded once to each leaf's scalar type, as JAX treats Python floats.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "grove/nn/detail/gemm.hpp"
#include "grove/tree.hpp"
#include "grove/tree/eigen.hpp"

namespace grove::nn {

using Index = Eigen::Index;

// --- schedules -----------------------------------------------------------------------------------

/// A learning rate as a function of the step count (optax's Schedule): a constant converts to one.
class Schedule {
 public:
  Schedule(double constant)
      : f_([constant](std::int64_t) { return constant; }) {}  // NOLINT: implicit on purpose
  template <class F>
  requires(std::is_invocable_r_v<double, const F&, std::int64_t> &&
           !std::same_as<std::remove_cvref_t<F>, Schedule>) Schedule(F f)
      : f_(std::move(f)) {}  // NOLINT: implicit on purpose
  double operator()(std::int64_t count) const { return f_(count); }

 private:
  std::function<double(std::int64_t)> f_;
};

/// optax.constant_schedule(value).
inline Schedule constant_schedule(double value) {
  return Schedule(value);
}

/// optax.exponential_decay: init_value * decay_rate^((count - transition_begin) /
/// transition_steps) once count > transition_begin (init_value before), the exponent floored when
/// staircase, and the value clipped at end_value if one is given. The JAX MLP walk-through's rule
/// `lr = init_lr * decay_rate ** (step / decay_steps)` is exponential_decay(init_lr, decay_steps,
/// decay_rate). Throws std::invalid_argument for transition_steps <= 0, decay_rate <= 0 or
/// transition_begin < 0 (where optax warns and returns a constant).
inline Schedule exponential_decay(double init_value, double transition_steps, double decay_rate,
                                  std::int64_t transition_begin = 0, bool staircase = false,
                                  std::optional<double> end_value = std::nullopt) {
  auto fail = [](const std::string& what) {
    throw std::invalid_argument("grove::nn::exponential_decay: " + what);
  };
  if (!(transition_steps > 0))
    fail("transition_steps must be positive, got " + std::to_string(transition_steps));
  if (!(decay_rate > 0)) fail("decay_rate must be positive, got " + std::to_string(decay_rate));
  if (transition_begin < 0)
    fail("transition_begin must be >= 0, got " + std::to_string(transition_begin));
  return Schedule([=](std::int64_t count) {
    const double decreased = static_cast<double>(count - transition_begin);
    if (decreased <= 0) return init_value;
    double p = decreased / transition_steps;
    if (staircase) p = std::floor(p);
    double value = init_value * std::pow(decay_rate, p);
    if (end_value)
      value = decay_rate < 1 ? std::max(value, *end_value) : std::min(value, *end_value);
    return value;
  });
}

// --- elementwise machinery
// -------------------------------------------------------------------------

namespace detail {

template <class L>
constexpr bool flat_leaf() {
  if constexpr (std::is_floating_point_v<L>)
    return true;
  else if constexpr (requires { typename L::Scalar; })
    return std::is_base_of_v<Eigen::PlainObjectBase<L>, L>;
  else
    return false;
}

// A leaf's elements as one contiguous array (a scalar is an array of one).
template <class L>
auto flat(L& leaf) {
  using S = ::grove::scalar_t<std::remove_const_t<L>>;
  static_assert(flat_leaf<std::remove_const_t<L>>(),
                "grove::nn optimizers: every leaf must be an Eigen::Matrix / Eigen::Array or a "
                "float / double");
  using A = Eigen::Array<S, Eigen::Dynamic, 1>;
  using M = Eigen::Map<std::conditional_t<std::is_const_v<L>, const A, A>>;
  if constexpr (std::is_arithmetic_v<std::remove_const_t<L>>)
    return M(&leaf, 1);
  else
    return M(leaf.data(), leaf.size());
}

template <class L>
L zeros_like(const L& leaf) {
  if constexpr (std::is_arithmetic_v<L>)
    return L(0);
  else
    return L::Zero(leaf.rows(), leaf.cols());
}

// Calls kernel(begin, size, leaves...) on every leaf tuple; in place, the elements of each leaf
// are shared among the threads of one team (leaves too small to share go to one thread).
template <class Kernel, class... Trees>
void for_each_leaf(Kernel&& kernel, Trees&&... trees) {
  // Check the structures (and throw if they differ) before any thread starts.
  tree_for_each([](const auto&...) {}, trees...);
  Index total = 0;
  tree_for_each(
      [&](const auto& first, const auto&...) { total += static_cast<Index>(flat(first).size()); },
      trees...);
  constexpr Index min_per_thread = 1 << 15;
  const int threads =
      static_cast<int>(std::min<Index>(max_threads(), std::max<Index>(1, total / min_per_thread)));
  parallel(threads, [&](int tid, int team) {
    tree_for_each(
        [&](auto&&... leaves) {
          const Index n =
              static_cast<Index>(flat(std::get<0>(std::forward_as_tuple(leaves...))).size());
          const Range r =
              n < min_per_thread ? (tid == 0 ? Range{0, n} : Range{}) : share(n, tid, team, 16);
          if (!r.empty()) kernel(r.begin, r.size(), leaves...);
        },
        trees...);
  });
}

}  // namespace detail

/// optax.apply_updates: params + updates, leaf by leaf.
template <class P>
P apply_updates(const P& params, const P& updates) {
  return tree_map(
      [](const auto& p, const auto& u) -> std::remove_cvref_t<decltype(p)> { return p + u; },
      params, updates);
}

/// The same in place: params += updates.
template <class P>
void apply_updates_inplace(P& params, const P& updates) {
  detail::for_each_leaf(
      [](Index begin, Index n, auto& p, const auto& u) {
        detail::flat(p).segment(begin, n) += detail::flat(u).segment(begin, n);
      },
      params, updates);
}

// --- SGD -----------------------------------------------------------------------------------------

/// The state of sgd: the number of steps taken (the schedule's argument).
struct SgdState {
  std::int64_t count = 0;
};
GROVE_NODE(SgdState, count);

/// optax.sgd(learning_rate): updates = -lr(count) * grads.
class Sgd {
 public:
  explicit Sgd(Schedule learning_rate) : lr_(std::move(learning_rate)) {}

  template <class P>
  SgdState init(const P&) const {
    return {};
  }
  /// (updates, new state).
  template <class P>
  std::pair<P, SgdState> update(const P& grads, const SgdState& state, const P& params) const {
    (void)params;
    return update(grads, state);
  }
  template <class P>
  std::pair<P, SgdState> update(const P& grads, const SgdState& state) const {
    const double lr = lr_(state.count);
    P updates =
        tree_map([](const auto& g) -> std::remove_cvref_t<decltype(g)> { return g; }, grads);
    detail::for_each_leaf(
        [&](Index begin, Index n, auto& u) {
          using S = typename std::remove_cvref_t<decltype(detail::flat(u))>::Scalar;
          auto us = detail::flat(u).segment(begin, n);
          us = S(-lr) * us;
        },
        updates);
    return {std::move(updates), SgdState{state.count + 1}};
  }
  /// update + apply_updates in place, in one pass: params -= lr(count) * grads; count += 1.
  template <class P>
  void step(P& params, const P& grads, SgdState& state) const {
    const double lr = lr_(state.count);
    detail::for_each_leaf(
        [&](Index begin, Index n, auto& p, const auto& g) {
          using S = typename std::remove_cvref_t<decltype(detail::flat(p))>::Scalar;
          detail::flat(p).segment(begin, n) += S(-lr) * detail::flat(g).segment(begin, n);
        },
        params, grads);
    ++state.count;
  }
  const Schedule& learning_rate() const { return lr_; }

 private:
  Schedule lr_;
};

/// optax.sgd(learning_rate) with a constant or scheduled learning rate, e.g.
/// sgd(exponential_decay(1.0, 5 * steps_per_epoch, 0.95)).
inline Sgd sgd(Schedule learning_rate) {
  return Sgd(std::move(learning_rate));
}

// --- momentum
// --------------------------------------------------------------------------------------

/// The state of momentum: the step count and the trace (velocity), a tree shaped like params.
template <class P>
struct MomentumState {
  std::int64_t count = 0;
  P trace;
};
GROVE_NODE(MomentumState, count, trace);

/// optax.sgd(learning_rate, momentum=beta, nesterov): trace = grads + beta * trace;
/// updates = -lr(count) * trace, or with nesterov -lr(count) * (grads + beta * trace).
class Momentum {
 public:
  Momentum(Schedule learning_rate, double beta, bool nesterov)
      : lr_(std::move(learning_rate)), beta_(beta), nesterov_(nesterov) {
    if (!(beta >= 0 && beta < 1))
      throw std::invalid_argument("grove::nn::momentum: beta must be in [0, 1), got " +
                                  std::to_string(beta));
  }

  template <class P>
  MomentumState<P> init(const P& params) const {
    return {0, tree_map([](const auto& p) { return detail::zeros_like(p); }, params)};
  }
  template <class P>
  std::pair<P, MomentumState<P>> update(const P& grads, const MomentumState<P>& state,
                                        const P& params) const {
    (void)params;
    return update(grads, state);
  }
  template <class P>
  std::pair<P, MomentumState<P>> update(const P& grads, const MomentumState<P>& state) const {
    MomentumState<P> next{state.count + 1, state.trace};
    P updates =
        tree_map([](const auto& g) -> std::remove_cvref_t<decltype(g)> { return g; }, grads);
    const double lr = lr_(state.count);
    detail::for_each_leaf(
        [&](Index begin, Index n, auto& u, auto& t) { kernel(begin, n, lr, u, u, t, false); },
        updates, next.trace);
    return {std::move(updates), std::move(next)};
  }
  template <class P>
  void step(P& params, const P& grads, MomentumState<P>& state) const {
    const double lr = lr_(state.count);
    detail::for_each_leaf([&](Index begin, Index n, auto& p, const auto& g,
                              auto& t) { kernel(begin, n, lr, p, g, t, true); },
                          params, grads, state.trace);
    ++state.count;
  }

 private:
  // out = -lr * update (or out += that, in place), with the trace updated from g.
  template <class Out, class G, class Tr>
  void kernel(Index begin, Index n, double lr, Out& out, const G& g, Tr& trace,
              bool in_place) const {
    using S = typename std::remove_cvref_t<decltype(detail::flat(out))>::Scalar;
    auto o = detail::flat(out).segment(begin, n);
    const auto gs = detail::flat(g).segment(begin, n);
    auto t = detail::flat(trace).segment(begin, n);
    const S beta = S(beta_), step = S(-lr);
    t = gs + beta * t;
    if (in_place) {
      if (nesterov_)
        o += step * (gs + beta * t);
      else
        o += step * t;
    } else {
      if (nesterov_)
        o = step * (gs + beta * t);
      else
        o = step * t;
    }
  }

  Schedule lr_;
  double beta_;
  bool nesterov_;
};

/// SGD with momentum: optax.sgd(learning_rate, momentum=beta, nesterov=nesterov).
inline Momentum momentum(Schedule learning_rate, double beta = 0.9, bool nesterov = false) {
  return Momentum(std::move(learning_rate), beta, nesterov);
}

// --- Adam
// ------------------------------------------------------------------------------------------

/// The state of adam (optax's ScaleByAdamState): the step count and the first and second moments.
template <class P>
struct AdamState {
  std::int64_t count = 0;
  P mu;
  P nu;
};
GROVE_NODE(AdamState, count, mu, nu);

/// optax.adam(learning_rate, b1, b2, eps, eps_root):
///   mu = (1 - b1) g + b1 mu,   nu = (1 - b2) g^2 + b2 nu,   t = count + 1,
///   updates = -lr(count) * (mu / (1 - b1^t)) / (sqrt(nu / (1 - b2^t) + eps_root) + eps).
class Adam {
 public:
  Adam(Schedule learning_rate, double b1, double b2, double eps, double eps_root)
      : lr_(std::move(learning_rate)), b1_(b1), b2_(b2), eps_(eps), eps_root_(eps_root) {
    auto fail = [](const std::string& what) {
      throw std::invalid_argument("grove::nn::adam: " + what);
    };
    if (!(b1 >= 0 && b1 < 1)) fail("b1 must be in [0, 1), got " + std::to_string(b1));
    if (!(b2 >= 0 && b2 < 1)) fail("b2 must be in [0, 1), got " + std::to_string(b2));
    if (!(eps >= 0)) fail("eps must be >= 0, got " + std::to_string(eps));
    if (!(eps_root >= 0)) fail("eps_root must be >= 0, got " + std::to_string(eps_root));
  }

  template <class P>
  AdamState<P> init(const P& params) const {
    auto zeros = tree_map([](const auto& p) { return detail::zeros_like(p); }, params);
    return {0, zeros, zeros};
  }
  template <class P>
  std::pair<P, AdamState<P>> update(const P& grads, const AdamState<P>& state,
                                    const P& params) const {
    (void)params;
    return update(grads, state);
  }
  template <class P>
  std::pair<P, AdamState<P>> update(const P& grads, const AdamState<P>& state) const {
    AdamState<P> next{state.count + 1, state.mu, state.nu};
    P updates =
        tree_map([](const auto& g) -> std::remove_cvref_t<decltype(g)> { return g; }, grads);
    const double lr = lr_(state.count);
    detail::for_each_leaf(
        [&](Index begin, Index n, auto& u, auto& m, auto& v) {
          kernel(begin, n, lr, state.count + 1, u, u, m, v, false);
        },
        updates, next.mu, next.nu);
    return {std::move(updates), std::move(next)};
  }
  template <class P>
  void step(P& params, const P& grads, AdamState<P>& state) const {
    const double lr = lr_(state.count);
    detail::for_each_leaf([&](Index begin, Index n, auto& p, const auto& g, auto& m,
                              auto& v) { kernel(begin, n, lr, state.count + 1, p, g, m, v, true); },
                          params, grads, state.mu, state.nu);
    ++state.count;
  }

 private:
  template <class Out, class G, class M, class V>
  void kernel(Index begin, Index n, double lr, std::int64_t t, Out& out, const G& g, M& mu, V& nu,
              bool in_place) const {
    using S = typename std::remove_cvref_t<decltype(detail::flat(out))>::Scalar;
    auto o = detail::flat(out).segment(begin, n);
    const auto gs = detail::flat(g).segment(begin, n);
    auto m = detail::flat(mu).segment(begin, n);
    auto v = detail::flat(nu).segment(begin, n);
    const S b1 = S(b1_), b2 = S(b2_), step = S(-lr);
    // optax computes the bias corrections 1 - b^t in the leaf's type. Dividing by them is
    // multiplying by their reciprocals here (within an ulp of optax's quotients), which leaves one
    // division and one square root per element, the costly operations of this loop.
    const S c1 = S(1) - std::pow(b1, static_cast<S>(t)),
            c2 = S(1) - std::pow(b2, static_cast<S>(t));
    const S inv_c1 = S(1) / c1, inv_c2 = S(1) / c2;
    const S eps = S(eps_), eps_root = S(eps_root_);
    // Chunk by chunk, so that the moments are still in L1 when the update reads them back.
    constexpr Index chunk = 1024;
    for (Index at = 0; at < n; at += chunk) {
      const Index len = std::min(chunk, n - at);
      auto o_c = o.segment(at, len);
      const auto g_c = gs.segment(at, len);
      auto m_c = m.segment(at, len), v_c = v.segment(at, len);
      m_c = (S(1) - b1) * g_c + b1 * m_c;
      v_c = (S(1) - b2) * g_c.square() + b2 * v_c;
      const auto u = step * ((m_c * inv_c1) / (((v_c * inv_c2) + eps_root).sqrt() + eps));
      if (in_place)
        o_c += u;
      else
        o_c = u;
    }
  }

  Schedule lr_;
  double b1_, b2_, eps_, eps_root_;
};

/// optax.adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8, eps_root=0).
inline Adam adam(Schedule learning_rate, double b1 = 0.9, double b2 = 0.999, double eps = 1e-8,
                 double eps_root = 0.0) {
  return Adam(std::move(learning_rate), b1, b2, eps, eps_root);
}

}  // namespace grove::nn
