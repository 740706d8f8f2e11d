// grove/nn/detail/sgemm_avx2.hpp: grove's own single-precision GEMM for CPUs with AVX2 and FMA3
// but not AVX-512F (which run detail/sgemm_avx512.hpp), such as AMD's Zen 1-3 and Intel's
// client cores.
//
// Like the AVX-512 kernel, its functions carry a target attribute (they are compiled for
// AVX2+FMA whatever the build targets) and available() asks the CPU at run time whether they may
// run. Define GROVE_NO_DISPATCH to leave them out: the products then run Eigen's kernel.
//
// The structure is the classic one (Goto's, as in BLIS and OpenBLAS), the same as the AVX-512
// kernel's: for each kc-deep slab of the inner dimension, op(B)'s slab is packed into NR-column
// slivers, then op(A)'s slab, mc rows at a time, into MR-row slivers; the micro-kernel multiplies
// one A sliver by one B sliver into an MR x NR block of C held in registers. The block is 16 x 6:
// two 8-float vectors per column times 6 columns is 12 of the 16 vector registers, which leaves
// two for the A vectors and one for a broadcast of B; each step is 2 loads and 6 broadcasts for
// 12 FMAs, so the two FMA pipes, not the loads, set the pace. Partial slivers at the edges are
// zero-padded in the packed buffers; the last partial sliver of rows (8 or fewer) and of columns
// (4 or 2 or fewer) runs a narrower micro-kernel so as not to multiply the padding.
//
// The blocking is not a constant: it follows the cache sizes that the CPU reports, as
// sgemm_blocking.hpp describes.
//
// The result is C += alpha * op(A) op(B), computed in a fixed order (for each element: the kc
// slabs in order, each summed in order of its steps, which depend on k and the cache sizes only),
// so a given product gives the same bits on every run.
//
// op(B) is read where it is, not packed, when it is not transposed (the broadcasts then come from
// NR column streams, whose lines stay in the cache as a packed sliver's do) and when the product
// has at most MR rows (so reads op(B) only once): packing it was a visible part of the MLP's
// products, and on the thin ones it cost more than the product.
//
// With Round (gemm<TA, TB, true>: nn::precision_policy's bf16 compute), the packing routines round
// each element of op(A) and op(B) to bfloat16 as they copy it (grove/detail/bf16.hpp, the same
// bits as round_to_bf16), and the rest is the float kernel unchanged: the result is, bit for bit,
// the float product of the rounded operands, for about the cost of the float product (each
// element is packed once and used many times).
#pragma once

#include <algorithm>
#include <cstddef>
#include <grove/detail/bf16.hpp>
#include <grove/detail/cpu.hpp>
#include <grove/nn/detail/sgemm_blocking.hpp>

#if GROVE_DETAIL_DISPATCH && defined(__x86_64__)
#define GROVE_NN_SGEMM_AVX2 1
#include <immintrin.h>
#endif

namespace grove::nn::detail::avx2 {

using Index = std::ptrdiff_t;

/// The micro-kernel's block of C: MR rows (two vectors of 8) by NR columns.
inline constexpr Index MR = 16, NR = 6;

using sgemm::Blocking;
using sgemm::ceil_div;
using sgemm::round_up;

/// The kernel's blocking (sgemm_blocking.hpp).
using blocks = sgemm::blocking_of<MR, NR>;

/// How many steps ahead the micro-kernel prefetches a transposed op(B) read in place.
inline constexpr Index prefetch_row_steps = 16;

/// The slab depth for a transposed op(B) read in place (a product of at most MR rows): each step
/// of a sliver of columns is a line of op(B) that the next slivers read again, so a slab's lines
/// take a quarter of L1d (the kernel's own blocking would let them fall to L3 between slivers).
inline Index thin_slab_depth(Index k) {
  static const Index rows = std::max<Index>(
      16, static_cast<Index>(grove::detail::this_cpu_caches().l1d) / 4 / 64 / 8 * 8);
  return std::min(blocks::slab_depth(k), rows);
}

/// Whether this kernel computes an m x n x k slice whose inputs are rounded to bfloat16 (gemm<TA,
/// TB, true>); otherwise Eigen's kernel multiplies rounded copies of the slice's operands
/// (gemm.hpp). Not slices of at most MR rows: rounding must pack op(B), which such a slice reads
/// only once, and on the MLP's thin products (the classifier's last layer and its weight
/// gradient) Eigen's kernel on the copies, copying included, was faster than this kernel rounding
/// as it packs, with -march=native and without. Float slices of any shape run this kernel.
inline bool suits_bf16(Index m, Index /*n*/, Index /*k*/) {
  return m > MR;
}

#if defined(GROVE_NN_SGEMM_AVX2)

#define GROVE_NN_TARGET_AVX2 __attribute__((target("avx2,fma")))

/// Whether this CPU runs AVX2 and FMA3 instructions (and so this kernel).
inline bool available() noexcept {
#if defined(__AVX2__) && defined(__FMA__)
  return true;
#else
  return grove::detail::this_cpu().avx2_fma;
#endif
}

/// A lane mask with the first `count` of 8 lanes set (count may be <= 0 or > 8).
GROVE_NN_TARGET_AVX2 inline __m256i lanes(Index count) {
  const Index c = std::clamp<Index>(count, 0, 8);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(c)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/// x, or x rounded to bfloat16 when Round.
template <bool Round>
GROVE_ALWAYS_INLINE GROVE_NN_TARGET_AVX2 __m256 rounded(__m256 x) {
  if constexpr (Round)
    return grove::detail::round_to_bf16_avx2(x);
  else
    return x;
}

/// Transposes the 8 x 8 floats in r (r[i] is row i) in place: afterwards r[j] is column j.
GROVE_NN_TARGET_AVX2 inline void transpose8(__m256 r[8]) {
  __m256 t[8], s[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 0-3 (h = 0) and 4-7
    const __m256* u = t + 4 * h;
    s[4 * h] = _mm256_shuffle_ps(u[0], u[2], 0x44);
    s[4 * h + 1] = _mm256_shuffle_ps(u[0], u[2], 0xEE);
    s[4 * h + 2] = _mm256_shuffle_ps(u[1], u[3], 0x44);
    s[4 * h + 3] = _mm256_shuffle_ps(u[1], u[3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x31);
  }
}

/// Packs `count` vectors that run along the inner dimension (vector r starts at src + r * ld and
/// has kc floats) as W-wide steps: dst[p * W + r] = src[r * ld + p] (rounded to bfloat16 when
/// Round), zero for r in [count, W).
template <Index W, bool Round = false>
GROVE_NN_TARGET_AVX2 void pack_transposed(const float* src, Index ld, Index count, Index kc,
                                          float* dst) {
  for (Index r0 = 0; r0 < W; r0 += 8) {
    const __m256i store = lanes(W - r0);
    const Index rows = std::min<Index>(8, count - r0);
    if (rows <= 0) {
      for (Index p = 0; p < kc; ++p)
        _mm256_maskstore_ps(dst + p * W + r0, store, _mm256_setzero_ps());
      continue;
    }
    for (Index p0 = 0; p0 < kc; p0 += 8) {
      const Index steps = std::min<Index>(8, kc - p0);
      __m256 r[8];
      if (steps == 8) {
        for (Index i = 0; i < 8; ++i)
          r[i] = i < rows ? _mm256_loadu_ps(src + (r0 + i) * ld + p0) : _mm256_setzero_ps();
      } else {
        const __m256i load = lanes(steps);
        for (Index i = 0; i < 8; ++i)
          r[i] =
              i < rows ? _mm256_maskload_ps(src + (r0 + i) * ld + p0, load) : _mm256_setzero_ps();
      }
      transpose8(r);
      if constexpr (Round)
        for (Index q = 0; q < steps; ++q) r[q] = rounded<Round>(r[q]);
      if constexpr (W % 8 == 0) {
        for (Index q = 0; q < steps; ++q) _mm256_storeu_ps(dst + (p0 + q) * W + r0, r[q]);
      } else {
        for (Index q = 0; q < steps; ++q) _mm256_maskstore_ps(dst + (p0 + q) * W + r0, store, r[q]);
      }
    }
  }
}

/// Packs op(A)[0:mc, 0:kc] (a points at its first element) into MR-row slivers of kc steps,
/// rounded to bfloat16 when Round.
template <bool TA, bool Round = false>
GROVE_NN_TARGET_AVX2 void pack_a(const float* a, Index lda, Index mc, Index kc, float* dst) {
  if constexpr (TA) {  // op(A)(i, p) = A[p + i * lda]: rows run along the inner dimension
    for (Index i = 0; i < mc; i += MR, dst += kc * MR)
      pack_transposed<MR, Round>(a + i * lda, lda, std::min(MR, mc - i), kc, dst);
  } else {  // op(A)(i, p) = A[i + p * lda]: each step's rows are contiguous
    // Step by step, all slivers at once: the reads run down whole columns of A.
    const Index full = mc / MR, rest = mc - full * MR;
    const __m256i m0 = lanes(rest), m1 = lanes(rest - 8);
    for (Index p = 0; p < kc; ++p) {
      const float* s = a + p * lda;
      float* d = dst + p * MR;
      for (Index i = 0; i < full; ++i, s += MR, d += kc * MR) {
        _mm256_storeu_ps(d, rounded<Round>(_mm256_loadu_ps(s)));
        _mm256_storeu_ps(d + 8, rounded<Round>(_mm256_loadu_ps(s + 8)));
      }
      if (rest > 0) {
        _mm256_storeu_ps(d, rounded<Round>(_mm256_maskload_ps(s, m0)));
        _mm256_storeu_ps(d + 8, rounded<Round>(_mm256_maskload_ps(s + 8, m1)));
      }
    }
  }
}

/// Packs op(B)[0:kc, 0:nc] (b points at its first element) into NR-column slivers of kc steps,
/// rounded to bfloat16 when Round.
template <bool TB, bool Round = false>
GROVE_NN_TARGET_AVX2 void pack_b(const float* b, Index ldb, Index kc, Index nc, float* dst) {
  for (Index j = 0; j < nc; j += NR, dst += kc * NR) {
    const Index cols = std::min(NR, nc - j);
    if constexpr (TB) {  // op(B)(p, j) = B[j + p * ldb]: each step's columns are contiguous
      const __m256i m = lanes(cols), store = lanes(NR);
      for (Index p = 0; p < kc; ++p)
        _mm256_maskstore_ps(dst + p * NR, store,
                            rounded<Round>(_mm256_maskload_ps(b + j + p * ldb, m)));
    } else {  // op(B)(p, j) = B[p + j * ldb]: columns run along the inner dimension
      pack_transposed<NR, Round>(b + j * ldb, ldb, cols, kc, dst);
    }
  }
}

/// Copies the rows x cols column-major block at src (column stride ld) to dst (column stride
/// rows), each element rounded to bfloat16: the rounded copies that Eigen's kernel multiplies
/// (gemm.hpp).
GROVE_NN_TARGET_AVX2 inline void round_copy(const float* src, Index ld, Index rows, Index cols,
                                            float* dst) {
  const Index full = rows / 8 * 8;
  const __m256i tail = lanes(rows - full);
  for (Index j = 0; j < cols; ++j, src += ld, dst += rows) {
    for (Index i = 0; i < full; i += 8)
      _mm256_storeu_ps(dst + i, rounded<true>(_mm256_loadu_ps(src + i)));
    if (full < rows)
      _mm256_maskstore_ps(dst + full, tail, rounded<true>(_mm256_maskload_ps(src + full, tail)));
  }
}

/// Where the micro-kernel reads op(B): a packed sliver (NR values a step, zero beyond the block's
/// columns), or op(B) itself in place, untransposed (element (p, j) at b[p + j * ldb]) or
/// transposed (at b[j + p * ldb]).
enum class BLayout { packed, columns, rows };

/// C[0:rows, 0:cols] += alpha * (an A sliver) op(B)[0:kc, 0:cols], or = when `overwrite`; rows <=
/// 8 V and cols <= N <= NR. Only the first V vectors of each A step and N columns of op(B) are
/// multiplied: narrower kernels serve the last, partial slivers of a product. op(B) is read as L
/// says (ldb unused when packed); read in place, its columns beyond cols alias the last one (their
/// sums are not stored).
/// Reading op(B) in place saves packing it: an untransposed op(B)'s broadcasts come from N column
/// streams instead of one, and their lines stay in the cache as long as a packed sliver's do; a
/// product of at most MR rows reads op(B) only once, so packing it could never pay.
template <int V, int N, BLayout L = BLayout::packed>
GROVE_NN_TARGET_AVX2 void micro_kernel(Index kc, const float* a, const float* b, Index ldb,
                                       float* c, Index ldc, float alpha, Index rows, Index cols,
                                       bool overwrite) {
  __m256 acc[V][N];
  // Column j's value at step p is column[j][p * step].
  const float* column[N];
  const Index step = L == BLayout::packed ? NR : L == BLayout::columns ? 1 : ldb;
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j) {
    const Index jj = L == BLayout::packed ? j : std::min<Index>(j, cols - 1);
    column[j] = b + (L == BLayout::columns ? jj * ldb : jj);
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      acc[v][j] = _mm256_setzero_ps();
      // C's block is read (or written) only at the end: start bringing it in now.
      _mm_prefetch(reinterpret_cast<const char*>(c + j * ldc + 8 * v), _MM_HINT_T0);
    }
  }
#pragma GCC unroll 4
  for (Index p = 0; p < kc; ++p, a += MR) {
    __m256 av[V];
    if constexpr (L == BLayout::rows) {  // a row a step, each a new line: fetch them ahead
      const float* ahead = column[0] + (p + prefetch_row_steps) * step;
      _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(ahead + N - 1), _MM_HINT_T0);
    }
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) av[v] = _mm256_loadu_ps(a + 8 * v);
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) {
      const __m256 bj = _mm256_broadcast_ss(column[j] + p * step);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[v][j] = _mm256_fmadd_ps(av[v], bj, acc[v][j]);
    }
  }
  const __m256 va = _mm256_set1_ps(alpha);
  if (rows == 8 * V && cols == N) {
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j)
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) {
        float* cj = c + j * ldc + 8 * v;
        _mm256_storeu_ps(cj, overwrite ? _mm256_mul_ps(va, acc[v][j])
                                       : _mm256_fmadd_ps(va, acc[v][j], _mm256_loadu_ps(cj)));
      }
    return;
  }
  __m256i m[V];
  for (int v = 0; v < V; ++v) m[v] = lanes(rows - 8 * v);
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j) {
    if (j >= cols) break;
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      float* cj = c + j * ldc + 8 * v;
      const __m256 old = overwrite ? _mm256_setzero_ps() : _mm256_maskload_ps(cj, m[v]);
      _mm256_maskstore_ps(cj, m[v], _mm256_fmadd_ps(va, acc[v][j], old));
    }
  }
}

/// The micro-kernel for a block of `rows` x `cols` (the narrowest that covers it).
using kernel_fn = void (*)(Index, const float*, const float*, Index, float*, Index, float, Index,
                           Index, bool);
template <BLayout L>
kernel_fn kernel_for(Index rows, Index cols) {
  if (rows > 8)
    return cols > 4   ? micro_kernel<2, 6, L>
           : cols > 2 ? micro_kernel<2, 4, L>
                      : micro_kernel<2, 2, L>;
  return cols > 4   ? micro_kernel<1, 6, L>
         : cols > 2 ? micro_kernel<1, 4, L>
                    : micro_kernel<1, 2, L>;
}

/// C += alpha * op(A) op(B) on one thread, or C = alpha * op(A) op(B) when `overwrite` (C is then
/// not read): op(A) is m x k (a points at its first element, column stride lda, transposed
/// storage when TA), op(B) is k x n likewise, C is m x n with column stride ldc; k > 0. packed_a
/// and packed_b hold at least blocks::packed_a_size(m, k) and blocks::packed_b_size(n, k) floats.
/// With Round, op(A) and op(B) are rounded to bfloat16 first (as they are packed).
template <bool TA, bool TB, bool Round = false>
GROVE_NN_TARGET_AVX2 void gemm(Index m, Index n, Index k, const float* a, Index lda, const float* b,
                               Index ldb, float* c, Index ldc, float alpha, bool overwrite,
                               float* packed_a, float* packed_b) {
  const Index MC = blocks::block_height(m), NC = blocks::here().nc;
  // (With Round as well, so that its result stays the float product of the rounded operands.)
  const Index KC = TB && m <= MR ? thin_slab_depth(k) : blocks::slab_depth(k);
  for (Index jc = 0; jc < n; jc += NC) {
    const Index nc = std::min(NC, n - jc);
    for (Index pc = 0; pc < k; pc += KC) {
      const Index kc = std::min(KC, k - pc);
      // op(B) is read where it is (see micro_kernel) when untransposed, or when the product has
      // a single sliver of rows (so reads op(B) once); unless it must be rounded.
      constexpr BLayout in_place = TB ? BLayout::rows : BLayout::columns;
      const bool packed = Round || (TB && m > MR);
      const float* const slab = TB ? b + jc + pc * ldb : b + pc + jc * ldb;
      if (packed) pack_b<TB, Round>(slab, ldb, kc, nc, packed_b);
      for (Index ic = 0; ic < m; ic += MC) {
        const Index mc = std::min(MC, m - ic);
        pack_a<TA, Round>(TA ? a + pc + ic * lda : a + ic + pc * lda, lda, mc, kc, packed_a);
        for (Index jr = 0; jr < nc; jr += NR) {
          const Index cols = std::min(NR, nc - jr);
          const float* const sliver = packed ? packed_b + jr * kc : slab + (TB ? jr : jr * ldb);
          for (Index ir = 0; ir < mc; ir += MR) {
            const Index rows = std::min(MR, mc - ir);
            const kernel_fn kernel =
                packed ? kernel_for<BLayout::packed>(rows, cols) : kernel_for<in_place>(rows, cols);
            kernel(kc, packed_a + ir * kc, sliver, ldb, c + (ic + ir) + (jc + jr) * ldc, ldc, alpha,
                   rows, cols, overwrite && pc == 0);
          }
        }
      }
    }
  }
}

#undef GROVE_NN_TARGET_AVX2

#endif  // defined(GROVE_NN_SGEMM_AVX2)

}  // namespace grove::nn::detail::avx2
