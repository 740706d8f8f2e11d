// grove/optim/detail/check.hpp: the argument checks the transformations and schedules share;
// each message starts with the public function the user called and names the argument.
#pragma once

#include <cmath>
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

/// value neither NaN nor infinite: every hyperparameter, whatever else it must be. An infinite
/// one passes the comparisons below (inf >= 0) and turns the parameters into infinities or NaN
/// at the first step.
inline void check_finite(const char* who, const char* name, double value) {
  if (!std::isfinite(value)) fail(who, std::string(name) + " must be finite, got " + format(value));
}

/// value in [0, 1), as decay rates must be.
inline void check_decay(const char* who, const char* name, double value) {
  if (!(value >= 0 && value < 1))
    fail(who, std::string(name) + " must be in [0, 1), got " + format(value));
}

/// value finite and >= 0.
inline void check_non_negative(const char* who, const char* name, double value) {
  check_finite(who, name, value);
  if (!(value >= 0)) fail(who, std::string(name) + " must be >= 0, got " + format(value));
}

/// value finite and > 0.
inline void check_positive(const char* who, const char* name, double value) {
  check_finite(who, name, value);
  if (!(value > 0)) fail(who, std::string(name) + " must be positive, got " + format(value));
}

}  // namespace grove::optim::detail
