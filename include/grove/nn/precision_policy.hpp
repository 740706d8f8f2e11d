// grove/nn/precision_policy.hpp: the dtypes a model computes in, jmp's Policy. Parameters stay
// in their own dtype (float32); under the mixed-precision policy the matrix products round their
// inputs to bfloat16 and sum the products in float32 (grove/nn/precision.hpp applies a policy to a
// model: nn::with_policy).
//
//   auto mixed = nn::get_policy("params=float32,compute=bfloat16,output=float32");
//   mixed == nn::precision_policy::mixed_bf16();   // true
//
// Why no loss scaling: bfloat16 has float32's 8-bit exponent, so every gradient a float32 pass
// can represent (down to 1e-38) is representable after rounding, only with fewer digits; float16
// (5-bit exponent, nothing below 6e-8) loses small gradients to zero, which is what loss scaling
// is for. grove computes in bfloat16 only, and refuses float16 compute.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include "grove/error.hpp"

namespace grove::nn {

/// The floating-point types a precision policy names (jax.numpy's names).
enum class dtype { bfloat16, float16, float32, float64 };

/// jmp's short name of a dtype ("bf16", "f16", "f32", "f64").
constexpr std::string_view short_name(dtype d) noexcept {
  switch (d) {
    case dtype::bfloat16:
      return "bf16";
    case dtype::float16:
      return "f16";
    case dtype::float32:
      return "f32";
    case dtype::float64:
      return "f64";
  }
  return "?";
}

/// The dtype's numpy name ("bfloat16", "float16", "float32", "float64").
constexpr std::string_view dtype_name(dtype d) noexcept {
  switch (d) {
    case dtype::bfloat16:
      return "bfloat16";
    case dtype::float16:
      return "float16";
    case dtype::float32:
      return "float32";
    case dtype::float64:
      return "float64";
  }
  return "?";
}

/// The dtype of float and double.
template <class T>
constexpr dtype dtype_of() noexcept {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "grove::nn: the scalar type must be float or double");
  return std::is_same_v<T, float> ? dtype::float32 : dtype::float64;
}

/// jmp.Policy: the dtype of the parameters, of the computation, and of the model's output.
///
/// What grove computes under each:
///   compute == params: everything in the parameters' dtype (the default: what grove did before
///     policies existed, bit for bit).
///   compute == bfloat16 (float32 parameters only): every matrix product rounds its inputs (the
///     weights, the activations, and in the backward pass the incoming gradients) to bfloat16,
///     to nearest with ties to even as Eigen::bfloat16 does, and sums the products in float32.
///     Biases, activations, layer norm, dropout and the loss stay in float32, as do the
///     parameters, the gradients and the optimizer's state.
///   output == bfloat16: the model's output is rounded to bfloat16 (its values, kept as floats);
///     the gradient passes through that rounding unchanged, as through jmp's cast.
struct precision_policy {
  dtype params = dtype::float32;
  dtype compute = dtype::float32;
  dtype output = dtype::float32;

  /// Everything in float32: grove's default.
  static constexpr precision_policy full() noexcept { return {}; }
  /// float32 parameters and output, bfloat16 products: mixed precision.
  static constexpr precision_policy mixed_bf16() noexcept {
    return {dtype::float32, dtype::bfloat16, dtype::float32};
  }

  friend constexpr bool operator==(const precision_policy&, const precision_policy&) = default;

  /// jmp's str(policy): "p=f32,c=bf16,o=f32".
  std::string str() const {
    std::string s = "p=";
    s += short_name(params);
    s += ",c=";
    s += short_name(compute);
    s += ",o=";
    s += short_name(output);
    return s;
  }
};

namespace detail {

[[noreturn]] inline void fail_policy(const char* function, const std::string& what) {
  throw argument_error(std::string("grove::nn::") + function + ": " + what);
}

inline dtype parse_dtype(const char* function, std::string_view text, std::string_view whole) {
  if (text == "bf16" || text == "bfloat16") return dtype::bfloat16;
  // jmp's "half" is float16 on every backend but TPUs, so on a CPU.
  if (text == "f16" || text == "float16" || text == "half") return dtype::float16;
  if (text == "f32" || text == "float32" || text == "full") return dtype::float32;
  if (text == "f64" || text == "float64") return dtype::float64;
  fail_policy(function, "unknown dtype '" + std::string(text) + "' in policy '" +
                            std::string(whole) +
                            "': expected full, half, float32, float64, bfloat16, float16 or a "
                            "short name (f32, f64, bf16, f16)");
}

}  // namespace detail

/// jmp.get_policy: a policy from its text. Either one dtype for all three ("bf16", "float32"), or
/// comma-separated `key=dtype` parts with keys params / p, compute / c, output / o; what is left
/// out follows jmp: params float32, compute the params' dtype, output the compute dtype (so
/// "c=bf16" is p=f32,c=bf16,o=bf16). Throws grove::argument_error for an unknown key or dtype, a
/// key given twice, or an empty part. (It does not check that grove can compute in the policy:
/// nn::with_policy does.)
inline precision_policy get_policy(std::string_view name) {
  constexpr const char* function = "get_policy";
  const auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  if (name.find('=') == std::string_view::npos) {
    const dtype d = detail::parse_dtype(function, trim(name), name);
    return {d, d, d};
  }
  precision_policy p;
  bool has_params = false, has_compute = false, has_output = false;
  std::string_view rest = name;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view part = trim(rest.substr(0, comma));
    const std::size_t eq = part.find('=');
    if (part.empty() || eq == std::string_view::npos)
      detail::fail_policy(function, "policy '" + std::string(name) + "' has a part '" +
                                        std::string(part) + "' that is not key=dtype");
    const std::string_view key = trim(part.substr(0, eq));
    const dtype d = detail::parse_dtype(function, trim(part.substr(eq + 1)), name);
    bool* seen = nullptr;
    if (key == "p" || key == "params") {
      p.params = d;
      seen = &has_params;
    } else if (key == "c" || key == "compute") {
      p.compute = d;
      seen = &has_compute;
    } else if (key == "o" || key == "output") {
      p.output = d;
      seen = &has_output;
    } else {
      detail::fail_policy(function, "unknown key '" + std::string(key) + "' in policy '" +
                                        std::string(name) +
                                        "': expected params, compute or output (p, c, o)");
    }
    if (*seen)
      detail::fail_policy(
          function, "policy '" + std::string(name) + "' gives '" + std::string(key) + "' twice");
    *seen = true;
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (!has_compute) p.compute = p.params;
  if (!has_output) p.output = p.compute;
  return p;
}

namespace detail {

/// Why grove cannot compute in policy p, or an empty string when it can.
inline std::string unsupported(const precision_policy& p) {
  const std::string name = "policy " + p.str();
  if (p.params != dtype::float32 && p.params != dtype::float64)
    return name + ": parameters must be float32 or float64 (grove's optimizers update them in " +
           "place, and bfloat16 or float16 parameters would lose most small updates)";
  if (p.compute == dtype::float16 || p.output == dtype::float16)
    return name +
           ": grove does not compute in float16 (its 5-bit exponent would need loss scaling); "
           "use bfloat16, which has float32's range";
  if (p.compute != p.params && !(p.compute == dtype::bfloat16 && p.params == dtype::float32))
    return name + ": compute must be the parameters' dtype, or bfloat16 with float32 parameters";
  if (p.output != p.params && !(p.output == dtype::bfloat16 && p.params == dtype::float32))
    return name + ": output must be the parameters' dtype, or bfloat16 with float32 parameters";
  return {};
}

}  // namespace detail

}  // namespace grove::nn
