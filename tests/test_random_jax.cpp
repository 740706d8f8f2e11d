// grove::random against numbers published by JAX, in both counter layouts, and the API's contract:
// keys, split/fold_in relations, 2-D results in JAX's row-major order, fill_* and errors.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "grove/random.hpp"

namespace gr = grove::random;

namespace {

// A float32 value as JAX printed it. numpy prints the shortest decimal that reads back as the
// same float32, cut to at most `decimals` digits after the point (8 for arrays). Either way the
// value is pinned exactly when |x| >= 0.125 and decimals >= 8 (neighbouring floats then lie more
// than 1e-8 apart); JAX's test suite writes its expected floats with 6 decimals.
bool prints_as(float value, double printed, int decimals) {
  if (static_cast<float>(printed) == value) return true;
  return std::fabs(static_cast<double>(value) - printed) <= 0.5 * std::pow(10.0, -decimals);
}

// JAX's tests/random_test.py seeds each distribution's key with zlib.adler32(name + impl).
std::uint32_t adler32(const std::string& text) {
  std::uint32_t a = 1, b = 0;
  for (unsigned char c : text) {
    a = (a + c) % 65521;
    b = (b + a) % 65521;
  }
  return (b << 16) | a;
}

gr::Key jax_test_key(const std::string& distribution) {
  // Those tests run only with jax_threefry_partitionable off: the legacy layout.
  return gr::legacy_key(adler32(distribution + "threefry2x32"));
}

std::array<std::uint32_t, 2> words(const gr::Key& k) {
  return gr::key_data(k);
}

}  // namespace

// --- values from shared/reference/jax-random.md
// ---------------------------------------------------

TEST_CASE("jax: published values, current (partitionable) layout", "[random][jax]") {
  const auto k = gr::key(0);
  const auto keys = gr::split(k);
  CHECK(words(keys[0]) == std::array<std::uint32_t, 2>{1797259609u, 2579123966u});
  CHECK(words(keys[1]) == std::array<std::uint32_t, 2>{928981903u, 3453687069u});

  const auto u = gr::uniform(k, 3);
  CHECK(u[0] == 0.947667f);
  CHECK(u[1] == 0.9785799f);
  CHECK(u[2] == 0.33229148f);
}

TEST_CASE("jax: published values, legacy layout", "[random][jax]") {
  const auto k = gr::legacy_key(0);
  const auto two = gr::split(k);
  CHECK(words(two[0]) == std::array<std::uint32_t, 2>{4146024105u, 967050713u});
  CHECK(words(two[1]) == std::array<std::uint32_t, 2>{2718843009u, 1272950319u});

  const auto four = gr::split(k, 4);
  REQUIRE(four.size() == 4);
  CHECK(words(four[0]) == std::array<std::uint32_t, 2>{2285895361u, 1501764800u});
  CHECK(words(four[1]) == std::array<std::uint32_t, 2>{1518642379u, 4090693311u});
  CHECK(words(four[2]) == std::array<std::uint32_t, 2>{433833334u, 4221794875u});
  CHECK(words(four[3]) == std::array<std::uint32_t, 2>{839183663u, 3740430601u});

  CHECK(words(gr::fold_in(k, 4)) == std::array<std::uint32_t, 2>{2285895361u, 433833334u});

  const auto u = gr::uniform(k, 3);
  CHECK(u[0] == 0.9653214f);
  CHECK(u[1] == 0.31468165f);
  CHECK(u[2] == 0.63302994f);

  // Published with 8 decimals; within 2 ulp is the promise, this one is bit-exact.
  const float n = gr::normal(k, 1)[0];
  CHECK(prints_as(n, -0.20584226, 8));
}

// --- values from JAX's own test suite (tests/random_test.py, legacy layout)
// -----------------------

TEST_CASE("jax: tests/random_test.py testPRNGValues and testRngRandomBits", "[random][jax]") {
  const auto k = gr::legacy_key(0);
  const gr::Matrix<std::int32_t> r32 = gr::randint(k, 3, 3, 0, 8);
  const gr::Matrix<std::int32_t> e32{{2, 1, 3}, {6, 1, 5}, {6, 3, 4}};
  CHECK(r32 == e32);
  // jax_enable_x64: the int64 dtype draws 64-bit words.
  const gr::Matrix<std::int64_t> r64 = gr::randint<std::int64_t>(k, 3, 3, 0, 8);
  const gr::Matrix<std::int64_t> e64{{7, 2, 6}, {2, 1, 0}, {6, 7, 7}};
  CHECK(r64 == e64);

  const auto k1701 = gr::legacy_key(1701);
  CHECK(gr::bits<std::uint8_t>(k1701, 3) == gr::Vector<std::uint8_t>{{216, 115, 43}});
  CHECK(gr::bits<std::uint16_t>(k1701, 3) == gr::Vector<std::uint16_t>{{41682, 1300, 55017}});
  CHECK(gr::bits(k1701, 3) == gr::Vector<std::uint32_t>{{56197195u, 4200222568u, 961309823u}});
  CHECK(gr::bits<std::uint64_t>(k1701, 3) ==
        gr::Vector<std::uint64_t>{
            {3982329540505020460u, 16822122385914693683u, 7882654074788531506u}});
}

TEST_CASE("jax: tests/random_test.py _RANDOM_VALUES_CASES for threefry2x32", "[random][jax]") {
  CHECK(gr::bits<std::uint8_t>(jax_test_key("bits"), 5) ==
        gr::Vector<std::uint8_t>{{10, 158, 82, 54, 158}});
  CHECK(gr::bits<std::uint16_t>(jax_test_key("bits"), 5) ==
        gr::Vector<std::uint16_t>{{6738, 38161, 50695, 57337, 61600}});
  CHECK(
      gr::bits(jax_test_key("bits"), 5) ==
      gr::Vector<std::uint32_t>{{1978747883u, 4134381225u, 3628107870u, 689687174u, 2788938207u}});
  CHECK(
      gr::bits<std::uint64_t>(jax_test_key("bits"), 5) ==
      gr::Vector<std::uint64_t>{{17649965731882839947u, 1415307058040849897u, 8282622628079774249u,
                                 14024425113645909402u, 2012979996110532418u}});
  CHECK(gr::bernoulli(jax_test_key("bernoulli"), 0.5f, 5) ==
        gr::Vector<bool>{{false, true, true, true, false}});
  CHECK(gr::randint(jax_test_key("randint"), 5, 0, 10) ==
        gr::Vector<std::int32_t>{{0, 5, 7, 7, 5}});

  // Float cases, published with 6 decimals.
  struct float_case {
    const char* name;
    gr::Vector<float> actual;
    std::array<double, 5> expected;
  };
  const float_case cases[] = {
      {"uniform",
       gr::uniform(jax_test_key("uniform"), 5),
       {0.298671, 0.073213, 0.873356, 0.260549, 0.412797}},
      {"normal",
       gr::normal(jax_test_key("normal"), 5),
       {-1.173234, -1.511662, 0.070593, -0.099764, 1.052845}},
      {"truncated_normal",
       gr::truncated_normal(jax_test_key("truncated_normal"), 0.0f, 2.0f, 5),
       {0.582807, 1.709771, 0.159513, 0.861376, 0.36148}},
      {"gumbel",
       gr::gumbel(jax_test_key("gumbel"), 5),
       {2.06701, 0.911726, 0.145736, 0.185427, -0.00711}},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    for (int i = 0; i < 5; ++i) CHECK(prints_as(c.actual[i], c.expected[i], 6));
  }
}

TEST_CASE("jax: seeds become keys as in test_prng_seeds_and_keys (64-bit mode)", "[random][jax]") {
  CHECK(words(gr::key(0)) == std::array<std::uint32_t, 2>{0, 0});
  CHECK(words(gr::key(3)) == std::array<std::uint32_t, 2>{0, 3});
  CHECK(words(gr::key(2147483747u)) == std::array<std::uint32_t, 2>{0, 2147483747u});
  CHECK(words(gr::key(static_cast<std::uint64_t>(std::int64_t{-1}))) ==
        std::array<std::uint32_t, 2>{4294967295u, 4294967295u});
  CHECK(words(gr::key(static_cast<std::uint64_t>(std::int64_t{-2147483648LL - 100}))) ==
        std::array<std::uint32_t, 2>{4294967295u, 2147483548u});
}

// --- values printed by JAX >= 0.5 in public notebooks and tests (current layout)
// ------------------

TEST_CASE("jax: values printed by recent JAX (current layout)", "[random][jax]") {
  // jax.random.normal(jax.random.key(0), (4, 4)), as printed (numpy's 8 decimals).
  const double normal16[] = {1.6226422,  2.0252647,   -0.43359444, -0.07861735,
                             0.1760909,  -0.97208923, -0.49529874, 0.4943786,
                             0.6643493,  -0.9501635,  2.1795304,   -1.9551506,
                             0.35857072, 0.15779513,  1.2770847,   1.5104648};
  const gr::Matrix<float> n = gr::normal(gr::key(0), 4, 4);
  for (int i = 0; i < 16; ++i) CHECK(prints_as(n(i / 4, i % 4), normal16[i], 8));

  // jax.random.uniform(jax.random.key(0), (30,)).
  const double uniform30[] = {
      0.947667,   0.9785799,  0.33229148, 0.46866846, 0.5698887,  0.16550303, 0.3101946, 0.68948054,
      0.74676657, 0.17101455, 0.9853538,  0.02528262, 0.6400418,  0.56269085, 0.8992138, 0.93453753,
      0.8341402,  0.7256162,  0.5098531,  0.02765214, 0.03148878, 0.9580188,  0.5188192, 0.79221416,
      0.5522419,  0.6113529,  0.8931755,  0.75499094, 0.21164179, 0.22934973};
  const auto u = gr::uniform(gr::key(0), 30);
  for (int i = 0; i < 30; ++i) CHECK(prints_as(u[i], uniform30[i], 8));

  // rng_a, rng_b = jax.random.split(jax.random.key(0)); jax.random.uniform(rng_a, (2, 3)).
  const gr::Matrix<float> a = gr::uniform(gr::split(gr::key(0))[0], 2, 3);
  const double a_expected[2][3] = {{0.8423141, 0.18237865, 0.2271781},
                                   {0.12072563, 0.19181347, 0.722015}};
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) CHECK(prints_as(a(i, j), a_expected[i][j], 8));
  }

  // jax.random.randint(jax.random.key(1), (5,), 0, 10).
  CHECK(gr::randint(gr::key(1), 5, 0, 10) == gr::Vector<std::int32_t>{{6, 7, 0, 3, 8}});
}

// --- relations that hold in JAX
// -------------------------------------------------------------------

TEST_CASE("random: split(k, n)[i] == fold_in(k, i) in the current layout", "[random][keys]") {
  for (const auto& k : {gr::key(0), gr::key(42), gr::key(0xDEADBEEFCAFEull)}) {
    const auto keys = gr::split(k, 7);
    for (std::uint32_t i = 0; i < 7; ++i) CHECK(keys[i] == gr::fold_in(k, i));
    CHECK(gr::split(k)[0] == keys[0]);
    CHECK(gr::split(k)[1] == keys[1]);
  }
  // Not so in the legacy layout (fold_in is the same in both, split is not).
  const auto legacy = gr::legacy_key(0);
  CHECK(gr::split(legacy, 2)[1] != gr::fold_in(legacy, 1));
  CHECK(gr::key_data(gr::fold_in(legacy, 4)) == gr::key_data(gr::fold_in(gr::key(0), 4)));
}

TEST_CASE("random: keys are values that carry their layout", "[random][keys]") {
  const auto k = gr::key(42);
  const auto l = gr::legacy_key(42);
  CHECK(gr::key_data(k) == gr::key_data(l));
  CHECK(k != l);
  CHECK(k.layout == gr::key_layout::partitionable);
  CHECK(l.layout == gr::key_layout::legacy);
  CHECK(gr::wrap_key_data({0u, 42u}) == k);
  CHECK(gr::wrap_key_data({0u, 42u}, gr::key_layout::legacy) == l);
  for (const auto& child : gr::split(l, 3)) CHECK(child.layout == gr::key_layout::legacy);
  CHECK(gr::fold_in(l, 1).layout == gr::key_layout::legacy);
  CHECK(gr::split(k)[0].layout == gr::key_layout::partitionable);

  std::ostringstream os;
  os << k << ' ' << l;
  CHECK(os.str() == "Key([0, 42]) Key([0, 42], legacy)");

  const gr::Key copy = k;  // a plain value
  CHECK(copy == k);
  CHECK(gr::uniform(copy, 4) == gr::uniform(k, 4));
  CHECK(gr::uniform(k, 4) != gr::uniform(l, 4));
}

TEST_CASE("random: 2-D results hold JAX's row-major order", "[random][shape]") {
  for (const auto& k : {gr::key(3), gr::legacy_key(3)}) {
    for (const auto& [rows, cols] :
         {std::pair{3, 5}, std::pair{1, 4}, std::pair{4, 1}, std::pair{2, 7}}) {
      INFO(k << " shape (" << rows << ", " << cols << ")");
      const auto n = rows * cols;
      const gr::Matrix<float> u = gr::uniform(k, rows, cols, -2.0f, 3.0f);
      const gr::Vector<float> u1 = gr::uniform(k, n, -2.0f, 3.0f);
      const gr::Matrix<float> z = gr::normal(k, rows, cols);
      const gr::Vector<float> z1 = gr::normal(k, n);
      const gr::Matrix<double> d = gr::normal<double>(k, rows, cols);
      const gr::Vector<double> d1 = gr::normal<double>(k, n);
      const gr::Matrix<float> t = gr::truncated_normal(k, -1.0f, 2.0f, rows, cols);
      const gr::Vector<float> t1 = gr::truncated_normal(k, -1.0f, 2.0f, n);
      const gr::Matrix<std::uint32_t> b = gr::bits(k, rows, cols);
      const gr::Vector<std::uint32_t> b1 = gr::bits(k, n);
      const gr::Matrix<std::uint8_t> b8 = gr::bits<std::uint8_t>(k, rows, cols);
      const gr::Vector<std::uint8_t> b81 = gr::bits<std::uint8_t>(k, n);
      const gr::Matrix<std::int32_t> r = gr::randint(k, rows, cols, -5, 100);
      const gr::Vector<std::int32_t> r1 = gr::randint(k, n, -5, 100);
      const gr::Matrix<bool> q = gr::bernoulli(k, 0.3f, rows, cols);
      const gr::Vector<bool> q1 = gr::bernoulli(k, 0.3f, n);
      const gr::Matrix<float> g = gr::gumbel(k, rows, cols);
      const gr::Vector<float> g1 = gr::gumbel(k, n);
      for (int i = 0; i < rows; ++i) {
        for (int j = 0; j < cols; ++j) {
          const int linear = i * cols + j;
          REQUIRE(u(i, j) == u1[linear]);
          REQUIRE(z(i, j) == z1[linear]);
          REQUIRE(d(i, j) == d1[linear]);
          REQUIRE(t(i, j) == t1[linear]);
          REQUIRE(b(i, j) == b1[linear]);
          REQUIRE(b8(i, j) == b81[linear]);
          REQUIRE(r(i, j) == r1[linear]);
          REQUIRE(q(i, j) == q1[linear]);
          REQUIRE(g(i, j) == g1[linear]);
        }
      }
    }
  }
}

TEST_CASE("random: fill_* write what the allocating functions return", "[random][fill]") {
  for (const auto& k : {gr::key(11), gr::legacy_key(11)}) {
    std::vector<float> f(1001);
    gr::fill_normal(k, std::span(f));
    CHECK(std::equal(f.begin(), f.end(), gr::normal(k, 1001).data()));
    gr::fill_uniform(k, std::span(f), -1.0f, 4.0f);
    CHECK(std::equal(f.begin(), f.end(), gr::uniform(k, 1001, -1.0f, 4.0f).data()));
    gr::fill_uniform(k, std::span(f));
    CHECK(std::equal(f.begin(), f.end(), gr::uniform(k, 1001).data()));
    gr::fill_truncated_normal(k, -0.5f, 0.5f, std::span(f));
    CHECK(std::equal(f.begin(), f.end(), gr::truncated_normal(k, -0.5f, 0.5f, 1001).data()));
    // bernoulli as a mask of any arithmetic type: 1 where bernoulli is true, else 0.
    const auto drawn = gr::bernoulli(k, 0.3f, 1001);
    std::vector<std::uint8_t> bytes(1001);
    gr::fill_bernoulli(k, 0.3f, std::span(bytes));
    gr::fill_bernoulli(k, 0.3f, std::span(f));
    std::vector<double> wide(1001);
    gr::fill_bernoulli<double>(k, 0.3, std::span(wide));
    const auto drawn64 = gr::bernoulli<double>(k, 0.3, 1001);
    std::size_t ones = 0;
    for (std::size_t i = 0; i < 1001; ++i) {
      const auto at = static_cast<gr::Index>(i);
      REQUIRE(bytes[i] == (drawn[at] ? 1 : 0));
      REQUIRE(f[i] == (drawn[at] ? 1.0f : 0.0f));
      REQUIRE(wide[i] == (drawn64[at] ? 1.0 : 0.0));
      ones += bytes[i];
    }
    CHECK(ones > 200);  // p = 0.3 of 1001 draws
    CHECK(ones < 400);
    CHECK_THROWS_WITH(gr::fill_bernoulli(k, 1.5f, std::span(f)),
                      "grove::random::fill_bernoulli: p (1.5) is outside [0, 1]");
    std::vector<std::uint64_t> w(333);
    gr::fill_bits(k, std::span(w));
    CHECK(std::equal(w.begin(), w.end(), gr::bits<std::uint64_t>(k, 333).data()));

    // A row-major matrix's storage is JAX's order.
    Eigen::Matrix<double, 3, 4, Eigen::RowMajor> m;
    gr::fill_normal(k, std::span(m.data(), 12));
    CHECK(gr::Matrix<double>(m) == gr::normal<double>(k, 3, 4));
  }
}

TEST_CASE("random: how floats are made from JAX's random words", "[random][jax]") {
  for (const auto& k : {gr::key(5), gr::legacy_key(5)}) {
    // float32: top 23 bits of a 32-bit word as the mantissa of [1, 2), minus 1.
    const auto w32 = gr::bits(k, 64);
    const auto f = gr::uniform(k, 64);
    // float64 (JAX's x64 path): top 52 bits of a 64-bit word.
    const auto w64 = gr::bits<std::uint64_t>(k, 64);
    const auto d = gr::uniform<double>(k, 64);
    const auto q = gr::bernoulli(k, 0.25f, 64);
    for (int i = 0; i < 64; ++i) {
      CHECK(f[i] == std::bit_cast<float>((w32[i] >> 9) | 0x3F800000u) - 1.0f);
      CHECK(d[i] == std::bit_cast<double>((w64[i] >> 12) | 0x3FF0000000000000u) - 1.0);
      CHECK(q[i] == (f[i] < 0.25f));
    }
  }
}

TEST_CASE("random: empty requests", "[random][shape]") {
  const auto k = gr::key(1);
  CHECK(gr::uniform(k, 0).size() == 0);
  CHECK(gr::normal(k, 0, 5).size() == 0);
  CHECK(gr::normal(k, 5, 0).rows() == 5);
  CHECK(gr::bits(gr::legacy_key(1), 0).size() == 0);
  CHECK(gr::permutation(k, 0).size() == 0);
  CHECK(gr::split(k, 0).empty());
}

// --- errors --------------------------------------------------------------------------------------

TEST_CASE("random: bad arguments throw std::invalid_argument naming the function and value",
          "[random][errors]") {
  const auto k = gr::key(0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  using Catch::Matchers::Equals;
  CHECK_THROWS_AS(gr::uniform(k, -1), std::invalid_argument);
  CHECK_THROWS_WITH(gr::uniform(k, -1), Equals("grove::random::uniform: n (-1) is negative"));
  CHECK_THROWS_WITH(gr::uniform(k, 3, 2.0f, 1.0f),
                    Equals("grove::random::uniform: minval (2) > maxval (1)"));
  CHECK_THROWS_WITH(gr::uniform(k, 3, 0.25f, 0.125f),
                    Equals("grove::random::uniform: minval (0.25) > maxval (0.125)"));
  CHECK_THROWS_WITH(gr::uniform(k, 3, nan, 1.0f),
                    Equals("grove::random::uniform: minval (nan) is not finite"));
  CHECK_THROWS_WITH(gr::uniform(k, 2, 2, 1.0f, 0.0f),
                    Equals("grove::random::uniform: minval (1) > maxval (0)"));
  CHECK_THROWS_WITH(gr::normal(k, -2, 3), Equals("grove::random::normal: rows (-2) is negative"));
  CHECK_THROWS_WITH(gr::normal<double>(k, 2, -3),
                    Equals("grove::random::normal: cols (-3) is negative"));
  CHECK_THROWS_WITH(gr::truncated_normal(k, 1.0f, 1.0f, 3),
                    Equals("grove::random::truncated_normal: lower (1) >= upper (1)"));
  CHECK_THROWS_WITH(gr::truncated_normal(k, 2.5f, -1.0f, 3),
                    Equals("grove::random::truncated_normal: lower (2.5) >= upper (-1)"));
  CHECK_THROWS_WITH(gr::truncated_normal(k, nan, 1.0f, 3),
                    Equals("grove::random::truncated_normal: lower (nan) is NaN"));
  std::vector<float> buffer(3);
  CHECK_THROWS_WITH(gr::fill_truncated_normal(k, 1.0f, 0.0f, std::span(buffer)),
                    Equals("grove::random::fill_truncated_normal: lower (1) >= upper (0)"));
  CHECK_THROWS_WITH(gr::bernoulli(k, 1.5f, 3),
                    Equals("grove::random::bernoulli: p (1.5) is outside [0, 1]"));
  CHECK_THROWS_WITH(gr::bernoulli(k, -0.25f, 3),
                    Equals("grove::random::bernoulli: p (-0.25) is outside [0, 1]"));
  CHECK_THROWS_WITH(gr::bernoulli(k, nan, 3),
                    Equals("grove::random::bernoulli: p (nan) is outside [0, 1]"));
  CHECK_THROWS_WITH(gr::randint(k, 3, 5, 5), Equals("grove::random::randint: low (5) >= high (5)"));
  CHECK_THROWS_WITH(gr::randint(k, 2, 2, 7, -3),
                    Equals("grove::random::randint: low (7) >= high (-3)"));
  CHECK_THROWS_WITH(gr::split(k, -4), Equals("grove::random::split: n (-4) is negative"));
  CHECK_THROWS_WITH(gr::permutation(k, -1),
                    Equals("grove::random::permutation: n (-1) is negative"));
  CHECK_THROWS_WITH(gr::bits(k, 4, gr::thread_options{-1}),
                    Equals("grove::random::bits: thread_options.threads (-1) is negative"));
  CHECK_THROWS_WITH(gr::normal(k, 4, gr::thread_options{1, -8}),
                    Equals("grove::random::normal: thread_options.chunk (-8) is negative"));
  CHECK_THROWS_WITH(gr::categorical(k, gr::Vector<float>()),
                    Equals("grove::random::categorical: logits is empty"));
  CHECK_THROWS_WITH(gr::categorical(k, gr::Matrix<float>(2, 3), 2),
                    Equals("grove::random::categorical: axis (2) is not 0, 1, -1 or -2"));
}
