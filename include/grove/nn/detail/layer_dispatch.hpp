// grove/nn/detail/layer_dispatch.hpp: what grove calls on any layer: the protocol's optional
// members with their defaults, the products' precision, and the epilogue hooks of the fused path.
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
#include "grove/nn/detail/pass_memory.hpp"
#include "grove/nn/layer.hpp"
#include "grove/tree.hpp"

namespace grove::nn::detail {

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
  auto& s = static_cast<pass_memory<T>*>(ctx.detail)->scratch;
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

// The fusion hooks a layer may offer (the dense layer does; a user's layer may too): a forward
// pass that hands each finished block of its output to an epilogue, epilogue(column, begin, end),
// so that the activation after it runs on the block while it is in cache; and a backward pass that
// does the same for each block of its input gradient, which the derivative of the activation
// before it then multiplies.
template <class L, class T, class P>
concept fuses_activation_after = requires(const L& l, const P& p, ConstMatrixMap<T> x,
                                          MatrixMap<T> y, std::span<T> saved,
                                          const layer_context& ctx) {
  l.template forward_then<T>(p, x, y, saved, ctx, no_epilogue{});
};
template <class L, class T, class P, class G>
concept fuses_activation_before = requires(const L& l, const P& p, ConstMatrixMap<T> x,
                                           ConstMatrixMap<T> y, ConstMatrixMap<T> dy, G& g,
                                           MatrixMap<T> dx, std::span<T> saved,
                                           const layer_context& ctx) {
  l.template backward_then<T>(p, x, y, dy, g, dx, saved, ctx, no_epilogue{});
};

template <std::size_t N, class F>
void for_index(F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f(std::integral_constant<std::size_t, I>{}), ...);
  }
  (std::make_index_sequence<N>{});
}

}  // namespace grove::nn::detail
