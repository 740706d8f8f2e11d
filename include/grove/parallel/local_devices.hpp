// grove/parallel/local_devices.hpp: N devices as threads of one process, JAX's pmap on a CPU.
//
//   grove::parallel::LocalDevices devices(2);
//   devices.run([&](grove::parallel::LocalDevices::Device& dev) {
//     auto g = grove::parallel::pmean(local_grads, dev);   // every device gets the same mean
//   });
//
// run(f) calls f(device) once on each device, each on its own thread (the same threads from one
// run to the next), and returns when all have returned. The collectives synchronize the devices.
// Sums are taken in rank order, ((x0 + x1) + x2) + ..., whatever the threads' timing, so reruns
// give the same bits.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif
#include "grove/detail/spin.hpp"
#include "grove/detail/thread_limits.hpp"
#include "grove/error.hpp"
#include "grove/parallel/communicator.hpp"
#include "grove/parallel/detail/device_group.hpp"

namespace grove::parallel {

/// The operating system refused to start a thread that a LocalDevices needs (grove::thread_error,
/// which grove's thread teams throw too). Catch it to retry with fewer devices.
using thread_error = ::grove::thread_error;

/// N devices as threads of one process. Each device is a `device_group` for the pytree
/// collectives; a device computes with `threads_per_device` threads of its own (OpenMP, when the
/// code is compiled with it: grove's nn passes and optimizers then use that many).
class LocalDevices {
 public:
  /// One device: what run() hands to f. A communicator (rank(), size(), the collectives); use it
  /// only on the thread that runs it.
  class Device {
   public:
    int rank() const { return rank_; }
    int size() const { return group_->size(); }

    /// In place: buf = the sum over devices of buf, added in rank order, the same bits on every
    /// device. Each device adds up its own share of the elements, for every device. Signed
    /// integers wrap around, modulo 2^bits, as JAX's psum does (added as their unsigned type, so
    /// that an overflow is no undefined behaviour).
    template <reducible T>
    void allreduce_sum(std::span<T> buf) {
      reduce(buf, detail::tag_sum | detail::scalar_code<T>(), add<T>);
    }

    /// In place: the elementwise maximum over devices.
    void allreduce_max(std::span<std::uint64_t> buf) {
      reduce(buf, detail::tag_max | detail::scalar_code<std::uint64_t>(),
             [](std::uint64_t* acc, const std::uint64_t* x, std::size_t n) {
               for (std::size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], x[i]);
             });
    }

    /// In place: buf = root's buf.
    void broadcast(std::span<std::byte> buf, int root) {
      check_root("broadcast", root);
      auto& mine = group_->slot(rank_);
      mine = {buf.data(), buf.size(), detail::tag_broadcast, root};
      group_->arrive_and_wait();
      const auto& from = group_->slot(root);
      const std::string problem = agreement(buf.size(), detail::tag_broadcast, root);
      if (problem.empty() && rank_ != root && !buf.empty())
        std::memcpy(buf.data(), from.data, buf.size());
      group_->arrive_and_wait();  // root's buffer is read by all before anyone goes on
      if (!problem.empty()) throw ::grove::argument_error(problem);
    }

    /// In place: buf holds size() blocks of equal length; block rank() is this device's, and on
    /// return block r is device r's.
    void allgather(std::span<std::byte> buf) {
      const std::size_t block = check_blocks("allgather", buf.size());
      auto& mine = group_->slot(rank_);
      mine = {buf.data(), buf.size(), detail::tag_allgather, 0};
      group_->arrive_and_wait();
      const std::string problem = agreement(buf.size(), detail::tag_allgather, 0);
      if (problem.empty() && block > 0)
        for (int r = 0; r < size(); ++r) {
          if (r == rank_) continue;
          const auto at = static_cast<std::size_t>(r) * block;
          std::memcpy(buf.data() + at, static_cast<const std::byte*>(group_->slot(r).data) + at,
                      block);
        }
      group_->arrive_and_wait();  // every block is read before anyone goes on
      if (!problem.empty()) throw ::grove::argument_error(problem);
    }

    /// in holds size() blocks of out.size() elements; out = the sum over devices of their block
    /// rank(), added in rank order: the same bits as that block of allreduce_sum. Signed
    /// integers wrap around as there.
    template <reducible T>
    void reduce_scatter_sum(std::span<const T> in, std::span<T> out) {
      if (in.size() != out.size() * static_cast<std::size_t>(size()))
        throw ::grove::argument_error(
            "grove::parallel::LocalDevices::Device::reduce_scatter_sum: in has " +
            std::to_string(in.size()) + " elements, not " + std::to_string(size()) +
            " blocks of out's " + std::to_string(out.size()));
      const std::uint64_t tag = detail::tag_reduce_scatter | detail::scalar_code<T>();
      auto& mine = group_->slot(rank_);
      mine = {const_cast<T*>(in.data()), in.size(), tag, 0};  // read only, by every device
      group_->arrive_and_wait();
      const std::string problem = agreement(in.size(), tag, 0);
      if (problem.empty() && !out.empty()) {
        const std::size_t at = static_cast<std::size_t>(rank_) * out.size();
        std::memcpy(out.data(), static_cast<const T*>(group_->slot(0).data) + at,
                    out.size() * sizeof(T));
        for (int r = 1; r < size(); ++r)
          add(out.data(), static_cast<const T*>(group_->slot(r).data) + at, out.size());
      }
      group_->arrive_and_wait();  // every block is read before anyone goes on
      if (!problem.empty()) throw ::grove::argument_error(problem);
    }

    /// Sends `send` to device dest and receives `recv` from device source (-1: none); every
    /// device passes buffers of the same length, and device source must send to this one.
    void sendrecv(std::span<const std::byte> send, int dest, std::span<std::byte> recv,
                  int source) {
      if (dest < -1 || dest >= size() || source < -1 || source >= size() ||
          send.size() != recv.size())
        throw ::grove::argument_error(
            "grove::parallel::LocalDevices::Device::sendrecv: dest " + std::to_string(dest) +
            " and source " + std::to_string(source) + " must be devices or -1 (there " +
            (size() == 1 ? "is 1" : "are " + std::to_string(size())) +
            "), and send and recv of one length (" + std::to_string(send.size()) + " and " +
            std::to_string(recv.size()) + " bytes)");
      auto& mine = group_->slot(rank_);
      mine = {const_cast<std::byte*>(send.data()), send.size(), detail::tag_sendrecv, dest};
      group_->arrive_and_wait();
      std::string problem = agreement(send.size(), detail::tag_sendrecv, -1);
      if (problem.empty() && source >= 0 && group_->slot(source).root != rank_)
        problem = "grove::parallel::LocalDevices: device " + std::to_string(rank_) +
                  " receives from device " + std::to_string(source) + ", which sends to " +
                  std::to_string(group_->slot(source).root);
      if (problem.empty() && source >= 0 && !recv.empty())
        std::memcpy(recv.data(), group_->slot(source).data, recv.size());
      group_->arrive_and_wait();  // every send buffer is read before anyone goes on
      if (!problem.empty()) throw ::grove::argument_error(problem);
    }

    /// Waits until every device has arrived.
    void barrier() { group_->arrive_and_wait(); }

    /// The staging memory the pytree collectives reuse on this device.
    Staging& staging() { return staging_; }

   private:
    friend class LocalDevices;
    Device(detail::DeviceGroup* group, int rank) : group_(group), rank_(rank) {}

    void check_root(const char* what, int root) const {
      if (root < 0 || root >= size())
        throw ::grove::argument_error(
            "grove::parallel::LocalDevices::Device::" + std::string(what) + ": root " +
            std::to_string(root) + " is not a device (there " +
            (size() == 1 ? "is 1" : "are " + std::to_string(size())) + ")");
    }

    // acc += x, element by element. Signed integers are added as their unsigned type: they wrap
    // around modulo 2^bits, as JAX's psum does, and an overflow is no undefined behaviour.
    template <class T>
    static void add(T* acc, const T* x, std::size_t n) {
      if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
        using U = std::make_unsigned_t<T>;
        for (std::size_t i = 0; i < n; ++i)
          acc[i] = static_cast<T>(static_cast<U>(static_cast<U>(acc[i]) + static_cast<U>(x[i])));
      } else {
        using A = Eigen::Array<T, Eigen::Dynamic, 1>;
        Eigen::Map<A>(acc, static_cast<Eigen::Index>(n)) +=
            Eigen::Map<const A>(x, static_cast<Eigen::Index>(n));
      }
    }

    // The length of one of size() equal blocks of `bytes`.
    std::size_t check_blocks(const char* what, std::size_t bytes) const {
      const auto n = static_cast<std::size_t>(size());
      if (bytes % n != 0)
        throw ::grove::argument_error(
            "grove::parallel::LocalDevices::Device::" + std::string(what) + ": " +
            std::to_string(bytes) + " bytes are not " + std::to_string(n) + " equal blocks");
      return bytes / n;
    }

    // "" when every device called the same collective on as many elements (with the same root,
    // unless root is -1); otherwise why not.
    std::string agreement(std::size_t count, std::uint64_t tag, int root) {
      for (int r = 0; r < size(); ++r) {
        const auto& s = group_->slot(r);
        if (s.tag != tag || s.count != count || (root >= 0 && s.root != root))
          return "grove::parallel::LocalDevices: the devices called different collectives: "
                 "device " +
                 std::to_string(r) + " called " + detail::collective_name(s.tag) + " on " +
                 std::to_string(s.count) + " elements, device " + std::to_string(rank_) +
                 " called " + detail::collective_name(tag) + " on " + std::to_string(count) +
                 " (check that every device passes trees of the same structure and shapes)";
      }
      return {};
    }

    template <class T, class Op>
    void reduce(std::span<T> buf, std::uint64_t tag, Op op) {
      auto& mine = group_->slot(rank_);
      mine = {buf.data(), buf.size(), tag, 0};
      group_->arrive_and_wait();
      const std::string problem = agreement(buf.size(), tag, 0);
      if (problem.empty() && size() > 1) {
        // This device owns [b, e) of every device's buffer: it adds device 0's, 1's, ... in that
        // order into device 0's buffer, block by block while the block is in cache, and copies
        // the sums to the other devices' buffers.
        const auto [b, e] = detail::owned_range(buf.size(), sizeof(T), rank_, size());
        constexpr std::size_t block = 16384 / sizeof(T);
        T* acc = static_cast<T*>(group_->slot(0).data);
        for (std::size_t i = b; i < e; i += block) {
          const std::size_t n = std::min(block, e - i);
          for (int r = 1; r < size(); ++r)
            op(acc + i, static_cast<const T*>(group_->slot(r).data) + i, n);
          for (int r = 1; r < size(); ++r)
            std::memcpy(static_cast<T*>(group_->slot(r).data) + i, acc + i, n * sizeof(T));
        }
      }
      group_->arrive_and_wait();
      if (!problem.empty()) throw ::grove::argument_error(problem);
    }

    detail::DeviceGroup* group_;
    int rank_;
    Staging staging_;
  };

  /// `n` devices (n >= 1), each computing with `threads_per_device` threads (>= 1). On a machine
  /// with C cores, n * threads_per_device = C uses them all. Starts one thread per device; throws
  /// grove::parallel::thread_error (a std::system_error) when the operating system refuses one,
  /// after stopping the threads already started.
  explicit LocalDevices(int n, int threads_per_device = 1)
      : LocalDevices(n, threads_per_device, detail::fail_thread_start{}) {}

  /// For grove's tests only (see detail::fail_thread_start).
  LocalDevices(int n, int threads_per_device, detail::fail_thread_start fail)
      : threads_per_device_(threads_per_device) {
    if (n < 1)
      throw ::grove::argument_error(
          "grove::parallel::LocalDevices: need at least one device, got " + std::to_string(n));
    if (threads_per_device < 1)
      throw ::grove::argument_error(
          "grove::parallel::LocalDevices: threads_per_device must be at least 1, got " +
          std::to_string(threads_per_device));
    group_ = std::make_unique<detail::DeviceGroup>(n);
    devices_.reserve(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) devices_.push_back(Device(group_.get(), r));
    errors_.resize(static_cast<std::size_t>(n));
    workers_.reserve(static_cast<std::size_t>(n));
    try {
      for (int r = 0; r < n; ++r) {
        if (r == fail.after)
          throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                                  "grove's test refusal");
        workers_.emplace_back([this, r] { work(r); });
      }
    } catch (...) {
      // The members are about to be destroyed: the started workers, which wait on start_, must
      // be gone first (a condition variable destroyed under a waiter blocks forever, a joinable
      // std::thread destroyed calls std::terminate).
      const std::size_t started = workers_.size();
      stop_workers();
      try {
        throw;
      } catch (const std::system_error& e) {
        throw thread_error(e.code(), detail::refused_text(n, started));
      }
    }
  }

  LocalDevices(const LocalDevices&) = delete;
  LocalDevices& operator=(const LocalDevices&) = delete;

  ~LocalDevices() { stop_workers(); }

  int size() const { return group_->size(); }
  int threads_per_device() const { return threads_per_device_; }

  /// Calls f(device) on every device, each on its own thread, and waits for all of them (JAX's
  /// pmap). If f returns a value, run returns a std::vector of them, indexed by rank. If f throws
  /// on some device, the devices waiting for it in a collective stop with
  /// grove::parallel::aborted_error and run rethrows the exception of the lowest-ranked device that
  /// failed on its own. Not reentrant: f must not call run() of the same LocalDevices.
  template <class F>
  requires std::is_invocable_v<F&, Device&>
  auto run(F&& f) {
    using R = std::invoke_result_t<F&, Device&>;
    if (detail::running_devices == this)
      throw ::grove::usage_error(
          "grove::parallel::LocalDevices::run: called from inside run() of the same devices");
    std::lock_guard serial(run_mutex_);
    if constexpr (std::is_void_v<R>) {
      auto job = [&](Device& d) { f(d); };
      dispatch(job);
    } else {
      std::vector<std::optional<R>> results(static_cast<std::size_t>(size()));
      auto job = [&](Device& d) { results[static_cast<std::size_t>(d.rank())].emplace(f(d)); };
      dispatch(job);
      std::vector<R> out;
      out.reserve(results.size());
      for (auto& r : results) out.push_back(std::move(*r));
      return out;
    }
  }

 private:
  void stop_workers() {
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    start_.notify_all();
    for (auto& w : workers_) w.join();
  }

  template <class Job>
  void dispatch(Job& job) {
    group_->reset();
    for (auto& e : errors_) e = nullptr;
    {
      std::lock_guard lock(m_);
      job_ = [](void* ctx, Device& d) { (*static_cast<Job*>(ctx))(d); };
      ctx_ = &job;
      remaining_ = size();
      ++job_id_;
    }
    start_.notify_all();
    {
      std::unique_lock lock(m_);
      done_.wait(lock, [&] { return remaining_ == 0; });
    }
    // The exception of the first device that failed on its own; a device that stopped because
    // another failed only says so.
    std::exception_ptr first_aborted;
    for (auto& e : errors_) {
      if (!e) continue;
      try {
        std::rethrow_exception(e);
      } catch (const aborted_error&) {
        if (!first_aborted) first_aborted = e;
      } catch (...) {
        std::rethrow_exception(e);
      }
    }
    if (first_aborted) std::rethrow_exception(first_aborted);
  }

  void work(int rank) {
    detail::running_devices = this;
#if defined(_OPENMP)
    omp_set_num_threads(threads_per_device_);  // this thread's own setting (OpenMP ICVs are
                                               // per thread); Eigen::nbThreads() follows it
                                               // unless Eigen::setNbThreads was called
#endif
    std::uint64_t seen = 0;
    for (;;) {
      void (*job)(void*, Device&) = nullptr;
      void* ctx = nullptr;
      {
        std::unique_lock lock(m_);
        start_.wait(lock, [&] { return stop_ || job_id_ != seen; });
        if (stop_) return;
        seen = job_id_;
        job = job_;
        ctx = ctx_;
      }
      Device& device = devices_[static_cast<std::size_t>(rank)];
      try {
        job(ctx, device);
        group_->depart(rank);
      } catch (...) {
        errors_[static_cast<std::size_t>(rank)] = std::current_exception();
        std::string what = "unknown exception";
        try {
          throw;
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        group_->fail(rank, what);
      }
      {
        std::lock_guard lock(m_);
        if (--remaining_ == 0) done_.notify_all();
      }
    }
  }

  int threads_per_device_;
  std::unique_ptr<detail::DeviceGroup> group_;
  std::vector<Device> devices_;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;
  std::mutex m_;
  std::condition_variable start_, done_;
  std::uint64_t job_id_ = 0;
  int remaining_ = 0;
  bool stop_ = false;
  void (*job_)(void*, Device&) = nullptr;
  void* ctx_ = nullptr;
};

/// The communicator type of a LocalDevices device.
using LocalDevice = LocalDevices::Device;

}  // namespace grove::parallel
