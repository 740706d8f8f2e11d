// grove/nn/activations.hpp: swish (the default), relu, tanh, gelu, sigmoid, softplus, elu,
// leaky_relu and identity, each with its derivative. Each is also a layer of a model
// (grove/nn/layers.hpp): `nn::sequential(nn::dense(784, 256), nn::swish, ...)`.
//
// An activation is a small function object:
//
//   grove::nn::swish(x)              x * sigmoid(x), for a scalar or any Eigen matrix / array
//   grove::nn::swish.derivative(x)   d swish / dx, elementwise
//   grove::nn::swish.vjp(z, g)       g * swish'(z): the vector-Jacobian product for backprop
//
// and the network functions take one as their last argument (`predict(params, x, nn::relu)`).
// Each also has the segment kernels the fused forward and backward passes use: `forward(z, a, n)`
// writes a = f(z); `forward_train(zd, a, n)` writes a = f(z) and overwrites z with f'(z) in the
// same pass, so the backward pass is a plain multiplication and computes no transcendental.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <concepts>
#include <iterator>
#include <string>
#include <string_view>
#include <type_traits>

#include "grove/error.hpp"

namespace grove::nn {

namespace detail {

// Applies op(z_chunk, a_chunk, s_chunk) to [0, n) in chunks that stay in L1, with a scratch array
// of the chunk's length.
template <class T, class Op>
void chunked(Eigen::Index n, Op&& op) {
  constexpr Eigen::Index chunk = 512;
  for (Eigen::Index i = 0; i < n; i += chunk) op(i, std::min(chunk, n - i));
}

template <class T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

template <class T>
T logistic(T x) {
  return Eigen::internal::scalar_logistic_op<T>()(x);
}

// An activation's elementwise forms for scalars and Eigen objects, from its array kernels.
template <class Derived>
struct activation_base {
  /// f(x) for a float or double.
  template <std::floating_point T>
  T operator()(T x) const {
    Eigen::Array<T, 1, 1> a;
    a(0) = x;
    const Eigen::Array<T, 1, 1> r = Derived::apply(a);
    return r(0);
  }
  /// f(x) elementwise, evaluated: a matrix for a matrix, an array for an array.
  template <class D>
  typename D::PlainObject operator()(const Eigen::DenseBase<D>& x) const {
    typename D::PlainObject out(x.rows(), x.cols());
    out.array() = Derived::apply(x.derived().array());
    return out;
  }
  /// f'(x) for a float or double.
  template <std::floating_point T>
  T derivative(T x) const {
    Eigen::Array<T, 1, 1> a;
    a(0) = x;
    const Eigen::Array<T, 1, 1> r = Derived::derivative_of(a);
    return r(0);
  }
  /// f'(x) elementwise, evaluated.
  template <class D>
  typename D::PlainObject derivative(const Eigen::DenseBase<D>& x) const {
    typename D::PlainObject out(x.rows(), x.cols());
    out.array() = Derived::derivative_of(x.derived().array());
    return out;
  }
  /// The vector-Jacobian product of f at z: g * f'(z), elementwise (z and g of the same shape).
  template <class DZ, class DG>
  typename DZ::PlainObject vjp(const Eigen::DenseBase<DZ>& z, const Eigen::DenseBase<DG>& g) const {
    eigen_assert(z.rows() == g.rows() && z.cols() == g.cols() &&
                 "grove::nn: vjp needs z and g of the same shape");
    typename DZ::PlainObject out(z.rows(), z.cols());
    out.array() = g.derived().array() * Derived::derivative_of(z.derived().array());
    return out;
  }

  /// a[0, n) = f(z[0, n)). z and a may be the same memory.
  template <class T>
  static void forward(const T* z, T* a, Eigen::Index n) {
    chunked<T>(n, [&](Eigen::Index i, Eigen::Index len) {
      ArrayMap<T>(a + i, len) = Derived::apply(ConstArrayMap<T>(z + i, len));
    });
  }
  /// a[0, n) = f(z[0, n)) and zd[0, n) = f'(z[0, n)), with z read from zd.
  template <class T>
  static void forward_train(T* zd, T* a, Eigen::Index n) {
    chunked<T>(n, [&](Eigen::Index i, Eigen::Index len) {
      ArrayMap<T> z(zd + i, len), out(a + i, len);
      out = Derived::apply(z);
      z = Derived::derivative_of(z);
    });
  }
};

}  // namespace detail

/// swish(x) = x * sigmoid(x) (jax.nn.swish, also called silu). grove's default activation.
struct Swish : detail::activation_base<Swish> {
  static constexpr const char* name = "swish";
  template <class A>
  static auto apply(const A& z) {
    return z * z.logistic();
  }
  template <class A>
  static auto derivative_of(const A& z) {
    using T = typename A::Scalar;
    return z.logistic() * (T(1) + z * (T(1) - z.logistic()));
  }
  template <class T>
  static void forward_train(T* zd, T* a, Eigen::Index n) {
    // One sigmoid per element: s = sigmoid(z); a = z s; f'(z) = s (1 + z (1 - s)) = s + a (1 - s).
    constexpr Eigen::Index chunk = 512;
    alignas(64) T s_buffer[chunk];
    detail::chunked<T>(n, [&](Eigen::Index i, Eigen::Index len) {
      detail::ArrayMap<T> z(zd + i, len), out(a + i, len), s(s_buffer, len);
      s = z.logistic();
      out = z * s;
      z = s + out * (T(1) - s);
    });
  }
};

/// relu(x) = max(x, 0) (jax.nn.relu). Its derivative at 0 is 0, as JAX's.
struct Relu : detail::activation_base<Relu> {
  static constexpr const char* name = "relu";
  template <class A>
  static auto apply(const A& z) {
    using T = typename A::Scalar;
    return z.max(T(0));
  }
  template <class A>
  static auto derivative_of(const A& z) {
    using T = typename A::Scalar;
    return (z > T(0)).template cast<T>();
  }
};

/// tanh(x) (jax.nn.tanh). f'(x) = 1 - tanh(x)^2, computed from the forward pass's value.
struct Tanh : detail::activation_base<Tanh> {
  static constexpr const char* name = "tanh";
  template <class A>
  static auto apply(const A& z) {
    return z.tanh();
  }
  template <class A>
  static auto derivative_of(const A& z) {
    using T = typename A::Scalar;
    return T(1) - z.tanh().square();
  }
  template <class T>
  static void forward_train(T* zd, T* a, Eigen::Index n) {
    detail::chunked<T>(n, [&](Eigen::Index i, Eigen::Index len) {
      detail::ArrayMap<T> z(zd + i, len), out(a + i, len);
      out = z.tanh();
      z = T(1) - out.square();
    });
  }
};

namespace detail {
// gelu's tanh approximation as array expressions (the kernel of Gelu with approximate = true).
struct gelu_tanh : activation_base<gelu_tanh> {
  static constexpr double k = 0.79788456080286535587989211986876;  // sqrt(2 / pi)
  template <class A>
  static auto apply(const A& z) {
    using T = typename A::Scalar;
    return T(0.5) * z * (T(1) + (T(k) * (z + T(0.044715) * z.cube())).tanh());
  }
  template <class A>
  static auto derivative_of(const A& z) {
    using T = typename A::Scalar;
    const auto t = (T(k) * (z + T(0.044715) * z.cube())).tanh();
    return T(0.5) * (T(1) + t) +
           T(0.5) * z * (T(1) - t.square()) * T(k) * (T(1) + T(3 * 0.044715) * z.square());
  }
  template <class T>
  static void forward_train(T* zd, T* a, Eigen::Index n) {
    constexpr Eigen::Index chunk = 512;
    alignas(64) T t_buffer[chunk];
    chunked<T>(n, [&](Eigen::Index i, Eigen::Index len) {
      ArrayMap<T> z(zd + i, len), out(a + i, len), t(t_buffer, len);
      t = (T(k) * (z + T(0.044715) * z.cube())).tanh();
      out = T(0.5) * z * (T(1) + t);
      z = T(0.5) * (T(1) + t) +
          T(0.5) * z * (T(1) - t.square()) * T(k) * (T(1) + T(3 * 0.044715) * z.square());
    });
  }
};
}  // namespace detail

/// gelu (jax.nn.gelu). With approximate = true (JAX's default):
///   0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
/// with approximate = false the exact x Phi(x) = 0.5 x (1 + erf(x / sqrt(2))), elementwise with
/// std::erf (slower):  grove::nn::Gelu{.approximate = false}.
struct Gelu {
  static constexpr const char* name = "gelu";
  bool approximate = true;

  template <std::floating_point T>
  T operator()(T x) const {
    return approximate ? detail::gelu_tanh{}(x) : exact(x);
  }
  template <class D>
  typename D::PlainObject operator()(const Eigen::DenseBase<D>& x) const {
    if (approximate) return detail::gelu_tanh{}(x);
    return x.derived().unaryExpr([](auto v) { return exact(v); });
  }
  template <std::floating_point T>
  T derivative(T x) const {
    return approximate ? detail::gelu_tanh{}.derivative(x) : exact_derivative(x);
  }
  template <class D>
  typename D::PlainObject derivative(const Eigen::DenseBase<D>& x) const {
    if (approximate) return detail::gelu_tanh{}.derivative(x);
    return x.derived().unaryExpr([](auto v) { return exact_derivative(v); });
  }
  template <class DZ, class DG>
  typename DZ::PlainObject vjp(const Eigen::DenseBase<DZ>& z, const Eigen::DenseBase<DG>& g) const {
    if (approximate) return detail::gelu_tanh{}.vjp(z, g);
    typename DZ::PlainObject out(z.rows(), z.cols());
    out.array() = g.derived().array() * derivative(z.derived()).array();
    return out;
  }
  template <class T>
  void forward(const T* z, T* a, Eigen::Index n) const {
    if (approximate) {
      detail::gelu_tanh::forward(z, a, n);
    } else {
      for (Eigen::Index i = 0; i < n; ++i) a[i] = exact(z[i]);
    }
  }
  template <class T>
  void forward_train(T* zd, T* a, Eigen::Index n) const {
    if (approximate) {
      detail::gelu_tanh::forward_train(zd, a, n);
    } else {
      for (Eigen::Index i = 0; i < n; ++i) {
        const T z = zd[i];
        a[i] = exact(z);
        zd[i] = exact_derivative(z);
      }
    }
  }

  template <class T>
  static T exact(T x) {
    return T(0.5) * x * (T(1) + std::erf(x / T(1.4142135623730950488016887242097)));
  }
  template <class T>
  static T exact_derivative(T x) {  // Phi(x) + x phi(x)
    return T(0.5) * (T(1) + std::erf(x / T(1.4142135623730950488016887242097))) +
           x * T(0.39894228040143267793994605993438) * std::exp(T(-0.5) * x * x);
  }
};

/// sigmoid(x) = 1 / (1 + exp(-x)) (jax.nn.sigmoid). f'(x) = s (1 - s).
struct Sigmoid : detail::activation_base<Sigmoid> {
  static constexpr const char* name = "sigmoid";
  template <class A>
  static auto apply(const A& z) {
    return z.logistic();
  }
  template <class A>
  static auto derivative_of(const A& z) {
    using T = typename A::Scalar;
    return z.logistic() * (T(1) - z.logistic());
  }
  template <class T>
  static void forward_train(T* zd, T* a, Eigen::Index n) {
    detail::chunked<T>(n, [&](Eigen::Index i, Eigen::Index len) {
      detail::ArrayMap<T> z(zd + i, len), out(a + i, len);
      out = z.logistic();
      z = out * (T(1) - out);
    });
  }
};

/// softplus(x) = log(1 + exp(x)) (jax.nn.softplus), as max(x, 0) + log1p(exp(-|x|)) so that it is
/// finite for large |x|. f'(x) = sigmoid(x).
struct Softplus : detail::activation_base<Softplus> {
  static constexpr const char* name = "softplus";
  template <class A>
  static auto apply(const A& z) {
    using T = typename A::Scalar;
    return z.max(T(0)) + (-z.abs()).exp().log1p();
  }
  template <class A>
  static auto derivative_of(const A& z) {
    return z.logistic();
  }
};

/// elu(x) = x for x > 0, exp(x) - 1 otherwise (jax.nn.elu with alpha = 1). f'(x) = 1 for x > 0,
/// exp(x) otherwise.
struct Elu : detail::activation_base<Elu> {
  static constexpr const char* name = "elu";
  template <class A>
  static auto apply(const A& z) {
    using T = typename A::Scalar;
    return (z > T(0)).select(z, z.expm1());
  }
  template <class A>
  static auto derivative_of(const A& z) {
    using T = typename A::Scalar;
    return (z > T(0)).select(T(1), z.exp());
  }
};

/// leaky_relu(x) = x for x >= 0, 0.01 x otherwise (jax.nn.leaky_relu with its default
/// negative_slope = 0.01). f'(x) = 1 for x >= 0, 0.01 otherwise.
struct LeakyRelu : detail::activation_base<LeakyRelu> {
  static constexpr const char* name = "leaky_relu";
  static constexpr double negative_slope = 0.01;
  template <class A>
  static auto apply(const A& z) {
    using T = typename A::Scalar;
    return (z >= T(0)).select(z, T(negative_slope) * z);
  }
  template <class A>
  static auto derivative_of(const A& z) {
    using T = typename A::Scalar;
    return (z >= T(0)).template cast<T>() * T(1 - negative_slope) + T(negative_slope);
  }
};

/// identity(x) = x (jax.nn.identity): a layer that changes nothing, for models assembled from
/// options (an activation chosen by name, "none" among them).
struct Identity : detail::activation_base<Identity> {
  static constexpr const char* name = "identity";
  template <class A>
  static auto apply(const A& z) {
    return z;
  }
  template <class A>
  static auto derivative_of(const A& z) {
    using T = typename A::Scalar;
    return z * T(0) + T(1);
  }
};

inline constexpr Swish swish{};
inline constexpr Relu relu{};
inline constexpr Tanh tanh{};
inline constexpr Gelu gelu{};
inline constexpr Sigmoid sigmoid{};
inline constexpr Softplus softplus{};
inline constexpr Elu elu{};
inline constexpr LeakyRelu leaky_relu{};
inline constexpr Identity identity{};

/// An activation chosen at run time by its name (a program's option): one of swish, relu, tanh,
/// gelu (the tanh approximation), gelu_exact, sigmoid, softplus, elu, leaky_relu, identity. It is
/// an activation and a layer like the one it names, and costs one switch per pass over a slice.
class AnyActivation {
 public:
  static constexpr const char* name = "activation";
  /// The names activation_named accepts, in this order.
  static constexpr const char* names[] = {"swish",   "relu",     "tanh", "gelu",       "gelu_exact",
                                          "sigmoid", "softplus", "elu",  "leaky_relu", "identity"};

  AnyActivation() = default;
  /// The name this activation was chosen by.
  const char* chosen() const { return names[kind_]; }

  template <class T>
  void forward(const T* z, T* a, Eigen::Index n) const {
    visit([&](const auto& act) { act.forward(z, a, n); });
  }
  template <class T>
  void forward_train(T* zd, T* a, Eigen::Index n) const {
    visit([&](const auto& act) { act.forward_train(zd, a, n); });
  }
  /// f(x) elementwise, evaluated.
  template <class D>
  typename D::PlainObject operator()(const Eigen::DenseBase<D>& x) const {
    typename D::PlainObject out(x.rows(), x.cols());
    typename D::PlainObject z = x;
    forward(z.data(), out.data(), z.size());
    return out;
  }

  friend AnyActivation activation_named(const char* name);

 private:
  template <class F>
  void visit(F&& f) const {
    switch (kind_) {
      case 0:
        return f(Swish{});
      case 1:
        return f(Relu{});
      case 2:
        return f(Tanh{});
      case 3:
        return f(Gelu{});
      case 4:
        return f(Gelu{.approximate = false});
      case 5:
        return f(Sigmoid{});
      case 6:
        return f(Softplus{});
      case 7:
        return f(Elu{});
      case 8:
        return f(LeakyRelu{});
      default:
        return f(Identity{});
    }
  }
  int kind_ = 0;
};

/// The activation called `name` (see AnyActivation); throws grove::argument_error naming the
/// choices otherwise.
inline AnyActivation activation_named(const char* name) {
  AnyActivation a;
  for (int k = 0; k < static_cast<int>(std::size(AnyActivation::names)); ++k)
    if (std::string_view(name) == AnyActivation::names[k]) {
      a.kind_ = k;
      return a;
    }
  std::string choices;
  for (const char* n : AnyActivation::names)
    choices += std::string(choices.empty() ? "" : ", ") + n;
  throw argument_error("grove::nn::activation_named: unknown activation '" +
                       std::string(name).substr(0, 64) + "' (choose one of " + choices + ")");
}

/// What the network functions accept as an activation: one of the above, or a user type with the
/// same members (apply / derivative_of array expressions, forward / forward_train kernels, name).
template <class A>
concept activation = requires(const A& act, float* p, const float* cp, Eigen::Index n) {
  { A::name } -> std::convertible_to<const char*>;
  act.forward(cp, p, n);
  act.forward_train(p, p, n);
};

}  // namespace grove::nn
