// grove/nn/value_and_grad_result.hpp: what nn::value_and_grad returns, for a composable model
// (grove/nn/model.hpp) and for the walk-through's std::vector<Dense> (grove/nn/backprop.hpp)
// alike: one result type, as jax.value_and_grad has one.
#pragma once

#include <Eigen/Core>

namespace grove::nn {

/// What value_and_grad returns; `auto [loss, grads] = value_and_grad(...)` works. grads has the
/// parameters' exact type and structure.
template <class T, class P>
struct value_and_grad_result {
  T loss;
  P grads;
};

/// What value_and_grad_with_input returns: also the gradient with respect to the input batch.
template <class T, class P>
struct value_and_grad_with_input_result {
  T loss;
  P grads;
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> input_grad;
};

}  // namespace grove::nn
