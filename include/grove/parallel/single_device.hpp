// grove/parallel/single_device.hpp: a group of one device, so that a program runs the same
// data-parallel code on one device as on LocalDevices' devices or MPI ranks.
#pragma once

#include <cstddef>
#include <cstdint>
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

  /// The staging memory the pytree collectives reuse.
  Staging& staging() noexcept { return staging_; }

 private:
  Staging staging_;
};

static_assert(device_group<SingleDevice>);

}  // namespace grove::parallel
