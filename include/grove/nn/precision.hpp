// grove/nn/precision.hpp: a model that computes under a precision policy (jmp's Policy, flax's
// `dtype` / `param_dtype`): nn::with_policy(model, policy).
//
//   auto model = nn::with_policy(nn::sequential(nn::dense(784, 512), nn::relu, nn::dense(512, 10)),
//                                nn::precision_policy::mixed_bf16());
//   auto params = nn::init<float>(model, key);       // float32, the same tree as without a policy
//   auto [loss, grads] = nn::value_and_grad(model, params, X, labels);   // bf16 products
//
// The wrapped model has the same parameters (the same pytree, the same initialisation from a key)
// and the same layers; apply, evaluate, loss, value_and_grad, train_step and parallel::train_step
// take it like any model. What changes is how the passes compute (precision_policy says what
// each dtype means): under compute = bfloat16 grove's dense layers, and the fused engine that runs
// chains of them, round each product's inputs to bfloat16 and sum in float32. The rounding
// happens while the product packs its operands into its cache blocks, which every product does
// anyway: no pass over the weights makes a bfloat16 copy of them.
//
// A policy applies to the model it wraps, layers nested in it included; a with_policy inside
// another model applies its own policy to its own layers (a model may keep, say, its first layer
// in float32).
#pragma once

#include <Eigen/Core>
#include <span>
#include <string>
#include <type_traits>

#include "grove/detail/bf16.hpp"
#include "grove/nn/layer.hpp"
#include "grove/nn/layers.hpp"
#include "grove/nn/precision_policy.hpp"
#include "grove/nn/workspace.hpp"

namespace grove::nn {

/// A model computed under a precision policy; build one with nn::with_policy.
template <class M>
struct WithPolicy {
  M model;
  precision_policy policy;

  std::string name() const { return "WithPolicy(" + policy.str() + ")"; }
  static constexpr bool shares_team = detail::shares_team<M>();

  template <class T>
  auto init(const random::Key& key) const {
    return detail::init_layer<T>(model, key);
  }
  Index saved_size(Index in, Index batch) const { return detail::saved_size(model, in, batch); }
  Index check_shapes(const char* function, Index in, const detail::layer_path& path) const {
    return detail::check_layer(function, model, in, path);
  }
  /// The policy against the parameters' dtype, then the model's own checks.
  template <class P>
  void check_params(const char* function, const P& p, const detail::layer_path& path) const {
    using T = detail::params_scalar_t<P>;
    if (const std::string why = detail::unsupported(policy); !why.empty())
      detail::fail(function, "layer " + path.str() + ": " + why);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      if (policy.params != dtype_of<T>())
        detail::fail(function, "layer " + path.str() + " has the policy " + policy.str() +
                                   " but its parameters are " +
                                   std::string(dtype_name(dtype_of<T>())));
    }
    detail::check_layer_params(function, model, p, path);
  }

  template <class T, class P>
  void forward(const P& p, ConstMatrixMap<T> x, MatrixMap<T> y, std::span<T> saved,
               const layer_context& ctx) const {
    layer_context c = ctx;
    c.policy = &policy;
    detail::forward_layer<T>(model, p, x, y, saved, c);
    if (policy.output == dtype::bfloat16) {
      if constexpr (std::is_same_v<T, float>) {
        const detail::Range r = detail::share(y.size(), ctx.thread, ctx.threads);
        if (!r.empty()) ::grove::detail::round_to_bf16(y.data() + r.begin, r.size());
      }
      team_barrier(ctx);
    }
  }
  /// The gradient passes through the output's rounding unchanged (jmp's cast).
  template <class T, class P>
  void backward(const P& p, ConstMatrixMap<T> x, ConstMatrixMap<T> y, ConstMatrixMap<T> dy, P& g,
                MatrixMap<T> dx, std::span<T> saved, const layer_context& ctx) const {
    layer_context c = ctx;
    c.policy = &policy;
    detail::backward_layer<T>(model, p, x, y, dy, g, dx, saved, c);
  }
};

/// The model computed under `policy` (see precision_policy for what each dtype means). Throws
/// grove::argument_error for a policy grove cannot compute in: parameters other than float32 or
/// float64, float16 anywhere, compute or output other than the parameters' dtype or (with float32
/// parameters) bfloat16. The parameters' dtype is checked against the policy at each pass.
template <class M>
WithPolicy<std::remove_cvref_t<M>> with_policy(M&& m, const precision_policy& policy) {
  if (const std::string why = detail::unsupported(policy); !why.empty())
    detail::fail("with_policy", why);
  return {std::forward<M>(m), policy};
}

/// What computes the float products under bf16 compute on this CPU, in words (the kernel and
/// how it gets its bfloat16 inputs).
inline const char* bf16_kernel_name() {
  return detail::bf16_kernel_name();
}

/// Whether this CPU multiplies bfloat16 in hardware under bf16 compute (AMX's tdpbf16ps or
/// AVX512-BF16's vdpbf16ps), rather than rounding the inputs and multiplying them on its float32
/// units. Either way the products' inputs are the same rounded values; the sums differ only in
/// their order.
inline bool bf16_in_hardware() {
  return detail::uses_amx_kernel() || detail::uses_native_bf16_kernel();
}

namespace detail {

template <class M>
inline constexpr bool is_with_policy = false;
template <class M>
inline constexpr bool is_with_policy<WithPolicy<M>> = true;

// A pass's policy on its workspace, for the fused engine, while the pass runs.
template <class T>
class policy_scope {
 public:
  policy_scope(Workspace<T>& ws, const precision_policy* policy)
      : ws_(ws), products_(memory_of(ws).products), round_output_(memory_of(ws).round_output) {
    memory_of(ws).products =
        policy && policy->compute == dtype::bfloat16 ? Precision::bf16 : Precision::full;
    memory_of(ws).round_output = policy && policy->output == dtype::bfloat16;
  }
  ~policy_scope() {
    memory_of(ws_).products = products_;
    memory_of(ws_).round_output = round_output_;
  }
  policy_scope(const policy_scope&) = delete;
  policy_scope& operator=(const policy_scope&) = delete;

 private:
  Workspace<T>& ws_;
  Precision products_;
  bool round_output_;
};

}  // namespace detail

}  // namespace grove::nn
