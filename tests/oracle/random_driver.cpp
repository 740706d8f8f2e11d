// grove::random's side of the jax.random oracle (tests/oracle/random_oracle.py): for one function
// family (`random_driver FAMILY`) it prints, for both counter layouts and both float widths,
// grove's values of every case as a record CASE, and the case's parameters as a text record
// CASE.params
// ("fn=uniform layout=legacy x64=1 seed=7 shape=1000,1000 minval=0x1.4p+1 ..."; the seed as JAX
// takes it, a signed 64-bit integer), so that the
// script calls jax.random with exactly these parameters: the cases are defined here only.
// Floating-point parameters are printed as hexadecimal floats, which Python reads back exactly.
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <Eigen/Core>
#include <grove/random.hpp>

#include "oracle_io.hpp"

namespace {

namespace gr = grove::random;
using gr::Index;

// One of the four configurations: jax_threefry_partitionable on or off, jax_enable_x64 on or off.
struct Config {
  bool legacy;
  bool x64;
  std::string name() const {
    return std::string(legacy ? "legacy" : "partitionable") + (x64 ? ".x64" : ".x32");
  }
};

gr::Key key_of(const Config& c, std::uint64_t seed) {
  return c.legacy ? gr::legacy_key(seed) : gr::key(seed);
}

std::string hex(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%a", v);
  return buffer;
}

std::string shape_text(Index rows, Index cols) {
  return cols < 0 ? std::to_string(rows) : std::to_string(rows) + "," + std::to_string(cols);
}

// A case's parameters, beginning with the function, configuration, seed and shape.
std::string params(std::string_view fn, const Config& c, std::uint64_t seed, Index rows,
                   Index cols = -1) {
  return "fn=" + std::string(fn) + " layout=" + (c.legacy ? "legacy" : "partitionable") +
         " x64=" + (c.x64 ? "1" : "0") +
         " seed=" + std::to_string(static_cast<std::int64_t>(seed)) +
         " shape=" + shape_text(rows, cols);
}

void emit_case(const std::string& name, const std::string& text) {
  oracle::emit_text(name + ".params", text);
}

// Seeds: small ones, and in 64-bit mode (where JAX takes a 64-bit seed) ones with a high word.
std::uint64_t seed_for(const Config& c, std::uint64_t small, std::uint64_t wide) {
  return c.x64 ? wide : small;
}

constexpr Index kRows = 1000, kCols = 1000;  // 10^6 values, the main case of each function
constexpr Index kOdd = 250'001;              // odd: the legacy layout's padding word

void bits_cases(const Config& c) {
  const std::string base = "bits." + c.name();
  {
    const std::uint64_t seed = seed_for(c, 1701, 0x0000'1234'0000'0042u);
    emit_case(base + ".u32", params("bits", c, seed, kRows, kCols) + " dtype=uint32");
    oracle::emit(base + ".u32", gr::bits<std::uint32_t>(key_of(c, seed), kRows, kCols));
  }
  {
    const std::uint64_t seed = seed_for(c, 3, 0xFFFF'FFFF'FFFF'FFFFu);
    emit_case(base + ".u8", params("bits", c, seed, 1'000'003) + " dtype=uint8");
    oracle::emit(base + ".u8", gr::bits<std::uint8_t>(key_of(c, seed), 1'000'003));
  }
  {
    const std::uint64_t seed = seed_for(c, 4, 0x8000'0000'0000'0001u);
    emit_case(base + ".u16", params("bits", c, seed, 1'000'001) + " dtype=uint16");
    // oracle_io has no uint16 element type; numpy reads the record as "u2".
    const auto values = gr::bits<std::uint16_t>(key_of(c, seed), 1'000'001);
    oracle::emit_raw(base + ".u16", "u2", {static_cast<std::size_t>(values.size())}, values.data(),
                     static_cast<std::size_t>(values.size()) * sizeof(std::uint16_t));
  }
  if (c.x64) {
    emit_case(base + ".u64", params("bits", c, 99, 1'000'001) + " dtype=uint64");
    oracle::emit(base + ".u64", gr::bits<std::uint64_t>(key_of(c, 99), 1'000'001));
    emit_case(base + ".u64m", params("bits", c, 100, 500, 999) + " dtype=uint64");
    oracle::emit(base + ".u64m", gr::bits<std::uint64_t>(key_of(c, 100), 500, 999));
  }
}

template <class T>
void uniform_cases(const Config& c) {
  const std::string base = "uniform." + c.name();
  const std::uint64_t seed = seed_for(c, 0, 0x0000'0007'0000'0000u);
  emit_case(base + ".unit", params("uniform", c, seed, kRows, kCols));
  oracle::emit(base + ".unit", gr::uniform<T>(key_of(c, seed), kRows, kCols));
  // Widths that are not powers of two: the multiply-add's rounding (fused or not) shows.
  const T ranges[][2] = {{T(-2.5), T(7.25)},         {T(1e-3), T(0.1003)}, {T(-1e4), T(3.3)},
                         {T(-3.0), T(-2.9)},         {T(0.5), T(0.5)},     {T(-1e-30), T(1e-30)},
                         {T(123456.7), T(123457.9)}, {T(0), T(1e6)}};
  int variant = 0;
  for (const auto& r : ranges) {
    const std::string name = base + ".range" + std::to_string(variant);
    const std::uint64_t s = seed_for(c, 10, 0x0000'0010'0000'0010u);  // one seed for the ranges
    ++variant;
    emit_case(name,
              params("uniform", c, s, kOdd) + " minval=" + hex(r[0]) + " maxval=" + hex(r[1]));
    oracle::emit(name, gr::uniform<T>(key_of(c, s), kOdd, r[0], r[1]));
  }
}

template <class T>
void normal_cases(const Config& c) {
  const std::string base = "normal." + c.name();
  const std::uint64_t seed = seed_for(c, 0, 0x0000'0001'0000'0002u);
  emit_case(base + ".matrix", params("normal", c, seed, kRows, kCols));
  oracle::emit(base + ".matrix", gr::normal<T>(key_of(c, seed), kRows, kCols));
  emit_case(base + ".vector", params("normal", c, 77, kOdd));
  oracle::emit(base + ".vector", gr::normal<T>(key_of(c, 77), kOdd));
}

template <class T>
void truncated_normal_cases(const Config& c) {
  const std::string base = "truncated_normal." + c.name();
  constexpr T inf = std::numeric_limits<T>::infinity();
  // The first is the main 10^6-value case; the others: one-sided, far tails, a narrow interval,
  // and 5.35 (between the two erf clamps that XLA versions used, 3.7439 and 3.8325 times sqrt 2).
  const T bounds[][2] = {{T(-2), T(2)},       {-inf, T(0.5)},   {T(1.5), inf},
                         {T(0.3), T(4.5)},    {T(-6), T(-2.7)}, {T(-0.01), T(0.02)},
                         {T(-5.35), T(5.35)}, {T(3), T(5)}};
  int variant = 0;
  for (const auto& b : bounds) {
    const std::string name = base + ".bounds" + std::to_string(variant);
    const std::uint64_t s = seed_for(c, 20, 0x0000'0020'0000'0000u) + (variant == 0 ? 0 : 1);
    const std::string bounds_text = " lower=" + hex(b[0]) + " upper=" + hex(b[1]);
    if (variant++ == 0) {
      emit_case(name, params("truncated_normal", c, s, kRows, kCols) + bounds_text);
      oracle::emit(name, gr::truncated_normal<T>(key_of(c, s), b[0], b[1], kRows, kCols));
    } else {
      emit_case(name, params("truncated_normal", c, s, kOdd) + bounds_text);
      oracle::emit(name, gr::truncated_normal<T>(key_of(c, s), b[0], b[1], kOdd));
    }
  }
}

template <class T>
void gumbel_cases(const Config& c) {
  const std::string base = "gumbel." + c.name();
  const std::uint64_t seed = seed_for(c, 5, 0x0000'0005'0000'0005u);
  emit_case(base + ".matrix", params("gumbel", c, seed, kRows, kCols));
  oracle::emit(base + ".matrix", gr::gumbel<T>(key_of(c, seed), kRows, kCols));
  emit_case(base + ".vector", params("gumbel", c, 6, kOdd));
  oracle::emit(base + ".vector", gr::gumbel<T>(key_of(c, 6), kOdd));
}

template <class T>
void bernoulli_cases(const Config& c) {
  const std::string base = "bernoulli." + c.name();
  emit_case(base + ".half", params("bernoulli", c, 8, kRows, kCols) + " p=" + hex(T(0.5)));
  oracle::emit(base + ".half", gr::bernoulli<T>(key_of(c, 8), T(0.5), kRows, kCols));
  const T ps[] = {T(0.1), T(0.73), T(1e-3), T(0), T(1), T(0.999999)};
  int variant = 0;
  for (const T p : ps) {
    const std::string name = base + ".p" + std::to_string(variant);
    const std::uint64_t s = 30;
    ++variant;
    emit_case(name, params("bernoulli", c, s, kOdd) + " p=" + hex(p));
    oracle::emit(name, gr::bernoulli<T>(key_of(c, s), p, kOdd));
  }
}

template <class I>
void randint_cases(const Config& c, std::initializer_list<std::pair<I, I>> ranges) {
  const std::string base = "randint." + c.name();
  int variant = 0;
  for (const auto& [low, high] : ranges) {
    const std::string name = base + ".range" + std::to_string(variant);
    const std::uint64_t s = variant == 0 ? 40 : 41;
    const std::string range_text = " low=" + std::to_string(low) + " high=" + std::to_string(high);
    if (variant++ == 0) {
      emit_case(name, params("randint", c, s, kRows, kCols) + range_text);
      oracle::emit(name, gr::randint<I>(key_of(c, s), kRows, kCols, low, high));
    } else {
      emit_case(name, params("randint", c, s, kOdd) + range_text);
      oracle::emit(name, gr::randint<I>(key_of(c, s), kOdd, low, high));
    }
  }
}

void randint_cases(const Config& c) {
  using I32 = std::int32_t;
  using I64 = std::int64_t;
  constexpr I32 min32 = std::numeric_limits<I32>::min(), max32 = std::numeric_limits<I32>::max();
  if (!c.x64) {
    randint_cases<I32>(c, {{0, 10},
                           {-5, 1'000'003},
                           {0, 1 << 20},
                           {min32, max32},
                           {100, 101},
                           {-7, 3},
                           {0, max32},
                           {-1'000'000'000, 1'500'000'000}});
  } else {
    constexpr I64 min64 = std::numeric_limits<I64>::min(), max64 = std::numeric_limits<I64>::max();
    randint_cases<I64>(c, {{0, 10},
                           {-(I64{1} << 40), (I64{1} << 41) + 3},
                           {0, I64{1} << 32},
                           {min64, max64},
                           {5, 6},
                           {-1'000'000'007, 999'999'937},
                           {0, max64},
                           {min64 / 3, max64 / 3 * 2}});
  }
}

void permutation_cases(const Config& c) {
  const std::string base = "permutation." + c.name();
  // Sizes with two rounds of sorting (10^6), one (2 <= n <= 1625) and none (n <= 1). XLA:CPU
  // takes seconds to sort 10^6 values, so in 64-bit mode (where the algorithm is the same but for
  // JAX's int64 arange) the large case has 100 003.
  const Index sizes[] = {c.x64 ? 100'003 : 1'000'000, 1625, 2, 1, 0};
  int variant = 0;
  for (const Index n : sizes) {
    const std::string name = base + ".n" + std::to_string(variant);
    const std::uint64_t s =
        seed_for(c, 50, 0x0000'0050'0000'0000u) + static_cast<std::uint64_t>(variant++);
    emit_case(name, params("permutation", c, s, n));
    oracle::emit(name, gr::permutation(key_of(c, s), n));
  }
}

template <class T>
void categorical_cases(const Config& c) {
  const std::string base = "categorical." + c.name();
  // Logits: normals times 3, and a matrix of small integers, whose many equal logits let the
  // noise alone decide.
  const gr::Matrix<T> logits = T(3) * gr::normal<T>(gr::key(1234), kRows, kCols);
  gr::Matrix<T> integers = gr::randint(gr::key(4321), kRows, kCols, -2, 3).template cast<T>();
  oracle::emit(base + ".logits", logits);
  oracle::emit(base + ".integers", integers);
  // One key for the three matrix cases: the same noise, which XLA computes once.
  const std::uint64_t seed = seed_for(c, 60, 0x0000'0060'0000'0060u);
  emit_case(base + ".rows", params("categorical", c, seed, kRows) + " logits=logits axis=-1");
  oracle::emit(base + ".rows", gr::categorical(key_of(c, seed), logits, -1));
  emit_case(base + ".cols", params("categorical", c, seed, kCols) + " logits=logits axis=0");
  oracle::emit(base + ".cols", gr::categorical(key_of(c, seed), logits, 0));
  emit_case(base + ".int_rows", params("categorical", c, seed, kRows) + " logits=integers axis=1");
  oracle::emit(base + ".int_rows", gr::categorical(key_of(c, seed), integers, 1));
  // 1-D logits: one draw each from a row of `logits`, keys split off one key.
  const auto keys = gr::split(key_of(c, 63), 200);
  std::vector<std::int32_t> draws;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const gr::Vector<T> row = logits.row(static_cast<Index>(i)).transpose();
    draws.push_back(gr::categorical(keys[i], row));
  }
  emit_case(base + ".vector", params("categorical", c, 63, 200) + " logits=logits axis=vector");
  oracle::emit(base + ".vector", draws);
}

std::vector<std::uint32_t> words_of(const std::vector<gr::Key>& keys) {
  std::vector<std::uint32_t> words;
  words.reserve(2 * keys.size());
  for (const auto& k : keys) {
    words.push_back(k.words[0]);
    words.push_back(k.words[1]);
  }
  return words;
}

void split_fold_in_cases(const Config& c) {
  const std::string base = "split_fold_in." + c.name();
  {
    const std::uint64_t seed = seed_for(c, 70, 0x0000'7070'0000'0070u);
    emit_case(base + ".split", params("split", c, seed, 500'000));
    oracle::emit(base + ".split", words_of(gr::split(key_of(c, seed), 500'000)));
    emit_case(base + ".split_odd", params("split", c, 71, 3));
    oracle::emit(base + ".split_odd", words_of(gr::split(key_of(c, 71), 3)));
  }
  {
    // fold_in(k, d) for 10^6 data words (random ones, and 0 and 2^32 - 1).
    std::vector<std::uint32_t> data(1'000'000);
    gr::fill_bits(gr::key(72), std::span(data));
    data[0] = 0;
    data[1] = 0xFFFF'FFFFu;
    oracle::emit(base + ".fold_in.data", data);
    const gr::Key k = key_of(c, seed_for(c, 73, 0x0000'0073'0000'0000u));
    std::vector<gr::Key> folded;
    folded.reserve(data.size());
    for (const std::uint32_t d : data) folded.push_back(gr::fold_in(k, d));
    emit_case(base + ".fold_in",
              params("fold_in", c, seed_for(c, 73, 0x0000'0073'0000'0000u), 1'000'000));
    oracle::emit(base + ".fold_in", words_of(folded));
  }
  {
    // A chain: k, sub = split(k); k = fold_in(k, step); keep sub and k of every step.
    constexpr Index steps = 20'000;
    gr::Key k = key_of(c, 74);
    std::vector<gr::Key> chain;
    chain.reserve(2 * steps);
    for (Index step = 0; step < steps; ++step) {
      const auto [next, sub] = gr::split(k);
      k = gr::fold_in(next, static_cast<std::uint32_t>(step));
      chain.push_back(sub);
      chain.push_back(k);
    }
    emit_case(base + ".chain", params("chain", c, 74, steps));
    oracle::emit(base + ".chain", words_of(chain));
  }
  {
    // key(seed) for many seeds (JAX takes 64-bit seeds in 64-bit mode only).
    std::vector<std::uint64_t> seeds(100'000);
    gr::fill_bits(gr::key(75), std::span(seeds));
    if (!c.x64)
      for (auto& s : seeds) s >>= 33;  // below 2^31: a Python int JAX takes in 32-bit mode
    oracle::emit(base + ".seeds.data", seeds);
    std::vector<gr::Key> keys;
    for (const std::uint64_t s : seeds) keys.push_back(key_of(c, s));
    emit_case(base + ".seeds", params("seeds", c, 0, 100'000));
    oracle::emit(base + ".seeds", words_of(keys));
  }
}

void family(std::string_view name, const Config& c) {
  const bool x64 = c.x64;
  if (name == "bits") return bits_cases(c);
  if (name == "uniform") return x64 ? uniform_cases<double>(c) : uniform_cases<float>(c);
  if (name == "normal") return x64 ? normal_cases<double>(c) : normal_cases<float>(c);
  if (name == "truncated_normal")
    return x64 ? truncated_normal_cases<double>(c) : truncated_normal_cases<float>(c);
  if (name == "gumbel") return x64 ? gumbel_cases<double>(c) : gumbel_cases<float>(c);
  if (name == "bernoulli") return x64 ? bernoulli_cases<double>(c) : bernoulli_cases<float>(c);
  if (name == "randint") return randint_cases(c);
  if (name == "permutation") return permutation_cases(c);
  if (name == "categorical")
    return x64 ? categorical_cases<double>(c) : categorical_cases<float>(c);
  if (name == "split_fold_in") return split_fold_in_cases(c);
  throw std::invalid_argument("random_driver: unknown family " + std::string(name));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: random_driver FAMILY\n");
    return 2;
  }
  for (const bool legacy : {false, true})
    for (const bool x64 : {false, true}) family(argv[1], Config{legacy, x64});
  return 0;
}
