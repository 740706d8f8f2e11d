// grove/parallel/global_device.hpp: processes × local devices, as JAX has them: every MPI rank
// runs grove::parallel::LocalDevices, and each of its devices takes part in one group of all the
// processes' devices. Needs MPI (grove/parallel/mpi.hpp).
//
//   grove::mpi::Environment env(argc, argv);
//   grove::mpi::Communicator world;
//   grove::parallel::LocalDevices devices(2);
//   devices.run([&](grove::parallel::LocalDevice& local) {
//     grove::mpi::GlobalDevice device(world, local);      // rank = process * 2 + local rank
//     auto mean = grove::parallel::pmean(grads, device);  // over every device of every process
//   });
//
// A collective first combines the process's devices (LocalDevices' own collective, in rank
// order), then local device 0 of each process combines the processes over MPI, and the result is
// copied to the process's devices: deterministic, as each of the two is, and the same bits on
// every device. MPI is called from a device's thread, one thread at a time: grove::mpi::Environment
// asks MPI for MPI_THREAD_SERIALIZED, which GlobalDevice checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "grove/error.hpp"
#include "grove/parallel/communicator.hpp"
#include "grove/parallel/local_devices.hpp"
#include "grove/parallel/mpi.hpp"

namespace grove::mpi {

/// One device of all the processes' local devices: a grove::parallel::device_group of
/// processes.size() * local.size() devices, device `process * local.size() + local.rank()`
/// being this one. Construct it on each device's thread, inside LocalDevices::run; the
/// constructor is a collective, which checks that every process runs as many local devices.
class GlobalDevice {
 public:
  /// Throws grove::usage_error when MPI does not let a device's thread call it (a thread level
  /// below MPI_THREAD_SERIALIZED), grove::argument_error on every device when the processes run
  /// different numbers of local devices.
  GlobalDevice(Communicator& processes, parallel::LocalDevice& local)
      : processes_(processes), local_(local) {
    int level = MPI_THREAD_SINGLE;
    detail::check(MPI_Query_thread(&level), "MPI_Query_thread");
    if (level < MPI_THREAD_SERIALIZED)
      throw ::grove::usage_error(
          "grove::mpi::GlobalDevice: MPI was initialized with a thread level below "
          "MPI_THREAD_SERIALIZED, and a device's thread must call it; initialize it with "
          "grove::mpi::Environment, which asks for MPI_THREAD_SERIALIZED");
    const auto n = static_cast<std::uint64_t>(local.size());
    std::uint64_t most[2] = {n, ~n};  // the largest count and the smallest, in one allreduce_max
    if (local.rank() == 0) processes.allreduce_max(std::span<std::uint64_t>(most));
    local.broadcast(std::as_writable_bytes(std::span<std::uint64_t>(most)), 0);
    if (most[0] != n || ~most[1] != n)
      throw ::grove::argument_error(
          "grove::mpi::GlobalDevice: every process must run as many local devices; they run "
          "between " +
          std::to_string(~most[1]) + " and " + std::to_string(most[0]) + " (this one " +
          std::to_string(n) + ")");
  }

  int rank() const { return processes_.rank() * local_.size() + local_.rank(); }
  int size() const { return processes_.size() * local_.size(); }

  /// In place: the sum over every device of every process, the same bits on each.
  template <parallel::reducible T>
  void allreduce_sum(std::span<T> buf) {
    local_.allreduce_sum(buf);
    if (local_.rank() == 0) processes_.allreduce_sum(buf);
    local_.broadcast(std::as_writable_bytes(buf), 0);
  }

  /// In place: the elementwise maximum over every device.
  void allreduce_max(std::span<std::uint64_t> buf) {
    local_.allreduce_max(buf);
    if (local_.rank() == 0) processes_.allreduce_max(buf);
    local_.broadcast(std::as_writable_bytes(buf), 0);
  }

  /// In place: buf = device root's buf.
  void broadcast(std::span<std::byte> buf, int root) {
    if (root < 0 || root >= size())
      throw ::grove::argument_error("grove::mpi::GlobalDevice::broadcast: root " +
                                    std::to_string(root) + " is not a device (there are " +
                                    std::to_string(size()) + ")");
    const int process = root / local_.size(), device = root % local_.size();
    if (device != 0) local_.broadcast(buf, device);  // to local device 0 of the root's process
    if (local_.rank() == 0) processes_.broadcast(buf, process);
    local_.broadcast(buf, 0);
  }

  /// In place: buf holds size() blocks, block rank() this device's; afterwards block r is device
  /// r's. The process's devices gather their blocks, which lie side by side, then the processes
  /// gather theirs.
  void allgather(std::span<std::byte> buf) {
    const auto blocks = static_cast<std::size_t>(size());
    if (buf.size() % blocks != 0)
      throw ::grove::argument_error(
          "grove::mpi::GlobalDevice::allgather: " + std::to_string(buf.size()) + " bytes are not " +
          std::to_string(blocks) + " equal blocks");
    const std::size_t mine = buf.size() / static_cast<std::size_t>(processes_.size());
    local_.allgather(buf.subspan(static_cast<std::size_t>(processes_.rank()) * mine, mine));
    if (local_.rank() == 0) processes_.allgather(buf);
    local_.broadcast(buf, 0);
  }

  /// The staging memory the pytree collectives reuse on this device.
  parallel::Staging& staging() { return staging_; }

 private:
  Communicator& processes_;
  parallel::LocalDevice& local_;
  parallel::Staging staging_;
};

static_assert(parallel::device_group<GlobalDevice>);

}  // namespace grove::mpi
