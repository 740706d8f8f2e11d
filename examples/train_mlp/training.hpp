// examples/train_mlp/training.hpp: the optimizer the flags describe, and the epochs: grove::data's
// batches, grove::parallel's step on each device, the test evaluation, the metrics and checkpoints.
// Part of train_mlp (main.cpp includes it; one translation unit).
#pragma once

#include "../progress.hpp"
#include "checkpoints.hpp"
#include "model.hpp"

namespace {

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

// Where the run trains: one process, local devices, MPI ranks, or MPI ranks × local devices.
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
  if (where.mpi && where.devices > 1) {
    // Processes × local devices: one group of all the processes' devices.
    par::LocalDevices devices(where.devices, where.threads_per_device);
    const auto status = devices.run([&](par::LocalDevice& local) {
      grove::mpi::GlobalDevice device(*where.mpi, local);
      return train_epochs(setup, optimizer, start, device);
    });
    return status[0];
  }
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

}  // namespace
