// grove/nn/detail/sgemm_blocking.hpp: the cache blocking that grove's float GEMM kernels
// (sgemm_avx2.hpp, sgemm_avx512.hpp, sgemm_avx512bf16.hpp) share, from the cache sizes the CPU
// reports.
//
// The kernels are Goto's: a kc x NR sliver of op(B) stays in L1 while MR-row slivers of an
// mc x kc block of op(A) stream from L2, and a kc x nc slab of op(B) lives in L3. So the blocking
// follows the caches of the CPU that runs (grove/detail/cpu.hpp's this_cpu_caches()) rather than
// constants tuned on one kind: a B sliver takes half of L1d, an A block half of L2, a B slab half
// of L3 (the other halves are for C and the stream that comes next). An inner dimension a little
// deeper than kc is cut into slabs of equal depth rather than one full slab and a sliver of one
// (each slab costs a pass over C), and rows likewise into blocks of equal height.
//
// The sizes are in bytes, so a kernel whose packed operands are bfloat16 (two bytes an element:
// the AVX512-BF16 kernel) gets slabs twice as deep from the same caches; its slabs have an even
// depth (the kernel multiplies pairs of steps), and its packing buffers hold pairs of bf16 in
// 32-bit words, counted below as floats.
//
// Everything here is defined on every build and CPU, so that every workspace has room for either
// kernel, including one reserved by code built with GROVE_NO_DISPATCH.
#pragma once

#include <algorithm>
#include <cstddef>
#include <grove/detail/cpu.hpp>

namespace grove::nn::detail::sgemm {

using Index = std::ptrdiff_t;

inline constexpr Index round_up(Index x, Index to) {
  return (x + to - 1) / to * to;
}
inline constexpr Index ceil_div(Index x, Index by) {
  return (x + by - 1) / by;
}

/// A kernel's largest kc x mc x nc blocks.
struct Blocking {
  Index kc = 0, mc = 0, nc = 0;
};

/// The blocking of a kernel with an MR x NR register block whose packed elements take Bytes bytes
/// (4 for float, 2 for bfloat16); each kernel names it `blocks`.
template <Index MR, Index NR, Index Bytes = 4>
struct blocking_of {
  static_assert(Bytes == 4 || Bytes == 2, "grove: packed elements are floats or bfloat16 pairs");

  /// Rows of one packed sliver of op(A): row blocks are whole slivers.
  static constexpr Index sliver_rows = MR;

  /// The blocking for caches of these sizes (in bytes): kc a multiple of 8 in [64, 1024], mc a
  /// multiple of MR in [MR, 1024], nc a multiple of NR in [64 NR, 1024 NR].
  static constexpr Blocking for_caches(std::size_t l1d, std::size_t l2, std::size_t l3) {
    constexpr Index F = Bytes;
    const Index kc = std::clamp<Index>(static_cast<Index>(l1d) / 2 / (NR * F) / 8 * 8, 64, 1024);
    const Index mc = std::clamp<Index>(static_cast<Index>(l2) / 2 / (kc * F) / MR * MR, MR, 1024);
    const Index nc =
        std::clamp<Index>(static_cast<Index>(l3) / 2 / (kc * F) / NR * NR, 64 * NR, 1024 * NR);
    return {kc, mc, nc};
  }

  /// The blocking on this CPU (computed once).
  static const Blocking& here() noexcept {
    static const Blocking b = [] {
      const grove::detail::cache_sizes& c = grove::detail::this_cpu_caches();
      return for_caches(c.l1d, c.l2, c.l3);
    }();
    return b;
  }

  /// The depth of each slab for an inner dimension k > 0: k cut into equal slabs of at most kc
  /// (for bfloat16, of an even depth: the last slab alone may be odd, or shorter).
  static Index slab_depth(Index k) {
    const Index kc = here().kc;
    const Index depth = ceil_div(k, ceil_div(k, kc));
    return Bytes == 2 ? round_up(depth, 2) : depth;
  }

  /// The height of each row block for m > 0 rows: equal blocks of at most mc, whole MR slivers.
  static Index block_height(Index m) {
    const Index mc = here().mc;
    return std::min(mc, round_up(ceil_div(m, ceil_div(m, mc)), MR));
  }

  /// Floats (or 32-bit words of two bf16) of packing buffer an m x n x k product needs for op(A)
  /// and op(B).
  static Index packed_a_size(Index m, Index k) {
    if (m <= 0 || k <= 0) return 0;
    return slab_depth(k) * Bytes / 4 * round_up(block_height(m), MR);
  }
  static Index packed_b_size(Index n, Index k) {
    if (n <= 0 || k <= 0) return 0;
    return slab_depth(k) * Bytes / 4 * round_up(std::min(n, here().nc), NR);
  }
};

}  // namespace grove::nn::detail::sgemm
