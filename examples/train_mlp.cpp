// train_mlp: trains an MLP (swish by default) on Fashion-MNIST the JAX way, with grove.
//
//   train_mlp                                  # 784-512-512-10, adam, 15 epochs
//   train_mlp --optimizer sgd --lr 0.1 --epochs 20 --metrics run.csv
//   train_mlp --epochs 5 --save run.safetensors     # then: --epochs 15 --resume run.safetensors
//   train_mlp --plot run.png                        # the training curves, drawn after training
//   train_mlp --devices 2 --batch-size 1024         # data-parallel over 2 local devices
//   mpirun -np 2 train_mlp --batch-size 1024        # data-parallel over 2 MPI processes
//   train_mlp --activation gelu --layer-norm --residual --dropout 0.1   # another model
//
// The model is a grove::nn::sequential of layers, its parameters a pytree initialised from a split
// key; each epoch draws its mini-batches with grove::random::permutation; each step is
// nn::train_step (value_and_grad's hand-written VJPs into a reused workspace, then an
// optax-style update applied in place). With
// several devices or MPI ranks, each takes its shard of every batch and one allreduce averages
// the gradients (grove::parallel::train_step). The same --seed and --threads give the same numbers
// run after run, and a run resumed from a checkpoint gives the bits of one never interrupted.
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <Eigen/Core>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
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
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(GROVE_USE_OPENBLAS)
extern "C" void openblas_set_num_threads(int);
#endif
#if defined(GROVE_TRAIN_MLP_MPI)
#include <grove/parallel/mpi.hpp>
#endif

#include "progress.hpp"

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

// --- checkpoints ---------------------------------------------------------------------------------
//
// A checkpoint is a grove::nn::train_state {params, opt_state, key, epoch} whose metadata records
// the settings that determine the run (a resumed run must use the same ones) and the metrics of
// the epochs done, so that a resumed run's --metrics file covers the whole run. Wall times are
// not part of a run's state: they are left out, so that a resumed run writes the same bytes as
// one never interrupted.

// The settings a resumed run must share with the run that saved the checkpoint, as text.
io::metadata run_settings(const Options& o, double lr) {
  return {{"train_mlp.layers", layers_text(o.layers)},
          {"train_mlp.activation", o.activation},
          {"train_mlp.dropout", exact(o.dropout)},
          {"train_mlp.layer-norm", o.layer_norm ? "true" : "false"},
          {"train_mlp.residual", o.residual ? "true" : "false"},
          {"train_mlp.precision", o.precision},
          {"train_mlp.optimizer", o.optimizer},
          {"train_mlp.lr", exact(lr)},
          {"train_mlp.lr_decay", exact(o.lr_decay)},
          {"train_mlp.schedule", o.schedule},
          {"train_mlp.warmup_steps", std::to_string(o.warmup_steps)},
          {"train_mlp.weight_decay", o.weight_decay ? exact(*o.weight_decay) : "none"},
          {"train_mlp.clip_norm", o.clip_norm ? exact(*o.clip_norm) : "none"},
          {"train_mlp.batch_size", std::to_string(o.batch_size)},
          {"train_mlp.seed", std::to_string(o.seed)},
          {"train_mlp.standardize", o.standardize ? "true" : "false"}};
}

constexpr const char* kHistoryKey = "train_mlp.history";

std::string history_text(const std::vector<EpochMetrics>& rows) {
  std::string s;
  for (const auto& r : rows)
    s += std::to_string(r.epoch) + "," + exact(r.train_loss) + "," + exact(r.test_loss) + "," +
         exact(r.test_accuracy) + "\n";
  return s;
}

// One line of the history, "EPOCH,TRAIN_LOSS,TEST_LOSS,TEST_ACCURACY": every field whole (an
// epoch that overflows an int is malformed, not wrapped) and every number finite.
bool parse_history_line(std::string_view line, EpochMetrics& r) {
  auto field = [&](auto& out) {
    const auto comma = std::min(line.find(','), line.size());
    const auto [end, ec] = std::from_chars(line.data(), line.data() + comma, out);
    const bool ok = ec == std::errc() && end == line.data() + comma;
    line.remove_prefix(std::min(comma + 1, line.size()));
    return ok && comma > 0;
  };
  const bool ok = field(r.epoch) && field(r.train_loss) && field(r.test_loss) &&
                  field(r.test_accuracy) && line.empty();
  return ok && std::isfinite(r.train_loss) && std::isfinite(r.test_loss) &&
         std::isfinite(r.test_accuracy);
}

std::vector<EpochMetrics> parse_history(const std::string& file, const std::string& text,
                                        std::int64_t epochs) {
  std::vector<EpochMetrics> rows;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    EpochMetrics r{};
    if (!parse_history_line(line, r) || r.epoch != static_cast<int>(rows.size()) + 1 ||
        static_cast<std::int64_t>(rows.size()) >= epochs)
      throw io::format_error("train_mlp --resume", file,
                             std::string(kHistoryKey) + " has a malformed line `" +
                                 line.substr(0, 64) + (line.size() > 64 ? "...`" : "`"));
    rows.push_back(r);
  }
  if (static_cast<std::int64_t>(rows.size()) != epochs)
    throw io::format_error("train_mlp --resume", file,
                           std::string(kHistoryKey) + " has " + std::to_string(rows.size()) +
                               " epochs but the checkpoint is at epoch " + std::to_string(epochs));
  return rows;
}

// Refuses a checkpoint saved with other settings, naming each one that differs.
void check_settings(const std::string& file, const io::metadata& saved,
                    const io::metadata& wanted) {
  std::string differences;
  for (const auto& [key, value] : wanted) {
    const auto it = saved.find(key);
    // The flag as it is spelled: train_mlp.batch_size is --batch-size.
    std::string flag = "--" + key.substr(key.find('.') + 1);
    std::replace(flag.begin(), flag.end(), '_', '-');
    // (Checkpoints from before --precision existed computed in float32.)
    if (it == saved.end() && key == "train_mlp.precision" && value == "f32") continue;
    if (it == saved.end())
      differences += "\n  " + flag + ": not recorded (the file was not written by train_mlp)";
    else if (it->second != value)
      differences += "\n  " + flag + ": " + it->second + " in the checkpoint, " + value + " now";
  }
  if (!differences.empty())
    throw std::invalid_argument("--resume " + file +
                                ": the checkpoint was saved with other settings; resume with "
                                "the same ones:" +
                                differences);
}

// --- the model -----------------------------------------------------------------------------------
//
// One type for every choice of flags: each hidden layer is a block [layer_norm] dense activation
// [dropout], the blocks are a run-time sequence of plain blocks followed by one of residual blocks
// (x + block(x), --residual), and a dense layer gives the logits. The optional layer norm is a
// sequence of zero or one; a dropout of rate 0 is the identity. Without --layer-norm, --residual
// and --dropout the model is a chain of dense layers and activations, which grove runs on its
// fused engine (the same passes as the walk-through's MLP).

using Block =
    nn::Sequential<nn::Stack<nn::LayerNorm>, nn::DenseLayer, nn::AnyActivation, nn::Dropout>;
using Net = nn::Sequential<nn::Stack<Block>, nn::Stack<nn::Residual<Block>>, nn::DenseLayer>;
// Under --precision: the same network and parameters, its products in float32 or from inputs
// rounded to bfloat16.
using Model = nn::WithPolicy<Net>;
using Params = nn::params_t<Model, float>;

nn::precision_policy policy_of(const Options& o) {
  return o.precision == "bf16" ? nn::precision_policy::mixed_bf16() : nn::precision_policy::full();
}

Block hidden_block(const Options& o, Eigen::Index in, Eigen::Index out, bool first) {
  std::vector<nn::LayerNorm> norm;
  if (o.layer_norm && !first) norm.push_back(nn::layer_norm(in));
  return nn::sequential(nn::sequential(norm), nn::dense(in, out),
                        nn::activation_named(o.activation.c_str()), nn::dropout(o.dropout));
}

Model build_model(const Options& o) {
  std::vector<Block> plain;
  std::vector<nn::Residual<Block>> residual;
  for (std::size_t l = 0; l + 2 < o.layers.size(); ++l) {
    const Eigen::Index in = o.layers[l], out = o.layers[l + 1];
    if (o.residual && l > 0)
      residual.push_back(nn::residual(hidden_block(o, in, out, false)));
    else
      plain.push_back(hidden_block(o, in, out, l == 0));
  }
  return nn::with_policy(nn::sequential(nn::sequential(plain), nn::sequential(residual),
                                        nn::dense(o.layers[o.layers.size() - 2], o.layers.back())),
                         policy_of(o));
}

// The parameters: nn::init's, with every dense layer's weights from the walk-through's
// init_network_params (split(key, layers)[i] for dense layer i, lecun_normal), so that the
// default model starts from the numbers train_mlp always started from.
Params initial_params(const Model& model, const Options& o, const grove::random::Key& key) {
  Params params = nn::init<float>(model, key);
  auto dense = nn::init_network_params(o.layers, key, nn::lecun_normal<float>);
  std::size_t next = 0;
  for (auto& block : std::get<0>(params)) std::get<1>(block) = std::move(dense[next++]);
  for (auto& block : std::get<1>(params)) std::get<1>(block) = std::move(dense[next++]);
  std::get<2>(params) = std::move(dense[next]);
  return params;
}

std::string model_text(const Options& o) {
  std::string s = layers_text(o.layers) + " (" + o.activation;
  if (o.layer_norm) s += ", layer norm";
  if (o.residual) s += ", residual";
  if (o.precision == "bf16") s += ", bf16 products";
  if (o.dropout > 0) {
    char rate[32];
    std::snprintf(rate, sizeof rate, "%g", o.dropout);
    s += ", dropout " + std::string(rate);
  }
  return s + ")";
}

// --- training ------------------------------------------------------------------------------------

// The group of devices a run trains on: this process alone (grove::parallel::SingleDevice),
// LocalDevices' devices or MPI ranks. Every device runs the same loop on its own copy of the
// parameters, grove::parallel::train_step shards each batch and averages the gradients (on a
// single device it is nn::train_step, plain SGD fused into the backward pass), and the device of
// rank 0 (the leader) evaluates, prints, writes the metrics and saves the checkpoints.

// What every device starts from: the parameters and optimizer state (fresh, or read from
// --resume), the epochs already done and their metrics.
template <class State>
struct Start {
  Params params;
  State state;
  int epochs_done = 0;
  std::vector<EpochMetrics> history;
};

struct Setup {
  const Options& options;
  const Model& model;
  const grove::data::mnist_splits<float>& data;
  std::string description;                // optimizer and learning rate, for the first line
  std::string devices;                    // "1 thread", "2 local devices of 1 thread", ...
  io::metadata settings;                  // what a checkpoint records (run_settings)
  grove::random::Key init_key, data_key;  // split(key(--seed))
  grove::random::Key dropout_key;         // fold_in(key(--seed), 2): the masks' keys' root
  bool progress_bar;                      // stdout is a terminal (and not mpirun's pseudo-one)
};

// --- the optimizer -------------------------------------------------------------------------------

// The learning rate of the run: --schedule after --warmup-steps of linear warmup from 0. The
// defaults (exponential, no warmup) are the JAX walk-through's lr * decay^(step / steps_per_epoch).
optim::Schedule make_schedule(const Options& o, double lr, double steps_per_epoch,
                              std::int64_t total_steps) {
  if (o.schedule == "cosine")
    return optim::warmup_cosine_decay_schedule(0.0, lr, o.warmup_steps, total_steps, 0.0);
  optim::Schedule main = o.schedule == "constant" || o.lr_decay == 1.0
                             ? optim::constant_schedule(lr)
                             : optim::exponential_decay(lr, steps_per_epoch, o.lr_decay);
  if (o.warmup_steps == 0) return main;
  return optim::join_schedules({optim::linear_schedule(0.0, lr, o.warmup_steps), std::move(main)},
                               {o.warmup_steps});
}

// The first line's account of the optimizer, e.g. "adamw lr 0.001 cosine, warmup 500, weight decay
// 0.0001, clip norm 1".
std::string describe_optimizer(const Options& o, double lr) {
  char text[160];
  std::snprintf(text, sizeof text, "%s lr %g", o.optimizer.c_str(), lr);
  std::string d = text;
  if (o.schedule == "exponential" && o.lr_decay != 1.0) {
    std::snprintf(text, sizeof text, " * %g^epoch", o.lr_decay);
    d += text;
  } else if (o.schedule == "cosine") {
    d += " cosine to 0";
  }
  if (o.warmup_steps > 0) d += ", warmup " + std::to_string(o.warmup_steps) + " steps";
  if (o.optimizer == "adamw") {
    std::snprintf(text, sizeof text, ", weight decay %g", o.weight_decay.value_or(1e-4));
    d += text;
  }
  if (o.clip_norm) {
    std::snprintf(text, sizeof text, ", clip norm %g", *o.clip_norm);
    d += text;
  }
  return d;
}

// Calls run(optimizer) with the grove::optim transformation the flags describe.
template <class Run>
int with_optimizer(const Options& o, const optim::Schedule& schedule, Run&& run) {
  auto clipped = [&](auto tx) {
    if (o.clip_norm) return run(optim::chain(optim::clip_by_global_norm(*o.clip_norm), tx));
    return run(tx);
  };
  if (o.optimizer == "sgd") return clipped(optim::sgd(schedule));
  if (o.optimizer == "momentum") return clipped(optim::sgd(schedule, 0.9));
  if (o.optimizer == "adam") return clipped(optim::adam(schedule));
  // Weight decay on the weight matrices only: biases and layer-norm parameters are vectors.
  auto matrices = [](const auto& params) {
    return grove::tree_map([](const auto& leaf) { return leaf.cols() > 1; }, params);
  };
  return clipped(
      optim::adamw(schedule, 0.9, 0.999, 1e-8, 0.0, o.weight_decay.value_or(1e-4), matrices));
}

// Calls f(count) for every step count in an optimizer state: scale_by_learning_rate's (which every
// optimizer above ends with) and those of transformations that count for themselves (adam's bias
// correction), in the chains' tuples and the masked wrapper's inner state.
template <class State, class F>
void for_each_count(const State& state, F&& f) {
  if constexpr (requires { std::tuple_size<State>::value; }) {
    std::apply([&](const auto&... inner) { (for_each_count(inner, f), ...); }, state);
  } else {
    if constexpr (requires { state.count; }) f(static_cast<std::int64_t>(state.count));
    if constexpr (requires { state.inner_state; }) for_each_count(state.inner_state, f);
  }
}

// What resuming relies on, beyond the settings and the structure: train_mlp saves after each
// epoch, so a checkpoint of its own is at an epoch in [1, --epochs], and its optimizer has taken
// exactly that many epochs of steps (the learning-rate schedule and Adam's bias correction read
// the count). A crafted file that says otherwise is refused, not trained from.
template <class State>
void check_resumed_state(const Options& o, Eigen::Index examples, std::int64_t epoch,
                         const State& state) {
  if (epoch < 1)
    throw io::format_error("train_mlp --resume", o.resume,
                           "the checkpoint is at epoch " + std::to_string(epoch) +
                               "; train_mlp saves after each epoch, so its checkpoints are at "
                               "epoch 1 or later");
  if (epoch > o.epochs)
    throw std::invalid_argument("--resume " + o.resume + ": the checkpoint is at epoch " +
                                std::to_string(epoch) + ", beyond --epochs " +
                                std::to_string(o.epochs));
  const Eigen::Index batch = std::min<Eigen::Index>(o.batch_size, examples);
  const std::int64_t steps = (examples + batch - 1) / batch;
  for_each_count(state, [&](std::int64_t count) {
    if (count != epoch * steps)
      throw io::format_error("train_mlp --resume", o.resume,
                             "the optimizer's step count is " + std::to_string(count) + ", but " +
                                 std::to_string(epoch) + " epochs of " + std::to_string(steps) +
                                 " steps make " + std::to_string(epoch * steps));
  });
}

// Epochs start.epochs_done + 1 .. --epochs on this device. Returns the exit status (the same on
// every device: they all see the same losses).
template <class Opt, class State, class Comm>
int train_epochs(const Setup& setup, const Opt& optimizer, Start<State> start, Comm& comm) {
  const Options& o = setup.options;
  const auto& [train_set, test_set] = setup.data;
  const bool leader = comm.rank() == 0;
  const Eigen::Index n = train_set.size();
  const Eigen::Index batch = std::min<Eigen::Index>(o.batch_size, n);
  const Eigen::Index steps = (n + batch - 1) / batch;
  const bool tty = leader && setup.progress_bar;

  Params& params = start.params;
  State& state = start.state;
  std::vector<EpochMetrics>& history = start.history;
  par::StepWorkspace<Params> work;          // the gradients and nn::Workspace every step reuses
  par::broadcast_inplace(params, comm, 0);  // every replica starts from rank 0's parameters

  double total_seconds = 0;
  for (int epoch = start.epochs_done + 1; epoch <= o.epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    grove_examples::ProgressBar bar(
        stdout, "epoch " + std::to_string(epoch) + "/" + std::to_string(o.epochs),
        static_cast<long>(steps), static_cast<long>(batch));
    double loss_sum = 0;
    // Every device gathers only its own shard of each batch's columns.
    for (const auto& b :
         grove::data::batches(train_set, batch, grove::data::epoch_key(setup.data_key, epoch),
                              {.shard_index = static_cast<int>(comm.rank()),
                              .shard_count = static_cast<int>(comm.size()),
                              .prefetch = o.prefetch})) {
      const Eigen::Index step = b.index;
      // Dropout's key for this step (none without dropout).
      const grove::random::Key step_key = grove::random::fold_in(
          grove::random::fold_in(setup.dropout_key, static_cast<std::uint32_t>(epoch)),
          static_cast<std::uint32_t>(step));
      const grove::random::Key* key = o.dropout > 0 ? &step_key : nullptr;
      const float loss =
          par::train_step_on_shard(setup.model, params, b.inputs, b.targets,
                                   nn::softmax_cross_entropy, key, optimizer, state, comm, work);
      loss_sum += static_cast<double>(loss) * static_cast<double>(b.size);
      if (tty)
        bar.update(static_cast<long>(step + 1),
                   loss_sum / static_cast<double>(std::min(n, (step + 1) * batch)));
    }
    const double train_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double train_loss = loss_sum / static_cast<double>(n);
    if (!std::isfinite(train_loss)) {
      if (tty) bar.clear();
      if (leader) std::fprintf(stderr, "train_mlp: the loss diverged (try a smaller --lr)\n");
      return 1;
    }
    if (!leader) continue;  // the others go on to the next epoch and wait there for the leader

    const auto [test_loss, test_accuracy] =
        nn::evaluate(setup.model, params, test_set.inputs, test_set.targets, work.ws);
    if (!std::isfinite(test_loss) || !std::isfinite(test_accuracy)) {
      // The last update made the loss non-finite: nothing of this epoch is printed or written.
      // Thrown, so that under MPI the ranks waiting for this one are ended too.
      if (tty) bar.clear();
      throw std::runtime_error("the test loss is " + exact(test_loss) + " after epoch " +
                               std::to_string(epoch) + ": the loss diverged (try a smaller --lr)");
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    total_seconds += seconds;
    if (tty) bar.clear();
    std::printf(
        "epoch %2d/%d  train loss %.4f  test loss %.4f  test accuracy %.2f%%  %.1f s (%.0f ex/s)\n",
        epoch, o.epochs, train_loss, test_loss, 100 * test_accuracy, seconds,
        static_cast<double>(n) / train_seconds);
    std::fflush(stdout);
    history.push_back({epoch, train_loss, test_loss, test_accuracy, seconds});
    if (!o.metrics.empty()) write_metrics(o.metrics, history);
    if (!o.save.empty()) {
      io::metadata meta = setup.settings;
      meta[kHistoryKey] = history_text(history);
      io::save(o.save, nn::train_state<Params, State>{params, state, setup.data_key, epoch}, meta);
    }
  }
  if (leader && o.epochs > start.epochs_done)
    std::printf("final test accuracy %.2f%% after %d epoch%s in %.1f s\n",
                100 * history.back().test_accuracy, o.epochs, o.epochs == 1 ? "" : "s",
                total_seconds);
  return 0;
}

// Where the run trains: one process, local devices or MPI ranks.
struct Placement {
  int devices = 1;             // local devices (threads as devices) in this process
  int threads_per_device = 1;  // OpenMP / Eigen threads of each
#if defined(GROVE_TRAIN_MLP_MPI)
  grove::mpi::Communicator* mpi = nullptr;  // set when launched by mpirun with several ranks
#endif
};

template <class Opt>
int train(const Setup& setup, const Opt& optimizer, const Placement& where) {
  const Options& o = setup.options;
  Start<decltype(optimizer.init(std::declval<const Params&>()))> start;
  start.params = initial_params(setup.model, o, setup.init_key);
  start.state = optimizer.init(start.params);
  if (!o.resume.empty()) {
    // The settings first (a clearer message than a shape mismatch), then the state, read into
    // one of the right structure and shapes; the file's key must be this run's.
    check_settings(o.resume, io::inspect(o.resume).metadata, setup.settings);
    nn::train_state<Params, decltype(start.state)> saved{start.params, start.state,
                                                         grove::random::key(0), 0};
    const io::metadata meta = io::load_into(o.resume, saved);
    if (saved.key != setup.data_key)
      throw io::format_error(
          "train_mlp --resume", o.resume,
          "its random key is not the one --seed " + std::to_string(o.seed) + " gives");
    check_resumed_state(o, setup.data.train.size(), saved.epoch, saved.opt_state);
    const auto it = meta.find(kHistoryKey);
    start.history = parse_history(o.resume, it == meta.end() ? "" : it->second, saved.epoch);
    start.params = std::move(saved.params);
    start.state = std::move(saved.opt_state);
    start.epochs_done = static_cast<int>(saved.epoch);
  }

  bool leader = true;
#if defined(GROVE_TRAIN_MLP_MPI)
  if (where.mpi) leader = where.mpi->rank() == 0;
#endif
  if (leader) {
    const auto& [train_set, test_set] = setup.data;
    std::printf(
        "train_mlp: %ld training and %ld test images of %ld pixels; MLP %s, %s, batch "
        "%d, %d epoch%s, seed %llu, %s\n",
        static_cast<long>(train_set.size()), static_cast<long>(test_set.size()),
        static_cast<long>(train_set.inputs.rows()), model_text(o).c_str(),
        setup.description.c_str(), o.batch_size, o.epochs, o.epochs == 1 ? "" : "s",
        static_cast<unsigned long long>(o.seed), setup.devices.c_str());
    if (o.precision == "bf16")
      std::printf("train_mlp: bf16 products on %s%s\n", nn::bf16_kernel_name(),
                  nn::bf16_in_hardware()
                      ? ""
                      : "; this CPU has no bfloat16 instructions, so bf16 is emulated: the inputs "
                        "are rounded to bfloat16 and multiplied on the float32 units");
    if (start.epochs_done > 0)
      std::printf("train_mlp: resumed from %s after epoch %d%s\n", o.resume.c_str(),
                  start.epochs_done,
                  start.epochs_done == o.epochs ? ": no epoch left to train" : "");
    // The metrics file is replaced once there is something to replace it with: after the first
    // epoch trained, or now when the checkpoint has every epoch already. A run that fails before
    // leaves the previous run's file as it was.
    if (!o.metrics.empty() && start.epochs_done == o.epochs)
      write_metrics(o.metrics, start.history);
    std::fflush(stdout);
  }

#if defined(GROVE_TRAIN_MLP_MPI)
  if (where.mpi) return train_epochs(setup, optimizer, std::move(start), *where.mpi);
#endif
  if (where.devices == 1) {
    par::SingleDevice one;
    return train_epochs(setup, optimizer, std::move(start), one);
  }
  par::LocalDevices devices(where.devices, where.threads_per_device);
  // Each device trains its own copy (train_epochs takes `start` by value).
  const auto status = devices.run(
      [&](par::LocalDevice& device) { return train_epochs(setup, optimizer, start, device); });
  return status[0];
}

// --- hostile and unlucky input -------------------------------------------------------------------
//
// What train_mlp checks before it trains, so that a bad flag, a bad file or a bad dataset is
// reported as what it is (exit 2 for a flag, 1 for a file), never as a crash, a hang or a run
// that diverges for a reason it does not say.

// A floating-point option: a finite number (CLI11 lets "nan" and "inf" through its range checks,
// which NaN passes by failing every comparison).
CLI::Validator finite_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(v) || errno == ERANGE)
          return "must be a finite number, got " + text.substr(0, 64);
        return {};
      },
      "FINITE");
}

// An integer option of type T, at least `least`: decimal digits (after a '-' for a signed T)
// whose value T holds. CLI11 reads "-1" into an unsigned as 2^64 - 1 and clamps a 64-bit value
// that overflows (--seed 2^64 would train with 2^64 - 1); both are refused here, naming the range.
template <class T>
CLI::Validator whole_number(T least = std::numeric_limits<T>::min()) {
  return CLI::Validator(
      [least](std::string& text) -> std::string {
        const std::string shown = text.substr(0, 64) + (text.size() > 64 ? "..." : "");
        const std::size_t sign = std::is_signed_v<T> && !text.empty() && text[0] == '-' ? 1 : 0;
        if (text.size() == sign || text.find_first_not_of("0123456789", sign) != std::string::npos)
          return std::string(std::cmp_greater_equal(least, 0)
                                 ? "must be a non-negative decimal integer"
                                 : "must be a decimal integer") +
                 ", got " + shown;
        T value{};
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        (void)end;
        if (ec == std::errc::result_out_of_range && !sign)
          return "must be at most " + std::to_string(std::numeric_limits<T>::max()) + ", got " +
                 shown;
        if (ec == std::errc::result_out_of_range || (ec == std::errc() && value < least))
          return "must be at least " + std::to_string(least) + ", got " + shown;
        if (ec != std::errc()) return "must be a decimal integer, got " + shown;
        return {};
      },
      least == 1   ? "POSITIVE"
      : least == 0 ? "NON-NEGATIVE"
                   : "INT");
}

// The most threads or local devices a process may ask for: beyond this, OpenMP runtimes fail
// with their own messages or crash.
constexpr int kMaxThreads = 1024;
// The widest layer and the most parameters --layers may ask for, checked before anything is
// allocated.
constexpr Eigen::Index kMaxWidth = Eigen::Index{1} << 20;
constexpr std::int64_t kMaxParameters = std::int64_t{1} << 28;

// --layers: positive decimal widths separated by single commas ("784,,10" is an error, not
// 784-10). Returns what is wrong, or an empty string.
std::string parse_layers(const std::string& text, std::vector<Eigen::Index>& layers) {
  const std::string shown = text.substr(0, 64) + (text.size() > 64 ? "..." : "");
  layers.clear();
  std::size_t at = 0;
  for (;;) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string field = text.substr(at, comma - at);
    if (field.empty() || field.find_first_not_of("0123456789") != std::string::npos)
      return "--layers " + shown + ": expected positive widths separated by commas, got \"" +
             field.substr(0, 64) + "\" at position " + std::to_string(layers.size() + 1);
    long long width = 0;
    const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), width);
    (void)end;
    if (ec != std::errc() || width <= 0 || width > kMaxWidth)
      return "--layers " + shown + ": width " + field.substr(0, 64) + " is not in [1, " +
             std::to_string(kMaxWidth) + "]";
    layers.push_back(static_cast<Eigen::Index>(width));
    if (comma == text.size()) break;
    at = comma + 1;
  }
  std::int64_t parameters = 0;
  for (std::size_t i = 1; i < layers.size(); ++i)
    parameters += static_cast<std::int64_t>(layers[i - 1] + 1) * layers[i];
  if (parameters > kMaxParameters)
    return "--layers " + shown + ": " + std::to_string(parameters) + " parameters, more than " +
           std::to_string(kMaxParameters);
  return {};
}

// --threads and --devices within what an OpenMP runtime can start. Returns what is wrong.
std::string resource_problem(const Options& o) {
  if (o.threads > kMaxThreads)
    return "--threads " + std::to_string(o.threads) + ": at most " + std::to_string(kMaxThreads);
  if (o.devices > kMaxThreads)
    return "--devices " + std::to_string(o.devices) + ": at most " + std::to_string(kMaxThreads);
  return {};
}

// Flags of the optimizer that only apply to some settings. Returns what is wrong.
std::string optimizer_problem(const Options& o, bool lr_decay_given) {
  if (o.weight_decay && o.optimizer != "adamw")
    return "--weight-decay applies to --optimizer adamw (got --optimizer " + o.optimizer + ")";
  if (lr_decay_given && o.schedule != "exponential")
    return "--lr-decay applies to --schedule exponential (got --schedule " + o.schedule + ")";
  return {};
}

// --- --plot: the training curves, drawn by a Python script ---------------------------------------
//
// The drawing is matplotlib's (Debian's python3-matplotlib), in scripts/plot_training.py, run as
// a child process after training from the --metrics CSV: C++ has no well-kept plotting library
// in Debian, and the script is also usable on its own, on any run's metrics. The script writes
// the PNG atomically and only over a regular file; train_mlp checks the path and the script
// (python3 with matplotlib) before training, so that a missing package costs no training time.

extern "C" char** environ;

// The Python interpreter and the plotting script: GROVE_PYTHON and GROVE_PLOT_SCRIPT when set,
// else Debian's python3 (the one python3-matplotlib installs for) and the script in the source
// tree this program was built from.
std::vector<std::string> plot_command() {
  const char* python = std::getenv("GROVE_PYTHON");
  const char* script = std::getenv("GROVE_PLOT_SCRIPT");
  return {python && *python ? python : "/usr/bin/python3",
          script && *script
              ? std::string(script)
              : (fs::path(__FILE__).parent_path().parent_path() / "scripts" / "plot_training.py")
                    .string()};
}

// Runs `args` (args[0] a path, no shell) and waits for it. Its exit status, or -1 with `why` set
// when it could not be started or was ended by a signal.
int run_child(const std::vector<std::string>& args, std::string& why) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (const int err = ::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ)) {
    why = "cannot run " + args[0] + ": " + std::strerror(err);
    return -1;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      why = std::string("waiting for ") + args[0] + ": " + std::strerror(errno);
      return -1;
    }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  why = args[0] + " was ended by signal " + std::to_string(WTERMSIG(status));
  return -1;
}

// Why --plot cannot be drawn: the plotting script is missing, or it says (on standard error)
// that matplotlib is missing or the path cannot be written. Empty when it can.
std::string plot_problem(const std::string& png) {
  auto command = plot_command();
  std::error_code ec;
  if (!fs::is_regular_file(command[1], ec))
    return "--plot " + png + ": the plotting script " + command[1] +
           " is not there (set GROVE_PLOT_SCRIPT to scripts/plot_training.py of grove's sources)";
  command.insert(command.end(), {"--check", "--out", png});
  std::string why;
  const int status = run_child(command, why);
  if (status == 0) return {};
  if (status < 0)
    return "--plot " + png + ": " + why +
           " (install Debian's python3 and python3-matplotlib, or set GROVE_PYTHON)";
  return "--plot " + png + ": cannot draw it (see above)";
}

// Draws the curves of `metrics` (train_mlp's CSV) into `png`. Empty when done, else why not.
std::string draw_plot(const std::string& metrics, const std::string& png,
                      const std::string& title) {
  auto command = plot_command();
  command.insert(command.end(), {"--metrics", metrics, "--out", png, "--title", title});
  std::string why;
  const int status = run_child(command, why);
  if (status == 0) return {};
  return "--plot " + png + ": " + (status < 0 ? why : std::string("the plotting script failed"));
}

// A temporary metrics file for --plot without --metrics, removed when the run ends.
struct TempMetrics {
  std::string path;
  TempMetrics() {
    std::string name = (fs::temp_directory_path() / "train_mlp-metrics-XXXXXX").string();
    const int fd = ::mkstemp(name.data());
    if (fd < 0)
      throw std::system_error(errno, std::generic_category(),
                              "train_mlp --plot: cannot create a temporary metrics file " + name);
    ::close(fd);
    path = name;
  }
  TempMetrics(const TempMetrics&) = delete;
  TempMetrics& operator=(const TempMetrics&) = delete;
  ~TempMetrics() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

// Why --data cannot be the dataset directory, or an empty string.
std::string data_directory_problem(const std::string& dir) {
  std::error_code ec;
  const auto st = fs::status(dir, ec);
  if (!fs::exists(st)) return "the data directory " + dir + " does not exist";
  if (!fs::is_directory(st))
    return "--data " + dir + " is not a directory (" +
           (fs::is_regular_file(st) ? std::string("a regular file")
                                    : std::string("a special file")) +
           "): pass the directory that holds the four IDX files";
  return {};
}

// Why --save or --metrics (`flag`) cannot be written, before any epoch is trained: its directory
// is missing or not writable, or the path is something grove::io does not replace (a directory,
// a device, a FIFO, a link to one of those or to nothing). Empty when it can be written.
std::string output_problem(const char* flag, const std::string& output) {
  std::error_code ec;
  const fs::path file(output);
  const std::string who = std::string(flag) + " " + output;
  const auto link = fs::symlink_status(file, ec);
  if (fs::exists(link)) {
    const auto st = fs::status(file, ec);
    if (!fs::exists(st))
      return who + ": a symbolic link to nothing; grove replaces only regular files";
    if (fs::is_directory(st)) return who + ": it is a directory";
    if (!fs::is_regular_file(st))
      return who +
             ": it is a special file (a device, a FIFO or a socket), and grove replaces only "
             "regular files";
  }
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec) || ::access(dir.c_str(), W_OK) != 0)
    return who + ": cannot write in the directory " + dir.string();
  return {};
}

// Whether `a` and `b` name the same file: for two that exist, the same file on disk (through
// symbolic links, hard links and ".."); otherwise the same absolute path once the part of it that
// exists is resolved (an output not yet written, named twice).
bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec_a, ec_b;
  const bool a_exists = fs::exists(a, ec_a), b_exists = fs::exists(b, ec_b);
  if (a_exists && b_exists) {
    std::error_code ec;
    return fs::equivalent(a, b, ec) && !ec;
  }
  if (a_exists != b_exists) return false;
  std::error_code ec;
  const fs::path ca = fs::weakly_canonical(fs::absolute(a, ec), ec);
  if (ec) return false;
  const fs::path cb = fs::weakly_canonical(fs::absolute(b, ec), ec);
  return !ec && ca == cb;
}

// A file train_mlp reads or writes, and how a message names it.
struct NamedFile {
  std::string flag;  // --save, --metrics, --plot, --resume, --data
  std::string name;
  fs::path path;
};

// Why two of the files train_mlp writes (--save, --metrics, --plot), or one it writes and one it
// reads (--resume and, for a sharded checkpoint, its shards; the dataset's IDX files), are the
// same file: one would overwrite the other, or the run would destroy its own input. Empty when
// all differ. --save onto the single-file checkpoint it resumes from is how a run is continued,
// and safe: the checkpoint is read before the first epoch, and replaced atomically after it.
std::string same_file_problem(const Options& o) {
  std::vector<NamedFile> outputs;
  for (const auto& [flag, path] : {std::pair<const char*, const std::string&>{"--save", o.save},
                                   {"--metrics", o.metrics},
                                   {"--plot", o.plot}})
    if (!path.empty()) outputs.push_back({flag, std::string(flag) + " " + path, path});
  for (std::size_t i = 0; i < outputs.size(); ++i)
    for (std::size_t j = i + 1; j < outputs.size(); ++j)
      if (same_file(outputs[i].path, outputs[j].path))
        return outputs[i].name + " and " + outputs[j].name +
               " are the same file: one would overwrite the other; give each output its own path";
  std::vector<NamedFile> inputs;
  if (!o.resume.empty()) {
    inputs.push_back({"--resume", "the checkpoint --resume " + o.resume, o.resume});
    if (o.resume.ends_with(".json")) {
      // A sharded checkpoint's index: its shards are read too. One the index does not let
      // inspect list is reported when it is loaded.
      try {
        std::vector<std::string> shards;
        for (const auto& t : io::inspect(o.resume).tensors)
          if (!t.file.empty() && std::find(shards.begin(), shards.end(), t.file) == shards.end())
            shards.push_back(t.file);
        for (const auto& shard : shards)
          inputs.push_back({"--resume shard", "the shard " + shard + " of --resume " + o.resume,
                            fs::path(o.resume).parent_path() / shard});
      } catch (const std::exception&) {
      }
    }
  }
  for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
    for (const char* suffix : {".gz", ""}) {
      const fs::path file = fs::path(o.data) / (std::string(name) + suffix);
      std::error_code ec;
      if (fs::exists(file, ec))
        inputs.push_back({"--data", "the dataset file " + file.string() + " (--data)", file});
    }
  const bool continued = !o.resume.ends_with(".json");
  for (const auto& out : outputs)
    for (const auto& in : inputs)
      if (!(continued && out.flag == "--save" && in.flag == "--resume") &&
          same_file(out.path, in.path))
        return out.name + " is the same file as " + in.name +
               ": training would overwrite what it reads; write to another path";
  return {};
}

// --- memory: what a model needs, estimated before anything is allocated ------------------------

std::string bytes_text(double bytes) {
  char text[32];
  if (bytes >= 1e9)
    std::snprintf(text, sizeof text, "%.1f GB", bytes / 1e9);
  else
    std::snprintf(text, sizeof text, "%.0f MB", std::max(1.0, bytes / 1e6));
  return text;
}

// The memory the run's model needs: the parameters and the optimizer's state (once, and once
// more for each of several local devices, which train their own copies), the gradients and the
// activations of a batch (for each device), in float32.
struct MemoryEstimate {
  double bytes = 0;
  std::string text;  // "the MLP 784-300000-10 with adam needs about 4.3 GB (...)"
};

MemoryEstimate memory_estimate(const Options& o, Eigen::Index examples, int ranks) {
  double parameters = 0, units = 0;
  for (std::size_t i = 1; i < o.layers.size(); ++i) {
    parameters += static_cast<double>(o.layers[i - 1] + 1) * static_cast<double>(o.layers[i]);
    if (o.layer_norm && i + 1 < o.layers.size()) parameters += 2.0 * o.layers[i - 1];
    units += static_cast<double>(o.layers[i]);
  }
  const double slots = o.optimizer == "adam" || o.optimizer == "adamw" ? 2
                       : o.optimizer == "momentum"                     ? 1
                                                                       : 0;
  const double devices = o.devices;
  const double copies = o.devices > 1 ? devices + 1 : 1;
  const double batch = std::ceil(
      static_cast<double>(std::min<Eigen::Index>(o.batch_size, examples)) / (devices * ranks));
  const double p = 4 * parameters;
  const double params = p * copies, state = slots * p * copies, grads = p * devices;
  // Each hidden layer keeps its pre-activation and activation for the backward pass, which has
  // two buffers of deltas; the batch's inputs are gathered once.
  const double work = 4 * batch * (4 * units + static_cast<double>(o.layers.front())) * devices;
  MemoryEstimate e;
  e.bytes = params + state + grads + work;
  e.text = "the MLP " + layers_text(o.layers) + " with " + o.optimizer + " needs about " +
           bytes_text(e.bytes) + " (" + bytes_text(params) + " of parameters, " +
           (slots > 0 ? bytes_text(state) + " of " + o.optimizer + "'s state, " : "") +
           bytes_text(grads) + " of gradients, " + bytes_text(work) + " of activations at batch " +
           std::to_string(static_cast<long long>(batch)) +
           (o.devices > 1 ? ", for " + std::to_string(o.devices) + " local devices" : "") + ")";
  return e;
}

// Reads one "Key: N kB" line of /proc/meminfo, in bytes; 0 when missing.
double meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  double value = 0;
  std::string unit;
  while (in >> name >> value >> unit)
    if (name == key + ":") return value * 1024;
  return 0;
}

// A number in a cgroup v2 file (memory.max: "max" when unlimited); 0 when there is none.
double cgroup_bytes(const char* file) {
  std::ifstream in(std::string("/sys/fs/cgroup/") + file);
  double value = 0;
  return in >> value ? value : 0;
}

// The most memory this machine can give the process, and what sets it: RAM and swap, or the
// cgroup's memory.max (and memory.swap.max) when less. Address-space limits (ulimit -v) are not
// counted: they show up as an allocation failure, which train_mlp reports with the estimate.
std::pair<double, std::string> memory_limit() {
  const double ram = meminfo_bytes("MemTotal"), swap = meminfo_bytes("SwapTotal");
  std::pair<double, std::string> limit{ram + swap, "memory and swap this machine has"};
  if (const double cg = cgroup_bytes("memory.max"); cg > 0) {
    const double cg_swap = cgroup_bytes("memory.swap.max");
    const double total = cg + (cg_swap > 0 ? std::min(cg_swap, swap) : swap);
    if (ram == 0 || total < limit.first) limit = {total, "memory this cgroup may use (memory.max)"};
  }
  return limit;
}

// Why the model does not fit in memory, or an empty string.
std::string memory_problem(const MemoryEstimate& e, int devices) {
  const auto [limit, what] = memory_limit();
  if (limit > 0 && e.bytes > limit)
    return e.text + ", more than the " + bytes_text(limit) + " of " + what +
           ": choose narrower --layers, a smaller --batch-size" +
           std::string(devices > 1 ? " or fewer --devices" : "");
  return {};
}

// The address space this process may still take (ulimit -v), for an out-of-memory message;
// empty when unlimited.
std::string address_space_note() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return {};
  return "; this process may use at most " + bytes_text(static_cast<double>(limit.rlim_cur)) +
         " of address space (ulimit -v)";
}

// What must hold of the dataset before training: images to train on and to test on, pixels in
// each, as many as --layers expects. Empty when it holds.
std::string dataset_problem(const grove::data::mnist_splits<float>& data, const Options& o) {
  const auto& [train, test] = data;
  const std::string dir = "--data " + o.data + ": ";
  if (train.size() == 0) return dir + "the training set has no images";
  if (test.size() == 0) return dir + "the test set has no images";
  if (train.inputs.rows() == 0) return dir + "the images have no pixels";
  if (train.inputs.rows() != test.inputs.rows())
    return dir + "the training images have " + std::to_string(train.inputs.rows()) +
           " pixels, the test images " + std::to_string(test.inputs.rows());
  if (train.inputs.rows() != o.layers.front())
    return dir + "the images have " + std::to_string(train.inputs.rows()) +
           " pixels, but --layers starts with " + std::to_string(o.layers.front());
  return {};
}

// Standardizing divides by the training pixels' standard deviation: it must be positive.
std::string standardize_problem(double mean, double sd) {
  if (!(sd > 0) || !std::isfinite(sd))
    return "the training images all have the same pixel value (" + exact(mean) +
           "): their standard deviation is 0, so they cannot be standardized (pass "
           "--no-standardize, or check the data)";
  return {};
}

// The checks of the flags themselves, made before the ranks (under MPI) do anything together:
// a usage error, or an empty string.
std::string flag_problem(Options& o, const std::string& layers_flag, bool lr_decay_given,
                         int ranks) {
  if (auto problem = parse_layers(layers_flag, o.layers); !problem.empty()) return problem;
  if (auto problem = resource_problem(o); !problem.empty()) return problem;
  if (auto problem = optimizer_problem(o, lr_decay_given); !problem.empty()) return problem;
  const std::string layers = layers_text(o.layers);
  if (o.layers.size() < 2 || o.layers.front() != 784 || o.layers.back() != 10)
    return "--layers must start with 784 (the pixels) and end with 10 (the classes), got " + layers;
  for (const auto width : o.layers)
    if (width <= 0) return "--layers sizes must be positive, got " + layers;
  if (o.residual)
    for (std::size_t l = 1; l + 2 < o.layers.size(); ++l)
      if (o.layers[l] != o.layers[l + 1])
        return "--residual needs equal hidden widths after the first layer, got " + layers;
  if (ranks > 1 && o.devices > 1)
    return "--devices " + std::to_string(o.devices) + " under MPI: each of the " +
           std::to_string(ranks) + " ranks is one device; use one or the other";
  if (o.devices > o.batch_size)
    return "--devices " + std::to_string(o.devices) + " is more than --batch-size " +
           std::to_string(o.batch_size) + ": some devices would get no examples";
  return same_file_problem(o);
}

// A failure before training that may be this rank's alone (a file it cannot read). Rank 0 has
// printed the message already; another rank prints its own, since it may be the only one that
// failed. Under MPI the other ranks would wait for this one in their first collective, so all
// are ended.
int fail_alone(int status, int rank, int ranks, const std::string& message) {
  if (rank != 0) std::fprintf(stderr, "train_mlp: rank %d: %s\n", rank, message.c_str());
#if defined(GROVE_TRAIN_MLP_MPI)
  if (ranks > 1) {
    std::fflush(stderr);
    grove::mpi::Environment::abort(status);
  }
#else
  (void)ranks;
#endif
  return status;
}

#if defined(GROVE_TRAIN_MLP_MPI)
// The settings every MPI rank must share, as (flag, value) pairs: those that decide what each
// rank computes, and the sizes of the dataset it read. A flag added to train_mlp that changes the
// computation belongs here too.
std::vector<std::pair<std::string, std::string>> shared_settings(
    const Options& o, double lr, const grove::data::mnist_splits<float>& data) {
  return {{"--epochs", std::to_string(o.epochs)},
          {"--batch-size", std::to_string(o.batch_size)},
          {"--data", o.data},
          {"--seed", std::to_string(o.seed)},
          {"--lr", exact(lr)},
          {"--lr-decay", exact(o.lr_decay)},
          {"--optimizer", o.optimizer},
          {"--schedule", o.schedule},
          {"--warmup-steps", std::to_string(o.warmup_steps)},
          {"--weight-decay", o.weight_decay ? exact(*o.weight_decay) : "none"},
          {"--clip-norm", o.clip_norm ? exact(*o.clip_norm) : "none"},
          {"--standardize", o.standardize ? "yes" : "no (--no-standardize)"},
          {"--layers", layers_text(o.layers)},
          {"--activation", o.activation},
          {"--dropout", exact(o.dropout)},
          {"--layer-norm", o.layer_norm ? "yes" : "no"},
          {"--residual", o.residual ? "yes" : "no"},
          {"--precision", o.precision},
          {"--resume", o.resume.empty() ? "none" : o.resume},
          {"training images", std::to_string(data.train.size())},
          {"test images", std::to_string(data.test.size())},
          {"pixels per image", std::to_string(data.train.inputs.rows())}};
}

// Every rank's `text`, on every rank (one MPI_Allgather of the lengths, one MPI_Allgatherv).
std::vector<std::string> allgather_text(grove::mpi::Communicator& comm, const std::string& text) {
  const int size = comm.size();
  int length = static_cast<int>(text.size());
  std::vector<int> lengths(static_cast<std::size_t>(size));
  MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm.native());
  std::vector<int> starts(static_cast<std::size_t>(size), 0);
  for (int r = 1; r < size; ++r)
    starts[static_cast<std::size_t>(r)] =
        starts[static_cast<std::size_t>(r - 1)] + lengths[static_cast<std::size_t>(r - 1)];
  std::string all(static_cast<std::size_t>(starts.back() + lengths.back()), '\0');
  MPI_Allgatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), starts.data(), MPI_CHAR,
                 comm.native());
  std::vector<std::string> texts;
  for (int r = 0; r < size; ++r)
    texts.push_back(all.substr(static_cast<std::size_t>(starts[static_cast<std::size_t>(r)]),
                               static_cast<std::size_t>(lengths[static_cast<std::size_t>(r)])));
  return texts;
}

// Every rank gathers every rank's settings (one allgather of their text) and compares them, so
// that all of them see the same disagreements. Returns them, one line each, naming the setting,
// a rank that differs from rank 0 and both values; empty when all agree.
std::string settings_disagreement(grove::mpi::Communicator& comm,
                                  const std::vector<std::pair<std::string, std::string>>& mine) {
  std::string text;
  for (const auto& [flag, value] : mine) {
    text += value;
    text += '\0';
  }
  const auto all = allgather_text(comm, text);
  const int size = comm.size();
  auto values_of = [&](int r) {
    std::vector<std::string> values;
    std::string_view rest(all[static_cast<std::size_t>(r)]);
    for (std::size_t nul; (nul = rest.find('\0')) != std::string_view::npos;) {
      values.emplace_back(rest.substr(0, nul));
      rest.remove_prefix(nul + 1);
    }
    return values;
  };
  const auto first = values_of(0);
  std::string problems;
  for (int r = 1; r < size; ++r) {
    const auto other = values_of(r);
    for (std::size_t i = 0; i < mine.size(); ++i) {
      const std::string a = i < first.size() ? first[i] : "?";
      const std::string b = i < other.size() ? other[i] : "?";
      if (a != b)
        problems += "\n  " + mine[i].first + ": rank 0 has " + a.substr(0, 64) + ", rank " +
                    std::to_string(r) + " has " + b.substr(0, 64);
    }
  }
  return problems;
}
#endif

// How a process's start went: its flags parsed and checked, --help printed, or a usage error.
enum class Launch { ready = 0, helped = 1, refused = 2 };

// Every process has parsed and checked its flags: returns -1 when the run goes on, else the
// status to exit with (0 after --help, 2 after a usage error). Under MPI the ranks first learn
// how each one's start went (one allgather, which every rank reaches, since the checks before it
// are its own), so that a rank started with a bad flag ends them all at once, instead of leaving
// the others waiting for it in their first collective. Each message is printed once: a rank's
// own is prefixed with it ("train_mlp: rank 1: ...") unless every rank has the same one, and a
// rank that could start says why it does not.
#if defined(GROVE_TRAIN_MLP_MPI)
int agree_to_start(Launch mine, const std::string& problem, int rank, int ranks,
                   grove::mpi::Communicator* world) {
#else
int agree_to_start(Launch mine, const std::string& problem, int rank, int ranks) {
#endif
  if (ranks == 1) {
    if (mine == Launch::refused) std::fprintf(stderr, "train_mlp: %s\n", problem.c_str());
    return mine == Launch::ready ? -1 : mine == Launch::helped ? 0 : 2;
  }
#if defined(GROVE_TRAIN_MLP_MPI)
  const auto all =
      allgather_text(*world, static_cast<char>('0' + static_cast<int>(mine)) + problem);
  std::vector<int> refused, helped, ready;
  for (int r = 0; r < ranks; ++r) {
    const char code =
        all[static_cast<std::size_t>(r)].empty() ? '2' : all[static_cast<std::size_t>(r)][0];
    (code == '2' ? refused : code == '1' ? helped : ready).push_back(r);
  }
  if (refused.empty() && helped.empty()) return -1;
  if (mine == Launch::refused) {
    const bool shared =
        refused.size() == static_cast<std::size_t>(ranks) &&
        std::all_of(all.begin(), all.end(), [&](const std::string& t) { return t == all[0]; });
    if (shared) {
      if (rank == 0) std::fprintf(stderr, "train_mlp: %s\n", problem.c_str());
    } else if (rank == 0 || all[static_cast<std::size_t>(rank)] != all[0]) {
      std::fprintf(stderr, "train_mlp: rank %d: %s\n", rank, problem.c_str());
    }
    return 2;
  }
  if (refused.empty() && ready.empty()) return 0;  // every rank printed --help
  // This rank could start: the lowest such rank says why none does.
  if (mine == Launch::ready && rank == ready.front()) {
    const auto& why = refused.empty() ? helped : refused;
    std::string list;
    for (const int r : why) list += (list.empty() ? "" : ", ") + std::to_string(r);
    std::fprintf(stderr, "train_mlp: rank %d: not training, since rank%s %s %s\n", rank,
                 why.size() == 1 ? "" : "s", list.c_str(),
                 refused.empty() ? "was given --help (start every rank with the same flags)"
                                 : "could not start (see its message)");
  }
  return 2;
#else
  (void)rank;
  return 2;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  // Under mpirun (or another MPI launcher) the ranks train together; run on its own, train_mlp
  // does not start MPI at all.
  const bool launched_by_mpi = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr ||
                               std::getenv("PMI_SIZE") != nullptr ||
                               std::getenv("PMIX_RANK") != nullptr;
#if defined(GROVE_TRAIN_MLP_MPI)
  std::optional<grove::mpi::Environment> mpi_environment;
  if (launched_by_mpi) mpi_environment.emplace(argc, argv);
  std::optional<grove::mpi::Communicator> world;
  if (launched_by_mpi) world.emplace();
  const int rank = world ? world->rank() : 0;
  const int ranks = world ? world->size() : 1;
#else
  const int rank = 0, ranks = 1;
  if (launched_by_mpi)
    std::fprintf(stderr,
                 "train_mlp: built without MPI (-DGROVE_MPI=OFF): each process trains alone\n");
#endif

  Options o;
  CLI::App app{
      "Trains an MLP on Fashion-MNIST with grove (swish, or --activation, --layer-norm, "
      "--residual, --dropout): parameters as a pytree initialised from "
      "split\n"
      "random keys, mini-batches drawn with grove::random::permutation, gradients by backprop,\n"
      "optax-style updates; data-parallel over --devices local devices, or over the processes\n"
      "of `mpirun -np N train_mlp ...`. The same --seed and --threads give the same numbers run\n"
      "after run.",
      "train_mlp"};
  std::string layers_flag = layers_text(o.layers);
  std::replace(layers_flag.begin(), layers_flag.end(), '-', ',');
  app.add_option("--data", o.data,
                 "Directory with train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                 "t10k-images-idx3-ubyte and "
                 "t10k-labels-idx1-ubyte (each .gz or plain); Debian's dataset-fashion-mnist "
                 "installs them here")
      ->capture_default_str();
  // A string, parsed by parse_layers: CLI11's vector option would drop empty fields and append
  // the widths of a repeated --layers.
  app.add_option("--layers", layers_flag,
                 "Layer sizes from the 784 inputs to the 10 classes, comma-separated (hidden "
                 "layers use --activation)")
      ->capture_default_str();
  app.add_option("--activation", o.activation,
                 "The hidden layers' activation: swish, relu, tanh, gelu (tanh approximation), "
                 "gelu_exact, sigmoid, softplus, elu, leaky_relu or identity")
      ->check(CLI::IsMember({"swish", "relu", "tanh", "gelu", "gelu_exact", "sigmoid", "softplus",
                             "elu", "leaky_relu", "identity"}))
      ->capture_default_str();
  app.add_option("--dropout", o.dropout,
                 "Dropout rate after each hidden layer's activation (flax's: kept values scaled "
                 "by 1/(1 - rate)); 0 for none")
      ->check(finite_number())
      ->check(CLI::Range(0.0, 0.95))
      ->capture_default_str();
  app.add_flag("--layer-norm", o.layer_norm,
               "A layer norm (flax's, eps 1e-6) at the start of every hidden layer after the "
               "first");
  app.add_flag("--residual", o.residual,
               "Every hidden layer after the first is a residual block, x + block(x) (the hidden "
               "widths must then be equal)");
  app.add_option("--precision", o.precision,
                 "f32: compute in float32; bf16: mixed precision, the matrix products from inputs "
                 "rounded to bfloat16 and summed in float32 (parameters, gradients and optimizer "
                 "state stay float32)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  app.add_option("--epochs", o.epochs, "Passes over the training set (in all, when resuming)")
      ->check(whole_number<int>(1))
      ->capture_default_str();
  app.add_option("--batch-size", o.batch_size,
                 "Examples per step, over all devices (the last step of an epoch takes the rest)")
      ->check(whole_number<int>(1))
      ->capture_default_str();
  app.add_option("--optimizer", o.optimizer,
                 "sgd, momentum (0.9, as optax.sgd(lr, momentum=0.9)), adam or adamw (decoupled "
                 "weight decay on the weight matrices, not on biases or layer-norm parameters)")
      ->check(CLI::IsMember({"sgd", "momentum", "adam", "adamw"}))
      ->capture_default_str();
  app.add_option("--weight-decay", o.weight_decay,
                 "adamw's weight decay [default: 0.0001, optax's]")
      ->check(finite_number())
      ->check(CLI::NonNegativeNumber);
  app.add_option("--clip-norm", o.clip_norm,
                 "Clip the gradients to this global norm before the optimizer "
                 "(optax.clip_by_global_norm) [default: no clipping]")
      ->check(finite_number())
      ->check(CLI::PositiveNumber);
  app.add_option("--schedule", o.schedule,
                 "Learning-rate schedule: exponential (lr * --lr-decay^epoch), cosine "
                 "(optax.warmup_cosine_decay_schedule from lr to 0 over the whole run) or "
                 "constant")
      ->check(CLI::IsMember({"exponential", "cosine", "constant"}))
      ->capture_default_str();
  app.add_option("--warmup-steps", o.warmup_steps,
                 "Steps of linear warmup from 0 to lr before the schedule (counted in the "
                 "schedule's steps for cosine, as optax does)")
      ->check(whole_number<std::int64_t>(0))
      ->capture_default_str();
  app.add_option(
         "--lr", o.lr,
         "Initial (peak) learning rate [default: adam and adamw 0.001, momentum 0.03, sgd 0.3]")
      ->check(finite_number())
      ->check(CLI::PositiveNumber);
  app.add_option("--lr-decay", o.lr_decay,
                 "Learning-rate decay per epoch: lr * decay^(step / steps_per_epoch), "
                 "optax.exponential_decay; "
                 "1 keeps it constant")
      ->check(finite_number())
      ->check(CLI::Range(1e-6, 1.0))
      ->capture_default_str();
  app.add_flag("--standardize,!--no-standardize", o.standardize,
               "Standardize the pixels with the training set's mean and standard deviation (the "
               "default), or leave them in [0, 1]");
  app.add_flag("--prefetch,!--no-prefetch", o.prefetch,
               "Gather each next batch on a thread of its own while the current one trains "
               "(grove::data's prefetch); off by default: with as many threads training as cores, "
               "the gathering thread takes a core from them")
      ->capture_default_str();
  app.add_option("--seed", o.seed,
                 "Seed of the key that initialises the network and shuffles the batches")
      ->check(whole_number<std::uint64_t>())
      ->capture_default_str();
  app.add_option("--threads", o.threads,
                 "Threads this process computes with, shared by its devices; 0: all cores "
                 "(shared by the MPI ranks on this machine)")
      ->check(whole_number<int>(0))
      ->capture_default_str();
  app.add_option("--devices", o.devices,
                 "Local devices (threads of this process) to train data-parallel on: each takes "
                 "its shard of every batch, one allreduce averages the gradients")
      ->check(whole_number<int>(1))
      ->capture_default_str();
  app.add_option("--metrics", o.metrics,
                 "Write a CSV of per-epoch metrics (epoch, train_loss, test_loss, test_accuracy, "
                 "epoch_seconds) to "
                 "this file, rewritten atomically after each epoch");
  app.add_option("--plot", o.plot,
                 "Draw the training curves (train and test loss, test accuracy per epoch) to this "
                 "PNG after training, written atomically; needs python3-matplotlib "
                 "(scripts/plot_training.py, run with /usr/bin/python3 or GROVE_PYTHON)");
  app.add_option("--save", o.save,
                 "Save the training state (parameters, optimizer state, random key, epoch, "
                 "settings, metrics) to this safetensors file after each epoch, atomically");
  app.add_option("--resume", o.resume,
                 "Resume from a file written by --save, with the same settings, up to --epochs: "
                 "the result is the one of a run never interrupted, bit for bit")
      ->check(CLI::ExistingFile);
  // Every rank parses and checks its own flags, then (under MPI) they agree to start or not.
  Launch launch = Launch::ready;
  std::string problem;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      // --help: printed by rank 0, status 0 (not CLI11's own codes).
      if (rank == 0) app.exit(e);
      launch = Launch::helped;
    } else {
      launch = Launch::refused;
      problem = std::string(e.what()) + "\nRun with --help for more information.";
    }
  }
  if (launch == Launch::ready) {
    problem = flag_problem(o, layers_flag, app.count("--lr-decay") > 0, ranks);
    if (!problem.empty()) launch = Launch::refused;
  }
#if defined(GROVE_TRAIN_MLP_MPI)
  if (const int status = agree_to_start(launch, problem, rank, ranks, world ? &*world : nullptr);
      status >= 0)
    return status;
#else
  if (const int status = agree_to_start(launch, problem, rank, ranks); status >= 0) return status;
#endif

  // After the ranks agreed to start, a usage error is the same on all of them (they compare
  // their settings before training); only rank 0 prints it.
  auto fail = [&](const char* format, auto... args) {
    if (rank == 0) {
      std::fprintf(stderr, "train_mlp: ");
      std::fprintf(stderr, format, args...);
    }
    return 2;
  };

  // Threads: --threads for this process (0: its share of the machine's cores), split among its
  // devices.
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  int ranks_here = 1;
#if defined(GROVE_TRAIN_MLP_MPI)
  if (world) ranks_here = world->local_size();
#endif
  const int threads = o.threads > 0 ? o.threads : std::max(1, cores / ranks_here);
  Placement where;
  where.devices = o.devices;
  where.threads_per_device = std::max(1, threads / o.devices);
  if (o.devices == 1) {
    Eigen::setNbThreads(threads);
#if defined(_OPENMP)
    omp_set_num_threads(threads);
#endif
  }
#if defined(GROVE_USE_OPENBLAS)
  openblas_set_num_threads(where.threads_per_device);
#endif
  const auto plural = [](int k, const char* what) {
    return std::to_string(k) + " " + what + (k == 1 ? "" : "s");
  };
  std::string devices = plural(where.threads_per_device, "thread");
  if (o.devices > 1) devices = plural(o.devices, "local device") + " of " + devices;
#if defined(GROVE_TRAIN_MLP_MPI)
  if (world && ranks > 1) {
    where.mpi = &*world;
    devices = plural(ranks, "MPI rank") + " of " + devices;
  }
#endif

  if (const auto problem = data_directory_problem(o.data); !problem.empty()) {
    if (problem.ends_with("does not exist"))
      fail(
          "%s.\n"
          "Install Fashion-MNIST with the Debian package %s (sudo apt-get install %s),\n"
          "or pass --data DIR with train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,\n"
          "t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz.\n",
          problem.c_str(), kPackage, kPackage);
    else
      fail("%s\n", problem.c_str());
    return fail_alone(1, rank, ranks, problem);
  }
  if (rank == 0) {
    // Fail now, not after the first epoch, when an output file cannot be written.
    for (const auto* output : {&o.metrics, &o.save, &o.plot}) {
      if (output->empty()) continue;
      const char* flag = output == &o.save ? "--save" : output == &o.plot ? "--plot" : "--metrics";
      const auto problem = output_problem(flag, *output);
      if (!problem.empty()) {
        std::fprintf(stderr, "train_mlp: %s\n", problem.c_str());
        return fail_alone(1, rank, ranks, problem);
      }
    }
    if (!o.plot.empty()) {
      if (const auto problem = plot_problem(o.plot); !problem.empty()) {
        std::fprintf(stderr, "train_mlp: %s\n", problem.c_str());
        return fail_alone(1, rank, ranks, problem);
      }
    }
  }
  // --plot draws from the metrics CSV: a temporary one when --metrics is not given.
  std::optional<TempMetrics> plot_metrics;
  if (rank == 0 && !o.plot.empty() && o.metrics.empty()) {
    try {
      plot_metrics.emplace();
    } catch (const std::system_error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return fail_alone(1, rank, ranks, e.what());
    }
    o.metrics = plot_metrics->path;
  }
  grove::data::mnist_splits<float> data;
  try {
    const auto t0 = std::chrono::steady_clock::now();
    data = grove::data::load_mnist<float>(o.data);
    if (rank == 0)
      std::printf("train_mlp: read %s in %.1f s", o.data.c_str(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  } catch (const std::system_error& e) {
    fail("%s\n", e.what());
    if (rank == 0 && e.code() == std::errc::no_such_file_or_directory)
      std::fprintf(stderr,
                   "Fashion-MNIST comes with the Debian package %s (sudo apt-get install %s).\n",
                   kPackage, kPackage);
    return fail_alone(1, rank, ranks, e.what());
  } catch (const std::bad_alloc&) {
    const std::string problem =
        "out of memory (std::bad_alloc) reading the dataset in " + o.data + address_space_note();
    fail("%s\n", problem.c_str());
    return fail_alone(1, rank, ranks, problem);
  } catch (const std::exception& e) {
    fail("%s\n", e.what());
    return fail_alone(1, rank, ranks, e.what());
  }
  if (const auto problem = dataset_problem(data, o); !problem.empty()) {
    if (rank == 0) std::printf("\n");
    fail("%s\n", problem.c_str());
    return fail_alone(1, rank, ranks, problem);
  }
  if (o.standardize) {
    // One mean and one standard deviation for all pixels, from the training set only.
    const double mean = data.train.inputs.cast<double>().mean();
    const double sd = std::sqrt((data.train.inputs.cast<double>().array() - mean).square().mean());
    if (const auto problem = standardize_problem(mean, sd); !problem.empty()) {
      if (rank == 0) std::printf("\n");
      fail("%s\n", problem.c_str());
      return fail_alone(1, rank, ranks, problem);
    }
    for (auto* images : {&data.train.inputs, &data.test.inputs})
      images->array() = (images->array() - static_cast<float>(mean)) / static_cast<float>(sd);
    if (rank == 0)
      std::printf("; pixels standardized with mean %.4f and standard deviation %.4f", mean, sd);
  }
  if (rank == 0) std::printf("\n");
  // A model too large for the machine is refused before anything of it is allocated (on each
  // rank: each may run on its own machine); an allocation that fails anyway (under ulimit -v, say)
  // is reported with the same estimate.
  const MemoryEstimate memory = memory_estimate(o, data.train.size(), ranks);
  if (const auto problem = memory_problem(memory, o.devices); !problem.empty()) {
    fail("%s\n", problem.c_str());
    return fail_alone(1, rank, ranks, problem);
  }

  const double lr = o.lr.value_or(default_lr(o.optimizer));
  const std::string description = describe_optimizer(o, lr);
  const auto [init_key, data_key] = grove::random::split(grove::random::key(o.seed));
  const Model model = build_model(o);
  // Open MPI hands its ranks a pseudo-terminal as stdout, whatever mpirun's own stdout is: under
  // MPI, one line per epoch.
  const bool progress_bar = !launched_by_mpi && ::isatty(STDOUT_FILENO) != 0;
  const Setup setup{o,           model,    data,
                    description, devices,  run_settings(o, lr),
                    init_key,    data_key, grove::random::fold_in(grove::random::key(o.seed), 2),
                    progress_bar};
#if defined(GROVE_TRAIN_MLP_MPI)
  // Ranks that train with different settings would hang in a collective or train different
  // models silently: all of them refuse, each saying what differs.
  if (where.mpi) {
    const auto problems = settings_disagreement(*where.mpi, shared_settings(o, lr, data));
    if (!problems.empty()) {
      std::fprintf(stderr,
                   "train_mlp: rank %d: the MPI ranks were started with different settings; "
                   "start them all with the same ones:%s\n",
                   rank, problems.c_str());
      return 2;
    }
  }
#endif
  // The ranks agree on the settings and the dataset's size now: a usage error found from them is
  // the same on every rank.
  const double steps_per_epoch = std::ceil(static_cast<double>(data.train.size()) / o.batch_size);
  const auto total_steps = static_cast<std::int64_t>(steps_per_epoch) * o.epochs;
  if (o.schedule == "cosine" && o.warmup_steps >= total_steps)
    return fail(
        "--warmup-steps %lld must be fewer than the run's %lld steps for --schedule "
        "cosine\n",
        static_cast<long long>(o.warmup_steps), static_cast<long long>(total_steps));
  try {
    const optim::Schedule schedule = make_schedule(o, lr, steps_per_epoch, total_steps);
    const int status = with_optimizer(
        o, schedule, [&](const auto& optimizer) { return train(setup, optimizer, where); });
    if (status == 0 && rank == 0 && !o.plot.empty()) {
      const std::string title = "train_mlp: MLP " + model_text(o) + ", " + description;
      if (const auto problem = draw_plot(o.metrics, o.plot, title); !problem.empty()) {
        std::fprintf(stderr, "train_mlp: %s\n", problem.c_str());
        return 1;
      }
      std::printf("train_mlp: drew the training curves to %s\n", o.plot.c_str());
    }
    return status;
  } catch (const std::bad_alloc&) {
    // std::bad_alloc says nothing of what was too large: say it.
    const std::string problem =
        "out of memory (std::bad_alloc): " + memory.text + address_space_note();
    fail("%s\n", problem.c_str());
    return fail_alone(1, rank, ranks, problem);
  } catch (const std::exception& e) {
    // Under MPI the other ranks may be waiting for this one in a collective: fail_alone ends
    // them all.
    fail("%s\n", e.what());
    return fail_alone(1, rank, ranks, e.what());
  } catch (const grove::error& e) {
    // Every grove error is also a standard exception; this catches one that forgot to be.
    fail("%s\n", e.what());
    return fail_alone(1, rank, ranks, e.what());
  }
}
