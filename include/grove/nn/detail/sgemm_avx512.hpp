// grove/nn/detail/sgemm_avx512.hpp: grove's own single-precision GEMM for CPUs with AVX-512F,
// which runs the MLP's float products on such CPUs.
//
// A header-only library is usually compiled without -march; so, on x86-64 with GCC or Clang, the
// kernel's functions carry a target attribute (they are compiled for AVX-512F whatever the build
// targets) and available() asks the CPU at run time whether they may run (once; a build for an
// AVX-512 CPU needs no question). Define GROVE_NO_DISPATCH to leave them out: the products then
// run Eigen's kernel everywhere.
//
// Why not Eigen's kernel there: Eigen 3.4's AVX-512 gebp kernel keeps a 48 x 4 block of C in 12
// of the 32 vector registers, and it packs its right-hand operand in 4-column slivers; on the
// MLP's products it reaches about three quarters of the FMA peak. This kernel keeps a 32 x 12 block
// of C in 24 registers (two 16-float vectors per column, one broadcast per column and step), which
// needs 14 loads per 24 FMAs and so leaves the FMA units the bottleneck, as they should be.
//
// The structure is the classic one (Goto's, as in BLIS and OpenBLAS): for each kc-deep slab of
// the inner dimension, op(B)'s slab is packed into NR-column slivers (each step's NR values
// contiguous), then op(A)'s slab, mc rows at a time, into MR-row slivers (each step's MR values
// contiguous); the micro-kernel multiplies one A sliver by one B sliver into an MR x NR block of
// C. A B sliver (kc x NR) stays in the L1 cache while the A slivers stream from L2. Operands
// stored the other way round are packed through 16 x 16 in-register transposes. Partial blocks
// at the edges are zero-padded in the packed buffers and written back through lane masks; the
// last, partial sliver of columns runs a narrower micro-kernel (8 or 4 columns) so as not to
// multiply the padding. The blocking follows the cache sizes the CPU reports (sgemm_blocking.hpp),
// as the AVX2 kernel's does.
//
// An untransposed op(B) is not packed: the micro-kernel reads it where it is (see micro_kernel).
//
// Products of at most 16 rows (a classifier's last layer, and its weight gradient) run a thin
// kernel instead: one 16-float vector per column of C, with op(B) read where it is (see
// gemm_thin).
//
// The result is C += alpha * op(A) op(B), computed in a fixed order (for each element: the kc
// slabs in order, each summed in order of its steps, which depend on k and the cache sizes only),
// so a given product gives the same bits on every run.
//
// With Round (gemm<TA, TB, true>: nn::precision_policy's bf16 compute), op(A) and op(B) are
// rounded to bfloat16 as they are packed (grove/detail/bf16.hpp, the same bits as round_to_bf16),
// and the thin kernel reads op(B) from a rounded copy of each slab (NC columns at a time) instead
// of in place; the multiplications are the float kernel's, in the same order, so the result is,
// bit for bit, the float product of the rounded operands.
#pragma once

#include <algorithm>
#include <cstddef>
#include <grove/detail/bf16.hpp>
#include <grove/detail/cpu.hpp>
#include <grove/nn/detail/sgemm_blocking.hpp>
#include <type_traits>

// grove's one dispatch mechanism (grove/detail/cpu.hpp) decides; this kernel is for x86-64 only.
#if GROVE_DETAIL_DISPATCH && defined(__x86_64__)
#define GROVE_NN_SGEMM_AVX512 1
#define GROVE_NN_TARGET_AVX512 GROVE_DETAIL_TARGET_AVX512F
#include <immintrin.h>
#endif

namespace grove::nn::detail::avx512 {

using Index = std::ptrdiff_t;

/// The micro-kernel's block of C: MR rows (two vectors of 16) by NR columns.
/// (Measured on the MLP's products, 64 x 6 and 32 x 14 came out 2-6% slower, 48 x 8 about 10%.)
inline constexpr Index MR = 32, NR = 12;
inline constexpr int V = MR / 16;  // vectors per column of the block
static_assert(MR % 16 == 0 && NR > 8 && NR <= 16, "the packing routines assume these shapes");
/// Products of at most THIN rows run the thin kernel: one 16-row vector per column of C.
inline constexpr Index THIN = 16;
/// How far ahead the kernels prefetch what they read next, in steps of the inner dimension:
/// the packed A sliver (micro_kernel), op(B)'s columns read in place (thin_kernel: a 16-step cache
/// line each, so this many floats) and op(B)'s rows read in place when transposed (thin_kernel).
/// Measured on the MLP's products; nearer or farther was slower.
inline constexpr Index prefetch_a_steps = 8, prefetch_column_floats = 64, prefetch_row_steps = 16;

using sgemm::Blocking;
using sgemm::ceil_div;
using sgemm::round_up;

/// The kernel's blocking (sgemm_blocking.hpp); the thin kernel's 16-row sliver fits in the room
/// of one MR-row sliver.
using blocks = sgemm::blocking_of<MR, NR>;

#if defined(GROVE_NN_SGEMM_AVX512)

// GCC 12's own avx512fintrin.h trips -Wmaybe-uninitialized (_mm512_undefined_ps, GCC bug 105593)
// wherever its intrinsics are inlined; the warning is about GCC's header, not this code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

/// Whether this CPU runs AVX-512F instructions (and so this kernel).
inline bool available() noexcept {
#if defined(__AVX512F__)
  return true;
#else
  return grove::detail::this_cpu().avx512f;
#endif
}

/// The first `count` of 16 lanes (count may be <= 0 or > 16).
GROVE_NN_TARGET_AVX512 inline __mmask16 lanes(Index count) {
  if (count <= 0) return 0;
  if (count >= 16) return 0xFFFF;
  return static_cast<__mmask16>((1u << count) - 1u);
}

/// x, or x rounded to bfloat16 when Round.
template <bool Round>
GROVE_ALWAYS_INLINE GROVE_NN_TARGET_AVX512 __m512 rounded(__m512 x) {
  if constexpr (Round)
    return grove::detail::round_to_bf16_avx512(x);
  else
    return x;
}

/// Transposes the 16 x 16 floats in r (r[i] is row i) in place: afterwards r[j] is column j.
GROVE_NN_TARGET_AVX512 inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {  // pairs of rows, interleaved within each 128-bit lane
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // lane L of r[4i + j]: rows 4i..4i+3 of column 4L + j
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  __m512 out[16];
  for (int j = 0; j < 4; ++j) {  // gather lane L of the four row groups into column 4L + j
    const __m512 u0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
    const __m512 u1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);
    const __m512 u2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
    const __m512 u3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
    out[j] = _mm512_shuffle_f32x4(u0, u2, 0x88);
    out[4 + j] = _mm512_shuffle_f32x4(u1, u3, 0x88);
    out[8 + j] = _mm512_shuffle_f32x4(u0, u2, 0xdd);
    out[12 + j] = _mm512_shuffle_f32x4(u1, u3, 0xdd);
  }
  for (int i = 0; i < 16; ++i) r[i] = out[i];
}

/// Writes the transpose of a whole 16 x 16 block (row i of 16 floats at src + i * ld) to dst:
/// column q at dst + q * W, rounded to bfloat16 when Round. Half the shuffles of transpose16 (which
/// runs them all on one port): the first stage is done by the loads, each row's 4-float quarters
/// inserted into the 128-bit lanes where they belong, and then 4 x 4 transposes within the lanes
/// finish it (measured faster on the MLP's transposed weights).
template <Index W, bool Round>
GROVE_NN_TARGET_AVX512 void transpose_block(const float* src, Index ld, float* dst) {
#pragma GCC unroll 4
  for (int quarter = 0; quarter < 4; ++quarter) {
    // x[r], lane L: row 4L + r's floats 4 quarter .. 4 quarter + 3.
    __m512 x[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const float* row = src + r * ld + 4 * quarter;
      __m512 v = _mm512_castps128_ps512(_mm_loadu_ps(row));
      v = _mm512_insertf32x4(v, _mm_loadu_ps(row + 4 * ld), 1);
      v = _mm512_insertf32x4(v, _mm_loadu_ps(row + 8 * ld), 2);
      x[r] = _mm512_insertf32x4(v, _mm_loadu_ps(row + 12 * ld), 3);
    }
    const __m512d t0 = _mm512_castps_pd(_mm512_unpacklo_ps(x[0], x[1]));
    const __m512d t1 = _mm512_castps_pd(_mm512_unpackhi_ps(x[0], x[1]));
    const __m512d t2 = _mm512_castps_pd(_mm512_unpacklo_ps(x[2], x[3]));
    const __m512d t3 = _mm512_castps_pd(_mm512_unpackhi_ps(x[2], x[3]));
    float* out = dst + 4 * quarter * W;
    _mm512_storeu_ps(out, rounded<Round>(_mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2))));
    _mm512_storeu_ps(out + W, rounded<Round>(_mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2))));
    _mm512_storeu_ps(out + 2 * W, rounded<Round>(_mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3))));
    _mm512_storeu_ps(out + 3 * W, rounded<Round>(_mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3))));
  }
}

/// Packs `count` vectors that run along the inner dimension (vector r starts at src + r * ld and
/// has kc floats) as W-wide steps: dst[p * W + r] = src[r * ld + p] (rounded to bfloat16 when
/// Round), zero for r in [count, W).
template <Index W, bool Round = false>
GROVE_NN_TARGET_AVX512 void pack_transposed(const float* src, Index ld, Index count, Index kc,
                                            float* dst) {
  for (Index r0 = 0; r0 < W; r0 += 16) {
    const __mmask16 store = lanes(W - r0);
    const Index rows = std::min<Index>(16, count - r0);
    if (rows <= 0) {
      for (Index p = 0; p < kc; ++p)
        _mm512_mask_storeu_ps(dst + p * W + r0, store, _mm512_setzero_ps());
      continue;
    }
    for (Index p0 = 0; p0 < kc; p0 += 16) {
      const Index steps = std::min<Index>(16, kc - p0);
      if (rows == 16 && steps == 16 && W - r0 >= 16) {
        transpose_block<W, Round>(src + r0 * ld + p0, ld, dst + p0 * W + r0);
        continue;
      }
      const __mmask16 load = lanes(steps);
      __m512 r[16];
      for (Index i = 0; i < 16; ++i)
        r[i] =
            i < rows ? _mm512_maskz_loadu_ps(load, src + (r0 + i) * ld + p0) : _mm512_setzero_ps();
      transpose16(r);
      for (Index q = 0; q < steps; ++q)
        _mm512_mask_storeu_ps(dst + (p0 + q) * W + r0, store, rounded<Round>(r[q]));
    }
  }
}

/// Packs op(A)[0:mc, 0:kc] (a points at its first element) into MR-row slivers of kc steps,
/// rounded to bfloat16 when Round.
template <bool TA, bool Round = false>
GROVE_NN_TARGET_AVX512 void pack_a(const float* a, Index lda, Index mc, Index kc, float* dst) {
  if constexpr (TA) {  // op(A)(i, p) = A[p + i * lda]: rows run along the inner dimension
    for (Index i = 0; i < mc; i += MR, dst += kc * MR)
      pack_transposed<MR, Round>(a + i * lda, lda, std::min(MR, mc - i), kc, dst);
  } else {  // op(A)(i, p) = A[i + p * lda]: each step's rows are contiguous
    // Step by step, all slivers at once: the reads run down whole columns of A (which come from
    // L3 or memory, and the hardware prefetches contiguous runs best); the writes go to the
    // packing buffer, which stays in L2.
    const Index full = mc / MR, rest = mc - full * MR;
    __mmask16 m[V];
    for (int v = 0; v < V; ++v) m[v] = lanes(rest - 16 * v);
    for (Index p = 0; p < kc; ++p) {
      const float* s = a + p * lda;
      float* d = dst + p * MR;
      for (Index i = 0; i < full; ++i, s += MR, d += kc * MR)
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v)
          _mm512_storeu_ps(d + 16 * v, rounded<Round>(_mm512_loadu_ps(s + 16 * v)));
      if (rest > 0)
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v)
          _mm512_storeu_ps(d + 16 * v, rounded<Round>(_mm512_maskz_loadu_ps(m[v], s + 16 * v)));
    }
  }
}

/// Packs op(B)[0:kc, 0:nc] (b points at its first element) into NR-column slivers of kc steps,
/// rounded to bfloat16 when Round.
template <bool TB, bool Round = false>
GROVE_NN_TARGET_AVX512 void pack_b(const float* b, Index ldb, Index kc, Index nc, float* dst) {
  for (Index j = 0; j < nc; j += NR, dst += kc * NR) {
    const Index cols = std::min(NR, nc - j);
    if constexpr (TB) {  // op(B)(p, j) = B[j + p * ldb]: each step's columns are contiguous
      const __mmask16 m = lanes(cols), store = lanes(NR);
      for (Index p = 0; p < kc; ++p)
        _mm512_mask_storeu_ps(dst + p * NR, store,
                              rounded<Round>(_mm512_maskz_loadu_ps(m, b + j + p * ldb)));
    } else {  // op(B)(p, j) = B[p + j * ldb]: columns run along the inner dimension
      pack_transposed<NR, Round>(b + j * ldb, ldb, cols, kc, dst);
    }
  }
}

/// Copies the rows x cols column-major block at src (column stride ld) to dst (column stride
/// rows), each element rounded to bfloat16.
GROVE_NN_TARGET_AVX512 inline void round_copy(const float* src, Index ld, Index rows, Index cols,
                                              float* dst) {
  const Index full = rows / 16 * 16;
  const __mmask16 tail = lanes(rows - full);
  for (Index j = 0; j < cols; ++j, src += ld, dst += rows) {
    for (Index i = 0; i < full; i += 16)
      _mm512_storeu_ps(dst + i, rounded<true>(_mm512_loadu_ps(src + i)));
    if (full < rows)
      _mm512_mask_storeu_ps(dst + full, tail,
                            rounded<true>(_mm512_maskz_loadu_ps(tail, src + full)));
  }
}

/// C[0:rows, 0:cols] += alpha * (an A sliver) op(B)[0:kc, 0:cols], or = when `overwrite` (C is
/// then not read); rows <= MR and cols <= N <= NR. Only N columns of op(B) are multiplied: a
/// narrower N serves the last, partial sliver of a product. op(B) is either a packed sliver (b,
/// NR values a step, zero beyond cols: ldb unused) or, when InPlace, op(B) itself, not transposed:
/// element (p, j) at b[p + j * ldb], whose columns beyond cols alias the last one (their sums are
/// not stored).
/// Reading op(B) in place saves packing it (a visible part of the MLP's untransposed products):
/// the broadcasts come from N column streams instead of one, and their lines stay in the cache
/// as long as a packed sliver's do.
template <int N, bool InPlace = false>
GROVE_NN_TARGET_AVX512 void micro_kernel(Index kc, const float* a, const float* b, Index ldb,
                                         float* c, Index ldc, float alpha, Index rows, Index cols,
                                         bool overwrite) {
  __m512 acc[V][N];
  const float* column[N];
#pragma GCC unroll 16
  for (int j = 0; j < N; ++j) {
    column[j] = InPlace ? b + std::min<Index>(j, cols - 1) * ldb : b + j;
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      acc[v][j] = _mm512_setzero_ps();
      // C's block is read (or written) only at the end: start bringing it in now.
      _mm_prefetch(reinterpret_cast<const char*>(c + j * ldc + 16 * v), _MM_HINT_T0);
    }
  }
  constexpr Index step = InPlace ? 1 : NR;  // between one step's op(B) values and the next's
  for (Index p = 0; p < kc; ++p, a += MR) {
    __m512 av[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      _mm_prefetch(reinterpret_cast<const char*>(a + prefetch_a_steps * MR + 16 * v), _MM_HINT_T0);
      av[v] = _mm512_loadu_ps(a + 16 * v);
    }
#pragma GCC unroll 16
    for (int j = 0; j < N; ++j) {
      const __m512 bj = _mm512_set1_ps(column[j][p * step]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[v][j] = _mm512_fmadd_ps(av[v], bj, acc[v][j]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha);
  if (rows == MR && cols == N) {
#pragma GCC unroll 16
    for (int j = 0; j < N; ++j)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        float* cj = c + j * ldc + 16 * v;
        _mm512_storeu_ps(cj, overwrite ? _mm512_mul_ps(va, acc[v][j])
                                       : _mm512_fmadd_ps(va, acc[v][j], _mm512_loadu_ps(cj)));
      }
    return;
  }
  __mmask16 m[V];
  for (int v = 0; v < V; ++v) m[v] = lanes(rows - 16 * v);
#pragma GCC unroll 16
  for (int j = 0; j < N; ++j) {
    if (j >= cols) break;
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      float* cj = c + j * ldc + 16 * v;
      const __m512 old = overwrite ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m[v], cj);
      _mm512_mask_storeu_ps(cj, m[v], _mm512_fmadd_ps(va, acc[v][j], old));
    }
  }
}

/// C[0:rows, 0:N] += alpha * (a 16-row A sliver) op(B)[0:kc, 0:N], or = when `overwrite`; rows
/// <= 16. op(B) is read where it is, not packed: element (p, j) at b[p + j * ldb], or at
/// b[j + p * ldb] when TB. Each step is one A vector and N broadcasts for N FMAs.
template <int N, bool TB>
GROVE_NN_TARGET_AVX512 void thin_kernel(Index kc, const float* a, const float* b, Index ldb,
                                        float* c, Index ldc, float alpha, Index rows,
                                        bool overwrite) {
  const Index col_stride = TB ? 1 : ldb, step_stride = TB ? ldb : 1;
  __m512 acc[N];
#pragma GCC unroll 16
  for (int j = 0; j < N; ++j) acc[j] = _mm512_setzero_ps();
  for (Index p0 = 0; p0 < kc; p0 += 16) {
    const Index p1 = std::min<Index>(kc, p0 + 16);
    if constexpr (!TB) {
#pragma GCC unroll 16
      for (int j = 0; j < N; ++j)
        _mm_prefetch(reinterpret_cast<const char*>(b + j * col_stride + prefetch_column_floats),
                     _MM_HINT_T0);
    }
    for (Index p = p0; p < p1; ++p, a += THIN, b += step_stride) {
      if constexpr (TB) {
        // The step's N values may straddle two lines.
        const float* ahead = b + prefetch_row_steps * step_stride;
        _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(ahead + N - 1), _MM_HINT_T0);
      }
      const __m512 av = _mm512_loadu_ps(a);
#pragma GCC unroll 16
      for (int j = 0; j < N; ++j)
        acc[j] = _mm512_fmadd_ps(av, _mm512_set1_ps(b[j * col_stride]), acc[j]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha);
  const __mmask16 m = lanes(rows);
#pragma GCC unroll 16
  for (int j = 0; j < N; ++j) {
    float* cj = c + j * ldc;
    const __m512 old = overwrite ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, cj);
    _mm512_mask_storeu_ps(cj, m, _mm512_fmadd_ps(va, acc[j], old));
  }
}

/// gemm (below) for m <= THIN rows: for each slab, op(A)'s rows are packed into one zero-padded
/// 16-row sliver, then thin_kernel runs over the columns of C, NR at a time (the last few 8, 4, 2
/// and 1 at a time: op(B) is read in place, so there is no padding to multiply).
/// Why not the general kernel: its 32-row block leaves most of each FMA unused on 10 rows (a
/// classifier's last layer), and packing the wide operand took longer than the product itself.
/// With Round, op(B) is read from a rounded copy of the slab, NC columns at a time, in packed_b: a
/// plain copy in op(B)'s own layout (rounding each broadcast instead would cost more than its FMA),
/// and each column's sums are the same as in place.
template <bool TA, bool TB, bool Round = false>
GROVE_NN_TARGET_AVX512 void gemm_thin(Index m, Index n, Index k, const float* a, Index lda,
                                      const float* b, Index ldb, float* c, Index ldc, float alpha,
                                      bool overwrite, float* packed_a, float* packed_b) {
  const Index KC = blocks::slab_depth(k);
  const __mmask16 rows = lanes(m);
  for (Index pc = 0; pc < k; pc += KC) {
    const Index kc = std::min(KC, k - pc);
    if constexpr (TA) {
      pack_transposed<THIN, Round>(a + pc, lda, m, kc, packed_a);
    } else {
      for (Index p = 0; p < kc; ++p)
        _mm512_storeu_ps(packed_a + p * THIN,
                         rounded<Round>(_mm512_maskz_loadu_ps(rows, a + (pc + p) * lda)));
    }
    const bool first = overwrite && pc == 0;
    // Columns [0, cols) of C (at cj) from op(B)'s slab at bs, whose element (p, j) is at
    // bs[p + j * ld], or at bs[j + p * ld] when TB.
    const auto columns = [&](const float* bs, Index ld, Index cols, float* cj) {
      const auto run = [&](auto width, Index j) {
        constexpr int W = decltype(width)::value;
        thin_kernel<W, TB>(kc, packed_a, TB ? bs + j : bs + j * ld, ld, cj + j * ldc, ldc, alpha, m,
                           first);
      };
      Index j = 0;
      for (; j + NR <= cols; j += NR) run(std::integral_constant<int, NR>{}, j);
      if (cols - j >= 8) run(std::integral_constant<int, 8>{}, j), j += 8;
      if (cols - j >= 4) run(std::integral_constant<int, 4>{}, j), j += 4;
      if (cols - j >= 2) run(std::integral_constant<int, 2>{}, j), j += 2;
      if (cols - j >= 1) run(std::integral_constant<int, 1>{}, j);
    };
    if constexpr (!Round) {
      (void)packed_b;
      columns(TB ? b + pc * ldb : b + pc, ldb, n, c);
    } else {
      const Index NC = blocks::here().nc;
      for (Index jc = 0; jc < n; jc += NC) {
        const Index nc = std::min(NC, n - jc);
        if constexpr (TB) {  // kc rows of nc contiguous columns
          round_copy(b + jc + pc * ldb, ldb, nc, kc, packed_b);
          columns(packed_b, nc, nc, c + jc * ldc);
        } else {  // nc columns of kc contiguous steps
          round_copy(b + pc + jc * ldb, ldb, kc, nc, packed_b);
          columns(packed_b, kc, nc, c + jc * ldc);
        }
      }
    }
  }
}

/// C += alpha * op(A) op(B) on one thread, or C = alpha * op(A) op(B) when `overwrite` (C is then
/// not read): op(A) is m x k (a points at its first element, column stride lda, transposed
/// storage when TA), op(B) is k x n likewise, C is m x n with column stride ldc; k > 0. packed_a
/// and packed_b hold at least blocks::packed_a_size(m, k) and blocks::packed_b_size(n, k) floats.
/// With Round, op(A) and op(B) are rounded to bfloat16 first (as they are packed or copied).
template <bool TA, bool TB, bool Round = false>
GROVE_NN_TARGET_AVX512 void gemm(Index m, Index n, Index k, const float* a, Index lda,
                                 const float* b, Index ldb, float* c, Index ldc, float alpha,
                                 bool overwrite, float* packed_a, float* packed_b) {
  if (m <= THIN) {
    gemm_thin<TA, TB, Round>(m, n, k, a, lda, b, ldb, c, ldc, alpha, overwrite, packed_a, packed_b);
    return;
  }
  const Index KC = blocks::slab_depth(k), MC = blocks::block_height(m), NC = blocks::here().nc;
  for (Index jc = 0; jc < n; jc += NC) {
    const Index nc = std::min(NC, n - jc);
    for (Index pc = 0; pc < k; pc += KC) {
      const Index kc = std::min(KC, k - pc);
      // op(B) untransposed is read where it is (see micro_kernel), unless it must be rounded.
      constexpr bool in_place = !TB && !Round;
      const float* const slab = TB ? b + jc + pc * ldb : b + pc + jc * ldb;
      if constexpr (!in_place) pack_b<TB, Round>(slab, ldb, kc, nc, packed_b);
      for (Index ic = 0; ic < m; ic += MC) {
        const Index mc = std::min(MC, m - ic);
        pack_a<TA, Round>(TA ? a + pc + ic * lda : a + ic + pc * lda, lda, mc, kc, packed_a);
        for (Index jr = 0; jr < nc; jr += NR) {
          const Index cols = std::min(NR, nc - jr);
          const auto kernel = cols > 8   ? micro_kernel<NR, in_place>
                              : cols > 4 ? micro_kernel<8, in_place>
                                         : micro_kernel<4, in_place>;
          const float* const sliver = in_place ? slab + jr * ldb : packed_b + jr * kc;
          for (Index ir = 0; ir < mc; ir += MR)
            kernel(kc, packed_a + ir * kc, sliver, ldb, c + (ic + ir) + (jc + jr) * ldc, ldc, alpha,
                   std::min(MR, mc - ir), cols, overwrite && pc == 0);
        }
      }
    }
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#undef GROVE_NN_TARGET_AVX512

#endif  // defined(GROVE_NN_SGEMM_AVX512)

}  // namespace grove::nn::detail::avx512
