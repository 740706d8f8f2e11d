// grove/parallel/detail/device_group.hpp: what the devices of one LocalDevices
// (grove/parallel/local_devices.hpp) share: a barrier that can be broken, one slot per device
// where a collective publishes its buffer, the collectives' tags, and the messages of a group that
// could not start.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "grove/detail/spin.hpp"
#include "grove/detail/thread_limits.hpp"
#include "grove/parallel/communicator.hpp"

namespace grove::parallel {

namespace detail {

/// For grove's tests only: LocalDevices(n, threads_per_device, fail_thread_start{k}) fails to
/// start its thread number k (0-based) as std::thread fails when the system refuses
/// (std::system_error, resource_unavailable_try_again), so that the constructor's way out of a
/// half-started group is tested without exhausting a real limit.
struct fail_thread_start {
  int after = -1;
};

// thread_error's message: n devices' threads asked for, `started` of them started.
inline std::string refused_text(int n, std::size_t started) {
  const std::string threads =
      n == 1 ? "1 device needs 1 thread"
             : std::to_string(n) + " devices need " + std::to_string(n) + " threads";
  return "grove::parallel::LocalDevices: " + threads +
         ", and the operating system refused to start more than " + std::to_string(started) + " (" +
         ::grove::detail::thread_limits() + "); ask for fewer devices or raise the limit";
}

// The LocalDevices whose run() the current thread is executing (nullptr outside).
inline thread_local const void* running_devices = nullptr;

// The state the devices of one LocalDevices share: a barrier that can be broken (so that no
// device waits forever for one that failed or left), and one slot per device where a collective
// publishes its buffer. The barrier spins briefly (collectives are usually short), then sleeps
// (futex, through std::atomic::wait).
class DeviceGroup {
 public:
  struct Slot {
    void* data = nullptr;
    std::size_t count = 0;
    std::uint64_t tag = 0;  // the collective and its element type
    int root = 0;
  };

  explicit DeviceGroup(int n) : n_(n), slots_(static_cast<std::size_t>(n)) {}

  int size() const { return n_; }
  Slot& slot(int rank) { return slots_[static_cast<std::size_t>(rank)]; }

  // Waits until every device has arrived; throws `aborted_error` if the group is broken meanwhile.
  void arrive_and_wait() {
    const std::uint64_t seen = state_.load(std::memory_order_acquire);
    if (seen & broken_bit) throw_broken();
    const int arrived = arrived_.fetch_add(1, std::memory_order_seq_cst) + 1;
    const int departed = departed_.load(std::memory_order_seq_cst);
    if (arrived + departed == n_) {
      if (departed > 0) {
        break_group(left_message());
        throw_broken();
      }
      arrived_.store(0, std::memory_order_relaxed);
      state_.fetch_add(1, std::memory_order_acq_rel);  // the next generation: everyone goes on
      state_.notify_all();
      return;
    }
    for (int i = 0; i < spins; ++i) {
      if (state_.load(std::memory_order_acquire) != seen) return settle(seen);
      ::grove::detail::cpu_relax();
    }
    for (;;) {
      state_.wait(seen, std::memory_order_acquire);
      if (state_.load(std::memory_order_acquire) != seen) return settle(seen);
    }
  }

  // Device `rank` returned from its function: a collective that waits for it can never complete.
  void depart(int rank) {
    {
      std::lock_guard lock(m_);
      if (first_departed_ < 0) first_departed_ = rank;
    }
    departed_.fetch_add(1, std::memory_order_seq_cst);
    if (arrived_.load(std::memory_order_seq_cst) > 0) break_group(left_message());
  }

  // Device `rank` failed: everyone waiting, or arriving later, stops with `aborted_error`.
  void fail(int rank, const std::string& what) {
    break_group("grove::parallel::LocalDevices: device " + std::to_string(rank) + " failed (" +
                what + "), so the collective the other devices wait in cannot complete");
  }

  // Between runs, when no device is in a collective.
  void reset() {
    std::lock_guard lock(m_);
    arrived_.store(0);
    departed_.store(0);
    first_departed_ = -1;
    reason_.clear();
    state_.fetch_and(~broken_bit);
  }

 private:
  static constexpr std::uint64_t broken_bit = 1ull << 63;
  static constexpr int spins = 2000;

  // The state changed since `seen`: either the generation moved on (go on) or the group broke.
  void settle(std::uint64_t seen) {
    const std::uint64_t now = state_.load(std::memory_order_acquire);
    if ((now & ~broken_bit) != (seen & ~broken_bit)) return;
    throw_broken();
  }
  std::string left_message() {
    std::lock_guard lock(m_);
    return "grove::parallel::LocalDevices: device " + std::to_string(first_departed_) +
           " returned from its function while another device waits in a collective: every device "
           "must call the same collectives in the same order";
  }
  void break_group(std::string reason) {
    {
      std::lock_guard lock(m_);
      if (state_.load() & broken_bit) return;
      reason_ = std::move(reason);
      state_.fetch_or(broken_bit, std::memory_order_acq_rel);
    }
    state_.notify_all();
  }
  [[noreturn]] void throw_broken() {
    std::string reason;
    {
      std::lock_guard lock(m_);
      reason = reason_;
    }
    throw aborted_error(reason);
  }

  int n_;
  std::atomic<std::uint64_t> state_{0};  // the barrier's generation, and broken_bit
  std::atomic<int> arrived_{0};
  std::atomic<int> departed_{0};
  std::mutex m_;  // guards reason_ and first_departed_
  int first_departed_ = -1;
  std::string reason_;
  std::vector<Slot> slots_;
};

// Tags of the collectives, combined with the element type's code.
inline constexpr std::uint64_t tag_sum = 1ull << 32;
inline constexpr std::uint64_t tag_max = 2ull << 32;
inline constexpr std::uint64_t tag_broadcast = 3ull << 32;
inline constexpr std::uint64_t tag_allgather = 4ull << 32;
inline constexpr std::uint64_t tag_reduce_scatter = 5ull << 32;
inline constexpr std::uint64_t tag_sendrecv = 6ull << 32;

// The part of [0, n) that device `rank` of `size` reduces: equal shares, starting at multiples
// of 64 bytes so that no two devices write the same cache line.
inline std::pair<std::size_t, std::size_t> owned_range(std::size_t n, std::size_t elem_bytes,
                                                       int rank, int size) {
  const std::size_t align = std::max<std::size_t>(1, 64 / elem_bytes);
  const std::size_t units = (n + align - 1) / align;
  const auto r = static_cast<std::size_t>(rank), s = static_cast<std::size_t>(size);
  const std::size_t b = std::min(n, units * r / s * align);
  const std::size_t e = std::min(n, units * (r + 1) / s * align);
  return {b, e};
}

inline std::string collective_name(std::uint64_t tag) {
  switch (tag >> 32) {
    case 1:
      return "allreduce_sum";
    case 2:
      return "allreduce_max";
    case 4:
      return "allgather";
    case 5:
      return "reduce_scatter_sum";
    case 6:
      return "sendrecv";
    default:
      return "broadcast";
  }
}

}  // namespace detail

}  // namespace grove::parallel
