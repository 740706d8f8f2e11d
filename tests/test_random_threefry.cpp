// The threefry2x32-20 block function: known answers, and agreement with Random123's independent
// implementation (Debian's librandom123-dev) on many random keys and counters.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "grove/random/detail/layouts.hpp"
#include "grove/random/detail/threefry.hpp"

#if GROVE_HAVE_RANDOM123
#include <Random123/threefry.h>
#endif

namespace detail = grove::random::detail;
using detail::key_words;

// The known-answer vectors of the Threefry reference (and of JAX's testThreefry2x32).
static_assert(detail::threefry_2x32({0, 0}, {0, 0}) == key_words{0x6b200159u, 0x99ba4efeu},
              "threefry2x32 is usable in constant expressions");

TEST_CASE("threefry2x32: known answers", "[random][threefry]") {
  struct known {
    key_words key, counter, output;
  };
  const known answers[] = {
      {{0x00000000u, 0x00000000u}, {0x00000000u, 0x00000000u}, {0x6b200159u, 0x99ba4efeu}},
      {{0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}, {0x1cb996fcu, 0xbb002be7u}},
      {{0x13198a2eu, 0x03707344u}, {0x243f6a88u, 0x85a308d3u}, {0xc4923a9cu, 0x483df7a0u}},
  };
  for (const auto& a : answers) {
    CHECK(detail::threefry_2x32(a.key, a.counter) == a.output);
  }
}

TEST_CASE("threefry2x32: the SIMD lanes agree with the scalar function", "[random][threefry]") {
  std::mt19937_64 engine(12345);
  // Lengths around the SIMD widths, including empty and odd tails.
  for (std::size_t n : {0u, 1u, 3u, 4u, 7u, 8u, 15u, 16u, 17u, 31u, 33u, 127u, 128u, 300u}) {
    const key_words key{static_cast<std::uint32_t>(engine()), static_cast<std::uint32_t>(engine())};
    std::vector<std::uint32_t> x0(n), x1(n), y0(n), y1(n);
    for (std::size_t i = 0; i < n; ++i) {
      x0[i] = static_cast<std::uint32_t>(engine());
      x1[i] = static_cast<std::uint32_t>(engine());
    }
    detail::threefry_2x32_lanes(key, x0.data(), x1.data(), y0.data(), y1.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto expected = detail::threefry_2x32(key, {x0[i], x1[i]});
      REQUIRE(y0[i] == expected[0]);
      REQUIRE(y1[i] == expected[1]);
    }
  }
}

TEST_CASE("threefry2x32: partitionable counters carry into the high word", "[random][threefry]") {
  // Element indices across the 2^32 boundary, where the 32-bit lanes must carry.
  const std::uint64_t first = (std::uint64_t{1} << 32) - 5;
  std::uint32_t hi[10], lo[10];
  detail::fill_partitionable_counters(first, 10, hi, lo);
  for (std::uint32_t l = 0; l < 10; ++l) {
    const std::uint64_t index = first + l;
    CHECK(hi[l] == static_cast<std::uint32_t>(index >> 32));
    CHECK(lo[l] == static_cast<std::uint32_t>(index));
  }
}

#if GROVE_HAVE_RANDOM123
TEST_CASE("threefry2x32: agrees with Random123's threefry2x32 with 20 rounds",
          "[random][threefry]") {
  using reference = r123::Threefry2x32_R<20>;
  reference hash;
  std::mt19937_64 engine(20240601);
  constexpr int cases = 200000;
  int mismatches = 0;
  std::vector<std::uint32_t> x0(cases), x1(cases), y0(cases), y1(cases);
  const key_words shared_key{0x9e3779b9u, 0x7f4a7c15u};
  for (int i = 0; i < cases; ++i) {
    const key_words key{static_cast<std::uint32_t>(engine()), static_cast<std::uint32_t>(engine())};
    const key_words counter{static_cast<std::uint32_t>(engine()),
                            static_cast<std::uint32_t>(engine())};
    const reference::ctr_type c = {{counter[0], counter[1]}};
    const reference::key_type k = {{key[0], key[1]}};
    const reference::ctr_type r = hash(c, k);
    mismatches += detail::threefry_2x32(key, counter) != key_words{r[0], r[1]};
    x0[i] = counter[0];
    x1[i] = counter[1];
  }
  CHECK(mismatches == 0);

  // The vectorised lanes too, for one key and many counters.
  detail::threefry_2x32_lanes(shared_key, x0.data(), x1.data(), y0.data(), y1.data(), cases);
  const reference::key_type k = {{shared_key[0], shared_key[1]}};
  mismatches = 0;
  for (int i = 0; i < cases; ++i) {
    const reference::ctr_type r = hash(reference::ctr_type{{x0[i], x1[i]}}, k);
    mismatches += (r[0] != y0[i]) || (r[1] != y1[i]);
  }
  CHECK(mismatches == 0);
}
#endif
