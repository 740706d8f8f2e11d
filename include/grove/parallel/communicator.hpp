// grove/parallel/communicator.hpp: what grove's pytree collectives need from a group of devices
// (the `device_group` concept), the staging memory they move trees through, and the errors they
// raise. Two communicators come with grove: grove::parallel::LocalDevices' devices (threads of one
// process, grove/parallel/local_devices.hpp) and grove::mpi::Communicator (MPI ranks,
// grove/mpi.hpp).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "grove/error.hpp"

namespace grove::parallel {

/// The element types the collectives reduce: every arithmetic type but bool.
template <class T>
concept reducible = std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;

/// A group of `size()` devices, this one being `rank()` (0-based), with collectives on contiguous
/// buffers that every device of the group calls in the same order:
///
///   c.allreduce_sum(std::span<T> buf)      in place: buf = the sum over devices of buf (T any
///                                          `reducible` type; float and double at least). Every
///                                          device gets the same bits.
///   c.allreduce_max(std::span<std::uint64_t> buf)   in place: the elementwise maximum.
///   c.broadcast(std::span<std::byte> buf, int root) in place: buf = root's buf.
///
/// Optionally `c.staging()` returns a grove::parallel::Staging& that the pytree collectives reuse
/// (they allocate staging memory on each call otherwise). Three more primitives are optional too;
/// a group that lacks one gets the same results from the primitives above, with more messages:
///
///   c.allgather(std::span<std::byte> buf)  in place: buf holds size() blocks of equal length;
///                                          on entry block rank() is this device's, on return
///                                          block r is device r's (all_gather; MPI_Allgather).
///   c.reduce_scatter_sum(std::span<const T> in, std::span<T> out)   in holds size() blocks of
///                                          out.size() elements; out = the sum over devices of
///                                          their block rank() (psum_scatter;
///                                          MPI_Reduce_scatter_block), T any `reducible` type.
///   c.sendrecv(std::span<const std::byte> send, int dest, std::span<std::byte> recv, int source)
///                                          sends `send` to device dest and receives `recv` from
///                                          device source, both of the same length on every
///                                          device; -1 for no dest or no source (ppermute;
///                                          MPI_Sendrecv).
///
/// A group that can start a sum and finish it later (grove::mpi::Communicator) also has
/// `c.iallreduce_sum(std::span<T> buf)` (starts it), `c.progress()`, `c.wait_all()` (every started
/// sum complete) and `c.overlap()`: when that is true, parallel::train_step starts the weight
/// matrices' sums while the backward pass goes on (grove/parallel/detail/overlap.hpp).
template <class C>
concept device_group = requires(C& c, const C& cc, std::span<float> f, std::span<double> d,
                                std::span<std::uint64_t> u, std::span<std::byte> b, int root) {
  { cc.rank() } -> std::convertible_to<int>;
  { cc.size() } -> std::convertible_to<int>;
  c.allreduce_sum(f);
  c.allreduce_sum(d);
  c.allreduce_max(u);
  c.broadcast(b, root);
};

/// The former name of device_group, kept for one release (a concept cannot be marked deprecated).
/// It read like grove::mpi::Communicator, which is one model of it.
template <class C>
concept communicator = device_group<C>;

/// Raised on a LocalDevices device that waits in a collective which can no longer complete,
/// because another device failed or returned from its function without calling it. The message
/// names that device and why; LocalDevices::run rethrows the failing device's own exception.
class aborted_error : public std::runtime_error, public grove::error {
 public:
  using std::runtime_error::runtime_error;
  const char* what() const noexcept override { return std::runtime_error::what(); }
};
using aborted [[deprecated("grove: use grove::parallel::aborted_error")]] = aborted_error;

/// How the pytree collectives move a tree, and the memory they move it through. A leaf's
/// contiguous run of elements of at least `inplace_bytes()` (256 KiB unless set) is reduced or
/// broadcast where it is, without a copy, in pieces of at most `bucket_bytes()` (32 MiB unless
/// set); all smaller runs are packed, in leaf order, into buckets of `bucket_bytes()` in this
/// staging memory (one collective per bucket). Staging memory is 64-byte aligned, grows to the
/// largest bucket it has held and is then reused, so that collectives allocate nothing after the
/// first call. A network's weight matrices thus move without a copy, and its biases together in
/// one small message: never one message per small leaf.
class Staging {
 public:
  static constexpr std::size_t default_bucket_bytes = std::size_t{32} << 20;    // 32 MiB
  static constexpr std::size_t default_inplace_bytes = std::size_t{256} << 10;  // 256 KiB

  Staging() = default;
  Staging(const Staging& other)  // a copy has the settings, not the memory
      : bucket_bytes_(other.bucket_bytes_), inplace_bytes_(other.inplace_bytes_) {}
  Staging& operator=(const Staging& other) {
    bucket_bytes_ = other.bucket_bytes_;
    inplace_bytes_ = other.inplace_bytes_;
    return *this;
  }
  Staging(Staging&&) noexcept = default;
  Staging& operator=(Staging&&) noexcept = default;
  ~Staging() = default;

  /// Room for at least `count` objects of T, 64-byte aligned (allocates only when it must grow).
  template <class T>
  T* get(std::size_t count) {
    static_assert(std::is_trivially_copyable_v<T>);
    const std::size_t bytes = count * sizeof(T);
    if (bytes > capacity_) {
      data_.reset();
      capacity_ = 0;
      data_.reset(static_cast<std::byte*>(::operator new (bytes, std::align_val_t{64})));
      capacity_ = bytes;
    }
    return reinterpret_cast<T*>(data_.get());
  }

  /// Bytes held.
  std::size_t capacity() const { return capacity_; }

  /// The largest message of one collective (32 MiB unless set).
  std::size_t bucket_bytes() const { return bucket_bytes_; }
  /// The smallest contiguous run that moves without a copy (256 KiB unless set).
  std::size_t inplace_bytes() const { return inplace_bytes_; }

  /// Sets the bucket size; at least 64 bytes. Every device of a group must use the same settings
  /// (the collectives check it, with the trees' structures).
  void set_bucket_bytes(std::size_t bytes) {
    if (bytes < 64)
      throw ::grove::argument_error(
          "grove::parallel::Staging::set_bucket_bytes: a bucket needs at "
          "least 64 bytes, got " +
          std::to_string(bytes));
    bucket_bytes_ = bytes;
  }
  /// Sets the size from which a contiguous run moves without a copy; 0 moves every run where it
  /// is, SIZE_MAX packs everything into buckets.
  void set_inplace_bytes(std::size_t bytes) { inplace_bytes_ = bytes; }

 private:
  struct Free {
    void operator()(std::byte* p) const { ::operator delete (p, std::align_val_t{64}); }
  };
  std::unique_ptr<std::byte, Free> data_;
  std::size_t capacity_ = 0;
  std::size_t bucket_bytes_ = default_bucket_bytes;
  std::size_t inplace_bytes_ = default_inplace_bytes;
};

namespace detail {

// A short code for an element type, which the agreement check hashes and LocalDevices compares.
template <class T>
constexpr std::uint64_t scalar_code() {
  const std::uint64_t kind = std::is_floating_point_v<T> ? 'f' : std::is_signed_v<T> ? 'i' : 'u';
  return (kind << 8) | sizeof(T);
}

}  // namespace detail
}  // namespace grove::parallel
