// grove/grove.hpp: the core layers (pytrees with Eigen support, random numbers). The MLP toolkit
// (grove/nn.hpp), data-parallel training (grove/parallel.hpp, grove/mpi.hpp) and the io headers
// (grove/io/*.hpp) are included separately, so that a program pays only for what it uses.
#pragma once

#include "grove/random.hpp"
#include "grove/tree.hpp"
#include "grove/tree/eigen.hpp"
