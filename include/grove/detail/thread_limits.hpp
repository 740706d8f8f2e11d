// grove/detail/thread_limits.hpp: what limits the threads a process may start, in words, for the
// messages of grove::thread_error (a LocalDevices' threads, a team's workers).
#pragma once

#include <string>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/resource.h>
#endif

namespace grove::detail {

/// The limits that can refuse a thread, with their values in force: RLIMIT_NPROC (`ulimit -u`),
/// a cgroup's pids.max, and the address space that holds the threads' stacks (RLIMIT_AS,
/// `ulimit -v`).
inline std::string thread_limits() {
  std::string text =
      "the limit on a user's processes and threads, RLIMIT_NPROC or `ulimit -u`, is ";
  auto limit = [](int resource, const char* unit) -> std::string {
#if defined(__unix__) || defined(__APPLE__)
    rlimit r{};
    if (::getrlimit(resource, &r) == 0) {
      if (r.rlim_cur == RLIM_INFINITY) return "unlimited";
      return std::to_string(static_cast<unsigned long long>(r.rlim_cur)) + unit;
    }
#else
    (void)resource;
    (void)unit;
#endif
    return "unknown";
  };
#if defined(__unix__) || defined(__APPLE__)
  text += limit(RLIMIT_NPROC, "") +
          "; a cgroup's pids.max counts too; the address space, which holds each thread's stack, "
          "RLIMIT_AS or `ulimit -v`, is " +
          limit(RLIMIT_AS, " bytes");
#else
  text += limit(0, "");
#endif
  return text;
}

}  // namespace grove::detail
