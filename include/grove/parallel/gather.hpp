// grove/parallel/gather.hpp: JAX's lax.all_gather and lax.psum_scatter on whole pytrees, over any
// device_group.
//
//   auto all = grove::parallel::all_gather(x, comm);             // stacked: a new axis 0, one
//                                                                 // entry per device
//   auto cat = grove::parallel::all_gather(x, comm, 0, grove::parallel::tiled);   // concatenated
//   auto mine = grove::parallel::psum_scatter(g, comm, 0, grove::parallel::tiled); // this device's
//                                                                 // block of psum(g)
//
// Stacked or tiled decides the result's leaf types (a vector stacks into a matrix, tiles into a
// longer vector), so it is a compile-time choice, `grove::parallel::tiled`, as JAX's `tiled` is a
// static argument. Every device must call with trees of the same structure, leaf types and
// shapes and the same axis; otherwise every device raises the same grove::tree_error.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "grove/error.hpp"
#include "grove/parallel/collectives.hpp"
#include "grove/parallel/communicator.hpp"
#include "grove/parallel/detail/agree.hpp"
#include "grove/parallel/detail/layout.hpp"
#include "grove/parallel/detail/primitives.hpp"
#include "grove/tree.hpp"
#include "grove/tree/eigen.hpp"

namespace grove::parallel {

/// The tag that asks all_gather and psum_scatter for JAX's `tiled=True`: the devices' pieces are
/// concatenated along an existing axis instead of stacked along a new one.
struct tiled_t {
  explicit tiled_t() = default;
};
inline constexpr tiled_t tiled{};

namespace detail {

// How one leaf's piece moves: where it starts in this device's stream and how long it is (bytes
// for all_gather, elements for psum_scatter), how it interleaves in the gathered array, and where
// the result leaf's elements are.
struct piece_plan {
  std::size_t offset = 0;
  std::size_t length = 0;
  std::size_t chunk = 0;
  void* out = nullptr;
};

// The address of element e of a memory leaf, counted in its storage order (strides followed).
template <class Leaf>
auto* storage_element(Leaf& leaf, std::size_t e) {
  using T = std::remove_const_t<Leaf>;
  if constexpr (std::is_arithmetic_v<T>) {
    (void)e;
    return &leaf;
  } else if constexpr (tensor_leaf<T>) {
    return leaf.data() + e;
  } else {
    const auto inner = static_cast<std::size_t>(leaf.innerSize());
    return leaf.data() + static_cast<Eigen::Index>(e / inner) * leaf.outerStride() +
           static_cast<Eigen::Index>(e % inner) * leaf.innerStride();
  }
}

// The path of leaf number `index`, for messages.
template <class Tree>
std::string leaf_path(const Tree& tree, std::size_t index) {
  const auto paths = grove::tree_leaves_with_path(tree);
  return index < paths.size() ? grove::keystr(paths[index].first) : std::string("?");
}

inline std::string axis_call(const char* name, const char* axis_name, int axis, bool tiled) {
  return std::string(name) + "(" + axis_name + "=" + std::to_string(axis) +
         (tiled ? ", tiled)" : ")");
}

template <class L, bool Tiled>
constexpr void require_gather_leaf() {
  require_broadcast_leaf<L>();
  static_assert(!value_leaf<L> || byte_element<L>,
                "grove::parallel::all_gather: a leaf that is a value (such as a random::Key) has "
                "no array to be gathered into: gather its arrays, or use ppermute or broadcast");
  static_assert(Tiled || leaf_ndim<L>() < 2 || tensor_leaf<L>,
                "grove::parallel::all_gather: stacking an Eigen matrix leaf would need three "
                "dimensions: use grove::parallel::tiled, or an Eigen::Tensor leaf");
  static_assert(!Tiled || leaf_ndim<L>() > 0,
                "grove::parallel::all_gather: a number has no axis to tile along: stack it (the "
                "default) instead of grove::parallel::tiled");
}

template <bool Tiled, class Tree, device_group C>
auto all_gather_impl(const Tree& tree, C& comm, int axis) {
  grove::tree_for_each(
      [](const auto& leaf) { require_gather_leaf<std::remove_cvref_t<decltype(leaf)>, Tiled>(); },
      tree);
  const std::string call = axis_call("all_gather", "axis", axis, Tiled);
  const auto n = static_cast<std::size_t>(comm.size());
  const auto me = static_cast<std::size_t>(comm.rank());
  return with_staging(comm, [&](Staging& staging) {
    agree(comm, "all_gather", op::all_gather, 0, moves_of(staging), tree, bytes_of(tree), call);

    // Every leaf's axis, checked before anything moves (the same verdict on every device: they
    // agree on the tree and the call).
    std::size_t index = 0;
    std::vector<piece_plan> plans;
    std::size_t offset = 0;
    grove::tree_for_each(
        [&](const auto& leaf) {
          using L = std::remove_cvref_t<decltype(leaf)>;
          constexpr int ndim = leaf_ndim<L>();
          const int a = normalize_axis(axis, Tiled ? ndim : ndim + 1);
          if (a < 0)
            throw ::grove::argument_error(
                "grove::parallel::" + call + ": axis " + std::to_string(axis) +
                " is out of range for the leaf at " + leaf_path(tree, index) + ", which has " +
                std::to_string(ndim) + (ndim == 1 ? " dimension" : " dimensions") +
                (Tiled ? "" : " (stacking adds one)"));
          const auto dims = leaf_dims(leaf);
          constexpr bool row_major =
              Tiled ? leaf_row_major<L>() : tensor_leaf<L> && leaf_row_major<L>();
          const interleave il = interleave_of(
              std::span<const Eigen::Index>(dims.data(), dims.size()), row_major, a, !Tiled);
          const std::size_t bytes = leaf_elements(leaf) * sizeof(element_t<L>);
          plans.push_back({offset, bytes, il.chunk * sizeof(element_t<L>), nullptr});
          offset += bytes;
          ++index;
        },
        tree);

    // The result, sized: the gathered dimensions of every leaf.
    auto out = grove::tree_map(
        [&](const auto& leaf) {
          using L = std::remove_cvref_t<decltype(leaf)>;
          using Out = gathered_t<L, Tiled>;
          constexpr int ndim = leaf_ndim<L>();
          const auto dims = leaf_dims(leaf);
          const auto a = static_cast<std::size_t>(normalize_axis(axis, Tiled ? ndim : ndim + 1));
          std::array<Eigen::Index, static_cast<std::size_t>(ndim + (Tiled ? 0 : 1))> big{};
          for (std::size_t d = 0, k = 0; d < big.size(); ++d) {
            if (!Tiled && d == a)
              big[d] = static_cast<Eigen::Index>(n);
            else
              big[d] = dims[k++] * (Tiled && d == a ? static_cast<Eigen::Index>(n) : 1);
          }
          return sized_leaf<Out>(big);
        },
        tree);
    index = 0;
    grove::tree_for_each([&](auto& leaf) { plans[index++].out = elements_of(leaf); }, out);

    // This device's leaves as one stream of bytes, gathered in windows: each device's window
    // goes to its block of the staging memory, and from there into the result leaves.
    const std::size_t total = offset;
    const std::size_t window = std::max<std::size_t>(1, staging.bucket_bytes() / n);
    std::byte* buf = total > 0 ? staging.get<std::byte>(n * std::min(total, window)) : nullptr;
    for (std::size_t lo = 0; lo < total; lo += window) {
      const std::size_t hi = std::min(total, lo + window), w = hi - lo;
      std::size_t off = 0;
      grove::tree_for_each(
          [&](const auto& leaf) {
            byte_runs(leaf, [&](const std::byte* run, std::size_t k) {
              overlap(run, off, k, lo, hi,
                      [&](const std::byte* from, std::size_t at, std::size_t c) {
                        std::memcpy(buf + me * w + at, from, c);
                      });
              off += k;
            });
          },
          tree);
      allgather_bytes(comm, std::span<std::byte>(buf, n * w));
      for (const piece_plan& p : plans) {
        const std::size_t b = std::max(p.offset, lo), e = std::min(p.offset + p.length, hi);
        if (b >= e) continue;
        auto* to = static_cast<std::byte*>(p.out);
        for (std::size_t r = 0; r < n; ++r) {
          const std::byte* from = buf + r * w + (b - lo);
          // Byte x of device r's piece sits at byte (o * n + r) * chunk + i of the result.
          std::size_t x = b - p.offset, left = e - b;
          while (left > 0) {
            const std::size_t o = x / p.chunk, i = x % p.chunk, k = std::min(left, p.chunk - i);
            std::memcpy(to + (o * n + r) * p.chunk + i, from, k);
            from += k;
            x += k;
            left -= k;
          }
        }
      }
    }
    return out;
  });
}

template <class L, bool Tiled>
constexpr void require_scatter_leaf() {
  static_assert(collective_leaf<L>(),
                "grove::parallel::psum_scatter: every leaf must be an Eigen dense object with its "
                "own memory or an Eigen tensor, of arithmetic (not bool), Eigen::half or "
                "Eigen::bfloat16 elements");
  static_assert(leaf_ndim<L>() > 0,
                "grove::parallel::psum_scatter: a number has no dimension to scatter along");
}

template <bool Tiled, class Tree, device_group C>
auto psum_scatter_impl(const Tree& tree, C& comm, int dimension) {
  grove::tree_for_each(
      [](const auto& leaf) { require_scatter_leaf<std::remove_cvref_t<decltype(leaf)>, Tiled>(); },
      tree);
  const std::string call = axis_call("psum_scatter", "scatter_dimension", dimension, Tiled);
  const auto n = static_cast<std::size_t>(comm.size());
  return with_staging(comm, [&](Staging& staging) {
    agree(comm, "psum_scatter", op::psum_scatter, 0, moves_of(staging), tree, bytes_of(tree), call);

    // Every leaf's dimension and its length, checked before anything moves.
    std::size_t index = 0;
    grove::tree_for_each(
        [&](const auto& leaf) {
          using L = std::remove_cvref_t<decltype(leaf)>;
          constexpr int ndim = leaf_ndim<L>();
          const int a = normalize_axis(dimension, ndim);
          const std::string where =
              "grove::parallel::" + call + ": the leaf at " + leaf_path(tree, index);
          if (a < 0)
            throw ::grove::argument_error(where + " has " + std::to_string(ndim) +
                                          (ndim == 1 ? " dimension" : " dimensions") +
                                          ", so scatter_dimension " + std::to_string(dimension) +
                                          " is out of range");
          const auto len =
              static_cast<std::size_t>(grove::shape(leaf)[static_cast<std::size_t>(a)]);
          if (Tiled ? len % n != 0 : len != n)
            throw ::grove::shape_error(where + " has length " + std::to_string(len) +
                                       " along dimension " + std::to_string(a) +
                                       ", which must be " + (Tiled ? "a multiple of " : "") +
                                       "the number of devices, " + std::to_string(n));
          ++index;
        },
        tree);

    // The result, sized: every leaf's block.
    auto out = grove::tree_map(
        [&](const auto& leaf) {
          using L = std::remove_cvref_t<decltype(leaf)>;
          using Out = scattered_t<L, Tiled>;
          constexpr int ndim = leaf_ndim<L>();
          const auto dims = grove::shape(leaf);
          const auto a = static_cast<std::size_t>(normalize_axis(dimension, ndim));
          std::array<Eigen::Index, static_cast<std::size_t>(ndim - (Tiled ? 0 : 1))> small{};
          for (std::size_t d = 0, k = 0; d < dims.size(); ++d) {
            if (d == a && !Tiled) continue;
            small[k++] = d == a ? dims[d] / static_cast<Eigen::Index>(n) : dims[d];
          }
          return sized_leaf<Out>(small);
        },
        tree);

    // One element type at a time (16-bit floats summed in float): this device's leaves cut into
    // the devices' blocks, block r of every leaf after one another in the r-th part of the
    // staging memory, reduce-scattered in windows, and this device's sums into the result.
    for_each_type(tree_scalars_t<Tree>{}, [&]<class S>(std::type_identity<S>) {
      using A = std::conditional_t<half_element<S>, float, S>;
      std::vector<piece_plan> plans;
      std::size_t total = 0;
      {
        auto add = [&](const auto& leaf, auto& result) {
          using L = std::remove_cvref_t<decltype(leaf)>;
          if constexpr (std::is_same_v<leaf_scalar_t<L>, S>) {
            constexpr int ndim = leaf_ndim<L>();
            const auto a = normalize_axis(dimension, ndim);
            const auto dims = grove::shape(leaf);
            auto piece = dims;
            piece[static_cast<std::size_t>(a)] /= static_cast<Eigen::Index>(n);
            // The piece's dimensions, the scattered one left out when untiled (it is 1).
            const interleave il =
                interleave_of(std::span<const Eigen::Index>(piece.data(), piece.size()),
                              leaf_row_major<L>(), a, false);
            const std::size_t length = static_cast<std::size_t>(grove::size(leaf)) / n;
            plans.push_back({total, length, il.chunk, elements_of(result)});
            total += length;
          }
        };
        grove::tree_for_each(add, tree, out);
      }
      if (total == 0) return;
      const std::size_t window =
          std::max<std::size_t>(1, staging.bucket_bytes() / (sizeof(A) * (n + 1)));
      A* in = staging.get<A>((n + 1) * std::min(total, window));
      for (std::size_t lo = 0; lo < total; lo += window) {
        const std::size_t hi = std::min(total, lo + window), w = hi - lo;
        A* sums = in + n * w;
        std::size_t leaf = 0;
        grove::tree_for_each(
            [&](const auto& x) {
              using L = std::remove_cvref_t<decltype(x)>;
              if constexpr (std::is_same_v<leaf_scalar_t<L>, S>) {
                const piece_plan& plan = plans[leaf++];
                if (plan.offset >= hi || plan.offset + plan.length <= lo) return;
                // The positions [tb, te) of the leaf's block in this window, for every device:
                // position t is element (o * n + r) * chunk + i of the leaf (t = o * chunk + i).
                const std::size_t tb = std::max(plan.offset, lo) - plan.offset;
                const std::size_t te = std::min(plan.offset + plan.length, hi) - plan.offset;
                A* window_of_leaf = in + (plan.offset + tb - lo);
                for (std::size_t r = 0; r < n; ++r)
                  for (std::size_t t = tb; t < te;) {
                    const std::size_t o = t / plan.chunk, i = t % plan.chunk;
                    const std::size_t k = std::min(plan.chunk - i, te - t);
                    const std::size_t e = (o * n + r) * plan.chunk + i;
                    for (std::size_t j = 0; j < k; ++j)
                      window_of_leaf[r * w + (t - tb) + j] =
                          static_cast<A>(*storage_element(x, e + j));
                    t += k;
                  }
              }
            },
            tree);
        reduce_scatter_sum<A>(comm, std::span<const A>(in, n * w), std::span<A>(sums, w));
        for (const piece_plan& plan : plans) {
          const std::size_t b = std::max(plan.offset, lo),
                            f = std::min(plan.offset + plan.length, hi);
          S* to = static_cast<S*>(plan.out);
          for (std::size_t q = b; q < f; ++q) to[q - plan.offset] = static_cast<S>(sums[q - lo]);
        }
      }
    });
    return out;
  });
}

}  // namespace detail

/// lax.all_gather, stacked: a new tree whose every leaf holds all devices' leaves along a new axis
/// `axis` (numpy's count, negative from the end), in device order. A number gives a vector of
/// comm.size() entries; an Eigen vector of length k a matrix (size(), k) for axis 0, (k, size())
/// for axis 1 (Matrix or Array as the leaf); an Eigen::Tensor of rank D one of rank D + 1
/// (Eigen::Tensor, the leaf's storage order). An Eigen matrix leaf would need three dimensions:
/// gather it tiled, or hold it as an Eigen::Tensor. Leaves of bool, 16-bit float and complex
/// elements are gathered as their bits; a value leaf (a random::Key) is refused at compile time.
/// An axis out of range for a leaf raises grove::argument_error, naming the leaf, on every device.
template <class Tree, device_group C>
auto all_gather(const Tree& tree, C& comm, int axis = 0) {
  return detail::all_gather_impl<false>(tree, comm, axis);
}

/// lax.all_gather with tiled=True: every leaf becomes all devices' leaves concatenated along its
/// own axis `axis`, in device order: an Eigen vector of length k one of size() * k (the same kind
/// and orientation), a matrix (r, c) one of (size() * r, c) for axis 0 or (r, size() * c) for
/// axis 1 (the same storage order), a tensor the same rank, dimension `axis` size() times longer.
template <class Tree, device_group C>
auto all_gather(const Tree& tree, C& comm, int axis, tiled_t) {
  return detail::all_gather_impl<true>(tree, comm, axis);
}

/// lax.psum_scatter (a reduce-scatter): every leaf's dimension `scatter_dimension` has length
/// comm.size(); device r gets entry r of that dimension of the sum over the devices, the dimension
/// removed: an Eigen vector gives a number, a matrix a column vector (row r for dimension 0,
/// column r for 1), a tensor of rank D one of rank D - 1. Leaves as psum takes them, but with at
/// least one dimension; Eigen::half and Eigen::bfloat16 are summed in float. A leaf whose length
/// along the dimension is not size() raises grove::shape_error, naming the leaf, on every device.
/// On LocalDevices the sums are psum's, bit for bit.
template <class Tree, device_group C>
auto psum_scatter(const Tree& tree, C& comm, int scatter_dimension = 0) {
  return detail::psum_scatter_impl<false>(tree, comm, scatter_dimension);
}

/// lax.psum_scatter with tiled=True: the dimension's length is a multiple of size(), and device r
/// gets its r-th block of that dimension, of length / size() entries (the leaf's kind, vector
/// orientation and storage order kept).
template <class Tree, device_group C>
auto psum_scatter(const Tree& tree, C& comm, int scatter_dimension, tiled_t) {
  return detail::psum_scatter_impl<true>(tree, comm, scatter_dimension);
}

}  // namespace grove::parallel
