// grove/data/batches.hpp: an epoch of shuffled mini-batches, in JAX's order, gathered into
// buffers that are reused (nothing is allocated per batch), optionally split over devices and
// gathered ahead on a background thread.
//
//   for (int epoch = 1; epoch <= epochs; ++epoch)
//     for (const auto& batch : data::batches(train, 128, data::epoch_key(key, epoch)))
//       nn::train_step(model, params, batch.inputs, batch.targets, loss, opt, state, work);
//
// The order of an epoch is random::permutation(key, n): a Python program that draws
// jax.random.permutation with the same key visits the examples in the same order.
#pragma once

#include <Eigen/Core>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "grove/data/dataset.hpp"
#include "grove/detail/shard.hpp"
#include "grove/detail/threads.hpp"
#include "grove/error.hpp"
#include "grove/random/distributions.hpp"
#include "grove/random/key.hpp"
#include "grove/tree.hpp"

namespace grove::data {

/// Where a run stands in its data: the epoch (as the caller counts them) and the number of
/// batches of it already trained on. A pytree node (key paths `epoch` and `batch`), so that a
/// checkpoint saves it beside the parameters, and a resumed run passes `batch` as
/// batch_options::start to continue the epoch exactly where it stopped.
struct position {
  std::int64_t epoch = 0;
  std::int64_t batch = 0;
  friend bool operator==(const position&, const position&) = default;
};
GROVE_NODE(position, epoch, batch);

/// The key of epoch `epoch` drawn from a run's data key: random::fold_in(key, epoch), so that
/// every epoch has its own order and any one of them can be drawn again alone.
inline random::Key epoch_key(const random::Key& key, std::int64_t epoch) {
  if (epoch < 0 || epoch > 0xFFFFFFFFll)
    throw argument_error("grove::data::epoch_key: epoch " + std::to_string(epoch) +
                         " is outside [0, 2^32)");
  return random::fold_in(key, static_cast<std::uint32_t>(epoch));
}

/// How an epoch is cut into batches. Defaults: every example once, the last batch short when
/// batch_size does not divide n, the whole batch on this device, gathered on demand.
struct batch_options {
  /// Drop the last batch when it is short (jax/grain's drop_remainder, torch's drop_last).
  bool drop_remainder = false;
  /// The first batch to give: a run resumed from position{epoch, b} passes b (0 <= start <= the
  /// number of batches; start == that number gives an empty epoch).
  Eigen::Index start = 0;
  /// This device's share of every batch: shard_index of shard_count contiguous parts, in order,
  /// their sizes differing by at most one (the first batch_size % shard_count take one more),
  /// as grove::parallel::shard splits a batch. Each device reads only its own columns.
  int shard_index = 0;
  int shard_count = 1;
  /// Gather the next batch on a background thread while the caller works on the current one
  /// (two buffers instead of one).
  bool prefetch = false;
};

/// One batch of an epoch: this device's examples of it, as views of a buffer that stays valid
/// until the loop moves on. `inputs` is features x m, `targets` m labels or targets x m, where
/// m is this shard's size (`size` over all shards).
template <class T, class Y>
struct Batch {
  Eigen::Map<const Matrix<T>> inputs;
  Eigen::Map<const Y> targets;
  /// The batch's number in the epoch, from 0 (start included).
  Eigen::Index index = 0;
  /// Examples in the whole batch, every shard together.
  Eigen::Index size = 0;
  /// The first example of this shard within the batch.
  Eigen::Index offset = 0;
};

namespace detail {

// A batch's columns gathered: inputs features x capacity, targets likewise.
template <class T, class Y>
struct batch_buffer {
  Matrix<T> inputs;
  Y targets;
  Eigen::Index batch = -1, size = 0, offset = 0, count = 0;
};

}  // namespace detail

/// An epoch of batches of a dataset, to iterate once with a range-for (each begin() starts the
/// epoch again). It holds a reference to the dataset, which must outlive it. Build it with
/// data::batches.
template <class T, class Y>
class Batches {
 public:
  using batch_type = Batch<T, Y>;
  /// A function the batches go through once gathered (standardisation, augmentation...): it
  /// receives this shard's inputs and targets and may change them in place.
  using transform_type = std::function<void(Eigen::Ref<Matrix<T>>, Eigen::Ref<Y>)>;

  Batches(const Dataset<T, Y>& d, Eigen::Index batch_size, const random::Key& key,
          batch_options options = {}, transform_type transform = {})
      : data_(&d), batch_size_(batch_size), options_(options), transform_(std::move(transform)) {
    constexpr const char* who = "grove::data::batches";
    check_dataset(d, who);
    if (d.size() == 0) throw argument_error(std::string(who) + ": the dataset has no examples");
    if (batch_size < 1 || batch_size > d.size())
      throw argument_error(std::string(who) + ": a batch size of " + std::to_string(batch_size) +
                           " does not fit a dataset of " + std::to_string(d.size()) +
                           " examples (it must be between 1 and the dataset's size)");
    if (options.shard_count < 1 || options.shard_index < 0 ||
        options.shard_index >= options.shard_count)
      throw argument_error(std::string(who) + ": shard " + std::to_string(options.shard_index) +
                           " of " + std::to_string(options.shard_count) +
                           " is no shard (0 <= shard_index < shard_count)");
    const Eigen::Index n = d.size();
    count_ = options.drop_remainder ? n / batch_size : (n + batch_size - 1) / batch_size;
    if (options.start < 0 || options.start > count_)
      throw argument_error(std::string(who) + ": start " + std::to_string(options.start) +
                           " is outside the epoch's " + std::to_string(count_) + " batches");
    order_ = random::permutation(key, n);
    const Eigen::Index capacity =
        grove::detail::shard_of(batch_size, options.shard_index, options.shard_count).size;
    for (auto& b : buffers_) {
      b.inputs.resize(d.inputs.rows(), capacity);
      if constexpr (is_labels_v<Y>)
        b.targets.resize(capacity);
      else
        b.targets.resize(d.targets.rows(), capacity);
      if (!options.prefetch) break;  // one buffer is enough without a worker
    }
  }
  Batches(const Dataset<T, Y>&&, Eigen::Index, const random::Key&, batch_options = {},
          transform_type = {}) = delete;  // the dataset must outlive its batches
  Batches(const Batches&) = delete;
  Batches& operator=(const Batches&) = delete;
  ~Batches() { stop_worker(); }

  /// Batches in the epoch (start included): n / batch_size rounded up, or down with
  /// drop_remainder.
  Eigen::Index count() const { return count_; }
  Eigen::Index batch_size() const { return batch_size_; }
  /// The epoch's order of examples: random::permutation(key, n).
  const Eigen::Matrix<std::int32_t, Eigen::Dynamic, 1>& order() const { return order_; }

  class iterator {
   public:
    using value_type = batch_type;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    const batch_type& operator*() const { return *owner_->current_; }
    const batch_type* operator->() const { return &*owner_->current_; }
    iterator& operator++() {
      owner_->advance();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, std::default_sentinel_t) { return it.at_end(); }

   private:
    bool at_end() const { return owner_ == nullptr || !owner_->current_.has_value(); }
    friend class Batches;
    explicit iterator(Batches* owner) : owner_(owner) {}
    Batches* owner_ = nullptr;
  };

  /// Starts (or restarts) the epoch at options.start and gathers its first batch.
  iterator begin() {
    stop_worker();
    next_ = options_.start;
    if (options_.prefetch && next_ < count_) start_worker();
    advance();
    return iterator(this);
  }
  std::default_sentinel_t end() const { return {}; }

 private:
  // Fills `b` with batch `batch`'s shard.
  void gather(detail::batch_buffer<T, Y>& b, Eigen::Index batch) const {
    const Eigen::Index n = data_->size();
    const Eigen::Index first = batch * batch_size_;
    const Eigen::Index size = std::min(batch_size_, n - first);
    const auto mine = grove::detail::shard_of(size, options_.shard_index, options_.shard_count);
    // Copying columns from all over a large dataset waits on memory more than it uses its
    // bandwidth, so the threads that train share it too (not the prefetching worker, which runs
    // beside them); a small batch stays on one thread.
    const bool large = mine.size * data_->inputs.rows() >= Eigen::Index{1} << 15;
    const int threads = options_.prefetch || !large ? 1 : grove::detail::max_threads();
    grove::detail::parallel(threads, [&](int tid, int nt) {
      const auto part = grove::detail::share(mine.size, tid, nt, 8);
      for (Eigen::Index j = part.begin; j < part.end; ++j) {
        const Eigen::Index i = order_(first + mine.begin + j);
        b.inputs.col(j) = data_->inputs.col(i);
        detail::copy_target(data_->targets, i, b.targets, j);
      }
    });
    b.batch = batch;
    b.size = size;
    b.offset = mine.begin;
    b.count = mine.size;
    if (transform_) {
      if constexpr (is_labels_v<Y>)
        transform_(b.inputs.leftCols(mine.size), b.targets.head(mine.size));
      else
        transform_(b.inputs.leftCols(mine.size), b.targets.leftCols(mine.size));
    }
  }

  void present(const detail::batch_buffer<T, Y>& b) {
    const Eigen::Index rows = is_labels_v<Y> ? b.count : b.targets.rows();
    const Eigen::Index cols = is_labels_v<Y> ? 1 : b.count;
    current_.emplace(
        batch_type{Eigen::Map<const Matrix<T>>(b.inputs.data(), b.inputs.rows(), b.count),
                   Eigen::Map<const Y>(b.targets.data(), rows, cols), b.batch, b.size, b.offset});
  }

  // Moves to batch next_ (releasing the current one) or to the end.
  void advance() {
    current_.reset();
    if (next_ >= count_) return;
    const Eigen::Index batch = next_++;
    if (!options_.prefetch) {
      gather(buffers_[0], batch);
      present(buffers_[0]);
      return;
    }
    std::unique_lock lock(mutex_);
    released_ = batch;  // the caller is done with every batch before this one
    changed_.notify_all();
    changed_.wait(lock, [&] { return ready_ > batch || failure_; });
    if (failure_) std::rethrow_exception(failure_);
    present(buffers_[batch % 2]);
  }

  // The worker gathers batch b into buffer b % 2 once the caller has released batch b - 2.
  void start_worker() {
    stopping_ = false;
    failure_ = nullptr;
    ready_ = released_ = next_;
    worker_ = std::thread([this, first = next_] {
      try {
        for (Eigen::Index b = first; b < count_; ++b) {
          {
            std::unique_lock lock(mutex_);
            changed_.wait(lock, [&] { return stopping_ || b < released_ + 2; });
            if (stopping_) return;
          }
          gather(buffers_[b % 2], b);
          std::lock_guard lock(mutex_);
          ready_ = b + 1;
          changed_.notify_all();
        }
      } catch (...) {
        std::lock_guard lock(mutex_);
        failure_ = std::current_exception();
        changed_.notify_all();
      }
    });
  }

  void stop_worker() {
    if (!worker_.joinable()) return;
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      changed_.notify_all();
    }
    worker_.join();
  }

  const Dataset<T, Y>* data_;
  Eigen::Index batch_size_;
  batch_options options_;
  transform_type transform_;
  Eigen::Index count_ = 0;
  Eigen::Matrix<std::int32_t, Eigen::Dynamic, 1> order_;
  detail::batch_buffer<T, Y> buffers_[2];
  std::optional<batch_type> current_;
  Eigen::Index next_ = 0;

  // The prefetching worker and what it shares with the caller.
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable changed_;
  Eigen::Index ready_ = 0;     // batches before this one are gathered
  Eigen::Index released_ = 0;  // the caller has finished with the batches before this one
  bool stopping_ = false;
  std::exception_ptr failure_;
};

/// The batches of one epoch of `d`, in the order random::permutation(key, n), batch_size
/// examples each (the last one short unless options.drop_remainder); see batch_options for
/// resuming, sharding and prefetching. `transform`, when given, runs on each batch once it is
/// gathered (on the worker thread when prefetching). argument_error for an empty dataset, a
/// batch size outside [1, n], a start past the epoch or a shard that does not exist;
/// shape_error when the inputs and targets disagree.
template <class T, class Y>
Batches<T, Y> batches(const Dataset<T, Y>& d, Eigen::Index batch_size, const random::Key& key,
                      batch_options options = {},
                      typename Batches<T, Y>::transform_type transform = {}) {
  return Batches<T, Y>(d, batch_size, key, options, std::move(transform));
}
template <class T, class Y>
Batches<T, Y> batches(const Dataset<T, Y>&&, Eigen::Index, const random::Key&, batch_options = {},
                      typename Batches<T, Y>::transform_type = {}) = delete;

}  // namespace grove::data
