// grove/parallel/mpi.hpp: grove's pytree collectives across processes and machines, over MPI (Open
// MPI, MPICH, ...). The only grove header that needs MPI: link MPI::MPI_CXX (CMake's FindMPI).
//
//   int main(int argc, char** argv) {
//     grove::mpi::Environment env(argc, argv);   // MPI_Init ... MPI_Finalize
//     grove::mpi::Communicator world;            // MPI_COMM_WORLD
//     auto params = grove::parallel::broadcast(init(...), world, 0);
//     auto mean = grove::parallel::pmean(grads, world);
//   }
//
//   mpirun -np 2 ./program     (as root, Open MPI also wants --allow-run-as-root; with more ranks
//                               than cores, --oversubscribe)
#pragma once

// grove uses MPI's C API only: skip the C++ bindings that MPI-3 removed (Open MPI's and MPICH's
// mpi.h include them by default, and they do not compile cleanly with -Wextra -Werror).
#if !defined(OMPI_SKIP_MPICXX)
#define OMPI_SKIP_MPICXX 1
#endif
#if !defined(MPICH_SKIP_MPICXX)
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "grove/error.hpp"
#include "grove/parallel/collectives.hpp"
#include "grove/parallel/communicator.hpp"

namespace grove::mpi {

/// An MPI call failed; the message names the call and MPI's own error string.
class mpi_error : public std::runtime_error, public grove::error {
 public:
  using std::runtime_error::runtime_error;
  const char* what() const noexcept override { return std::runtime_error::what(); }
};

namespace detail {

[[noreturn]] inline void fail(const char* call, int rc) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw mpi_error(std::string("grove::mpi: ") + call +
                  " failed: " + std::string(text, static_cast<std::size_t>(len)));
}
inline void check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) fail(call, rc);
}

/// The MPI datatype of T.
template <class T>
MPI_Datatype datatype() {
  static_assert(parallel::reducible<T>, "grove::mpi: no MPI datatype for this element type");
  if constexpr (std::is_same_v<T, float>)
    return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>)
    return MPI_DOUBLE;
  else if constexpr (std::is_same_v<T, long double>)
    return MPI_LONG_DOUBLE;
  else if constexpr (std::is_signed_v<T>) {
    if constexpr (sizeof(T) == 1)
      return MPI_INT8_T;
    else if constexpr (sizeof(T) == 2)
      return MPI_INT16_T;
    else if constexpr (sizeof(T) == 4)
      return MPI_INT32_T;
    else
      return MPI_INT64_T;
  } else {
    if constexpr (sizeof(T) == 1)
      return MPI_UINT8_T;
    else if constexpr (sizeof(T) == 2)
      return MPI_UINT16_T;
    else if constexpr (sizeof(T) == 4)
      return MPI_UINT32_T;
    else
      return MPI_UINT64_T;
  }
}

// MPI counts are ints: larger buffers go in pieces.
template <class T, class F>
void in_pieces(T* data, std::size_t count, F&& f) {
  constexpr std::size_t piece = std::size_t{1} << 30;
  do {
    const std::size_t n = std::min(count, piece);
    f(data, static_cast<int>(n));
    data += n;
    count -= n;
  } while (count > 0);
}

}  // namespace detail

/// MPI for the program's lifetime: initializes it (MPI_Init_thread, asking for
/// MPI_THREAD_SERIALIZED: threads may compute, and one thread at a time calls MPI, the main
/// thread or, under grove::mpi::GlobalDevice, a local device's) unless it already is,
/// and finalizes it at the end if it initialized it. If it is destroyed while an exception
/// propagates on this rank, it calls MPI_Abort instead of MPI_Finalize when there are other
/// ranks: they would otherwise wait forever in their next collective.
class Environment {
 public:
  Environment() : Environment(nullptr, nullptr) {}
  Environment(int& argc, char**& argv) : Environment(&argc, &argv) {}
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  ~Environment() {
    if (!owns_) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (std::uncaught_exceptions() > exceptions_) {
      int size = 1;
      MPI_Comm_size(MPI_COMM_WORLD, &size);
      if (size > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
  }

  /// The thread support MPI provides (MPI_THREAD_SINGLE ... MPI_THREAD_MULTIPLE).
  int thread_level() const { return level_; }

  /// Whether MPI is initialized and not yet finalized.
  static bool active() {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
  }

  /// Ends every rank of MPI_COMM_WORLD with `code` (MPI_Abort): what a rank that fails on its
  /// own should do, so that the others do not wait for it forever.
  [[noreturn]] static void abort(int code) {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::abort();
  }

 private:
  Environment(int* argc, char*** argv) : exceptions_(std::uncaught_exceptions()) {
    int init = 0;
    MPI_Initialized(&init);
    if (init) {
      MPI_Query_thread(&level_);
      return;
    }
    detail::check(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &level_), "MPI_Init_thread");
    owns_ = true;
  }

  bool owns_ = false;
  int level_ = MPI_THREAD_SINGLE;
  int exceptions_ = 0;
};

/// A grove::parallel::communicator over an MPI communicator (MPI_COMM_WORLD by default), which it
/// uses but does not own. Every rank must call the collectives in the same order, as with MPI's
/// own. Reductions are MPI_Allreduce's: every rank gets the same bits, and with a fixed number of
/// ranks and buffer size the reduction order is fixed too (Open MPI chooses its algorithm from
/// those alone), so reruns repeat bit for bit; with 2 ranks the sum is x0 + x1, the same bits as
/// LocalDevices(2).
class Communicator {
 public:
  Communicator() : Communicator(MPI_COMM_WORLD) {}
  explicit Communicator(MPI_Comm comm) : comm_(comm) {
    if (!Environment::active())
      throw ::grove::usage_error(
          "grove::mpi::Communicator: MPI is not initialized (create a grove::mpi::Environment "
          "first, e.g. `grove::mpi::Environment env(argc, argv);` at the top of main)");
    detail::check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    detail::check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// The MPI communicator.
  MPI_Comm native() const { return comm_; }

  /// In place: buf = the sum over ranks of buf (MPI_Allreduce, MPI_IN_PLACE, MPI_SUM). Signed
  /// integers wrap around, modulo 2^bits, as JAX's psum does and as LocalDevices adds them: MPI
  /// adds them as their unsigned type (the same bits), whose overflow is defined in C.
  template <parallel::reducible T>
  void allreduce_sum(std::span<T> buf) {
    using Sum = std::conditional_t<std::is_integral_v<T> && std::is_signed_v<T>,
                                   std::make_unsigned<T>, std::type_identity<T>>;
    detail::in_pieces(buf.data(), buf.size(), [&](T* p, int n) {
      detail::check(
          MPI_Allreduce(MPI_IN_PLACE, p, n, detail::datatype<typename Sum::type>(), MPI_SUM, comm_),
          "MPI_Allreduce");
    });
  }

  /// Starts, in place, buf = the sum over ranks of buf (MPI_Iallreduce, MPI_IN_PLACE, MPI_SUM),
  /// as allreduce_sum computes it; the sum is there once wait_all() returns, and buf must be left
  /// alone until then. Every rank must start the same sums in the same order, among its other
  /// collectives. parallel::train_step starts the gradients' sums this way while the backward
  /// pass goes on (see overlap()).
  template <parallel::reducible T>
  void iallreduce_sum(std::span<T> buf) {
    using Sum = std::conditional_t<std::is_integral_v<T> && std::is_signed_v<T>,
                                   std::make_unsigned<T>, std::type_identity<T>>;
    detail::in_pieces(buf.data(), buf.size(), [&](T* p, int n) {
      MPI_Request request = MPI_REQUEST_NULL;
      detail::check(MPI_Iallreduce(MPI_IN_PLACE, p, n, detail::datatype<typename Sum::type>(),
                                   MPI_SUM, comm_, &request),
                    "MPI_Iallreduce");
      requests_.push_back(request);
    });
  }

  /// Lets the sums that iallreduce_sum started go on (MPI_Testall): MPI moves a non-blocking
  /// collective's messages inside MPI's calls, so a rank that computes meanwhile calls this
  /// between pieces of its work.
  void progress() {
    if (requests_.empty()) return;
    int done = 0;
    detail::check(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done,
                              MPI_STATUSES_IGNORE),
                  "MPI_Testall");
    if (done) requests_.clear();
  }

  /// Waits until every sum that iallreduce_sum started is complete (MPI_Waitall).
  void wait_all() {
    if (requests_.empty()) return;
    const int rc =
        MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    requests_.clear();
    detail::check(rc, "MPI_Waitall");
  }

  /// Whether parallel::train_step starts summing the gradients while the backward pass goes on:
  /// each weight matrix (each leaf of at least staging().inplace_bytes()) is started with
  /// iallreduce_sum as soon as the pass has finished it, and the pass lets MPI move it between its
  /// products; the rest is summed at the end (docs/parallel.md: "The reduction overlapping the
  /// backward pass"). Off by default: MPI moves a non-blocking collective only inside its calls,
  /// so the overlap is what the pass's few calls let through, and Open MPI's default algorithm for
  /// MPI_Iallreduce on a few ranks is slower than MPI_Allreduce's (its
  /// coll_libnbc_iallreduce_algorithm parameter chooses another). On 2 ranks each element's sum is
  /// x0 + x1 either way, the same bits; on more, MPI may order a sum otherwise (the same on every
  /// rerun). Every rank must use the same setting (train_step checks it).
  bool overlap() const { return overlap_; }
  void set_overlap(bool on) { overlap_ = on; }

  /// In place: the elementwise maximum over ranks.
  void allreduce_max(std::span<std::uint64_t> buf) {
    detail::in_pieces(buf.data(), buf.size(), [&](std::uint64_t* p, int n) {
      detail::check(MPI_Allreduce(MPI_IN_PLACE, p, n, MPI_UINT64_T, MPI_MAX, comm_),
                    "MPI_Allreduce");
    });
  }

  /// In place: buf = root's buf (MPI_Bcast).
  void broadcast(std::span<std::byte> buf, int root) {
    if (root < 0 || root >= size_)
      throw ::grove::argument_error("grove::mpi::Communicator::broadcast: root " +
                                    std::to_string(root) + " is not a rank (size " +
                                    std::to_string(size_) + ")");
    detail::in_pieces(buf.data(), buf.size(), [&](std::byte* p, int n) {
      detail::check(MPI_Bcast(p, n, MPI_BYTE, root, comm_), "MPI_Bcast");
    });
  }

  /// In place: buf holds size() blocks of equal length; block rank() is this rank's, and on
  /// return block r is rank r's (MPI_Allgather, MPI_IN_PLACE).
  void allgather(std::span<std::byte> buf) {
    const auto n = static_cast<std::size_t>(size_);
    if (buf.size() % n != 0)
      throw ::grove::argument_error(
          "grove::mpi::Communicator::allgather: " + std::to_string(buf.size()) + " bytes are not " +
          std::to_string(n) + " equal blocks");
    const std::size_t block = buf.size() / n;
    if (block <= static_cast<std::size_t>(INT_MAX)) {
      detail::check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf.data(),
                                  static_cast<int>(block), MPI_BYTE, comm_),
                    "MPI_Allgather");
      return;
    }
    // A block longer than an int counts: in windows, each rank's window received as one element
    // of a type whose extent is the block, so that it lands in that rank's block.
    constexpr std::size_t window = std::size_t{1} << 30;
    for (std::size_t lo = 0; lo < block; lo += window) {
      const int w = static_cast<int>(std::min(window, block - lo));
      MPI_Datatype piece, spaced;
      detail::check(MPI_Type_contiguous(w, MPI_BYTE, &piece), "MPI_Type_contiguous");
      detail::check(MPI_Type_create_resized(piece, 0, static_cast<MPI_Aint>(block), &spaced),
                    "MPI_Type_create_resized");
      MPI_Type_free(&piece);
      detail::check(MPI_Type_commit(&spaced), "MPI_Type_commit");
      const int rc =
          MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf.data() + lo, 1, spaced, comm_);
      MPI_Type_free(&spaced);
      detail::check(rc, "MPI_Allgather");
    }
  }

  /// in holds size() blocks of out.size() elements; out = the sum over ranks of their block
  /// rank() (MPI_Reduce_scatter_block, MPI_SUM; signed integers wrap around as allreduce_sum's).
  template <parallel::reducible T>
  void reduce_scatter_sum(std::span<const T> in, std::span<T> out) {
    const auto n = static_cast<std::size_t>(size_);
    if (in.size() != out.size() * n)
      throw ::grove::argument_error(
          "grove::mpi::Communicator::reduce_scatter_sum: in has " + std::to_string(in.size()) +
          " elements, not " + std::to_string(n) + " blocks of out's " + std::to_string(out.size()));
    using Sum = std::conditional_t<std::is_integral_v<T> && std::is_signed_v<T>,
                                   std::make_unsigned<T>, std::type_identity<T>>;
    const MPI_Datatype type = detail::datatype<typename Sum::type>();
    const std::size_t k = out.size();
    if (k <= static_cast<std::size_t>(INT_MAX)) {
      detail::check(MPI_Reduce_scatter_block(in.data(), out.data(), static_cast<int>(k), type,
                                             MPI_SUM, comm_),
                    "MPI_Reduce_scatter_block");
      return;
    }
    // Longer blocks: in windows, each rank's window copied next to the others'.
    constexpr std::size_t window = std::size_t{1} << 28;
    std::vector<T> part(window * n);
    for (std::size_t lo = 0; lo < k; lo += window) {
      const std::size_t w = std::min(window, k - lo);
      for (std::size_t r = 0; r < n; ++r)
        std::copy_n(in.data() + r * k + lo, w, part.data() + r * w);
      detail::check(MPI_Reduce_scatter_block(part.data(), out.data() + lo, static_cast<int>(w),
                                             type, MPI_SUM, comm_),
                    "MPI_Reduce_scatter_block");
    }
  }

  /// Sends `send` to rank dest and receives `recv` from rank source (-1: none), both of the
  /// same length on every rank (MPI_Sendrecv).
  void sendrecv(std::span<const std::byte> send, int dest, std::span<std::byte> recv, int source) {
    if (dest < -1 || dest >= size_ || source < -1 || source >= size_ || send.size() != recv.size())
      throw ::grove::argument_error(
          "grove::mpi::Communicator::sendrecv: dest " + std::to_string(dest) + " and source " +
          std::to_string(source) + " must be ranks or -1 (size " + std::to_string(size_) +
          "), and send and recv of one length (" + std::to_string(send.size()) + " and " +
          std::to_string(recv.size()) + " bytes)");
    constexpr int tag = 0x67726f;  // grove's own tag
    const int to = dest < 0 ? MPI_PROC_NULL : dest, from = source < 0 ? MPI_PROC_NULL : source;
    constexpr std::size_t window = std::size_t{1} << 30;
    std::size_t lo = 0;
    do {
      const int w = static_cast<int>(std::min(window, send.size() - lo));
      detail::check(MPI_Sendrecv(send.data() + lo, w, MPI_BYTE, to, tag, recv.data() + lo, w,
                                 MPI_BYTE, from, tag, comm_, MPI_STATUS_IGNORE),
                    "MPI_Sendrecv");
      lo += static_cast<std::size_t>(w);
    } while (lo < send.size());
  }

  void barrier() { detail::check(MPI_Barrier(comm_), "MPI_Barrier"); }

  /// The number of ranks of this communicator on this machine (a collective call): with C cores,
  /// each rank may use C / local_size() threads.
  int local_size() const {
    MPI_Comm shared;
    detail::check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &shared),
                  "MPI_Comm_split_type");
    int n = 1;
    MPI_Comm_size(shared, &n);
    MPI_Comm_free(&shared);
    return n;
  }

  /// The staging memory grove's pytree collectives reuse on this rank.
  parallel::Staging& staging() { return staging_; }

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  parallel::Staging staging_;
  std::vector<MPI_Request> requests_;  // the sums iallreduce_sum started, until wait_all()
  bool overlap_ = false;
};

}  // namespace grove::mpi
