// grove::parallel: data-parallel training of the [784, 512, 512, 10] swish MLP (float, adam) at a
// global batch of 1024, and the cost of the pytree allreduce of its gradients.
//
// Run without mpirun (or with `mpirun -np 1`), on one process (built with -DGROVE_MPI=OFF, only
// the local benchmarks exist):
//   train/local/devices:D/threads:T  4 steps per iteration on D LocalDevices of T threads each,
//                                    each device on its shard of 1024 / D examples (D = 1, T = 2:
//                                    one device with 2 Eigen/OpenMP threads)
//   train/single/threads:T           the same step without grove::parallel (value_and_grad_into +
//                                    adam.step), the reference for D = 1
//   allreduce/local/devices:2        psum_inplace of the gradients (a tree of 6 leaves, 669706
//                                    floats) next to the device's bare allreduce_sum of a flat
//                                    buffer of the same size, interleaved in the same loop
//   train/mpi                        the step with 1 MPI rank (the baseline of the run below)
// Run with `mpirun -np 2` (add --allow-run-as-root as root, --oversubscribe on 2 cores):
//   allreduce/mpi                    psum_inplace of the gradients against a bare MPI_Allreduce
//                                    (MPI_IN_PLACE, MPI_FLOAT, MPI_SUM) of a buffer of the same
//                                    size, in turns in the same loop; counters give each one's
//                                    median and the overhead (the median of the ratios of
//                                    neighbouring calls); a line gives the minima too
//   train/mpi                        the step across the ranks, each on its 512 examples
//   overlap/mpi/batch:B              the step on a global batch of B (each rank on B / 2) with
//                                    the gradients' reduction overlapping the backward pass and
//                                    without, in turns in the same loop: each one's median and
//                                    the median of the paired ratios, and (alone_ms) each
//                                    rank's step on its half without communication, the ranks
//                                    started together (compare with compute/batch:B/2, the
//                                    one-rank step on half the batch, alone on the machine)
//   message/mpi/floats:N             a bare MPI_Allreduce of N floats (1 to 4M), each call timed
//                                    between barriers: the latency and bandwidth of the cost
//                                    model in docs/parallel.md (median and minimum, in µs)
// And on one process, for the cost model's compute term:
//   compute/batch:B                  value_and_grad_into + adam.step on B examples, one thread
//                                    (B = 2 to 1024: one device's shard of 1024 over 512 to 1
//                                    devices), CPU time per step; compute/optimizer the adam
//                                    step alone
//
// examples/s counts the global batch: 1024 examples per step. cpu_ms/step (one thread per device)
// is the busiest device's own CPU time per step: on a machine shared with other programs, where
// the wall clock also counts their time, it tells what a step costs on idle cores (the speedup
// of 2 devices over 1 is at most cpu_ms/step(1) / cpu_ms/step(2) + the wait in the collectives,
// which LocalDevices spends mostly asleep). The MPI benchmarks run a fixed
// number of iterations, so that every rank calls the same collectives; only rank 0 reports.
#include <benchmark/benchmark.h>
#include <sched.h>

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <grove/nn.hpp>
#include <grove/parallel.hpp>
#include <grove/parallel/train.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(GROVE_BENCH_MPI)
#include <grove/parallel/mpi.hpp>  // and mpi.h
#endif

namespace nn = grove::nn;
namespace par = grove::parallel;
using Net = std::vector<nn::Dense<float>>;
using Clock = std::chrono::steady_clock;

namespace {

constexpr Eigen::Index kBatch = 1024;
const std::vector<Eigen::Index> kSizes{784, 512, 512, 10};

struct Problem {
  Net params =
      nn::init_network_params<float>(kSizes, grove::random::key(0), nn::lecun_normal<float>);
  Eigen::MatrixXf X = grove::random::uniform<float>(grove::random::key(1), kSizes.front(), kBatch);
  Eigen::VectorXi y = grove::random::randint(grove::random::key(2), kBatch, 0, 10);
};

const Problem& problem() {
  static const Problem p;
  return p;
}

void set_threads(int threads) {
  Eigen::setNbThreads(threads);
#if defined(_OPENMP)
  omp_set_num_threads(threads);
#endif
}

void examples_per_second(benchmark::State& state, double steps) {
  state.counters["examples/s"] =
      benchmark::Counter(steps * static_cast<double>(kBatch), benchmark::Counter::kIsRate);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The threads a rank should use: the cores it is bound to when the launcher bound it (Open MPI
// binds each of 2 ranks to a core), else this machine's cores shared among its ranks.
int threads_per_rank(int local_ranks) {
  const int all = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  cpu_set_t set;
  CPU_ZERO(&set);
  const int mine = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : all;
  return std::max(1, mine < all ? mine : all / std::max(1, local_ranks));
}

// This thread's CPU time: unlike the wall clock, it does not count the time other programs
// take the cores away (this project's machine is shared).
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// --- one process
// -----------------------------------------------------------------------------------

// Steps per iteration inside one run(): the devices stay in their function, as in a training loop.
constexpr int kStepsPerRun = 4;

void train_local(benchmark::State& state) {
  const int devices_n = static_cast<int>(state.range(0)),
            threads = static_cast<int>(state.range(1));
  set_threads(threads);  // Eigen's process-wide setting: each device uses `threads`
  par::LocalDevices devices(devices_n, threads);
  const Problem& p = problem();
  const auto opt = nn::adam(1e-3);
  using OptState = decltype(opt.init(p.params));
  struct Replica {
    Net params;
    OptState state;
    par::StepWorkspace<Net> ws;
  };
  std::vector<Replica> replicas(static_cast<std::size_t>(devices_n));
  devices.run([&](par::LocalDevice& d) {
    auto& r = replicas[static_cast<std::size_t>(d.rank())];
    r.params = p.params;
    par::broadcast_inplace(r.params, d, 0);
    r.state = opt.init(r.params);
    par::train_step(r.params, p.X, p.y, opt, r.state, d, r.ws);  // warm-up
  });
  std::vector<double> cpu_ms(static_cast<std::size_t>(devices_n), 0.0);
  for (auto _ : state) {
    devices.run([&](par::LocalDevice& d) {
      auto& r = replicas[static_cast<std::size_t>(d.rank())];
      const double t0 = thread_cpu_ms();
      for (int s = 0; s < kStepsPerRun; ++s)
        benchmark::DoNotOptimize(par::train_step(r.params, p.X, p.y, opt, r.state, d, r.ws));
      cpu_ms[static_cast<std::size_t>(d.rank())] += thread_cpu_ms() - t0;
    });
  }
  examples_per_second(state, static_cast<double>(state.iterations()) * kStepsPerRun);
  if (threads == 1)  // the busiest device's own CPU time: what a step takes on idle cores
    state.counters["cpu_ms/step"] = *std::max_element(cpu_ms.begin(), cpu_ms.end()) /
                                    static_cast<double>(state.iterations() * kStepsPerRun);
  set_threads(1);
}

void train_single(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  const Problem& p = problem();
  const auto opt = nn::adam(1e-3);
  Net params = p.params, grads;
  auto opt_state = opt.init(params);
  nn::Workspace<float> ws;
  nn::value_and_grad_into(params, p.X, p.y, grads, ws);
  const double t0 = thread_cpu_ms();
  for (auto _ : state) {
    for (int s = 0; s < kStepsPerRun; ++s) {
      benchmark::DoNotOptimize(nn::value_and_grad_into(params, p.X, p.y, grads, ws));
      opt.step(params, grads, opt_state);
    }
  }
  examples_per_second(state, static_cast<double>(state.iterations()) * kStepsPerRun);
  if (state.range(0) == 1)
    state.counters["cpu_ms/step"] =
        (thread_cpu_ms() - t0) / static_cast<double>(state.iterations() * kStepsPerRun);
  set_threads(1);
}

// The gradients' tree psum-ed, and a flat buffer of the same size allreduced, in turns.
void allreduce_local(benchmark::State& state) {
  set_threads(1);
  par::LocalDevices devices(2);
  const Net grads = problem().params;
  const std::size_t count = static_cast<std::size_t>(grove::tree_size(grads));
  std::vector<double> tree_ms, flat_ms, ratio;
  for (auto _ : state) {
    const auto times = devices.run([&](par::LocalDevice& d) {
      Net g = grads;
      std::vector<float> flat(count, 1.0f);
      par::psum_inplace(g, d);  // warm-up
      d.allreduce_sum(std::span<float>(flat));
      std::vector<std::pair<double, double>> t;
      for (int i = 0; i < 20; ++i) {  // 20 doublings: the values stay finite
        d.barrier();
        auto t0 = Clock::now();
        if (i % 2 == 0)
          par::psum_inplace(g, d);
        else
          d.allreduce_sum(std::span<float>(flat));
        const double first = ms_since(t0);
        d.barrier();
        t0 = Clock::now();
        if (i % 2 == 0)
          d.allreduce_sum(std::span<float>(flat));
        else
          par::psum_inplace(g, d);
        const double second = ms_since(t0);
        t.emplace_back(i % 2 == 0 ? first : second, i % 2 == 0 ? second : first);
      }
      return t;
    });
    for (const auto& [tree, flat] : times[0]) {
      tree_ms.push_back(tree);
      flat_ms.push_back(flat);
      ratio.push_back(tree / flat);
    }
  }
  const double tree = median(tree_ms), flat = median(flat_ms), r = median(ratio);
  state.counters["pytree_ms"] = tree;
  state.counters["bare_ms"] = flat;
  state.counters["overhead_%"] = 100 * (r - 1);
  std::printf(
      "allreduce/local/devices:2: psum of the MLP's gradients (%zu floats): median %.3f "
      "ms, the device's bare allreduce_sum of as many floats: median %.3f ms; overhead "
      "(median of %zu paired ratios) %+.1f%%\n",
      count, tree, flat, ratio.size(), 100 * (r - 1));
}

#if defined(GROVE_BENCH_MPI)
// --- across MPI ranks
// ------------------------------------------------------------------------------

void allreduce_mpi(benchmark::State& state) {
  grove::mpi::Communicator world;
  Net grads = problem().params;
  const std::size_t count = static_cast<std::size_t>(grove::tree_size(grads));
  std::vector<float> flat(count, 1.0f);
  auto bare = [&] {
    MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  };
  par::psum_inplace(grads, world);  // warm-up: staging memory, MPI's buffers
  bare();
  std::vector<double> tree_ms, flat_ms, ratio;
  int i = 0;
  for (auto _ : state) {
    if (i % 32 == 0) {  // finite values: sums of sums of ... would overflow to inf
      state.PauseTiming();
      grads = problem().params;
      std::fill(flat.begin(), flat.end(), 1.0f);
      state.ResumeTiming();
    }
    // In turns, each timed between barriers, so that neither waits for the other's stragglers.
    double t_tree = 0, t_flat = 0;
    for (int k = 0; k < 2; ++k) {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto t0 = Clock::now();
      if ((i + k) % 2 == 0)
        par::psum_inplace(grads, world);
      else
        bare();
      const double t = ms_since(t0);
      ((i + k) % 2 == 0 ? t_tree : t_flat) = t;
    }
    ++i;
    tree_ms.push_back(t_tree);
    flat_ms.push_back(t_flat);
    ratio.push_back(t_tree / t_flat);
    state.SetIterationTime(t_tree / 1e3);
  }
  // Medians, and the median of the ratios of neighbouring calls (robust to a machine whose load
  // changes during the run).
  const double tree = median(tree_ms), fl = median(flat_ms), r = median(ratio);
  state.counters["pytree_ms"] = tree;
  state.counters["bare_ms"] = fl;
  state.counters["overhead_%"] = 100 * (r - 1);
  if (world.rank() == 0)
    std::printf(
        "allreduce/mpi/ranks:%d: psum of the MLP's gradients (%zu floats): median %.3f ms "
        "(min %.3f), bare MPI_Allreduce of as many floats: median %.3f ms (min %.3f); "
        "overhead (median of %zu paired ratios) %+.1f%%\n",
        world.size(), count, tree, *std::min_element(tree_ms.begin(), tree_ms.end()), fl,
        *std::min_element(flat_ms.begin(), flat_ms.end()), ratio.size(), 100 * (r - 1));
}

void train_mpi(benchmark::State& state) {
  grove::mpi::Communicator world;
  const int threads = threads_per_rank(world.local_size());
  set_threads(threads);
  const Problem& p = problem();
  const auto opt = nn::adam(1e-3);
  Net params = p.params;
  par::broadcast_inplace(params, world, 0);
  auto opt_state = opt.init(params);
  par::StepWorkspace<Net> ws;
  par::train_step(params, p.X, p.y, opt, opt_state, world, ws);  // warm-up
  const double t0 = thread_cpu_ms();
  for (auto _ : state) {
    for (int s = 0; s < kStepsPerRun; ++s)
      benchmark::DoNotOptimize(par::train_step(params, p.X, p.y, opt, opt_state, world, ws));
  }
  examples_per_second(state, static_cast<double>(state.iterations()) * kStepsPerRun);
  // This rank's CPU time (with MPI's busy polling while it waits for the other ranks).
  std::array<double, 1> cpu{(thread_cpu_ms() - t0) /
                            static_cast<double>(state.iterations() * kStepsPerRun)};
  if (threads == 1) state.counters["cpu_ms/step"] = cpu[0];
  state.counters["ranks"] = world.size();
  state.counters["threads/rank"] = threads;
  set_threads(1);
}

// The step with the gradients' reduction overlapping the backward pass (world.set_overlap(true))
// and without, in turns in the same loop on two copies of the training state, each step started
// at a barrier: each one's median step time and the median of the paired ratios.
void overlap_mpi(benchmark::State& state) {
  grove::mpi::Communicator world;
  const int threads = threads_per_rank(world.local_size());
  set_threads(threads);
  const Problem& p = problem();
  const Eigen::Index b = state.range(0);
  const Eigen::MatrixXf X = p.X.leftCols(b);
  const Eigen::VectorXi y = p.y.head(b);
  const auto opt = nn::adam(1e-3);
  struct Replica {
    Net params;
    decltype(opt.init(std::declval<Net&>())) state;
    par::StepWorkspace<Net> ws;
  };
  Replica on{p.params, {}, {}}, off{p.params, {}, {}};
  for (Replica* r : {&on, &off}) {
    par::broadcast_inplace(r->params, world, 0);
    r->state = opt.init(r->params);
  }
  auto step = [&](Replica& r, bool overlap) {
    world.set_overlap(overlap);
    world.barrier();
    const auto t0 = Clock::now();
    benchmark::DoNotOptimize(par::train_step(r.params, X, y, opt, r.state, world, r.ws));
    return ms_since(t0);
  };
  // Each rank's step on its shard without grove::parallel, the ranks started together: what the
  // step would take if the reduction cost nothing.
  Replica alone{p.params, opt.init(p.params), {}};
  const par::Shard mine = par::shard(b, world);
  const Eigen::MatrixXf X_mine = X.middleCols(mine.begin, mine.size);
  const Eigen::VectorXi y_mine = y.segment(mine.begin, mine.size);
  auto step_alone = [&] {
    world.barrier();
    const auto t0 = Clock::now();
    benchmark::DoNotOptimize(
        nn::value_and_grad_into(alone.params, X_mine, y_mine, alone.ws.grads, alone.ws.ws));
    opt.step(alone.params, alone.ws.grads, alone.state);
    return ms_since(t0);
  };
  step(on, true), step(off, false), step_alone();  // warm-up
  std::vector<double> on_ms, off_ms, alone_ms, ratio;
  for (auto _ : state) {
    for (int s = 0; s < kStepsPerRun; ++s) {
      on_ms.push_back(step(on, true));
      off_ms.push_back(step(off, false));
      alone_ms.push_back(step_alone());
      ratio.push_back(on_ms.back() / off_ms.back());
    }
    state.SetIterationTime((on_ms.back() + off_ms.back()) / 1e3);
  }
  state.counters["overlap_ms"] = median(on_ms);
  state.counters["blocking_ms"] = median(off_ms);
  state.counters["alone_ms"] = median(alone_ms);
  state.counters["ratio"] = median(ratio);
  state.counters["threads/rank"] = threads;
  world.set_overlap(false);
  set_threads(1);
}

// A bare MPI_Allreduce of N floats, each call between barriers; the median and minimum.
void message_mpi(benchmark::State& state) {
  grove::mpi::Communicator world;
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<float> buf(n, 1.0f);
  auto call = [&] {
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  };
  call();  // warm-up
  std::vector<double> us;
  for (auto _ : state) {
    std::fill(buf.begin(), buf.end(), 1.0f);
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    call();
    const double t = ms_since(t0) * 1e3;
    us.push_back(t);
    state.SetIterationTime(t / 1e6);
  }
  state.counters["median_us"] = median(us);
  state.counters["min_us"] = *std::min_element(us.begin(), us.end());
  state.counters["bytes"] = static_cast<double>(n * sizeof(float));
}

#endif  // GROVE_BENCH_MPI

// One device's step on B examples (value_and_grad_into + adam.step), one thread, CPU time.
void compute_batch(benchmark::State& state) {
  set_threads(1);
  const Problem& p = problem();
  const Eigen::Index b = state.range(0);
  const Eigen::MatrixXf X = p.X.leftCols(b);
  const Eigen::VectorXi y = p.y.head(b);
  const auto opt = nn::adam(1e-3);
  Net params = p.params, grads;
  auto opt_state = opt.init(params);
  nn::Workspace<float> ws;
  nn::value_and_grad_into(params, X, y, grads, ws);
  const double t0 = thread_cpu_ms();
  for (auto _ : state) {
    benchmark::DoNotOptimize(nn::value_and_grad_into(params, X, y, grads, ws));
    opt.step(params, grads, opt_state);
  }
  state.counters["cpu_ms/step"] = (thread_cpu_ms() - t0) / static_cast<double>(state.iterations());
}

// The adam step alone, on the MLP's 669706 parameters: the part of a step that does not shrink
// with the shard.
void compute_optimizer(benchmark::State& state) {
  set_threads(1);
  const Problem& p = problem();
  const auto opt = nn::adam(1e-3);
  Net params = p.params, grads = p.params;
  auto opt_state = opt.init(params);
  const double t0 = thread_cpu_ms();
  for (auto _ : state) {
    opt.step(params, grads, opt_state);
    benchmark::ClobberMemory();
  }
  state.counters["cpu_ms/step"] = (thread_cpu_ms() - t0) / static_cast<double>(state.iterations());
}

class Silent : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
#if defined(GROVE_BENCH_MPI)
  grove::mpi::Environment env(argc, argv);
  grove::mpi::Communicator world;
  const int ranks = world.size(), rank = world.rank();
#else
  const int ranks = 1, rank = 0;
#endif
  benchmark::Initialize(&argc, argv);
  if (ranks == 1) {
    for (auto [d, t] : {std::pair{1, 1}, {2, 1}, {1, 2}})
      benchmark::RegisterBenchmark("train/local", train_local)
          ->ArgNames({"devices", "threads"})
          ->Args({d, t})
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    for (int t : {1, 2})
      benchmark::RegisterBenchmark("train/single", train_single)
          ->ArgName("threads")
          ->Arg(t)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("allreduce/local/devices:2", allreduce_local)
        ->Iterations(5)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    for (int b : {2, 16, 32, 64, 128, 256, 512, 1024})
      benchmark::RegisterBenchmark("compute", compute_batch)
          ->ArgName("batch")
          ->Arg(b)
          ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("compute/optimizer", compute_optimizer)
        ->Unit(benchmark::kMillisecond);
  }
#if defined(GROVE_BENCH_MPI)
  if (ranks > 1) {
    // A fixed number of iterations: every rank must make the same calls.
    benchmark::RegisterBenchmark("allreduce/mpi", allreduce_mpi)
        ->Iterations(200)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("overlap/mpi", overlap_mpi)
        ->ArgName("batch")
        ->Arg(128)
        ->Arg(1024)
        ->Iterations(10)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    for (long n : {1L, 64L, 1024L, 16384L, 262144L, 669706L, 4194304L})
      benchmark::RegisterBenchmark("message/mpi", message_mpi)
          ->ArgName("floats")
          ->Arg(n)
          ->Iterations(n > 100000 ? 40 : 400)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("train/mpi", train_mpi)
      ->Iterations(8)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
#endif
  if (rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    Silent silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  benchmark::Shutdown();
}
