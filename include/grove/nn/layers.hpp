// grove/nn/layers.hpp: grove's layers, each with a hand-written backward pass: dense,
// layer_norm, dropout, residual and sequential (the activations of grove/nn/activations.hpp are
// layers too). They follow the protocol of grove/nn/layer.hpp, as a user's own layer does.
//
//   auto model = nn::sequential(nn::dense(784, 256), nn::swish,
//                               nn::residual(nn::sequential(nn::layer_norm(256), nn::dense(256,
//                               256),
//                                                           nn::gelu)),
//                               nn::dropout(0.1), nn::dense(256, 10));
//   auto params = nn::init<float>(model, grove::random::key(0));   // key paths [0].w, [2][0].scale
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

#include "grove/nn/activations.hpp"
#include "grove/nn/dense.hpp"
#include "grove/nn/detail/gemm.hpp"
#include "grove/nn/layer.hpp"
#include "grove/nn/workspace.hpp"
#include "grove/random.hpp"
#include "grove/tree.hpp"

namespace grove::nn {

// --- dispatch: what grove calls on any layer
// ------------------------------------------------------

namespace detail {

template <class L>
Index saved_size(const L& layer, Index in, Index batch) {
  if constexpr (activation<L>)
    return in * batch;  // f'(x), computed in the forward pass
  else if constexpr (requires { layer.saved_size(in, batch); })
    return layer.saved_size(in, batch);
  else
    return 0;
}

// Elements [r.begin, r.end) of an array in memory, as an Eigen array.
template <class T>
auto flat_part(T* p, const Range& r) {
  using A = Eigen::Array<std::remove_const_t<T>, Eigen::Dynamic, 1>;
  return Eigen::Map<std::conditional_t<std::is_const_v<T>, const A, A>>(p + r.begin, r.size());
}

template <class T, class L, class P>
void forward_layer(const L& layer, const P& params, ConstMatrixMap<T> x, MatrixMap<T> y,
                   std::span<T> saved, const layer_context& ctx) {
  if constexpr (activation<L>) {
    // Each thread of the team its own contiguous part of the batch in memory.
    const Range r = share(x.size(), ctx.thread, ctx.threads);
    if (!r.empty()) {
      if (ctx.training) {
        // f(x) and f'(x) in one pass: the backward pass is then one multiplication.
        std::copy(x.data() + r.begin, x.data() + r.end, saved.data() + r.begin);
        layer.forward_train(saved.data() + r.begin, y.data() + r.begin, r.size());
      } else {
        layer.forward(x.data() + r.begin, y.data() + r.begin, r.size());
      }
    }
    team_barrier(ctx);
  } else {
    layer.template forward<T>(params, x, y, saved, ctx);
  }
}

template <class T, class L, class P>
void backward_layer(const L& layer, const P& params, ConstMatrixMap<T> x, ConstMatrixMap<T> y,
                    ConstMatrixMap<T> dy, P& grads, MatrixMap<T> dx, std::span<T> saved,
                    const layer_context& ctx) {
  if constexpr (activation<L>) {
    if (dx.size() != 0) {
      const Range r = share(dy.size(), ctx.thread, ctx.threads);
      if (!r.empty())
        flat_part(dx.data(), r) = flat_part(dy.data(), r) * flat_part(saved.data(), r);
    }
    team_barrier(ctx);
  } else {
    layer.template backward<T>(params, x, y, dy, grads, dx, saved, ctx);
  }
}

// Checks that the layer takes `in` features, and returns its outputs; throws grove::shape_error
// naming the layer by its key path otherwise.
template <class L>
Index check_layer(const char* function, const L& layer, Index in, const layer_path& path) {
  if constexpr (requires { layer.check_shapes(function, in, path); }) {
    return layer.check_shapes(function, in, path);
  } else {
    const Index expected = input_features(layer);
    if (expected >= 0 && expected != in)
      fail_shape(function, "layer " + path.str() + " (" + layer_name(layer) + ") expects " +
                               std::to_string(expected) + " features, the input has " +
                               std::to_string(in));
    const Index out = output_features(layer, in);
    if (out <= 0)
      fail_shape(function, "layer " + path.str() + " (" + layer_name(layer) + ") cannot take " +
                               std::to_string(in) + " features");
    return out;
  }
}

// Checks the parameters' shapes against the layer (grove's layers; a user's layer may define
// check_params(function, params, path) too).
template <class L, class P>
void check_layer_params(const char* function, const L& layer, const P& params,
                        const layer_path& path) {
  if constexpr (requires { layer.check_params(function, params, path); })
    layer.check_params(function, params, path);
}

// A model's chain: the dense layers and activations the fused engine runs (see model.hpp).
// Returns false when the layer is something else.
template <class T, class L, class P>
bool collect_chain(const L& layer, const P& params, P* grads, std::vector<chain_entry<T>>& chain,
                   bool has_key) {
  if constexpr (std::is_same_v<L, Identity>) {
    return true;
  } else if constexpr (activation<L>) {
    if (chain.empty() || chain.back().act != nullptr) return false;
    chain.back().act = &layer;
    chain.back().forward = &act_forward<L, T>;
    chain.back().forward_train = &act_forward_train<L, T>;
    return true;
  } else if constexpr (requires { layer.collect_chain(params, grads, chain, has_key); }) {
    return layer.collect_chain(params, grads, chain, has_key);
  } else {
    return false;
  }
}

// How a layer's matrix products treat their inputs in this pass (the model's precision policy).
inline Precision products_of(const layer_context& ctx) noexcept {
  return computes_in_bf16(ctx) ? Precision::bf16 : Precision::full;
}

template <class T>
GemmScratch<T>* gemm_scratch_of(const layer_context& ctx, int threads) {
  if (ctx.detail == nullptr) return nullptr;
  auto& s = static_cast<Workspace<T>*>(ctx.detail)->scratch();
  // (In a team the pass has sized it before the team started: see model.hpp.)
  if (ctx.threads == 1 && static_cast<int>(s.size()) < threads)
    s.resize(static_cast<std::size_t>(threads));
  return s.data();
}

// Runs body(tid, team, scratch) on the pass's team when the layer is called by one (every thread
// with its own part, then a barrier), else on a team of the products' own (grove's threads).
// Each thread reserves its own scratch: nothing is allocated once it has seen the shapes.
template <class T, class Body>
void on_team(const layer_context& ctx, Body&& body) {
  if (ctx.threads > 1) {
    GemmScratch<T>* scratch = gemm_scratch_of<T>(ctx, ctx.threads);
    if (scratch) {
      body(ctx.thread, ctx.threads, scratch[ctx.thread]);
    } else {
      GemmScratch<T> local;
      body(ctx.thread, ctx.threads, local);
    }
    team_barrier(ctx);
    return;
  }
  const int nt = ctx.detail ? max_threads() : 1;
  GemmScratch<T>* scratch = gemm_scratch_of<T>(ctx, nt);
  if (!scratch) {
    GemmScratch<T> local;
    body(0, 1, local);
    return;
  }
  parallel(nt, [&](int tid, int team) { body(tid, team, scratch[tid]); });
}

// The epilogue of a product that has none.
struct no_epilogue {
  void operator()(Index, Index, Index) const {}
};

template <std::size_t N, class F>
void for_index(F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f(std::integral_constant<std::size_t, I>{}), ...);
  }
  (std::make_index_sequence<N>{});
}

// The mask of dropout: 1 where uniform(key) < keep (grove::random::bernoulli<float>'s draw), else
// 0, written as T.
template <class T>
struct dropout_mask_sink {
  T* out;
  float keep;
  void operator()(std::uint64_t first, const std::uint32_t* words, std::size_t m) const noexcept {
    T* o = out + first;
    for (std::size_t l = 0; l < m; ++l)
      o[l] = random::detail::unit_from_bits<float>(words[l]) < keep ? T(1) : T(0);
  }
};

}  // namespace detail

// --- dense
// -------------------------------------------------------------------------------------------

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
  template <class T, class Epilogue>
  void forward_then(const Dense<T>& p, ConstMatrixMap<T> x, MatrixMap<T> y, std::span<T>,
                    const layer_context& ctx, Epilogue&& epilogue) const {
    using namespace detail;
    const Index batch = x.cols();
    const View<const T> w{p.w.data(), out, in, out}, xv{x.data(), in, batch, in};
    const View<T> yv{y.data(), out, batch, out};
    const Precision precision = products_of(ctx);
    on_team<T>(ctx, [&](int tid, int team, GemmScratch<T>& scratch) {
      const Slice s = slice_of(out, batch, in, tid, team);
      if (s.empty()) return;
      scratch.reserve(s.rows.size(), s.cols.size(), in, precision);
      for (Index j = s.cols.begin; j < s.cols.end; ++j)
        std::copy(p.b.data() + s.rows.begin, p.b.data() + s.rows.end, yv.col(j) + s.rows.begin);
      gemm_slice<false, false>(s, w, xv, yv, T(1), scratch, Into::add, precision);
      for (Index j = s.cols.begin; j < s.cols.end; ++j) epilogue(j, s.rows.begin, s.rows.end);
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
      const Slice sw = slice_of(out, in, batch, tid, team);
      if (!sw.empty()) scratch.reserve(sw.rows.size(), sw.cols.size(), batch, precision);
      const Slice sx = want_dx ? slice_of(in, batch, out, tid, team) : Slice{};
      if (!sx.empty()) scratch.reserve(sx.rows.size(), sx.cols.size(), out, precision);
      gemm_slice<false, true>(sw, dyv, xv, View<T>{g.w.data(), out, in, out}, T(1), scratch,
                              Into::overwrite, precision);
      const Range r = share(out, tid, team);
      if (!r.empty()) {
        auto db = g.b.segment(r.begin, r.size());
        db.setZero();
        for (Index j = 0; j < batch; ++j) db += dy.col(j).segment(r.begin, r.size());
      }
      if (!sx.empty()) {
        gemm_slice<true, false>(sx, w, dyv, View<T>{dx.data(), in, batch, in}, T(1), scratch,
                                Into::overwrite, precision);
        for (Index j = sx.cols.begin; j < sx.cols.end; ++j) epilogue(j, sx.rows.begin, sx.rows.end);
      }
    });
  }

  template <class T>
  bool collect_chain(const Dense<T>& p, Dense<T>* g, std::vector<detail::chain_entry<T>>& chain,
                     bool) const {
    detail::chain_entry<T> e;
    e.layer = const_cast<Dense<T>*>(&p);  // the engine writes only through it in sgd mode
    e.grad = g;
    chain.push_back(e);
    return true;
  }
};

/// A dense layer from `in` to `out` features, initialised as flax's Dense: lecun_normal kernel,
/// zero bias. Throws grove::argument_error for sizes <= 0.
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

// --- layer norm
// ------------------------------------------------------------------------------------

/// The parameters of a layer norm: one scale and one bias per feature (key paths .scale, .bias).
template <class T>
struct LayerNormParams {
  Vector<T> scale;
  Vector<T> bias;
};
GROVE_NODE(LayerNormParams, scale, bias);

/// flax.linen.LayerNorm over the features of each example (column): with mean m and variance v
/// of the column (v = mean((x - m)^2), computed in two passes), y = (x - m) / sqrt(v + eps) *
/// scale + bias. Parameters: scale (ones), bias (zeros).
struct LayerNorm {
  Index features = 0;
  double eps = 1e-6;

  std::string name() const { return "LayerNorm(" + std::to_string(features) + ")"; }
  Index input_features() const { return features; }
  static constexpr bool shares_team = true;
  /// The normalised input and each column's 1 / sqrt(v + eps), for the backward pass.
  Index saved_size(Index in, Index batch) const {
    return detail::aligned(in * batch) + detail::aligned(batch);
  }

  template <class T>
  LayerNormParams<T> init(const random::Key&) const {
    return {Vector<T>::Ones(features), Vector<T>::Zero(features)};
  }

  template <class T>
  void check_params(const char* function, const LayerNormParams<T>& p,
                    const detail::layer_path& path) const {
    if (p.scale.size() != features || p.bias.size() != features)
      detail::fail_shape(function, "layer " + path.str() + " (" + name() +
                                       ") has parameters scale (" + std::to_string(p.scale.size()) +
                                       ") and bias (" + std::to_string(p.bias.size()) +
                                       "), expected (" + std::to_string(features) + ") each");
  }

  template <class T>
  void forward(const LayerNormParams<T>& p, ConstMatrixMap<T> x, MatrixMap<T> y, std::span<T> saved,
               const layer_context& ctx) const {
    const Index n = x.rows(), batch = x.cols();
    const T e = static_cast<T>(eps);
    T* xhat = saved.data();
    T* rstd = saved.data() + detail::aligned(n * batch);
    // Each thread its own examples (columns).
    const detail::Range cols = detail::share(batch, ctx.thread, ctx.threads, 1);
    for (Index j = cols.begin; j < cols.end; ++j) {
      const auto xj = x.col(j).array();
      const T mean = xj.sum() / static_cast<T>(n);
      const T var = (xj - mean).square().sum() / static_cast<T>(n);
      const T r = T(1) / std::sqrt(var + e);
      auto yj = y.col(j).array();
      yj = (xj - mean) * r;
      if (ctx.training) {
        Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(xhat + j * n, n) = yj;
        rstd[j] = r;
      }
      yj = yj * p.scale.array() + p.bias.array();
    }
    team_barrier(ctx);
  }

  /// dscale = sum over examples of dy xhat, dbias = sum of dy; with g = dy scale,
  /// dx = rstd (g - mean(g) - xhat mean(g xhat)) per column.
  template <class T>
  void backward(const LayerNormParams<T>& p, ConstMatrixMap<T> x, ConstMatrixMap<T>,
                ConstMatrixMap<T> dy, LayerNormParams<T>& g, MatrixMap<T> dx, std::span<T> saved,
                const layer_context& ctx) const {
    const Index n = x.rows(), batch = x.cols();
    const T* xhat = saved.data();
    const T* rstd = saved.data() + detail::aligned(n * batch);
    // The parameters' gradients, sums over the examples: each thread its own features, summed in
    // example order (as one thread sums them).
    const detail::Range rows = detail::share(n, ctx.thread, ctx.threads);
    if (!rows.empty()) {
      auto gs = g.scale.segment(rows.begin, rows.size()).array();
      auto gb = g.bias.segment(rows.begin, rows.size()).array();
      gs.setZero();
      gb.setZero();
      for (Index j = 0; j < batch; ++j) {
        const auto dyj = dy.col(j).segment(rows.begin, rows.size()).array();
        gs += dyj * Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(xhat + j * n + rows.begin,
                                                                         rows.size());
        gb += dyj;
      }
    }
    // The input's gradient, per example: each thread its own examples.
    if (dx.size() != 0) {
      const detail::Range cols = detail::share(batch, ctx.thread, ctx.threads, 1);
      for (Index j = cols.begin; j < cols.end; ++j) {
        const Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> xh(xhat + j * n, n);
        const auto gj = dy.col(j).array() * p.scale.array();
        const T mean_g = gj.sum() / static_cast<T>(n);
        const T mean_gx = (gj * xh).sum() / static_cast<T>(n);
        dx.col(j).array() = rstd[j] * (gj - mean_g - xh * mean_gx);
      }
    }
    team_barrier(ctx);
  }
};

/// A layer norm over `features` features with epsilon eps (flax's default 1e-6). Throws
/// grove::argument_error for features <= 0 or eps < 0.
inline LayerNorm layer_norm(Index features, double eps = 1e-6) {
  if (features <= 0)
    detail::fail("layer_norm", "features must be positive, got " + std::to_string(features));
  if (!(eps >= 0)) detail::fail("layer_norm", "eps must be >= 0, got " + std::to_string(eps));
  return LayerNorm{features, eps};
}

// --- dropout
// ---------------------------------------------------------------------------------------

/// flax.linen.Dropout: in a training pass with a key, each element is kept with probability
/// keep = 1 - rate and then scaled by 1 / keep, or set to 0; the identity in nn::apply and
/// whenever the pass has no key. The mask is grove::random::bernoulli<float>(key, keep, features *
/// batch) of the layer's own key (split from the step's key in layer order: see nn::sequential),
/// element i of it for element i of the batch in memory (feature f of example j at f + j *
/// features), which is flax's mask of a (batch, features) array in row-major order. A kept element
/// is x * (1 / keep), the reciprocal rounded once: flax writes x / keep, and XLA computes that
/// division by a constant as this product, so the outputs (and the vector-Jacobian product) are
/// flax's bit for bit. keep is rounded to float as JAX's default float32 has it, in double too;
/// under jax_enable_x64 flax draws its mask from float64 uniforms, and the masks differ.
struct Dropout {
  double rate = 0;

  std::string name() const { return "Dropout(" + std::to_string(rate) + ")"; }
  static constexpr bool shares_team = true;  // (its passes run on the team's first thread)
  Index saved_size(Index in, Index batch) const { return rate > 0 ? in * batch : 0; }

  template <class T>
  std::monostate init(const random::Key&) const {
    return {};
  }
  bool active(const layer_context& ctx) const { return rate > 0 && ctx.training && ctx.key; }

  template <class T>
  void forward(const std::monostate& p, ConstMatrixMap<T> x, MatrixMap<T> y, std::span<T> saved,
               const layer_context& ctx) const {
    if (ctx.threads > 1) {
      if (ctx.thread == 0)
        forward<T>(p, x, y, saved,
                   layer_context{ctx.training, ctx.key, ctx.detail, 0, 1, nullptr, ctx.policy});
      team_barrier(ctx);
      return;
    }
    if (!active(ctx)) {
      y = x;
      return;
    }
    const float keep = static_cast<float>(1.0 - rate);
    detail::dropout_mask_sink<T> sink{saved.data(), keep};
    random::detail::generate<std::uint32_t>(*ctx.key, static_cast<std::uint64_t>(x.size()),
                                            random::detail::schedule{1, 0}, sink);
    const T scale = T(1) / static_cast<T>(keep);  // XLA's x / keep (see the struct's comment)
    const auto m = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(saved.data(), x.size())
                       .reshaped(x.rows(), x.cols());
    y.array() = (m > T(0)).select(x.array() * scale, T(0));
  }

  template <class T>
  void backward(const std::monostate& p, ConstMatrixMap<T> x, ConstMatrixMap<T> y,
                ConstMatrixMap<T> dy, std::monostate& g, MatrixMap<T> dx, std::span<T> saved,
                const layer_context& ctx) const {
    if (ctx.threads > 1) {
      if (ctx.thread == 0)
        backward<T>(p, x, y, dy, g, dx, saved,
                    layer_context{ctx.training, ctx.key, ctx.detail, 0, 1, nullptr, ctx.policy});
      team_barrier(ctx);
      return;
    }
    if (dx.size() == 0) return;
    if (!active(ctx)) {
      dx = dy;
      return;
    }
    const T scale = T(1) / static_cast<T>(static_cast<float>(1.0 - rate));
    const auto m = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(saved.data(), dy.size())
                       .reshaped(dy.rows(), dy.cols());
    dx.array() = (m > T(0)).select(dy.array() * scale, T(0));
  }

  template <class T>
  bool collect_chain(const std::monostate&, std::monostate*, std::vector<detail::chain_entry<T>>&,
                     bool has_key) const {
    return rate == 0 || !has_key;  // the identity then
  }
};

/// Dropout with the given rate in [0, 1) (flax's semantics: see Dropout). Throws
/// grove::argument_error for a rate outside [0, 1).
inline Dropout dropout(double rate) {
  if (!(rate >= 0 && rate < 1))
    detail::fail("dropout", "rate must be in [0, 1), got " + std::to_string(rate));
  return Dropout{rate};
}

// --- residual ------------------------------------------------------------------------------------

/// y = x + block(x). The block must keep the width (checked before a pass, naming the layer).
/// Its parameters are the block's own (no extra level: `residual(sequential(layer_norm, ...))` at
/// position 2 of a model has key paths [2][0].scale, ...).
template <class Block>
struct Residual {
  Block block;

  std::string name() const { return "Residual"; }
  static constexpr bool shares_team = detail::shares_team<Block>();
  template <class T>
  auto init(const random::Key& key) const {
    return detail::init_layer<T>(block, key);
  }
  /// The block's output, the gradient of the block's input, and the block's own memory.
  Index saved_size(Index in, Index batch) const {
    return 2 * detail::aligned(in * batch) + detail::saved_size(block, in, batch);
  }
  Index check_shapes(const char* function, Index in, const detail::layer_path& path) const {
    const Index out = detail::check_layer(function, block, in, path);
    if (out != in)
      detail::fail_shape(function, "layer " + path.str() + " (Residual): its block maps " +
                                       std::to_string(in) + " features to " + std::to_string(out) +
                                       "; a residual block must keep the width");
    return in;
  }
  template <class P>
  void check_params(const char* function, const P& p, const detail::layer_path& path) const {
    detail::check_layer_params(function, block, p, path);
  }

  template <class T, class P>
  void forward(const P& p, ConstMatrixMap<T> x, MatrixMap<T> y, std::span<T> saved,
               const layer_context& ctx) const {
    const Index n = x.size();
    MatrixMap<T> by(saved.data(), x.rows(), x.cols());
    detail::forward_layer<T>(block, p, x, by, inner(saved, n), ctx);
    const detail::Range r = detail::share(n, ctx.thread, ctx.threads);
    if (!r.empty())
      detail::flat_part(y.data(), r) =
          detail::flat_part(x.data(), r) + detail::flat_part(by.data(), r);
    team_barrier(ctx);
  }
  template <class T, class P>
  void backward(const P& p, ConstMatrixMap<T> x, ConstMatrixMap<T>, ConstMatrixMap<T> dy, P& g,
                MatrixMap<T> dx, std::span<T> saved, const layer_context& ctx) const {
    const Index n = x.size();
    ConstMatrixMap<T> by(saved.data(), x.rows(), x.cols());
    const bool want_dx = dx.size() != 0;
    MatrixMap<T> dxb(saved.data() + detail::aligned(n), want_dx ? x.rows() : 0,
                     want_dx ? x.cols() : 0);
    detail::backward_layer<T>(block, p, x, by, dy, g, dxb, inner(saved, n), ctx);
    if (want_dx) {
      const detail::Range r = detail::share(n, ctx.thread, ctx.threads);
      if (!r.empty())
        detail::flat_part(dx.data(), r) =
            detail::flat_part(dy.data(), r) + detail::flat_part(dxb.data(), r);
    }
    team_barrier(ctx);
  }

 private:
  template <class T>
  static std::span<T> inner(std::span<T> saved, Index n) {
    return saved.subspan(static_cast<std::size_t>(2 * detail::aligned(n)));
  }
};

/// y = x + block(x) (see Residual).
template <class Block>
Residual<std::remove_cvref_t<Block>> residual(Block&& block) {
  return {std::forward<Block>(block)};
}

// --- sequential
// ------------------------------------------------------------------------------------

namespace detail {

// Calls visit(i, place) for each child in order, given sizes(i, in) = {child i's outputs, its
// own memory} for `in` features; returns {total memory, offset of g0, widest intermediate output}.
template <class Sizes, class Visit>
std::array<Index, 3> layout(std::size_t n, Index in, Index batch, Sizes&& sizes, Visit&& visit) {
  Index at = 0, widest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    child_place c;
    c.in = in;
    const auto [out, saved] = sizes(i, in);
    c.out = out;
    if (i + 1 < n) {
      c.output_at = at;
      at += aligned(c.out * batch);
      widest = std::max(widest, c.out);
    }
    c.saved_at = at;
    c.saved = saved;
    at += aligned(c.saved);
    visit(i, c);
    in = c.out;
  }
  const Index g = at;
  at += 2 * aligned(widest * batch);
  return {at, g, widest};
}

// sizes for layout from a sequence's with_child (see sequence_forward), whichever arguments it
// hands its function.
template <class WithChild>
auto child_sizes(WithChild& with_child, Index batch) {
  return [&with_child, batch](std::size_t i, Index in) {
    std::array<Index, 2> s{};
    with_child(i, [&](const auto& l, auto&&...) {
      s = {output_features(l, in), saved_size(l, in, batch)};
    });
    return s;
  };
}

// The places of a sequence's n children for one pass (forward or backward), computed once on
// entry. They live in the calling thread's stack of places in the workspace, which keeps its
// memory from pass to pass (a child that is a sequence pushes its own above these and pops them
// when it returns; so places are read by value, never by reference); without grove's workspace
// (a layer called outside grove's passes), in memory of their own.
template <class T>
class sequence_places {
 public:
  template <class WithChild>
  sequence_places(std::size_t n, WithChild& with_child, Index in, Index batch,
                  const layer_context& ctx)
      : stack_(stack_of(ctx)), base_(stack_->size()) {
    stack_->resize(base_ + n);
    const auto [total, g_at, widest] =
        layout(n, in, batch, child_sizes(with_child, batch),
               [&](std::size_t i, const child_place& c) { (*stack_)[base_ + i] = c; });
    (void)total;
    g_at_ = g_at;
    widest_ = widest;
  }
  ~sequence_places() { stack_->resize(base_); }
  sequence_places(const sequence_places&) = delete;
  sequence_places& operator=(const sequence_places&) = delete;

  child_place operator[](std::size_t i) const { return (*stack_)[base_ + i]; }
  Index g_at() const { return g_at_; }      // where the gradients between the children start
  Index widest() const { return widest_; }  // the widest output but the last

 private:
  std::vector<child_place>* stack_of(const layer_context& ctx) {
    if (ctx.detail == nullptr) return &own_;
    auto& all = static_cast<Workspace<T>*>(ctx.detail)->places_;
    // (In a team the pass has made one per thread before the team started: see model.hpp.)
    const auto t = static_cast<std::size_t>(ctx.thread);
    if (ctx.threads == 1 && all.size() <= t) all.resize(t + 1);
    return &all[t];
  }

  std::vector<child_place> own_;
  std::vector<child_place>* stack_;
  std::size_t base_;
  Index g_at_ = 0, widest_ = 0;
};

// The context of child i: the sequence's, with the child's own key (fold_in(key, i)).
inline layer_context child_context(const layer_context& ctx, std::size_t i, random::Key& key) {
  layer_context child = ctx;
  if (ctx.key) {
    key = random::fold_in(*ctx.key, static_cast<std::uint32_t>(i));
    child.key = &key;
  }
  return child;
}

// The passes of a sequence of n children, whatever holds them (a tuple or a vector):
// with_child(i, f) calls f(child_layer, its params, its grads or nullptr). A dense layer followed
// by an activation runs as one step: each thread applies the activation (forward), or its
// derivative (backward), to the piece of the product it has just computed, while it is in cache,
// as the fused engine does.
template <class T, class WithChild>
void sequence_forward(std::size_t n, WithChild&& with_child, ConstMatrixMap<T> x, MatrixMap<T> y,
                      std::span<T> saved, const layer_context& ctx) {
  const Index batch = x.cols();
  const sequence_places<T> places(n, with_child, x.rows(), batch, ctx);
  const T* input = x.data();
  auto part = [&](const child_place& c) {
    return saved.subspan(static_cast<std::size_t>(c.saved_at), static_cast<std::size_t>(c.saved));
  };
  auto output_of = [&](const child_place& c) {
    return c.output_at < 0 ? y.data() : saved.data() + c.output_at;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const child_place c = places[i];
    T* out = output_of(c);
    random::Key key;
    const layer_context child = child_context(ctx, i, key);
    bool fused = false;  // child i + 1 runs with child i
    with_child(i, [&](const auto& l, const auto& p, auto*) {
      using L = std::remove_cvref_t<decltype(l)>;
      if constexpr (std::is_same_v<L, DenseLayer>) {
        if (i + 1 < n) {
          with_child(i + 1, [&](const auto& act, const auto&, auto*) {
            using A = std::remove_cvref_t<decltype(act)>;
            if constexpr (activation<A>) {
              const child_place next = places[i + 1];
              T* a = output_of(next);
              T* d = saved.data() + next.saved_at;
              const bool training = ctx.training;
              l.template forward_then<T>(p, ConstMatrixMap<T>(input, c.in, batch),
                                         MatrixMap<T>(out, c.out, batch), part(c), child,
                                         [&](Index j, Index begin, Index end) {
                                           const Index at = j * c.out + begin, len = end - begin;
                                           if (training) {
                                             std::copy(out + at, out + at + len, d + at);
                                             act.forward_train(d + at, a + at, len);
                                           } else {
                                             act.forward(out + at, a + at, len);
                                           }
                                         });
              out = a;
              fused = true;
            }
          });
        }
      }
      if (!fused)
        forward_layer<T>(l, p, ConstMatrixMap<T>(input, c.in, batch),
                         MatrixMap<T>(out, c.out, batch), part(c), child);
    });
    input = out;
    if (fused) ++i;  // the activation after it is done
  }
}

template <class T, class WithChild>
void sequence_backward(std::size_t n, WithChild&& with_child, ConstMatrixMap<T> x,
                       ConstMatrixMap<T> y, ConstMatrixMap<T> dy, MatrixMap<T> dx,
                       std::span<T> saved, const layer_context& ctx) {
  const Index batch = x.cols();
  const sequence_places<T> places(n, with_child, x.rows(), batch, ctx);
  T* g[2] = {saved.data() + places.g_at(),
             saved.data() + places.g_at() + aligned(places.widest() * batch)};
  // Where child r reads the gradient of its output, and where it writes that of its input.
  const T* d_out = dy.data();
  auto other = [&](const T* p) { return p == g[0] ? g[1] : g[0]; };
  auto input_of = [&](std::size_t r) -> const T* {
    if (r == 0) return x.data();
    return saved.data() + places[r - 1].output_at;
  };
  auto part = [&](const child_place& c) {
    return saved.subspan(static_cast<std::size_t>(c.saved_at), static_cast<std::size_t>(c.saved));
  };
  for (std::size_t r = n; r-- > 0;) {
    const child_place c = places[r];
    const T* input = input_of(r);
    const T* output = c.output_at < 0 ? y.data() : saved.data() + c.output_at;
    random::Key key;
    const layer_context child = child_context(ctx, r, key);
    bool fused = false;
    with_child(r, [&](const auto& l, const auto& p, auto* gp) {
      using L = std::remove_cvref_t<decltype(l)>;
      if constexpr (std::is_same_v<L, DenseLayer>) {
        if (r > 0) {
          with_child(r - 1, [&](const auto& act, const auto&, auto*) {
            using A = std::remove_cvref_t<decltype(act)>;
            if constexpr (activation<A>) {
              // dx of the dense layer, times f' of the activation before it, in place: the
              // gradient of the activation's input.
              const child_place prev = places[r - 1];
              const bool want = r - 1 > 0 || dx.size() != 0;
              T* d_in = r - 1 == 0 ? dx.data() : other(d_out);
              const T* d = saved.data() + prev.saved_at;
              l.template backward_then<T>(p, ConstMatrixMap<T>(input, c.in, batch),
                                          ConstMatrixMap<T>(output, c.out, batch),
                                          ConstMatrixMap<T>(d_out, c.out, batch), *gp,
                                          MatrixMap<T>(d_in, want ? c.in : 0, want ? batch : 0),
                                          part(c), child, [&](Index j, Index begin, Index end) {
                                            const Index at = j * c.in + begin;
                                            flat_part(d_in, Range{at, at + end - begin}) *=
                                                flat_part(d, Range{at, at + end - begin});
                                          });
              d_out = d_in;
              fused = true;
            }
          });
        }
      }
      if (!fused) {
        const bool want_dx = r > 0 || dx.size() != 0;
        T* d_in = r == 0 ? dx.data() : other(d_out);
        backward_layer<T>(
            l, p, ConstMatrixMap<T>(input, c.in, batch), ConstMatrixMap<T>(output, c.out, batch),
            ConstMatrixMap<T>(d_out, c.out, batch), *gp,
            MatrixMap<T>(d_in, want_dx ? c.in : 0, want_dx ? batch : 0), part(c), child);
        d_out = d_in;
      }
    });
    if (fused) --r;  // the activation before it is done
  }
}

template <class WithChild>
Index sequence_saved_size(std::size_t n, WithChild&& with_child, Index in, Index batch) {
  return layout(n, in, batch, child_sizes(with_child, batch),
                [](std::size_t, const child_place&) {})[0];
}

}  // namespace detail

/// Layers applied one after the other (flax.linen.Sequential): a model of its own, and a layer of
/// a larger one. Its parameters are a std::tuple with one child per layer, in order (a layer
/// without parameters contributes std::monostate, JAX's None), so key paths are [0].w,
/// [2][0].scale. Layer i initialises from, and (dropout) draws its masks from, split(key, n)[i] ==
/// fold_in(key, i) of the sequence's key.
template <class... Layers>
struct Sequential {
  static_assert(sizeof...(Layers) > 0, "grove: nn::sequential needs at least one layer");
  std::tuple<Layers...> layers;

  static constexpr std::size_t size() { return sizeof...(Layers); }
  std::string name() const { return "Sequential"; }
  static constexpr bool shares_team = (detail::shares_team<Layers>() && ...);

  template <class T>
  std::tuple<params_t<Layers, T>...> init(const random::Key& key) const {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple<params_t<Layers, T>...>{detail::init_layer<T>(
          std::get<I>(layers), random::fold_in(key, static_cast<std::uint32_t>(I)))...};
    }
    (std::index_sequence_for<Layers...>{});
  }

  Index output_features(Index in) const {
    detail::for_index<size()>(
        [&](auto i) { in = detail::output_features(std::get<i>(layers), in); });
    return in;
  }
  Index saved_size(Index in, Index batch) const {
    return detail::sequence_saved_size(
        size(), [&](std::size_t i, auto&& f) { visit(i, [&](const auto& l) { f(l); }); }, in,
        batch);
  }
  Index check_shapes(const char* function, Index in, const detail::layer_path& path) const {
    detail::for_index<size()>([&](auto i) {
      in = detail::check_layer(function, std::get<i>(layers), in, path.child(i));
    });
    return in;
  }
  template <class P>
  void check_params(const char* function, const P& p, const detail::layer_path& path) const {
    detail::for_index<size()>([&](auto i) {
      detail::check_layer_params(function, std::get<i>(layers), std::get<i>(p), path.child(i));
    });
  }

  template <class T, class P>
  void forward(const P& p, ConstMatrixMap<T> x, MatrixMap<T> y, std::span<T> saved,
               const layer_context& ctx) const {
    detail::sequence_forward<T>(
        size(),
        [&](std::size_t i, auto&& f) {
          visit(i,
                [&](const auto& l, auto ic) { f(l, std::get<ic>(p), (std::nullptr_t*)nullptr); });
        },
        x, y, saved, ctx);
  }
  template <class T, class P>
  void backward(const P& p, ConstMatrixMap<T> x, ConstMatrixMap<T> y, ConstMatrixMap<T> dy, P& g,
                MatrixMap<T> dx, std::span<T> saved, const layer_context& ctx) const {
    detail::sequence_backward<T>(
        size(),
        [&](std::size_t i, auto&& f) {
          visit(i, [&](const auto& l, auto ic) { f(l, std::get<ic>(p), &std::get<ic>(g)); });
        },
        x, y, dy, dx, saved, ctx);
  }
  template <class T, class P>
  bool collect_chain(const P& p, P* g, std::vector<detail::chain_entry<T>>& chain,
                     bool has_key) const {
    bool ok = true;
    detail::for_index<size()>([&](auto i) {
      if (ok)
        ok = detail::collect_chain<T>(std::get<i>(layers), std::get<i>(p),
                                      g ? &std::get<i>(*g) : nullptr, chain, has_key);
    });
    return ok;
  }

 private:
  // f(layer i) or f(layer i, integral_constant i), for a run-time i.
  template <class F>
  void visit(std::size_t i, F&& f) const {
    detail::for_index<size()>([&](auto ic) {
      if (ic == i) {
        if constexpr (std::is_invocable_v<
                          F&, const std::tuple_element_t<ic, std::tuple<Layers...>>&, decltype(ic)>)
          f(std::get<ic>(layers), ic);
        else
          f(std::get<ic>(layers));
      }
    });
  }
};

/// A sequence of layers of one type whose number is known at run time (a model assembled from a
/// program's options): parameters are a std::vector with one child per layer. Built by
/// nn::sequential(std::vector<L>{...}); key paths and keys as Sequential's.
template <class L>
struct Stack {
  std::vector<L> layers;

  std::size_t size() const { return layers.size(); }
  std::string name() const { return "Sequential"; }
  static constexpr bool shares_team = detail::shares_team<L>();

  template <class T>
  std::vector<params_t<L, T>> init(const random::Key& key) const {
    std::vector<params_t<L, T>> out;
    out.reserve(layers.size());
    for (std::size_t i = 0; i < layers.size(); ++i)
      out.push_back(
          detail::init_layer<T>(layers[i], random::fold_in(key, static_cast<std::uint32_t>(i))));
    return out;
  }
  Index output_features(Index in) const {
    for (const auto& l : layers) in = detail::output_features(l, in);
    return in;
  }
  Index saved_size(Index in, Index batch) const {
    if (layers.empty()) return 0;
    return detail::sequence_saved_size(
        size(), [&](std::size_t i, auto&& f) { f(layers[i]); }, in, batch);
  }
  Index check_shapes(const char* function, Index in, const detail::layer_path& path) const {
    for (std::size_t i = 0; i < layers.size(); ++i)
      in = detail::check_layer(function, layers[i], in, path.child(static_cast<std::int64_t>(i)));
    return in;
  }
  template <class P>
  void check_params(const char* function, const std::vector<P>& p,
                    const detail::layer_path& path) const {
    if (p.size() != layers.size())
      throw tree_error("grove::nn::" + std::string(function) + ": layer " + path.str() + " has " +
                       std::to_string(layers.size()) + " layers but its parameters have " +
                       std::to_string(p.size()) + " children");
    for (std::size_t i = 0; i < layers.size(); ++i)
      detail::check_layer_params(function, layers[i], p[i],
                                 path.child(static_cast<std::int64_t>(i)));
  }

  template <class T, class P>
  void forward(const std::vector<P>& p, ConstMatrixMap<T> x, MatrixMap<T> y, std::span<T> saved,
               const layer_context& ctx) const {
    if (layers.empty()) {
      if (ctx.thread == 0) y = x;
      team_barrier(ctx);
      return;
    }
    detail::sequence_forward<T>(
        size(), [&](std::size_t i, auto&& f) { f(layers[i], p[i], (P*)nullptr); }, x, y, saved,
        ctx);
  }
  template <class T, class P>
  void backward(const std::vector<P>& p, ConstMatrixMap<T> x, ConstMatrixMap<T> y,
                ConstMatrixMap<T> dy, std::vector<P>& g, MatrixMap<T> dx, std::span<T> saved,
                const layer_context& ctx) const {
    if (layers.empty()) {
      if (dx.size() != 0 && ctx.thread == 0) dx = dy;
      team_barrier(ctx);
      return;
    }
    detail::sequence_backward<T>(
        size(), [&](std::size_t i, auto&& f) { f(layers[i], p[i], &g[i]); }, x, y, dy, dx, saved,
        ctx);
  }
  template <class T, class P>
  bool collect_chain(const std::vector<P>& p, std::vector<P>* g,
                     std::vector<detail::chain_entry<T>>& chain, bool has_key) const {
    for (std::size_t i = 0; i < layers.size(); ++i)
      if (!detail::collect_chain<T>(layers[i], p[i], g ? &(*g)[i] : nullptr, chain, has_key))
        return false;
    return true;
  }
};

/// Layers applied in order: nn::sequential(nn::dense(784, 256), nn::swish, nn::dense(256, 10)).
/// Sequences nest freely.
template <class... Layers>
Sequential<std::remove_cvref_t<Layers>...> sequential(Layers&&... layers) {
  return {std::tuple<std::remove_cvref_t<Layers>...>(std::forward<Layers>(layers)...)};
}

/// A sequence of layers of one type, as many as the vector holds (see Stack).
template <class L>
Stack<L> sequential(std::vector<L> layers) {
  return {std::move(layers)};
}

}  // namespace grove::nn
