// Throughput of grove::random next to what a C++ user writes today: std::mt19937 with
// std::uniform_real_distribution<float> / std::normal_distribution<float>, 10^7 float32 values per
// call.
//
// Two ways of calling, each compared with its std counterpart:
//   alloc/...  a new container per call (grove::random::normal(k, n) vs filling a new
//              std::vector); at 40 MB per call this includes the kernel's page faults;
//   into/...   a buffer allocated once and refilled (grove::random::fill_normal vs a loop over the
//              same std::vector): the generators alone.
// threads:1 runs on the calling thread only; threads:0 lets grove use every hardware thread.
//
// Counters: samples/s, values per second in the fastest call; x_std, that rate over the std rate of
// the same distribution and way of calling, measured in this run. Single-thread rates use the
// thread's CPU time, so that other load on a shared machine skews the ratio less; threads:0 rates
// use wall time (and compare with the std wall rate).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "grove/random.hpp"

namespace {

namespace gr = grove::random;

constexpr std::int64_t samples = 10'000'000;

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double thread_cpu_seconds() {
#if defined(CLOCK_THREAD_CPUTIME_ID)
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
#else
  return wall_seconds();
#endif
}

struct rates {
  double cpu = 0;
  double wall = 0;
};

// Rates of the std references, by "<way>/<distribution>", filled by the std benchmarks (which run
// first) or measured on demand when a filter left them out.
std::map<std::string, rates>& std_rates() {
  static std::map<std::string, rates> table;
  return table;
}

// Times `call` once per iteration; returns the CPU and wall rates of the fastest call, in values
// per second. The fastest call is the one least disturbed by other work on the machine, for grove
// and for std alike.
template <class Call>
rates measure(benchmark::State& state, Call&& call) {
  double best_cpu = 1e300;
  double best_wall = 1e300;
  for (auto _ : state) {
    const double c0 = thread_cpu_seconds();
    const double w0 = wall_seconds();
    call();
    benchmark::ClobberMemory();
    best_cpu = std::min(best_cpu, thread_cpu_seconds() - c0);
    best_wall = std::min(best_wall, wall_seconds() - w0);
  }
  const auto values = static_cast<double>(samples);
  return {values / best_cpu, values / best_wall};
}

// What a C++ user writes today.
void std_fill(std::mt19937& engine, const std::string& distribution, std::vector<float>& out) {
  if (distribution == "normal") {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& v : out) v = normal(engine);
  } else {
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    for (auto& v : out) v = uniform(engine);
  }
}

rates std_reference(const std::string& way, const std::string& distribution) {
  const std::string name = way + "/" + distribution;
  auto& table = std_rates();
  if (auto it = table.find(name); it != table.end()) return it->second;
  std::mt19937 engine(42);
  std::vector<float> buffer(static_cast<std::size_t>(samples));
  const double c0 = thread_cpu_seconds();
  const double w0 = wall_seconds();
  if (way == "alloc") {
    std::vector<float> fresh(static_cast<std::size_t>(samples));
    std_fill(engine, distribution, fresh);
    benchmark::DoNotOptimize(fresh.data());
  } else {
    std_fill(engine, distribution, buffer);
    benchmark::DoNotOptimize(buffer.data());
  }
  const auto values = static_cast<double>(samples);
  return table[name] = {values / (thread_cpu_seconds() - c0), values / (wall_seconds() - w0)};
}

void report(benchmark::State& state, rates measured, const std::string& way,
            const std::string& distribution, bool single_thread) {
  const double rate = single_thread ? measured.cpu : measured.wall;
  state.counters["samples/s"] = rate;
  if (distribution.empty()) return;
  const rates reference = std_reference(way, distribution);
  state.counters["x_std"] = rate / (single_thread ? reference.cpu : reference.wall);
}

// --- std references ------------------------------------------------------------------------------

void std_alloc(benchmark::State& state, const std::string& distribution) {
  std::mt19937 engine(42);
  const rates r = measure(state, [&] {
    std::vector<float> values(static_cast<std::size_t>(samples));
    std_fill(engine, distribution, values);
    benchmark::DoNotOptimize(values.data());
  });
  std_rates()["alloc/" + distribution] = r;
  state.counters["samples/s"] = r.cpu;
}

void std_into(benchmark::State& state, const std::string& distribution) {
  std::mt19937 engine(42);
  std::vector<float> values(static_cast<std::size_t>(samples));
  const rates r = measure(state, [&] {
    std_fill(engine, distribution, values);
    benchmark::DoNotOptimize(values.data());
  });
  std_rates()["into/" + distribution] = r;
  state.counters["samples/s"] = r.cpu;
}

// --- grove ---------------------------------------------------------------------------------------

gr::thread_options options_of(const benchmark::State& state) {
  return gr::thread_options{static_cast<int>(state.range(0))};
}

// `distribution` names the std reference for x_std ("uniform" for raw bits: both are one draw of
// the engine per value).
template <class Generate>
void grove_alloc(benchmark::State& state, const std::string& distribution, Generate generate) {
  const auto opt = options_of(state);
  const rates r = measure(state, [&] {
    auto values = generate(opt);
    benchmark::DoNotOptimize(values.data());
  });
  report(state, r, "alloc", distribution, opt.threads == 1);
}

template <class T, class Fill>
void grove_into(benchmark::State& state, const std::string& distribution, Fill fill) {
  const auto opt = options_of(state);
  std::vector<T> values(static_cast<std::size_t>(samples));
  const rates r = measure(state, [&] {
    fill(std::span<T>(values), opt);
    benchmark::DoNotOptimize(values.data());
  });
  report(state, r, "into", distribution, opt.threads == 1);
}

template <class Fill>
void grove_into_uint32(benchmark::State& state, const std::string& distribution, Fill fill) {
  grove_into<std::uint32_t>(state, distribution, fill);
}
template <class Fill>
void grove_into_float(benchmark::State& state, const std::string& distribution, Fill fill) {
  grove_into<float>(state, distribution, fill);
}
template <class Fill>
void grove_into_double(benchmark::State& state, const std::string& distribution, Fill fill) {
  grove_into<double>(state, distribution, fill);
}

const gr::Key key42 = gr::key(42);
const gr::Key legacy42 = gr::legacy_key(42);

void threads(benchmark::internal::Benchmark* b) {
  b->ArgName("threads")->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace

// The std references run first, so that x_std compares with numbers from the same run.
BENCHMARK_CAPTURE(std_alloc, mt19937_uniform_float, std::string("uniform"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(std_alloc, mt19937_normal_float, std::string("normal"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(std_into, mt19937_uniform_float, std::string("uniform"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(std_into, mt19937_normal_float, std::string("normal"))
    ->Unit(benchmark::kMillisecond);

BENCHMARK_CAPTURE(grove_alloc, bits_uint32, std::string("uniform"),
                  [](const gr::thread_options& o) { return gr::bits(key42, samples, o); })
    ->Apply(threads);
BENCHMARK_CAPTURE(grove_alloc, uniform_float, std::string("uniform"),
                  [](const gr::thread_options& o) { return gr::uniform<float>(key42, samples, o); })
    ->Apply(threads);
BENCHMARK_CAPTURE(grove_alloc, normal_float, std::string("normal"),
                  [](const gr::thread_options& o) { return gr::normal<float>(key42, samples, o); })
    ->Apply(threads);

BENCHMARK_CAPTURE(grove_into_uint32, bits_uint32, std::string("uniform"),
                  [](std::span<std::uint32_t> out, const gr::thread_options& o) {
                    gr::fill_bits(key42, out, o);
                  })
    ->Apply(threads);
BENCHMARK_CAPTURE(grove_into_float, uniform_float, std::string("uniform"),
                  [](std::span<float> out, const gr::thread_options& o) {
                    gr::fill_uniform(key42, out, o);
                  })
    ->Apply(threads);
BENCHMARK_CAPTURE(grove_into_float, normal_float, std::string("normal"),
                  [](std::span<float> out, const gr::thread_options& o) {
                    gr::fill_normal(key42, out, o);
                  })
    ->Apply(threads);
BENCHMARK_CAPTURE(grove_into_float, normal_float_legacy, std::string("normal"),
                  [](std::span<float> out, const gr::thread_options& o) {
                    gr::fill_normal(legacy42, out, o);
                  })
    ->Apply(threads);
BENCHMARK_CAPTURE(grove_into_float, truncated_normal_float, std::string("normal"),
                  [](std::span<float> out, const gr::thread_options& o) {
                    gr::fill_truncated_normal(key42, -2.0f, 2.0f, out, o);
                  })
    ->Apply(threads);
BENCHMARK_CAPTURE(grove_into_double, normal_double, std::string("normal"),
                  [](std::span<double> out, const gr::thread_options& o) {
                    gr::fill_normal(key42, out, o);
                  })
    ->Apply(threads);

BENCHMARK_MAIN();
