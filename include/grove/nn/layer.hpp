// grove/nn/layer.hpp: the layer protocol. What a type needs so that it works inside
// nn::sequential and nn::residual, gets gradients from nn::value_and_grad and allocates nothing
// per step; grove's own layers (grove/nn/layers.hpp) follow it too.
//
// A layer is a value that describes a computation (sizes, rates, eps: static), never its
// parameters. With T = float or double, a layer `L` has:
//
//   template <class T> P init(const grove::random::Key& key) const;
//       its parameters, a pytree (std::monostate when it has none); the same key gives the same
//       parameters.
//   template <class T> void forward(const P& params, nn::ConstMatrixMap<T> x, nn::MatrixMap<T> y,
//                                   std::span<T> saved, const nn::layer_context& ctx) const;
//       y = f(x) for a batch x (features x batch, one column per example). `saved` is this
//       layer's own memory, which stays untouched until its backward pass (what it keeps for
//       it: a mask, a normalised input, a derivative).
//   template <class T> void backward(const P& params, nn::ConstMatrixMap<T> x,
//                                    nn::ConstMatrixMap<T> y, nn::ConstMatrixMap<T> dy,
//                                    P& grads, nn::MatrixMap<T> dx, std::span<T> saved,
//                                    const nn::layer_context& ctx) const;
//       the vector-Jacobian product: given dy = dloss/dy, overwrites every leaf of grads with
//       dloss/dparams and, unless dx is empty (size 0: nobody needs it), dx with dloss/dx.
//
// and optionally (each has a default):
//
//   Index input_features() const;               the features it takes (default: any number)
//   Index output_features(Index in) const;      its outputs for `in` inputs (default: in)
//   Index saved_size(Index in, Index batch) const;   elements of `saved` (default: 0)
//   std::string name() const;                   how errors call it (default: "layer")
//
// Sharing a team of threads (optional). grove runs a model layer by layer in one OpenMP team for
// the whole pass when every layer in it says that it can share one; a layer says so with
//
//   static constexpr bool shares_team = true;
//
// Its forward and backward are then called by every thread of the team at once, with the same
// arguments and ctx.thread (0 ... ctx.threads - 1) telling them apart: each thread computes its
// own part of y (or of dx and grads), and the layer calls nn::team_barrier(ctx) (every thread
// the same number of times) before it returns, so that the next layer sees y complete. With
// ctx.threads == 1 it is an ordinary call.
//
// Such a layer may throw, on any of the team's threads, anywhere: the exception reaches the
// caller of the pass, as it does from any layer, with the parameters untouched and the workspace
// fit for the next pass. The other threads learn of it at their next nn::team_barrier, which then
// throws grove's own marker (not a std::exception) on each of them, and the pass ends on every
// thread. So a layer waits for the other threads only in nn::team_barrier (never on a flag of its
// own, which a thread that threw would never set), and it lets that marker pass: a `catch (...)`
// in a layer rethrows. A model with any layer that does not say so (a user's
// layer that knows nothing of threads) runs as before: every layer on the calling thread, grove's
// products each on a team of their own. grove's own layers all share teams.
//
// grove checks every layer's input width (against input_features) before a pass starts, and
// throws grove::shape_error naming the layer by its key path; forward and backward may assume the
// shapes fit. A forward pass in training (ctx.training) is followed by the backward pass of the
// same batch, with the same `saved`; in nn::apply (ctx.training false) no backward follows.
// ctx.key is the layer's own random key (dropout's), or nullptr when the pass has none.
// ctx.policy is the model's precision policy (grove/nn/precision.hpp), or nullptr.
#pragma once

#include <Eigen/Core>
#include <array>
#include <atomic>
#include <concepts>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "grove/detail/threads.hpp"
#include "grove/error.hpp"
#include "grove/nn/activations.hpp"
#include "grove/nn/dense.hpp"
#include "grove/nn/precision_policy.hpp"
#include "grove/random.hpp"

namespace grove::nn {

/// A batch in memory a layer writes: features x batch, contiguous, column-major.
template <class T>
using MatrixMap = Eigen::Map<Matrix<T>>;
/// A batch in memory a layer reads.
template <class T>
using ConstMatrixMap = Eigen::Map<const Matrix<T>>;

/// What a layer's forward and backward passes get besides their arrays.
struct layer_context {
  /// true in value_and_grad (a backward pass follows), false in apply.
  bool training = false;
  /// This layer's own key (split from the step's key in layer order), or nullptr.
  const random::Key* key = nullptr;
  /// grove's own state for the pass (the matrix products' per-thread memory); not for users.
  void* detail = nullptr;
  /// In a pass that runs in one team (see "Sharing a team" above): this thread's index in it.
  int thread = 0;
  /// The team's size; 1 when the layer is called on one thread only.
  int threads = 1;
  /// grove's own state of this thread in the team (see team_barrier); not for users.
  void* team = nullptr;
  /// The model's precision policy (nn::with_policy), or nullptr: everything in the parameters'
  /// dtype. A layer whose matrix products should follow it asks computes_in_bf16(ctx).
  const precision_policy* policy = nullptr;
};

/// Whether the pass computes its matrix products from inputs rounded to bfloat16 (see
/// precision_policy): grove's dense layers do then, and a user's layer may too.
inline bool computes_in_bf16(const layer_context& ctx) noexcept {
  return ctx.policy != nullptr && ctx.policy->compute == dtype::bfloat16;
}

namespace detail {

// Thrown by team_barrier on the threads of a team that did not throw themselves, once one did;
// caught where the pass's team runs (team_member::run). Not a std::exception, so that a layer's
// `catch (const std::exception&)` lets it pass.
struct team_stopped {};

// What the threads of a pass's team share: after how many barriers they all stop, because one of
// them threw.
struct team_stop {
  std::atomic<std::int64_t> after{std::numeric_limits<std::int64_t>::max()};
};

// One thread of a pass's team (on that thread's stack; ctx.team points to it): the barriers it
// has passed. A thread that throws between its barriers k - 1 and k sets stop->after to k and then
// meets barrier k itself, where the others wait or are about to; each of them, leaving barrier k,
// sees the stop (it was set before the thrower arrived) and throws team_stopped. No thread can be
// past barrier k yet, and a throw after barrier k sets k + 1 or more, which no thread leaving
// barrier k mistakes for its own stop: so every thread passes the same barriers. The run ends with
// one barrier more, which a thread that throws after the body's last barrier meets.
struct team_member {
  team_stop* stop;
  int threads;
  std::int64_t passed = 0;

  bool stopped() const { return passed >= stop->after.load(std::memory_order_seq_cst); }

  void barrier() {
    if (stopped()) throw team_stopped{};  // (a layer swallowed the first one: no more waiting)
    ::grove::detail::barrier(threads);
    ++passed;
    if (stopped()) throw team_stopped{};
  }

  // Runs body() on this thread; rethrows its exception once the other threads know of it.
  template <class Body>
  void run(Body&& body) {
    try {
      body();
    } catch (const team_stopped&) {
      return;  // another thread threw: its exception reaches the caller
    } catch (...) {
      if (!stopped()) {
        std::int64_t at = stop->after.load(std::memory_order_seq_cst);
        while (passed + 1 < at && !stop->after.compare_exchange_weak(at, passed + 1)) {
        }
        ::grove::detail::barrier(threads);  // barrier passed + 1, which the others meet
      }
      throw;
    }
    if (stopped()) return;
    ::grove::detail::barrier(threads);  // the last barrier, which a late thrower meets
    ++passed;
  }
};

}  // namespace detail

/// Waits until every thread of the pass's team has arrived (nothing with one thread): what a layer
/// that shares a team calls between its phases and before it returns. When another thread of the
/// team has thrown, it throws grove's own marker instead of returning (see "Sharing a team"
/// above), which ends the pass on this thread too.
inline void team_barrier(const layer_context& ctx) {
  if (ctx.threads <= 1) return;
  if (ctx.team != nullptr)
    static_cast<detail::team_member*>(ctx.team)->barrier();
  else
    ::grove::detail::barrier(ctx.threads);
}

namespace detail {

// A layer's position in its model, as a key path: [2][0]. Fixed-size so that checking a model
// allocates nothing; the text is built only for an error message.
struct layer_path {
  static constexpr int max_depth = 24;
  std::array<std::int64_t, max_depth> index{};
  int depth = 0;

  layer_path child(std::int64_t i) const {
    layer_path p = *this;
    if (p.depth < max_depth) p.index[static_cast<std::size_t>(p.depth++)] = i;
    return p;
  }
  std::string str() const {
    if (depth == 0) return "(the model)";
    std::string s;
    for (int d = 0; d < depth; ++d) {
      // (appended piece by piece: GCC 12 warns, wrongly, about "[" + to_string(...) here)
      s += '[';
      s += std::to_string(index[static_cast<std::size_t>(d)]);
      s += ']';
    }
    return s;
  }
};

inline std::string shape_text(Index rows, Index cols) {
  return std::to_string(rows) + "x" + std::to_string(cols);
}

// Sizes in elements of T, rounded up so that every buffer starts on a 64-byte boundary for floats.
constexpr Index aligned(Index n) {
  return (n + 15) / 16 * 16;
}

template <class L>
std::string layer_name(const L& layer) {
  if constexpr (requires { layer.name(); })
    return std::string(layer.name());
  else if constexpr (requires { L::name; })
    return std::string(L::name);
  else
    return "layer";
}

template <class L>
Index input_features(const L& layer) {
  if constexpr (requires { layer.input_features(); })
    return layer.input_features();
  else
    return -1;
}

// Whether layer L's passes may run on every thread of a team at once (see "Sharing a team").
template <class L>
constexpr bool shares_team() {
  if constexpr (activation<L>)
    return true;
  else if constexpr (requires { L::shares_team; })
    return static_cast<bool>(L::shares_team);
  else
    return false;
}

template <class L>
Index output_features(const L& layer, Index in) {
  if constexpr (requires { layer.output_features(in); })
    return layer.output_features(in);
  else
    return in;
}

}  // namespace detail

namespace detail {
// An activation object (grove/nn/activations.hpp, or a user's with the same members) is a layer
// without parameters that applies itself elementwise.
template <class T, class L>
auto init_layer(const L& layer, const random::Key& key) {
  if constexpr (activation<L>)
    return std::monostate{};
  else
    return layer.template init<T>(key);
}
}  // namespace detail

namespace detail {
// The scalar type of a parameter tree: that of its first leaf (void when it has none).
template <class P>
struct params_scalar {
  using type = void;
};
template <class P>
using params_scalar_t = typename params_scalar<std::remove_cvref_t<P>>::type;
template <std::floating_point T>
struct params_scalar<T> {
  using type = T;
};
template <class S, int R, int C, int O, int MR, int MC>
struct params_scalar<Eigen::Matrix<S, R, C, O, MR, MC>> {
  using type = S;
};
template <class S, int R, int C, int O, int MR, int MC>
struct params_scalar<Eigen::Array<S, R, C, O, MR, MC>> {
  using type = S;
};
template <template <class> class X, std::floating_point T>
struct params_scalar<X<T>> {
  using type = T;
};
template <class X, class A>
struct params_scalar<std::vector<X, A>> {
  using type = params_scalar_t<X>;
};
template <class... Ps>
struct first_scalar {
  using type = void;
};
template <class P, class... Ps>
struct first_scalar<P, Ps...> {
  using type = std::conditional_t<std::is_void_v<params_scalar_t<P>>,
                                  typename first_scalar<Ps...>::type, params_scalar_t<P>>;
};
template <class... Ps>
struct params_scalar<std::tuple<Ps...>> {
  using type = typename first_scalar<Ps...>::type;
};
}  // namespace detail

/// The scalar type of a parameter tree (float for nn::init<float>'s): its first floating-point
/// leaf's, void when it has none.
template <class P>
using params_scalar_t = detail::params_scalar_t<P>;

/// The parameters' type of layer L for scalar type T: what nn::init<T> returns.
template <class L, class T>
using params_t =
    decltype(detail::init_layer<T>(std::declval<const L&>(), std::declval<random::Key>()));

}  // namespace grove::nn
