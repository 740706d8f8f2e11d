// grove/nn/model.hpp: a model's parameters, forward pass, loss and gradients.
//
//   auto params = nn::init<float>(model, key);                         // a pytree
//   Eigen::MatrixXf y = nn::apply(model, params, X);                   // X: features x batch
//   auto [loss, grads] = nn::value_and_grad(model, params, X, Y, nn::mse);
//   float l = nn::value_and_grad_into(model, params, X, Y, nn::mse, grads, ws);   // no allocation
//
// How a pass runs. Before any work, the model's shapes are checked against the input and the
// parameters, and the targets against the output (grove::shape_error naming the layer's key
// path and both shapes). Then, when the model is a chain of dense layers each followed by at
// most one activation (in sequences and stacks, with identities and inactive dropouts anywhere)
// and the last dense layer is the model's output, it runs on the fused engine of
// grove/nn/workspace.hpp: one OpenMP team for the whole step, the bias as each product's initial
// value, each activation and its derivative in one pass over the product's slice while it is in
// cache, the loss and its gradient per column in the same team, and (train_step with sgd) the
// update inside the backward products. Any other model runs layer by layer through the layer
// protocol (grove/nn/layer.hpp), its dense layers on the same products: on one OpenMP team for
// the whole pass when every layer can share one (grove's all can; see layer.hpp), each dense
// layer followed by an activation as one step (the activation, or backwards its derivative, on
// each thread's slice of the product while it is in cache), layer norms, residual sums and
// activations shared among the threads. Both allocate nothing once the workspace has seen the
// model and the batch size.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
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

#include "grove/nn/activations.hpp"
#include "grove/nn/dense.hpp"
#include "grove/nn/detail/gemv_bf16.hpp"
#include "grove/nn/layer.hpp"
#include "grove/nn/layers.hpp"
#include "grove/nn/losses.hpp"
#include "grove/nn/metrics.hpp"
#include "grove/nn/optim.hpp"
#include "grove/nn/precision.hpp"
#include "grove/nn/predict.hpp"
#include "grove/nn/value_and_grad_result.hpp"
#include "grove/nn/workspace.hpp"
#include "grove/random.hpp"
#include "grove/tree.hpp"

namespace grove::nn {

/// What grove accepts as a model: any layer (grove's, an activation, or a user's type following
/// grove/nn/layer.hpp's protocol).
template <class M>
concept model = activation<M> || requires(const M& m, const random::Key& k) {
  m.template init<float>(k);
};

/// flax's `model.init(key)`: the model's parameters for scalar type T (float or double), a pytree
/// with one child per layer (see Sequential).
template <class T, model M>
params_t<M, T> init(const M& m, const random::Key& key) {
  detail::require_real<T>();
  return detail::init_layer<T>(m, key);
}

/// What one device keeps from training step to training step: its gradients and its Workspace.
/// With it, nn::train_step (and parallel::train_step) allocate nothing after the first step.
template <class P, class T = params_scalar_t<P>>
struct StepWorkspace {
  P grads;
  Workspace<T> ws;
};

namespace detail {

// The batch as a contiguous map (copied into the workspace when it has a column stride).
template <class T>
ConstMatrixMap<T> contiguous(const Eigen::Ref<const Matrix<T>, 0, Eigen::OuterStride<>>& x,
                             Workspace<T>& ws, Index& used) {
  if (x.outerStride() == x.rows() || x.cols() <= 1)
    return ConstMatrixMap<T>(x.data(), x.rows(), x.cols());
  T* p = memory_of(ws).buffer.data() + used;
  used += aligned(x.size());
  MatrixMap<T>(p, x.rows(), x.cols()) = x;
  return ConstMatrixMap<T>(p, x.rows(), x.cols());
}

// Gives grads params' structure and shapes; allocates only when they differ.
template <class P>
void prepare_grads_like(P& grads, const P& params) {
  bool same = true;
  try {
    tree_for_each(
        [&](const auto& g, const auto& p) {
          if constexpr (requires { g.rows(); })
            if (g.rows() != p.rows() || g.cols() != p.cols()) same = false;
        },
        grads, params);
  } catch (const tree_error&) {
    same = false;
  }
  if (!same) grads = params;
}

// Builds memory_of(ws).chain for the model; true when the engine can run the whole model.
template <class T, class M, class P>
bool plan_chain(const M& m, const P& params, P* grads, Workspace<T>& ws, bool has_key) {
  memory_of(ws).chain.clear();
  if (memory_of(ws).chain.capacity() == 0)
    memory_of(ws).chain.reserve(16);  // one allocation for a fresh workspace
  if (!collect_chain<T>(m, params, grads, memory_of(ws).chain, has_key)) return false;
  if (memory_of(ws).chain.empty() || memory_of(ws).chain.back().act != nullptr) return false;
  static constexpr Identity none{};
  for (std::size_t l = 0; l + 1 < memory_of(ws).chain.size(); ++l) {
    auto& e = memory_of(ws).chain[l];
    if (e.act) continue;
    e.act = &none;
    e.forward = &act_forward<Identity, T>;
    e.forward_train = &act_forward_train<Identity, T>;
  }
  return true;
}

// Checks the model against an input of `in` features and the parameters; returns its outputs.
template <class M, class P>
Index check_model(const char* function, const M& m, const P& params, Index in) {
  const Index out = check_layer(function, m, in, layer_path{});
  check_layer_params(function, m, params, layer_path{});
  return out;
}

template <class T>
using BatchRef = Eigen::Ref<const Matrix<T>, 0, Eigen::OuterStride<>>;

// Runs body(ctx) for a layer-by-layer pass: on one OpenMP team for the whole pass when every
// layer of the model can share one (each thread with its own ctx.thread), else on the calling
// thread (the products then open teams of their own).
template <class T, class M, class Body>
void on_pass_team(const layer_context& ctx, Workspace<T>& ws, Body&& body) {
  const int nt = shares_team<M>() ? max_threads() : 1;
  if (nt <= 1) {
    body(ctx);
    return;
  }
  // Each thread's own products' memory and sequences' places, before the team starts.
  auto& scratch = memory_of(ws).scratch;
  if (static_cast<int>(scratch.size()) < nt) scratch.resize(static_cast<std::size_t>(nt));
  if (static_cast<int>(memory_of(ws).places.size()) < nt)
    memory_of(ws).places.resize(static_cast<std::size_t>(nt));
  // A throw on some of the threads ends the pass on all of them at their next barrier (see
  // team_member), and parallel() rethrows it here.
  team_stop stop;
  parallel(nt, [&](int tid, int team) {
    team_member member{&stop, team};
    layer_context c = ctx;
    c.thread = tid;
    c.threads = team;
    c.team = &member;
    member.run([&] { body(c); });
  });
}

// The fused SGD step's request to a pass: the parameters it updates (the caller's, mutable), the
// learning rate, and whether the step ran fused (else the pass wrote gradients).
template <class T, class P>
struct fused_sgd {
  P* params;
  T lr;
  bool fused = false;
};

// The whole pass: checks, then the engine or the layers. grads (may be null: the loss only) and
// input_grad (may be null) are written when given; `sgd` (may be null) with a chain runs the
// fused SGD step on sgd->params (the same object as params, as the caller holds it: mutable)
// instead and sets sgd->fused; without a chain it writes grads as without sgd.
// `policy`: the model's precision policy (a with_policy model unwrapped), or nullptr.
template <class T, class M, class P, class DY, class Loss>
T pass_under(const char* function, const M& m, const precision_policy* policy, const P& params,
             const BatchRef<T>& x, const Eigen::DenseBase<DY>& Y, const Loss& loss,
             const random::Key* key, P* grads, Matrix<T>* input_grad, Workspace<T>& ws,
             fused_sgd<T, P>* sgd) {
  const Index batch = x.cols();
  const Index out = check_model(function, m, params, x.rows());
  return with_targets<T>(function, Y, batch, [&](const auto& targets) -> T {
    loss.check(function, targets, out, batch);
    if (input_grad) input_grad->resize(x.rows(), batch);
    using E = engine<T>;
    const View<const T> xv{x.data(), x.rows(), batch, x.outerStride()};
    // The fused SGD step needs no stored gradients; a model it cannot run takes the way below,
    // which writes grads for the caller's optimizer step.
    if (sgd && sgd->lr >= T(0) && batch != 0 && !input_grad &&
        plan_chain<T>(m, std::as_const(*sgd->params), sgd->params, ws, key != nullptr)) {
      sgd->fused = true;
      return E::template run<E::mode::sgd>(
          function, chain_net<T>{memory_of(ws).chain.data(), memory_of(ws).chain.size()}, xv,
          targets, loss, View<T>{}, ws, sgd->lr);
    }
    if (grads) prepare_grads_like(*grads, params);
    if (batch == 0) return std::numeric_limits<T>::quiet_NaN();
    if (!sgd && !input_grad && plan_chain<T>(m, params, grads, ws, key != nullptr)) {
      const chain_net<T> net{memory_of(ws).chain.data(), memory_of(ws).chain.size()};
      if (grads)
        return E::template run<E::mode::train>(function, net, xv, targets, loss, View<T>{}, ws);
      return E::template run<E::mode::loss>(function, net, xv, targets, loss, View<T>{}, ws);
    }
    // Layer by layer: [x, when strided][y][dy][the model's saved memory].
    const Index in = x.rows();
    const Index saved = saved_size(m, in, batch);
    memory_of(ws).reserve_buffer(aligned(x.size()) + 2 * aligned(out * batch) + saved);
    Index used = 0;
    const ConstMatrixMap<T> xm = contiguous<T>(x, ws, used);
    MatrixMap<T> y(memory_of(ws).buffer.data() + used, out, batch);
    used += aligned(out * batch);
    MatrixMap<T> dy(memory_of(ws).buffer.data() + used, out, batch);
    used += aligned(out * batch);
    const std::span<T> saved_span(memory_of(ws).buffer.data() + used,
                                  static_cast<std::size_t>(saved));
    const bool training = grads != nullptr || input_grad != nullptr;
    P* g = grads;
    P scratch_grads;
    if (training && !g) {  // the input gradient only: the parameters' gradients still need a place
      scratch_grads = params;
      g = &scratch_grads;
    }
    MatrixMap<T> dx(input_grad ? input_grad->data() : nullptr, input_grad ? in : 0,
                    input_grad ? batch : 0);
    const T scale = T(1) / static_cast<T>(batch);
    T total = 0;
    const bool round_output = policy && policy->output == dtype::bfloat16;
    on_pass_team<T, M>(
        layer_context{training || key != nullptr, key, &memory_of(ws), 0, 1, nullptr, policy}, ws,
        [&](const layer_context& ctx) {
          forward_layer<T>(m, params, xm, y, saved_span, ctx);
          if (ctx.thread == 0) {  // the loss, per example in order (a few outputs each)
            dy = y;
            // The loss sees the output as the policy has it; the model's backward pass gets its
            // own y.
            if constexpr (std::is_same_v<T, float>)
              if (round_output) ::grove::detail::round_to_bf16(dy.data(), dy.size());
            for (Index j = 0; j < batch; ++j)
              total += loss.column(targets, j, dy.col(j).data(), out, training, scale);
          }
          team_barrier(ctx);
          if (training)
            backward_layer<T>(m, params, xm, ConstMatrixMap<T>(y.data(), out, batch),
                              ConstMatrixMap<T>(dy.data(), out, batch), *g, dx, saved_span, ctx);
        });
    return total / static_cast<T>(batch);
  });
}

template <class T, class M, class P, class DY, class Loss>
T pass(const char* function, const M& m, const P& params, const BatchRef<T>& x,
       const Eigen::DenseBase<DY>& Y, const Loss& loss, const random::Key* key, P* grads,
       Matrix<T>* input_grad, Workspace<T>& ws, fused_sgd<T, P>* sgd = nullptr) {
  if constexpr (is_with_policy<M>) {
    check_model(function, m, params, x.rows());  // the policy against the parameters
    const policy_scope<T> scope(ws, &m.policy);
    return pass_under<T>(function, m.model, &m.policy, params, x, Y, loss, key, grads, input_grad,
                         ws, sgd);
  } else {
    return pass_under<T>(function, m, nullptr, params, x, Y, loss, key, grads, input_grad, ws, sgd);
  }
}

// apply's pass into `out` (outputs x batch), once the model has been checked against the input.
template <class T, class M, class P>
void apply_under(const char* function, const M& m, const precision_policy* policy, const P& params,
                 const BatchRef<T>& x, MatrixMap<T> out, Workspace<T>& ws, const random::Key* key) {
  const Index batch = x.cols();
  const Index outputs = out.rows();
  if (batch == 0) return;
  using E = engine<T>;
  if (plan_chain<T>(m, params, static_cast<P*>(nullptr), ws, key != nullptr)) {
    const chain_net<T> net{memory_of(ws).chain.data(), memory_of(ws).chain.size()};
    if (batch == 1) {
      // One example: the walk-through's loop (matrix-vector products, no team), the same sums
      // in the same order (z = w a, then + b), but in the workspace's memory and straight into
      // `out` rather than in new vectors for every layer. Under bf16 compute each product
      // multiplies its input rounded to bfloat16 by the weights rounded as they are read
      // (detail/gemv_bf16.hpp), into the bias.
      const bool bf16 = std::is_same_v<T, float> && memory_of(ws).products == Precision::bf16;
      Index widest = x.rows();
      for (std::size_t l = 0; l < net.size(); ++l) widest = std::max(widest, net.layer(l).w.rows());
      memory_of(ws).reserve_buffer(2 * aligned(widest));
      T* const act = memory_of(ws).buffer.data();
      T* const pre = act + aligned(widest);
      const T* a = x.data();
      Index n = x.rows();
      if (bf16) {  // (act holds the rounded input; the first layer's output goes to pre)
        std::copy(x.data(), x.data() + n, act);
        a = act;
      }
      for (std::size_t l = 0; l < net.size(); ++l) {
        const auto& layer = net.layer(l);
        const Index m = layer.w.rows();
        Eigen::Map<Vector<T>> z(l + 1 < net.size() ? pre : out.data(), m);
        if constexpr (std::is_same_v<T, float>) {
          if (bf16) {
            ::grove::detail::round_to_bf16(act, n);
            z = layer.b;
            gemv_bf16::add(layer.w.data(), layer.w.rows(), m, n, act, z.data());
          }
        }
        if (!bf16) {
          z.noalias() = layer.w * Eigen::Map<const Vector<T>>(a, n);
          z += layer.b;
        }
        if (l + 1 < net.size()) {
          net.forward(l, z.data(), act, m);
          a = act;
          n = m;
        }
      }
      return;
    }
    for (Index c = 0; c < batch; c += inference_chunk) {
      const Index n = std::min(inference_chunk, batch - c);
      E::template run<E::mode::predict>(
          function, net,
          View<const T>{x.data() + c * x.outerStride(), x.rows(), n, x.outerStride()}, nullptr,
          softmax_ce_columns{}, View<T>{out.data() + c * outputs, outputs, n, outputs}, ws);
    }
    return;
  }
  const Index saved = saved_size(m, x.rows(), batch);
  memory_of(ws).reserve_buffer(aligned(x.size()) + saved);
  Index used = 0;
  const ConstMatrixMap<T> xm = contiguous<T>(x, ws, used);
  const std::span<T> saved_span(memory_of(ws).buffer.data() + used,
                                static_cast<std::size_t>(saved));
  on_pass_team<T, M>(
      layer_context{key != nullptr, key, &memory_of(ws), 0, 1, nullptr, policy}, ws,
      [&](const layer_context& ctx) { forward_layer<T>(m, params, xm, out, saved_span, ctx); });
}

// apply's pass into `out` (outputs x batch), once the model has been checked against the input.
template <class T, class M, class P>
void apply_checked(const char* function, const M& m, const P& params, const BatchRef<T>& x,
                   MatrixMap<T> out, Workspace<T>& ws, const random::Key* key) {
  if constexpr (is_with_policy<M>) {
    check_layer_params(function, m, params, layer_path{});  // the policy against the parameters
    const policy_scope<T> scope(ws, &m.policy);
    apply_under<T>(function, m.model, &m.policy, params, x, out, ws, key);
    // (The engine has rounded its output already; rounding twice changes nothing.)
    if constexpr (std::is_same_v<T, float>)
      if (m.policy.output == dtype::bfloat16)
        ::grove::detail::round_to_bf16(out.data(), out.size());
  } else {
    apply_under<T>(function, m, nullptr, params, x, out, ws, key);
  }
}

// The model's output for x into `out` (resized): the checks, then apply_checked.
template <class T, class M, class P>
void apply_pass(const char* function, const M& m, const P& params, const BatchRef<T>& x,
                Matrix<T>& out, Workspace<T>& ws, const random::Key* key) {
  out.resize(check_model(function, m, params, x.rows()), x.cols());
  apply_checked<T>(function, m, params, x, MatrixMap<T>(out.data(), out.rows(), out.cols()), ws,
                   key);
}

}  // namespace detail

/// Gives `grads` the structure and shapes of `params` (the parameters of any model, or a network's
/// std::vector<Dense>), allocating only where they differ: the tree that value_and_grad_into and
/// train_step write their gradients into. Its values are unspecified until one of them does.
template <class P>
void shape_like(P& grads, const P& params) {
  detail::prepare_grads_like(grads, params);
}

// --- apply ---------------------------------------------------------------------------------------

/// flax's `model.apply(params, X)`: the model's output for a batch X (features x batch; a vector
/// is one example), into `out` (resized if needed), with `ws` as scratch. Dropout is off (the
/// identity). Allocates nothing once out and ws have their sizes.
template <model M, class P, class DX>
void apply_into(const M& m, const P& params, const Eigen::MatrixBase<DX>& X,
                Matrix<typename DX::Scalar>& out, Workspace<typename DX::Scalar>& ws) {
  using T = typename DX::Scalar;
  detail::require_real<T>();
  const detail::BatchRef<T> x(X.derived());
  detail::apply_pass<T>("apply", m, params, x, out, ws, nullptr);
}

/// The model's output for a batch X (features x batch), dropout off. See apply_into.
template <model M, class P, class DX>
Matrix<typename DX::Scalar> apply(const M& m, const P& params, const Eigen::MatrixBase<DX>& X) {
  Workspace<typename DX::Scalar> ws;
  Matrix<typename DX::Scalar> out;
  apply_into(m, params, X, out, ws);
  return out;
}

/// The mean softmax cross-entropy and the accuracy of a classifier on a labelled set, in one
/// forward pass in chunks through `ws` (nn::evaluate of the walk-through's MLP, for any model;
/// for a chain of dense layers the same numbers). Of no examples both are NaN (see Evaluation).
template <model M, class P, class DX, class DL>
Evaluation evaluate(const M& m, const P& params, const Eigen::MatrixBase<DX>& X,
                    const Eigen::DenseBase<DL>& labels, Workspace<typename DX::Scalar>& ws) {
  using T = typename DX::Scalar;
  static_assert(std::is_integral_v<typename DL::Scalar>,
                "grove::nn::evaluate: labels must be integers");
  const detail::BatchRef<T> x(X.derived());
  const Index batch = x.cols();
  return detail::with_targets<T>("evaluate", labels, batch, [&](const auto& targets) {
    const Index classes = detail::check_model("evaluate", m, params, x.rows());
    detail::check_targets("evaluate", targets, classes, batch);
    return detail::score_in_chunks<T>(
        targets, classes, batch, ws, [&](Index c, Index n, MatrixMap<T>& logits) {
          detail::apply_checked<T>("evaluate", m, params, x.middleCols(c, n), logits, ws, nullptr);
        });
  });
}

// --- losses --------------------------------------------------------------------------------------

/// The model's mean loss on a batch (X: features x batch; Y: targets or labels, as the loss
/// takes them). With a key, dropout is active with the masks value_and_grad draws from that key.
template <model M, class P, class DX, class DY, loss_function Loss>
typename DX::Scalar loss(const M& m, const P& params, const Eigen::MatrixBase<DX>& X,
                         const Eigen::DenseBase<DY>& Y, const Loss& loss_fn,
                         Workspace<typename DX::Scalar>& ws, const random::Key* key = nullptr) {
  using T = typename DX::Scalar;
  const detail::BatchRef<T> x(X.derived());
  return detail::pass<T>("loss", m, params, x, Y, loss_fn, key, static_cast<P*>(nullptr), nullptr,
                         ws);
}

// --- gradients -----------------------------------------------------------------------------------

/// jax.value_and_grad of the model's mean loss with respect to its parameters, into `grads`
/// (given params' structure and shapes on the first call) with `ws` as scratch; returns the
/// loss. After the first call with a model and a batch size (or any smaller batch), allocates
/// nothing. Throws grove::shape_error before any work when the input, the parameters or the
/// targets do not fit the model (naming the layer by its key path), grove::argument_error for
/// labels out of range.
template <model M, class P, class DX, class DY, loss_function Loss>
typename DX::Scalar value_and_grad_into(const M& m, const P& params, const Eigen::MatrixBase<DX>& X,
                                        const Eigen::DenseBase<DY>& Y, const Loss& loss_fn,
                                        P& grads, Workspace<typename DX::Scalar>& ws) {
  using T = typename DX::Scalar;
  if (static_cast<const void*>(&grads) == static_cast<const void*>(&params))
    detail::fail("value_and_grad_into", "grads must not be params itself");
  const detail::BatchRef<T> x(X.derived());
  return detail::pass<T>("value_and_grad", m, params, x, Y, loss_fn, nullptr, &grads, nullptr, ws);
}

/// The same with a key for the model's dropout layers (each draws its mask from its own key,
/// split from this one in layer order).
template <model M, class P, class DX, class DY, loss_function Loss>
typename DX::Scalar value_and_grad_into(const M& m, const P& params, const Eigen::MatrixBase<DX>& X,
                                        const Eigen::DenseBase<DY>& Y, const Loss& loss_fn,
                                        const random::Key& key, P& grads,
                                        Workspace<typename DX::Scalar>& ws) {
  using T = typename DX::Scalar;
  if (static_cast<const void*>(&grads) == static_cast<const void*>(&params))
    detail::fail("value_and_grad_into", "grads must not be params itself");
  const detail::BatchRef<T> x(X.derived());
  return detail::pass<T>("value_and_grad", m, params, x, Y, loss_fn, &key, &grads, nullptr, ws);
}

/// The same, and the gradient with respect to the input batch into input_grad (features x
/// batch), as PINNs and adversarial examples need; key may be null (no dropout).
template <model M, class P, class DX, class DY, loss_function Loss>
typename DX::Scalar value_and_grad_into(const M& m, const P& params, const Eigen::MatrixBase<DX>& X,
                                        const Eigen::DenseBase<DY>& Y, const Loss& loss_fn,
                                        const random::Key* key, P& grads,
                                        Matrix<typename DX::Scalar>& input_grad,
                                        Workspace<typename DX::Scalar>& ws) {
  using T = typename DX::Scalar;
  if (static_cast<const void*>(&grads) == static_cast<const void*>(&params))
    detail::fail("value_and_grad_into", "grads must not be params itself");
  const detail::BatchRef<T> x(X.derived());
  return detail::pass<T>("value_and_grad", m, params, x, Y, loss_fn, key, &grads, &input_grad, ws);
}

/// jax.value_and_grad(loss)(params, X, Y) for a model: {loss, grads}, grads with params' exact
/// type. Y: integer labels or a matrix of targets, as the loss takes them (see losses.hpp).
template <model M, class P, class DX, class DY, loss_function Loss>
value_and_grad_result<typename DX::Scalar, P> value_and_grad(const M& m, const P& params,
                                                             const Eigen::MatrixBase<DX>& X,
                                                             const Eigen::DenseBase<DY>& Y,
                                                             const Loss& loss_fn) {
  Workspace<typename DX::Scalar> ws;
  value_and_grad_result<typename DX::Scalar, P> out{0, params};
  out.loss = value_and_grad_into(m, params, X, Y, loss_fn, out.grads, ws);
  return out;
}

/// The same with a key for dropout.
template <model M, class P, class DX, class DY, loss_function Loss>
value_and_grad_result<typename DX::Scalar, P> value_and_grad(const M& m, const P& params,
                                                             const Eigen::MatrixBase<DX>& X,
                                                             const Eigen::DenseBase<DY>& Y,
                                                             const Loss& loss_fn,
                                                             const random::Key& key) {
  Workspace<typename DX::Scalar> ws;
  value_and_grad_result<typename DX::Scalar, P> out{0, params};
  out.loss = value_and_grad_into(m, params, X, Y, loss_fn, key, out.grads, ws);
  return out;
}

/// {loss, grads, input_grad}: value_and_grad and the gradient with respect to X.
template <model M, class P, class DX, class DY, loss_function Loss>
value_and_grad_with_input_result<typename DX::Scalar, P> value_and_grad_with_input(
    const M& m, const P& params, const Eigen::MatrixBase<DX>& X, const Eigen::DenseBase<DY>& Y,
    const Loss& loss_fn, const random::Key* key = nullptr) {
  Workspace<typename DX::Scalar> ws;
  value_and_grad_with_input_result<typename DX::Scalar, P> out{0, params, {}};
  out.loss = value_and_grad_into(m, params, X, Y, loss_fn, key, out.grads, out.input_grad, ws);
  return out;
}

// --- a training step -----------------------------------------------------------------------------

/// One training step in place: the loss and gradients (into ws.grads), then the optimizer's
/// opt.step(params, grads, state). Returns the loss before the update. With nn::sgd on a model the
/// fused engine runs (see the top of this file), the update happens inside the backward products
/// instead and no gradient is stored (the same step up to rounding). Allocates nothing after the
/// first step. key (may be null) is for dropout.
template <model M, class P, class DX, class DY, loss_function Loss, class Opt, class State>
requires requires(const Opt& o, P& p, State& s) {
  o.step(p, p, s);
}
typename DX::Scalar train_step(const M& m, P& params, const Eigen::MatrixBase<DX>& X,
                               const Eigen::DenseBase<DY>& Y, const Loss& loss_fn,
                               const random::Key* key, const Opt& opt, State& state,
                               StepWorkspace<P, typename DX::Scalar>& ws) {
  using T = typename DX::Scalar;
  const detail::BatchRef<T> x(X.derived());
  // The seam where the optimizer meets the engine: plain SGD (optim::sgd, a chain of one
  // scale_by_learning_rate, whose step size is -learning_rate) is fused into the backward pass
  // when the model is a chain; any other model gets its gradients from the same pass (the checks
  // run once), then the optimizer's step.
  constexpr bool plain_sgd = optim::is_plain_sgd_v<Opt, State>;
  detail::fused_sgd<T, P> sgd{&params, T(0)};
  if constexpr (plain_sgd)  // the step's own checks of the count and of the learning rate
    sgd.lr = static_cast<T>(optim::plain_sgd_learning_rate(opt, state));
  const T value = detail::pass<T>("train_step", m, params, x, Y, loss_fn, key, &ws.grads, nullptr,
                                  ws.ws, plain_sgd ? &sgd : nullptr);
  if (sgd.fused) {
    if constexpr (plain_sgd) optim::plain_sgd_advance(state);
    return value;
  }
  opt.step(params, ws.grads, state);
  return value;
}

/// The same without dropout keys.
template <model M, class P, class DX, class DY, loss_function Loss, class Opt, class State>
requires requires(const Opt& o, P& p, State& s) {
  o.step(p, p, s);
}
typename DX::Scalar train_step(const M& m, P& params, const Eigen::MatrixBase<DX>& X,
                               const Eigen::DenseBase<DY>& Y, const Loss& loss_fn, const Opt& opt,
                               State& state, StepWorkspace<P, typename DX::Scalar>& ws) {
  return train_step(m, params, X, Y, loss_fn, static_cast<const random::Key*>(nullptr), opt, state,
                    ws);
}

}  // namespace grove::nn
