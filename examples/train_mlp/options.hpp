// examples/train_mlp/options.hpp: the run's settings (Options, with --lr's default per optimizer),
// the per-epoch metrics and their CSV file, the text helpers, and the headers and namespace
// aliases every part uses. Part of train_mlp (main.cpp includes it; one translation unit).
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <grove/data.hpp>
#include <grove/data/idx.hpp>
#include <grove/io/atomic_write.hpp>
#include <grove/io/checkpoint.hpp>
#include <grove/nn.hpp>
#include <grove/optim.hpp>
#include <grove/parallel.hpp>
#include <grove/parallel/train.hpp>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#if defined(GROVE_TRAIN_MLP_MPI)
#include <grove/parallel/global_device.hpp>
#include <grove/parallel/mpi.hpp>
#endif

namespace nn = grove::nn;
namespace optim = grove::optim;
namespace io = grove::io;
namespace par = grove::parallel;
namespace fs = std::filesystem;

namespace {

constexpr const char* kDefaultData = "/usr/share/datasets/fashion-mnist";
constexpr const char* kPackage = "dataset-fashion-mnist";

struct Options {
  std::string data = kDefaultData;
  std::vector<Eigen::Index> layers{784, 512, 512, 10};
  std::string activation = "swish";
  double dropout = 0;
  bool layer_norm = false;
  bool residual = false;
  std::string precision = "f32";  // or "bf16": nn::precision_policy::mixed_bf16()
  int epochs = 15;
  int batch_size = 128;
  std::optional<double> lr;
  double lr_decay = 0.9;
  bool standardize = true;
  bool prefetch = false;  // gather the next batch on a thread of its own (grove::data)
  std::string optimizer = "adam";
  std::optional<double> weight_decay;  // adamw only; optax's default when not given
  std::optional<double> clip_norm;
  std::string schedule = "exponential";
  std::int64_t warmup_steps = 0;
  std::uint64_t seed = 0;
  int threads = 0;
  int devices = 1;
  std::string metrics;
  std::string plot;
  std::string save;
  std::string resume;
};

double default_lr(const std::string& optimizer) {
  if (optimizer == "adam" || optimizer == "adamw") return 1e-3;
  if (optimizer == "momentum") return 0.03;
  return 0.3;  // sgd
}

struct EpochMetrics {
  int epoch;
  double train_loss, test_loss, test_accuracy;
  std::optional<double> seconds;  // empty for the epochs a resumed run read from its checkpoint
};

// Writes the CSV atomically (grove::io::write_atomically), so that a reader never sees a
// half-written file.
void write_metrics(const fs::path& file, const std::vector<EpochMetrics>& rows) {
  std::string csv = "epoch,train_loss,test_loss,test_accuracy,epoch_seconds\n";
  char line[160];
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "%d,%.6f,%.6f,%.6f,", r.epoch, r.train_loss, r.test_loss,
                  r.test_accuracy);
    csv += line;
    if (r.seconds) {
      std::snprintf(line, sizeof line, "%.3f", *r.seconds);
      csv += line;
    }
    csv += '\n';
  }
  grove::io::write_atomically(file, csv);
}

std::string layers_text(const std::vector<Eigen::Index>& layers) {
  std::string s;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (i) s += '-';
    s += std::to_string(layers[i]);
  }
  return s;
}

std::string exact(double x) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", x);
  return text;
}

}  // namespace
