// grove/error.hpp: the root of every exception grove throws, and the error types that more than
// one layer raises. docs/CONVENTIONS.md ("Errors") has the whole table.
#pragma once

#include <stdexcept>
#include <string>
#include <system_error>

namespace grove {

/// Every exception grove throws derives from grove::error and from the standard exception that
/// says what kind of failure it is (std::invalid_argument, std::runtime_error, std::system_error).
/// Catch grove::error to catch everything grove throws; catch the standard type to treat grove's
/// errors like any other of that kind. grove::error holds no state of its own: what() is the
/// standard exception's message.
class error {
 public:
  virtual ~error() = default;
  /// The message, which starts with the qualified name of the function that failed.
  virtual const char* what() const noexcept = 0;

 protected:
  error() = default;
  error(const error&) = default;
  error& operator=(const error&) = default;
};

/// The operating system refused to start a thread grove needs (a LocalDevices' device, a worker of
/// a threaded pass's team): a limit on the processes and threads of a user (RLIMIT_NPROC, `ulimit
/// -u`) or of a cgroup (pids.max) was reached, or the thread's stack did not fit in the address
/// space (RLIMIT_AS, `ulimit -v`). code() is the system's reason, as std::thread's own
/// std::system_error gives it (usually std::errc::resource_unavailable_try_again); what() says
/// how many threads were asked for, how many started, and the limits in force.
class thread_error : public std::system_error, public error {
 public:
  using std::system_error::system_error;
  const char* what() const noexcept override { return std::system_error::what(); }
};

/// The caller passed a value the function cannot take: a negative learning rate, a probability
/// outside [0, 1], a size that does not fit.
class argument_error : public std::invalid_argument, public error {
 public:
  using std::invalid_argument::invalid_argument;
  const char* what() const noexcept override { return std::invalid_argument::what(); }
};

/// Arrays whose shapes must agree do not: a layer's input, a target, a residual block's output.
class shape_error : public argument_error {
 public:
  using argument_error::argument_error;
};

/// The caller used an object out of order: LocalDevices::run called from inside its own run(),
/// MPI initialised twice.
class usage_error : public std::logic_error, public error {
 public:
  using std::logic_error::logic_error;
  const char* what() const noexcept override { return std::logic_error::what(); }
};

}  // namespace grove
