// examples/train_mlp/plot.hpp: --plot: the training curves, drawn after training by
// scripts/plot_training.py in a child process. Part of train_mlp (main.cpp includes it; one
// translation unit).
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "options.hpp"

namespace {

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
          script && *script ? std::string(script)
                            : (fs::path(__FILE__).parent_path().parent_path().parent_path() /
                               "scripts" / "plot_training.py")
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

}  // namespace
