// grove/nn/detail/gemm.hpp: the matrix products of the MLP layer, without allocation and with
// threads that grove controls.
//
// Eigen's public product `C.noalias() = A * B` allocates its packing buffers on every call (heap
// for anything but tiny products) and decides its own threading, which for the thin products of
// a classifier's last layer can collapse. grove calls Eigen's GEMM kernel (the same gebp kernel
// and packing routines the public product uses) directly, with packing buffers that live in a
// workspace, and splits each product over the threads of one OpenMP team itself:
//
//   * each thread computes one contiguous slice of C, along whichever of C's dimensions is
//     larger (so the operand that every thread must pack whole is the smaller one), starting at a
//     multiple of 16 rows or columns (whole SIMD packets and micro-panels);
//   * a slice is computed by the sequential kernel, with the blocking a one-thread product of
//     that slice's shape would use; products too small to be worth a second thread stay on one.
// The slices depend on the shapes and the thread count only, so results repeat bit for bit for a
// given thread count (on a given kind of CPU: see below); another thread count cuts the products
// elsewhere, which changes the rounding of some sums (not their value beyond it).
//
// On x86-64, single-precision slices run grove's own kernels instead of Eigen's, chosen at run
// time: on a CPU with AVX-512F detail/sgemm_avx512.hpp, on one with AVX2 and FMA3 but not
// AVX-512F detail/sgemm_avx2.hpp. Both were faster than Eigen's kernel on the MLP's products;
// bench_nn's `products` measures by how much on this CPU, bench_precision how they compare with
// oneDNN's. Their sums are ordered differently, so float results differ from Eigen's kernel's in
// rounding. force_eigen_kernel() turns them off at run time, force_avx2_kernel() runs the AVX2
// kernel on an AVX-512 CPU (benchmarks compare them in one run).
//
// Under Precision::bf16 (nn::precision_policy's bf16 compute) each product's inputs, op(A) and
// op(B), are rounded to bfloat16 (grove/detail/bf16.hpp's round_to_bf16, on every path the same
// bits) and the products summed in float; C, alpha and the sums are never rounded. Float products
// only: the layers refuse bf16 compute with double parameters before any product. Which kernel:
//
//   * on a CPU with AMX-BF16 (Intel's Xeons from Sapphire Rapids on) whose operating system grants
//     the process the tile state, detail/sgemm_amx.hpp: tdpbf16ps multiplies 16 x 32 bf16 tiles,
//     many times the float FMA's multiply-adds per cycle;
//   * else on a CPU with AVX512-BF16 made by AMD (Zen 4 and later), sgemm_avx512bf16.hpp, whose
//     vdpbf16ps multiplies pairs of bf16: AMD runs it at the rate of a float FMA, so it does twice
//     the multiply-adds in the same time;
//   * on Intel's CPUs with AVX512-BF16, whose vdpbf16ps runs at half the rate of their float FMA
//     (so it is no faster per multiply-add, and its pairs cost packing work), and on every other
//     CPU with AVX-512F, the AVX-512 float kernel, rounding the inputs as it packs them (this is
//     also where an AMX CPU goes when its tile state is refused);
//   * on CPUs with AVX2 and FMA3 but not AVX-512F, the AVX2 float kernel, rounding as it packs
//     (slices of at most 16 rows: see avx2::suits_bf16);
//   * everywhere else, and whatever computes the float product instead of grove's kernels (Eigen's
//     kernel, BLAS, the public product, force_eigen_kernel()): that float product, of copies of the
//     slice's operands rounded into the workspace.
// So every path but the two native ones (AMX, AVX512-BF16) computes, bit for bit, its float
// product of the rounded operands; the native kernels sum pairs of steps, and read subnormal bf16
// values as zero.
// bf16_kernel_override() chooses among them at run time (benchmarks; tests run the native
// kernels' blocking and packing with tdpbf16ps and vdpbf16ps emulated on every CPU).
//
// With EIGEN_USE_BLAS (grove's CMake option GROVE_USE_BLAS) a product is one ?gemm call on the
// calling thread, and the BLAS library threads it.
//
// Eigen's kernel is its internal API (Eigen::internal::general_matrix_matrix_product with the
// signature of Eigen 3.4). With another Eigen version grove falls back to the public product,
// which computes the same values but allocates its packing buffers on every call.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#if defined(EIGEN_USE_BLAS)
#define GROVE_NN_GEMM_BLAS 1
#elif defined(GROVE_NN_PUBLIC_GEMM)  // for testing the fallback
#define GROVE_NN_GEMM_PUBLIC 1
#elif EIGEN_VERSION_AT_LEAST(3, 4, 0) && !EIGEN_VERSION_AT_LEAST(3, 4, 90)
#define GROVE_NN_GEMM_KERNEL 1
#else
#define GROVE_NN_GEMM_PUBLIC 1
#endif

#include <cstdint>
#include <grove/detail/bf16.hpp>
#include <grove/detail/cpu.hpp>
#include <grove/detail/threads.hpp>
#include <grove/nn/detail/sgemm_amx.hpp>
#include <grove/nn/detail/sgemm_avx2.hpp>
#include <grove/nn/detail/sgemm_avx512.hpp>
#include <grove/nn/detail/sgemm_avx512bf16.hpp>
#if defined(GROVE_NN_SGEMM_AVX512) && !defined(GROVE_NN_GEMM_BLAS) && !defined(GROVE_NN_PUBLIC_GEMM)
#define GROVE_NN_GEMM_AVX512 1
#endif
#if defined(GROVE_NN_SGEMM_AVX2) && !defined(GROVE_NN_GEMM_BLAS) && !defined(GROVE_NN_PUBLIC_GEMM)
#define GROVE_NN_GEMM_AVX2 1
#endif
#if defined(GROVE_NN_SGEMM_AVX512BF16) && !defined(GROVE_NN_GEMM_BLAS) && \
    !defined(GROVE_NN_PUBLIC_GEMM)
#define GROVE_NN_GEMM_AVX512BF16 1
#endif

// The products' configuration: which path computes them (Eigen's kernel with grove's own kernels
// dispatched at run time, Eigen's kernel alone, BLAS, the public product). It names the namespace
// the code below lives in, so that translation units compiled differently (GROVE_NO_DISPATCH in
// one of them, say) each keep their own products rather than share one unit's; and
// grove::compiled, the library that compiles the products once (CMake option GROVE_COMPILED),
// serves only the units whose configuration is its own (GROVE_COMPILED is defined to it), while
// the others compile theirs as without it.
#if defined(GROVE_NN_GEMM_BLAS)
#define GROVE_NN_GEMM_CONFIG 3
#define GROVE_NN_GEMM_NAMESPACE gemm_blas
#elif defined(GROVE_NN_GEMM_PUBLIC)
#define GROVE_NN_GEMM_CONFIG 4
#define GROVE_NN_GEMM_NAMESPACE gemm_public
#elif GROVE_DETAIL_DISPATCH
#define GROVE_NN_GEMM_CONFIG 1
#define GROVE_NN_GEMM_NAMESPACE gemm_dispatch
#else
#define GROVE_NN_GEMM_CONFIG 2
#define GROVE_NN_GEMM_NAMESPACE gemm_eigen
#endif

namespace grove::nn::detail {
inline namespace GROVE_NN_GEMM_NAMESPACE {

using Index = Eigen::Index;

/// The run-time switch to Eigen's kernel (or whatever this build falls back to) for the products
/// that would run one of grove's own kernels, bf16 ones included (they then multiply rounded
/// copies; only Bf16Kernel::emulated ignores it): set it only while no product runs.
inline bool& force_eigen_kernel() noexcept {
  static bool forced = false;
  return forced;
}

/// The run-time switch from grove's AVX-512 kernel to its AVX2 kernel on a CPU that has both, so
/// that a benchmark can compare the AVX2 kernel with another library's AVX2 code (oneDNN's under
/// ONEDNN_MAX_CPU_ISA=AVX2) on the same CPU: set it only while no product runs.
inline bool& force_avx2_kernel() noexcept {
  static bool forced = false;
  return forced;
}

/// Whether products of T run grove's AVX-512 kernel (on this CPU).
template <class T>
bool uses_avx512_kernel() {
#if defined(GROVE_NN_GEMM_AVX512)
  if constexpr (std::is_same_v<T, float>)
    return !force_eigen_kernel() && !force_avx2_kernel() && avx512::available();
#endif
  return false;
}

/// Whether products of T run grove's AVX2 kernel (on this CPU: one with AVX2 and FMA3 but not
/// AVX-512F).
template <class T>
bool uses_avx2_kernel() {
#if defined(GROVE_NN_GEMM_AVX2)
  if constexpr (std::is_same_v<T, float>)
    return !force_eigen_kernel() && !uses_avx512_kernel<T>() && avx2::available();
#endif
  return false;
}

/// Which kernel computes float products under Precision::bf16: `automatic`, the rules at the top
/// of this file; `native`, the AVX512-BF16 kernel wherever the CPU has AVX512-BF16, Intel's too
/// (elsewhere the rules, AMX aside); `amx`, the AMX kernel wherever it may run (elsewhere the
/// rules); `rounded`, the float kernel that this CPU runs, on rounded inputs (neither vdpbf16ps
/// nor tiles); `emulated` and `amx_emulated`, the AVX512-BF16 and the AMX kernel's blocking and
/// packing with vdpbf16ps or tdpbf16ps emulated in scalar code, on any CPU and in any build (slow:
/// for tests).
enum class Bf16Kernel { automatic, native, rounded, emulated, amx, amx_emulated };

/// The run-time choice of the bf16 kernel: set it only while no product runs.
inline Bf16Kernel& bf16_kernel_override() noexcept {
  static Bf16Kernel kernel = Bf16Kernel::automatic;
  return kernel;
}

/// Whether float products under Precision::bf16 run grove's AMX kernel, tdpbf16ps (in this
/// process: the CPU has AMX-BF16 and the operating system granted the tile state).
inline bool uses_amx_kernel() {
  if (force_eigen_kernel() || !amx::available()) return false;
  const Bf16Kernel k = bf16_kernel_override();
  return k == Bf16Kernel::automatic || k == Bf16Kernel::amx;
}

/// Whether float products under Precision::bf16 run grove's AVX512-BF16 kernel, vdpbf16ps (on
/// this CPU).
inline bool uses_native_bf16_kernel() {
#if defined(GROVE_NN_GEMM_AVX512BF16)
  if (force_eigen_kernel() || !avx512bf16::available()) return false;
  switch (bf16_kernel_override()) {
    case Bf16Kernel::native:
      return true;
    case Bf16Kernel::automatic:
    case Bf16Kernel::amx:
      return !uses_amx_kernel() &&
             ::grove::detail::this_cpu().vendor == ::grove::detail::cpu_vendor::amd;
    default:
      return false;
  }
#else
  return false;
#endif
}

/// What computes products of T, in words (benchmarks print it).
template <class T>
const char* kernel_name() {
  if (uses_avx512_kernel<T>()) return "grove's AVX-512 kernel";
  if (uses_avx2_kernel<T>()) return "grove's AVX2 kernel";
#if defined(GROVE_NN_GEMM_BLAS)
  return "BLAS (EIGEN_USE_BLAS)";
#elif defined(GROVE_NN_GEMM_KERNEL)
  return "Eigen's GEMM kernel";
#else
  return "Eigen's public product";
#endif
}

/// What computes float products under Precision::bf16, in words (benchmarks print it).
inline const char* bf16_kernel_name() {
  if (bf16_kernel_override() == Bf16Kernel::emulated)
    return "grove's AVX512-BF16 kernel, vdpbf16ps emulated in scalar code";
  if (bf16_kernel_override() == Bf16Kernel::amx_emulated)
    return "grove's AMX kernel, tdpbf16ps emulated in scalar code";
  if (uses_amx_kernel()) return "grove's AMX kernel (tdpbf16ps)";
  if (uses_native_bf16_kernel()) return "grove's AVX512-BF16 kernel";
  if (uses_avx512_kernel<float>()) return "grove's AVX-512 kernel, inputs rounded to bf16";
  if (uses_avx2_kernel<float>()) return "grove's AVX2 kernel, inputs rounded to bf16";
#if defined(GROVE_NN_GEMM_BLAS)
  return "BLAS (EIGEN_USE_BLAS) on copies rounded to bf16";
#elif defined(GROVE_NN_GEMM_KERNEL)
  return "Eigen's GEMM kernel on copies rounded to bf16";
#else
  return "Eigen's public product on copies rounded to bf16";
#endif
}

// The OpenMP team helpers (max_threads, parallel, barrier, Range, share) are grove's, shared with
// the optimizers: grove/detail/threads.hpp.
using ::grove::detail::barrier;
using ::grove::detail::max_threads;
using ::grove::detail::parallel;
using ::grove::detail::Range;
using ::grove::detail::share;

// --- matrices as the kernel sees them -----------------------------------------------------------

/// A column-major matrix in memory: rows x cols, column stride ld.
template <class T>
struct View {
  T* data = nullptr;
  Index rows = 0, cols = 0, ld = 0;
  T& operator()(Index i, Index j) const { return data[i + j * ld]; }
  T* col(Index j) const { return data + j * ld; }
  auto map() const {
    using M = Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, Eigen::Dynamic>;
    using MM = std::conditional_t<std::is_const_v<T>, const M, M>;
    return Eigen::Map<MM, 0, Eigen::OuterStride<>>(data, rows, cols, Eigen::OuterStride<>(ld));
  }
};

/// The part of C that one thread computes: rows [rows.begin, rows.end) x cols [cols.begin,
/// cols.end).
struct Slice {
  Range rows, cols;
  bool empty() const { return rows.empty() || cols.empty(); }
};

/// Cache blocking for one thread's kc x mc x nc panels. kc depends on the inner dimension only.
struct Blocking {
  Index kc = 0, mc = 0, nc = 0;
};

template <class T>
Blocking blocking_for(Index m, Index n, Index k) {
  Blocking b{k, m, n};
#if defined(GROVE_NN_GEMM_KERNEL)
  Eigen::internal::computeProductBlockingSizes<T, T, 1, Index>(b.kc, b.mc, b.nc, 1);
#endif
  return b;
}

/// What a product's inputs are before they are multiplied: as they are, or rounded to bfloat16
/// (grove/detail/bf16.hpp) with the products summed in float (nn::precision_policy's bf16
/// compute). C, alpha and the sums are never rounded. bf16 is for float products only.
enum class Precision { full, bf16 };

/// One thread's packing buffers for the GEMM kernel. reserve() before a parallel region (it may
/// allocate); the products inside only use what was reserved.
template <class T>
class GemmScratch
#if defined(GROVE_NN_GEMM_KERNEL)
    : public Eigen::internal::level3_blocking<T, T>
#endif
{
 public:
  /// Makes room for an m x n x k product's slice computed with precision p (what the products
  /// will pass gemm_slice). With T = double, bf16 reserves what full precision does (gemm_slice
  /// computes such products in full precision).
  void reserve(Index m, Index n, Index k, Precision p = Precision::full) {
    const Blocking b = blocking_for<T>(m, n, k);
    Index a = b.kc * std::min(m, b.mc), bb = b.kc * std::min(n, b.nc);
    // Room for grove's own kernels as well, whichever kernel this code runs (see
    // sgemm_blocking.hpp: translation units compiled for different CPUs may share a workspace).
    if constexpr (std::is_same_v<T, float>) {
      a = std::max({a, avx512::blocks::packed_a_size(m, k), avx2::blocks::packed_a_size(m, k)});
      bb = std::max({bb, avx512::blocks::packed_b_size(n, k), avx2::blocks::packed_b_size(n, k)});
      if (p == Precision::bf16) {
        // The AVX512-BF16 kernel's packed pairs, and the rounded copies of the slice's operands
        // that the other paths multiply. The copies are reserved whichever path this CPU takes,
        // since force_eigen_kernel() and bf16_kernel_override() change it at run time; where no
        // product uses them, their pages are never touched (and so never take memory).
        a = std::max(
            {a, avx512bf16::blocks::packed_a_size(m, k), amx::blocks::packed_a_size(m, k)});
        bb = std::max(
            {bb, avx512bf16::blocks::packed_b_size(n, k), amx::blocks::packed_b_size(n, k)});
        if (m * k > rounded_a_.size()) rounded_a_.resize(m * k);
        if (k * n > rounded_b_.size()) rounded_b_.resize(k * n);
      }
    }
    if (a + kAlignSlack > a_.size()) a_.resize(a + kAlignSlack);
    if (bb + kAlignSlack > b_.size()) b_.resize(bb + kAlignSlack);
  }

#if defined(GROVE_NN_GEMM_KERNEL)
  /// Points the kernel at the buffers for an m x n x k product (which reserve() made room for).
  void use(Index m, Index n, Index k) {
    const Blocking b = blocking_for<T>(m, n, k);
    eigen_assert(b.kc * std::min(m, b.mc) <= packed_a_size() &&
                 b.kc * std::min(n, b.nc) <= packed_b_size() &&
                 "grove: GemmScratch::reserve was not called for this product");
    this->m_kc = b.kc;
    this->m_mc = b.mc;
    this->m_nc = b.nc;
    this->m_blockA = packed_a();
    this->m_blockB = packed_b();
  }
#endif

  /// The packing buffers, from their first 64-byte boundary, and the elements from there on.
  T* packed_a() {
    return aligned(a_.data());
  }
  T* packed_b() {
    return aligned(b_.data());
  }
  Index packed_a_size() const {
    return usable(a_);
  }
  Index packed_b_size() const {
    return usable(b_);
  }

  /// Room for the rounded copies of a slice's op(A) and op(B) (Precision::bf16 only).
  T* rounded_a() {
    return rounded_a_.data();
  }
  T* rounded_b() {
    return rounded_b_.data();
  }
  Index rounded_a_size() const {
    return rounded_a_.size();
  }
  Index rounded_b_size() const {
    return rounded_b_.size();
  }

  /// The bytes this scratch holds.
  std::size_t bytes() const {
    return static_cast<std::size_t>(a_.size() + b_.size() + rounded_a_.size() + rounded_b_.size()) *
           sizeof(T);
  }

 private:
  using Buffer = Eigen::Matrix<T, Eigen::Dynamic, 1>;

  // The packed buffers start on a cache line: the kernels' 64-byte loads and AMX's tile rows then
  // never straddle two lines (Eigen aligns its heap to 16 bytes unless the build targets AVX-512,
  // and on a Xeon with AMX a straddling buffer made the float products 6% slower and the tile
  // products up to 1.7 times slower). A buffer holds kAlignSlack elements more than reserved.
  static constexpr Index kAlignSlack = 64 / static_cast<Index>(sizeof(T));
  template <class P>
  static P* aligned(P* p) {
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    return p + static_cast<Index>((((at + 63) & ~std::uintptr_t{63}) - at) / sizeof(T));
  }
  static Index usable(const Buffer& buffer) {
    if (buffer.size() == 0) return 0;
    return buffer.size() - static_cast<Index>(aligned(buffer.data()) - buffer.data());
  }

  Buffer a_, b_, rounded_a_, rounded_b_;
};

/// Whether a product with an m x n result is cut along its rows (else along its columns).
inline bool rows_split(Index m, Index n) {
  return m >= n;
}

/// How a product is cut among nt threads: along C's rows when C has at least as many rows as
/// columns, else along its columns. Tiny products stay on one thread (a team's barrier costs
/// more than they do).
inline Slice slice_of(Index m, Index n, Index k, int tid, int nt) {
  constexpr double min_flops_per_thread = 2.0e5;
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const int useful =
      static_cast<int>(std::clamp(flops / min_flops_per_thread, 1.0, static_cast<double>(nt)));
  if (tid >= useful) return {{0, 0}, {0, 0}};
  if (rows_split(m, n)) return {share(m, tid, useful), {0, n}};
  return {{0, m}, share(n, tid, useful)};
}

/// The largest slice any thread gets, for reserve().
inline void reserve_product(std::vector<Index>& dims, Index m, Index n, Index k, int nt) {
  const Slice s = slice_of(m, n, k, 0, nt);
  dims.insert(dims.end(), {s.rows.size(), s.cols.size(), k});
}

/// Sets C[slice] to zero.
template <class T>
void zero_slice(const Slice& s, View<T> c) {
  for (Index j = s.cols.begin; j < s.cols.end; ++j)
    std::fill(c.col(j) + s.rows.begin, c.col(j) + s.rows.end, T(0));
}

/// Whether gemm_slice adds to C or replaces it.
enum class Into { add, overwrite };

/// Copies the rows x cols column-major block at src (column stride ld) to dst (column stride
/// rows), each element rounded to bfloat16 (round_to_bf16's bits, on every CPU).
inline void round_copy(const float* src, Index ld, Index rows, Index cols, float* dst) {
#if defined(GROVE_NN_SGEMM_AVX512)
  if (avx512::available()) return avx512::round_copy(src, ld, rows, cols, dst);
#endif
#if defined(GROVE_NN_SGEMM_AVX2)
  if (avx2::available()) return avx2::round_copy(src, ld, rows, cols, dst);
#endif
  for (Index j = 0; j < cols; ++j)
    for (Index i = 0; i < rows; ++i)
      dst[i + j * rows] = ::grove::detail::round_to_bf16(src[i + j * ld]);
}

/// C[slice] += alpha * op(A)[slice.rows, :] * op(B)[:, slice.cols], op = transpose when TA / TB;
/// with Into::overwrite, C[slice] = that product instead (C's old values are not read, so it may
/// be uninitialised). op(A) is m x k, op(B) is k x n, C is m x n. With Precision::bf16 (T = float
/// only; the scratch reserved for it), op(A) and op(B) are rounded to bfloat16 first (see the top
/// of this file); with T = double it asserts, and computes in full precision.
template <bool TA, bool TB, class T>
void gemm_slice(const Slice& s, View<const T> a, View<const T> b, View<T> c, T alpha,
                GemmScratch<T>& scratch, Into into = Into::add,
                Precision precision = Precision::full) {
  if constexpr (!std::is_same_v<T, float>) {
    eigen_assert(precision == Precision::full && "grove: bf16 products are for float operands");
    precision = Precision::full;
  }
  if (s.empty()) return;
  const Index m = s.rows.size(), n = s.cols.size();
  const Index k = TA ? a.rows : a.cols;
  // op(A) rows r0.. : A's rows (or columns when transposed); op(B) columns c0.. likewise.
  const T* pa = TA ? a.data + s.rows.begin * a.ld : a.data + s.rows.begin;
  const T* pb = TB ? b.data + s.cols.begin : b.data + s.cols.begin * b.ld;
  T* pc = c.data + s.rows.begin + s.cols.begin * c.ld;
  Index lda = a.ld, ldb = b.ld;
  if (k == 0) {
    if (into == Into::overwrite) zero_slice(s, c);
    return;
  }
  const bool bf16 = precision == Precision::bf16;
  if constexpr (std::is_same_v<T, float>) {
    if (bf16 && (uses_amx_kernel() || bf16_kernel_override() == Bf16Kernel::amx_emulated)) {
      eigen_assert(amx::blocks::packed_a_size(m, k) <= scratch.packed_a_size() &&
                   amx::blocks::packed_b_size(n, k) <= scratch.packed_b_size() &&
                   "grove: GemmScratch::reserve was not called for this bf16 product");
      auto* const wa = reinterpret_cast<std::uint32_t*>(scratch.packed_a());
      auto* const wb = reinterpret_cast<std::uint32_t*>(scratch.packed_b());
#if defined(GROVE_NN_SGEMM_AMX)
      if (uses_amx_kernel()) {
        amx::gemm<TA, TB>(m, n, k, pa, lda, pb, ldb, pc, c.ld, alpha, into == Into::overwrite, wa,
                          wb);
        return;
      }
#endif
      amx::gemm_emulated<TA, TB>(m, n, k, pa, lda, pb, ldb, pc, c.ld, alpha,
                                 into == Into::overwrite, wa, wb);
      return;
    }
    if (bf16 && (uses_native_bf16_kernel() || bf16_kernel_override() == Bf16Kernel::emulated)) {
      eigen_assert(avx512bf16::blocks::packed_a_size(m, k) <= scratch.packed_a_size() &&
                   avx512bf16::blocks::packed_b_size(n, k) <= scratch.packed_b_size() &&
                   "grove: GemmScratch::reserve was not called for this bf16 product");
      // The packed pairs are 32-bit words in the float buffers; no product reads them as floats.
      auto* const wa = reinterpret_cast<std::uint32_t*>(scratch.packed_a());
      auto* const wb = reinterpret_cast<std::uint32_t*>(scratch.packed_b());
#if defined(GROVE_NN_GEMM_AVX512BF16)
      if (uses_native_bf16_kernel()) {
        avx512bf16::gemm<TA, TB>(m, n, k, pa, lda, pb, ldb, pc, c.ld, alpha,
                                 into == Into::overwrite, wa, wb);
        return;
      }
#endif
      avx512bf16::gemm_emulated<TA, TB>(m, n, k, pa, lda, pb, ldb, pc, c.ld, alpha,
                                        into == Into::overwrite, wa, wb);
      return;
    }
  }
#if defined(GROVE_NN_GEMM_AVX512)
  if constexpr (std::is_same_v<T, float>) {
    if (uses_avx512_kernel<T>()) {
      eigen_assert(avx512::blocks::packed_a_size(m, k) <= scratch.packed_a_size() &&
                   avx512::blocks::packed_b_size(n, k) <= scratch.packed_b_size() &&
                   "grove: GemmScratch::reserve was not called for this product");
      const auto kernel = bf16 ? avx512::gemm<TA, TB, true> : avx512::gemm<TA, TB, false>;
      kernel(m, n, k, pa, lda, pb, ldb, pc, c.ld, alpha, into == Into::overwrite,
             scratch.packed_a(), scratch.packed_b());
      return;
    }
  }
#endif
#if defined(GROVE_NN_GEMM_AVX2)
  if constexpr (std::is_same_v<T, float>) {
    if (uses_avx2_kernel<T>() && (!bf16 || avx2::suits_bf16(m, n, k))) {
      eigen_assert(avx2::blocks::packed_a_size(m, k) <= scratch.packed_a_size() &&
                   avx2::blocks::packed_b_size(n, k) <= scratch.packed_b_size() &&
                   "grove: GemmScratch::reserve was not called for this product");
      const auto kernel = bf16 ? avx2::gemm<TA, TB, true> : avx2::gemm<TA, TB, false>;
      kernel(m, n, k, pa, lda, pb, ldb, pc, c.ld, alpha, into == Into::overwrite,
             scratch.packed_a(), scratch.packed_b());
      return;
    }
  }
#endif
  if constexpr (std::is_same_v<T, float>) {
    if (bf16) {  // the float product of rounded copies of the slice's operands, as stored
      const Index ar = TA ? k : m, ac = TA ? m : k, br = TB ? n : k, bc = TB ? k : n;
      eigen_assert(ar * ac <= scratch.rounded_a_size() && br * bc <= scratch.rounded_b_size() &&
                   "grove: GemmScratch::reserve was not called for this bf16 product");
      round_copy(pa, lda, ar, ac, scratch.rounded_a());
      round_copy(pb, ldb, br, bc, scratch.rounded_b());
      pa = scratch.rounded_a(), lda = ar;
      pb = scratch.rounded_b(), ldb = br;
    }
  }
  if (into == Into::overwrite) zero_slice(s, c);
#if defined(GROVE_NN_GEMM_BLAS)
  (void)scratch;
  const char ta = TA ? 'T' : 'N', tb = TB ? 'T' : 'N';
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  const int ldai = static_cast<int>(lda), ldbi = static_cast<int>(ldb),
            ldc = static_cast<int>(c.ld);
  const T one = 1;
  if constexpr (std::is_same_v<T, float>)
    sgemm_(&ta, &tb, &mi, &ni, &ki, &alpha, pa, &ldai, pb, &ldbi, &one, pc, &ldc);
  else
    dgemm_(&ta, &tb, &mi, &ni, &ki, &alpha, pa, &ldai, pb, &ldbi, &one, pc, &ldc);
#elif defined(GROVE_NN_GEMM_KERNEL)
  constexpr int lhs_order = TA ? Eigen::RowMajor : Eigen::ColMajor;
  constexpr int rhs_order = TB ? Eigen::RowMajor : Eigen::ColMajor;
  scratch.use(m, n, k);
  Eigen::internal::general_matrix_matrix_product<Index, T, lhs_order, false, T, rhs_order, false,
                                                 Eigen::ColMajor, 1>::run(m, n, k, pa, lda, pb, ldb,
                                                                          pc, 1, c.ld, alpha,
                                                                          scratch, nullptr);
#else
  (void)scratch;
  using M = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  using CMap = Eigen::Map<const M, 0, Eigen::OuterStride<>>;
  Eigen::Map<M, 0, Eigen::OuterStride<>> cm(pc, m, n, Eigen::OuterStride<>(c.ld));
  const Index ar = TA ? k : m, ac = TA ? m : k, br = TB ? n : k, bc = TB ? k : n;
  CMap am(pa, ar, ac, Eigen::OuterStride<>(lda)), bm(pb, br, bc, Eigen::OuterStride<>(ldb));
  if constexpr (TA && TB)
    cm.noalias() += alpha * am.transpose() * bm.transpose();
  else if constexpr (TA)
    cm.noalias() += alpha * am.transpose() * bm;
  else if constexpr (TB)
    cm.noalias() += alpha * am * bm.transpose();
  else
    cm.noalias() += alpha * am * bm;
#endif
}

// The products grove::compiled compiles once (src/nn_gemm.cpp instantiates them, and units
// configured as the library declare them extern below): one list, X(TA, TB, T) for each.
// clang-format off
#define GROVE_NN_GEMM_PRODUCTS(X)                                                              \
  X(false, false, float)  X(false, true, float)  X(true, false, float)  X(true, true, float)  \
  X(false, false, double) X(false, true, double) X(true, false, double) X(true, true, double)
// clang-format on
#define GROVE_NN_GEMM_INSTANCE(TA, TB, T)                                                     \
  template void gemm_slice<TA, TB, T>(const Slice&, View<const T>, View<const T>, View<T>, T, \
                                      GemmScratch<T>&, Into, Precision);

#if defined(GROVE_COMPILED) && GROVE_COMPILED == GROVE_NN_GEMM_CONFIG
// grove::compiled has these: this unit calls them rather than compiling them.
#define GROVE_NN_GEMM_EXTERN(TA, TB, T) extern GROVE_NN_GEMM_INSTANCE(TA, TB, T)
GROVE_NN_GEMM_PRODUCTS(GROVE_NN_GEMM_EXTERN)
#undef GROVE_NN_GEMM_EXTERN
#endif

}  // namespace GROVE_NN_GEMM_NAMESPACE
}  // namespace grove::nn::detail
