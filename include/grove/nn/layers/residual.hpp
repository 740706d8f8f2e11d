// grove/nn/layers/residual.hpp: y = x + block(x), nn::residual(block).
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

#include "grove/nn/detail/layer_dispatch.hpp"

namespace grove::nn {

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

}  // namespace grove::nn
