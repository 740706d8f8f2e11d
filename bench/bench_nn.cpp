// One training step of the [784, 512, 512, 10] swish MLP (forward, loss, backward, update), float,
// at batch 128 and 1024, with 1 and 2 threads, next to the step's bare GEMMs:
//
//   step/sgd_fused   sgd_step: the walk-through's update(params, x, y); each weight's update is
//                    the GEMM that computes its gradient (W += -lr dZ A^T)
//   step/sgd         value_and_grad_into + sgd's step in place (optax-style): two calls
//   step/momentum    nn::train_step of the same MLP as nn::sequential, with momentum (0.9): the
//                    gradients, then the optimizer's fused pass over the parameters
//   step/adam        the same with adam
//   step/adamw       the same with adamw, its weight decay masked to the weight matrices
//   gemms_eigen      the step's 8 products as plain Eigen code writes them (`C.noalias() = A * B`,
//                    Eigen's own threading): what Eigen alone gets
//   products         each of the 8 products on one thread, with the kernel this build chose and
//                    with Eigen's kernel in the same run (detail::force_eigen_kernel), and each
//                    one's fraction of the FMA peak, measured by a register-only loop in this run
//
// Each step benchmark also times, after every step, the step's bare GEMMs: its 8 products (3
// forward, 3 for the weights, 2 for the hidden layers' inputs; the first layer's input gradient
// is not needed) with the same kernel and threads, each as C += A B into a C that is already
// there (no zeroing pass), one barrier per layer as in the step. That is the limit, strictly; as
// both are timed in the same iterations, a shared machine's load weighs on both alike. The
// counter `step/GEMMs` is their ratio (target: at most 1.15).
//
// the same adam step beside another busy process, for how a loaded machine degrades:
//
//   step_loaded      nn::train_step with adam at 1 and 2 threads in alternation (each iteration
//                    one of each, so that both see the same load), with a CPU-bound process
//                    started by the benchmark beside it (busy:1) or without (busy:0); counter
//                    2T/1T, the two-thread step's time over the one-thread step's
//
// mixed precision, float32 and under nn::precision_policy::mixed_bf16() in the same iterations
// (alternating which goes first; counters f32_ms, bf16_ms and bf16/f32, the label naming the bf16
// kernel that ran):
//
//   step_precision   nn::train_step with adam
//   apply_precision  nn::apply of one example (batch:1) and of a batch of 128, one thread
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
#include <optional>
#if GROVE_DETAIL_DISPATCH && defined(__x86_64__)
#include <immintrin.h>
#endif
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(__linux__)
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#endif
#if defined(GROVE_USE_OPENBLAS)
extern "C" void openblas_set_num_threads(int);
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

// The classic MLP as a composable model, with the walk-through's parameters.
const auto kClassic = nn::sequential(nn::dense(784, 512), nn::swish, nn::dense(512, 512), nn::swish,
                                     nn::dense(512, 10));
using ClassicParams = nn::params_t<std::remove_cvref_t<decltype(kClassic)>, float>;

ClassicParams classic_params(const std::vector<nn::Dense<float>>& layers) {
  return {layers[0], {}, layers[1], {}, layers[2]};
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

// nn::train_step of the composable model, as a user writes the step.
template <class Opt>
void step_train(benchmark::State& state, const Opt& opt) {
  set_threads(static_cast<int>(state.range(1)));
  Problem p(state.range(0));
  auto params = classic_params(p.params);
  auto opt_state = opt.init(params);
  nn::StepWorkspace<ClassicParams> ws;
  step_vs_gemms(state, [&] {
    benchmark::DoNotOptimize(
        nn::train_step(kClassic, params, p.X, p.y, nn::softmax_cross_entropy, opt, opt_state, ws));
  });
}

// A CPU-bound process beside the benchmark for as long as this object lives: a loop of integer
// arithmetic in a forked child, which dies with the benchmark (PR_SET_PDEATHSIG) if that ends
// first. Linux only; elsewhere running() is false.
class BusyProcess {
 public:
  BusyProcess() {
#if defined(__linux__)
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      volatile std::uint64_t x = 1;
      for (;;) x = x * 6364136223846793005u + 1442695040888963407u;
    }
#endif
  }
  BusyProcess(const BusyProcess&) = delete;
  BusyProcess& operator=(const BusyProcess&) = delete;
  ~BusyProcess() {
#if defined(__linux__)
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
#endif
  }
  bool running() const {
    return pid_ > 0;
  }

 private:
  long pid_ = -1;
};

// adam's train_step at 1 and 2 threads in alternation, beside a busy process (range(1) = 1) or
// not: the benchmark's time is the two-thread step's.
void step_loaded(benchmark::State& state) {
  Problem p(state.range(0));
  auto params = classic_params(p.params);
  const auto opt = nn::adam(kLr);
  auto opt_state = opt.init(params);
  nn::StepWorkspace<ClassicParams> ws;
  auto step = [&](int threads) {
    set_threads(threads);
    const auto t0 = clock_type::now();
    benchmark::DoNotOptimize(
        nn::train_step(kClassic, params, p.X, p.y, nn::softmax_cross_entropy, opt, opt_state, ws));
    return std::chrono::duration<double>(clock_type::now() - t0).count();
  };
  step(1);
  step(2);
  std::optional<BusyProcess> busy;
  if (state.range(1) != 0) {
    busy.emplace();
    if (!busy->running()) {
      state.SkipWithError("no competing process (fork failed, or not Linux)");
      return;
    }
  }
  double one = 0, two = 0;
  for (auto _ : state) {
    one += step(1);
    const double t = step(2);
    two += t;
    state.SetIterationTime(t);
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["1T_ms"] = 1e3 * one / n;
  state.counters["2T_ms"] = 1e3 * two / n;
  state.counters["2T/1T"] = two / one;
}

void step_sgd(benchmark::State& s) {
  step_optax(s, nn::sgd(kLr));
}
void step_momentum(benchmark::State& s) {
  step_train(s, nn::momentum(kLr, 0.9));
}
void step_adam(benchmark::State& s) {
  step_train(s, nn::adam(kLr));
}
void step_adamw(benchmark::State& s) {
  // Weight decay on the weight matrices only, the usual recipe.
  const auto weights = [](const ClassicParams& p) {
    return grove::tree_map([](const auto& leaf) { return leaf.cols() > 1; }, p);
  };
  step_train(s, grove::optim::adamw(kLr, 0.9, 0.999, 1e-8, 0.0, 1e-4, weights));
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

// --- the kernel on each product, against Eigen's kernel and the FMA peak -------------------------

// The single-core FMA peak in GFLOP/s: a register-only loop of independent FMAs (enough chains to
// cover the FMA latency on every pipe), on the widest vectors the kernel that runs uses.
#if GROVE_DETAIL_DISPATCH && defined(__x86_64__)
// One loop per instruction set, as a macro: the vectors must not cross a function boundary (their
// ABI depends on the target), and the FMAs must be inlined into the loop. Ten chains cover the
// FMA latency of two pipes and leave the chains, x and y in registers. Many short trials, the
// fastest counting, as for the products: on a shared machine a long loop measures the sharing.
#define GROVE_BENCH_FMA_PEAK(NAME, TARGET, VEC, SET, FMA, LANE0)                           \
  __attribute__((target(TARGET))) double NAME() {                                          \
    constexpr int chains = 10;                                                             \
    constexpr long reps = 50'000;                                                          \
    const VEC x = SET(0.999999f), y = SET(1e-7f);                                          \
    /* different starting values, so that the compiler cannot merge the chains */          \
    VEC a0 = SET(1.0f), a1 = SET(1.1f), a2 = SET(1.2f), a3 = SET(1.3f), a4 = SET(1.4f);    \
    VEC a5 = SET(1.5f), a6 = SET(1.6f), a7 = SET(1.7f), a8 = SET(1.8f), a9 = SET(1.9f);    \
    double best = 0;                                                                       \
    for (int trial = 0; trial < 400; ++trial) {                                            \
      const auto t0 = std::chrono::steady_clock::now();                                    \
      for (long r = 0; r < reps; ++r) {                                                    \
        a0 = FMA(a0, x, y), a1 = FMA(a1, x, y), a2 = FMA(a2, x, y), a3 = FMA(a3, x, y);    \
        a4 = FMA(a4, x, y), a5 = FMA(a5, x, y), a6 = FMA(a6, x, y), a7 = FMA(a7, x, y);    \
        a8 = FMA(a8, x, y), a9 = FMA(a9, x, y);                                            \
      }                                                                                    \
      const double s =                                                                     \
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();    \
      float sink = LANE0(a0) + LANE0(a1) + LANE0(a2) + LANE0(a3) + LANE0(a4) + LANE0(a5) + \
                   LANE0(a6) + LANE0(a7) + LANE0(a8) + LANE0(a9);                          \
      benchmark::DoNotOptimize(sink);                                                      \
      const double width = static_cast<double>(sizeof(VEC) / sizeof(float));               \
      best = std::max(best, 2.0 * width * chains * static_cast<double>(reps) / s / 1e9);   \
    }                                                                                      \
    return best;                                                                           \
  }
GROVE_BENCH_FMA_PEAK(fma_peak_avx2, "avx2,fma", __m256, _mm256_set1_ps, _mm256_fmadd_ps,
                     _mm256_cvtss_f32)
GROVE_BENCH_FMA_PEAK(fma_peak_avx512, "avx512f", __m512, _mm512_set1_ps, _mm512_fmadd_ps,
                     _mm512_cvtss_f32)
#undef GROVE_BENCH_FMA_PEAK
#endif

double fma_peak_gflops() {
#if GROVE_DETAIL_DISPATCH && defined(__x86_64__)
  if (d::uses_avx512_kernel<float>()) return fma_peak_avx512();
  if (grove::detail::this_cpu().avx2_fma) return fma_peak_avx2();
#endif
  return 0;
}

// The step's 8 products at one batch, one thread, each timed with the kernel this build chose and
// with Eigen's kernel (force_eigen_kernel) in alternation; their fastest runs go to the table.
struct ProductRow {
  std::string name;
  Eigen::Index m, n, k;
  double grove_s = 1e30, eigen_s = 1e30;
};
std::map<long, std::vector<ProductRow>> g_products;

template <bool TA, bool TB>
void time_product(ProductRow& row, const Eigen::MatrixXf& a, const Eigen::MatrixXf& b,
                  Eigen::MatrixXf& c, d::GemmScratch<float>& sc) {
  const d::View<const float> av{a.data(), a.rows(), a.cols(), a.rows()};
  const d::View<const float> bv{b.data(), b.rows(), b.cols(), b.rows()};
  const d::View<float> cv{c.data(), c.rows(), c.cols(), c.rows()};
  const d::Slice all{{0, row.m}, {0, row.n}};
  const bool forced = d::force_eigen_kernel();
  for (const bool eigen : {false, true, true, false}) {
    d::force_eigen_kernel() = eigen;
    const int reps = std::max(1, static_cast<int>(2e7 / (2.0 * row.m * row.n * row.k)));
    const auto t0 = clock_type::now();
    for (int r = 0; r < reps; ++r) d::gemm_slice<TA, TB>(all, av, bv, cv, 1e-9f, sc);
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count() / reps;
    double& best = eigen ? row.eigen_s : row.grove_s;
    best = std::min(best, s);
  }
  d::force_eigen_kernel() = forced;
}

void products(benchmark::State& state) {
  const Eigen::Index batch = state.range(0);
  set_threads(1);
  Operands o(batch);
  d::GemmScratch<float> sc;
  std::vector<ProductRow> rows;
  const std::size_t L = o.w.size();
  for (std::size_t l = 0; l < L; ++l)
    rows.push_back({"fwd W" + std::to_string(l) + "*A", kSizes[l + 1], batch, kSizes[l]});
  for (std::size_t l = L; l-- > 0;) {
    rows.push_back({"dW" + std::to_string(l) + "=dZ*A^T", kSizes[l + 1], kSizes[l], batch});
    if (l > 0)
      rows.push_back({"dA" + std::to_string(l) + "=W^T*dZ", kSizes[l], batch, kSizes[l + 1]});
  }
  for (const auto& r : rows) sc.reserve(r.m, r.n, r.k);
  for (auto _ : state) {
    std::size_t i = 0;
    for (std::size_t l = 0; l < L; ++l)
      time_product<false, false>(rows[i++], o.w[l], o.a[l], o.z[l], sc);
    for (std::size_t l = L; l-- > 0;) {
      time_product<false, true>(rows[i++], o.z[l], o.a[l], o.dw[l], sc);
      if (l > 0) time_product<true, false>(rows[i++], o.w[l], o.z[l], o.da[l], sc);
    }
  }
  double gs = 0, es = 0;
  for (const auto& r : rows) gs += r.grove_s, es += r.eigen_s;
  state.counters["kernel/Eigen"] = gs / es;
  g_products[batch] = rows;
}

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

// Mixed precision: `f32` and `bf16` (the same work under nn::precision_policy::mixed_bf16()) in
// the same iterations, alternating which runs first. The benchmark's time is bf16's; the counters
// give both and their ratio.
template <class F32, class BF16>
void f32_vs_bf16(benchmark::State& state, F32&& f32, BF16&& bf16) {
  double f32_seconds = 0, bf16_seconds = 0;
  bool f32_first = true;
  auto time = [](auto&& f) {
    const auto t0 = clock_type::now();
    f();
    return std::chrono::duration<double>(clock_type::now() - t0).count();
  };
  for (auto _ : state) {
    double a, b;
    if (f32_first) {
      a = time(f32);
      b = time(bf16);
    } else {
      b = time(bf16);
      a = time(f32);
    }
    f32_first = !f32_first;
    state.SetIterationTime(b);
    f32_seconds += a;
    bf16_seconds += b;
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["f32_ms"] = 1e3 * f32_seconds / n;
  state.counters["bf16_ms"] = 1e3 * bf16_seconds / n;
  state.counters["bf16/f32"] = bf16_seconds / f32_seconds;
  state.SetLabel(nn::bf16_kernel_name());
}

// adam's train_step of the classic MLP in float32 and under bf16 compute, from the same
// parameters (each its own copy and optimizer state).
void step_precision(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(1)));
  Problem p(state.range(0));
  const auto mixed = nn::with_policy(kClassic, nn::precision_policy::mixed_bf16());
  auto a = classic_params(p.params), b = a;
  const auto opt = nn::adam(kLr);
  auto sa = opt.init(a), sb = opt.init(b);
  nn::StepWorkspace<ClassicParams> wa, wb;
  f32_vs_bf16(
      state,
      [&] {
        benchmark::DoNotOptimize(
            nn::train_step(kClassic, a, p.X, p.y, nn::softmax_cross_entropy, opt, sa, wa));
      },
      [&] {
        benchmark::DoNotOptimize(
            nn::train_step(mixed, b, p.X, p.y, nn::softmax_cross_entropy, opt, sb, wb));
      });
}

// Inference: nn::apply of one example (range(0) = 1) or a batch, float32 and under bf16 compute.
void apply_precision(benchmark::State& state) {
  set_threads(1);
  Problem p(state.range(0));
  const auto mixed = nn::with_policy(kClassic, nn::precision_policy::mixed_bf16());
  const auto params = classic_params(p.params);
  nn::Workspace<float> wa, wb;
  Eigen::MatrixXf oa, ob;
  f32_vs_bf16(
      state, [&] { nn::apply_into(kClassic, params, p.X, oa, wa); },
      [&] { nn::apply_into(mixed, params, p.X, ob, wb); });
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
BENCHMARK(step_adamw)->Apply(args)->UseManualTime();
BENCHMARK(gemms_eigen)->Apply(args)->UseRealTime();
BENCHMARK(step_loaded)
    ->ArgsProduct({{128, 1024}, {0, 1}})
    ->ArgNames({"batch", "busy"})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0)
    ->UseManualTime();
BENCHMARK(products)
    ->Arg(128)
    ->Arg(1024)
    ->ArgName("batch")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(step_precision)->Apply(args)->UseManualTime();
BENCHMARK(apply_precision)
    ->Arg(1)
    ->Arg(128)
    ->ArgName("batch")
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.5)
    ->UseManualTime();
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
      if (auto it = r.counters.find("2T/1T"); it != r.counters.end()) {
        row.ratio = it->second.value;
        row.gemms_ms = r.counters.find("1T_ms")->second.value;
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
  // --eigen_kernel: every product on Eigen's kernel (as on a CPU without grove's kernels), for a
  // before/after comparison through tools that run this binary (compare_pytorch.py).
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--eigen_kernel") {
      d::force_eigen_kernel() = true;
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      argv[--argc] = nullptr;
      break;
    }
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
      for (const char* kind : {"sgd_fused", "sgd", "momentum", "adam", "adamw"}) {
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
  std::printf(
      "\nadam's train_step at 1 and 2 threads in alternation, beside a busy process or not\n"
      "%-6s %-6s %11s %11s %9s\n",
      "batch", "busy", "1 thread ms", "2 threads ms", "2T/1T");
  for (long batch : {128, 1024})
    for (long busy : {0, 1}) {
      const auto it = collector.rows.find("step_loaded/batch:" + std::to_string(batch) +
                                          "/busy:" + std::to_string(busy));
      if (it == collector.rows.end()) continue;
      std::printf("%-6ld %-6s %11.3f %11.3f %9.3f\n", batch, busy ? "yes" : "no",
                  it->second.gemms_ms, it->second.ms, it->second.ratio);
    }
  if (!g_products.empty()) {
    const double peak = fma_peak_gflops();
    std::printf(
        "\nEach product on one thread: %s against Eigen's kernel (same run); FMA peak "
        "%.1f GFLOP/s (a register-only loop)\n",
        d::kernel_name<float>(), peak);
    std::printf("%-6s %-16s %-15s %9s %9s %9s %11s %11s\n", "batch", "product", "m x n x k", "ms",
                "Eigen ms", "/Eigen", "peak frac", "Eigen frac");
    const auto row = [&](long batch, const std::string& name, const std::string& shape,
                         double flops, double grove_s, double eigen_s) {
      std::printf("%-6ld %-16s %-15s %9.4f %9.4f %9.3f %11.3f %11.3f\n", batch, name.c_str(),
                  shape.c_str(), 1e3 * grove_s, 1e3 * eigen_s, grove_s / eigen_s,
                  peak > 0 ? flops / grove_s / 1e9 / peak : 0.0,
                  peak > 0 ? flops / eigen_s / 1e9 / peak : 0.0);
    };
    for (const auto& [batch, rows] : g_products) {
      double flops = 0, grove_s = 0, eigen_s = 0;
      for (const auto& r : rows) {
        const double f = 2.0 * static_cast<double>(r.m * r.n * r.k);
        row(batch, r.name,
            std::to_string(r.m) + "x" + std::to_string(r.n) + "x" + std::to_string(r.k), f,
            r.grove_s, r.eigen_s);
        flops += f, grove_s += r.grove_s, eigen_s += r.eigen_s;
      }
      // The step's products together: their FLOPs over their summed times.
      row(batch, "all " + std::to_string(rows.size()), "", flops, grove_s, eigen_s);
    }
  }
  benchmark::Shutdown();
  return 0;
}
