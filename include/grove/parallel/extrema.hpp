// grove/parallel/extrema.hpp: JAX's lax.pmax and lax.pmin on whole pytrees, over any
// device_group.
//
//   auto worst = grove::parallel::pmax(losses, comm);   // the elementwise maximum over devices
//   grove::parallel::pmin_inplace(steps, comm);
//
// Every element becomes a 64-bit key whose unsigned order is the element's order, and the keys go
// through the group's allreduce_max: exact for every integer and float type, the same bits on
// every device, whatever the group. A NaN on any device gives NaN, as XLA's max and min do, and
// -0.0 counts below +0.0.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <type_traits>
#include <utility>

#include "grove/parallel/collectives.hpp"
#include "grove/parallel/communicator.hpp"
#include "grove/parallel/detail/agree.hpp"
#include "grove/tree.hpp"

namespace grove::parallel {

namespace detail {

// NaN's key: above every number's key, whichever way the order points (a float's keys are 32
// bits wide; a double's are all ones only for a NaN's bits).
inline constexpr std::uint64_t nan_key = ~std::uint64_t{0};

template <class S>
inline constexpr bool float_like = std::is_floating_point_v<S> || half_element<S>;

// The float type a key is made from (16-bit floats widen to float, exactly), and the key's
// unsigned type.
template <class S>
using key_float_t = std::conditional_t<half_element<S>, float, S>;
template <class S>
using key_bits_t = std::conditional_t<
    float_like<S>, std::conditional_t<sizeof(key_float_t<S>) == 8, std::uint64_t, std::uint32_t>,
    std::make_unsigned_t<std::conditional_t<float_like<S> || std::is_same_v<S, bool>, int, S>>>;

template <class L>
constexpr void require_extremum_leaf() {
  static_assert(collective_leaf<L>(),
                "grove::parallel::pmax/pmin: every leaf must be a number (not bool), or an Eigen "
                "dense object with its own memory or an Eigen tensor, of arithmetic (not bool), "
                "Eigen::half or Eigen::bfloat16 elements");
  if constexpr (collective_leaf<L>())
    static_assert(!std::is_same_v<leaf_scalar_t<L>, long double>,
                  "grove::parallel::pmax/pmin: long double elements have no 64-bit key");
}

// An order-preserving key of x (x < y exactly when key(x) < key(y), -0.0 below +0.0), its bits
// inverted for the minimum; NaN is nan_key either way.
template <class S>
std::uint64_t extremum_key(S x, bool minimum) {
  using U = key_bits_t<S>;
  constexpr U top = U(U{1} << (sizeof(U) * 8 - 1));
  U k;
  if constexpr (float_like<S>) {
    const auto f = static_cast<key_float_t<S>>(x);
    if (f != f) return nan_key;
    const U bits = std::bit_cast<U>(f);
    k = (bits & top) ? U(~bits) : U(bits | top);
  } else if constexpr (std::is_signed_v<S>) {
    k = U(static_cast<U>(x) ^ top);
  } else {
    k = x;
  }
  return minimum ? U(~k) : k;
}

// The element whose key is `key`.
template <class S>
S from_extremum_key(std::uint64_t key, bool minimum) {
  using U = key_bits_t<S>;
  constexpr U top = U(U{1} << (sizeof(U) * 8 - 1));
  if constexpr (float_like<S>) {
    if (key == nan_key) return static_cast<S>(std::numeric_limits<key_float_t<S>>::quiet_NaN());
    U k = static_cast<U>(key);
    if (minimum) k = U(~k);
    const U bits = (k & top) ? U(k & ~top) : U(~k);
    return static_cast<S>(std::bit_cast<key_float_t<S>>(bits));
  } else {
    U k = static_cast<U>(key);
    if (minimum) k = U(~k);
    if constexpr (std::is_signed_v<S>)
      return static_cast<S>(U(k ^ top));
    else
      return k;
  }
}

// In place: every element becomes its maximum (or minimum) over the devices. The elements of all
// leaves, in leaf order, become keys in buckets of staging memory, one allreduce_max a bucket.
template <device_group C, class Tree>
void extremum_impl(C& comm, Tree& tree, bool minimum) {
  grove::tree_for_each(
      [](const auto& leaf) { require_extremum_leaf<std::remove_cvref_t<decltype(leaf)>>(); }, tree);
  const char* name = minimum ? "pmin" : "pmax";
  with_staging(comm, [&](Staging& staging) {
    agree(comm, name, minimum ? op::pmin : op::pmax, 0, moves_of(staging), std::as_const(tree),
          bytes_of(tree));
    auto runs = [&](auto&& fn) {
      grove::tree_for_each([&](auto& leaf) { leaf_runs(leaf, fn); }, tree);
    };
    std::size_t total = 0;
    runs([&](auto*, Eigen::Index n) { total += static_cast<std::size_t>(n); });
    const std::size_t bucket = std::max<std::size_t>(1, staging.bucket_bytes() / 8);
    std::uint64_t* keys = total > 0 ? staging.get<std::uint64_t>(std::min(total, bucket)) : nullptr;
    for (std::size_t lo = 0; lo < total; lo += bucket) {
      const std::size_t hi = std::min(total, lo + bucket);
      std::size_t off = 0;
      runs([&](auto* run, Eigen::Index n) {
        overlap(run, off, static_cast<std::size_t>(n), lo, hi,
                [&](auto* from, std::size_t at, std::size_t k) {
                  for (std::size_t i = 0; i < k; ++i) keys[at + i] = extremum_key(from[i], minimum);
                });
        off += static_cast<std::size_t>(n);
      });
      comm.allreduce_max(std::span<std::uint64_t>(keys, hi - lo));
      off = 0;
      runs([&](auto* run, Eigen::Index n) {
        using S = std::remove_cvref_t<decltype(*run)>;
        overlap(run, off, static_cast<std::size_t>(n), lo, hi,
                [&](S* to, std::size_t at, std::size_t k) {
                  for (std::size_t i = 0; i < k; ++i)
                    to[i] = from_extremum_key<S>(keys[at + i], minimum);
                });
        off += static_cast<std::size_t>(n);
      });
    }
  });
}

}  // namespace detail

/// lax.pmax in place: every element becomes its maximum over the devices (a NaN anywhere gives
/// NaN; -0.0 is below +0.0). Leaves as psum takes them, but not long double: numbers, Eigen dense
/// objects with their own memory and Eigen tensors, of arithmetic (not bool), Eigen::half or
/// Eigen::bfloat16 elements. The trees must agree across devices, as for psum. Allocates nothing
/// once the communicator's staging memory has held the tree.
template <class Tree, device_group C>
void pmax_inplace(Tree& tree, C& comm) {
  detail::extremum_impl(comm, tree, false);
}

/// lax.pmin in place: every element becomes its minimum over the devices (see pmax_inplace).
template <class Tree, device_group C>
void pmin_inplace(Tree& tree, C& comm) {
  detail::extremum_impl(comm, tree, true);
}

/// lax.pmax: a new tree, the elementwise maximum over the devices (see pmax_inplace).
template <class Tree, device_group C>
auto pmax(const Tree& tree, C& comm) {
  auto out = detail::plain_copy(tree);
  pmax_inplace(out, comm);
  return out;
}

/// lax.pmin: a new tree, the elementwise minimum over the devices (see pmax_inplace).
template <class Tree, device_group C>
auto pmin(const Tree& tree, C& comm) {
  auto out = detail::plain_copy(tree);
  pmin_inplace(out, comm);
  return out;
}

}  // namespace grove::parallel
