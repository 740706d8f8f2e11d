// grove/io/layouts.hpp: the names and layouts of PyTorch's and Flax's checkpoints, as
// load_options::rename and load_options::transpose: torch_sequential_names, flax_dense_names,
// flax_kernels.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "grove/io/detail/leaf_codec.hpp"

namespace grove::io {

namespace detail {

// The leaves' simple key paths, for the name maps that follow the tree's structure.
template <class Tree>
std::unordered_set<std::string> leaf_names(const Tree& like, std::string_view function) {
  std::unordered_set<std::string> out;
  for (auto& leaf : named_leaves(like, function)) out.insert(std::move(leaf.name));
  return out;
}

// The layers of `like` that have a leaf called `field`, in leaf order: "0" and "3" for the "w"
// of nn::sequential(dense, layer_norm, relu, dense), "1" for its "scale" ("" for a top-level
// leaf).
template <class Tree>
std::vector<std::string> layers_with(const Tree& like, std::string_view field,
                                     std::string_view function) {
  std::vector<std::string> out;
  for (const auto& leaf : named_leaves(like, function)) {
    const auto slash = leaf.name.rfind('/');
    const std::string_view name(leaf.name);
    if (name.substr(slash == std::string::npos ? 0 : slash + 1) != field) continue;
    std::string layer(name.substr(0, slash == std::string::npos ? 0 : slash));
    if (std::find(out.begin(), out.end(), layer) == out.end()) out.push_back(std::move(layer));
  }
  return out;
}

// The first of `candidates` that, after `layer` + "/", names a leaf; the first candidate when
// none does (or when there are no leaves to ask), so that a strict load lists the tensor.
inline std::string leaf_among(std::string_view layer,
                              std::initializer_list<std::string_view> fields,
                              const std::unordered_set<std::string>* leaves) {
  const std::string base = layer.empty() ? std::string() : std::string(layer) + "/";
  if (leaves)
    for (const std::string_view field : fields)
      if (std::string name = base + std::string(field); leaves->contains(name)) return name;
  return base + std::string(*fields.begin());
}

// torch_sequential_names' mapping; `leaves` null: every "weight" is a Linear's.
inline std::string torch_name(std::string_view name, std::string_view prefix,
                              const std::unordered_set<std::string>* leaves) {
  if (!name.starts_with(prefix)) return std::string(name);
  std::string out(name.substr(prefix.size()));
  std::replace(out.begin(), out.end(), '.', '/');
  const auto slash = out.rfind('/');
  const std::string_view layer =
      std::string_view(out).substr(0, slash == std::string::npos ? 0 : slash);
  const std::string_view last =
      std::string_view(out).substr(slash == std::string::npos ? 0 : slash + 1);
  // nn.Linear's weight and bias are grove's Dense w and b, nn.LayerNorm's grove's scale and bias.
  if (last == "weight") return leaf_among(layer, {"w", "scale"}, leaves);
  if (last == "bias") return leaf_among(layer, {"b", "bias"}, leaves);
  return out;
}

// The K of a Flax module name "KIND_K/..." at the start of `rest` (decimal, no leading zero, at
// most 9 digits), and the rest after the '/'; nothing if `rest` is not one.
inline std::optional<std::pair<std::size_t, std::string_view>> flax_module(std::string_view rest,
                                                                           std::string_view kind) {
  if (!rest.starts_with(kind) || rest.substr(kind.size()).substr(0, 1) != "_") return std::nullopt;
  rest.remove_prefix(kind.size() + 1);
  const auto slash = rest.find('/');
  const std::string_view digits = rest.substr(0, slash);
  if (slash == std::string_view::npos || digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      (digits.size() > 1 && digits[0] == '0'))
    return std::nullopt;
  std::size_t k = 0;
  for (const char c : digits) k = k * 10 + static_cast<std::size_t>(c - '0');
  return std::pair{k, rest.substr(slash + 1)};
}

}  // namespace detail

/// A load_options::rename for a PyTorch state_dict of an `nn.Sequential` of `nn.Linear` layers
/// (and activations), loaded into grove's parameters of the same sequence: the params of
/// `nn::sequential(nn::dense(4, 3), nn::relu, nn::dense(3, 2))`, or the std::vector<nn::Dense>
/// of nn::init_network_params. torch's "0.weight" (out, in) is grove's "0/w" (out, in), "0.bias"
/// its "0/b": the indices are the same, since torch numbers activations as grove does.
///
/// `prefix` ("model.", "net.") is removed from the names that start with it; then each '.' becomes
/// '/', and a last component "weight" becomes "w", "bias" "b" ("encoder.2.bias" with prefix
/// "encoder." is "2/b"). Names without the prefix are kept as they are, so that a strict load
/// lists them; other buffers ("1.running_mean") pass through the same way.
///
/// Without the tree it cannot tell an `nn.LayerNorm`'s weight from a Linear's: for a model with
/// norm layers use torch_sequential_names(params, prefix).
inline std::function<std::string(std::string_view)> torch_sequential_names(
    std::string prefix = {}) {
  return [prefix = std::move(prefix)](std::string_view name) {
    return detail::torch_name(name, prefix, nullptr);
  };
}

/// The same for a state_dict of `nn.Linear` and `nn.LayerNorm` layers (and activations), told
/// apart by the tree they load into, `like` (the params of `nn::sequential(nn::dense(4, 3),
/// nn::layer_norm(3, 1e-5), nn::relu, nn::dense(3, 2))`): "K.weight" becomes "K/w" where `like`
/// has a leaf "K/w" (grove's Dense), else "K/scale" where it has "K/scale" (grove's LayerNorm),
/// and "K.bias" "K/b" or "K/bias" likewise; where `like` has neither, "K/w" and "K/b", so that a
/// strict load lists the tensor. The rest is as for torch_sequential_names(prefix). Only the
/// names of `like`'s leaves are kept, not the tree. (PyTorch's LayerNorm defaults to eps = 1e-5,
/// flax's and grove's to 1e-6: give grove's layer_norm torch's eps.)
///
/// Throws grove::argument_error if two of `like`'s leaves share a simple key path.
template <class Tree>
requires(!std::is_convertible_v<const Tree&, std::string_view>)
    std::function<std::string(std::string_view)> torch_sequential_names(const Tree& like,
                                                                        std::string prefix = {}) {
  return [prefix = std::move(prefix),
          leaves = detail::leaf_names(like, "grove::io::torch_sequential_names")](
             std::string_view name) { return detail::torch_name(name, prefix, &leaves); };
}

/// A load_options::rename for Flax/Orbax-style trees of `nn.Dense` modules
/// ("params/Dense_0/kernel", "params/Dense_0/bias"), into grove's dense parameters: Dense_k's
/// kernel is grove's "L/w" and its bias "L/b", where L is `layers[k]` (grove's index of the k-th
/// dense layer: {0, 2} for `nn::sequential(nn::dense(4, 3), nn::relu, nn::dense(3, 2))`, where
/// Flax counts only the Dense modules), or k itself when `layers` is empty (the
/// std::vector<nn::Dense> of nn::init_network_params). Load with `.transpose = flax_kernels()`:
/// a Flax kernel is (in, out), grove's w (out, in).
///
/// Names that are not `prefix` + "Dense_K/kernel" or "Dense_K/bias", and Dense modules beyond
/// `layers`, are kept as they are, so that a strict load lists them. For a model with
/// `nn.LayerNorm` modules use flax_dense_names(params, prefix).
inline std::function<std::string(std::string_view)> flax_dense_names(
    std::vector<std::size_t> layers = {}, std::string prefix = "params/") {
  return [layers = std::move(layers), prefix = std::move(prefix)](std::string_view name) {
    if (!name.starts_with(prefix)) return std::string(name);
    const auto module = detail::flax_module(name.substr(prefix.size()), "Dense");
    if (!module || (module->second != "kernel" && module->second != "bias"))
      return std::string(name);
    const std::size_t k = module->first;
    if (!layers.empty() && k >= layers.size()) return std::string(name);
    const std::size_t layer = layers.empty() ? k : layers[k];
    return std::to_string(layer) + (module->second == "kernel" ? "/w" : "/b");
  };
}

/// The same for Flax trees of `nn.Dense` and `nn.LayerNorm` modules, placed by the tree they load
/// into, `like` (grove's params of a sequence of layers, such as those of
/// `nn::sequential(nn::dense(4, 3), nn::layer_norm(3), nn::relu, nn::dense(3, 2))`):
/// - "Dense_k/kernel" and "Dense_k/bias" are the "w" and "b" of the k-th layer of `like` that has
///   a leaf "w" (in leaf order: layer 3 for Dense_1 above);
/// - "LayerNorm_k/scale" and "LayerNorm_k/bias" are the "scale" and "bias" of the k-th layer that
///   has a leaf "scale" (layer 1 for LayerNorm_0);
/// - "layers_K/kernel", "layers_K/scale" and "layers_K/bias", the names `flax.linen.Sequential`
///   gives its K-th layer (activations counted, as grove counts them), are grove's layer K's
///   "w", "scale", and "b" or "bias" (whichever `like`'s layer K has).
/// Flax numbers a compact module's submodules per kind (Dense_0, LayerNorm_0, Dense_1), so the
/// k-th Dense is the k-th dense layer in `like`. Load with `.transpose = flax_kernels()`. Names
/// that are none of these after `prefix`, and a Dense_k or LayerNorm_k beyond `like`'s layers of
/// its kind, are kept as they are, so that a strict load lists them (as it lists a layers_K that
/// `like` lacks). Only the names of `like`'s leaves are kept, not the tree.
///
/// Throws grove::argument_error if two of `like`'s leaves share a simple key path.
template <class Tree>
requires(!std::is_convertible_v<const Tree&, std::vector<std::size_t>>)
    std::function<std::string(std::string_view)> flax_dense_names(const Tree& like,
                                                                  std::string prefix = "params/") {
  constexpr const char* function = "grove::io::flax_dense_names";
  return [prefix = std::move(prefix), dense = detail::layers_with(like, "w", function),
          norms = detail::layers_with(like, "scale", function),
          leaves = detail::leaf_names(like, function)](std::string_view name) {
    if (!name.starts_with(prefix)) return std::string(name);
    const std::string_view rest = name.substr(prefix.size());
    if (const auto m = detail::flax_module(rest, "Dense"); m && m->first < dense.size()) {
      if (m->second == "kernel") return detail::leaf_among(dense[m->first], {"w"}, nullptr);
      if (m->second == "bias") return detail::leaf_among(dense[m->first], {"b"}, nullptr);
    } else if (const auto n = detail::flax_module(rest, "LayerNorm");
               n && n->first < norms.size()) {
      if (n->second == "scale") return detail::leaf_among(norms[n->first], {"scale"}, nullptr);
      if (n->second == "bias") return detail::leaf_among(norms[n->first], {"bias"}, nullptr);
    } else if (const auto s = detail::flax_module(rest, "layers")) {
      const std::string layer = std::to_string(s->first);
      if (s->second == "kernel") return detail::leaf_among(layer, {"w"}, nullptr);
      if (s->second == "scale") return detail::leaf_among(layer, {"scale"}, nullptr);
      if (s->second == "bias") return detail::leaf_among(layer, {"b", "bias"}, &leaves);
    }
    return std::string(name);
  };
}

/// A load_options::transpose for Flax/JAX dense kernels: true for the names whose last component
/// is "kernel" ("params/Dense_0/kernel"), which are (in, out) where grove's w is (out, in).
inline std::function<bool(std::string_view)> flax_kernels() {
  return [](std::string_view name) { return name == "kernel" || name.ends_with("/kernel"); };
}

}  // namespace grove::io
