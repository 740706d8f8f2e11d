// grove/nn/check_grads.hpp: jax.test_util.check_grads for a model: the VJPs of a layer one writes
// against central finite differences of the loss.
//
//   for (const auto& c : nn::check_grads(model, params, X, Y, nn::mse))   // double parameters
//     std::printf("%s %g\n", c.path.c_str(), c.relative_error);
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "grove/nn/model.hpp"
#include "grove/random/key.hpp"
#include "grove/tree.hpp"

namespace grove::nn {

/// What check_grads reports for one leaf of the parameters (or for the input, path "input"):
/// the largest |finite difference - VJP| over the leaf's elements, divided by the largest
/// magnitude of either (so 0 is perfect and 1e-6 is agreement to six digits of the leaf's scale).
struct grad_check {
  std::string path;
  double relative_error = 0;
};

/// jax.test_util.check_grads for a model: central finite differences of the mean loss, in the
/// parameters' scalar type (call it with double parameters and inputs), against the VJPs, for
/// every leaf of the parameters and for the input. Returns one grad_check per leaf, in leaf
/// order, then one for the input (path "input"); each is the worst relative error over the
/// leaf's elements (see grad_check). key (may be null) fixes the dropout masks. step: the
/// finite-difference step relative to max(1, |value|).
template <model M, class P, class DX, class DY, loss_function Loss>
std::vector<grad_check> check_grads(const M& m, const P& params, const Eigen::MatrixBase<DX>& X,
                                    const Eigen::DenseBase<DY>& Y, const Loss& loss_fn,
                                    const random::Key* key = nullptr, double step = 1e-5) {
  using T = typename DX::Scalar;
  Workspace<T> ws;
  const auto analytic = value_and_grad_with_input(m, params, X, Y, loss_fn, key);
  P probe = params;
  Matrix<T> x = X;
  auto f = [&] { return static_cast<double>(loss(m, probe, x, Y, loss_fn, ws, key)); };
  auto compare = [&](auto& values, const auto& grad) {
    double worst = 0, scale = 0;
    auto* v = values.data();
    const auto* g = grad.data();
    for (Index i = 0; i < static_cast<Index>(values.size()); ++i) {
      const T saved = v[i];
      const T h = static_cast<T>(step * std::max(1.0, std::abs(static_cast<double>(saved))));
      v[i] = saved + h;
      const double up = f();
      v[i] = saved - h;
      const double down = f();
      v[i] = saved;
      const double fd = (up - down) / (2 * static_cast<double>(h));
      worst = std::max(worst, std::abs(fd - static_cast<double>(g[i])));
      scale = std::max({scale, std::abs(fd), std::abs(static_cast<double>(g[i]))});
    }
    return scale > 0 ? worst / scale : worst;
  };
  std::vector<grad_check> out;
  for (const auto& [path, leaf] : tree_leaves_with_path(params)) {
    (void)leaf;
    out.push_back({keystr(path), 0});
  }
  std::size_t i = 0;
  tree_for_each(
      [&](auto& p, const auto& g) {
        if constexpr (requires { p.data(); }) {
          out[i].relative_error = compare(p, g);
        } else {
          // A scalar leaf: perturb it through a one-element view.
          struct scalar_view {
            T* at;
            T* data() { return at; }
            Index size() const { return 1; }
          } view{&p};
          const Eigen::Matrix<T, 1, 1> grad_one(static_cast<T>(g));
          out[i].relative_error = compare(view, grad_one);
        }
        ++i;
      },
      probe, analytic.grads);
  out.push_back({"input", compare(x, analytic.input_grad)});
  return out;
}

}  // namespace grove::nn
