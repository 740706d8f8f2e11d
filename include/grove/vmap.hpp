// grove/vmap.hpp: jax.vmap for functions of Eigen arrays and pytrees: map a per-example function
// over the examples of batched arguments and stack its results.
//
//   auto batched = grove::vmap(grove::nn::predict, grove::in_axes(std::nullopt, 1));
//   Eigen::MatrixXf logits = batched(params, X);   // column j = predict(params, X.col(j))
//
// in_axes says, for each argument, which axis holds the examples:
//   1   a matrix's columns (grove's batches: Eigen is column-major, each column an example);
//   0   a matrix's rows (each row, as a column vector), or a vector's elements (each a scalar);
//   -1  the last axis: columns of a matrix, elements of a vector (the default for every argument);
//   std::nullopt   not mapped: the argument is passed whole to every call (JAX's None).
// An argument that is a pytree (a network, a tuple of matrices...) is mapped leaf by leaf with
// its axis, as JAX does. Results: a scalar per example stacks into a vector; a vector per example
// stacks into a matrix along out_axes (-1 or 1: as columns, the default; 0: as rows); a pytree of
// those stacks leaf by leaf.
//
// This is a loop over the examples, not a compiler transformation: it is the reference that a
// hand-batched function (like grove::nn::batched_predict, one GEMM per layer) is tested against.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "grove/error.hpp"
#include "grove/tree.hpp"
#include "grove/tree/eigen.hpp"

namespace grove {

/// The axes along which vmap maps each argument: ints (0, 1 or -1) and std::nullopt.
template <class... Axes>
struct in_axes_t {
  std::tuple<Axes...> axes;
};

/// in_axes(std::nullopt, 1): one entry per argument of the mapped function.
template <class... Axes>
constexpr in_axes_t<std::decay_t<Axes>...> in_axes(Axes... axes) {
  static_assert(((std::is_same_v<std::decay_t<Axes>, int> ||
                  std::is_same_v<std::decay_t<Axes>, std::nullopt_t>)&&...),
                "grove::in_axes: each entry is an int axis (0, 1 or -1) or std::nullopt");
  return {std::tuple<std::decay_t<Axes>...>(axes...)};
}

namespace detail {

template <class A>
constexpr bool vmap_one_dim() {
  return A::ColsAtCompileTime == 1 || A::RowsAtCompileTime == 1;
}

[[noreturn]] inline void vmap_fail(const std::string& what) {
  throw argument_error("grove::vmap: " + what);
}

// The axis of a leaf after resolving -1; throws if out of range.
template <class L>
int vmap_axis(const L&, int axis, std::size_t arg) {
  constexpr int dims = eigen_dense<L> ? (vmap_one_dim<L>() ? 1 : 2) : 0;
  if (dims == 0)
    vmap_fail("argument " + std::to_string(arg) +
              " has a scalar leaf, which has no axis to map over");
  const int resolved = axis < 0 ? axis + dims : axis;
  if (resolved < 0 || resolved >= dims)
    vmap_fail("in_axes entry " + std::to_string(arg) + " is " + std::to_string(axis) +
              ", out of range for a " + std::to_string(dims) + "-D argument");
  return resolved;
}

template <class L>
Eigen::Index vmap_size(const L& leaf, int axis) {
  if constexpr (vmap_one_dim<L>())
    return leaf.size();
  else
    return axis == 0 ? leaf.rows() : leaf.cols();
}

// Example j of a mapped leaf: a column (or a row as a column vector) of a matrix, an element of a
// vector.
template <class L>
decltype(auto) vmap_slice(const L& leaf, int axis, Eigen::Index j) {
  if constexpr (vmap_one_dim<L>()) {
    (void)axis;
    return leaf(j);
  } else {
    using V = Eigen::Matrix<typename L::Scalar, Eigen::Dynamic, 1>;
    if (axis == 0) return V(leaf.row(j).transpose());
    return V(leaf.col(j));
  }
}

// Example j of argument `arg` (passed whole when not mapped).
template <class Axis, class A>
decltype(auto) vmap_arg(const A& a, const Axis& axis, std::size_t arg, Eigen::Index j) {
  if constexpr (std::is_same_v<Axis, std::nullopt_t>) {
    return (a);
  } else if constexpr (eigen_dense<A>) {
    return vmap_slice(a, vmap_axis(a, axis, arg), j);
  } else {
    return tree_map(
        [&](const auto& leaf) { return vmap_slice(leaf, vmap_axis(leaf, axis, arg), j); }, a);
  }
}

// The number of examples along argument arg's axis (every leaf of a pytree must agree).
template <class Axis, class A>
void vmap_batch(const A& a, const Axis& axis, std::size_t arg, Eigen::Index& batch,
                std::size_t& from) {
  if constexpr (!std::is_same_v<Axis, std::nullopt_t>) {
    auto one = [&](const auto& leaf) {
      const Eigen::Index n = vmap_size(leaf, vmap_axis(leaf, axis, arg));
      if (batch < 0) {
        batch = n;
        from = arg;
      } else if (n != batch) {
        vmap_fail("inconsistent sizes for the mapped axes: argument " + std::to_string(from) +
                  " has " + std::to_string(batch) + " examples, argument " + std::to_string(arg) +
                  " has " + std::to_string(n));
      }
    };
    if constexpr (eigen_dense<A>)
      one(a);
    else
      tree_for_each([&](const auto& leaf) { one(leaf); }, a);
  }
}

// Output leaves: a scalar per example -> a vector; a vector per example -> a matrix.
template <class R>
auto vmap_alloc(const R& r, Eigen::Index batch, int out_axis) {
  if constexpr (std::is_arithmetic_v<R>) {
    (void)out_axis;
    return Eigen::Matrix<R, Eigen::Dynamic, 1>(batch);
  } else {
    static_assert(eigen_dense<R>,
                  "grove::vmap: a per-example result must be a scalar, an Eigen vector, or a "
                  "pytree of those");
    using S = typename R::Scalar;
    if (r.rows() != 1 && r.cols() != 1)
      vmap_fail("a per-example result must be a scalar or a vector, got a " +
                std::to_string(r.rows()) + "x" + std::to_string(r.cols()) + " matrix");
    return out_axis == 0 ? Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>(batch, r.size())
                         : Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>(r.size(), batch);
  }
}

template <class O, class R>
void vmap_put(O& out, const R& r, Eigen::Index j, int out_axis) {
  if constexpr (std::is_arithmetic_v<R>) {
    out(j) = r;
  } else {
    const Eigen::Index k = out_axis == 0 ? out.cols() : out.rows();
    if (r.size() != k)
      vmap_fail("the per-example results differ in size: " + std::to_string(k) +
                " for example 0, " + std::to_string(r.size()) + " for example " +
                std::to_string(j));
    if (out_axis == 0)
      out.row(j) = r.reshaped().transpose();
    else
      out.col(j) = r.reshaped();
  }
}

}  // namespace detail

/// The function object vmap returns.
template <class F, class... Axes>
class vmapped {
 public:
  vmapped(F f, in_axes_t<Axes...> in, int out_axes)
      : f_(std::move(f)), in_(std::move(in)), out_(out_axes) {
    if (out_axes != 0 && out_axes != 1 && out_axes != -1)
      detail::vmap_fail("out_axes must be 0, 1 or -1, got " + std::to_string(out_axes));
  }

  template <class... Args>
  auto operator()(const Args&... args) const {
    static_assert(sizeof...(Args) == sizeof...(Axes),
                  "grove::vmap: in_axes needs one entry per argument of the mapped function");
    static_assert(!(std::is_same_v<Axes, std::nullopt_t> && ...),
                  "grove::vmap: at least one argument must be mapped (an in_axes entry that is not "
                  "std::nullopt)");
    return call(std::index_sequence_for<Args...>{}, args...);
  }

 private:
  template <std::size_t... I, class... Args>
  auto call(std::index_sequence<I...>, const Args&... args) const {
    Eigen::Index batch = -1;
    std::size_t from = 0;
    (detail::vmap_batch(args, std::get<I>(in_.axes), I, batch, from), ...);
    if (batch <= 0) detail::vmap_fail("the mapped axes have no examples");
    auto example = [&](Eigen::Index j) {
      return f_(detail::vmap_arg(args, std::get<I>(in_.axes), I, j)...);
    };
    const auto first = example(0);
    auto out = tree_map([&](const auto& r) { return detail::vmap_alloc(r, batch, out_); }, first);
    for (Eigen::Index j = 0; j < batch; ++j) {
      if (j == 0)
        tree_for_each([&](auto& o, const auto& r) { detail::vmap_put(o, r, j, out_); }, out, first);
      else {
        const auto r = example(j);
        tree_for_each([&](auto& o, const auto& rj) { detail::vmap_put(o, rj, j, out_); }, out, r);
      }
    }
    return out;
  }

  F f_;
  in_axes_t<Axes...> in_;
  int out_;
};

/// jax.vmap(f, in_axes, out_axes): f mapped over the examples of its arguments.
template <class F, class... Axes>
vmapped<std::decay_t<F>, Axes...> vmap(F&& f, in_axes_t<Axes...> in, int out_axes = -1) {
  return {std::forward<F>(f), std::move(in), out_axes};
}

/// vmap with every argument mapped over its last axis (columns of a matrix, elements of a vector).
template <class F>
auto vmap(F&& f, int out_axes = -1) {
  return [g = std::forward<F>(f), out_axes](const auto&... args) {
    return vmap(g, in_axes((static_cast<void>(sizeof(args)), -1)...), out_axes)(args...);
  };
}

}  // namespace grove
