// grove/random/detail/checks.hpp: the argument checks of grove::random's public functions and
// the error they raise (grove::argument_error, message `grove::random::FUNCTION: what`).
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <system_error>
#include <type_traits>

#include "grove/error.hpp"
#include "grove/random/arrays.hpp"
#include "grove/random/detail/streams.hpp"  // schedule
#include "grove/random/thread_options.hpp"

namespace grove::random::detail {

[[noreturn]] inline void fail(const char* function, const std::string& what) {
  throw ::grove::argument_error(std::string("grove::random::") + function + ": " + what);
}

// A value as it appears in error messages: the shortest text that reads back as the same value.
template <class V>
std::string show(const V& value) {
  char buffer[64];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return error == std::errc{} ? std::string(buffer, end) : std::string("?");
}

inline void check_size(const char* function, const char* name, Index value) {
  if (value < 0) fail(function, std::string(name) + " (" + show(value) + ") is negative");
}

inline std::uint64_t element_count(const char* function, Index rows, Index cols) {
  check_size(function, "rows", rows);
  check_size(function, "cols", cols);
  if (cols != 0 && rows > std::numeric_limits<Index>::max() / cols) {
    fail(function, "rows (" + show(rows) + ") * cols (" + show(cols) + ") is too large");
  }
  return static_cast<std::uint64_t>(rows) * static_cast<std::uint64_t>(cols);
}

inline schedule schedule_of(const char* function, const thread_options& opt) {
  if (opt.threads < 0)
    fail(function, "thread_options.threads (" + show(opt.threads) + ") is negative");
  if (opt.chunk < 0) fail(function, "thread_options.chunk (" + show(opt.chunk) + ") is negative");
  return {opt.threads, static_cast<std::uint64_t>(opt.chunk)};
}

template <class T>
constexpr void require_real() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "grove::random: T must be float (JAX's float32) or double (JAX's float64)");
}

template <class T>
void check_finite(const char* function, const char* name, T value) {
  if (!std::isfinite(value))
    fail(function, std::string(name) + " (" + show(value) + ") is not finite");
}

template <class U>
constexpr void require_unsigned() {
  static_assert(std::is_same_v<U, std::uint8_t> || std::is_same_v<U, std::uint16_t> ||
                    std::is_same_v<U, std::uint32_t> || std::is_same_v<U, std::uint64_t>,
                "grove::random::bits: U must be std::uint8_t, std::uint16_t, std::uint32_t or "
                "std::uint64_t");
}

template <class T>
void check_range(const char* function, T minval, T maxval) {
  check_finite(function, "minval", minval);
  check_finite(function, "maxval", maxval);
  if (minval > maxval) {
    fail(function, "minval (" + show(minval) + ") > maxval (" + show(maxval) + ")");
  }
}

template <class T>
void check_bounds(const char* function, T lower, T upper) {
  if (std::isnan(lower)) fail(function, "lower (" + show(lower) + ") is NaN");
  if (std::isnan(upper)) fail(function, "upper (" + show(upper) + ") is NaN");
  if (lower >= upper) {
    fail(function, "lower (" + show(lower) + ") >= upper (" + show(upper) + ")");
  }
}

template <class T>
void check_probability(T p, const char* function = "bernoulli") {
  if (!(p >= T(0) && p <= T(1))) fail(function, "p (" + show(p) + ") is outside [0, 1]");
}

template <class I>
constexpr void require_integer() {
  static_assert(std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>,
                "grove::random::randint: I must be std::int32_t (JAX's default int) or "
                "std::int64_t (JAX's 64-bit mode)");
}

}  // namespace grove::random::detail
