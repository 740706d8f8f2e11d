// grove/parallel/single_device.hpp: a group of one device, so that a program runs the same
// data-parallel code on one device as on LocalDevices' devices or MPI ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "grove/error.hpp"
#include "grove/parallel/communicator.hpp"

namespace grove::parallel {

/// This process alone, as a `device_group` of size 1 (JAX's single device). Its collectives leave
/// their buffers as they are: the sum, the maximum and the broadcast over one device are that
/// device's own values. parallel::train_step on it is nn::train_step, bit for bit, with plain sgd
/// fused into the backward pass; the pytree collectives still check the trees they are given.
class SingleDevice {
 public:
  int rank() const noexcept { return 0; }
  int size() const noexcept { return 1; }

  /// buf stays as it is: the sum over one device.
  template <reducible T>
  void allreduce_sum(std::span<T>) noexcept {}

  /// buf stays as it is: the maximum over one device.
  void allreduce_max(std::span<std::uint64_t>) noexcept {}

  /// buf stays as it is; root must be 0, the only device.
  void broadcast(std::span<std::byte>, int root) const {
    if (root != 0)
      throw argument_error("grove::parallel::SingleDevice::broadcast: root " +
                           std::to_string(root) + " is not a device (there is 1)");
  }

  /// buf stays as it is: the one block is this device's.
  void allgather(std::span<std::byte>) noexcept {}

  /// out = in: the sum over one device of its one block.
  template <reducible T>
  void reduce_scatter_sum(std::span<const T> in, std::span<T> out) const {
    if (in.size() != out.size())
      throw argument_error("grove::parallel::SingleDevice::reduce_scatter_sum: in has " +
                           std::to_string(in.size()) + " elements and out " +
                           std::to_string(out.size()) + ": one device has one block");
    if (!in.empty()) std::memcpy(out.data(), in.data(), in.size() * sizeof(T));
  }

  /// recv = send when this device sends to itself (dest and source 0); with no source (-1),
  /// recv is left as it is.
  void sendrecv(std::span<const std::byte> send, int dest, std::span<std::byte> recv,
                int source) const {
    if (dest < -1 || dest > 0 || source < -1 || source > 0 || send.size() != recv.size() ||
        (dest == 0) != (source == 0))
      throw argument_error("grove::parallel::SingleDevice::sendrecv: dest " + std::to_string(dest) +
                           " and source " + std::to_string(source) +
                           " must both be 0 or both -1, and send and recv of one length");
    if (source == 0 && !send.empty() && send.data() != recv.data())
      std::memcpy(recv.data(), send.data(), send.size());
  }

  /// The staging memory the pytree collectives reuse.
  Staging& staging() noexcept { return staging_; }

 private:
  Staging staging_;
};

static_assert(device_group<SingleDevice>);

}  // namespace grove::parallel
