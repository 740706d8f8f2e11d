// grove/nn/backprop.hpp: gradients by hand-written backpropagation.
//
//   auto [loss, grads] = grove::nn::value_and_grad(params, X, Y);   // jax.value_and_grad(loss)
//
// grads has exactly params' type and pytree structure. For a training loop,
// value_and_grad_into(params, X, Y, grads, ws) computes the same into grads and a Workspace, and
// allocates nothing once they have their sizes.
//
// The per-layer vector-Jacobian products are public, so that other networks can be composed from
// them: dense_vjp (here), each activation's vjp (activations.hpp), log_softmax_vjp,
// cross_entropy_vjp and softmax_cross_entropy (loss.hpp).
#pragma once

#include <Eigen/Core>
#include <string>
#include <type_traits>

#include "grove/nn/activations.hpp"
#include "grove/nn/dense.hpp"
#include "grove/nn/loss.hpp"
#include "grove/nn/predict.hpp"
#include "grove/nn/value_and_grad_result.hpp"
#include "grove/nn/workspace.hpp"

namespace grove::nn {

/// What dense_vjp returns: the layer's gradients (a Dense<T>, the layer's structure) and the
/// gradient with respect to the layer's input.
template <class T>
struct DenseVjp {
  Dense<T> grads;
  Matrix<T> dx;
};

/// The vector-Jacobian product of z = dense(layer, x) = w x + b for a batch x (in x batch) and
/// the gradient dz with respect to z (out x batch): grads.w = dz x^T, grads.b = the sum of dz's
/// columns, dx = w^T dz.
template <class T, class DX, class DZ>
DenseVjp<T> dense_vjp(const Dense<T>& layer, const Eigen::MatrixBase<DX>& x,
                      const Eigen::MatrixBase<DZ>& dz) {
  detail::require_scalar<T, DX>();
  detail::require_scalar<T, DZ>();
  if (x.rows() != layer.w.cols() || dz.rows() != layer.w.rows() || x.cols() != dz.cols())
    detail::fail("dense_vjp",
                 "w is " + std::to_string(layer.w.rows()) + "x" + std::to_string(layer.w.cols()) +
                     ", x is " + std::to_string(x.rows()) + "x" + std::to_string(x.cols()) +
                     " and dz is " + std::to_string(dz.rows()) + "x" + std::to_string(dz.cols()) +
                     " (expected x: in x batch, dz: out x batch)");
  DenseVjp<T> out;
  out.grads.w.noalias() = dz * x.transpose();
  out.grads.b = dz.rowwise().sum();
  out.dx.noalias() = layer.w.transpose() * dz;
  return out;
}

/// The walk-through's name for value_and_grad_result (the same type, which a composable model's
/// value_and_grad returns too).
template <class T, class P>
using ValueAndGrad = value_and_grad_result<T, P>;

/// The loss (see loss()) and its gradient with respect to every parameter, computed into `grads`
/// (resized to params' shapes if needed) with `ws` as scratch. Returns the loss. After the first
/// call with a network shape and a batch size (or any smaller batch), allocates nothing.
template <network P, class DX, class DY, activation Act = Swish>
network_scalar_t<P> value_and_grad_into(const P& params, const Eigen::MatrixBase<DX>& X,
                                        const Eigen::DenseBase<DY>& Y, P& grads,
                                        Workspace<network_scalar_t<P>>& ws, const Act& act = {}) {
  using T = network_scalar_t<P>;
  using E = detail::engine<T>;
  detail::require_scalar<T, DX>();
  if (static_cast<const void*>(&grads) == static_cast<const void*>(&params))
    detail::fail("value_and_grad_into", "grads must not be params itself");
  const Eigen::Ref<const Matrix<T>, 0, Eigen::OuterStride<>> x(X.derived());
  return detail::with_targets<T>("value_and_grad", Y, x.cols(), [&](const auto& targets) {
    return E::template run<E::mode::train>(
        "value_and_grad", detail::uniform_net<const P, Act, P>{&params, &grads, &act},
        detail::View<const T>{x.data(), x.rows(), x.cols(), x.outerStride()}, targets,
        detail::softmax_ce_columns{}, detail::View<T>{}, ws);
  });
}

/// The JAX walk-through's `update(params, x, y)`: one SGD step, params -= lr * grad(loss), done
/// inside the backward pass: each weight's update is the GEMM that would compute its gradient,
/// accumulating -lr dZ A^T straight into W, so no gradient is stored and no separate update pass
/// runs. Returns the loss before the update. The same step as value_and_grad followed by
/// sgd(lr)'s update, up to rounding. Allocates nothing once `ws` has its sizes.
template <network P, class DX, class DY, activation Act = Swish>
network_scalar_t<P> sgd_step(P& params, const Eigen::MatrixBase<DX>& X,
                             const Eigen::DenseBase<DY>& Y,
                             std::type_identity_t<network_scalar_t<P>> lr,
                             Workspace<network_scalar_t<P>>& ws, const Act& act = {}) {
  using T = network_scalar_t<P>;
  using E = detail::engine<T>;
  detail::require_scalar<T, DX>();
  const Eigen::Ref<const Matrix<T>, 0, Eigen::OuterStride<>> x(X.derived());
  return detail::with_targets<T>("sgd_step", Y, x.cols(), [&](const auto& targets) {
    return E::template run<E::mode::sgd>(
        "sgd_step", detail::uniform_net<P, Act, P>{&params, &params, &act},
        detail::View<const T>{x.data(), x.rows(), x.cols(), x.outerStride()}, targets,
        detail::softmax_ce_columns{}, detail::View<T>{}, ws, lr);
  });
}

/// jax.value_and_grad(loss)(params, X, Y): {loss, grads}, grads with params' type and structure.
template <network P, class DX, class DY, activation Act = Swish>
value_and_grad_result<network_scalar_t<P>, P> value_and_grad(const P& params,
                                                             const Eigen::MatrixBase<DX>& X,
                                                             const Eigen::DenseBase<DY>& Y,
                                                             const Act& act = {}) {
  Workspace<network_scalar_t<P>> ws;
  value_and_grad_result<network_scalar_t<P>, P> out{0, params};
  out.loss = value_and_grad_into(params, X, Y, out.grads, ws, act);
  return out;
}

}  // namespace grove::nn
