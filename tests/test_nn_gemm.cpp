// The MLP's matrix products (grove/nn/detail/gemm.hpp) against a plain double-precision product.
//
// On a CPU with AVX-512 this tests grove's own kernel (detail/sgemm_avx512.hpp), on one with AVX2
// and FMA3 but not AVX-512 grove's AVX2 kernel (detail/sgemm_avx2.hpp), and Eigen's elsewhere;
// the same file is also built with GROVE_NO_DISPATCH (test_nn_gemm_eigen), which tests Eigen's
// kernel everywhere. The shapes cover every edge of the kernels' blocking: for the AVX-512 one
// partial 32 x 12 blocks (and its narrower 8- and 4-column kernels), products of at most 16 rows
// (its thin kernel, with every count of columns that its 12-, 8-, 4-, 2- and 1-column pieces
// cover); for the AVX2 one partial 16 x 6 blocks (and its narrower 8-row and 4- and 2-column
// kernels); for both, inner dimensions and row counts around the slabs and blocks of the blocking
// this CPU's caches give them.
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <cmath>
#include <grove/nn.hpp>
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

// op(A) op(B) in double, from the float operands.
template <bool TA, bool TB>
MatD reference(const MatF& a, const MatF& b) {
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

// Computes C = C0 + alpha op(A) op(B) (or alpha op(A) op(B) with Into::overwrite) with `threads`
// slices as grove's passes cut them, C stored with a column stride larger than its row count and
// guard values around it, and checks it element by element.
template <bool TA, bool TB>
void check_product(Shape s, int threads, d::Into into, std::uint32_t seed) {
  const auto [m, n, k] = s;
  INFO("m=" << m << " n=" << n << " k=" << k << " TA=" << TA << " TB=" << TB
            << " threads=" << threads << " overwrite=" << (into == d::Into::overwrite));
  const auto keys = rnd::split(rnd::key(seed), 3);
  // Stored operands, with padding rows so that the leading dimensions differ from the sizes.
  const MatF a_store = nn_test::random_matrix<float>(keys[0], (TA ? k : m) + 3, TA ? m : k);
  const MatF b_store = nn_test::random_matrix<float>(keys[1], (TB ? n : k) + 5, TB ? k : n);
  const MatF a = a_store.topRows(TA ? k : m), b = b_store.topRows(TB ? n : k);
  const float alpha = -0.75f, guard = 12345.f;
  const float nan = std::numeric_limits<float>::quiet_NaN();

  MatF c0 = nn_test::random_matrix<float>(keys[2], m, n);
  MatF c_store = MatF::Constant(m + 7, n, guard);
  c_store.topRows(m) = into == d::Into::overwrite ? MatF::Constant(m, n, nan) : c0;

  const d::View<const float> av{a_store.data(), a.rows(), a.cols(), a_store.rows()};
  const d::View<const float> bv{b_store.data(), b.rows(), b.cols(), b_store.rows()};
  const d::View<float> cv{c_store.data(), m, n, c_store.rows()};
  std::vector<d::GemmScratch<float>> scratch(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    const d::Slice sl = d::slice_of(m, n, k, t, threads);
    if (!sl.empty())
      scratch[static_cast<std::size_t>(t)].reserve(sl.rows.size(), sl.cols.size(), k);
  }
  // The slices run one after the other here: what is checked is that they tile C exactly.
  for (int t = 0; t < threads; ++t)
    d::gemm_slice<TA, TB>(d::slice_of(m, n, k, t, threads), av, bv, cv, alpha,
                          scratch[static_cast<std::size_t>(t)], into);

  const MatD expected = (into == d::Into::overwrite ? MatD::Zero(m, n) : MatD(c0.cast<double>())) +
                        double(alpha) * reference<TA, TB>(a, b);
  const MatD bound = std::abs(double(alpha)) * error_bound<TA, TB>(a, b, k) +
                     MatD::Constant(m, n, 1e-30) +
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
  CHECK((c_store.bottomRows(7).array() == guard).all());
}

template <bool TA, bool TB>
void check_shapes(const std::vector<Shape>& shapes, int threads, d::Into into) {
  std::uint32_t seed = 1;
  for (const Shape& s : shapes) check_product<TA, TB>(s, threads, into, seed++);
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
// into slabs of equal depth and row blocks of equal height (whole slivers of MR rows), never
// beyond kc and mc and no more of them than kc and mc need.
template <class Blocks>
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
    CHECK(slabs * depth - k < slabs);
  }
  for (Index m = 1; m < 4 * b.mc; m += 13) {
    const Index h = Blocks::block_height(m);
    CHECK(h <= b.mc);
    CHECK(h % Blocks::sliver_rows == 0);
    CHECK((m + h - 1) / h == (m + b.mc - 1) / b.mc);
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
}

TEST_CASE("Products at the edges of the AVX-512 kernel's blocks", "[nn][gemm]") {
  INFO("products: " << d::kernel_name<float>());
  const std::vector<Shape> shapes = avx512_edge_shapes();
  for (const int threads : {1, 2, 3}) {
    for (const d::Into into : {d::Into::add, d::Into::overwrite}) {
      check_shapes<false, false>(shapes, threads, into);
      check_shapes<false, true>(shapes, threads, into);
      check_shapes<true, false>(shapes, threads, into);
      check_shapes<true, true>(shapes, threads, into);
    }
  }
}

TEST_CASE("Products at the edges of the AVX2 kernel's blocks", "[nn][gemm]") {
  INFO("products: " << d::kernel_name<float>());
  const std::vector<Shape> shapes = avx2_edge_shapes();
  for (const int threads : {1, 2, 3}) {
    for (const d::Into into : {d::Into::add, d::Into::overwrite}) {
      check_shapes<false, false>(shapes, threads, into);
      check_shapes<false, true>(shapes, threads, into);
      check_shapes<true, false>(shapes, threads, into);
      check_shapes<true, true>(shapes, threads, into);
    }
  }
}

TEST_CASE("The MLP's products against a double-precision product", "[nn][gemm]") {
  INFO("products: " << d::kernel_name<float>());
#if defined(GROVE_NO_DISPATCH)
  CHECK(!d::uses_avx512_kernel<float>());
#endif
  CHECK(!d::uses_avx512_kernel<double>());
  for (const int threads : {1, 2, 3}) {
    for (const d::Into into : {d::Into::add, d::Into::overwrite}) {
      check_shapes<false, false>(kEdgeShapes, threads, into);
      check_shapes<false, true>(kEdgeShapes, threads, into);
      check_shapes<true, false>(kEdgeShapes, threads, into);
      check_shapes<true, true>(kEdgeShapes, threads, into);
    }
  }
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
