// grove/tree.hpp: pytrees. Nested C++ values (tuples, vectors, maps, optionals, registered
// structs) treated as trees whose leaves are everything else, with jax.tree_util's operations.
// Needs only the standard library; grove/tree/eigen.hpp adds shapes and ravel for Eigen leaves.
#pragma once

#include "grove/tree/error.hpp"
#include "grove/tree/key_path.hpp"
#include "grove/tree/node_traits.hpp"
#include "grove/tree/ops.hpp"
#include "grove/tree/print.hpp"
#include "grove/tree/treedef.hpp"
