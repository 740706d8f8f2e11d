// grove/parallel/detail/overlap.hpp: parallel::train_step's gradient reduction overlapping the
// backward pass, on a group that can start a sum and finish it later (grove::mpi::Communicator's
// iallreduce_sum, progress, wait_all).
//
// The reduction is the one of reduce_and_step (collectives.hpp's reduce_runs): each device's
// gradients times its shard's size, summed over the devices, divided by the batch's size; the
// shard sizes and losses ride in the bucket with the small leaves. What changes is when the long
// runs (the weight matrices: runs of at least the staging's in-place size) move. They are cut
// into pieces of at most a bucket, in the order the backward pass finishes them (the tree's runs
// in reverse leaf order, the last layer's first), and a piece is started with iallreduce_sum as
// soon as the pass has told (nn::grad_listener) that all of it is final and every piece before it
// has been started. So every device starts the same sums in the same order, whatever it has
// computed when: a device with an empty shard, which runs no pass, starts them all at the end.
// After the pass: the pieces not started yet, the bucket of the small leaves with the header
// (blocking, as in reduce_runs), then the wait for the started sums and the division. Each
// element's sum is the one reduce_runs computes (x0 + x1 on 2 devices: the same bits).
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstddef>
#include <exception>
#include <span>
#include <vector>

#include "grove/error.hpp"
#include "grove/nn/grad_listener.hpp"
#include "grove/parallel/collectives.hpp"
#include "grove/parallel/communicator.hpp"

namespace grove::parallel::detail {

// A group whose sums of T can be started and finished later.
template <class C, class T>
concept overlapping_group = device_group<C> && requires(C& c, const C& cc, std::span<T> buf) {
  c.iallreduce_sum(buf);
  c.progress();
  c.wait_all();
  { cc.overlap() } -> std::convertible_to<bool>;
};

// A piece of a long run: started once `covered` reaches `size`.
template <class T>
struct overlap_piece {
  T* data;
  std::size_t size;
  std::size_t covered;
};

template <class T>
std::vector<overlap_piece<T>>& thread_overlap_pieces() {
  thread_local std::vector<overlap_piece<T>> pieces;  // reused: a step allocates nothing
  return pieces;
}

template <class T, class C>
class overlapped_reduction final : public nn::grad_listener<T> {
 public:
  // grads must have their final shapes (the pass must not reallocate them); in_scale is this
  // device's shard size.
  template <class Grads>
  overlapped_reduction(C& comm, Staging& staging, Grads& grads, T in_scale)
      : comm_(comm), pieces_(thread_overlap_pieces<T>()), in_scale_(in_scale) {
    const std::size_t bucket = std::max<std::size_t>(1, staging.bucket_bytes() / sizeof(T));
    inplace_ = inplace_elements<T>(staging);
    pieces_.clear();
    runs_of<T>(grads, [&](T* run, Eigen::Index n) {
      const auto size = static_cast<std::size_t>(n);
      if (!long_run(size)) return;
      // This run's pieces, in order, go before those of the runs already listed.
      const std::size_t count = (size + bucket - 1) / bucket;
      pieces_.insert(pieces_.begin(), count, overlap_piece<T>{});
      for (std::size_t i = 0; i < count; ++i) {
        const std::size_t at = i * bucket;
        pieces_[i] = {run + at, std::min(bucket, size - at), 0};
      }
    });
  }
  overlapped_reduction(const overlapped_reduction&) = delete;
  overlapped_reduction& operator=(const overlapped_reduction&) = delete;

  // Whether a run moves where it is (and so may start early), as reduce_runs decides it.
  bool long_run(std::size_t size) const { return size >= inplace_; }

  void ready(std::span<T> grads) noexcept override {
    if (!long_run(grads.size())) return;
    const T* const begin = grads.data();
    const T* const end = begin + grads.size();
    for (auto& p : pieces_) {
      const T* const b = std::max<const T*>(p.data, begin);
      const T* const e = std::min<const T*>(p.data + p.size, end);
      if (b < e) p.covered += static_cast<std::size_t>(e - b);
    }
    start_ready();
  }

  void progress() noexcept override {
    if (error_ || started_ == 0) return;
    try {
      comm_.progress();
    } catch (...) {
      error_ = std::current_exception();
    }
  }

  // After the pass (or, for an empty shard, instead of it): starts what is left, reduces the
  // small runs with the header through reduce_runs, waits for the started sums and divides them
  // by on_header's divisor. Rethrows an error kept during the pass, and on_header's own, once
  // every started sum is complete.
  template <class Grads, class OnHeader>
  void finish(Staging& staging, Grads& grads, std::span<T> header, OnHeader&& on_header) {
    for (auto& p : pieces_) p.covered = p.size;
    start_ready();
    T div = T(1);
    std::exception_ptr header_error;
    if (!error_) {
      try {
        reduce_runs<T>(
            comm_, staging,
            [&](auto&& fn) {
              runs_of<T>(grads, [&](T* run, Eigen::Index n) {
                if (!long_run(static_cast<std::size_t>(n))) fn(run, n);
              });
            },
            in_scale_, header,
            [&](std::span<const T> sums) {
              try {
                div = on_header(sums);
              } catch (...) {
                header_error = std::current_exception();
              }
              return div;
            });
      } catch (...) {
        error_ = std::current_exception();
      }
    }
    comm_.wait_all();
    if (error_) std::rethrow_exception(error_);
    if (header_error) std::rethrow_exception(header_error);
    for (const auto& p : pieces_) divide_run(p.data, p.data, p.size, div);
  }

 private:
  // Starts, in order, the pieces that are final and not started yet.
  void start_ready() noexcept {
    if (error_) return;
    try {
      while (started_ < pieces_.size() && pieces_[started_].covered >= pieces_[started_].size) {
        auto& p = pieces_[started_];
        scale_run(p.data, p.data, p.size, in_scale_);
        comm_.iallreduce_sum(std::span<T>(p.data, p.size));
        ++started_;
      }
      if (started_ > 0) comm_.progress();
    } catch (...) {
      error_ = std::current_exception();
    }
  }

  C& comm_;
  std::vector<overlap_piece<T>>& pieces_;
  T in_scale_;
  std::size_t inplace_ = 0;
  std::size_t started_ = 0;
  std::exception_ptr error_;
};

}  // namespace grove::parallel::detail
