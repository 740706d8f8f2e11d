// The same key gives the same numbers whatever the thread count, the chunking, the build (checked
// against digests recorded from a -O3 -march=native build) and the instruction set; and the legacy
// layout's bookkeeping (odd sizes, multi-block requests) matches its definition.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "grove/random.hpp"
#include "thread_probe.hpp"

namespace gr = grove::random;
namespace detail = grove::random::detail;

namespace {

// FNV-1a over the bytes of a vector's values.
template <class V>
std::uint64_t digest(const V& v) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(v.data());
  for (std::size_t i = 0; i < sizeof(typename V::Scalar) * static_cast<std::size_t>(v.size());
       ++i) {
    h ^= bytes[i];
    h *= 1099511628211ull;
  }
  return h;
}

// Every function of the API, at one size, with the given scheduling options.
struct everything {
  gr::Vector<std::uint32_t> bits32;
  gr::Vector<std::uint64_t> bits64;
  gr::Vector<std::uint16_t> bits16;
  gr::Vector<float> uniform;
  gr::Vector<float> normal;
  gr::Vector<double> normal64;
  gr::Vector<float> truncated;
  gr::Vector<float> gumbel;
  gr::Vector<bool> bernoulli;
  gr::Vector<std::int32_t> randint;
  gr::Vector<std::int32_t> permutation;
  gr::Matrix<float> matrix;

  everything(const gr::Key& k, gr::Index n, const gr::thread_options& opt)
      : bits32(gr::bits(k, n, opt)),
        bits64(gr::bits<std::uint64_t>(k, n, opt)),
        bits16(gr::bits<std::uint16_t>(k, n, opt)),
        uniform(gr::uniform(k, n, -2.0f, 2.0f, opt)),
        normal(gr::normal(k, n, opt)),
        normal64(gr::normal<double>(k, n, opt)),
        truncated(gr::truncated_normal(k, -1.0f, 1.5f, n, opt)),
        gumbel(gr::gumbel(k, n, opt)),
        bernoulli(gr::bernoulli(k, 0.4f, n, opt)),
        randint(gr::randint(k, n, -100, 1000, opt)),
        permutation(gr::permutation(k, n, opt)),
        matrix(gr::normal(k, 97, n / 97, opt)) {}

  bool operator==(const everything&) const = default;
};

}  // namespace

TEST_CASE("determinism: thread counts and chunk sizes do not change a bit",
          "[random][determinism]") {
  const gr::Index n = 100'003;  // odd, not a multiple of any block or chunk size
  for (const auto& k : {gr::key(77), gr::legacy_key(77)}) {
    INFO(k);
    const everything reference(k, n, gr::thread_options{1});
    for (const gr::thread_options opt :
         {gr::thread_options{0}, gr::thread_options{2}, gr::thread_options{3, 1000},
          gr::thread_options{4, 1}, gr::thread_options{8, 129}, gr::thread_options{1, 7},
          gr::thread_options{16, 65536}}) {
      INFO("threads " << opt.threads << ", chunk " << opt.chunk);
      CHECK(everything(k, n, opt) == reference);
    }
  }
}

namespace {

std::size_t threads_used(std::uint64_t units, const gr::thread_options& opt) {
  return thread_probe::threads_used(units, opt.threads);
}

// Sets an environment variable for a scope, and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("threads: an automatic thread count follows the program's setting", "[random][threads]") {
  // This suite is built without OpenMP: OMP_NUM_THREADS is then the program's setting (with
  // OpenMP, omp_set_num_threads and Eigen::setNbThreads are; test_nn_model checks those).
  const std::uint64_t large = detail::automatic_threading_threshold;
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  {
    const ScopedEnv env("OMP_NUM_THREADS", "1");
    CHECK(grove::detail::requested_threads() == 1);
    CHECK(threads_used(large, gr::thread_options{0}) == 1);
    // An explicit count is the caller's own.
    CHECK(threads_used(large, gr::thread_options{2}) <= 2);
  }
  {
    const ScopedEnv env("OMP_NUM_THREADS", "3");
    CHECK(grove::detail::requested_threads() == 3);
    CHECK(threads_used(large, gr::thread_options{0}) <= 3);
  }
  {
    const ScopedEnv env("OMP_NUM_THREADS", " 4,2");
    CHECK(grove::detail::requested_threads() == 4);
  }
  for (const char* unreadable : {"", "0", "-2", "two", "3x"}) {
    INFO("OMP_NUM_THREADS='" << unreadable << "'");
    const ScopedEnv env("OMP_NUM_THREADS", unreadable);
    CHECK(grove::detail::requested_threads() == static_cast<int>(hardware));
  }
  {
    const ScopedEnv env("OMP_NUM_THREADS", nullptr);
    CHECK(grove::detail::requested_threads() == static_cast<int>(hardware));
    // Small requests stay on the calling thread whatever the setting.
    CHECK(threads_used(large - 1, gr::thread_options{0}) == 1);
  }
  // The numbers never depend on it.
  const gr::Key k = gr::key(5);
  const gr::Index n = static_cast<gr::Index>(large) + 3;
  const ScopedEnv one("OMP_NUM_THREADS", "1");
  const auto single = gr::normal(k, n);
  const ScopedEnv two("OMP_NUM_THREADS", "2");
  CHECK(digest(gr::normal(k, n)) == digest(single));
}

TEST_CASE("determinism: digests recorded from a -O3 -march=native build", "[random][determinism]") {
  // Recorded with GCC 12, -O3 -march=native on an AVX-512 machine; the same in every build of this
  // test (Debug, ASan+UBSan -O1, without -march, with GROVE_NO_DISPATCH, Clang). Results are
  // independent of the platform's libm but for double truncated normals, which use std::erf (the
  // double normals' digests changed once, when grove's own log1p replaced std::log1p; the float
  // gumbel and truncated-normal ones once, when grove matched XLA:CPU's float log and erf, checked
  // bit for bit against jax.random by oracle_random_gumbel and oracle_random_truncated_normal;
  // those four were recorded on an AVX2 machine, and gumbel and the bounds of truncated_normal
  // have no SIMD kernel).
  const gr::Index n = 100'000;
  const auto k = gr::key(7);
  const auto l = gr::legacy_key(7);
  CHECK(digest(gr::normal(k, n)) == 0x5332fb2fc99912c0ull);
  CHECK(digest(gr::uniform(k, n, -3.0f, 5.0f)) == 0x098e802ffed1e835ull);
  CHECK(digest(gr::truncated_normal(k, -1.5f, 0.5f, n)) == 0xf9d0ac3d67f3bf3eull);
  CHECK(digest(gr::gumbel(k, n)) == 0x84de09696a0f6316ull);
  CHECK(digest(gr::uniform<double>(k, n, -3.0, 5.0)) == 0x8b4b6b48027155aeull);
  CHECK(digest(gr::normal(l, n)) == 0xbcfac1cf1fb6fbe1ull);
  CHECK(digest(gr::uniform(l, n, -3.0f, 5.0f)) == 0x13fdc91c18b203f2ull);
  CHECK(digest(gr::truncated_normal(l, -1.5f, 0.5f, n)) == 0x604eed00de868468ull);
  CHECK(digest(gr::gumbel(l, n)) == 0x769fce84cf98c424ull);
  CHECK(digest(gr::uniform<double>(l, n, -3.0, 5.0)) == 0xba82ca7ffedeb404ull);
  CHECK(digest(gr::normal<double>(k, n)) == 0x8221bb420b90e1b3ull);
  CHECK(digest(gr::normal<double>(l, n)) == 0x7c4070ece90ff96bull);
#if defined(__GLIBC__)
  CHECK(digest(gr::truncated_normal<double>(k, -1.5, 0.5, n)) == 0xec4832805813a19bull);
  CHECK(digest(gr::truncated_normal<double>(l, -1.5, 0.5, n)) == 0xa3525fbccc39118full);
#endif
}

// Whether inverse_erf_values<T> gives the same values through generate_words (which dispatches to
// the best kernel variant) as when called directly from this translation unit (compiled for the
// build's baseline) on the same words.
template <class T>
bool normals_dispatched_and_direct(const gr::Key& k, std::uint64_t n, T minval, T span) {
  using Bits = detail::bits_of<T>;
  std::vector<Bits> words(n);
  detail::copy_words<Bits> copy{words.data()};
  detail::generate_words<Bits>(k.words, false, n, detail::schedule{1}, copy);
  std::vector<T> dispatched(n), direct(n);
  detail::inverse_erf_values<T> to_dispatched{dispatched.data(), minval, span};
  detail::generate_words<Bits>(k.words, false, n, detail::schedule{1}, to_dispatched);
  detail::inverse_erf_values<T> to_direct{direct.data(), minval, span};
  for (std::uint64_t first = 0; first < n; first += detail::block_size) {
    // Sinks take runs of at most block_size words.
    to_direct(first, words.data() + first, std::min<std::uint64_t>(detail::block_size, n - first));
  }
  return dispatched == direct;
}

TEST_CASE("determinism: every instruction set computes the same bits", "[random][determinism]") {
  // generate_words runs its kernels through run_best, which picks AVX-512 or AVX2+FMA code when
  // this CPU has them (on x86 with GCC or Clang). Compare with code compiled for this build's
  // baseline: the scalar block function, and a sink called directly from this translation unit.
  INFO("best instruction set: " << static_cast<int>(detail::best_instruction_set()));
  const auto k = gr::key(9);
  const std::uint64_t n = 10'000;
  std::vector<std::uint32_t> words(n);
  detail::copy_words<std::uint32_t> copy{words.data()};
  detail::generate_words<std::uint32_t>(k.words, false, n, detail::schedule{1}, copy);
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto y = detail::threefry_2x32(k.words, {0u, static_cast<std::uint32_t>(i)});
    REQUIRE(words[i] == (y[0] ^ y[1]));
  }

  // Normals from the dispatched kernels against the sink called directly, for floats (whose
  // AVX2 and AVX-512 variants have kernels of their own) and for doubles (whose log1p and erf_inv
  // are grove's portable code in every variant, so no compiler may contract their products
  // differently in one of them).
  CHECK(normals_dispatched_and_direct<float>(k, n, -0.5f, 1.5f));
  CHECK(normals_dispatched_and_direct<double>(k, n, -1.0, 2.0));
}

#if GROVE_DETAIL_DISPATCH
// The hand-written threefry kernels (random/detail/threefry_avx2.hpp, threefry_avx512.hpp) are
// also checked directly, each on every CPU that has its instruction set: on an AVX-512 machine
// the dispatched calls above take only the AVX-512 one.
namespace {
template <class Lanes>
void check_threefry_kernel(Lanes lanes) {
  std::uint32_t state = 12345;
  auto next = [&state] { return state = state * 1664525u + 1013904223u; };
  // Every length around the kernels' vectors (8 or 16 counters) and their groups (24 or 64), and
  // longer runs; out of place and in place. Words past n must be left as they are: the AVX-512
  // kernel masks its last vector.
  constexpr std::uint32_t untouched = 0xDEADBEEFu;
  constexpr std::size_t past = 16;
  for (std::size_t n = 0; n <= 200; n += n < 140 ? 1 : 20) {
    const detail::key_words key{next(), next()};
    std::vector<std::uint32_t> x0(n + past), x1(n + past), y0(n + past, untouched),
        y1(n + past, untouched);
    for (std::size_t i = 0; i < n + past; ++i) {
      x0[i] = i < n ? next() : untouched;
      x1[i] = i < n ? next() : untouched;
    }
    lanes(key, x0.data(), x1.data(), y0.data(), y1.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto expected = detail::threefry_2x32(key, {x0[i], x1[i]});
      INFO("n = " << n << ", counter " << i);
      REQUIRE(y0[i] == expected[0]);
      REQUIRE(y1[i] == expected[1]);
    }
    for (std::size_t i = n; i < n + past; ++i) {
      INFO("n = " << n << ", word " << i << " past the end");
      REQUIRE(y0[i] == untouched);
      REQUIRE(y1[i] == untouched);
    }
    lanes(key, x0.data(), x1.data(), x0.data(), x1.data(), n);
    CHECK(x0 == y0);
    CHECK(x1 == y1);
  }
}
}  // namespace

TEST_CASE("determinism: the AVX2 threefry kernel computes threefry2x32", "[random][determinism]") {
  if (!grove::detail::this_cpu().avx2_fma) {
    WARN("this CPU has no AVX2 and FMA: the AVX2 kernel is not checked");
    return;
  }
  check_threefry_kernel(detail::avx2::threefry_2x32_lanes);
}

TEST_CASE("determinism: the AVX-512 threefry kernel computes threefry2x32",
          "[random][determinism]") {
  if (detail::best_instruction_set() != detail::instruction_set::avx512) {
    WARN("this CPU has no AVX-512: the AVX-512 kernel is not checked");
    return;
  }
  check_threefry_kernel(detail::avx512::threefry_2x32_lanes);
}

namespace {
template <class ErfInv>
void check_erf_inv_kernel(ErfInv erf_inv, const char* kernel) {
  // The normal's inputs lie in [nextafter(-1, 0), 1); truncated_normal's in [-1, 1]. Every 257th
  // float of [0, 1] with both signs, the ends, the zeros, and the tail polynomial's threshold
  // (w = 5 near |x| = 0.99663), in an order that mixes tail and non-tail lanes in one vector.
  std::vector<float> x;
  for (std::uint32_t b = 0; b <= 0x3f800000u; b += 257) {
    float v;
    std::memcpy(&v, &b, sizeof v);
    x.push_back(v);
    x.push_back(-v);
  }
  const std::size_t edges = x.size();
  for (float edge : {1.0f, 0.0f, 0.99663f, 0.9966f, 0.9967f}) {
    float v = edge;
    for (int step = 0; step < 40; ++step) {
      x.push_back(v);
      x.push_back(-v);
      v = std::nextafter(v, 0.0f);
    }
  }
  const float scale = 1.4142135f;
  std::vector<float> portable(x.size()), kernel_values(x.size());
  detail::erf_inv_scaled(x.data(), portable.data(), x.size(), scale);
  erf_inv(x.data(), kernel_values.data(), x.size(), scale);
  std::size_t differing = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::memcmp(&portable[i], &kernel_values[i], sizeof(float)) != 0 && ++differing <= 5) {
      UNSCOPED_INFO("x = " << x[i] << ": portable " << portable[i] << ", " << kernel << " "
                           << kernel_values[i]);
    }
  }
  CHECK(differing == 0);
  // erf_inv(+-1) = +-inf, which the select gives, not the polynomial.
  CHECK(kernel_values[edges] == std::numeric_limits<float>::infinity());
  CHECK(kernel_values[edges + 1] == -std::numeric_limits<float>::infinity());

  // Every length up to three steps of either kernel (its 4-vector and 1-vector loops and the
  // remainder).
  for (std::size_t n = 0; n <= 200; ++n) {
    std::vector<float> a(n), b(n);
    const float* in = x.data() + edges;  // +-1 and values near it, with tail lanes among them
    detail::erf_inv_scaled(in, a.data(), n, scale);
    erf_inv(in, b.data(), n, scale);
    INFO(kernel << ", n = " << n);
    REQUIRE((n == 0 || std::memcmp(a.data(), b.data(), n * sizeof(float)) == 0));
  }
}
}  // namespace

TEST_CASE("determinism: the AVX2 erf_inv computes the portable bits", "[random][determinism]") {
  if (!grove::detail::this_cpu().avx2_fma) {
    WARN("this CPU has no AVX2 and FMA: the AVX2 kernel is not checked");
    return;
  }
  check_erf_inv_kernel(detail::avx2::erf_inv_scaled, "AVX2");
}

TEST_CASE("determinism: the AVX-512 erf_inv computes the portable bits", "[random][determinism]") {
  if (detail::best_instruction_set() != detail::instruction_set::avx512) {
    WARN("this CPU has no AVX-512: the AVX-512 kernel is not checked");
    return;
  }
  check_erf_inv_kernel(detail::avx512::erf_inv_scaled, "AVX-512");
}
#endif

TEST_CASE("legacy layout: odd sizes and block edges match the definition", "[random][legacy]") {
  // Word i of a legacy request of n words: the hash of the counts 0 .. n-1, padded to even length,
  // first half paired with second half; all y0 then all y1.
  const auto k = gr::legacy_key(1234);
  for (std::uint64_t n : {1u, 2u, 3u, 4u, 5u, 127u, 128u, 129u, 255u, 256u, 257u, 1001u}) {
    INFO("n = " << n);
    const auto words = gr::bits(k, static_cast<gr::Index>(n), gr::thread_options{3, 5});
    const std::uint64_t half = (n + 1) / 2;
    for (std::uint64_t i = 0; i < n; ++i) {
      std::uint32_t expected;
      if (i < half) {
        const std::uint32_t partner = half + i < n ? static_cast<std::uint32_t>(half + i) : 0u;
        expected = detail::threefry_2x32(k.words, {static_cast<std::uint32_t>(i), partner})[0];
      } else {
        expected = detail::threefry_2x32(
            k.words, {static_cast<std::uint32_t>(i - half), static_cast<std::uint32_t>(i)})[1];
      }
      REQUIRE(words[static_cast<gr::Index>(i)] == expected);
    }
    // 64-bit words: the first n and the last n of 2n 32-bit words, as high and low halves.
    const auto wide = gr::bits<std::uint64_t>(k, static_cast<gr::Index>(n));
    const auto halves = gr::bits(k, static_cast<gr::Index>(2 * n));
    for (std::uint64_t i = 0; i < n; ++i) {
      const auto index = static_cast<gr::Index>(i);
      REQUIRE(wide[index] ==
              ((std::uint64_t{halves[index]} << 32) | halves[index + static_cast<gr::Index>(n)]));
    }
  }
}

TEST_CASE("legacy layout: requests beyond one hash are cut into blocks with split keys",
          "[random][legacy]") {
  // JAX cuts a legacy request of at least 2^32 - 1 words into blocks of 2^32 - 1 words, hashing
  // block b with key b of split(key, blocks + 1) and the rest with the last key. The same code runs
  // here with small blocks, against that definition built from split and bits.
  const auto k = gr::legacy_key(4321);
  for (const std::uint64_t block_words : {3u, 7u, 10u}) {
    for (const std::uint64_t n : {10u, 21u, 30u, 31u}) {
      INFO("block " << block_words << ", n " << n);
      auto expected_words = [&](std::uint64_t count) {
        const std::uint64_t blocks = count / block_words;
        const auto keys = gr::split(k, static_cast<gr::Index>(blocks + 1));
        std::vector<std::uint32_t> all;
        for (std::uint64_t b = 0; b <= blocks; ++b) {
          const std::uint64_t size = b < blocks ? block_words : count % block_words;
          const auto part = gr::bits(keys[b], static_cast<gr::Index>(size));
          all.insert(all.end(), part.data(), part.data() + part.size());
        }
        return all;
      };
      std::vector<std::uint32_t> narrow(n);
      detail::copy_words<std::uint32_t> narrow_sink{narrow.data()};
      detail::generate_words<std::uint32_t>(k.words, true, n, detail::schedule{2, 4}, narrow_sink,
                                            block_words);
      CHECK(narrow == expected_words(n));

      std::vector<std::uint64_t> wide(n);
      detail::copy_words<std::uint64_t> wide_sink{wide.data()};
      detail::generate_words<std::uint64_t>(k.words, true, n, detail::schedule{2, 4}, wide_sink,
                                            block_words);
      const auto halves = expected_words(2 * n);
      for (std::uint64_t i = 0; i < n; ++i) {
        REQUIRE(wide[i] == ((std::uint64_t{halves[i]} << 32) | halves[n + i]));
      }
    }
  }
}
