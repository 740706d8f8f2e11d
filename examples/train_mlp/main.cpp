// train_mlp: trains an MLP (swish by default) on Fashion-MNIST the JAX way, with grove.
//
//   train_mlp                                  # 784-512-512-10, adam, 15 epochs
//   train_mlp --optimizer sgd --lr 0.1 --epochs 20 --metrics run.csv
//   train_mlp --epochs 5 --save run.safetensors     # then: --epochs 15 --resume run.safetensors
//   train_mlp --plot run.png                        # the training curves, drawn after training
//   train_mlp --devices 2 --batch-size 1024         # data-parallel over 2 local devices
//   mpirun -np 2 train_mlp --batch-size 1024        # data-parallel over 2 MPI processes
//   mpirun -np 2 train_mlp --devices 2              # over 2 processes × 2 local devices each
//   train_mlp --activation gelu --layer-norm --residual --dropout 0.1   # another model
//
// The model is a grove::nn::sequential of layers, its parameters a pytree initialised from a split
// key; each epoch's mini-batches come from grove::data::batches (grove::random::permutation's
// order); each step is nn::train_step (value_and_grad's hand-written VJPs into a reused
// workspace, then an optax-style update applied in place). With several devices or MPI ranks,
// each takes its shard of every batch and one allreduce averages the gradients
// (grove::parallel::train_step). The same --seed and --threads give the same numbers run after
// run, and a run resumed from a checkpoint gives the bits of one never interrupted.
//
// One program in a few files by concern, all of them included here (one translation unit):
// options.hpp (the settings), model.hpp, training.hpp (the optimizer and the epochs),
// checkpoints.hpp (--save / --resume), plot.hpp (--plot), checks.hpp (hostile and unlucky input,
// checked before training) and launch.hpp (how the processes, under MPI, start together); this
// file parses the flags and runs them in that order.
#include <CLI/CLI.hpp>
#include <thread>

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(GROVE_USE_OPENBLAS)
extern "C" void openblas_set_num_threads(int);
#endif

#include "checkpoints.hpp"
#include "checks.hpp"
#include "launch.hpp"
#include "model.hpp"
#include "options.hpp"
#include "plot.hpp"
#include "training.hpp"

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
      "optax-style updates; data-parallel over --devices local devices, over the processes\n"
      "of `mpirun -np N train_mlp ...`, or over both. The same --seed and --threads give the\n"
      "same numbers run after run.",
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
                 "its shard of every batch, one allreduce averages the gradients (under mpirun, "
                 "over every process's devices)")
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
