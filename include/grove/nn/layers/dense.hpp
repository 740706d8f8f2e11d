// grove/nn/layers/dense.hpp: the dense layer of a model, nn::dense(in, out), fused with the
// activation after it where the model allows.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "grove/nn/detail/dense_slices.hpp"
#include "grove/nn/detail/layer_dispatch.hpp"

namespace grove::nn {

/// A dense layer of a model: z = w x + b with parameters Dense<T>{w (out x in), b (out)},
/// initialised as flax's Dense (lecun_normal kernel, zero bias) unless another variance-scaling
/// initializer is given. Build one with nn::dense(in, out).
struct DenseLayer {
  Index in = 0, out = 0;
  double scale = 1.0;  ///< the initializer's (jax.nn.initializers.variance_scaling)
  FanMode mode = FanMode::fan_in;
  InitDistribution distribution = InitDistribution::truncated_normal;

  std::string name() const {
    return "Dense(" + std::to_string(in) + ", " + std::to_string(out) + ")";
  }
  Index input_features() const { return in; }
  Index output_features(Index) const { return out; }
  static constexpr bool shares_team = true;

  /// (w_key, b_key) = split(key); w = the initializer of (w_key, (out, in)); b = 0. w_key is the
  /// key nnx.Linear(in, out, rngs=nnx.Rngs(params=key)) draws its kernel from, so w holds that
  /// kernel's numbers row by row: w = kernel.reshape(out, in), not kernel.T.
  template <class T>
  Dense<T> init(const random::Key& key) const {
    detail::require_real<T>();
    const auto [w_key, b_key] = random::split(key);
    (void)b_key;
    return Dense<T>{VarianceScaling<T>{scale, mode, distribution}.sample(w_key, out, in),
                    Vector<T>::Zero(out)};
  }

  template <class T>
  void check_params(const char* function, const Dense<T>& p, const detail::layer_path& path) const {
    if (p.w.rows() != out || p.w.cols() != in || p.b.size() != out)
      detail::fail_shape(function, "layer " + path.str() + " (" + name() + ") has parameters w " +
                                       detail::shape_text(p.w.rows(), p.w.cols()) + " and b (" +
                                       std::to_string(p.b.size()) + "), expected w " +
                                       detail::shape_text(out, in) + " and b (" +
                                       std::to_string(out) + ")");
  }

  /// y = w x + b: one product over the threads of one team, the bias as its initial value.
  template <class T>
  void forward(const Dense<T>& p, ConstMatrixMap<T> x, MatrixMap<T> y, std::span<T> saved,
               const layer_context& ctx) const {
    forward_then(p, x, y, saved, ctx, detail::no_epilogue{});
  }

  /// forward, and then epilogue(j, begin, end) on each column piece [begin, end) of y that this
  /// thread computed, while it is in cache (a sequence fuses the activation after it this way).
  /// The work is the engine's own (detail/dense_slices.hpp): the same sums in the same order.
  template <class T, class Epilogue>
  void forward_then(const Dense<T>& p, ConstMatrixMap<T> x, MatrixMap<T> y, std::span<T>,
                    const layer_context& ctx, Epilogue&& epilogue) const {
    using namespace detail;
    const Index batch = x.cols();
    const View<const T> w{p.w.data(), out, in, out}, xv{x.data(), in, batch, in};
    const View<T> yv{y.data(), out, batch, out};
    const Precision precision = products_of(ctx);
    on_team<T>(ctx, [&](int tid, int team, GemmScratch<T>& scratch) {
      reserve_slice(scratch, out, batch, in, tid, team, precision);
      dense_forward_slice(w, p.b.data(), xv, yv, tid, team, scratch, precision, epilogue);
    });
  }

  /// dw = dy x^T, db = the row sums of dy, dx = w^T dy: three independent products in one team.
  template <class T>
  void backward(const Dense<T>& p, ConstMatrixMap<T> x, ConstMatrixMap<T> y, ConstMatrixMap<T> dy,
                Dense<T>& g, MatrixMap<T> dx, std::span<T> saved, const layer_context& ctx) const {
    backward_then(p, x, y, dy, g, dx, saved, ctx, detail::no_epilogue{});
  }

  /// backward, and then epilogue(j, begin, end) on each column piece of dx that this thread
  /// computed (a sequence fuses the derivative of the activation before it this way).
  template <class T, class Epilogue>
  void backward_then(const Dense<T>& p, ConstMatrixMap<T> x, ConstMatrixMap<T>,
                     ConstMatrixMap<T> dy, Dense<T>& g, MatrixMap<T> dx, std::span<T>,
                     const layer_context& ctx, Epilogue&& epilogue) const {
    using namespace detail;
    const Index batch = x.cols();
    const bool want_dx = dx.size() != 0;
    const View<const T> w{p.w.data(), out, in, out}, xv{x.data(), in, batch, in},
        dyv{dy.data(), out, batch, out};
    const Precision precision = products_of(ctx);
    on_team<T>(ctx, [&](int tid, int team, GemmScratch<T>& scratch) {
      reserve_slice(scratch, out, in, batch, tid, team, precision);
      if (want_dx) reserve_slice(scratch, in, batch, out, tid, team, precision);
      dense_weight_grad_slice(dyv, xv, View<T>{g.w.data(), out, in, out}, T(1), Into::overwrite,
                              tid, team, scratch, precision);
      dense_bias_grad_share(dyv, g.b.data(), tid, team);
      if (want_dx)
        dense_input_grad_slice(w, dyv, View<T>{dx.data(), in, batch, in}, tid, team, scratch,
                               precision, epilogue);
    });
  }

  template <class T>
  bool collect_chain(const Dense<T>& p, Dense<T>* g, std::vector<detail::chain_entry<T>>& chain,
                     bool) const {
    detail::chain_entry<T> e;
    e.layer = &p;
    e.grad = g;  // the gradients, or in the fused SGD step p itself (see chain_entry)
    chain.push_back(e);
    return true;
  }
};

/// A dense layer from `in` to `out` features, initialised as flax's Dense: lecun_normal kernel,
/// zero bias. Throws grove::argument_error for sizes <= 0.
// The sequence walk finds these hooks by what the layer offers; a change to their signatures
// that silently turned the fusion off fails here instead.
static_assert(detail::fuses_activation_after<DenseLayer, float, Dense<float>> &&
              detail::fuses_activation_before<DenseLayer, float, Dense<float>, Dense<float>>);

inline DenseLayer dense(Index in, Index out) {
  if (in <= 0 || out <= 0)
    detail::fail("dense", "sizes must be positive, got in = " + std::to_string(in) +
                              ", out = " + std::to_string(out));
  return DenseLayer{in, out};
}

/// The same with another variance-scaling initializer for the kernel (e.g. he_normal<float>);
/// the bias is zero.
template <class U>
DenseLayer dense(Index in, Index out, const VarianceScaling<U>& initializer) {
  DenseLayer layer = dense(in, out);
  layer.scale = initializer.scale;
  layer.mode = initializer.mode;
  layer.distribution = initializer.distribution;
  return layer;
}

}  // namespace grove::nn
