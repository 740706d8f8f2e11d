// One training step of the [784, 512, 512, 10] swish MLP (forward, loss, backward, update), float,
// at batch 128 and 1024, with 1 and 2 threads, next to the step's bare GEMMs:
//
//   step/sgd_fused   sgd_step: the walk-through's update(params, x, y); each weight's update is
//                    the GEMM that computes its gradient (W += -lr dZ A^T)
//   step/sgd         value_and_grad_into + sgd's step in place (optax-style)
//   step/momentum    the same with momentum (0.9)
//   step/adam        the same with adam
//   gemms_eigen      the step's 8 products as plain Eigen code writes them (`C.noalias() = A * B`,
//                    Eigen's own threading): what Eigen alone gets
//
// Each step benchmark also times, after every step, the step's bare GEMMs: its 8 products (3
// forward, 3 for the weights, 2 for the hidden layers' inputs; the first layer's input gradient
// is not needed) with the same kernel and threads, each as C += A B into a C that is already
// there (no zeroing pass), one barrier per layer as in the step. That is the limit, strictly; as
// both are timed in the same iterations, a shared machine's load weighs on both alike. The
// counter `step/GEMMs` is their ratio (target: at most 1.15).
//
// The composable API against the engine as it was before it (the headers of grove::nn at the
// commit before the composable models, compiled into this binary as grove::old_nn by
// bench/nn.cmake), in the same iterations, alternating which goes first:
//
//   sequential/sgd   nn::train_step(nn::sequential(dense, swish, dense, swish, dense), ...,
//                    nn::sgd) against the old sgd_step; counter new/old
//   sequential/adam  the same with adam, against the old value_and_grad_into + adam's step
//   apply_one        nn::apply of the sequential model to one example against the old predict
//
// and two models beyond the classic MLP, for bench/compare_pytorch.py: model_residual
// (784 -> 512, two blocks x + gelu(dense(layer_norm(x))), -> 10, softmax cross-entropy) and
// model_tanh_mse (784-512-512-10 tanh, mse against random targets), each an nn::train_step with
// plain SGD.
//
// GFLOP/s counts 6 * params * batch FLOPs per step (2 forward, 4 backward per weight), the usual
// figure, although the step does not compute the first layer's input gradient.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <grove/nn.hpp>
#include <map>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(GROVE_USE_OPENBLAS)
extern "C" void openblas_set_num_threads(int);
#endif

#if defined(GROVE_BENCH_BASELINE)
#include <grove/old_nn/backprop.hpp>
#include <grove/old_nn/optim.hpp>
#include <grove/old_nn/predict.hpp>
#endif

namespace nn = grove::nn;
namespace d = grove::nn::detail;

namespace {

const std::vector<Eigen::Index> kSizes{784, 512, 512, 10};
// The benchmarks train on one batch for thousands of steps: with a real learning rate the network
// would memorise it and its gradients would sink towards denormal numbers, which no real training
// step sees. A tiny one keeps every step's numbers like the first's.
constexpr float kLr = 1e-6f;

double params_count() {
  double n = 0;
  for (std::size_t l = 0; l + 1 < kSizes.size(); ++l)
    n += static_cast<double>(kSizes[l] * kSizes[l + 1] + kSizes[l + 1]);
  return n;
}

void set_threads(int threads) {
  Eigen::setNbThreads(threads);
#if defined(_OPENMP)
  omp_set_num_threads(threads);
#endif
#if defined(GROVE_USE_OPENBLAS)
  openblas_set_num_threads(threads);
#endif
}

struct Problem {
  std::vector<nn::Dense<float>> params;
  Eigen::MatrixXf X;
  Eigen::VectorXi y;
  explicit Problem(Eigen::Index batch)
      : params(nn::init_network_params<float>(kSizes, grove::random::key(0), 0.05f)),
        X(grove::random::uniform<float>(grove::random::key(1), kSizes.front(), batch)),
        y(grove::random::randint(grove::random::key(2), batch, 0,
                                 static_cast<int>(kSizes.back()))) {}
};

// The operands of the step's 8 products, with values like a step's (no NaN, no denormals).
struct Operands {
  std::vector<Eigen::MatrixXf> w, z, a, dw, da;
  explicit Operands(Eigen::Index batch) {
    a.push_back(grove::random::uniform<float>(grove::random::key(1), kSizes.front(), batch));
    for (std::size_t l = 0; l + 1 < kSizes.size(); ++l) {
      w.push_back(0.05f * Eigen::MatrixXf::Random(kSizes[l + 1], kSizes[l]));
      z.push_back(Eigen::MatrixXf::Zero(kSizes[l + 1], batch));
      a.push_back(Eigen::MatrixXf::Random(kSizes[l + 1], batch));
      dw.push_back(Eigen::MatrixXf::Zero(kSizes[l + 1], kSizes[l]));
      da.push_back(Eigen::MatrixXf::Zero(kSizes[l], batch));
    }
  }
};

// The step's products with grove's kernel and threads: one team, a barrier after each layer.
class BareGemms {
 public:
  explicit BareGemms(Eigen::Index batch)
      : batch_(batch), ops_(batch), nt_(d::max_threads()), scratch_(static_cast<std::size_t>(nt_)) {
    for (int tid = 0; tid < nt_; ++tid)
      for (std::size_t l = 0; l + 1 < kSizes.size(); ++l)
        for (auto [m, n, k] : {std::array{kSizes[l + 1], batch, kSizes[l]},
                               std::array{kSizes[l + 1], kSizes[l], batch},
                               std::array{kSizes[l], batch, kSizes[l + 1]}}) {
          const d::Slice s = d::slice_of(m, n, k, tid, nt_);
          if (!s.empty())
            scratch_[static_cast<std::size_t>(tid)].reserve(s.rows.size(), s.cols.size(), k);
        }
  }

  void run() {
    const std::size_t L = ops_.w.size();
    auto in = [](const Eigen::MatrixXf& m) {
      return d::View<const float>{m.data(), m.rows(), m.cols(), m.rows()};
    };
    auto out = [](Eigen::MatrixXf& m) {
      return d::View<float>{m.data(), m.rows(), m.cols(), m.rows()};
    };
    d::parallel(nt_, [&](int tid, int team) {
      auto& sc = scratch_[static_cast<std::size_t>(tid)];
      for (std::size_t l = 0; l < L; ++l) {
        const d::Slice s = d::slice_of(kSizes[l + 1], batch_, kSizes[l], tid, team);
        // (C += A B: the outputs grow by about one per run, far from overflowing in a benchmark.)
        d::gemm_slice<false, false>(s, in(ops_.w[l]), in(ops_.a[l]), out(ops_.z[l]), 1.0f, sc);
        d::barrier(team);
      }
      for (std::size_t l = L; l-- > 0;) {
        const d::Slice s = d::slice_of(kSizes[l + 1], kSizes[l], batch_, tid, team);
        d::gemm_slice<false, true>(s, in(ops_.z[l]), in(ops_.a[l]), out(ops_.dw[l]), 1e-9f, sc);
        if (l > 0) {
          const d::Slice t = d::slice_of(kSizes[l], batch_, kSizes[l + 1], tid, team);
          d::gemm_slice<true, false>(t, in(ops_.w[l]), in(ops_.z[l]), out(ops_.da[l]), 1e-9f, sc);
        }
        d::barrier(team);
      }
    });
  }

 private:
  Eigen::Index batch_;
  Operands ops_;
  int nt_;
  std::vector<d::GemmScratch<float>> scratch_;
};

using clock_type = std::chrono::steady_clock;

// Times `one_step` and the bare GEMMs in alternation; the benchmark's time is the step's.
template <class Step>
void step_vs_gemms(benchmark::State& state, Step&& one_step) {
  const Eigen::Index batch = state.range(0);
  BareGemms gemms(batch);
  gemms.run();
  double step_seconds = 0, gemm_seconds = 0;
  for (auto _ : state) {
    const auto t0 = clock_type::now();
    one_step();
    const auto t1 = clock_type::now();
    gemms.run();
    const auto t2 = clock_type::now();
    const double s = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(s);
    step_seconds += s;
    gemm_seconds += std::chrono::duration<double>(t2 - t1).count();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] =
      6.0 * params_count() * static_cast<double>(batch) * n / step_seconds / 1e9;
  state.counters["GEMMs_ms"] = 1e3 * gemm_seconds / n;
  state.counters["step/GEMMs"] = step_seconds / gemm_seconds;
}

void step_sgd_fused(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(1)));
  Problem p(state.range(0));
  nn::Workspace<float> ws;
  step_vs_gemms(state,
                [&] { benchmark::DoNotOptimize(nn::sgd_step(p.params, p.X, p.y, kLr, ws)); });
}

template <class Opt>
void step_optax(benchmark::State& state, const Opt& opt) {
  set_threads(static_cast<int>(state.range(1)));
  Problem p(state.range(0));
  auto opt_state = opt.init(p.params);
  nn::Workspace<float> ws;
  std::vector<nn::Dense<float>> grads;
  step_vs_gemms(state, [&] {
    benchmark::DoNotOptimize(nn::value_and_grad_into(p.params, p.X, p.y, grads, ws));
    opt.step(p.params, grads, opt_state);
  });
}

void step_sgd(benchmark::State& s) {
  step_optax(s, nn::sgd(kLr));
}
void step_momentum(benchmark::State& s) {
  step_optax(s, nn::momentum(kLr, 0.9));
}
void step_adam(benchmark::State& s) {
  step_optax(s, nn::adam(kLr));
}

// The same products as plain Eigen code writes them, with Eigen's own threading.
void gemms_eigen(benchmark::State& state) {
  const Eigen::Index batch = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  Operands o(batch);
  for (auto _ : state) {
    for (std::size_t l = 0; l < o.w.size(); ++l) o.z[l].noalias() = o.w[l] * o.a[l];
    for (std::size_t l = o.w.size(); l-- > 0;) {
      o.dw[l].noalias() = o.z[l] * o.a[l].transpose();
      if (l > 0) o.da[l].noalias() = o.w[l].transpose() * o.z[l];
    }
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(6.0 * params_count() * static_cast<double>(batch) / 1e9,
                         benchmark::Counter::kIsIterationInvariantRate);
}

// --- the composable API -----------------------------------------------------------------------

const auto kClassic = nn::sequential(nn::dense(784, 512), nn::swish, nn::dense(512, 512), nn::swish,
                                     nn::dense(512, 10));
using ClassicParams = nn::params_t<std::remove_cvref_t<decltype(kClassic)>, float>;

ClassicParams classic_params(const std::vector<nn::Dense<float>>& layers) {
  return {layers[0], {}, layers[1], {}, layers[2]};
}

#if defined(GROVE_BENCH_BASELINE)
namespace old = grove::old_nn;

std::vector<old::Dense<float>> old_params(const std::vector<nn::Dense<float>>& layers) {
  std::vector<old::Dense<float>> out;
  for (const auto& l : layers) out.push_back(old::Dense<float>{l.w, l.b});
  return out;
}

// Times old_step and new_step in the same iterations (alternating which runs first); the
// benchmark's time is the new one's, the counter new/old their ratio.
template <class Old, class New>
void new_vs_old(benchmark::State& state, Old&& old_step, New&& new_step) {
  double old_seconds = 0, new_seconds = 0;
  bool old_first = true;
  for (auto _ : state) {
    auto time = [](auto&& f) {
      const auto t0 = clock_type::now();
      f();
      return std::chrono::duration<double>(clock_type::now() - t0).count();
    };
    double o, n;
    if (old_first) {
      o = time(old_step);
      n = time(new_step);
    } else {
      n = time(new_step);
      o = time(old_step);
    }
    old_first = !old_first;
    state.SetIterationTime(n);
    old_seconds += o;
    new_seconds += n;
  }
  const double iterations = static_cast<double>(state.iterations());
  state.counters["old_ms"] = 1e3 * old_seconds / iterations;
  state.counters["new/old"] = new_seconds / old_seconds;
}

void sequential_sgd(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(1)));
  Problem p(state.range(0));
  auto a = old_params(p.params);
  auto b = classic_params(p.params);
  old::Workspace<float> ows;
  const auto opt = nn::sgd(kLr);
  auto st = opt.init(b);
  nn::StepWorkspace<ClassicParams> ws;
  new_vs_old(
      state, [&] { benchmark::DoNotOptimize(old::sgd_step(a, p.X, p.y, kLr, ows)); },
      [&] {
        benchmark::DoNotOptimize(
            nn::train_step(kClassic, b, p.X, p.y, nn::softmax_cross_entropy, opt, st, ws));
      });
}

void sequential_adam(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(1)));
  Problem p(state.range(0));
  auto a = old_params(p.params);
  auto b = classic_params(p.params);
  old::Workspace<float> ows;
  std::vector<old::Dense<float>> grads;
  const auto old_opt = old::adam(kLr);
  auto old_state = old_opt.init(a);
  const auto opt = nn::adam(kLr);
  auto st = opt.init(b);
  nn::StepWorkspace<ClassicParams> ws;
  new_vs_old(
      state,
      [&] {
        benchmark::DoNotOptimize(old::value_and_grad_into(a, p.X, p.y, grads, ows));
        old_opt.step(a, grads, old_state);
      },
      [&] {
        benchmark::DoNotOptimize(
            nn::train_step(kClassic, b, p.X, p.y, nn::softmax_cross_entropy, opt, st, ws));
      });
}

void apply_one(benchmark::State& state) {
  set_threads(1);
  Problem p(1);
  const auto a = old_params(p.params);
  const auto b = classic_params(p.params);
  const Eigen::VectorXf x = p.X.col(0);
  new_vs_old(
      state, [&] { benchmark::DoNotOptimize(old::predict(a, x)); },
      [&] { benchmark::DoNotOptimize(nn::apply(kClassic, b, x)); });
}
#endif

// Models beyond the classic MLP, trained with plain SGD through nn::train_step.
template <class Model, class Targets, class Loss>
void model_step(benchmark::State& state, const Model& model, const Targets& targets,
                const Loss& loss) {
  set_threads(static_cast<int>(state.range(1)));
  const Eigen::Index batch = state.range(0);
  auto params = nn::init<float>(model, grove::random::key(0));
  const Eigen::MatrixXf X = grove::random::uniform<float>(grove::random::key(1), 784, batch);
  const auto Y = targets(batch);
  const auto opt = nn::sgd(kLr);
  auto st = opt.init(params);
  nn::StepWorkspace<decltype(params)> ws;
  for (auto _ : state)
    benchmark::DoNotOptimize(nn::train_step(model, params, X, Y, loss, opt, st, ws));
}

void model_residual(benchmark::State& state) {
  const auto block =
      nn::residual(nn::sequential(nn::layer_norm(512), nn::dense(512, 512), nn::gelu));
  const auto model = nn::sequential(nn::dense(784, 512), block, block, nn::dense(512, 10));
  model_step(
      state, model,
      [](Eigen::Index batch) {
        return grove::random::randint(grove::random::key(2), batch, 0, 10);
      },
      nn::softmax_cross_entropy);
}

void model_tanh_mse(benchmark::State& state) {
  const auto model = nn::sequential(nn::dense(784, 512), nn::tanh, nn::dense(512, 512), nn::tanh,
                                    nn::dense(512, 10));
  model_step(
      state, model,
      [](Eigen::Index batch) {
        return Eigen::MatrixXf(grove::random::normal<float>(grove::random::key(2), 10, batch));
      },
      nn::mse);
}

void args(benchmark::internal::Benchmark* b) {
  for (long batch : {128, 1024})
    for (long threads : {1, 2}) b->Args({batch, threads});
  b->ArgNames({"batch", "threads"})->Unit(benchmark::kMillisecond)->MinTime(1.0);
}

BENCHMARK(step_sgd_fused)->Apply(args)->UseManualTime();
BENCHMARK(step_sgd)->Apply(args)->UseManualTime();
BENCHMARK(step_momentum)->Apply(args)->UseManualTime();
BENCHMARK(step_adam)->Apply(args)->UseManualTime();
BENCHMARK(gemms_eigen)->Apply(args)->UseRealTime();
#if defined(GROVE_BENCH_BASELINE)
BENCHMARK(sequential_sgd)->Apply(args)->UseManualTime();
BENCHMARK(sequential_adam)->Apply(args)->UseManualTime();
BENCHMARK(apply_one)->Unit(benchmark::kMicrosecond)->MinTime(1.0)->UseManualTime();
#endif
BENCHMARK(model_residual)->Apply(args)->UseRealTime();
BENCHMARK(model_tanh_mse)->Apply(args)->UseRealTime();

// Keeps, for the summary table, each benchmark's fastest repetition.
class Collector : public benchmark::ConsoleReporter {
 public:
  struct Row {
    double ms = 0, gemms_ms = 0, ratio = 0;
  };
  std::map<std::string, Row> rows;  // "name/batch:B/threads:T"
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      if (r.error_occurred || r.run_type != Run::RT_Iteration) continue;
      const std::string key = r.run_name.function_name + "/" + r.run_name.args;
      Row row{r.GetAdjustedRealTime(), 0, 0};
      if (auto it = r.counters.find("GEMMs_ms"); it != r.counters.end())
        row.gemms_ms = it->second.value;
      if (auto it = r.counters.find("step/GEMMs"); it != r.counters.end())
        row.ratio = it->second.value;
      if (auto it = r.counters.find("new/old"); it != r.counters.end()) {
        row.ratio = it->second.value;
        row.gemms_ms = r.counters.find("old_ms")->second.value;
      }
      const auto old = rows.find(key);
      if (old == rows.end() || row.ms < old->second.ms) rows[key] = row;
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  for (const char* v : {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"})
    if (const char* value = std::getenv(v))
      std::printf("note: %s=%s is set (run with `env -u %s` to let OpenBLAS choose)\n", v, value,
                  v);
#if defined(GROVE_USE_OPENBLAS)
  const char* threads = "threaded by OpenBLAS";
#elif defined(_OPENMP)
  const char* threads = "threads: OpenMP";
#else
  const char* threads = "no OpenMP: one thread";
#endif
  std::printf("products: %s, %s\n", d::kernel_name<float>(), threads);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Collector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);
  std::printf("\n%-6s %-8s %-10s %9s %9s %11s %11s %11s\n", "batch", "threads", "step", "ms",
              "GFLOP/s", "GEMMs ms", "step/GEMMs", "Eigen ms");
  for (long batch : {128, 1024})
    for (long threads : {1, 2}) {
      const std::string suffix =
          "/batch:" + std::to_string(batch) + "/threads:" + std::to_string(threads);
      const auto eig = collector.rows.find("gemms_eigen" + suffix);
      for (const char* kind : {"sgd_fused", "sgd", "momentum", "adam"}) {
        const auto it = collector.rows.find(std::string("step_") + kind + suffix);
        if (it == collector.rows.end()) continue;
        const auto& r = it->second;
        const double gflops =
            6.0 * params_count() * static_cast<double>(batch) / (r.ms * 1e-3) / 1e9;
        std::printf("%-6ld %-8ld %-10s %9.3f %9.1f %11.3f %11.3f %11.3f\n", batch, threads, kind,
                    r.ms, gflops, r.gemms_ms, r.ratio,
                    eig == collector.rows.end() ? 0.0 : eig->second.ms);
      }
    }
#if defined(GROVE_BENCH_BASELINE)
  std::printf("\nThe composable API against the engine before it (same iterations):\n");
  std::printf("%-6s %-8s %-16s %9s %9s %9s\n", "batch", "threads", "step", "new ms", "old ms",
              "new/old");
  for (long batch : {128, 1024})
    for (long threads : {1, 2})
      for (const char* kind : {"sequential_sgd", "sequential_adam"}) {
        const auto it = collector.rows.find(std::string(kind) + "/batch:" + std::to_string(batch) +
                                            "/threads:" + std::to_string(threads));
        if (it == collector.rows.end()) continue;
        std::printf("%-6ld %-8ld %-16s %9.3f %9.3f %9.3f\n", batch, threads, kind, it->second.ms,
                    it->second.gemms_ms, it->second.ratio);
      }
  if (const auto it = collector.rows.find("apply_one/"); it != collector.rows.end())
    std::printf("apply one example: new %.2f us, old predict %.2f us, new/old %.3f\n",
                it->second.ms, 1e3 * it->second.gemms_ms, it->second.ratio);
#else
  std::printf(
      "\n(no baseline: bench/nn.cmake found no git checkout with the old engine's commit)\n");
#endif
  benchmark::Shutdown();
  return 0;
}
