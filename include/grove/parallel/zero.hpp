// grove/parallel/zero.hpp: ZeRO stage 1 (DeepSpeed's, PyTorch's ZeroRedundancyOptimizer): each
// device keeps the optimizer state of 1/N of the parameters only.
//
//   const auto opt = grove::parallel::zero_redundancy(grove::optim::adam(1e-3));
//   auto state = opt.init(params, comm);               // this device's shard's state
//   grove::parallel::train_step(model, params, X, Y, loss, &key, opt, state, comm, ws);
//
// The parameters, seen as one flat vector (the leaves one after the other, each in its storage
// order), are cut into N equal blocks (the last one shorter), and device r owns block r. A step
// reduce-scatters the gradients (device r receives the sum of block r only), updates its block of
// the parameters with the inner optimizer and its block's state, and all-gathers the blocks, so
// that every device ends with all the parameters, the same bits on each. They are the replicated
// optimizer's to an ulp: the same elementwise arithmetic on the same sums (psum's, bit for bit on
// LocalDevices), where only Eigen's vector code may meet an element at another place of a packet.
// The optimizer state per device is 1/N of the replicated one; the messages are a reduce-scatter
// and an all-gather, together the bytes of one allreduce.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "grove/error.hpp"
#include "grove/optim.hpp"
#include "grove/parallel/collectives.hpp"
#include "grove/parallel/communicator.hpp"
#include "grove/parallel/detail/primitives.hpp"
#include "grove/parallel/single_device.hpp"
#include "grove/tree.hpp"
#include "grove/tree/eigen.hpp"

namespace grove::parallel {

namespace detail {

// Whether a transformation acts on every element alone, so that it can run on a block of the
// flattened parameters: grove's elementwise transformations and chains of them, and multi_steps
// of such; not one that needs the global norm (clip_by_global_norm), masks whole leaves (masked)
// or looks at every update (apply_if_finite).
template <class T>
struct shardable
    : std::bool_constant<std::remove_cvref_t<T>::fusable && !std::remove_cvref_t<T>::needs_norm> {};
template <class Inner, class Mask>
struct shardable<optim::Masked<Inner, Mask>> : std::false_type {};
template <class... Ts>
struct shardable<optim::Chain<Ts...>>
    : std::bool_constant<(shardable<Ts>::value && ...) && !optim::Chain<Ts...>::needs_norm> {};
template <class Inner>
struct shardable<optim::MultiSteps<Inner>> : shardable<Inner> {};
template <class Inner>
struct shardable<optim::ApplyIfFinite<Inner>> : std::false_type {};

// Device r's block of a flat vector of n elements over `devices` devices: [r * block, ...).
inline std::size_t block_length(std::size_t n, std::size_t devices) {
  return (n + devices - 1) / devices;
}
inline std::pair<std::size_t, std::size_t> block_of(std::size_t n, std::size_t devices,
                                                    std::size_t r) {
  const std::size_t block = block_length(n, devices);
  const std::size_t b = std::min(n, r * block);
  return {b, std::min(n, b + block)};
}

// Copies the tree's flat elements [lo, hi) to `out`, each times `scale` (zeros for a scale of
// 0, not 0 * x), or back from `in`.
template <class T, class Tree>
void copy_flat(const Tree& tree, std::size_t lo, std::size_t hi, T* out, T scale = T(1)) {
  std::size_t off = 0;
  grove::tree_for_each(
      [&](const auto& leaf) {
        leaf_runs(leaf, [&](const T* run, Eigen::Index n) {
          overlap(run, off, static_cast<std::size_t>(n), lo, hi,
                  [&](const T* from, std::size_t at, std::size_t k) {
                    if (scale == T(0))
                      std::fill_n(out + at, k, T(0));
                    else if (scale == T(1))
                      std::memcpy(out + at, from, k * sizeof(T));
                    else
                      for (std::size_t i = 0; i < k; ++i) out[at + i] = from[i] * scale;
                  });
          off += static_cast<std::size_t>(n);
        });
      },
      tree);
}
template <class T, class Tree>
void write_flat(Tree& tree, std::size_t lo, std::size_t hi, const T* in) {
  std::size_t off = 0;
  grove::tree_for_each(
      [&](auto& leaf) {
        leaf_runs(leaf, [&](T* run, Eigen::Index n) {
          overlap(run, off, static_cast<std::size_t>(n), lo, hi,
                  [&](T* to, std::size_t at, std::size_t k) {
                    std::memcpy(to, in + at, k * sizeof(T));
                  });
          off += static_cast<std::size_t>(n);
        });
      },
      tree);
}

// This thread's block of the parameters and of the gradients, in the vectors the inner optimizer
// takes (grove::optim takes owned arrays, not maps into staging memory): kept from step to step,
// so that a step allocates nothing once they have held the largest block.
template <class T>
struct shard_vectors {
  Eigen::Matrix<T, Eigen::Dynamic, 1> params, grads;
};
template <class T>
shard_vectors<T>& thread_shard_vectors() {
  thread_local shard_vectors<T> vectors;
  return vectors;
}

}  // namespace detail

/// ZeRO stage 1 around an elementwise optimizer (see the file's comment): parallel::train_step
/// with it keeps on each device the inner optimizer's state of that device's block of the
/// parameters. `inner` must act on every element alone (sgd, momentum, adam, adamw without a
/// mask, rmsprop, adagrad, lion, chains of them, multi_steps of them); one that needs all the
/// parameters at once (clip_by_global_norm, masked, apply_if_finite) stops the compile.
template <class Inner>
class ZeroRedundancy {
  static_assert(detail::shardable<Inner>::value,
                "grove::parallel::zero_redundancy: the inner optimizer must act on every "
                "parameter alone (grove's elementwise transformations, chains and multi_steps of "
                "them), not on whole leaves or on the global norm (masked, clip_by_global_norm, "
                "apply_if_finite)");

 public:
  explicit ZeroRedundancy(Inner inner) : inner_(std::move(inner)) {}

  /// The inner optimizer.
  const Inner& inner() const { return inner_; }

  /// The state of this device's block of `params` (a vector of its elements), for the data-
  /// parallel step on `comm`. Every device calls it with the same params.
  template <class P, device_group C>
  auto init(const P& params, const C& comm) const {
    using T = ::grove::ravel_scalar_t<P>;
    const std::size_t n = static_cast<std::size_t>(grove::tree_size(params));
    const auto [b, e] = detail::block_of(n, static_cast<std::size_t>(comm.size()),
                                         static_cast<std::size_t>(comm.rank()));
    Eigen::Matrix<T, Eigen::Dynamic, 1> block(static_cast<Eigen::Index>(e - b));
    detail::copy_flat(params, b, e, block.data());
    return inner_.init(block);
  }

  /// The state of all the parameters, for a single device (the whole vector is its block).
  template <class P>
  auto init(const P& params) const {
    SingleDevice one;
    return init(params, one);
  }

  /// One device's step: the inner optimizer on all the parameters as one vector.
  template <class P, class State>
  void step(P& params, const P& grads, State& state) const {
    using T = ::grove::ravel_scalar_t<P>;
    const std::size_t n = static_cast<std::size_t>(grove::tree_size(params));
    check_block("step", state, n, n);
    auto& v = detail::thread_shard_vectors<T>();
    v.params.resize(static_cast<Eigen::Index>(n));
    v.grads.resize(static_cast<Eigen::Index>(n));
    detail::copy_flat(params, 0, n, v.params.data());
    detail::copy_flat(grads, 0, n, v.grads.data());
    inner_.step(v.params, v.grads, state);
    detail::write_flat(params, 0, n, v.params.data());
  }

  /// Throws grove::shape_error unless `state` is the state of a block of `length` elements.
  template <class State>
  void check_block(const char* who, const State& state, std::size_t length,
                   std::size_t total) const {
    std::size_t held = 0;
    bool found = false;
    grove::tree_for_each(
        [&](const auto& leaf) {
          using L = std::remove_cvref_t<decltype(leaf)>;
          if constexpr (!std::is_arithmetic_v<L>) {
            if (!found) held = static_cast<std::size_t>(leaf.size());
            found = true;
          }
        },
        state);
    if (found && held != length)
      throw ::grove::shape_error(
          std::string("grove::parallel::zero_redundancy::") + who +
          ": the state holds a block of " + std::to_string(held) +
          " parameters, and this device's block of the " + std::to_string(total) + " is " +
          std::to_string(length) +
          " (make the state with init(params, comm), on the devices that train)");
  }

 private:
  Inner inner_;
};

/// ZeRO stage 1 around `inner` (see ZeroRedundancy).
template <class Inner>
ZeroRedundancy<std::remove_cvref_t<Inner>> zero_redundancy(Inner&& inner) {
  return ZeroRedundancy<std::remove_cvref_t<Inner>>(std::forward<Inner>(inner));
}

namespace detail {

// The batch's size and mean loss over the devices, from this device's shard size n and mean loss
// (one allreduce of two numbers); argument_error when every shard is empty.
template <class T, device_group C>
std::pair<T, T> batch_size_and_loss(C& comm, Eigen::Index n, T value) {
  T header[2] = {static_cast<T>(n), value * static_cast<T>(n)};
  comm.allreduce_sum(std::span<T>(header));
  if (!(header[0] > T(0)))
    throw argument_error("grove::parallel::train_step: every device's shard is empty");
  return {header[0], header[1] / header[0]};
}

template <class Opt>
inline constexpr bool is_zero_redundancy = false;
template <class Inner>
inline constexpr bool is_zero_redundancy<ZeroRedundancy<Inner>> = true;

// The data-parallel step under ZeRO stage 1, after this device's value_and_grad on its n
// examples (grads, `value` their mean loss): the shard sizes and losses summed (two numbers), the
// gradients times n reduce-scattered (this device's block of their sum) and divided by the
// batch's size, as the replicated step divides the allreduce's sums; the inner optimizer on this
// device's block; the blocks all-gathered into every device's parameters.
template <class T, class P, class Opt, class State, device_group C, class Grads>
T zero_step(C& comm, Staging& staging, P& params, Grads& grads, Eigen::Index n, T value,
            const Opt& opt, State& state) {
  const auto [batch, loss] = batch_size_and_loss(comm, n, value);
  const auto devices = static_cast<std::size_t>(comm.size());
  const std::size_t total = static_cast<std::size_t>(grove::tree_size(params)),
                    block = block_length(total, devices);
  const auto [b, e] = block_of(total, devices, static_cast<std::size_t>(comm.rank()));
  opt.check_block("train_step", state, e - b, total);

  // All devices' blocks, padded to equal lengths, then this device's sums.
  T* all = staging.get<T>(devices * block + block);
  T* sums = all + devices * block;
  std::fill(all + total, all + devices * block, T(0));
  copy_flat(grads, 0, total, all, static_cast<T>(n));
  reduce_scatter_sum<T>(comm, std::span<const T>(all, devices * block), std::span<T>(sums, block));

  auto& v = thread_shard_vectors<T>();
  v.params.resize(static_cast<Eigen::Index>(e - b));
  v.grads.resize(static_cast<Eigen::Index>(e - b));
  for (std::size_t i = 0; i < e - b; ++i) v.grads[static_cast<Eigen::Index>(i)] = sums[i] / batch;
  copy_flat(params, b, e, v.params.data());
  opt.inner().step(v.params, v.grads, state);

  // Every device's block of the new parameters, gathered in place.
  T* mine = all + static_cast<std::size_t>(comm.rank()) * block;
  std::copy_n(v.params.data(), e - b, mine);
  std::fill(mine + (e - b), mine + block, T(0));
  allgather_bytes(comm, std::as_writable_bytes(std::span<T>(all, devices * block)));
  write_flat(params, 0, total, all);
  return loss;
}

}  // namespace detail

}  // namespace grove::parallel
