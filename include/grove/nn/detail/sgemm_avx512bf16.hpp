// grove/nn/detail/sgemm_avx512bf16.hpp: grove's bfloat16 GEMM for CPUs with AVX512-BF16: op(A)
// and op(B) rounded to bfloat16, their products summed in float by vdpbf16ps.
//
// gemm.hpp runs it for float products under Precision::bf16 on the CPUs where it is the fastest
// way to compute them (AMD's; see gemm.hpp for why not Intel's).
//
// vdpbf16ps treats each 32-bit lane of its two sources as a pair of bf16 (the low half one, the
// high half the next) and adds both products of the pairs in a lane to that lane's float
// accumulator, with two fused multiply-adds (the high halves' product first), each rounded to
// nearest even. So both operands are packed as pairs of consecutive steps of the inner dimension:
// for each pair of steps (2q, 2q + 1), a packed A sliver has MR words, word i holding op(A)(i, 2q)
// in its low half and op(A)(i, 2q + 1) in its high half, and a packed B sliver NR words,
// (op(B)(2q, j), op(B)(2q + 1, j)); an odd slab's last pair is completed with zero. The
// micro-kernel holds the same 32 x 12 block of C as the AVX-512 float kernel (two 16-lane vectors
// per column, 24 of the 32 registers): each pair of steps is two A loads and 12 broadcast words of
// B for 24 vdpbf16ps. Partial blocks at the edges are zero-padded in the packed buffers and written
// back through lane masks; the last, partial sliver of rows (at most 16, which includes every
// product of at most 16 rows, a classifier's last layer) and of columns (8 or 4 or fewer) runs a
// narrower micro-kernel so as not to multiply the padding. Unlike the float kernel's thin one, no
// kernel here reads op(B) in place: every element must be rounded and paired anyway.
//
// The blocking is the float kernels' (sgemm_blocking.hpp) for elements of two bytes: a slab's B
// sliver takes as many bytes of L1 as the float kernel's, so slabs are twice as deep, and of an
// even depth.
//
// The rounding is bf16_round_bits (grove/detail/bf16.hpp), the same bits as every other kernel's
// rounded inputs, in integer code. Not vcvtne2ps2bf16: it flushes subnormal values to zero and
// keeps a NaN's payload, where bf16_round_bits keeps subnormal values and makes every NaN the
// quiet NaN of its sign. vdpbf16ps itself then reads subnormal bf16 inputs as zero and flushes
// subnormal results of its multiply-adds to zero (whatever MXCSR says): products of magnitude
// below 2^-126 vanish here, where the rounded float kernels keep them. That and the order of the
// sums (pairs of steps) are where this kernel's results differ from the float product of the
// rounded operands.
//
// Testing a kernel that the build machine may not run: the driver (gemm_with, the blocking loops)
// and the packing routines are plain C++ templates with no instruction of their own, parameterised
// on the micro-kernel. The real micro-kernel (intrinsics, compiled for AVX512-BF16) and an
// emulated one (scalar C++ that computes what vdpbf16ps computes in each lane, from the same
// packed words) plug into the same driver, so every CPU tests the packing and the blocking, and a
// CPU with AVX512-BF16 tests the real kernel against them. gemm() compiles the driver and the
// packing for AVX512-BF16 by inlining them into itself (flatten), so that their loops are
// vectorised for the CPU that runs it.
//
// The result is C += alpha * op(A) op(B) (or = when overwriting), in a fixed order, so a given
// product gives the same bits on every run.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <grove/detail/bf16.hpp>
#include <grove/detail/cpu.hpp>
#include <grove/nn/detail/sgemm_blocking.hpp>
#include <limits>

#if GROVE_DETAIL_DISPATCH && defined(__x86_64__)
#define GROVE_NN_SGEMM_AVX512BF16 1
#include <immintrin.h>
#endif

namespace grove::nn::detail::avx512bf16 {

using Index = std::ptrdiff_t;

/// The micro-kernel's block of C: MR rows (two vectors of 16) by NR columns.
inline constexpr Index MR = 32, NR = 12;
/// Rows of one vector: a sliver of at most this many rows runs the one-vector micro-kernel.
inline constexpr Index LANES = 16;

using sgemm::ceil_div;
using sgemm::round_up;

/// The kernel's blocking (sgemm_blocking.hpp) for two-byte elements. Its packed sizes are in
/// 32-bit words (pairs of bf16), which GemmScratch counts as floats.
using blocks = sgemm::blocking_of<MR, NR, 2>;

/// The word vdpbf16ps reads as the pair (lo, hi): each rounded to bfloat16 (bf16_round_bits), lo
/// in the low half, hi in the high half.
inline std::uint32_t pair_bits(float lo, float hi) noexcept {
  using grove::detail::bf16_round_bits;
  return bf16_round_bits(std::bit_cast<std::uint32_t>(hi)) |
         (bf16_round_bits(std::bit_cast<std::uint32_t>(lo)) >> 16);
}

/// Packs `count` vectors that run along the inner dimension (vector r starts at src + r * ld and
/// has kc floats) as W-wide pairs of steps: dst[q * W + r] = pair_bits(src[r * ld + 2q],
/// src[r * ld + 2q + 1]) (zero for a step beyond kc), zero for r in [count, W).
template <Index W>
void pack_pairs_transposed(const float* src, Index ld, Index count, Index kc, std::uint32_t* dst) {
  const Index kc2 = ceil_div(kc, 2), full = kc / 2;
  // Sixteen pairs at a time for every vector, so that the words written (W apart) stay in L1.
  constexpr Index Q = 16;
  for (Index q0 = 0; q0 < kc2; q0 += Q) {
    const Index q1 = std::min(q0 + Q, full);
    for (Index r = 0; r < count; ++r) {
      const float* s = src + r * ld;
      std::uint32_t* d = dst + r;
      for (Index q = q0; q < q1; ++q) d[q * W] = pair_bits(s[2 * q], s[2 * q + 1]);
      if (full < kc2 && q0 + Q >= kc2) d[full * W] = pair_bits(s[kc - 1], 0.f);
    }
  }
  for (Index q = 0; q < kc2; ++q) std::fill(dst + q * W + count, dst + (q + 1) * W, 0u);
}

/// Packs op(A)[0:mc, 0:kc] (a points at its first element) into MR-row slivers of ceil(kc / 2)
/// pairs of steps.
template <bool TA>
void pack_a(const float* a, Index lda, Index mc, Index kc, std::uint32_t* dst) {
  const Index kc2 = ceil_div(kc, 2);
  if constexpr (TA) {  // op(A)(i, p) = A[p + i * lda]: rows run along the inner dimension
    for (Index i = 0; i < mc; i += MR, dst += kc2 * MR)
      pack_pairs_transposed<MR>(a + i * lda, lda, std::min(MR, mc - i), kc, dst);
  } else {  // op(A)(i, p) = A[i + p * lda]: each step's rows are contiguous
    // Pair by pair, all slivers at once: the reads run down whole columns of A.
    for (Index q = 0; q < kc2; ++q) {
      const bool pair = 2 * q + 1 < kc;
      const float* s0 = a + 2 * q * lda;
      const float* s1 = pair ? s0 + lda : s0;
      for (Index i0 = 0; i0 < mc; i0 += MR) {
        std::uint32_t* d = dst + i0 * kc2 + q * MR;
        const Index rows = std::min(MR, mc - i0);
        if (pair) {
          for (Index i = 0; i < rows; ++i) d[i] = pair_bits(s0[i0 + i], s1[i0 + i]);
        } else {
          for (Index i = 0; i < rows; ++i) d[i] = pair_bits(s0[i0 + i], 0.f);
        }
        std::fill(d + rows, d + MR, 0u);
      }
    }
  }
}

/// Packs op(B)[0:kc, 0:nc] (b points at its first element) into NR-column slivers of
/// ceil(kc / 2) pairs of steps.
template <bool TB>
void pack_b(const float* b, Index ldb, Index kc, Index nc, std::uint32_t* dst) {
  const Index kc2 = ceil_div(kc, 2);
  for (Index j = 0; j < nc; j += NR, dst += kc2 * NR) {
    const Index cols = std::min(NR, nc - j);
    if constexpr (TB) {  // op(B)(p, j) = B[j + p * ldb]: each step's columns are contiguous
      for (Index q = 0; q < kc2; ++q) {
        const bool pair = 2 * q + 1 < kc;
        const float* s0 = b + j + 2 * q * ldb;
        const float* s1 = pair ? s0 + ldb : s0;
        std::uint32_t* d = dst + q * NR;
        if (pair) {
          for (Index c = 0; c < cols; ++c) d[c] = pair_bits(s0[c], s1[c]);
        } else {
          for (Index c = 0; c < cols; ++c) d[c] = pair_bits(s0[c], 0.f);
        }
        std::fill(d + cols, d + NR, 0u);
      }
    } else {  // op(B)(p, j) = B[p + j * ldb]: columns run along the inner dimension
      pack_pairs_transposed<NR>(b + j * ldb, ldb, cols, kc, dst);
    }
  }
}

/// A micro-kernel: C[0:rows, 0:cols] += alpha * (an A sliver) (a B sliver), both kc2 pairs of
/// steps deep, or = when `overwrite`; rows <= 16 V and cols <= N <= NR (the packed slivers are
/// zero beyond them). Only the first V vectors of each A pair and N columns of each B pair are
/// multiplied.
using kernel_fn = void (*)(Index kc2, const std::uint32_t* a, const std::uint32_t* b, float* c,
                           Index ldc, float alpha, Index rows, Index cols, bool overwrite);

/// The micro-kernel of a Kernel (a type with `template <int V, int N> static void run(...)` of
/// kernel_fn's signature) for a block of `rows` x `cols`: the narrowest that covers it.
template <class Kernel>
kernel_fn kernel_for(Index rows, Index cols) {
  if (rows > LANES)
    return cols > 8   ? &Kernel::template run<2, 12>
           : cols > 4 ? &Kernel::template run<2, 8>
                      : &Kernel::template run<2, 4>;
  return cols > 8   ? &Kernel::template run<1, 12>
         : cols > 4 ? &Kernel::template run<1, 8>
                    : &Kernel::template run<1, 4>;
}

/// The driver, on Kernel's micro-kernels: C += alpha * op(A) op(B) on one thread, or C = alpha *
/// op(A) op(B) when `overwrite` (C is then not read): op(A) is m x k (a points at its first
/// element, column stride lda, transposed storage when TA), op(B) is k x n likewise, C is m x n
/// with column stride ldc; k > 0. packed_a and packed_b hold at least blocks::packed_a_size(m, k)
/// and blocks::packed_b_size(n, k) words.
template <class Kernel, bool TA, bool TB>
void gemm_with(Index m, Index n, Index k, const float* a, Index lda, const float* b, Index ldb,
               float* c, Index ldc, float alpha, bool overwrite, std::uint32_t* packed_a,
               std::uint32_t* packed_b) {
  const Index KC = blocks::slab_depth(k), MC = blocks::block_height(m), NC = blocks::here().nc;
  for (Index jc = 0; jc < n; jc += NC) {
    const Index nc = std::min(NC, n - jc);
    for (Index pc = 0; pc < k; pc += KC) {
      const Index kc = std::min(KC, k - pc), kc2 = ceil_div(kc, 2);
      pack_b<TB>(TB ? b + jc + pc * ldb : b + pc + jc * ldb, ldb, kc, nc, packed_b);
      for (Index ic = 0; ic < m; ic += MC) {
        const Index mc = std::min(MC, m - ic);
        pack_a<TA>(TA ? a + pc + ic * lda : a + ic + pc * lda, lda, mc, kc, packed_a);
        for (Index jr = 0; jr < nc; jr += NR) {
          const Index cols = std::min(NR, nc - jr);
          for (Index ir = 0; ir < mc; ir += MR) {
            const Index rows = std::min(MR, mc - ir);
            kernel_for<Kernel>(rows, cols)(kc2, packed_a + ir * kc2, packed_b + jr * kc2,
                                           c + (ic + ir) + (jc + jr) * ldc, ldc, alpha, rows, cols,
                                           overwrite && pc == 0);
          }
        }
      }
    }
  }
}

// --- the emulated micro-kernel ------------------------------------------------------------------

/// What one lane of vdpbf16ps computes from the accumulator and the words a and b (Intel's SDM):
/// acc += hi(a) hi(b), then acc += lo(a) lo(b), each a fused multiply-add rounded to nearest even,
/// with subnormal inputs read as zero and a subnormal result flushed to zero (both keeping their
/// sign). (Where an exact result lies within half a unit of the last place below the smallest
/// normal float, x86's tininess test after rounding flushes what std::fma rounds up to it: no
/// product of bf16 values that a test multiplies comes near.)
inline float dot_pair(float acc, std::uint32_t a, std::uint32_t b) noexcept {
  const auto flush = [](std::uint32_t bits) {
    return std::bit_cast<float>((bits & 0x7f800000u) == 0 ? bits & 0x80000000u : bits);
  };
  const auto flushed = [&](float x) { return flush(std::bit_cast<std::uint32_t>(x)); };
  const auto fused = [](float x, float y, float z) {
    // The product of two bf16 (8-bit significands) is exact in float unless it overflows or
    // underflows, and then z + x y rounds once, as the fused multiply-add does (std::fma, the
    // general case, is a slow library call without FMA instructions).
    const float xy = x * y;
    const float size = std::abs(xy);
    return size >= std::numeric_limits<float>::min() && size <= std::numeric_limits<float>::max()
               ? z + xy
               : std::fma(x, y, z);
  };
  acc = flushed(fused(flush(a & 0xffff0000u), flush(b & 0xffff0000u), flushed(acc)));
  return flushed(fused(flush(a << 16), flush(b << 16), acc));
}

/// The micro-kernels in scalar C++, from the same packed words as the real ones: for tests on
/// CPUs without AVX512-BF16 (and slow). Only the rows and columns that are stored are computed;
/// the real kernel's padding lanes are never written anywhere.
struct emulated {
  template <int V, int N>
  static void run(Index kc2, const std::uint32_t* a, const std::uint32_t* b, float* c, Index ldc,
                  float alpha, Index rows, Index cols, bool overwrite) {
    // The real kernel's epilogue: a whole block is multiplied by alpha (or fused into C), a
    // partial one fused into C or into zero.
    const bool whole = rows == LANES * V && cols == N;
    for (Index j = 0; j < cols; ++j)
      for (Index i = 0; i < rows; ++i) {
        float acc = 0.f;
        for (Index q = 0; q < kc2; ++q) acc = dot_pair(acc, a[q * MR + i], b[q * NR + j]);
        float& cij = c[i + j * ldc];
        if (whole)
          cij = overwrite ? alpha * acc : std::fma(alpha, acc, cij);
        else
          cij = std::fma(alpha, acc, overwrite ? 0.f : cij);
      }
  }
};

/// gemm (below) on the emulated micro-kernel: runs on every CPU.
template <bool TA, bool TB>
void gemm_emulated(Index m, Index n, Index k, const float* a, Index lda, const float* b, Index ldb,
                   float* c, Index ldc, float alpha, bool overwrite, std::uint32_t* packed_a,
                   std::uint32_t* packed_b) {
  gemm_with<emulated, TA, TB>(m, n, k, a, lda, b, ldb, c, ldc, alpha, overwrite, packed_a,
                              packed_b);
}

#if defined(GROVE_NN_SGEMM_AVX512BF16)

// GCC 12's own avx512fintrin.h trips -Wmaybe-uninitialized (_mm512_undefined_ps, GCC bug 105593)
// wherever its intrinsics are inlined; the warning is about GCC's header, not this code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

/// Whether this CPU runs AVX512-BF16 instructions (and so this kernel).
inline bool available() noexcept {
#if defined(__AVX512BF16__) && defined(__AVX512VL__) && defined(__AVX512BW__) && \
    defined(__AVX512DQ__)
  return true;
#else
  return grove::detail::this_cpu().avx512_bf16;
#endif
}

/// The real micro-kernels (vdpbf16ps).
struct native {
  /// The first `count` of 16 lanes (count may be <= 0 or > 16).
  GROVE_DETAIL_TARGET_AVX512BF16 static __mmask16 lanes(Index count) {
    if (count <= 0) return 0;
    if (count >= 16) return 0xFFFF;
    return static_cast<__mmask16>((1u << count) - 1u);
  }

  /// 16 words as the 32 bf16 that vdpbf16ps reads from them (the same bits). The builtin, not
  /// std::bit_cast: a function compiled without AVX-512 may not return a 512-bit vector.
  GROVE_DETAIL_TARGET_AVX512BF16 static __m512bh pairs(__m512i words) {
    return __builtin_bit_cast(__m512bh, words);
  }

  template <int V, int N>
  GROVE_DETAIL_TARGET_AVX512BF16 static void run(Index kc2, const std::uint32_t* a,
                                                 const std::uint32_t* b, float* c, Index ldc,
                                                 float alpha, Index rows, Index cols,
                                                 bool overwrite) {
    __m512 acc[V][N];
#pragma GCC unroll 16
    for (int j = 0; j < N; ++j)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[v][j] = _mm512_setzero_ps();
    for (Index q = 0; q < kc2; ++q, a += MR, b += NR) {
      __m512bh av[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) av[v] = pairs(_mm512_loadu_si512(a + LANES * v));
#pragma GCC unroll 16
      for (int j = 0; j < N; ++j) {
        const __m512bh bj = pairs(_mm512_set1_epi32(static_cast<int>(b[j])));
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[v][j] = _mm512_dpbf16_ps(acc[v][j], av[v], bj);
      }
    }
    const __m512 va = _mm512_set1_ps(alpha);
    if (rows == LANES * V && cols == N) {
#pragma GCC unroll 16
      for (int j = 0; j < N; ++j)
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) {
          float* cj = c + j * ldc + LANES * v;
          _mm512_storeu_ps(cj, overwrite ? _mm512_mul_ps(va, acc[v][j])
                                         : _mm512_fmadd_ps(va, acc[v][j], _mm512_loadu_ps(cj)));
        }
      return;
    }
    __mmask16 m[V];
    for (int v = 0; v < V; ++v) m[v] = lanes(rows - LANES * v);
#pragma GCC unroll 16
    for (int j = 0; j < N; ++j) {
      if (j >= cols) break;
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        float* cj = c + j * ldc + LANES * v;
        const __m512 old = overwrite ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m[v], cj);
        _mm512_mask_storeu_ps(cj, m[v], _mm512_fmadd_ps(va, acc[v][j], old));
      }
    }
  }
};

/// C += alpha * op(A) op(B) (or = when `overwrite`) with op(A) and op(B) rounded to bfloat16, on
/// this CPU's AVX512-BF16 units: gemm_with's contract. The driver and the packing are inlined
/// here, and so compiled for AVX512-BF16.
template <bool TA, bool TB>
GROVE_DETAIL_TARGET_AVX512BF16 __attribute__((flatten)) void gemm(
    Index m, Index n, Index k, const float* a, Index lda, const float* b, Index ldb, float* c,
    Index ldc, float alpha, bool overwrite, std::uint32_t* packed_a, std::uint32_t* packed_b) {
  gemm_with<native, TA, TB>(m, n, k, a, lda, b, ldb, c, ldc, alpha, overwrite, packed_a, packed_b);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif  // defined(GROVE_NN_SGEMM_AVX512BF16)

}  // namespace grove::nn::detail::avx512bf16
