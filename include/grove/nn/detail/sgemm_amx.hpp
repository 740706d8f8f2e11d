// grove/nn/detail/sgemm_amx.hpp: grove's bfloat16 GEMM on Intel's AMX tile unit: op(A) and op(B)
// rounded to bfloat16, their products summed in float by tdpbf16ps.
//
// gemm.hpp runs it for float products under Precision::bf16 wherever the CPU has AMX-BF16 and the
// operating system grants this process the tile state (Intel's Xeons from Sapphire Rapids on);
// elsewhere, or when the grant is refused, the next bf16 path runs (see gemm.hpp).
//
// AMX has eight tile registers of up to 16 rows of 64 bytes. tdpbf16ps multiplies a 16 x 32 bf16
// tile (row-major, each row 16 pairs of consecutive steps of the inner dimension) by a 32 x 16 one
// held as 16 rows of 16 pairs (row q holds, for each of 16 columns, the pair of steps 2q, 2q + 1)
// into a 16 x 16 float tile. A tile is stored row by row, and grove's C is column-major; so the
// tiles hold C transposed: a float tile's row r is 16 consecutive rows of one column of C, the
// row-major operand holds op(B)^T (a column of op(B) per row) and the paired one op(A)^T (for
// each pair of steps, 16 rows of op(A)). That last layout is the AVX512-BF16 kernel's packed A
// sliver (sgemm_avx512bf16.hpp's pair_bits words, MR = 32 a pair), of which a tile load takes 16
// rows at a time; op(B) is packed here a column at a time, its pairs of steps contiguous. Both
// are padded with zero to whole tiles: 32 rows of op(A) and 32 columns of op(B) per sliver, and a
// slab depth of whole 16-pair steps.
//
// The micro-kernel keeps a 32 x 32 block of C in four float tiles, with two tiles of each operand
// (all eight registers), and runs the slab's depth. A whole block with alpha 1 (every product of
// grove's passes) is loaded from C into the tiles and stored back, a tile row being a stretch of
// one column of C; the other blocks are stored to a buffer on the stack and added to C with
// AVX-512 (alpha, masked lanes at the edges). The 10-row classifier layer and other blocks of at
// most 16 rows or columns use half or a quarter of the tiles.
//
// The blocking is the float kernels' (sgemm_blocking.hpp) for elements of two bytes, with slabs
// twice as deep, of a multiple of 32 steps (blocks::slab_depth). GemmScratch's packing buffers
// start on a 64-byte boundary, so that each tile row is one cache line.
//
// tdpbf16ps reads subnormal bf16 inputs as zero and flushes subnormal results to zero, like
// vdpbf16ps. The emulated micro-kernel below computes what the instruction set manual describes
// (each product added with one rounding, the low halves' first), for tests on CPUs without AMX;
// the hardware sums in a way of its own (on the Xeon measured, neither one rounding per product,
// in either order, nor one per pair, nor one for the whole sum matched its bits), so the two
// agree to the float bound, not bit for bit. As for the AVX512-BF16 kernel, a given product gives
// the same bits on every run.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <grove/detail/cpu.hpp>
#include <grove/nn/detail/sgemm_avx512bf16.hpp>
#include <grove/nn/detail/sgemm_blocking.hpp>

#if defined(GROVE_NN_SGEMM_AVX512BF16) && defined(__linux__) && defined(__x86_64__)
#define GROVE_NN_SGEMM_AMX 1
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace grove::nn::detail::amx {

using Index = std::ptrdiff_t;

/// The micro-kernel's block of C: MR rows by NR columns, two tiles of 16 each way.
inline constexpr Index MR = 32, NR = 32;
/// A tile's rows (and float columns); pairs of steps per tile row.
inline constexpr Index TILE = 16;

using sgemm::ceil_div;
using sgemm::round_up;

static_assert(MR == avx512bf16::MR, "grove: AMX reads the AVX512-BF16 kernel's packed A slivers");

/// The kernel's blocking for two-byte elements; slabs are whole tiles deep.
struct blocks {
  using base = sgemm::blocking_of<MR, NR, 2>;
  static const sgemm::Blocking& here() noexcept { return base::here(); }
  /// The depth of each slab for an inner dimension k > 0: equal slabs of at most twice kc steps
  /// (but at least one tile), rounded up to whole tiles (32 steps); the last slab may be shorter.
  /// Twice: a B sliver then fills L1, but each slab is a pass over C, and on a Xeon with AMX the
  /// MLP's 512-deep products ran 10% faster in one slab than in two.
  static Index slab_depth(Index k) {
    const Index kc = std::max<Index>(2 * here().kc, 2 * TILE);
    return round_up(ceil_div(k, ceil_div(k, kc)), 2 * TILE);
  }
  static Index block_height(Index m) { return base::block_height(m); }
  /// Pairs of steps a slab of depth kc occupies in the packed buffers (whole tiles).
  static Index packed_pairs(Index kc) { return round_up(ceil_div(kc, 2), TILE); }
  /// 32-bit words of packing buffer an m x n x k product needs for op(A) and op(B).
  static Index packed_a_size(Index m, Index k) {
    if (m <= 0 || k <= 0) return 0;
    return packed_pairs(std::min(k, slab_depth(k))) * round_up(block_height(m), MR);
  }
  static Index packed_b_size(Index n, Index k) {
    if (n <= 0 || k <= 0) return 0;
    return packed_pairs(std::min(k, slab_depth(k))) * round_up(std::min(n, here().nc), NR);
  }
};

/// Packs op(A)[0:mc, 0:kc] into MR-row slivers of kc2p pairs of steps (the AVX512-BF16 kernel's
/// layout, zero beyond kc and beyond mc), sliver after sliver.
template <bool TA>
void pack_a(const float* a, Index lda, Index mc, Index kc, Index kc2p, std::uint32_t* dst) {
  const Index kc2 = ceil_div(kc, 2);
  for (Index i = 0; i < mc; i += MR, dst += kc2p * MR) {
    const Index rows = std::min(MR, mc - i);
    if constexpr (TA) {
      avx512bf16::pack_pairs_transposed<MR>(a + i * lda, lda, rows, kc, dst);
    } else {
      for (Index q = 0; q < kc2; ++q) {
        const float* s0 = a + i + 2 * q * lda;
        std::uint32_t* d = dst + q * MR;
        if (2 * q + 1 < kc) {
          const float* s1 = s0 + lda;
          for (Index r = 0; r < rows; ++r) d[r] = avx512bf16::pair_bits(s0[r], s1[r]);
        } else {
          for (Index r = 0; r < rows; ++r) d[r] = avx512bf16::pair_bits(s0[r], 0.f);
        }
        std::fill(d + rows, d + MR, 0u);
      }
    }
    std::fill(dst + kc2 * MR, dst + kc2p * MR, 0u);
  }
}

/// Packs op(B)[0:kc, 0:nc] into NR-column slivers; in a sliver, column j's kc2p pairs of steps
/// are contiguous (words j * kc2p ...), zero beyond kc and beyond nc.
template <bool TB>
void pack_b(const float* b, Index ldb, Index kc, Index nc, Index kc2p, std::uint32_t* dst) {
  const Index kc2 = ceil_div(kc, 2), full = kc / 2;
  for (Index j0 = 0; j0 < nc; j0 += NR, dst += kc2p * NR) {
    const Index cols = std::min(NR, nc - j0);
    if constexpr (TB) {  // op(B)(p, j) = B[j + p * ldb]: each step's columns are contiguous
      for (Index q = 0; q < kc2; ++q) {
        const float* s0 = b + j0 + 2 * q * ldb;
        if (2 * q + 1 < kc) {
          const float* s1 = s0 + ldb;
          for (Index c = 0; c < cols; ++c) dst[c * kc2p + q] = avx512bf16::pair_bits(s0[c], s1[c]);
        } else {
          for (Index c = 0; c < cols; ++c) dst[c * kc2p + q] = avx512bf16::pair_bits(s0[c], 0.f);
        }
      }
    } else {  // op(B)(p, j) = B[p + j * ldb]: columns run along the inner dimension
      for (Index c = 0; c < cols; ++c) {
        const float* s = b + (j0 + c) * ldb;
        std::uint32_t* d = dst + c * kc2p;
        for (Index q = 0; q < full; ++q) d[q] = avx512bf16::pair_bits(s[2 * q], s[2 * q + 1]);
        if (full < kc2) d[full] = avx512bf16::pair_bits(s[kc - 1], 0.f);
      }
    }
    for (Index c = 0; c < cols; ++c) std::fill(dst + c * kc2p + kc2, dst + (c + 1) * kc2p, 0u);
    std::fill(dst + cols * kc2p, dst + NR * kc2p, 0u);
  }
}

/// A micro-kernel: C[0:rows, 0:cols] += alpha * (an A sliver) (a B sliver), kc2p pairs of steps
/// deep (a multiple of 16), or = when `overwrite`; rows <= 16 MT, cols <= 16 NT.
using kernel_fn = void (*)(Index kc2p, const std::uint32_t* a, const std::uint32_t* b, float* c,
                           Index ldc, float alpha, Index rows, Index cols, bool overwrite);

template <class Kernel>
kernel_fn kernel_for(Index rows, Index cols) {
  if (rows > TILE) return cols > TILE ? &Kernel::template run<2, 2> : &Kernel::template run<2, 1>;
  return cols > TILE ? &Kernel::template run<1, 2> : &Kernel::template run<1, 1>;
}

/// The packing routines above, for the driver (the native kernel packs with vector code below;
/// both write the same words).
struct scalar_packing {
  template <bool TA>
  static void a(const float* a, Index lda, Index mc, Index kc, Index kc2p, std::uint32_t* dst) {
    pack_a<TA>(a, lda, mc, kc, kc2p, dst);
  }
  template <bool TB>
  static void b(const float* b, Index ldb, Index kc, Index nc, Index kc2p, std::uint32_t* dst) {
    pack_b<TB>(b, ldb, kc, nc, kc2p, dst);
  }
};

/// The driver, on Kernel's micro-kernels, with sgemm_avx512bf16.hpp's gemm_with contract:
/// C += alpha * op(A) op(B) on one thread, or C = alpha * op(A) op(B) when `overwrite`; k > 0;
/// packed_a and packed_b hold at least blocks::packed_a_size(m, k) and packed_b_size(n, k) words.
template <class Kernel, class Packing, bool TA, bool TB>
void gemm_with(Index m, Index n, Index k, const float* a, Index lda, const float* b, Index ldb,
               float* c, Index ldc, float alpha, bool overwrite, std::uint32_t* packed_a,
               std::uint32_t* packed_b) {
  const Index KC = blocks::slab_depth(k), MC = blocks::block_height(m), NC = blocks::here().nc;
  for (Index jc = 0; jc < n; jc += NC) {
    const Index nc = std::min(NC, n - jc);
    for (Index pc = 0; pc < k; pc += KC) {
      const Index kc = std::min(KC, k - pc), kc2p = blocks::packed_pairs(kc);
      Packing::template b<TB>(TB ? b + jc + pc * ldb : b + pc + jc * ldb, ldb, kc, nc, kc2p,
                              packed_b);
      for (Index ic = 0; ic < m; ic += MC) {
        const Index mc = std::min(MC, m - ic);
        Packing::template a<TA>(TA ? a + pc + ic * lda : a + ic + pc * lda, lda, mc, kc, kc2p,
                                packed_a);
        for (Index jr = 0; jr < nc; jr += NR) {
          const Index cols = std::min(NR, nc - jr);
          for (Index ir = 0; ir < mc; ir += MR) {
            const Index rows = std::min(MR, mc - ir);
            kernel_for<Kernel>(rows, cols)(kc2p, packed_a + ir * kc2p, packed_b + jr * kc2p,
                                           c + (ic + ir) + (jc + jr) * ldc, ldc, alpha, rows, cols,
                                           overwrite && pc == 0);
          }
        }
      }
    }
  }
}

// --- the emulated micro-kernel ------------------------------------------------------------------

/// What tdpbf16ps adds for one pair of steps, as the instruction set manual describes it: the low
/// halves' product, then the high halves', each with one rounding to nearest even, subnormal
/// inputs read as zero and subnormal results flushed to zero. (The hardware may round the pair's
/// sum once; the tests hold both to the float bound.)
inline float tile_dot_pair(float acc, std::uint32_t a, std::uint32_t b) noexcept {
  // avx512bf16::dot_pair adds the high halves first: swapping the halves of both words gives the
  // low halves first.
  const auto swap = [](std::uint32_t w) { return w << 16 | w >> 16; };
  return avx512bf16::dot_pair(acc, swap(a), swap(b));
}

/// The micro-kernels in scalar C++, from the same packed words as the real ones: for tests on
/// CPUs without AMX (and slow).
struct emulated {
  template <int MT, int NT>
  static void run(Index kc2p, const std::uint32_t* a, const std::uint32_t* b, float* c, Index ldc,
                  float alpha, Index rows, Index cols, bool overwrite) {
    // The real kernel's order: a whole block with alpha 1 starts from C (or zero), the others
    // add alpha times the sum to C.
    const bool direct = alpha == 1.f && rows == TILE * MT && cols == TILE * NT;
    for (Index j = 0; j < cols; ++j)
      for (Index i = 0; i < rows; ++i) {
        float& cij = c[i + j * ldc];
        float acc = direct && !overwrite ? cij : 0.f;
        for (Index q = 0; q < kc2p; ++q) acc = tile_dot_pair(acc, a[q * MR + i], b[j * kc2p + q]);
        cij = direct ? acc : std::fma(alpha, acc, overwrite ? 0.f : cij);
      }
  }
};

/// gemm (below) on the emulated micro-kernel: runs on every CPU.
template <bool TA, bool TB>
void gemm_emulated(Index m, Index n, Index k, const float* a, Index lda, const float* b, Index ldb,
                   float* c, Index ldc, float alpha, bool overwrite, std::uint32_t* packed_a,
                   std::uint32_t* packed_b) {
  gemm_with<emulated, scalar_packing, TA, TB>(m, n, k, a, lda, b, ldb, c, ldc, alpha, overwrite,
                                              packed_a, packed_b);
}

/// Makes grove behave as if the operating system had refused the tile state (for tests of the
/// fallback): set it only while no product runs.
inline bool& refuse_tiles_for_testing() noexcept {
  static bool refused = false;
  return refused;
}

#if defined(GROVE_NN_SGEMM_AMX)

/// Whether this process may run AMX: the CPU has AMX-TILE and AMX-BF16 (CPUID leaf 7, EDX bits 24
/// and 22), and Linux granted the tile state (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA),
/// asked once per process; without the grant the first tile instruction would kill it).
enum class tile_state { no_amx, refused, granted };

inline tile_state tiles() noexcept {
  static const tile_state state = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return tile_state::no_amx;
    const bool amx = (edx & (1u << 24)) != 0 && (edx & (1u << 22)) != 0;
    if (!amx || !avx512bf16::available()) return tile_state::no_amx;
    constexpr long arch_get_xcomp_perm = 0x1022, arch_req_xcomp_perm = 0x1023;
    constexpr long xfeature_xtiledata = 18;
    if (syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) != 0)
      return tile_state::refused;
    unsigned long long granted = 0;
    if (syscall(SYS_arch_prctl, arch_get_xcomp_perm, &granted) != 0 ||
        (granted & (1ull << xfeature_xtiledata)) == 0)
      return tile_state::refused;
    return tile_state::granted;
  }();
  return state;
}

/// Whether this process runs this kernel's native micro-kernel.
inline bool available() noexcept {
  return !refuse_tiles_for_testing() && tiles() == tile_state::granted;
}

/// Why it does not, in words ("" when it does).
inline const char* unavailable_reason() noexcept {
  if (refuse_tiles_for_testing()) return "the tile state refused (as a test asked)";
  switch (tiles()) {
    case tile_state::no_amx:
      return "this CPU has no AMX-BF16";
    case tile_state::refused:
      return "the operating system refused this process the AMX tile state";
    default:
      return "";
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define GROVE_DETAIL_TARGET_AMX                                                      \
  __attribute__((                                                                    \
      target("amx-tile,amx-bf16,avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx2," \
             "fma")))

/// The tile configuration every micro-kernel uses: palette 1, eight tiles of 16 rows of 64 bytes.
struct alignas(64) tile_config {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
  constexpr tile_config() {
    for (int t = 0; t < 8; ++t) {
      colsb[t] = 64;
      rows[t] = 16;
    }
  }
};

/// The real micro-kernels (tdpbf16ps). Tiles 0-3 hold C (tile 2 nt + mt: columns 16 nt.., rows
/// 16 mt..), 4-5 op(B)^T, 6-7 the paired op(A). The tiles are configured by gemm() below.
struct native {
  template <int MT, int NT>
  GROVE_DETAIL_TARGET_AMX static void run(Index kc2p, const std::uint32_t* a,
                                          const std::uint32_t* b, float* c, Index ldc, float alpha,
                                          Index rows, Index cols, bool overwrite) {
    // A whole block with alpha 1 accumulates in C itself: its tiles are loaded from C (unless
    // overwritten) and stored back, a tile row being 16 rows of one column of C; the other blocks
    // go through a buffer, with alpha and lane masks.
    const bool direct = alpha == 1.f && rows == TILE * MT && cols == TILE * NT;
    const long c_stride = static_cast<long>(ldc * 4);
    if (direct && !overwrite) {
      _tile_loadd(0, c, c_stride);
      if constexpr (MT == 2) _tile_loadd(1, c + TILE, c_stride);
      if constexpr (NT == 2) _tile_loadd(2, c + TILE * ldc, c_stride);
      if constexpr (MT == 2 && NT == 2) _tile_loadd(3, c + TILE + TILE * ldc, c_stride);
    } else {
      _tile_zero(0);
      if constexpr (MT == 2) _tile_zero(1);
      if constexpr (NT == 2) _tile_zero(2);
      if constexpr (MT == 2 && NT == 2) _tile_zero(3);
    }
    const long b_stride = static_cast<long>(kc2p * 4);
    constexpr long a_stride = MR * 4;
    for (Index q = 0; q < kc2p; q += TILE) {
      _tile_loadd(4, b + q, b_stride);
      _tile_loadd(6, a + q * MR, a_stride);
      if constexpr (NT == 2) _tile_loadd(5, b + TILE * kc2p + q, b_stride);
      if constexpr (MT == 2) _tile_loadd(7, a + q * MR + TILE, a_stride);
      _tile_dpbf16ps(0, 4, 6);
      if constexpr (MT == 2) _tile_dpbf16ps(1, 4, 7);
      if constexpr (NT == 2) _tile_dpbf16ps(2, 5, 6);
      if constexpr (MT == 2 && NT == 2) _tile_dpbf16ps(3, 5, 7);
    }
    if (direct) {
      _tile_stored(0, c, c_stride);
      if constexpr (MT == 2) _tile_stored(1, c + TILE, c_stride);
      if constexpr (NT == 2) _tile_stored(2, c + TILE * ldc, c_stride);
      if constexpr (MT == 2 && NT == 2) _tile_stored(3, c + TILE + TILE * ldc, c_stride);
      return;
    }
    alignas(64) float out[4][TILE * TILE];
    _tile_stored(0, out[0], 64);
    if constexpr (MT == 2) _tile_stored(1, out[1], 64);
    if constexpr (NT == 2) _tile_stored(2, out[2], 64);
    if constexpr (MT == 2 && NT == 2) _tile_stored(3, out[3], 64);
    const __m512 va = _mm512_set1_ps(alpha);
    for (int nt = 0; nt < NT; ++nt)
      for (Index r = 0; r < TILE; ++r) {
        const Index j = nt * TILE + r;
        if (j >= cols) break;
        for (int mt = 0; mt < MT; ++mt) {
          const Index i0 = mt * TILE;
          const Index left = rows - i0;
          if (left <= 0) break;
          const __m512 acc = _mm512_load_ps(out[2 * nt + mt] + r * TILE);
          float* cj = c + j * ldc + i0;
          if (left >= TILE) {
            _mm512_storeu_ps(cj, overwrite ? _mm512_mul_ps(va, acc)
                                           : _mm512_fmadd_ps(va, acc, _mm512_loadu_ps(cj)));
          } else {
            const auto mask = static_cast<__mmask16>((1u << left) - 1u);
            const __m512 old = overwrite ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, cj);
            _mm512_mask_storeu_ps(cj, mask, _mm512_fmadd_ps(va, acc, old));
          }
        }
      }
  }
};

/// The packing routines in AVX-512 code: the same words as pack_a and pack_b (rounded as
/// bf16_round_bits rounds, by grove::detail::round_to_bf16_avx512), 16 at a time. Where pairs run
/// across the vectors' lanes (a column of op(B) stored along the inner dimension, a row of op(A)
/// likewise) a 16 x 16 block of words is transposed through a buffer on the stack.
struct vector_packing {
  GROVE_DETAIL_TARGET_AMX static __mmask16 lanes(Index count) {
    if (count <= 0) return 0;
    if (count >= 16) return 0xFFFF;
    return static_cast<__mmask16>((1u << count) - 1u);
  }

  /// The 16 words pair_bits(s[2w], s[2w + 1]), w < 16, of the first `steps` floats of s (the
  /// others read as zero; none is read when steps <= 0).
  GROVE_DETAIL_TARGET_AMX static __m512i pairs_along(const float* s, Index steps) {
    using grove::detail::round_to_bf16_avx512;
    if (steps <= 0) return _mm512_setzero_si512();
    alignas(64) static constexpr std::uint16_t high_halves[32] = {
        1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31,
        33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
    const __m512i r0 =
        _mm512_castps_si512(round_to_bf16_avx512(_mm512_maskz_loadu_ps(lanes(steps), s)));
    const __m512i r1 =
        _mm512_castps_si512(round_to_bf16_avx512(_mm512_maskz_loadu_ps(lanes(steps - 16), s + 16)));
    return _mm512_permutex2var_epi16(r0, _mm512_load_si512(high_halves), r1);
  }

  /// The words pair_bits(s0[r], s1[r]) for r < count (zero beyond; s1 null: pair_bits(s0[r], 0)).
  GROVE_DETAIL_TARGET_AMX static __m512i pairs_across(const float* s0, const float* s1,
                                                      Index count) {
    using grove::detail::round_to_bf16_avx512;
    if (count <= 0) return _mm512_setzero_si512();
    const __mmask16 m = lanes(count);
    const __m512i lo = _mm512_castps_si512(round_to_bf16_avx512(_mm512_maskz_loadu_ps(m, s0)));
    const __m512i hi = s1 ? _mm512_castps_si512(round_to_bf16_avx512(_mm512_maskz_loadu_ps(m, s1)))
                          : _mm512_setzero_si512();
    return _mm512_or_si512(_mm512_and_si512(hi, _mm512_set1_epi32(static_cast<int>(0xffff0000u))),
                           _mm512_srli_epi32(lo, 16));
  }

  /// Word t of each of the 16 rows of a 16 x 16 block (row stride 16 words).
  GROVE_DETAIL_TARGET_AMX static __m512i column(const std::uint32_t* block, int t) {
    const __m512i rows =
        _mm512_set_epi32(240, 224, 208, 192, 176, 160, 144, 128, 112, 96, 80, 64, 48, 32, 16, 0);
    return _mm512_i32gather_epi32(rows, block + t, 4);
  }

  template <bool TA>
  GROVE_DETAIL_TARGET_AMX static void a(const float* a, Index lda, Index mc, Index kc, Index kc2p,
                                        std::uint32_t* dst) {
    for (Index i = 0; i < mc; i += MR, dst += kc2p * MR) {
      const Index rows = std::min(MR, mc - i);
      if constexpr (TA) {  // row r of the sliver: a + (i + r) * lda, along the inner dimension
        alignas(64) std::uint32_t block[MR * TILE];
        for (Index q0 = 0; q0 < kc2p; q0 += TILE) {
          for (Index r = 0; r < MR; ++r)
            _mm512_store_si512(block + r * TILE,
                               r < rows ? pairs_along(a + (i + r) * lda + 2 * q0, kc - 2 * q0)
                                        : _mm512_setzero_si512());
          for (int t = 0; t < TILE; ++t) {
            std::uint32_t* d = dst + (q0 + t) * MR;
            _mm512_storeu_si512(d, column(block, t));
            _mm512_storeu_si512(d + TILE, column(block + TILE * TILE, t));
          }
        }
      } else {  // step p of the sliver: a + i + p * lda, along the rows
        for (Index q = 0; q < kc2p; ++q) {
          std::uint32_t* d = dst + q * MR;
          const Index p = 2 * q;
          const float* s0 = p < kc ? a + i + p * lda : nullptr;
          const float* s1 = p + 1 < kc ? s0 + lda : nullptr;
          if (s0 == nullptr) {
            _mm512_storeu_si512(d, _mm512_setzero_si512());
            _mm512_storeu_si512(d + TILE, _mm512_setzero_si512());
            continue;
          }
          _mm512_storeu_si512(d, pairs_across(s0, s1, rows));
          _mm512_storeu_si512(d + TILE,
                              pairs_across(s0 + TILE, s1 ? s1 + TILE : nullptr, rows - TILE));
        }
      }
    }
  }

  template <bool TB>
  GROVE_DETAIL_TARGET_AMX static void b(const float* b, Index ldb, Index kc, Index nc, Index kc2p,
                                        std::uint32_t* dst) {
    for (Index j0 = 0; j0 < nc; j0 += NR, dst += kc2p * NR) {
      const Index cols = std::min(NR, nc - j0);
      if constexpr (TB) {  // step p: b + j0 + p * ldb, along the columns
        alignas(64) std::uint32_t block[TILE * TILE];
        for (Index c0 = 0; c0 < NR; c0 += TILE) {
          const Index count = cols - c0;
          for (Index q0 = 0; q0 < kc2p; q0 += TILE) {
            for (Index t = 0; t < TILE; ++t) {
              const Index p = 2 * (q0 + t);
              const float* s0 = p < kc && count > 0 ? b + j0 + c0 + p * ldb : nullptr;
              const float* s1 = s0 && p + 1 < kc ? s0 + ldb : nullptr;
              _mm512_store_si512(block + t * TILE,
                                 s0 ? pairs_across(s0, s1, count) : _mm512_setzero_si512());
            }
            for (int c = 0; c < TILE; ++c)
              _mm512_storeu_si512(dst + (c0 + c) * kc2p + q0, column(block, c));
          }
        }
      } else {  // column c: b + (j0 + c) * ldb, along the inner dimension
        for (Index c = 0; c < NR; ++c) {
          std::uint32_t* d = dst + c * kc2p;
          const float* s = b + (j0 + c) * ldb;
          for (Index q0 = 0; q0 < kc2p; q0 += TILE)
            _mm512_storeu_si512(
                d + q0, c < cols ? pairs_along(s + 2 * q0, kc - 2 * q0) : _mm512_setzero_si512());
        }
      }
    }
  }
};

/// C += alpha * op(A) op(B) (or = when `overwrite`) with op(A) and op(B) rounded to bfloat16, on
/// this CPU's tile unit: gemm_with's contract; available() must be true. Configures the calling
/// thread's tiles and releases them at the end. The driver and the packing are inlined here.
template <bool TA, bool TB>
GROVE_DETAIL_TARGET_AMX __attribute__((flatten)) void gemm(
    Index m, Index n, Index k, const float* a, Index lda, const float* b, Index ldb, float* c,
    Index ldc, float alpha, bool overwrite, std::uint32_t* packed_a, std::uint32_t* packed_b) {
  static constexpr tile_config config{};
  _tile_loadconfig(&config);
  gemm_with<native, vector_packing, TA, TB>(m, n, k, a, lda, b, ldb, c, ldc, alpha, overwrite,
                                            packed_a, packed_b);
  _tile_release();
}

#undef GROVE_DETAIL_TARGET_AMX

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#else

inline bool available() noexcept {
  return false;
}
inline const char* unavailable_reason() noexcept {
  return "this build has no AMX kernel (x86-64 Linux with GCC or Clang only)";
}

#endif  // defined(GROVE_NN_SGEMM_AMX)

}  // namespace grove::nn::detail::amx
