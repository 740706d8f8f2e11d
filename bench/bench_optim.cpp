// grove::optim's step over the [784, 512, 512, 10] MLP's parameters (Dense w / b, float), next to
// one pass of plain adam timed in the same iterations (so a shared machine's load weighs on both
// alike), at 1 and 2 threads:
//
//   clip_adamw   chain(clip_by_global_norm(1), adamw(1e-3)).step: one read of the gradients for
//                the norm, then one fused pass (target: at most 1.3x the baseline)
//   adamw_mask   adamw(1e-3, ..., weight decay on the matrices only).step
//   baseline     adam(1e-3).step against itself: what the machine's noise makes of a ratio of 1
//
// The counter `x_baseline` is the benchmark's time over the baseline's, iteration by iteration.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <chrono>
#include <grove/nn.hpp>
#include <grove/optim.hpp>
#include <vector>

namespace nn = grove::nn;
namespace optim = grove::optim;

namespace {
using Params = std::vector<nn::Dense<float>>;
using clock_type = std::chrono::steady_clock;

struct Problem {
  Params params = nn::init_network_params<float>({784, 512, 512, 10}, grove::random::key(0), 0.05f);
  // Gradients with a global norm above 1, so that clipping scales them.
  Params grads = grove::tree_map([](const auto& p) { return (p * 0.5f).eval(); }, params);
};

// Times tx.step and the baseline's step alternately; the benchmark's time is tx's.
template <class Tx>
void versus_baseline(benchmark::State& state, const Tx& tx) {
  Eigen::setNbThreads(static_cast<int>(state.range(0)));
  Problem a, b;
  auto sa = tx.init(a.params);
  const auto baseline = optim::adam(1e-3);
  auto sb = baseline.init(b.params);
  tx.step(a.params, a.grads, sa);
  baseline.step(b.params, b.grads, sb);
  double seconds = 0, baseline_seconds = 0;
  for (auto _ : state) {
    const auto t0 = clock_type::now();
    tx.step(a.params, a.grads, sa);
    const auto t1 = clock_type::now();
    baseline.step(b.params, b.grads, sb);
    const auto t2 = clock_type::now();
    const double s = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(s);
    seconds += s;
    baseline_seconds += std::chrono::duration<double>(t2 - t1).count();
    benchmark::DoNotOptimize(a.params[0].w.data());
    benchmark::DoNotOptimize(b.params[0].w.data());
  }
  state.counters["baseline_us"] = 1e6 * baseline_seconds / static_cast<double>(state.iterations());
  state.counters["x_baseline"] = seconds / baseline_seconds;
}

void clip_adamw(benchmark::State& state) {
  versus_baseline(state, optim::chain(optim::clip_by_global_norm(1.0), optim::adamw(1e-3)));
}
void adamw_mask(benchmark::State& state) {
  auto weights = [](const Params& p) {
    return grove::tree_map([](const auto& leaf) { return leaf.cols() > 1; }, p);
  };
  versus_baseline(state, optim::adamw(1e-3, 0.9, 0.999, 1e-8, 0.0, 1e-4, weights));
}
void baseline(benchmark::State& state) {
  versus_baseline(state, optim::adam(1e-3));
}
}  // namespace

BENCHMARK(clip_adamw)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(adamw_mask)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(baseline)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
