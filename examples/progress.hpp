// A one-line progress bar for a terminal: batches done, running loss, examples/s and the time
// left in the epoch, redrawn in place at most ten times a second.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

namespace grove_examples {

class ProgressBar {
 public:
  using clock = std::chrono::steady_clock;

  ProgressBar(std::FILE* out, std::string label, long total, long examples_per_step)
      : out_(out),
        label_(std::move(label)),
        total_(total),
        per_step_(examples_per_step),
        start_(clock::now()) {}

  // Called after each step; draws when enough time has passed (and at the end).
  void update(long done, double running_loss) {
    const auto now = clock::now();
    if (done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double rate = elapsed > 0 ? static_cast<double>(done * per_step_) / elapsed : 0.0;
    const double eta =
        done > 0 ? elapsed * static_cast<double>(total_ - done) / static_cast<double>(done) : 0.0;
    constexpr int width = 28;
    const int filled = static_cast<int>(width * static_cast<double>(done) /
                                        static_cast<double>(std::max(1L, total_)));
    std::string bar(static_cast<std::size_t>(filled), '=');
    if (filled < width) bar += '>';
    bar.resize(width, ' ');
    std::fprintf(out_, "\r\033[K%s [%s] %ld/%ld  loss %.4f  %s ex/s  ETA %s", label_.c_str(),
                 bar.c_str(), done, total_, running_loss, human(rate).c_str(),
                 clock_time(eta).c_str());
    std::fflush(out_);
  }

  // Removes the bar, so that the next line starts clean.
  void clear() {
    std::fprintf(out_, "\r\033[K");
    std::fflush(out_);
  }

  static std::string clock_time(double seconds) {
    const long s = std::lround(seconds);
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%ld:%02ld", s / 60, s % 60);
    return buffer;
  }

  static std::string human(double rate) {
    char buffer[32];
    if (rate >= 1e6)
      std::snprintf(buffer, sizeof buffer, "%.2fM", rate / 1e6);
    else if (rate >= 1e3)
      std::snprintf(buffer, sizeof buffer, "%.1fk", rate / 1e3);
    else
      std::snprintf(buffer, sizeof buffer, "%.0f", rate);
    return buffer;
  }

 private:
  std::FILE* out_;
  std::string label_;
  long total_;
  long per_step_;
  clock::time_point start_;
  clock::time_point last_draw_{};
};

}  // namespace grove_examples
