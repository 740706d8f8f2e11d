// grove/tree/tensor.hpp: Eigen's N-D tensors as leaves, in one include: Eigen's tensor module
// (<unsupported/Eigen/CXX11/Tensor>, which grove's other headers never include: it is heavy, and
// only users who hold tensors need it) and grove/tree/eigen.hpp, whose shape, size and ravel
// take Eigen::Tensor, Eigen::TensorFixedSize and Eigen::TensorMap leaves. Including the two
// yourself is the same.
#pragma once

#include <unsupported/Eigen/CXX11/Tensor>

#include "grove/tree/eigen.hpp"
