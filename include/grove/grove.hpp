// grove/grove.hpp: the core layers. Optional layers with extra dependencies (MPI, zlib, JSON)
// are included separately.
#pragma once

#include "grove/tree.hpp"
#include "grove/tree/eigen.hpp"
