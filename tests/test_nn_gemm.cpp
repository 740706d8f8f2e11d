// The MLP's matrix products (grove/nn/detail/gemm.hpp) against a plain double-precision product.
//
// On a CPU with AVX-512 this tests grove's own kernel (detail/sgemm_avx512.hpp), on one with AVX2
// and FMA3 but not AVX-512 grove's AVX2 kernel (detail/sgemm_avx2.hpp), and Eigen's elsewhere;
// Eigen's kernel, which builds with GROVE_NO_DISPATCH run, is tested everywhere through
// force_eigen_kernel(). The shapes cover every edge of the kernels' blocking: for the AVX-512 one
// partial 32 x 12 blocks (and its narrower 8- and 4-column kernels), products of at most 16 rows
// (its thin kernel, with every count of columns that its 12-, 8-, 4-, 2- and 1-column pieces
// cover); for the AVX2 one partial 16 x 6 blocks (and its narrower 8-row and 4- and 2-column
// kernels); for both, inner dimensions and row counts around the slabs and blocks of the blocking
// this CPU's caches give them.
//
// The bf16 products (Precision::bf16: inputs rounded to bfloat16, sums in float) are checked the
// same way against a double product of the rounded inputs, on every path this CPU and build can
// run: the kernel dispatch picks, Eigen's kernel on rounded copies (force_eigen_kernel), and the
// AVX512-BF16 kernel's blocking and packing with vdpbf16ps emulated (bf16_kernel_override), which
// runs everywhere; the real AVX512-BF16 kernel, and the AVX-512 kernels, where the CPU has them.
// Every path but the native one must give, bit for bit, its own float product of operands rounded
// beforehand with round_to_bf16.
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <grove/detail/bf16.hpp>
#include <grove/nn.hpp>
#include <grove/nn/detail/sgemm_avx512bf16.hpp>
#include <limits>
#include <string>
#include <vector>

#include "nn_fixtures.hpp"

namespace d = grove::nn::detail;
namespace nn = grove::nn;
namespace rnd = grove::random;
using Eigen::Index;

namespace {

using MatF = Eigen::MatrixXf;
using MatD = Eigen::MatrixXd;

// op(A) op(B) in double, from the float operands. On one thread: Eigen's threaded product waits
// for its threads by spinning, which on a busy machine costs more than the product.
template <bool TA, bool TB>
MatD reference(const MatF& a, const MatF& b) {
  const nn_test::ThreadCount one(1);
  const MatD ad = a.cast<double>(), bd = b.cast<double>();
  const MatD opa = TA ? MatD(ad.transpose()) : ad;
  const MatD opb = TB ? MatD(bd.transpose()) : bd;
  return opa * opb;
}

// The bound on float rounding for a product's element: k * eps * sum_p |a_ip| |b_pj| (with room).
template <bool TA, bool TB>
MatD error_bound(const MatF& a, const MatF& b, Index k) {
  const MatD bound = reference<TA, TB>(a.cwiseAbs(), b.cwiseAbs());
  return bound * (static_cast<double>(k) + 2) * std::numeric_limits<float>::epsilon();
}

struct Shape {
  Index m, n, k;
};

constexpr float kAlpha = -0.75f, kGuard = 12345.f;

// x with every element rounded to bfloat16 (round_to_bf16).
MatF rounded(const MatF& x) {
  MatF r = x;
  grove::detail::round_to_bf16(r.data(), r.size());
  return r;
}

// A product's stored operands, with padding rows so that the leading dimensions differ from the
// sizes, and C's first values.
struct Operands {
  MatF a_store, b_store, c0;
};

template <bool TA, bool TB>
Operands operands(Shape s, std::uint32_t seed) {
  const auto [m, n, k] = s;
  const auto keys = rnd::split(rnd::key(seed), 3);
  return {nn_test::random_matrix<float>(keys[0], (TA ? k : m) + 3, TA ? m : k),
          nn_test::random_matrix<float>(keys[1], (TB ? n : k) + 5, TB ? k : n),
          nn_test::random_matrix<float>(keys[2], m, n)};
}

// C = C0 + alpha op(A) op(B) (or alpha op(A) op(B) with Into::overwrite, C holding NaN before)
// computed by gemm_slice with `threads` slices as grove's passes cut them, C stored with a column
// stride larger than its row count and 7 rows of guard values below it.
template <bool TA, bool TB>
MatF sliced_product(Shape s, const Operands& ops, int threads, d::Into into, d::Precision p) {
  const auto [m, n, k] = s;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  MatF c_store = MatF::Constant(m + 7, n, kGuard);
  c_store.topRows(m) = into == d::Into::overwrite ? MatF::Constant(m, n, nan) : ops.c0;
  const d::View<const float> av{ops.a_store.data(), TA ? k : m, TA ? m : k, ops.a_store.rows()};
  const d::View<const float> bv{ops.b_store.data(), TB ? n : k, TB ? k : n, ops.b_store.rows()};
  const d::View<float> cv{c_store.data(), m, n, c_store.rows()};
  std::vector<d::GemmScratch<float>> scratch(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    const d::Slice sl = d::slice_of(m, n, k, t, threads);
    if (!sl.empty())
      scratch[static_cast<std::size_t>(t)].reserve(sl.rows.size(), sl.cols.size(), k, p);
  }
  // The slices run one after the other here: what is checked is that they tile C exactly.
  for (int t = 0; t < threads; ++t)
    d::gemm_slice<TA, TB>(d::slice_of(m, n, k, t, threads), av, bv, cv, kAlpha,
                          scratch[static_cast<std::size_t>(t)], into, p);
  return c_store;
}

// The index of the first element whose bits differ between x and y (same shapes), or -1.
Index first_difference(const MatF& x, const MatF& y) {
  for (Index i = 0; i < x.size(); ++i)
    if (std::bit_cast<std::uint32_t>(x.data()[i]) != std::bit_cast<std::uint32_t>(y.data()[i]))
      return i;
  return -1;
}

// Computes C = C0 + alpha op(A) op(B) (or alpha op(A) op(B) with Into::overwrite) with `threads`
// slices as grove's passes cut them (sliced_product) and checks it element by element against a
// double product: of the operands, or with Precision::bf16 of the operands rounded to bfloat16.
template <bool TA, bool TB>
void check_product(Shape s, int threads, d::Into into, std::uint32_t seed,
                   d::Precision p = d::Precision::full) {
  const auto [m, n, k] = s;
  INFO("m=" << m << " n=" << n << " k=" << k << " TA=" << TA << " TB=" << TB
            << " threads=" << threads << " overwrite=" << (into == d::Into::overwrite)
            << " bf16=" << (p == d::Precision::bf16));
  const Operands ops = operands<TA, TB>(s, seed);
  const MatF c_store = sliced_product<TA, TB>(s, ops, threads, into, p);
  const MatF& c0 = ops.c0;
  const MatF a_used = ops.a_store.topRows(TA ? k : m), b_used = ops.b_store.topRows(TB ? n : k);
  const MatF a = p == d::Precision::bf16 ? rounded(a_used) : a_used;
  const MatF b = p == d::Precision::bf16 ? rounded(b_used) : b_used;
  const double alpha = kAlpha;

  const MatD expected = (into == d::Into::overwrite ? MatD::Zero(m, n) : MatD(c0.cast<double>())) +
                        alpha * reference<TA, TB>(a, b);
  const MatD bound = std::abs(alpha) * error_bound<TA, TB>(a, b, k) + MatD::Constant(m, n, 1e-30) +
                     (c0.cast<double>().cwiseAbs() * std::numeric_limits<float>::epsilon());
  Index bad = 0;
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < m; ++i) {
      const double got = c_store(i, j);
      if (!(std::abs(got - expected(i, j)) <= bound(i, j))) {
        if (bad == 0)
          UNSCOPED_INFO("first wrong element (" << i << ", " << j << "): " << got << ", expected "
                                                << expected(i, j));
        ++bad;
      }
    }
  CHECK(bad == 0);
  CHECK((c_store.bottomRows(7).array() == kGuard).all());
}

template <bool TA, bool TB>
void check_shapes(const std::vector<Shape>& shapes, int threads, d::Into into,
                  d::Precision p = d::Precision::full) {
  std::uint32_t seed = 1;
  for (const Shape& s : shapes) check_product<TA, TB>(s, threads, into, seed++, p);
}

// check_shapes for 1, 2 and 3 threads, adding and overwriting, and all four of TA and TB.
void check_all(const std::vector<Shape>& shapes, d::Precision p) {
  for (const int threads : {1, 2, 3}) {
    for (const d::Into into : {d::Into::add, d::Into::overwrite}) {
      check_shapes<false, false>(shapes, threads, into, p);
      check_shapes<false, true>(shapes, threads, into, p);
      check_shapes<true, false>(shapes, threads, into, p);
      check_shapes<true, true>(shapes, threads, into, p);
    }
  }
}

// The bf16 product on the stored operands and the float product on the same operands rounded
// beforehand (round_to_bf16), both through gemm_slice, have the same bits, guards included.
template <bool TA, bool TB>
void check_same_bits(Shape s, int threads, d::Into into, std::uint32_t seed) {
  INFO("m=" << s.m << " n=" << s.n << " k=" << s.k << " TA=" << TA << " TB=" << TB
            << " threads=" << threads << " overwrite=" << (into == d::Into::overwrite));
  const Operands ops = operands<TA, TB>(s, seed);
  const Operands pre = {rounded(ops.a_store), rounded(ops.b_store), ops.c0};
  const MatF bf16 = sliced_product<TA, TB>(s, ops, threads, into, d::Precision::bf16);
  const MatF full = sliced_product<TA, TB>(s, pre, threads, into, d::Precision::full);
  const Index at = first_difference(bf16, full);
  if (at >= 0)
    UNSCOPED_INFO("first difference at (" << at % bf16.rows() << ", " << at / bf16.rows() << "): "
                                          << bf16.data()[at] << " against " << full.data()[at]);
  CHECK(at < 0);
}

template <bool TA, bool TB>
void check_same_bits_shapes(const std::vector<Shape>& shapes) {
  std::uint32_t seed = 1;
  for (const int threads : {1, 2, 3})
    for (const d::Into into : {d::Into::add, d::Into::overwrite})
      for (const Shape& s : shapes) check_same_bits<TA, TB>(s, threads, into, seed++);
}

void check_same_bits_all(const std::vector<Shape>& shapes) {
  check_same_bits_shapes<false, false>(shapes);
  check_same_bits_shapes<false, true>(shapes);
  check_same_bits_shapes<true, false>(shapes);
  check_same_bits_shapes<true, true>(shapes);
}

// One of grove's float kernels called directly (kernel: its gemm<TA, TB, Round>), on a whole
// product: with Round on the operands, and without it on the operands rounded beforehand, the
// same bits (also for the slices gemm_slice gives another kernel: the AVX2 kernel's thin ones).
template <bool TA, bool TB, class Kernel>
void check_kernel_same_bits(Shape s, Kernel with_round, Kernel without, Index packed_a,
                            Index packed_b, std::uint32_t seed) {
  const auto [m, n, k] = s;
  INFO("m=" << m << " n=" << n << " k=" << k << " TA=" << TA << " TB=" << TB);
  const Operands ops = operands<TA, TB>(s, seed);
  const MatF a_pre = rounded(ops.a_store), b_pre = rounded(ops.b_store);
  std::vector<float> pa(static_cast<std::size_t>(packed_a)), pb(static_cast<std::size_t>(packed_b));
  for (const bool overwrite : {false, true}) {
    MatF c1 = ops.c0, c2 = ops.c0;
    with_round(m, n, k, ops.a_store.data(), ops.a_store.rows(), ops.b_store.data(),
               ops.b_store.rows(), c1.data(), m, kAlpha, overwrite, pa.data(), pb.data());
    without(m, n, k, a_pre.data(), a_pre.rows(), b_pre.data(), b_pre.rows(), c2.data(), m, kAlpha,
            overwrite, pa.data(), pb.data());
    CHECK(first_difference(c1, c2) < 0);
  }
}

const std::vector<Shape> kEdgeShapes = {
    {1, 1, 1},     {5, 3, 7},      {16, 12, 16},   {17, 13, 17},  {31, 11, 33},  {32, 12, 384},
    {33, 25, 385}, {10, 128, 512}, {512, 128, 10}, {100, 4, 383}, {64, 8, 9},    {255, 37, 100},
    {257, 24, 50}, {600, 30, 20},  {40, 300, 800}, {3, 50, 2},    {513, 129, 64}};

// Shapes around the AVX2 kernel's register block (16 x 6) and its blocking on this CPU.
std::vector<Shape> avx2_edge_shapes() {
  const auto& b = d::avx2::blocks::here();
  const Index kc = b.kc, mc = b.mc, nc = b.nc;
  return {{17, 1, 1},
          {16, 6, 1},
          {18, 7, 1},
          {24, 5, 3},
          {25, 3, 2},
          {31, 2, 9},
          {33, 9, 4},
          {40, 11, 13},
          {47, 4, 8},
          {17, 700, 1},
          {700, 17, 1},
          {19, 300, 40},
          {300, 2, 40},
          {1, 300, 40},
          {3, 2, 1000},
          {23, 13, kc},
          {23, 13, kc + 1},
          {29, 8, kc - 1},
          {21, 6, 2 * kc + 3},
          {mc, 7, 5},
          {mc + 1, 7, 5},
          {mc - 1, 12, 17},
          {2 * mc + 17, 11, 33},
          {mc + 3, 5, kc + 7},
          {20, nc + 5, 3},
          {18, nc - 1, 2}};
}

// Shapes around the AVX-512 kernel's register block (32 x 12), its thin kernel (at most 16 rows)
// and its blocking on this CPU.
std::vector<Shape> avx512_edge_shapes() {
  const auto& b = d::avx512::blocks::here();
  const Index kc = b.kc, mc = b.mc, nc = b.nc;
  std::vector<Shape> shapes = {
      {33, 1, 1},          {32, 12, 1},      {34, 13, 2},      {40, 9, 3},
      {63, 5, 7},          {65, 4, 8},       {47, 700, 2},     {700, 17, 3},
      {33, 25, kc},        {37, 13, kc + 1}, {45, 8, kc - 1},  {35, 6, 2 * kc + 3},
      {mc, 7, 5},          {mc + 1, 7, 5},   {mc - 1, 12, 17}, {2 * mc + 17, 11, 33},
      {mc + 3, 5, kc + 7}, {40, nc + 5, 3},  {36, nc - 1, 2}};
  // The thin kernel: rows 1-16, columns 1-31 (every combination of its column pieces), inner
  // dimensions around its slabs.
  for (const Index m : {1, 2, 9, 10, 15, 16})
    for (const Index n : {1, 2, 3, 5, 7, 8, 11, 12, 13, 15, 23, 24, 31})
      shapes.push_back({m, n, 3 + m + n});
  for (const Index k : {kc - 1, kc, kc + 1, 2 * kc + 5}) shapes.push_back({10, 29, k});
  shapes.push_back({10, 700, 40});
  return shapes;
}

// A kernel's blocking on this CPU is the formula's for this CPU's caches, and it cuts products
// into slabs of equal depth (for pairs of bf16, of an even depth: at most one step more per slab)
// and row blocks of equal height (whole slivers of MR rows), never beyond kc and mc and no more of
// them than kc and mc need.
template <class Blocks, bool EvenSlabs = false>
void check_blocking_here() {
  const auto& caches = grove::detail::this_cpu_caches();
  INFO("L1d " << caches.l1d << ", L2 " << caches.l2 << ", L3 " << caches.l3);
  CHECK(caches.l1d >= 8 * 1024);
  CHECK(caches.l2 >= 64 * 1024);
  CHECK(caches.l3 >= caches.l2);
  const auto& b = Blocks::here();
  const auto expected = Blocks::for_caches(caches.l1d, caches.l2, caches.l3);
  CHECK(b.kc == expected.kc);
  CHECK(b.mc == expected.mc);
  CHECK(b.nc == expected.nc);
  for (Index k = 1; k < 4 * b.kc; k += 37) {
    const Index depth = Blocks::slab_depth(k), slabs = (k + depth - 1) / depth;
    CHECK(depth <= b.kc);
    CHECK(slabs == (k + b.kc - 1) / b.kc);
    if constexpr (EvenSlabs) {
      CHECK(depth % 2 == 0);
      CHECK(slabs * depth - k < 2 * slabs);
    } else {
      CHECK(slabs * depth - k < slabs);
    }
  }
  for (Index m = 1; m < 4 * b.mc; m += 13) {
    const Index h = Blocks::block_height(m);
    CHECK(h <= b.mc);
    CHECK(h % Blocks::sliver_rows == 0);
    CHECK((m + h - 1) / h == (m + b.mc - 1) / b.mc);
  }
}

// Shapes around the AVX512-BF16 kernel's register block (32 x 12, with one-vector kernels for the
// last sliver of at most 16 rows and 8- and 4-column ones), its pairs of steps (odd, short and
// single-step inner dimensions) and its blocking on this CPU.
std::vector<Shape> bf16_edge_shapes() {
  const auto& b = d::avx512bf16::blocks::here();
  const Index kc = b.kc, mc = b.mc, nc = b.nc;
  std::vector<Shape> shapes = {{1, 1, 1},
                               {1, 1, 2},
                               {2, 3, 3},
                               {16, 12, 31},
                               {16, 12, 32},
                               {17, 13, 33},
                               {32, 12, 1},
                               {33, 25, 2},
                               {31, 11, 7},
                               {40, 9, 5},
                               {63, 5, 7},
                               {65, 4, 8},
                               {47, 300, 9},
                               {300, 17, 3},
                               {33, 25, kc},
                               {37, 13, kc + 1},
                               {45, 8, kc - 1},
                               {35, 6, 2 * kc + 3},
                               {20, 7, 2 * kc - 1},
                               {mc, 7, 5},
                               {mc + 1, 7, 5},
                               {mc - 1, 12, 17},
                               {2 * mc + 17, 11, 33},
                               {mc + 3, 5, kc + 7},
                               {40, nc + 5, 3},
                               {36, nc - 1, 2}};
  for (const Index m : {1, 2, 9, 10, 15, 16})
    for (const Index n : {1, 3, 4, 5, 8, 9, 12, 13, 25}) shapes.push_back({m, n, 3 + m + n});
  for (const Index k : {kc - 1, kc, kc + 1}) shapes.push_back({10, 29, k});
  return shapes;
}

// Shapes around the AMX kernel's tiles (16 rows, 16 columns, 32 steps), its 32 x 32 blocks and
// its blocking (slabs of whole tiles), with odd inner dimensions.
std::vector<Shape> amx_edge_shapes() {
  const auto& b = d::amx::blocks::here();
  const Index kc = d::amx::blocks::slab_depth(1 << 20), mc = b.mc;
  std::vector<Shape> shapes = {{1, 1, 1},     {1, 1, 2},    {10, 33, 31},  {16, 16, 32},
                               {16, 17, 33},  {17, 16, 64}, {31, 31, 65},  {32, 32, 95},
                               {33, 33, 96},  {48, 47, 3},  {64, 64, 130}, {10, 100, 512},
                               {100, 10, 10}, {65, 97, 33}, {512, 40, 10}, {40, 512, 11}};
  for (const Index k : {kc - 1, kc, kc + 1, 2 * kc + 33}) shapes.push_back({33, 18, k});
  for (const Index m : {mc - 1, mc + 1}) shapes.push_back({m, 17, 40});
  return shapes;
}

// Products of at most 16 rows (the AVX-512 kernel's thin kernel; the AVX2 kernel reads op(B) in
// place for them), with odd and even inner dimensions.
const std::vector<Shape> kThinShapes = {{1, 1, 1},    {3, 7, 2},     {10, 128, 512}, {10, 29, 45},
                                        {16, 40, 33}, {15, 300, 17}, {9, 5, 1}};

// Every shape with each operand transposed or not, into C by adding and by overwriting, on 1, 2
// and 3 threads.
void check_every_layout(const std::vector<Shape>& shapes) {
  for (const int threads : {1, 2, 3}) {
    for (const d::Into into : {d::Into::add, d::Into::overwrite}) {
      check_shapes<false, false>(shapes, threads, into);
      check_shapes<false, true>(shapes, threads, into);
      check_shapes<true, false>(shapes, threads, into);
      check_shapes<true, true>(shapes, threads, into);
    }
  }
}

// Sets bf16_kernel_override() and force_eigen_kernel() for a scope.
class KernelChoice {
 public:
  explicit KernelChoice(d::Bf16Kernel kernel, bool eigen = false)
      : kernel_(d::bf16_kernel_override()), eigen_(d::force_eigen_kernel()) {
    d::bf16_kernel_override() = kernel;
    d::force_eigen_kernel() = eigen;
  }
  ~KernelChoice() {
    d::bf16_kernel_override() = kernel_;
    d::force_eigen_kernel() = eigen_;
  }
  KernelChoice(const KernelChoice&) = delete;
  KernelChoice& operator=(const KernelChoice&) = delete;

 private:
  d::Bf16Kernel kernel_;
  bool eigen_;
};

// A product with NaN, infinity and a finite value that rounds to infinity among its inputs,
// through gemm_slice on one thread: op(A)(3, 7) is NaN, op(A)(5, 11) infinite, op(A)(8, 20) a
// finite float that bf16 rounds up to infinity, with op(B)(20, :) = 0.5; op(B)(13, 4) is NaN. So
// C(i, j) is NaN exactly where i == 3 or j == 4, infinite where i is 5 or (in bf16 only) 8, and
// finite elsewhere: in full precision row 8 stays finite.
template <bool TA, bool TB>
void check_specials(Index m, d::Precision p) {
  const Index n = 29, k = 45;
  INFO("m=" << m << " TA=" << TA << " TB=" << TB << " bf16=" << (p == d::Precision::bf16));
  const auto keys = rnd::split(rnd::key(77), 3);
  MatF opa = nn_test::random_matrix<float>(keys[0], m, k);
  MatF opb = nn_test::random_matrix<float>(keys[1], k, n);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float to_inf = std::bit_cast<float>(0x7f7f8000u);  // finite; its bf16 is infinity
  REQUIRE(std::isfinite(to_inf));
  REQUIRE(std::isinf(grove::detail::round_to_bf16(to_inf)));
  opa(3, 7) = nan;
  opa(5, 11) = inf;
  opa(8, 20) = to_inf;
  opb.row(20).setConstant(0.5f);
  opb(13, 4) = nan;
  const MatF a = TA ? MatF(opa.transpose()) : opa, b = TB ? MatF(opb.transpose()) : opb;
  MatF c = nn_test::random_matrix<float>(keys[2], m, n);
  d::GemmScratch<float> scratch;
  scratch.reserve(m, n, k, p);
  d::gemm_slice<TA, TB>({{0, m}, {0, n}}, {a.data(), a.rows(), a.cols(), a.rows()},
                        {b.data(), b.rows(), b.cols(), b.rows()}, {c.data(), m, n, m}, kAlpha,
                        scratch, d::Into::add, p);
  Index bad = 0;
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < m; ++i) {
      const bool want_nan = i == 3 || j == 4;
      const bool want_inf = !want_nan && (i == 5 || (i == 8 && p == d::Precision::bf16));
      const bool ok = want_nan   ? std::isnan(c(i, j))
                      : want_inf ? std::isinf(c(i, j))
                                 : std::isfinite(c(i, j));
      if (!ok && bad++ == 0)
        UNSCOPED_INFO("first wrong element (" << i << ", " << j << "): " << c(i, j));
    }
  CHECK(bad == 0);
}

void check_specials_all(d::Precision p) {
  for (const Index m : {37, 10}) {
    check_specials<false, false>(m, p);
    check_specials<false, true>(m, p);
    check_specials<true, false>(m, p);
    check_specials<true, true>(m, p);
  }
}

// An empty inner dimension: adding leaves C as it was, overwriting writes zeros.
void check_empty_inner(d::Precision p) {
  MatF a(4, 0), b(0, 3), c = MatF::Constant(4, 3, 2.f);
  d::GemmScratch<float> scratch;
  scratch.reserve(4, 3, 0, p);
  const d::Slice all{{0, 4}, {0, 3}};
  const d::View<const float> av{a.data(), 4, 0, 4}, bv{b.data(), 0, 3, 1};
  const d::View<float> cv{c.data(), 4, 3, 4};
  d::gemm_slice<false, false>(all, av, bv, cv, 1.f, scratch, d::Into::add, p);
  CHECK((c.array() == 2.f).all());
  d::gemm_slice<false, false>(all, av, bv, cv, 1.f, scratch, d::Into::overwrite, p);
  CHECK((c.array() == 0.f).all());
}

// The bf16 product on the stored operands and on the same operands rounded beforehand, both
// bf16 through gemm_slice: the same bits (the packing of the AVX512-BF16 kernel rounds as
// round_to_bf16 does, and rounding twice is rounding once).
template <bool TA, bool TB>
void check_rounding_idempotent(const std::vector<Shape>& shapes) {
  std::uint32_t seed = 1;
  for (const Shape& s : shapes) {
    INFO("m=" << s.m << " n=" << s.n << " k=" << s.k << " TA=" << TA << " TB=" << TB);
    const Operands ops = operands<TA, TB>(s, seed++);
    const Operands pre = {rounded(ops.a_store), rounded(ops.b_store), ops.c0};
    const MatF x = sliced_product<TA, TB>(s, ops, 2, d::Into::add, d::Precision::bf16);
    const MatF y = sliced_product<TA, TB>(s, pre, 2, d::Into::add, d::Precision::bf16);
    CHECK(first_difference(x, y) < 0);
  }
}

}  // namespace

TEST_CASE("grove's AVX2 kernel runs the float products on CPUs with AVX2 and no AVX-512",
          "[nn][gemm]") {
  const auto& cpu = grove::detail::this_cpu();
  INFO("products: " << d::kernel_name<float>() << "; AVX2+FMA " << cpu.avx2_fma << ", AVX-512F "
                    << cpu.avx512f);
#if defined(GROVE_NO_DISPATCH)
  CHECK(!d::uses_avx2_kernel<float>());
  CHECK(std::string(d::kernel_name<float>()) == "Eigen's GEMM kernel");
#elif defined(__x86_64__)
  if (cpu.avx2_fma && !cpu.avx512f) {
    CHECK(d::uses_avx2_kernel<float>());
    CHECK(std::string(d::kernel_name<float>()) == "grove's AVX2 kernel");
  }
  if (cpu.avx512f) CHECK(!d::uses_avx2_kernel<float>());
#endif
  CHECK(!d::uses_avx2_kernel<double>());
  // The switch that benchmarks use to time Eigen's kernel in the same run.
  d::force_eigen_kernel() = true;
  CHECK(!d::uses_avx2_kernel<float>());
  CHECK(!d::uses_avx512_kernel<float>());
  CHECK(std::string(d::kernel_name<float>()) == "Eigen's GEMM kernel");
  check_product<false, false>({67, 29, 45}, 1, d::Into::add, 99);
  d::force_eigen_kernel() = false;
}

TEST_CASE(
    "grove's AVX2 kernel against a double product on a CPU with AVX-512, by force_avx2_kernel",
    "[nn][gemm]") {
#if defined(GROVE_NN_SGEMM_AVX2)
  if (!d::avx2::available()) {
    WARN("this CPU has no AVX2 and FMA3: grove's AVX2 kernel is not run here");
    return;
  }
  struct Forced {  // for the test's scope, exceptions included
    Forced() { d::force_avx2_kernel() = true; }
    ~Forced() { d::force_avx2_kernel() = false; }
  } forced;
  CHECK(d::uses_avx2_kernel<float>());
  CHECK(!d::uses_avx512_kernel<float>());
  CHECK(std::string(d::kernel_name<float>()) == "grove's AVX2 kernel");
  // Every layout of op(B): packed, read in place by columns and, for products of at most 16 rows,
  // by rows; the thin products and the edges of the kernel's blocks.
  std::vector<Shape> shapes = avx2_edge_shapes();
  shapes.insert(shapes.end(), kThinShapes.begin(), kThinShapes.end());
  check_every_layout(shapes);
#else
  WARN("this build has no AVX2 kernel (no dispatch on this compiler and CPU)");
#endif
}

TEST_CASE("The kernels' blocking follows the cache sizes", "[nn][gemm]") {
  // The formula of sgemm_blocking.hpp for an MR x NR block: kc = L1d / 2 / (NR floats) in
  // multiples of 8, mc = L2 / 2 / (kc floats) in multiples of MR, nc = L3 / 2 / (kc floats) in
  // multiples of NR, each within its bounds ([64, 1024], [MR, 1024], [64 NR, 1024 NR]).
  struct Case {
    const char* kernel;
    d::sgemm::Blocking (*for_caches)(std::size_t, std::size_t, std::size_t);
    std::size_t l1d, l2, l3;
    Index kc, mc, nc;
    const char* arithmetic;
  };
  const Case cases[] = {
      {"AVX2 16x6", d::avx2::blocks::for_caches, 32 << 10, 512 << 10, 32 << 20, 680, 96, 6144,
       "32768/2/24 = 682.7 -> 680; 524288/2/2720 = 96.4 -> 96; 33554432/2/2720 = 6168 -> 6144"},
      {"AVX2 16x6", d::avx2::blocks::for_caches, 48 << 10, 1280 << 10, 4 << 20, 1024, 160, 510,
       "49152/2/24 = 1024; 1310720/2/4096 = 160; 4194304/2/4096 = 512 -> 510"},
      {"AVX2 16x6", d::avx2::blocks::for_caches, 8 << 10, 64 << 10, 64 << 10, 168, 48, 384,
       "8192/2/24 = 170.7 -> 168; 65536/2/672 = 48.8 -> 48; the same for nc -> the bound 384"},
      {"AVX-512 32x12", d::avx512::blocks::for_caches, 48 << 10, 2 << 20, 32 << 20, 512, 512, 8184,
       "49152/2/48 = 512; 2097152/2/2048 = 512; 33554432/2/2048 = 8192 -> 8184"},
      {"AVX-512 32x12", d::avx512::blocks::for_caches, 32 << 10, 1 << 20, 32 << 20, 336, 384, 12288,
       "32768/2/48 = 341.3 -> 336; 1048576/2/1344 = 390.1 -> 384; 12483 -> 12288"},
      {"AVX-512 32x12", d::avx512::blocks::for_caches, 8 << 10, 64 << 10, 64 << 10, 80, 96, 768,
       "8192/2/48 = 85.3 -> 80; 65536/2/320 = 102.4 -> 96; the same for nc -> the bound 768"},
      // The AVX512-BF16 kernel's elements are two bytes: the same formula with 2 for 4.
      {"AVX512-BF16 32x12", d::avx512bf16::blocks::for_caches, 32 << 10, 512 << 10, 32 << 20, 680,
       192, 12288,
       "32768/2/24 = 682.7 -> 680; 524288/2/1360 = 192.8 -> 192; 12336.9 -> the bound 12288"},
      {"AVX512-BF16 32x12", d::avx512bf16::blocks::for_caches, 48 << 10, 2 << 20, 32 << 20, 1024,
       512, 8184, "49152/2/24 = 1024; 2097152/2/2048 = 512; 33554432/2/2048 = 8192 -> 8184"},
      {"AVX512-BF16 32x12", d::avx512bf16::blocks::for_caches, 8 << 10, 64 << 10, 64 << 10, 168, 96,
       768, "8192/2/24 = 170.7 -> 168; 65536/2/336 = 97.5 -> 96; nc -> the bound 768"},
  };
  for (const Case& c : cases) {
    INFO(c.kernel << ", caches " << c.l1d << " / " << c.l2 << " / " << c.l3 << ": "
                  << c.arithmetic);
    const d::sgemm::Blocking b = c.for_caches(c.l1d, c.l2, c.l3);
    CHECK(b.kc == c.kc);
    CHECK(b.mc == c.mc);
    CHECK(b.nc == c.nc);
  }
  static_assert(d::avx2::blocks::for_caches(32 << 10, 512 << 10, 32 << 20).kc == 680,
                "the formula is usable at compile time");

  SECTION("AVX2 on this CPU") {
    check_blocking_here<d::avx2::blocks>();
  }
  SECTION("AVX-512 on this CPU") {
    check_blocking_here<d::avx512::blocks>();
    // Every workspace has room for the kernel's packed operands (and the thin kernel's sliver).
    const Index kc = d::avx512::blocks::here().kc;
    d::GemmScratch<float> scratch;
    scratch.reserve(10, 700, 3 * kc);
    CHECK(scratch.packed_a_size() >= d::avx512::THIN * d::avx512::blocks::slab_depth(3 * kc));
    CHECK(scratch.packed_b_size() >= d::avx512::blocks::packed_b_size(700, 3 * kc));
  }
  SECTION("AVX512-BF16 on this CPU") {
    check_blocking_here<d::avx512bf16::blocks, true>();
    // A slab of kc2 pairs is kc2 words a row or column: half the floats of the same depth.
    const Index kc = d::avx512bf16::blocks::here().kc;
    CHECK(d::avx512bf16::blocks::packed_a_size(33, kc + 1) ==
          d::avx512bf16::blocks::slab_depth(kc + 1) / 2 * 64);
    // Only a bf16 reservation makes room for its packed pairs and the rounded copies.
    d::GemmScratch<float> scratch;
    scratch.reserve(40, 700, 3 * kc + 1, d::Precision::bf16);
    CHECK(scratch.packed_a_size() >= d::avx512bf16::blocks::packed_a_size(40, 3 * kc + 1));
    CHECK(scratch.packed_b_size() >= d::avx512bf16::blocks::packed_b_size(700, 3 * kc + 1));
    CHECK(scratch.rounded_a_size() >= 40 * (3 * kc + 1));
    CHECK(scratch.rounded_b_size() >= 700 * (3 * kc + 1));
    d::GemmScratch<float> full;
    full.reserve(40, 700, 3 * kc + 1);
    CHECK(full.rounded_a_size() == 0);
    CHECK(full.rounded_b_size() == 0);
  }
  SECTION("AMX, and packed buffers that start on a cache line") {
    // Slabs are whole tiles (32 steps) deep, at most twice the float kernels' kc for two bytes.
    const Index kc = d::amx::blocks::slab_depth(1 << 20);
    CHECK(kc % 32 == 0);
    CHECK(kc <= std::max<Index>(2 * d::amx::blocks::here().kc, 32) + 31);
    CHECK(d::amx::blocks::slab_depth(1) == 32);
    CHECK(d::amx::blocks::packed_pairs(33) == 32);
    for (const auto& [m, n, k] :
         {std::tuple<Index, Index, Index>{10, 700, 3 * kc + 1}, {1, 1, 1}, {513, 33, 100}}) {
      INFO("m=" << m << " n=" << n << " k=" << k);
      d::GemmScratch<float> scratch;
      scratch.reserve(m, n, k, d::Precision::bf16);
      CHECK(scratch.packed_a_size() >= d::amx::blocks::packed_a_size(m, k));
      CHECK(scratch.packed_b_size() >= d::amx::blocks::packed_b_size(n, k));
      // Every kernel's loads of packed operands (and AMX's tile rows) are then whole lines.
      CHECK(reinterpret_cast<std::uintptr_t>(scratch.packed_a()) % 64 == 0);
      CHECK(reinterpret_cast<std::uintptr_t>(scratch.packed_b()) % 64 == 0);
      d::GemmScratch<double> wide;
      wide.reserve(m, n, k);
      CHECK(reinterpret_cast<std::uintptr_t>(wide.packed_a()) % 64 == 0);
      CHECK(wide.packed_a_size() >= 1);
    }
  }
}

TEST_CASE("Products at the edges of the AVX-512 kernel's blocks", "[nn][gemm]") {
  INFO("products: " << d::kernel_name<float>());
  const std::vector<Shape> shapes = avx512_edge_shapes();
  check_every_layout(shapes);
}

TEST_CASE("Products at the edges of the AVX2 kernel's blocks", "[nn][gemm]") {
  INFO("products: " << d::kernel_name<float>());
  const std::vector<Shape> shapes = avx2_edge_shapes();
  check_every_layout(shapes);
}

TEST_CASE("The MLP's products against a double-precision product", "[nn][gemm]") {
  INFO("products: " << d::kernel_name<float>());
#if defined(GROVE_NO_DISPATCH)
  CHECK(!d::uses_avx512_kernel<float>());
#endif
  CHECK(!d::uses_avx512_kernel<double>());
  check_every_layout(kEdgeShapes);
}

TEST_CASE("The products through Eigen's kernel, as builds with GROVE_NO_DISPATCH run them",
          "[nn][gemm]") {
  // force_eigen_kernel() takes the path that GROVE_NO_DISPATCH compiles in alone (the header check
  // compiles grove/nn.hpp with it): every float product through Eigen's kernel, at the edges of
  // both grove kernels' blocks and of the thin products.
  const KernelChoice eigen(d::bf16_kernel_override(), true);
  CHECK(!d::uses_avx512_kernel<float>());
  CHECK(!d::uses_avx2_kernel<float>());
  CHECK(std::string(d::kernel_name<float>()) == "Eigen's GEMM kernel");
  std::vector<Shape> shapes = kEdgeShapes;
  for (const auto& more : {avx512_edge_shapes(), avx2_edge_shapes(), kThinShapes})
    shapes.insert(shapes.end(), more.begin(), more.end());
  check_every_layout(shapes);
}

TEST_CASE("The MLP network's own product shapes", "[nn][gemm]") {
  // [784, 512, 512, 10] at a batch of 128: forward, weight gradients, input gradients.
  const std::vector<Shape> forward = {{512, 128, 784}, {512, 128, 512}, {10, 128, 512}};
  const std::vector<Shape> weights = {{512, 784, 128}, {512, 512, 128}, {10, 512, 128}};
  const std::vector<Shape> inputs = {{512, 128, 512}, {512, 128, 10}};
  for (const int threads : {1, 2}) {
    check_shapes<false, false>(forward, threads, d::Into::add);
    check_shapes<false, true>(weights, threads, d::Into::overwrite);
    check_shapes<true, false>(inputs, threads, d::Into::overwrite);
  }
}

TEST_CASE("An empty inner dimension adds nothing, or writes zeros", "[nn][gemm]") {
  MatF a(4, 0), b(0, 3), c = MatF::Constant(4, 3, 2.f);
  d::GemmScratch<float> scratch;
  scratch.reserve(4, 3, 0);
  const d::Slice all{{0, 4}, {0, 3}};
  const d::View<const float> av{a.data(), 4, 0, 4}, bv{b.data(), 0, 3, 1};
  const d::View<float> cv{c.data(), 4, 3, 4};
  d::gemm_slice<false, false>(all, av, bv, cv, 1.f, scratch);
  CHECK((c.array() == 2.f).all());
  d::gemm_slice<false, false>(all, av, bv, cv, 1.f, scratch, d::Into::overwrite);
  CHECK((c.array() == 0.f).all());
}

TEST_CASE("Float gradients through these products agree with double ones", "[nn][gemm][grad]") {
  // The training passes in float (whichever kernel this build uses) against the same network in
  // double, with one and two threads.
  const auto params = nn::init_network_params<double>({70, 45, 33, 10}, rnd::key(5), 0.3);
  const Eigen::MatrixXd x = nn_test::random_matrix<double>(rnd::key(6), 70, 37);
  const Eigen::VectorXi y = nn_test::random_labels(rnd::key(7), 37, 10);
  const auto [loss_d, grads_d] = nn::value_and_grad(params, x, y);
  const auto params_f =
      grove::tree_map([](const auto& p) { return p.template cast<float>().eval(); }, params);
  const Eigen::MatrixXf x_f = x.cast<float>();
  for (const int threads : {1, 2}) {
    nn_test::ThreadCount scope(threads);
    const auto [loss_f, grads_f] = nn::value_and_grad(params_f, x_f, y);
    CHECK(loss_f == Approx(loss_d).epsilon(1e-5));
    const Eigen::VectorXd gd = grove::ravel(grads_d).first;
    const Eigen::VectorXd gf = grove::ravel(grads_f).first.cast<double>();
    CHECK((gf - gd).cwiseAbs().maxCoeff() <= 1e-5 * gd.cwiseAbs().maxCoeff());
  }
}

// --- bf16 products ------------------------------------------------------------------------------

TEST_CASE("The vector roundings to bf16 give round_to_bf16's bits", "[nn][gemm][bf16]") {
  // Every upper half (each sign, exponent and 7 fraction bits: zeros, subnormal values,
  // infinities, NaNs) with lower halves at and around the rounding points.
  const std::uint32_t lows[] = {0x0000, 0x0001, 0x1234, 0x3fff, 0x7fff,
                                0x8000, 0x8001, 0xbfff, 0xffff};
  std::vector<float> x;
  for (std::uint32_t hi = 0; hi < 0x10000; ++hi)
    for (const std::uint32_t lo : lows) x.push_back(std::bit_cast<float>(hi << 16 | lo));
  // As a column-major block whose rows are no multiple of a vector, with a column stride larger
  // than its rows (the lanes between hold NaNs of other payloads, which must not be read).
  const Index rows = 37, ld = 40, cols = (static_cast<Index>(x.size()) + rows - 1) / rows;
  std::vector<float> src(static_cast<std::size_t>(ld * cols), std::bit_cast<float>(0x7fa00001u));
  for (Index j = 0; j < cols; ++j)
    for (Index i = 0; i < rows; ++i)
      src[static_cast<std::size_t>(i + j * ld)] =
          x[static_cast<std::size_t>((i + j * rows) % static_cast<Index>(x.size()))];
  const auto check = [&](const char* what, auto round_copy) {
    INFO(what);
    const float guard = std::bit_cast<float>(0x12345678u);
    std::vector<float> dst(static_cast<std::size_t>(rows * cols + 8), guard);
    round_copy(src.data(), ld, rows, cols, dst.data());
    Index bad = 0;
    for (Index j = 0; j < cols; ++j)
      for (Index i = 0; i < rows; ++i) {
        const auto in = std::bit_cast<std::uint32_t>(src[static_cast<std::size_t>(i + j * ld)]);
        const auto got = std::bit_cast<std::uint32_t>(dst[static_cast<std::size_t>(i + j * rows)]);
        if (got != grove::detail::bf16_round_bits(in) && bad++ == 0)
          UNSCOPED_INFO("first wrong rounding: " << std::hex << in << " -> " << got);
      }
    CHECK(bad == 0);
    for (Index i = rows * cols; i < rows * cols + 8; ++i)
      CHECK(std::bit_cast<std::uint32_t>(dst[static_cast<std::size_t>(i)]) == 0x12345678u);
  };
  check("gemm.hpp's round_copy (the widest vectors this CPU runs)", d::round_copy);
#if defined(GROVE_NN_SGEMM_AVX2)
  if (d::avx2::available()) check("the AVX2 rounding", d::avx2::round_copy);
#endif
#if defined(GROVE_NN_SGEMM_AVX512)
  if (d::avx512::available())
    check("the AVX-512 rounding", d::avx512::round_copy);
  else
    WARN("this CPU has no AVX-512F: the AVX-512 rounding to bf16 is not run here");
#endif
  // The AVX512-BF16 kernel's pairs: each half is bf16_round_bits of its float.
  for (const float lo : {x[12345], x[400000], x[5]})
    for (const float hi : {x[99], x[543210], x[77777]})
      CHECK(d::avx512bf16::pair_bits(lo, hi) ==
            (grove::detail::bf16_round_bits(std::bit_cast<std::uint32_t>(hi)) |
             grove::detail::bf16_round_bits(std::bit_cast<std::uint32_t>(lo)) >> 16));
}

TEST_CASE("Which kernel computes the bf16 products", "[nn][gemm][bf16]") {
  const auto& cpu = grove::detail::this_cpu();
  const char* vendor = cpu.vendor == grove::detail::cpu_vendor::amd     ? "AMD"
                       : cpu.vendor == grove::detail::cpu_vendor::intel ? "Intel"
                                                                        : "another vendor";
  WARN("bf16 products: " << d::bf16_kernel_name() << " (float products: " << d::kernel_name<float>()
                         << "); " << vendor << ", AVX512-BF16 " << cpu.avx512_bf16 << ", AVX-512F "
                         << cpu.avx512f << ", AVX2+FMA " << cpu.avx2_fma);
  if (cpu.avx512_bf16) CHECK(cpu.avx512f);
  const std::string copies = "Eigen's GEMM kernel on copies rounded to bf16";
#if defined(GROVE_NO_DISPATCH)
  CHECK(!d::uses_native_bf16_kernel());
  CHECK(d::bf16_kernel_name() == copies);
#elif defined(__x86_64__)
  if (!cpu.avx512_bf16)
    WARN(
        "this CPU has no AVX512-BF16 (vdpbf16ps): the native bf16 kernel cannot run here; its "
        "blocking and packing are tested with vdpbf16ps emulated");
  // AMX where this process may use the tiles, else vdpbf16ps on AMD, else rounded inputs.
  if (!d::amx::available())
    WARN("grove's AMX kernel does not run here: " << d::amx::unavailable_reason());
  CHECK(d::uses_amx_kernel() == d::amx::available());
  if (d::uses_amx_kernel())
    CHECK(d::bf16_kernel_name() == std::string("grove's AMX kernel (tdpbf16ps)"));
  CHECK(d::uses_native_bf16_kernel() ==
        (cpu.avx512_bf16 && !d::uses_amx_kernel() && cpu.vendor == grove::detail::cpu_vendor::amd));
  if (cpu.avx2_fma && !cpu.avx512f)
    CHECK(d::bf16_kernel_name() == std::string("grove's AVX2 kernel, inputs rounded to bf16"));
  if (cpu.avx512f && !d::uses_native_bf16_kernel() && !d::uses_amx_kernel())
    CHECK(d::bf16_kernel_name() == std::string("grove's AVX-512 kernel, inputs rounded to bf16"));
  {
    const KernelChoice choice(d::Bf16Kernel::native);
    CHECK(d::uses_native_bf16_kernel() == cpu.avx512_bf16);
    CHECK(!d::uses_amx_kernel());
  }
  {
    const KernelChoice choice(d::Bf16Kernel::amx);
    CHECK(d::uses_amx_kernel() == d::amx::available());
  }
  {
    const KernelChoice choice(d::Bf16Kernel::rounded);
    CHECK(!d::uses_native_bf16_kernel());
    CHECK(!d::uses_amx_kernel());
  }
  {
    const KernelChoice choice(d::Bf16Kernel::native, true);
    CHECK(!d::uses_native_bf16_kernel());
    CHECK(d::bf16_kernel_name() == copies);
  }
#endif
  {
    const KernelChoice choice(d::Bf16Kernel::emulated);
    CHECK(!d::uses_native_bf16_kernel());
    CHECK(d::bf16_kernel_name() ==
          std::string("grove's AVX512-BF16 kernel, vdpbf16ps emulated in scalar code"));
  }
  {
    const KernelChoice choice(d::Bf16Kernel::amx_emulated);
    CHECK(!d::uses_amx_kernel());
    CHECK(d::bf16_kernel_name() ==
          std::string("grove's AMX kernel, tdpbf16ps emulated in scalar code"));
  }
  CHECK(d::bf16_kernel_override() == d::Bf16Kernel::automatic);
}

TEST_CASE("bf16 products of the kernel this CPU runs against a double product",
          "[nn][gemm][bf16]") {
  WARN("bf16 products: " << d::bf16_kernel_name());
  check_all(kEdgeShapes, d::Precision::bf16);
  check_all(kThinShapes, d::Precision::bf16);
  // The edges of the blocks of the kernel that runs (the other's shapes are ordinary ones to it).
  if (d::uses_avx2_kernel<float>()) check_all(avx2_edge_shapes(), d::Precision::bf16);
  if (d::uses_avx512_kernel<float>()) check_all(avx512_edge_shapes(), d::Precision::bf16);
  // The MLP's own shapes ([784, 512, 512, 10] at a batch of 128).
  for (const int threads : {1, 2}) {
    check_shapes<false, false>({{512, 128, 784}, {10, 128, 512}}, threads, d::Into::add,
                               d::Precision::bf16);
    check_shapes<false, true>({{512, 784, 128}, {10, 512, 128}}, threads, d::Into::overwrite,
                              d::Precision::bf16);
    check_shapes<true, false>({{512, 128, 512}, {512, 128, 10}}, threads, d::Into::overwrite,
                              d::Precision::bf16);
  }
}

TEST_CASE("bf16 products of Eigen's kernel on rounded copies against a double product",
          "[nn][gemm][bf16]") {
  const KernelChoice choice(d::Bf16Kernel::automatic, true);
  INFO("bf16 products: " << d::bf16_kernel_name());
  check_all(kEdgeShapes, d::Precision::bf16);
  check_all(kThinShapes, d::Precision::bf16);
}

TEST_CASE(
    "bf16 products of the AVX512-BF16 kernel with vdpbf16ps emulated against a double product",
    "[nn][gemm][bf16]") {
  // The real driver and packing on every CPU: the blocks' edges, thin products, odd and short
  // inner dimensions, the slices of 1, 2 and 3 threads, and the room reserve() makes.
  const KernelChoice choice(d::Bf16Kernel::emulated);
  INFO("bf16 products: " << d::bf16_kernel_name());
  check_all(bf16_edge_shapes(), d::Precision::bf16);
  // The general shapes too, less the largest (the emulation is slow).
  std::vector<Shape> shapes;
  for (const Shape& s : kEdgeShapes)
    if (s.m * s.n * s.k < 5'000'000) shapes.push_back(s);
  check_all(shapes, d::Precision::bf16);
}

TEST_CASE("bf16 products of the native AVX512-BF16 kernel", "[nn][gemm][bf16]") {
#if defined(GROVE_NN_SGEMM_AVX512BF16)
  if (!d::avx512bf16::available()) {
    WARN(
        "this CPU has no AVX512-BF16 (vdpbf16ps): grove's native bf16 kernel is not run here "
        "(its blocking and packing are, with vdpbf16ps emulated)");
    CHECK(!d::uses_native_bf16_kernel());
    return;
  }
  const KernelChoice choice(d::Bf16Kernel::native);
  REQUIRE(d::uses_native_bf16_kernel());
  check_all(bf16_edge_shapes(), d::Precision::bf16);
  check_all(kEdgeShapes, d::Precision::bf16);
  // The emulation follows the instruction set manual's description of vdpbf16ps. Where the
  // hardware computes other bits (an implementation may sum a lane's pair with one rounding), the
  // results above still had to meet the float bound; here a difference in bits is reported, not
  // failed, and the special values (NaN, infinities) must land in the same places.
  const auto compare = [](auto tag) {
    constexpr bool TA = decltype(tag)::value;
    std::uint32_t seed = 100;
    for (const Shape& s : bf16_edge_shapes()) {
      INFO("m=" << s.m << " n=" << s.n << " k=" << s.k << " TA=" << TA);
      const Operands ops = operands<TA, false>(s, seed++);
      MatF native, emulated;
      {
        const KernelChoice use(d::Bf16Kernel::native);
        native = sliced_product<TA, false>(s, ops, 1, d::Into::add, d::Precision::bf16);
      }
      {
        const KernelChoice use(d::Bf16Kernel::emulated);
        emulated = sliced_product<TA, false>(s, ops, 1, d::Into::add, d::Precision::bf16);
      }
      const Index at = first_difference(native, emulated);
      if (at >= 0)
        WARN("the native kernel and the emulation of vdpbf16ps differ in bits, first at element "
             << at << ": " << native.data()[at] << " vs " << emulated.data()[at]);
      CHECK(native.array().isNaN().matrix() == emulated.array().isNaN().matrix());
      CHECK(native.array().isInf().matrix() == emulated.array().isInf().matrix());
    }
  };
  compare(std::false_type{});
  compare(std::true_type{});
  const Index kc2 = 9;
  std::vector<std::uint32_t> a(static_cast<std::size_t>(kc2 * d::avx512bf16::MR)),
      b(static_cast<std::size_t>(kc2 * d::avx512bf16::NR));
  const std::uint16_t specials[] = {0x0001, 0x8003, 0x007f, 0x0080, 0x7f80, 0xff80,
                                    0x1f80, 0x9f00, 0x3f80, 0xbf80, 0x4000, 0x0000};
  std::uint32_t state = 12345;
  const auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return state;
  };
  for (auto& w : a)
    w = next() % 4 == 0 ? specials[next() % 12] | std::uint32_t(specials[next() % 12]) << 16
                        : (next() & 0x3fff3fffu) | 0x30003000u;
  for (auto& w : b)
    w = next() % 4 == 0 ? specials[next() % 12] | std::uint32_t(specials[next() % 12]) << 16
                        : (next() & 0x3fff3fffu) | 0x30003000u;
  MatF c1 = MatF::Zero(32, 12), c2 = MatF::Zero(32, 12);
  d::avx512bf16::native::run<2, 12>(kc2, a.data(), b.data(), c1.data(), 32, 1.f, 32, 12, false);
  d::avx512bf16::emulated::run<2, 12>(kc2, a.data(), b.data(), c2.data(), 32, 1.f, 32, 12, false);
  Index differ = 0;
  for (Index i = 0; i < c1.size(); ++i) {
    const float x = c1.data()[i], y = c2.data()[i];
    CHECK(std::isnan(x) == std::isnan(y));
    CHECK(std::isinf(x) == std::isinf(y));
    if (!(std::isnan(x) && std::isnan(y)) &&
        std::bit_cast<std::uint32_t>(x) != std::bit_cast<std::uint32_t>(y))
      ++differ;
  }
  if (differ > 0)
    WARN(differ << " of " << c1.size()
                << " results of the micro-kernel on special values differ in bits from the "
                   "emulation of vdpbf16ps");
#else
  WARN(
      "this build has no AVX512-BF16 kernel (GROVE_NO_DISPATCH, or not x86-64 with GCC or "
      "Clang): its blocking and packing are tested with vdpbf16ps emulated");
  CHECK(!d::uses_native_bf16_kernel());
#endif
}

TEST_CASE("bf16 products of the AMX kernel with tdpbf16ps emulated against a double product",
          "[nn][gemm][bf16][amx]") {
  // The AMX driver and scalar packing on every CPU: tiles' and blocks' edges, thin products, odd
  // and short inner dimensions, the slices of 1, 2 and 3 threads, and the room reserve() makes.
  const KernelChoice choice(d::Bf16Kernel::amx_emulated);
  INFO("bf16 products: " << d::bf16_kernel_name());
  check_all(amx_edge_shapes(), d::Precision::bf16);
}

TEST_CASE("bf16 products of the native AMX kernel", "[nn][gemm][bf16][amx]") {
  if (!d::amx::available()) {
    WARN("grove's AMX kernel is not run here: "
         << d::amx::unavailable_reason()
         << " (its blocking and packing are, with tdpbf16ps emulated)");
    const KernelChoice choice(d::Bf16Kernel::amx);
    CHECK(!d::uses_amx_kernel());
    return;
  }
#if defined(GROVE_NN_SGEMM_AMX)
  const KernelChoice choice(d::Bf16Kernel::amx);
  REQUIRE(d::uses_amx_kernel());
  check_all(amx_edge_shapes(), d::Precision::bf16);
  check_all(kEdgeShapes, d::Precision::bf16);
  check_all(kThinShapes, d::Precision::bf16);
  // The vector packing writes the scalar packing's words, padding included.
  std::uint32_t seed = 500;
  for (const Shape& s : amx_edge_shapes()) {
    if (s.k > 4096) continue;
    INFO("m=" << s.m << " n=" << s.n << " k=" << s.k);
    const Index kc = std::min(s.k, d::amx::blocks::slab_depth(s.k)),
                kc2p = d::amx::blocks::packed_pairs(kc);
    const Index mc = std::min(s.m, d::amx::blocks::block_height(s.m));
    const Index nc = std::min(s.n, d::amx::blocks::here().nc);
    const Operands ops = operands<false, false>({s.m, s.n, s.k}, seed++);
    const Operands opt = operands<true, true>({s.m, s.n, s.k}, seed++);
    const auto words_a = [&](auto pack, const MatF& a) {
      std::vector<std::uint32_t> w(
          static_cast<std::size_t>(d::amx::blocks::packed_a_size(s.m, s.k)), 7u);
      pack(a.data(), a.rows(), mc, kc, kc2p, w.data());
      return w;
    };
    const auto words_b = [&](auto pack, const MatF& b) {
      std::vector<std::uint32_t> w(
          static_cast<std::size_t>(d::amx::blocks::packed_b_size(s.n, s.k)), 7u);
      pack(b.data(), b.rows(), kc, nc, kc2p, w.data());
      return w;
    };
    using scalar = d::amx::scalar_packing;
    using vector = d::amx::vector_packing;
    CHECK(words_a(scalar::a<false>, ops.a_store) == words_a(vector::a<false>, ops.a_store));
    CHECK(words_a(scalar::a<true>, opt.a_store) == words_a(vector::a<true>, opt.a_store));
    CHECK(words_b(scalar::b<false>, ops.b_store) == words_b(vector::b<false>, ops.b_store));
    CHECK(words_b(scalar::b<true>, opt.b_store) == words_b(vector::b<true>, opt.b_store));
  }
  // tdpbf16ps against its emulation (the manual's order, one rounding per product): the results
  // above had to meet the float bound; here a difference in bits is counted and reported, not
  // failed (the hardware sums a tile row's products in an order of its own: on a Xeon with AMX
  // the emulation's bits matched about a third of the results), and NaNs must land in the same
  // places.
  std::uint32_t seed2 = 900;
  int shapes = 0, differ = 0;
  for (const Shape& s : amx_edge_shapes()) {
    if (s.m * s.n * s.k > 2'000'000) continue;
    INFO("m=" << s.m << " n=" << s.n << " k=" << s.k);
    const Operands ops = operands<false, false>(s, seed2++);
    MatF native, emulated;
    {
      const KernelChoice use(d::Bf16Kernel::amx);
      native = sliced_product<false, false>(s, ops, 1, d::Into::add, d::Precision::bf16);
    }
    {
      const KernelChoice use(d::Bf16Kernel::amx_emulated);
      emulated = sliced_product<false, false>(s, ops, 1, d::Into::add, d::Precision::bf16);
    }
    ++shapes;
    differ += first_difference(native, emulated) >= 0 ? 1 : 0;
    CHECK(native.array().isNaN().matrix() == emulated.array().isNaN().matrix());
  }
  if (differ > 0)
    WARN("tdpbf16ps and its emulation differ in bits in " << differ << " of " << shapes
                                                          << " products");
#endif
}

TEST_CASE("bf16 products when the operating system refuses the AMX tile state",
          "[nn][gemm][bf16][amx]") {
#if defined(GROVE_NN_SGEMM_AMX)
  // As if arch_prctl(ARCH_REQ_XCOMP_PERM) had failed: the next bf16 path runs, and says why.
  struct Refused {
    Refused() { d::amx::refuse_tiles_for_testing() = true; }
    ~Refused() { d::amx::refuse_tiles_for_testing() = false; }
  };
  const Refused refused;
  CHECK(!d::amx::available());
  CHECK(!d::uses_amx_kernel());
  CHECK(std::string(d::amx::unavailable_reason()).find("refused") != std::string::npos);
  CHECK(std::string(d::bf16_kernel_name()).find("AMX") == std::string::npos);
  INFO("bf16 products: " << d::bf16_kernel_name());
  check_all(kThinShapes, d::Precision::bf16);
  check_all(amx_edge_shapes(), d::Precision::bf16);
#else
  WARN("this build has no AMX kernel: " << d::amx::unavailable_reason());
  CHECK(!d::uses_amx_kernel());
#endif
}

TEST_CASE("bf16 products equal float products of inputs rounded beforehand bit for bit",
          "[nn][gemm][bf16]") {
  SECTION("the float kernel this CPU runs, on rounded inputs") {
    // The native kernels (AMX, AVX512-BF16) sum pairs of steps: not the float product's bits.
    const KernelChoice choice(d::Bf16Kernel::rounded);
    INFO("bf16 products: " << d::bf16_kernel_name());
    check_same_bits_all(kEdgeShapes);
    check_same_bits_all(kThinShapes);
    check_same_bits_all(avx2_edge_shapes());
  }
  SECTION("Eigen's kernel on rounded copies") {
    const KernelChoice choice(d::Bf16Kernel::automatic, true);
    check_same_bits_all(kEdgeShapes);
    check_same_bits_all(kThinShapes);
  }
  SECTION("the AVX512-BF16 kernel, vdpbf16ps emulated: its packing rounds as round_to_bf16 does") {
    const KernelChoice choice(d::Bf16Kernel::emulated);
    check_rounding_idempotent<false, false>(bf16_edge_shapes());
    check_rounding_idempotent<true, true>(bf16_edge_shapes());
  }
  SECTION("the AMX kernel, tdpbf16ps emulated: its packing rounds as round_to_bf16 does") {
    const KernelChoice choice(d::Bf16Kernel::amx_emulated);
    check_rounding_idempotent<false, false>(amx_edge_shapes());
    check_rounding_idempotent<true, true>(amx_edge_shapes());
  }
#if defined(GROVE_NN_SGEMM_AVX2)
  SECTION("grove's AVX2 kernel called directly, thin products included") {
    if (d::avx2::available()) {
      std::uint32_t seed = 1;
      std::vector<Shape> shapes = avx2_edge_shapes();
      shapes.insert(shapes.end(), kThinShapes.begin(), kThinShapes.end());
      for (const Shape& s : shapes) {
        using d::avx2::blocks;
        const Index pa = blocks::packed_a_size(s.m, s.k), pb = blocks::packed_b_size(s.n, s.k);
        check_kernel_same_bits<false, false>(s, d::avx2::gemm<false, false, true>,
                                             d::avx2::gemm<false, false, false>, pa, pb, seed++);
        check_kernel_same_bits<false, true>(s, d::avx2::gemm<false, true, true>,
                                            d::avx2::gemm<false, true, false>, pa, pb, seed++);
        check_kernel_same_bits<true, false>(s, d::avx2::gemm<true, false, true>,
                                            d::avx2::gemm<true, false, false>, pa, pb, seed++);
        check_kernel_same_bits<true, true>(s, d::avx2::gemm<true, true, true>,
                                           d::avx2::gemm<true, true, false>, pa, pb, seed++);
      }
    } else {
      WARN("this CPU has no AVX2 and FMA3: grove's AVX2 kernel is not run here");
    }
  }
#endif
#if defined(GROVE_NN_SGEMM_AVX512)
  SECTION("grove's AVX-512 kernel called directly, its thin kernel included") {
    if (d::avx512::available()) {
      std::uint32_t seed = 1;
      for (const Shape& s : avx512_edge_shapes()) {
        using d::avx512::blocks;
        const Index pa = blocks::packed_a_size(s.m, s.k), pb = blocks::packed_b_size(s.n, s.k);
        check_kernel_same_bits<false, false>(s, d::avx512::gemm<false, false, true>,
                                             d::avx512::gemm<false, false, false>, pa, pb, seed++);
        check_kernel_same_bits<false, true>(s, d::avx512::gemm<false, true, true>,
                                            d::avx512::gemm<false, true, false>, pa, pb, seed++);
        check_kernel_same_bits<true, false>(s, d::avx512::gemm<true, false, true>,
                                            d::avx512::gemm<true, false, false>, pa, pb, seed++);
        check_kernel_same_bits<true, true>(s, d::avx512::gemm<true, true, true>,
                                           d::avx512::gemm<true, true, false>, pa, pb, seed++);
      }
    } else {
      WARN(
          "this CPU has no AVX-512F: grove's AVX-512 kernel (rounding as it packs) is not run "
          "here");
    }
  }
#endif
}

TEST_CASE("bf16 products with NaN or infinity among the inputs or an empty inner dimension",
          "[nn][gemm][bf16]") {
  check_specials_all(d::Precision::full);
  SECTION("the kernel this CPU runs") {
    check_specials_all(d::Precision::bf16);
    check_empty_inner(d::Precision::bf16);
  }
  SECTION("Eigen's kernel on rounded copies") {
    const KernelChoice choice(d::Bf16Kernel::automatic, true);
    check_specials_all(d::Precision::bf16);
    check_empty_inner(d::Precision::bf16);
  }
  SECTION("the AVX512-BF16 kernel, vdpbf16ps emulated") {
    const KernelChoice choice(d::Bf16Kernel::emulated);
    check_specials_all(d::Precision::bf16);
    check_empty_inner(d::Precision::bf16);
  }
  SECTION("the AMX kernel, tdpbf16ps emulated") {
    const KernelChoice choice(d::Bf16Kernel::amx_emulated);
    check_specials_all(d::Precision::bf16);
    check_empty_inner(d::Precision::bf16);
  }
  SECTION("the native AMX kernel") {
    if (d::amx::available()) {
      const KernelChoice choice(d::Bf16Kernel::amx);
      REQUIRE(d::uses_amx_kernel());
      check_specials_all(d::Precision::bf16);
      check_empty_inner(d::Precision::bf16);
    }
  }
#if defined(GROVE_NN_SGEMM_AVX512BF16)
  SECTION("the native AVX512-BF16 kernel") {
    if (d::avx512bf16::available()) {
      const KernelChoice choice(d::Bf16Kernel::native);
      check_specials_all(d::Precision::bf16);
      check_empty_inner(d::Precision::bf16);
    }
  }
#endif
}

TEST_CASE("vdpbf16ps emulated: the order of a pair and subnormal inputs and results",
          "[nn][gemm][bf16]") {
  using d::avx512bf16::dot_pair;
  const auto word = [](float lo, float hi) {
    return std::bit_cast<std::uint32_t>(hi) | std::bit_cast<std::uint32_t>(lo) >> 16;
  };
  // The high halves' product first: (1 + -1) + 2^-30, where the other order rounds 1 + 2^-30 to 1.
  CHECK(dot_pair(1.f, word(0x1p-30f, -1.f), word(1.f, 1.f)) == 0x1p-30f);
  // Each product is added with one rounding (of a fused multiply-add).
  CHECK(dot_pair(0.f, word(3.f, 0.f), word(5.f, 0.f)) == 15.f);
  // A subnormal bf16 input reads as zero (its product would be 2^-30 here).
  const float subnormal = std::bit_cast<float>(0x00010000u);
  REQUIRE(subnormal > 0.f);
  CHECK(dot_pair(0.f, word(subnormal, 0.f), word(0x1p100f, 0.f)) == 0.f);
  CHECK(dot_pair(0.5f, word(subnormal, 0.f), word(0x1p100f, 0.f)) == 0.5f);
  // A subnormal result is flushed to zero, keeping its sign.
  const float flushed = dot_pair(0.f, word(-0x1p-70f, 0.f), word(0x1p-70f, 0.f));
  CHECK(flushed == 0.f);
  CHECK(std::signbit(flushed));
  CHECK(dot_pair(0.f, word(0x1p-60f, 0.f), word(0x1p-60f, 0.f)) == 0x1p-120f);
  // NaN and infinity propagate.
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(std::isinf(dot_pair(1.f, word(inf, 0.f), word(2.f, 0.f))));
  CHECK(std::isnan(dot_pair(1.f, word(inf, 0.f), word(0.f, 0.f))));
}

#if defined(NDEBUG)  // with assertions on, asking for it is an assertion failure
TEST_CASE("bf16 products of doubles are computed in full precision", "[nn][gemm][bf16]") {
  const MatD a = nn_test::random_matrix<double>(rnd::key(3), 7, 5);
  const MatD b = nn_test::random_matrix<double>(rnd::key(4), 5, 6);
  MatD c1 = MatD::Zero(7, 6), c2 = MatD::Zero(7, 6);
  d::GemmScratch<double> scratch;
  scratch.reserve(7, 6, 5, d::Precision::bf16);
  const d::Slice all{{0, 7}, {0, 6}};
  const d::View<const double> av{a.data(), 7, 5, 7}, bv{b.data(), 5, 6, 5};
  d::gemm_slice<false, false>(all, av, bv, {c1.data(), 7, 6, 7}, 1.0, scratch, d::Into::add,
                              d::Precision::bf16);
  d::gemm_slice<false, false>(all, av, bv, {c2.data(), 7, 6, 7}, 1.0, scratch);
  CHECK((c1.array() == c2.array()).all());
}
#endif
