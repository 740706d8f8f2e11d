// grove/nn/layers/sequential.hpp: layers applied one after the other, nn::sequential(layers...),
// and a stack of copies of one layer.
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
#include "grove/nn/detail/sequence.hpp"

namespace grove::nn {

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
