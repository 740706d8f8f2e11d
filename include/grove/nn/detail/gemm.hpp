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
// AVX-512F detail/sgemm_avx2.hpp (for all but slices of at most 16 rows). Both were faster than
// Eigen's kernel on the MLP's products; bench_nn's `products` measures by how much on this CPU.
// Their sums are ordered differently, so float results differ from Eigen's kernel's in rounding.
// force_eigen_kernel() turns them off at run time (benchmarks compare the two in one run).
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

#include <grove/detail/threads.hpp>
#include <grove/nn/detail/sgemm_avx2.hpp>
#include <grove/nn/detail/sgemm_avx512.hpp>
#if defined(GROVE_NN_SGEMM_AVX512) && !defined(GROVE_NN_GEMM_BLAS) && !defined(GROVE_NN_PUBLIC_GEMM)
#define GROVE_NN_GEMM_AVX512 1
#endif
#if defined(GROVE_NN_SGEMM_AVX2) && !defined(GROVE_NN_GEMM_BLAS) && !defined(GROVE_NN_PUBLIC_GEMM)
#define GROVE_NN_GEMM_AVX2 1
#endif

namespace grove::nn::detail {

using Index = Eigen::Index;

/// The run-time switch to Eigen's kernel (or whatever this build falls back to) for the products
/// that would run one of grove's own kernels: set it only while no product runs.
inline bool& force_eigen_kernel() noexcept {
  static bool forced = false;
  return forced;
}

/// Whether products of T run grove's AVX-512 kernel (on this CPU).
template <class T>
bool uses_avx512_kernel() {
#if defined(GROVE_NN_GEMM_AVX512)
  if constexpr (std::is_same_v<T, float>) return !force_eigen_kernel() && avx512::available();
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

/// One thread's packing buffers for the GEMM kernel. reserve() before a parallel region (it may
/// allocate); the products inside only use what was reserved.
template <class T>
class GemmScratch
#if defined(GROVE_NN_GEMM_KERNEL)
    : public Eigen::internal::level3_blocking<T, T>
#endif
{
 public:
  /// Makes room for an m x n x k product's slice.
  void reserve(Index m, Index n, Index k) {
    const Blocking b = blocking_for<T>(m, n, k);
    Index a = b.kc * std::min(m, b.mc), bb = b.kc * std::min(n, b.nc);
    // Room for grove's own kernels as well, whichever kernel this code runs (see
    // sgemm_blocking.hpp: translation units compiled for different CPUs may share a workspace).
    if constexpr (std::is_same_v<T, float>) {
      a = std::max({a, avx512::blocks::packed_a_size(m, k), avx2::blocks::packed_a_size(m, k)});
      bb = std::max({bb, avx512::blocks::packed_b_size(n, k), avx2::blocks::packed_b_size(n, k)});
    }
    if (a > a_.size()) a_.resize(a);
    if (bb > b_.size()) b_.resize(bb);
  }

#if defined(GROVE_NN_GEMM_KERNEL)
  /// Points the kernel at the buffers for an m x n x k product (which reserve() made room for).
  void use(Index m, Index n, Index k) {
    const Blocking b = blocking_for<T>(m, n, k);
    eigen_assert(b.kc * std::min(m, b.mc) <= a_.size() && b.kc * std::min(n, b.nc) <= b_.size() &&
                 "grove: GemmScratch::reserve was not called for this product");
    this->m_kc = b.kc;
    this->m_mc = b.mc;
    this->m_nc = b.nc;
    this->m_blockA = a_.data();
    this->m_blockB = b_.data();
  }
#endif

  T* packed_a() {
    return a_.data();
  }
  T* packed_b() {
    return b_.data();
  }
  Index packed_a_size() const {
    return a_.size();
  }
  Index packed_b_size() const {
    return b_.size();
  }

  std::size_t bytes() const {
    return static_cast<std::size_t>(a_.size() + b_.size()) * sizeof(T);
  }

 private:
  Eigen::Matrix<T, Eigen::Dynamic, 1> a_, b_;
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

/// C[slice] += alpha * op(A)[slice.rows, :] * op(B)[:, slice.cols], op = transpose when TA / TB;
/// with Into::overwrite, C[slice] = that product instead (C's old values are not read, so it may
/// be uninitialised). op(A) is m x k, op(B) is k x n, C is m x n.
template <bool TA, bool TB, class T>
void gemm_slice(const Slice& s, View<const T> a, View<const T> b, View<T> c, T alpha,
                GemmScratch<T>& scratch, Into into = Into::add) {
  if (s.empty()) return;
  const Index m = s.rows.size(), n = s.cols.size();
  const Index k = TA ? a.rows : a.cols;
  // op(A) rows r0.. : A's rows (or columns when transposed); op(B) columns c0.. likewise.
  const T* pa = TA ? a.data + s.rows.begin * a.ld : a.data + s.rows.begin;
  const T* pb = TB ? b.data + s.cols.begin : b.data + s.cols.begin * b.ld;
  T* pc = c.data + s.rows.begin + s.cols.begin * c.ld;
  if (k == 0) {
    if (into == Into::overwrite) zero_slice(s, c);
    return;
  }
#if defined(GROVE_NN_GEMM_AVX512)
  if constexpr (std::is_same_v<T, float>) {
    if (uses_avx512_kernel<T>()) {
      eigen_assert(avx512::blocks::packed_a_size(m, k) <= scratch.packed_a_size() &&
                   avx512::blocks::packed_b_size(n, k) <= scratch.packed_b_size() &&
                   "grove: GemmScratch::reserve was not called for this product");
      avx512::gemm<TA, TB>(m, n, k, pa, a.ld, pb, b.ld, pc, c.ld, alpha, into == Into::overwrite,
                           scratch.packed_a(), scratch.packed_b());
      return;
    }
  }
#endif
#if defined(GROVE_NN_GEMM_AVX2)
  if constexpr (std::is_same_v<T, float>) {
    if (uses_avx2_kernel<T>() && avx2::suits(m, n, k)) {
      eigen_assert(avx2::blocks::packed_a_size(m, k) <= scratch.packed_a_size() &&
                   avx2::blocks::packed_b_size(n, k) <= scratch.packed_b_size() &&
                   "grove: GemmScratch::reserve was not called for this product");
      avx2::gemm<TA, TB>(m, n, k, pa, a.ld, pb, b.ld, pc, c.ld, alpha, into == Into::overwrite,
                         scratch.packed_a(), scratch.packed_b());
      return;
    }
  }
#endif
  if (into == Into::overwrite) zero_slice(s, c);
#if defined(GROVE_NN_GEMM_BLAS)
  (void)scratch;
  const char ta = TA ? 'T' : 'N', tb = TB ? 'T' : 'N';
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  const int lda = static_cast<int>(a.ld), ldb = static_cast<int>(b.ld),
            ldc = static_cast<int>(c.ld);
  const T one = 1;
  if constexpr (std::is_same_v<T, float>)
    sgemm_(&ta, &tb, &mi, &ni, &ki, &alpha, pa, &lda, pb, &ldb, &one, pc, &ldc);
  else
    dgemm_(&ta, &tb, &mi, &ni, &ki, &alpha, pa, &lda, pb, &ldb, &one, pc, &ldc);
#elif defined(GROVE_NN_GEMM_KERNEL)
  constexpr int lhs_order = TA ? Eigen::RowMajor : Eigen::ColMajor;
  constexpr int rhs_order = TB ? Eigen::RowMajor : Eigen::ColMajor;
  scratch.use(m, n, k);
  Eigen::internal::general_matrix_matrix_product<Index, T, lhs_order, false, T, rhs_order, false,
                                                 Eigen::ColMajor, 1>::run(m, n, k, pa, a.ld, pb,
                                                                          b.ld, pc, 1, c.ld, alpha,
                                                                          scratch, nullptr);
#else
  (void)scratch;
  using M = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  using CMap = Eigen::Map<const M, 0, Eigen::OuterStride<>>;
  Eigen::Map<M, 0, Eigen::OuterStride<>> cm(pc, m, n, Eigen::OuterStride<>(c.ld));
  const Index ar = TA ? k : m, ac = TA ? m : k, br = TB ? n : k, bc = TB ? k : n;
  CMap am(pa, ar, ac, Eigen::OuterStride<>(a.ld)), bm(pb, br, bc, Eigen::OuterStride<>(b.ld));
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

}  // namespace grove::nn::detail
