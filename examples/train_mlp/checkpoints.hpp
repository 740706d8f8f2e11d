// examples/train_mlp/checkpoints.hpp: --save / --resume: what a checkpoint records beside the
// train_state (the run's settings, the history) and how a resume is checked. Part of train_mlp
// (main.cpp includes it; one translation unit).
#pragma once

#include <charconv>
#include <sstream>

#include "options.hpp"

namespace {

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

}  // namespace
