// examples/train_mlp/checks.hpp: hostile and unlucky input: the flags, the paths, the memory a
// model needs and the dataset, checked before anything is trained. Part of train_mlp (main.cpp
// includes it; one translation unit).
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <fstream>

#include "options.hpp"
#include "plot.hpp"

namespace {

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
  // Under MPI every rank runs --devices local devices: ranks × devices in all.
  if (static_cast<long long>(o.devices) * ranks > o.batch_size)
    return "--devices " + std::to_string(o.devices) +
           (ranks > 1 ? " on each of " + std::to_string(ranks) + " MPI ranks" : std::string()) +
           " is more than --batch-size " + std::to_string(o.batch_size) +
           ": some devices would get no examples";
  return same_file_problem(o);
}

}  // namespace
