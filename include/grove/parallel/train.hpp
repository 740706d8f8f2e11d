// grove/parallel/train.hpp: data-parallel training of grove::nn's models, the pmap way.
//
//   grove::parallel::broadcast_inplace(params, comm, 0);    // once: every replica = rank 0's
//   grove::parallel::StepWorkspace<decltype(params)> ws;
//   for (...) {
//     float loss = grove::parallel::train_step(model, params, X, Y, nn::softmax_cross_entropy,
//                                              &key, opt, state, comm, ws);
//   }
//
// (and the walk-through's MLP, a std::vector<nn::Dense<T>> with one activation, without a model:
// train_step(params, X, Y, opt, state, comm, ws)).
//
// Each step, on every device: take this device's shard of the batch (a contiguous range of
// columns), value_and_grad on it, average the gradients over the devices with one allreduce
// (weighted by the shards' sizes, so that it is exactly pmean when they are equal), then apply the
// same optimizer update everywhere. The result equals a single-process step on the whole batch to
// rounding, and repeats bit for bit from run to run. Over MPI with world.set_overlap(true), the
// weight matrices' sums start while the backward pass goes on (detail/overlap.hpp): the same sums.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <type_traits>

#include "grove/detail/shard.hpp"
#include "grove/error.hpp"
#include "grove/nn.hpp"
#include "grove/optim/wrappers.hpp"
#include "grove/parallel/collectives.hpp"
#include "grove/parallel/communicator.hpp"
#include "grove/parallel/detail/overlap.hpp"
#include "grove/parallel/zero.hpp"

namespace grove::parallel {

/// A contiguous range of a batch's columns (examples): [begin, begin + size).
struct Shard {
  Eigen::Index begin = 0;
  Eigen::Index size = 0;
  friend bool operator==(const Shard&, const Shard&) = default;
};

/// The shard of a batch of `batch` examples that device `rank` of `size` takes, as pmap splits a
/// leading axis: contiguous, in rank order, sizes differing by at most one (the first batch % size
/// devices take one more; pmap itself requires batch % size == 0).
inline Shard shard(Eigen::Index batch, int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size || batch < 0)
    throw argument_error("grove::parallel::shard: rank " + std::to_string(rank) + " of " +
                         std::to_string(size) + " devices and a batch of " + std::to_string(batch) +
                         " examples make no shard");
  const auto part = grove::detail::shard_of(batch, rank, size);
  return {part.begin, part.size};
}

/// This device's shard of a batch of `batch` examples.
template <device_group C>
Shard shard(Eigen::Index batch, const C& comm) {
  return shard(batch, static_cast<int>(comm.rank()), static_cast<int>(comm.size()));
}

/// What one device keeps from step to step: nn::StepWorkspace (its gradients and its
/// nn::Workspace). With it (and the communicator's staging memory) a step allocates nothing after
/// the first.
template <class P, class T = nn::params_scalar_t<P>>
using StepWorkspace = nn::StepWorkspace<P, T>;

namespace detail {

// The targets of the examples in `s`: a range of integer labels (a column or row vector) or of
// the columns of a (classes x batch) matrix.
template <class DY>
auto shard_targets(const Eigen::DenseBase<DY>& Y, const Shard& s) {
  if constexpr (std::is_integral_v<typename DY::Scalar> && DY::ColsAtCompileTime == 1)
    return Y.derived().middleRows(s.begin, s.size);
  else if constexpr (std::is_integral_v<typename DY::Scalar> && DY::RowsAtCompileTime == 1)
    return Y.derived().middleCols(s.begin, s.size);
  else if constexpr (std::is_integral_v<typename DY::Scalar>) {
    // A dynamic matrix of labels: a column or a row of them.
    if (Y.cols() != 1 && Y.rows() != 1)
      throw shape_error("grove::parallel::train_step: integer labels must be a vector");
    return Y.cols() == 1 ? Y.derived().block(s.begin, 0, s.size, 1)
                         : Y.derived().block(0, s.begin, 1, s.size);
  } else {
    return Y.derived().middleCols(s.begin, s.size);
  }
}

// A shard of n examples must be counted exactly in T, the scalar the shard sizes are summed in.
template <class T>
void check_shard_size(Eigen::Index n) {
  if (static_cast<double>(n) > static_cast<double>(1ull << std::numeric_limits<T>::digits))
    throw argument_error("grove::parallel::train_step: a shard of " + std::to_string(n) +
                         " examples is too large to be counted exactly in its scalar type");
}

template <class Opt>
inline constexpr bool is_multi_steps = false;
template <class Inner>
inline constexpr bool is_multi_steps<optim::MultiSteps<Inner>> = true;

// A step under optim::multi_steps, DDP's no_sync: the gradients are summed over the devices once
// per accumulation, not at every mini step. Every mini step sums only the shard sizes and losses
// (two numbers), so that each device knows the batch's size N and scales its mean gradient g by
// n / N: its part of the batch's gradient. The mini steps before the last accumulate that part
// with the optimizer's own running mean, on each device alone; the last adds its part the same
// way, sums the devices' accumulations in one allreduce (the mean of the k batch gradients, as a
// single process accumulates it) and gives it to the inner transformation.
template <class T, class P, class Opt, class State, device_group C, class Grads>
T accumulate_and_step(C& comm, Staging& staging, P& params, Grads& grads, Eigen::Index n, T value,
                      const Opt& opt, State& state) {
  const auto [batch, loss] = batch_size_and_loss(comm, n, value);
  // This device's part; zeros for an empty shard, whose gradients hold only their shapes.
  const T part = static_cast<T>(n) / batch;
  tree_for_each(
      [part](auto& g) {
        if constexpr (requires { g.setZero(); })
          part == T(0) ? void(g.setZero()) : void(g *= part);
        else
          g = part == T(0) ? T(0) : g * part;
      },
      grads);
  if (state.mini_step != opt.every_k() - 1) {
    opt.step(params, grads, state);  // accumulates; the parameters stay as they are
    return loss;
  }
  const T k = static_cast<T>(opt.every_k());
  tree_for_each([k](auto& g, const auto& acc) { g = acc + (g - acc) / k; }, grads,
                std::as_const(state.acc_grads));
  reduce_leaves<T>(comm, staging, grads, T(1), std::span<T>{},
                   [](std::span<const T>) { return T(1); });
  opt.step_accumulated(params, grads, state);
  return loss;
}

// What a step does with the sums of its header {n, n * loss} over the devices: checks that some
// device had examples, keeps the mean loss over all of them in total_loss, and returns the
// batch's size, by which the summed gradients are divided.
template <class T>
auto batch_divisor(T& total_loss) {
  return [&total_loss](std::span<const T> sums) {
    if (!(sums[0] > T(0)))
      throw argument_error("grove::parallel::train_step: every device's shard is empty");
    total_loss = sums[1] / sums[0];
    return sums[0];
  };
}

// The devices' part of a step, after this device's value_and_grad on its n examples (grads in
// ws.grads, `value` their mean loss): check that every device has the same structure, sum the
// size-weighted gradients, sizes and losses in one allreduce, divide by the total number of
// examples, then opt.step. Returns the mean loss over all the devices' examples. Under
// optim::multi_steps the gradients are summed once per accumulation (accumulate_and_step); under
// zero_redundancy they are reduce-scattered and the parameters all-gathered (zero_step).
template <class T, class P, class Opt, class State, device_group C, class Grads>
T reduce_and_step(C& comm, P& params, Grads& grads, Eigen::Index n, T value, const Opt& opt,
                  State& state) {
  return with_staging(comm, [&](Staging& staging) {
    agree(comm, "train_step", op::train_step, 0, moves_of(staging), std::as_const(params),
          bytes_of(params));
    if constexpr (is_multi_steps<Opt>) {
      return accumulate_and_step(comm, staging, params, grads, n, value, opt, state);
    } else if constexpr (is_zero_redundancy<Opt>) {
      return zero_step(comm, staging, params, grads, n, value, opt, state);
    } else {
      T header[2] = {static_cast<T>(n), value * static_cast<T>(n)};
      T total_loss = T(0);
      reduce_leaves<T>(comm, staging, grads, static_cast<T>(n), std::span<T>(header),
                       batch_divisor(total_loss));
      opt.step(params, grads, state);
      return total_loss;
    }
  });
}

// Whether train_step can overlap the gradients' reduction with the backward pass (when the group
// is set to: its overlap()): on a group that can start sums and finish them later
// (grove::mpi::Communicator), for an optimizer that takes the summed gradients at every step
// (multi_steps sums once per accumulation, ZeRO reduce-scatters).
template <class T, class Opt, class C>
inline constexpr bool can_overlap =
    overlapping_group<C, T> && !is_multi_steps<Opt> && !is_zero_redundancy<Opt>;

// reduce_and_step's plain step with the reduction overlapping the backward pass
// (grove/parallel/detail/overlap.hpp): the devices agree first (the pass then starts sums), then
// `pass()` (this device's value_and_grad into grads through ws, which the reduction listens to;
// not called for an empty shard), the rest of the reduction, opt.step. The same sums as
// reduce_and_step's.
template <class T, class P, class Opt, class State, overlapping_group<T> C, class Grads, class Pass>
T overlapped_step(C& comm, P& params, Grads& grads, nn::Workspace<T>& ws, Eigen::Index n,
                  Pass&& pass, const Opt& opt, State& state) {
  return with_staging(comm, [&](Staging& staging) {
    agree(comm, "train_step", op::train_step, 0, moves_of(staging), std::as_const(params),
          bytes_of(params), "train_step (the reduction overlapping the backward pass)");
    nn::shape_like(grads, params);  // the pass keeps these buffers: the reduction points at them
    overlapped_reduction<T, C> reduction(comm, staging, grads, static_cast<T>(n));
    T value = T(0);
    if (n > 0) {
      struct listening {
        nn::Workspace<T>& ws;
        nn::grad_listener<T>* previous;
        ~listening() { ws.set_grad_listener(previous); }
      } scope{ws, ws.set_grad_listener(&reduction)};
      value = pass();
    }
    T header[2] = {static_cast<T>(n), value * static_cast<T>(n)};
    T total_loss = T(0);
    reduction.finish(staging, grads, std::span<T>(header), batch_divisor(total_loss));
    opt.step(params, grads, state);
    return total_loss;
  });
}

}  // namespace detail

/// One data-parallel step on this device's shard (X: features x examples, Y: its labels or
/// targets), which may differ in size from the other devices' shards (even be empty): the local
/// mean gradient is weighted by the shard's size, the weighted gradients are summed over the
/// devices in one allreduce (with the shard sizes and losses in the same buffer) and divided by
/// the total number of examples, then `opt.step(params, grads, state)` applies the update on every
/// device. Returns the mean loss over all the devices' examples (before the update). Every device
/// must call it, with params of the same structure and shapes (checked first, as for psum). On a
/// single device it is exactly value_and_grad_into followed by opt.step.
template <nn::network P, class DX, class DY, class Opt, class State, device_group C,
          nn::activation Act = nn::Swish>
requires requires(const Opt& o, P& p, State& s) {
  o.step(p, p, s);
}
nn::network_scalar_t<P> train_step_on_shard(P& params, const Eigen::MatrixBase<DX>& X,
                                            const Eigen::DenseBase<DY>& Y, const Opt& opt,
                                            State& state, C& comm, StepWorkspace<P>& ws,
                                            const Act& act = {}) {
  using T = nn::network_scalar_t<P>;
  const Eigen::Index n = X.cols();
  detail::check_shard_size<T>(n);
  if (comm.size() == 1) {
    // One device: exactly the single-process step (nothing to combine).
    if (n == 0) throw argument_error("grove::parallel::train_step: every device's shard is empty");
    const T loss = nn::value_and_grad_into(params, X, Y, ws.grads, ws.ws, act);
    opt.step(params, ws.grads, state);
    return loss;
  }
  if constexpr (detail::can_overlap<T, Opt, C>)
    if (comm.overlap())
      return detail::overlapped_step<T>(
          comm, params, ws.grads, ws.ws, n,
          [&] { return nn::value_and_grad_into(params, X, Y, ws.grads, ws.ws, act); }, opt, state);
  T loss = T(0);
  if (n > 0) {
    loss = nn::value_and_grad_into(params, X, Y, ws.grads, ws.ws, act);
  } else {
    // No examples here: contribute zeros (the gradients only need params' shapes; the allreduce
    // scales them by this shard's size, 0, as zeros rather than 0 * x).
    nn::shape_like(ws.grads, params);
  }
  return detail::reduce_and_step(comm, params, ws.grads, n, loss, opt, state);
}

/// One data-parallel step on a batch that every device holds whole (X: features x batch, Y: its
/// labels or targets): this device takes its shard(X.cols(), comm) of the columns and runs
/// train_step_on_shard. Returns the mean loss over the whole batch.
template <nn::network P, class DX, class DY, class Opt, class State, device_group C,
          nn::activation Act = nn::Swish>
requires requires(const Opt& o, P& p, State& s) {
  o.step(p, p, s);
}
nn::network_scalar_t<P> train_step(P& params, const Eigen::MatrixBase<DX>& X,
                                   const Eigen::DenseBase<DY>& Y, const Opt& opt, State& state,
                                   C& comm, StepWorkspace<P>& ws, const Act& act = {}) {
  const Eigen::Index labels = std::is_integral_v<typename DY::Scalar> ? Y.size() : Y.cols();
  if (labels != X.cols())
    throw shape_error("grove::parallel::train_step: got " + std::to_string(labels) +
                      " targets for a batch of " + std::to_string(X.cols()) + " examples");
  const Shard s = shard(X.cols(), comm);
  return train_step_on_shard(params, X.derived().middleCols(s.begin, s.size),
                             detail::shard_targets(Y, s), opt, state, comm, ws, act);
}

// --- any model ---------------------------------------------------------------------------------

namespace detail {
template <class P>
void zero_grads_like(P& grads, const P& params) {
  nn::shape_like(grads, params);
  tree_for_each(
      [](auto& g) {
        if constexpr (requires { g.setZero(); })
          g.setZero();
        else
          g = 0;
      },
      grads);
}
}  // namespace detail

/// train_step_on_shard for any nn model and loss: this device's shard (X, Y) through
/// nn::value_and_grad_into(model, params, X, Y, loss, [key,] grads, ws), the gradients averaged
/// over the devices as for the MLP (weighted by the shards' sizes), then opt.step. key (may be
/// null) is the step's key for dropout; each device draws its masks from fold_in(key, rank), so
/// that the shards get independent masks. On a single device it is nn::train_step (with sgd, its
/// fused update).
template <nn::model M, class P, class DX, class DY, nn::loss_function Loss, class Opt, class State,
          device_group C>
requires requires(const Opt& o, P& p, State& s) {
  o.step(p, p, s);
}
typename DX::Scalar train_step_on_shard(const M& model, P& params, const Eigen::MatrixBase<DX>& X,
                                        const Eigen::DenseBase<DY>& Y, const Loss& loss,
                                        const random::Key* key, const Opt& opt, State& state,
                                        C& comm, StepWorkspace<P, typename DX::Scalar>& ws) {
  using T = typename DX::Scalar;
  const Eigen::Index n = X.cols();
  detail::check_shard_size<T>(n);
  if (comm.size() == 1) {
    if (n == 0) throw argument_error("grove::parallel::train_step: every device's shard is empty");
    return nn::train_step(model, params, X, Y, loss, key, opt, state, ws);
  }
  random::Key device_key;
  if (key) device_key = random::fold_in(*key, static_cast<std::uint32_t>(comm.rank()));
  if constexpr (detail::can_overlap<T, Opt, C>)
    if (comm.overlap())
      return detail::overlapped_step<T>(
          comm, params, ws.grads, ws.ws, n,
          [&] {
            return key ? nn::value_and_grad_into(model, params, X, Y, loss, device_key, ws.grads,
                                                 ws.ws)
                       : nn::value_and_grad_into(model, params, X, Y, loss, ws.grads, ws.ws);
          },
          opt, state);
  T value = T(0);
  if (n > 0) {
    value = key ? nn::value_and_grad_into(model, params, X, Y, loss, device_key, ws.grads, ws.ws)
                : nn::value_and_grad_into(model, params, X, Y, loss, ws.grads, ws.ws);
  } else {
    detail::zero_grads_like(ws.grads, params);
  }
  return detail::reduce_and_step(comm, params, ws.grads, n, value, opt, state);
}

/// train_step for any nn model and loss, on a batch every device holds whole: this device takes
/// its shard(X.cols(), comm) of the columns. key (may be null) as in train_step_on_shard.
template <nn::model M, class P, class DX, class DY, nn::loss_function Loss, class Opt, class State,
          device_group C>
requires requires(const Opt& o, P& p, State& s) {
  o.step(p, p, s);
}
typename DX::Scalar train_step(const M& model, P& params, const Eigen::MatrixBase<DX>& X,
                               const Eigen::DenseBase<DY>& Y, const Loss& loss,
                               const random::Key* key, const Opt& opt, State& state, C& comm,
                               StepWorkspace<P, typename DX::Scalar>& ws) {
  const Eigen::Index labels = std::is_integral_v<typename DY::Scalar> ? Y.size() : Y.cols();
  if (labels != X.cols())
    throw shape_error("grove::parallel::train_step: got " + std::to_string(labels) +
                      " targets for a batch of " + std::to_string(X.cols()) + " examples");
  const Shard s = shard(X.cols(), comm);
  return train_step_on_shard(model, params, X.derived().middleCols(s.begin, s.size),
                             detail::shard_targets(Y, s), loss, key, opt, state, comm, ws);
}

}  // namespace grove::parallel
