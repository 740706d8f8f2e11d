// grove::data's cost, measured against what a program would do without it:
//
//   data_epoch/examples:N   epochs of the main job's training (train_mlp's defaults: the
//                           [784, 512, 512, 10] swish MLP, adam, batch 128, nn::train_step) on N
//                           examples of 784 floats, three ways in the same iterations, in rotating
//                           order so that a shared machine's load weighs on all three alike:
//                             precomputed  the epoch's batches gathered before the clock starts:
//                                          the steps alone
//                             batches      data::batches, each batch gathered when the loop
//                                          reaches it (the epoch's permutation included)
//                             prefetch     the same with batch_options::prefetch
//                           counters: each one's ms per epoch, and batches/precomputed and
//                           prefetch/precomputed (the target: at most 1.02)
//   npy_read/MB:100         a 100 MB float32 .npy read by data::load_npy<float>, and the same file
//                           read by `dd of=/dev/null bs=1M` in the same iteration, each from the
//                           disk (the file's pages dropped from the page cache first, with
//                           posix_fadvise) and then from the page cache; counters: MB/s of each
//                           from the disk and grove/dd, their speed ratio (the target: at least
//                           0.5), and the cached figures (where dd's 1 MiB buffer stays in cache
//                           while load_npy fills a new 100 MB matrix, page by page)
//
// Threads: Eigen's and OpenMP's defaults, as train_mlp (every core).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <Eigen/Core>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <grove/data.hpp>
#include <grove/nn.hpp>
#include <string>
#include <vector>

namespace data = grove::data;
namespace nn = grove::nn;

namespace {

using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

void data_epoch(benchmark::State& st) {
  const Eigen::Index n = st.range(0), batch = 128;
  data::Dataset<float> train{grove::random::uniform(grove::random::key(1), 784, n),
                             grove::random::randint<int>(grove::random::key(2), n, 0, 10)};
  const auto model = nn::sequential(nn::dense(784, 512), nn::swish, nn::dense(512, 512), nn::swish,
                                    nn::dense(512, 10));
  auto params = nn::init<float>(model, grove::random::key(0));
  const auto opt = nn::adam(1e-3);
  auto state = opt.init(params);
  nn::StepWorkspace<decltype(params)> work;
  const auto key = grove::random::key(3);

  double seconds[3] = {0, 0, 0};
  long epochs = 0;
  std::vector<Eigen::MatrixXf> xs;
  std::vector<Eigen::VectorXi> ys;
  for (auto _ : st) {
    const auto epoch_key = data::epoch_key(key, epochs);
    // The precomputed epoch: the same batches, gathered before the clock starts.
    st.PauseTiming();
    xs.clear();
    ys.clear();
    for (const auto& b : data::batches(train, batch, epoch_key)) {
      xs.emplace_back(b.inputs);
      ys.emplace_back(b.targets);
    }
    st.ResumeTiming();
    for (int k = 0; k < 3; ++k) {
      const int path = static_cast<int>((k + epochs) % 3);
      const auto t0 = clock_type::now();
      float loss = 0;
      if (path == 0) {
        for (std::size_t i = 0; i < xs.size(); ++i)
          loss += nn::train_step(model, params, xs[i], ys[i], nn::softmax_cross_entropy, opt, state,
                                 work);
      } else {
        for (const auto& b : data::batches(train, batch, epoch_key, {.prefetch = path == 2}))
          loss += nn::train_step(model, params, b.inputs, b.targets, nn::softmax_cross_entropy, opt,
                                 state, work);
      }
      benchmark::DoNotOptimize(loss);
      seconds[path] += seconds_since(t0);
    }
    ++epochs;
  }
  const double e = static_cast<double>(epochs);
  st.counters["precomputed_ms"] = 1e3 * seconds[0] / e;
  st.counters["batches_ms"] = 1e3 * seconds[1] / e;
  st.counters["prefetch_ms"] = 1e3 * seconds[2] / e;
  st.counters["batches/precomputed"] = seconds[1] / seconds[0];
  st.counters["prefetch/precomputed"] = seconds[2] / seconds[0];
}
BENCHMARK(data_epoch)
    ->ArgName("examples")
    ->Arg(60000)
    ->Arg(12800)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(10)
    ->UseRealTime();

// The seconds `dd` reports for reading `file` (its own measure, without its start-up).
double dd_seconds(const std::filesystem::path& file) {
  const std::string command = "dd if='" + file.string() + "' of=/dev/null bs=1M 2>&1";
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return -1;
  char line[512];
  double s = -1;
  while (std::fgets(line, sizeof line, p)) {
    // "104857728 bytes (105 MB, 100 MiB) copied, 0.0213 s, 4.9 GB/s"
    const std::string text = line;
    const auto copied = text.find("copied, ");
    if (copied != std::string::npos) s = std::stod(text.substr(copied + 8));
  }
  ::pclose(p);
  return s;
}

// Drops `file`'s pages from the page cache (they are clean: the file was written and synced),
// so that the next read comes from the disk.
void evict(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

void npy_read(benchmark::State& st) {
  const auto file = std::filesystem::temp_directory_path() /
                    ("grove_bench_npy_" + std::to_string(::getpid()) + ".npy");
  const Eigen::Index cols = st.range(0) * 1000000 / (4 * 784);
  data::save_npy(file, Eigen::MatrixXf(grove::random::uniform(grove::random::key(0), 784, cols)));
  const double mb = static_cast<double>(std::filesystem::file_size(file)) / 1e6;
  // Each iteration reads the file four times: from the disk (its pages evicted first) and from
  // the page cache, with dd and with load_npy.
  double grove_cold = 0, dd_cold = 0, grove_warm = 0, dd_warm = 0;
  auto load = [&] {
    const auto t0 = clock_type::now();
    const Eigen::MatrixXf m = data::load_npy<float>(file);
    benchmark::DoNotOptimize(m.data());
    return seconds_since(t0);
  };
  for (auto _ : st) {
    evict(file);
    const double d = dd_seconds(file);
    const double dw = dd_seconds(file);
    if (d < 0 || dw < 0) {
      st.SkipWithError("dd did not report its time");
      break;
    }
    dd_cold += d;
    dd_warm += dw;
    evict(file);
    const double g = load();
    grove_cold += g;
    grove_warm += load();
    st.SetIterationTime(g);
  }
  std::filesystem::remove(file);
  const double it = static_cast<double>(st.iterations());
  st.counters["grove_MBps"] = mb * it / grove_cold;
  st.counters["dd_MBps"] = mb * it / dd_cold;
  st.counters["grove/dd"] = dd_cold / grove_cold;
  st.counters["cached_grove_MBps"] = mb * it / grove_warm;
  st.counters["cached_dd_MBps"] = mb * it / dd_warm;
}
BENCHMARK(npy_read)->ArgName("MB")->Arg(100)->Unit(benchmark::kMillisecond)->UseManualTime();

}  // namespace

BENCHMARK_MAIN();
