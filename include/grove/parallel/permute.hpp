// grove/parallel/permute.hpp: JAX's lax.ppermute on whole pytrees, over any device_group.
//
//   // a ring: every device sends its tree to the next one
//   std::vector<std::pair<int, int>> ring;
//   for (int d = 0; d < n; ++d) ring.push_back({d, (d + 1) % n});
//   auto from_left = grove::parallel::ppermute(x, comm, ring);
//
// perm lists (source, destination) pairs of device indices; no source and no destination may
// appear twice. A device that is no pair's destination gets zeros.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "grove/error.hpp"
#include "grove/parallel/collectives.hpp"
#include "grove/parallel/communicator.hpp"
#include "grove/parallel/detail/agree.hpp"
#include "grove/parallel/detail/primitives.hpp"
#include "grove/tree.hpp"

namespace grove::parallel {

namespace detail {

// "ppermute(perm=[(0, 1), (1, 0)])", after checking that perm is a permutation of some of the
// group's devices.
inline std::string permutation_call(std::span<const std::pair<int, int>> perm, int n) {
  std::string text = "ppermute(perm=[";
  std::vector<char> source(static_cast<std::size_t>(n), 0), dest(static_cast<std::size_t>(n), 0);
  for (std::size_t i = 0; i < perm.size(); ++i) {
    const auto [s, d] = perm[i];
    const std::string pair = "(" + std::to_string(s) + ", " + std::to_string(d) + ")";
    text += (i ? ", " : "") + pair;
    auto fail = [&](const std::string& why) {
      throw ::grove::argument_error("grove::parallel::ppermute: perm's pair " + pair + " (number " +
                                    std::to_string(i) + ") " + why);
    };
    if (s < 0 || s >= n || d < 0 || d >= n)
      fail("names a device outside [0, " + std::to_string(n) + ")");
    if (source[static_cast<std::size_t>(s)]++)
      fail("repeats source " + std::to_string(s) + ": a device sends one tree");
    if (dest[static_cast<std::size_t>(d)]++)
      fail("repeats destination " + std::to_string(d) + ": a device receives one tree");
  }
  return text + "])";
}

}  // namespace detail

/// lax.ppermute in place: device d's tree becomes device s's where (s, d) is a pair of perm, and
/// all zeros (false, zero bytes) where d is no pair's destination. It takes every leaf broadcast
/// takes (bool, 16-bit floats, complex, Eigen tensors, random::Key and other trivially copyable
/// values). Every device passes the same perm and a tree of the same structure, leaf types and
/// shapes; a pair naming a device outside the group, or a source or destination given twice,
/// raises grove::argument_error on every device, and trees or perms that differ across the
/// devices raise the same grove::tree_error on every device; the tree is then unchanged.
template <class Tree, device_group C>
void ppermute_inplace(Tree& tree, C& comm, std::span<const std::pair<int, int>> perm) {
  grove::tree_for_each(
      [](const auto& leaf) {
        detail::require_broadcast_leaf<std::remove_cvref_t<decltype(leaf)>>();
      },
      tree);
  const std::string call = detail::permutation_call(perm, comm.size());
  bool receives = false;
  for (const auto& [s, d] : perm) receives = receives || d == comm.rank();
  detail::with_staging(comm, [&](Staging& staging) {
    const std::size_t total = detail::bytes_of(tree);
    detail::agree(comm, "ppermute", detail::op::ppermute, 0, detail::moves_of(staging),
                  std::as_const(tree), total, call);
    auto runs = [&](auto&& fn) {
      grove::tree_for_each([&](auto& leaf) { detail::byte_runs(leaf, fn); }, tree);
    };
    // The tree as one stream of bytes, in windows: this device's window sent, the source's
    // received into the same window of the tree (read before it is written).
    const std::size_t window = std::max<std::size_t>(1, staging.bucket_bytes() / 2);
    std::byte* buf = total > 0 ? staging.get<std::byte>(2 * std::min(total, window)) : nullptr;
    for (std::size_t lo = 0; lo < total; lo += window) {
      const std::size_t hi = std::min(total, lo + window), w = hi - lo;
      std::byte *send = buf, *recv = buf + w;
      std::size_t off = 0;
      runs([&](std::byte* run, std::size_t n) {
        detail::overlap(run, off, n, lo, hi, [&](std::byte* from, std::size_t at, std::size_t k) {
          std::memcpy(send + at, from, k);
        });
        off += n;
      });
      detail::permute_bytes(comm, perm, std::span<std::byte>(send, w),
                            std::span<std::byte>(recv, w));
      off = 0;
      runs([&](std::byte* run, std::size_t n) {
        detail::overlap(run, off, n, lo, hi, [&](std::byte* to, std::size_t at, std::size_t k) {
          if (receives)
            std::memcpy(to, recv + at, k);
          else
            std::memset(to, 0, k);
        });
        off += n;
      });
    }
  });
}

/// lax.ppermute: a new tree (see ppermute_inplace).
template <class Tree, device_group C>
auto ppermute(const Tree& tree, C& comm, std::span<const std::pair<int, int>> perm) {
  auto out = detail::plain_copy(tree);
  ppermute_inplace(out, comm, perm);
  return out;
}

/// The same with perm as a std::vector of pairs (so that `{{0, 1}, {1, 0}}` can be written).
template <class Tree, device_group C>
void ppermute_inplace(Tree& tree, C& comm, const std::vector<std::pair<int, int>>& perm) {
  ppermute_inplace(tree, comm, std::span<const std::pair<int, int>>(perm));
}
template <class Tree, device_group C>
auto ppermute(const Tree& tree, C& comm, const std::vector<std::pair<int, int>>& perm) {
  return ppermute(tree, comm, std::span<const std::pair<int, int>>(perm));
}

}  // namespace grove::parallel
