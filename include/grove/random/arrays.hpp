// grove/random/arrays.hpp: the Eigen types grove::random returns and takes sizes in.
#pragma once

#include <Eigen/Core>

namespace grove::random {

/// Sizes and indices, as Eigen counts them.
using Index = Eigen::Index;

/// Result types: a 1-D result is a column vector, a 2-D result a column-major matrix whose element
/// (i, j) is JAX's result[i, j].
template <class T>
using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;

}  // namespace grove::random
