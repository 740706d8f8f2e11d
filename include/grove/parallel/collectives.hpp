// grove/parallel/collectives.hpp: JAX's collectives on whole pytrees, over any communicator.
//
//   auto total = grove::parallel::psum(tree, comm);        // lax.psum
//   auto mean  = grove::parallel::pmean(grads, comm);      // lax.pmean
//   params = grove::parallel::broadcast(params, comm, 0);  // every device gets rank 0's params
//
// and the same in place, without allocation after the first call (psum_inplace, pmean_inplace,
// broadcast_inplace). Small leaves move packed together, in leaf order, in buckets of a fixed
// size in the communicator's staging memory (one collective per bucket: never one message per
// leaf); a long contiguous run (a weight matrix) moves where it is, without a copy (see
// grove::parallel::Staging). Before anything moves, the devices check
// that they hold trees of the same structure, leaf types and shapes and are calling the same
// operation; if not, every device raises the same grove::tree_error naming the first difference,
// instead of hanging or mixing up memory.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "grove/error.hpp"
#include "grove/parallel/communicator.hpp"
#include "grove/parallel/detail/agree.hpp"
#include "grove/tree.hpp"
#include "grove/tree/eigen.hpp"

namespace grove::parallel {

namespace detail {

// --- the element types of a tree -----------------------------------------------------------------

template <class List, class T>
struct add_unique;
template <class... Ts, class T>
struct add_unique<grove::detail::type_list<Ts...>, T> {
  using type = std::conditional_t<(std::is_same_v<T, Ts> || ...), grove::detail::type_list<Ts...>,
                                  grove::detail::type_list<Ts..., T>>;
};
template <class Acc, class List>
struct scalars_of_list;
template <class Acc>
struct scalars_of_list<Acc, grove::detail::type_list<>> {
  using type = Acc;
};
template <class Acc, class L, class... Ls>
struct scalars_of_list<Acc, grove::detail::type_list<L, Ls...>> {
  static_assert(collective_leaf<L>(),
                "grove::parallel: every leaf of a tree given to a collective must be an arithmetic "
                "scalar (not bool), or an Eigen dense object with its own memory (Matrix, Array, "
                "Map, Ref) or an Eigen tensor of arithmetic (not bool), Eigen::half or "
                "Eigen::bfloat16 elements");
  using type = typename scalars_of_list<typename add_unique<Acc, leaf_scalar_t<L>>::type,
                                        grove::detail::type_list<Ls...>>::type;
};
// The distinct element types of Tree's leaves, in order of first appearance.
template <class Tree>
using tree_scalars_t = typename scalars_of_list<
    grove::detail::type_list<>,
    grove::detail::leaf_types_t<std::remove_cvref_t<Tree>, grove::detail::no_leaf_pred>>::type;

template <class... S, class F>
void for_each_type(grove::detail::type_list<S...>, F&& f) {
  (f(std::type_identity<S>{}), ...);
}

// --- runs and windows ----------------------------------------------------------------------------

// Calls fn(ptr, n) for the runs of every leaf whose element type is S, in leaf order.
template <class S, class Tree, class Fn>
void runs_of(Tree& tree, Fn&& fn) {
  grove::tree_for_each(
      [&](auto& leaf) {
        if constexpr (std::is_same_v<leaf_scalar_t<decltype(leaf)>, S>) leaf_runs(leaf, fn);
      },
      tree);
}

// Bytes of all leaves.
template <class Tree>
std::size_t bytes_of(const Tree& tree) {
  std::size_t bytes = 0;
  grove::tree_for_each(
      [&](const auto& leaf) {
        byte_runs(leaf, [&](const std::byte*, std::size_t n) { bytes += n; });
      },
      tree);
  return bytes;
}

// For the part of the flat index space [lo, hi) that a run [off, off + n) covers, calls
// fn(run + (b - off), window + (b - lo), count).
template <class P, class Fn>
void overlap(P* run, std::size_t off, std::size_t n, std::size_t lo, std::size_t hi, Fn&& fn) {
  const std::size_t b = std::max(off, lo), e = std::min(off + n, hi);
  if (b < e) fn(run + (b - off), b - lo, e - b);
}

inline Moves moves_of(const Staging& staging) {
  return {staging.bucket_bytes(), staging.inplace_bytes()};
}

// The reduction of the leaves of element type S, whose runs `runs(fn)` lists in leaf order:
//   1. the runs shorter than the in-place size, packed in leaf order after `header` (elements
//      reduced as they are) into buckets in staging memory: for each bucket, copy in (times
//      `in_scale` unless it is 1), sum over the devices, copy back (divided by the divisor);
//      `on_header` sees the header's sums, after the first bucket, and returns the divisor;
//   2. the longer runs, where they are, in pieces of at most a bucket: scaled, summed, divided.
// Every device makes the same calls in the same order: the agreement check has made sure that
// their trees have the same runs.
// The shortest run of S elements that moves where it is: the staging's in-place size, rounded up.
template <class S>
std::size_t inplace_elements(const Staging& staging) {
  return staging.inplace_bytes() / sizeof(S) + (staging.inplace_bytes() % sizeof(S) != 0 ? 1 : 0);
}

// to[0, k) = from[0, k) * in_scale, as a reduction scales a device's part: zeros when in_scale
// is 0 (not 0 * x, which is NaN for x = inf or NaN), a copy when it is 1. from may be to.
template <class S>
void scale_run(const S* from, S* to, std::size_t k, S in_scale) {
  if (in_scale == S(0))
    std::fill_n(to, k, S(0));
  else if (in_scale != S(1))
    for (std::size_t i = 0; i < k; ++i) to[i] = from[i] * in_scale;
  else if (from != to)
    std::memcpy(to, from, k * sizeof(S));
}

// to[0, k) = from[0, k) / div, as a reduction divides the sums (a copy when div is 1). from may
// be to.
template <class S>
void divide_run(const S* from, S* to, std::size_t k, S div) {
  if (div != S(1))
    for (std::size_t i = 0; i < k; ++i) to[i] = from[i] / div;
  else if (from != to)
    std::memcpy(to, from, k * sizeof(S));
}

template <class S, communicator C, class Runs, class OnHeader>
void reduce_runs(C& comm, Staging& staging, Runs&& runs, S in_scale, std::span<S> header,
                 OnHeader&& on_header) {
  const std::size_t h = header.size();
  const std::size_t bucket = std::max<std::size_t>(h + 1, staging.bucket_bytes() / sizeof(S));
  const std::size_t inplace = inplace_elements<S>(staging);
  auto in_place = [&](Eigen::Index n) { return static_cast<std::size_t>(n) >= inplace; };
  auto scale = [&](const S* from, S* to, std::size_t k) { scale_run(from, to, k, in_scale); };
  S div = S(1);
  auto divide = [&](const S* from, S* to, std::size_t k) { divide_run(from, to, k, div); };

  std::size_t packed = h;
  runs([&](const S*, Eigen::Index n) {
    if (!in_place(n)) packed += static_cast<std::size_t>(n);
  });
  if (packed == 0) div = on_header(std::span<const S>{});
  if (packed > 0) {
    S* buf = staging.get<S>(std::min(packed, bucket));
    for (std::size_t lo = 0; lo < packed; lo += bucket) {
      const std::size_t hi = std::min(packed, lo + bucket);
      if (lo == 0) std::copy(header.begin(), header.end(), buf);
      std::size_t off = h;
      runs([&](S* run, Eigen::Index n) {
        if (in_place(n)) return;
        overlap(run, off, static_cast<std::size_t>(n), lo, hi,
                [&](S* from, std::size_t at, std::size_t k) { scale(from, buf + at, k); });
        off += static_cast<std::size_t>(n);
      });
      comm.allreduce_sum(std::span<S>(buf, hi - lo));
      if (lo == 0) {
        std::copy(buf, buf + h, header.begin());
        div = on_header(std::span<const S>(header.data(), h));
      }
      off = h;
      runs([&](S* run, Eigen::Index n) {
        if (in_place(n)) return;
        overlap(run, off, static_cast<std::size_t>(n), lo, hi,
                [&](S* to, std::size_t at, std::size_t k) { divide(buf + at, to, k); });
        off += static_cast<std::size_t>(n);
      });
    }
  }
  runs([&](S* run, Eigen::Index n) {
    if (!in_place(n)) return;
    for (std::size_t b = 0; b < static_cast<std::size_t>(n); b += bucket) {
      const std::size_t k = std::min(bucket, static_cast<std::size_t>(n) - b);
      scale(run + b, run + b, k);
      comm.allreduce_sum(std::span<S>(run + b, k));
      divide(run + b, run + b, k);
    }
  });
}

// The same for a tree's leaves of element type S.
template <class S, communicator C, class Tree, class OnHeader>
void reduce_leaves(C& comm, Staging& staging, Tree& tree, S in_scale, std::span<S> header,
                   OnHeader&& on_header) {
  reduce_runs<S>(
      comm, staging, [&](auto&& fn) { runs_of<S>(tree, fn); }, in_scale, header,
      std::forward<OnHeader>(on_header));
}

// Calls f(comm, staging) with the communicator's staging memory, or a fresh one.
template <device_group C, class F>
decltype(auto) with_staging(C& comm, F&& f) {
  if constexpr (requires {
                  { comm.staging() } -> std::same_as<Staging&>;
                }) {
    return f(comm.staging());
  } else {
    Staging local;
    return f(local);
  }
}

// A tree of plain leaves: Eigen dense objects as their plain objects (a Map as the matrix it
// maps), numbers, tensors and values copied. An Eigen::TensorMap would still point at the same
// memory, so the functional forms, which return a new tree, refuse it (the _inplace ones take it).
template <class Tree>
auto plain_copy(const Tree& tree) {
  return grove::tree_map(
      [](const auto& leaf) {
        using L = std::remove_cvref_t<decltype(leaf)>;
        require_broadcast_leaf<L>();
        if constexpr (::grove::detail::eigen_dense<L>) {
          return typename L::PlainObject(leaf);
        } else {
          static_assert(!tensor_leaf<L> || std::is_default_constructible_v<L>,
                        "grove::parallel: an Eigen::TensorMap leaf would still point at the same "
                        "memory: use the _inplace form");
          return L(leaf);
        }
      },
      tree);
}

// The sum (or mean) over the devices of a tree's leaves of 16-bit float type H: their elements
// in leaf order, in buckets of floats in staging memory, summed in float, divided in float and
// rounded back to H once.
template <class H, device_group C, class Tree>
void reduce_half_leaves(C& comm, Staging& staging, Tree& tree, float div) {
  std::size_t total = 0;
  runs_of<H>(tree, [&](const H*, Eigen::Index n) { total += static_cast<std::size_t>(n); });
  const std::size_t bucket = std::max<std::size_t>(1, staging.bucket_bytes() / sizeof(float));
  float* buf = total > 0 ? staging.get<float>(std::min(total, bucket)) : nullptr;
  for (std::size_t lo = 0; lo < total; lo += bucket) {
    const std::size_t hi = std::min(total, lo + bucket);
    std::size_t off = 0;
    runs_of<H>(tree, [&](H* run, Eigen::Index n) {
      overlap(run, off, static_cast<std::size_t>(n), lo, hi,
              [&](const H* from, std::size_t at, std::size_t k) {
                for (std::size_t i = 0; i < k; ++i) buf[at + i] = static_cast<float>(from[i]);
              });
      off += static_cast<std::size_t>(n);
    });
    comm.allreduce_sum(std::span<float>(buf, hi - lo));
    off = 0;
    runs_of<H>(tree, [&](H* run, Eigen::Index n) {
      overlap(run, off, static_cast<std::size_t>(n), lo, hi,
              [&](H* to, std::size_t at, std::size_t k) {
                for (std::size_t i = 0; i < k; ++i)
                  to[i] = static_cast<H>(div != 1.0f ? buf[at + i] / div : buf[at + i]);
              });
      off += static_cast<std::size_t>(n);
    });
  }
}

template <device_group C, class Tree>
void psum_impl(C& comm, Tree& tree, const char* function, op o) {
  with_staging(comm, [&](Staging& staging) {
    agree(comm, function, o, 0, moves_of(staging), std::as_const(tree), bytes_of(tree));
    for_each_type(tree_scalars_t<Tree>{}, [&]<class S>(std::type_identity<S>) {
      if constexpr (half_element<S>) {
        reduce_half_leaves<S>(comm, staging, tree,
                              o == op::pmean ? static_cast<float>(comm.size()) : 1.0f);
      } else {
        S div = S(1);
        if constexpr (std::is_floating_point_v<S>)
          if (o == op::pmean) div = static_cast<S>(comm.size());
        reduce_leaves<S>(comm, staging, tree, S(1), std::span<S>{},
                         [&](std::span<const S>) { return div; });
      }
    });
  });
}

}  // namespace detail

/// lax.psum on a whole tree, in place: every leaf becomes the sum over the devices of that leaf
/// (element by element, in rank order on LocalDevices). Leaves: numbers (not bool), Eigen dense
/// objects with their own memory and Eigen tensors; Eigen::half and Eigen::bfloat16 elements are
/// summed in float and rounded once. Every device must call it with a tree of
/// the same structure, leaf types and shapes; otherwise every device raises the same
/// grove::tree_error naming the first difference and nothing is changed. Allocates nothing once
/// the communicator's staging memory has held the tree.
template <class Tree, device_group C>
void psum_inplace(Tree& tree, C& comm) {
  detail::psum_impl(comm, tree, "psum", detail::op::psum);
}

/// lax.pmean in place: psum divided by the number of devices (as JAX, psum(x) / n). The leaves
/// must have floating-point elements.
template <class Tree, device_group C>
void pmean_inplace(Tree& tree, C& comm) {
  detail::for_each_type(detail::tree_scalars_t<Tree>{}, []<class S>(std::type_identity<S>) {
    static_assert(std::is_floating_point_v<S> || detail::half_element<S>,
                  "grove::parallel::pmean: every leaf must have floating-point elements (an "
                  "integer mean would be truncated; use psum)");
  });
  detail::psum_impl(comm, tree, "pmean", detail::op::pmean);
}

/// In place: every device's tree becomes root's, bit for bit. It takes every leaf type the
/// reductions take and more, since it copies bits: bool, Eigen::half and Eigen::bfloat16 and
/// std::complex elements, Eigen tensors (Tensor, TensorFixedSize, TensorMap) and any trivially
/// copyable value the tree core keeps as a leaf (a random::Key, so that an nn::train_state and
/// an optimizer state with masks broadcast whole); another leaf type stops the compile with a
/// grove::parallel static_assert. The trees must have the same structure, leaf types and shapes
/// on every device (checked as for psum); their values are overwritten.
template <class Tree, device_group C>
void broadcast_inplace(Tree& tree, C& comm, int root = 0) {
  detail::with_staging(comm, [&](Staging& staging) {
    detail::agree(comm, "broadcast", detail::op::broadcast, root, detail::moves_of(staging),
                  std::as_const(tree), detail::bytes_of(tree));
    if (root < 0 || root >= comm.size())
      throw ::grove::argument_error("grove::parallel::broadcast: root " + std::to_string(root) +
                                    " is not a rank of this communicator (size " +
                                    std::to_string(comm.size()) + ")");
    // All leaves as one stream of bytes, whatever their element types: short runs packed into
    // buckets, long ones where they are.
    const std::size_t bucket = staging.bucket_bytes(), inplace = staging.inplace_bytes();
    const bool sender = comm.rank() == root;
    auto runs = [&](auto&& fn) {
      grove::tree_for_each([&](auto& leaf) { detail::byte_runs(leaf, fn); }, tree);
    };
    std::size_t packed = 0;
    runs([&](std::byte*, std::size_t n) { packed += n < inplace ? n : 0; });
    if (packed > 0) {
      std::byte* buf = staging.get<std::byte>(std::min(packed, bucket));
      for (std::size_t lo = 0; lo < packed; lo += bucket) {
        const std::size_t hi = std::min(packed, lo + bucket);
        std::size_t off = 0;
        if (sender)
          runs([&](std::byte* run, std::size_t n) {
            if (n >= inplace) return;
            detail::overlap(run, off, n, lo, hi,
                            [&](std::byte* from, std::size_t at, std::size_t k) {
                              std::memcpy(buf + at, from, k);
                            });
            off += n;
          });
        comm.broadcast(std::span<std::byte>(buf, hi - lo), root);
        off = 0;
        if (!sender)
          runs([&](std::byte* run, std::size_t n) {
            if (n >= inplace) return;
            detail::overlap(run, off, n, lo, hi, [&](std::byte* to, std::size_t at, std::size_t k) {
              std::memcpy(to, buf + at, k);
            });
            off += n;
          });
      }
    }
    runs([&](std::byte* run, std::size_t n) {
      if (n < inplace) return;
      for (std::size_t b = 0; b < n; b += bucket)
        comm.broadcast(std::span<std::byte>(run + b, std::min(bucket, n - b)), root);
    });
  });
}

/// lax.psum: a new tree, the sum over the devices of `tree` (see psum_inplace). Leaves come back
/// as plain objects (an Eigen::Map leaf as the matrix it maps).
template <class Tree, device_group C>
auto psum(const Tree& tree, C& comm) {
  auto out = detail::plain_copy(tree);
  psum_inplace(out, comm);
  return out;
}

/// lax.pmean: a new tree, psum(tree) / number of devices.
template <class Tree, device_group C>
auto pmean(const Tree& tree, C& comm) {
  auto out = detail::plain_copy(tree);
  pmean_inplace(out, comm);
  return out;
}

/// A new tree equal to root's tree on every device (see broadcast_inplace).
template <class Tree, device_group C>
auto broadcast(const Tree& tree, C& comm, int root = 0) {
  auto out = detail::plain_copy(tree);
  broadcast_inplace(out, comm, root);
  return out;
}

/// True on every device when all devices hold trees of the same structure, types, shapes and
/// bit-identical values (replicas in sync), false on every device otherwise. One small
/// collective; reads every element once. A leaf that is a value (a random::Key) is compared by
/// the bytes of its object, padding included: two keys made apart may differ there, one that
/// broadcast copied does not.
template <class Tree, device_group C>
bool in_sync(const Tree& tree, C& comm) {
  detail::Hasher h;
  detail::hash_tree(h, tree);
  grove::tree_for_each(
      [&](const auto& leaf) {
        detail::byte_runs(leaf, [&](const std::byte* p, std::size_t len) {
          const auto* bytes = reinterpret_cast<const unsigned char*>(p);
          std::size_t i = 0;
          for (; i + 8 <= len; i += 8) {
            std::uint64_t w;
            std::memcpy(&w, bytes + i, 8);
            h.mix(w);
          }
          std::uint64_t w = 0;
          for (; i < len; ++i) w = (w << 8) | bytes[i];
          h.mix(w);
        });
      },
      tree);
  const std::uint64_t v = h.value();
  std::uint64_t both[2] = {v, ~v};
  comm.allreduce_max(std::span<std::uint64_t>(both));
  return both[0] == v && ~both[1] == v;
}

}  // namespace grove::parallel
