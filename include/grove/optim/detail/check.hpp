// grove/optim/detail/check.hpp: the argument checks the transformations share; each message
// starts with the public function the user called.
#pragma once

#include <cstdio>
#include <string>

#include "grove/error.hpp"

namespace grove::optim::detail {

inline std::string format(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", x);
  return buffer;
}

[[noreturn]] inline void fail(const char* who, const std::string& what) {
  throw argument_error(std::string("grove::optim::") + who + ": " + what);
}

/// value in [0, 1), as decay rates must be.
inline void check_decay(const char* who, const char* name, double value) {
  if (!(value >= 0 && value < 1))
    fail(who, std::string(name) + " must be in [0, 1), got " + format(value));
}

inline void check_non_negative(const char* who, const char* name, double value) {
  if (!(value >= 0)) fail(who, std::string(name) + " must be >= 0, got " + format(value));
}

}  // namespace grove::optim::detail
