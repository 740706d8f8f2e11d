// grove/io/detail/float16.hpp: IEEE float16 and bfloat16 bits widened and rounded in integer
// arithmetic, as numpy does, independent of the compiler's and Eigen's conversions.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace grove::io::detail {

// --- 16-bit floats, bit by bit (independent of the compiler's and Eigen's conversions) ----------

// A binary floating-point format's bits (`from_mantissa` stored mantissa bits, `from_exponent`
// exponent bits) widened exactly to a wider format's, in integer arithmetic only, as numpy's
// npy_halfbits_to_floatbits and npy_halfbits_to_doublebits widen float16: a NaN keeps its sign,
// its payload (shifted to the top of the wider mantissa) and its quiet bit, so a signaling NaN
// stays signaling (a conversion through the FPU would quiet it, and whether the compiler folds
// such a round trip away depends on the optimisation level); -0 keeps its sign; a subnormal
// becomes the normal number of the same value. The wider format must have more exponent bits.
template <int from_mantissa, int from_exponent, int to_mantissa, int to_exponent>
constexpr std::uint64_t widen_float_bits(std::uint64_t bits) noexcept {
  static_assert(to_mantissa >= from_mantissa && to_exponent > from_exponent);
  constexpr std::uint64_t mantissa_mask = (std::uint64_t{1} << from_mantissa) - 1;
  constexpr std::uint64_t exponent_all = (std::uint64_t{1} << from_exponent) - 1;
  constexpr std::int64_t from_bias = (std::int64_t{1} << (from_exponent - 1)) - 1;
  constexpr std::int64_t to_bias = (std::int64_t{1} << (to_exponent - 1)) - 1;
  const std::uint64_t sign = (bits >> (from_mantissa + from_exponent)) & 1u;
  const std::uint64_t exponent = (bits >> from_mantissa) & exponent_all;
  std::uint64_t mantissa = bits & mantissa_mask;
  std::uint64_t out_exponent = 0;
  if (exponent == exponent_all) {  // infinity or NaN: all ones, and the payload as it is
    out_exponent = (std::uint64_t{1} << to_exponent) - 1;
  } else if (exponent != 0) {
    out_exponent =
        static_cast<std::uint64_t>(static_cast<std::int64_t>(exponent) - from_bias + to_bias);
  } else if (mantissa != 0) {  // subnormal: normalise, moving the leading 1 out of the field
    std::int64_t e = 1 - from_bias;
    while ((mantissa & (mantissa_mask + 1)) == 0) {
      mantissa <<= 1;
      --e;
    }
    mantissa &= mantissa_mask;
    out_exponent = static_cast<std::uint64_t>(e + to_bias);
  }
  return (sign << (to_mantissa + to_exponent)) | (out_exponent << to_mantissa) |
         (mantissa << (to_mantissa - from_mantissa));
}

// An F16 value's F32 bits, exactly (numpy's npy_halfbits_to_floatbits).
constexpr std::uint32_t f16_to_float_bits(std::uint16_t h) noexcept {
  return static_cast<std::uint32_t>(widen_float_bits<10, 5, 23, 8>(h));
}
// A BF16 value's F32 bits: BF16 is the upper half of an F32.
constexpr std::uint32_t bf16_to_float_bits(std::uint16_t b) noexcept {
  return std::uint32_t{b} << 16;
}

// An F16 value, exactly, as a double (numpy's npy_halfbits_to_doublebits): NaN keeps its sign,
// payload and quiet bit, -0 its sign, subnormals their value.
inline double f16_to_double(std::uint16_t h) noexcept {
  return std::bit_cast<double>(widen_float_bits<10, 5, 52, 11>(h));
}

// A BF16 value, exactly, as a double, widened as F16 is (a signaling NaN stays signaling).
inline double bf16_to_double(std::uint16_t b) noexcept {
  return std::bit_cast<double>(widen_float_bits<7, 8, 52, 11>(b));
}

// `x` rounded to the nearest value of a binary format with `mantissa_bits` stored mantissa bits,
// exponent bias `bias` and `exponent_bits` exponent bits, ties to even (IEEE's default), as that
// format's bits. Overflow gives infinity; NaN gives a quiet NaN with x's sign and the top of its
// payload. One rounding from double, so no double-rounding error for float or double inputs.
inline std::uint16_t round_to_binary16(double x, int mantissa_bits, int exponent_bits) noexcept {
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const std::uint16_t sign = std::signbit(x) ? static_cast<std::uint16_t>(1u << 15) : 0;
  const std::uint16_t exponent_mask =
      static_cast<std::uint16_t>(((1u << exponent_bits) - 1) << mantissa_bits);
  if (std::isnan(x)) {
    const std::uint64_t payload = std::bit_cast<std::uint64_t>(x) & ((std::uint64_t{1} << 52) - 1);
    const auto top = static_cast<std::uint16_t>(payload >> (52 - mantissa_bits));
    return static_cast<std::uint16_t>(sign | exponent_mask | top |
                                      (1u << (mantissa_bits - 1)));  // quiet
  }
  const double magnitude = std::fabs(x);
  if (magnitude == 0) return sign;
  if (std::isinf(magnitude)) return sign | exponent_mask;
  const int min_exponent = 1 - bias;  // of the normal numbers
  int e = std::max(std::ilogb(magnitude), min_exponent);
  const double quantum = std::ldexp(1.0, e - mantissa_bits);
  const double rounded = std::nearbyint(magnitude / quantum) * quantum;   // exact scaling
  if (rounded >= std::ldexp(1.0, bias + 1)) return sign | exponent_mask;  // infinity
  e = std::ilogb(rounded);
  if (e < min_exponent)  // subnormal: the exponent field is 0
    return static_cast<std::uint16_t>(
        sign | static_cast<std::uint16_t>(std::ldexp(rounded, bias - 1 + mantissa_bits)));
  const auto mantissa = static_cast<std::uint16_t>(
      static_cast<std::uint32_t>(std::ldexp(rounded, mantissa_bits - e)) - (1u << mantissa_bits));
  return static_cast<std::uint16_t>(sign | ((e + bias) << mantissa_bits) | mantissa);
}
inline std::uint16_t round_to_f16(double x) noexcept {
  return round_to_binary16(x, 10, 5);
}
inline std::uint16_t round_to_bf16(double x) noexcept {
  return round_to_binary16(x, 7, 8);
}

}  // namespace grove::io::detail
